"""`bench report` time: cold (no bootstrap cache, every paired comparison and interval computed) against
warm (the cache beside the results, as a clean clone of the repository has it: results/comparisons.jsonl).

    python benchmarks/report_time.py [--results-dir results] [--skip-cold]

Each render is a fresh `bench report` process on a copy of the results directory, writing into a
scratch reports directory, so the checkout is never touched. Cold: the copy without comparisons.jsonl;
warm: the copy with the cache the cold render (or the checkout) left. Prints both wall times, the
number of cached results, their ratio, and whether the warm render wrote the same bytes as the cold
one (it must). On a shared or loaded machine the figures move; run it twice.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = "comparisons.jsonl"


def render(results: Path, out: Path) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "app.cli", "report", "--results-dir", str(results),
                           "--out", str(out)], cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"bench report failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return wall


def snapshot(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.suffix not in (".png", ".pdf")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", type=Path, default=REPO / "results")
    parser.add_argument("--skip-cold", action="store_true",
                        help="time the warm render only (a cold one takes minutes on today's results)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results"
        shutil.copytree(args.results_dir, results, ignore=shutil.ignore_patterns("attack_logs"))
        cold = None
        if not args.skip_cold:
            (results / CACHE).unlink(missing_ok=True)
            cold = render(results, Path(tmp) / "cold")
        warm = render(results, Path(tmp) / "warm")
        entries = sum(1 for _ in (results / CACHE).open()) - 1 if (results / CACHE).exists() else 0
        print(f"results: {args.results_dir} ({entries} cached bootstrap results after the renders)")
        if cold is not None:
            same = snapshot(Path(tmp) / "cold") == snapshot(Path(tmp) / "warm")
            print(f"cold render (no cache):   {cold:8.1f} s")
        print(f"warm render (cache kept): {warm:8.1f} s")
        if cold is not None:
            print(f"cold / warm: {cold / warm:.1f}x; warm output identical to cold: {same}")


if __name__ == "__main__":
    main()

"""bench publish --model M [--model M]... [--suite S]... [--from DIR] [--to DIR]: copy chosen result cells
from a development results directory into the published leaderboard (the checkout's results/).

Development runs write to $BENCH_HOME/results (or $BENCH_RESULTS_DIR), never into the checkout; this
step is how cells reach the committed results/. It copies the cells of the chosen models (and suites)
as they are, merges their plug-in metadata (plugins.json), and rewrites the destination's
leaderboard. `bench report --results-dir results` then regenerates reports/generated/.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.errors import BenchError


def add_arguments(parser):
    parser.add_argument("--model", action="append", dest="models", required=True, metavar="M",
                        help="repeatable; a model name as it appears in the rows")
    parser.add_argument("--suite", action="append", dest="suites", metavar="S", help="repeatable; default: all")
    parser.add_argument("--from", dest="source", type=Path,
                        help="results to copy from (default: $BENCH_RESULTS_DIR, else $BENCH_HOME/results)")
    parser.add_argument("--to", dest="dest", type=Path,
                        help="published results directory (default: this checkout's results/)")
    parser.add_argument("--dry-run", action="store_true", help="list the cells; copy nothing")


def main(args) -> int:
    from bench.results import metadata
    from bench.paths import PUBLISHED_RESULTS, Paths
    from bench.results.store import ResultStore, model_dir

    source = (args.source or Paths.from_env().results).expanduser().resolve()
    dest = (args.dest or PUBLISHED_RESULTS).expanduser().resolve()
    if source == dest:
        raise BenchError(f"--from and --to are both {source}: nothing to publish.")
    if not (source / "cells").is_dir():
        raise BenchError(f"No result cells under {source / 'cells'}. Run `bench run` first, or pass --from DIR.")
    chosen = []
    for model in dict.fromkeys(args.models):
        cells = sorted((source / "cells" / model_dir(model)).glob("*/*/*.json"))
        cells = [c for c in cells if not args.suites or c.parent.parent.name in args.suites]
        if not cells:
            raise BenchError(f"No cells of model '{model}'{' in suites ' + ', '.join(args.suites) if args.suites else ''} "
                             f"under {source / 'cells'}.")
        chosen += cells
    for cell in chosen:  # corrupt input (a cell, or its evidence against the sha256 it records) is refused first
        ResultStore(source).check_evidence(cell, ResultStore.read(cell), decode=False)
    if not args.dry_run:  # a --to that is a file, read-only or full: refused before anything is copied
        from bench.results.store import check_writable

        check_writable(dest, "publish target", "--to")
    if args.dry_run:
        print("\n".join(str(c.relative_to(source)) for c in chosen))
        print(f"{len(chosen)} cell(s) would be copied to {dest}.")
        return 0
    for cell in chosen:
        # The cell's evidence sidecar (per-example data for CIs and paired tests) travels with it, first.
        side = ResultStore.evidence_path(cell)
        for src in ([side] if side.exists() else []) + [cell]:
            target = dest / src.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.tmp")
            shutil.copyfile(src, tmp)
            tmp.replace(target)
    # The metadata of what was copied: the models' entries and the suites' descriptions.
    src_meta = metadata.read(source)
    suites = {c.parent.parent.name for c in chosen}

    def merge(dst_meta: dict) -> None:  # under plugins.json's lock; entries are merged, never dropped
        for key, names in (("models", set(args.models)), ("suites", suites)):
            dst_meta.setdefault(key, {}).update({k: v for k, v in (src_meta.get(key) or {}).items() if k in names})
        for key in ("bench_version", "package_versions"):
            if src_meta.get(key):
                dst_meta.setdefault(key, src_meta[key])

    metadata.update(dest, merge)
    board = ResultStore(dest).write_leaderboard()
    print(f"Published {len(chosen)} cell(s) of {', '.join(args.models)} to {dest} (leaderboard {board}).")
    print(f"Regenerate the reports with: bench report --results-dir {dest}")
    return 0

"""bench data status|verify|fetch [DATASET]"""

from __future__ import annotations

from rich.table import Table

from app.commands import output_console
from bench.errors import BenchError


def add_arguments(parser):
    parser.add_argument("action", choices=["status", "verify", "fetch"])
    parser.add_argument("dataset", nargs="?", help="default: all datasets (see `bench data status`)")


def main(args) -> int:
    from bench.data.datasets import DATASETS, fetch, get_dataset, problems
    from bench.paths import Paths

    paths = Paths.from_env()
    console = output_console()  # piped: whole values, no '…'
    names = [get_dataset(args.dataset).name] if args.dataset else list(DATASETS)
    console.print(f"Data root: {paths.data} (set BENCH_DATA_DIR to change it)")
    if args.action == "fetch":
        for name in names:
            if not DATASETS[name].sources:
                continue
            console.print(f"fetching {name} …")
            bad = fetch(paths.data, name, paths.cache)
            console.print(f"  {name}: {'ok' if not bad else f'{len(bad)} problem(s)'}")
        args.action = "verify"
    deep = args.action == "verify"
    table = Table(title=f"Data ({'sha256 + line counts' if deep else 'presence + sizes'})")
    for col in ("dataset", "state", "files", "root", "problem"):
        table.add_column(col)
    failed = []
    for name in names:
        spec = DATASETS[name]
        bad = problems(paths.data, name, deep=deep)
        state = "ok" if not bad else ("absent (optional)" if spec.optional else "MISSING/CORRUPT")
        if bad and not spec.optional:
            failed.append((name, bad))
        table.add_row(name, state, str(len(spec.files)), spec.root, "; ".join(f"{p}: {w}" for p, w in bad[:2]))
    console.print(table)
    if failed and deep:
        name, bad = failed[0]
        raise BenchError(
            f"{sum(len(b) for _, b in failed)} file(s) missing or corrupt, first {paths.data / bad[0][0]} "
            f"({bad[0][1]}). Fix: `bench data fetch {name}`, or point BENCH_DATA_DIR at a complete copy.")
    return 0

"""bench data status|verify|fetch [DATASET]; bench data add DATASET FILE... [--repo]"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from app.commands import output_console
from bench.errors import BenchError


def add_arguments(parser):
    parser.add_argument("action", choices=["status", "verify", "fetch", "add"])
    parser.add_argument("dataset", nargs="?", help="default: all datasets (see `bench data status`)")
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help="with 'add': data files under BENCH_DATA_DIR whose bytes, lines and sha256 to record")
    parser.add_argument("--repo", action="store_true",
                        help="with 'add': record them in the shipped bench/data/data_files.tsv (a built-in dataset) "
                             "instead of the data_files.tsv beside your plug-in file")


def main(args) -> int:
    from bench.data.datasets import DATASETS, get_dataset
    from bench.paths import Paths

    paths = Paths.from_env()
    console = output_console()  # piped: whole values, no '…'
    if args.action == "add":
        return add(args, paths, console)
    if args.files:
        raise BenchError(f"`bench data {args.action}` takes one dataset at most. Fix: drop {args.files[0]}.")
    names = [get_dataset(args.dataset).name] if args.dataset else list(DATASETS)
    console.print(f"Data root: {paths.data} (set BENCH_DATA_DIR to change it)")
    if args.action == "fetch":
        fetch_all(names, paths, console)
        args.action = "verify"
    failed = show_table(names, paths, console, deep=args.action == "verify")
    if failed and args.action == "verify":
        raise BenchError(failure(failed, paths))
    return 0


def fetch_all(names, paths, console) -> None:
    from bench.data.datasets import DATASETS, fetch

    for name in names:
        if not DATASETS[name].sources:
            continue
        console.print(f"fetching {name} …")
        bad = fetch(paths.data, name, paths.cache)
        console.print(f"  {name}: {'ok' if not bad else f'{len(bad)} problem(s)'}")


def show_table(names, paths, console, deep: bool) -> list[tuple[str, list]]:
    """Print each dataset's state; the datasets that fail a check, each with its problems.

    A dataset without a download source whose files are all absent is reported for itself (its own fix) and
    fails only a check that names it: one user's local dataset does not fail `bench data verify` for everyone."""
    from bench.data.datasets import DATASETS, problems

    table = Table(title=f"Data ({'sha256 + line counts' if deep else 'presence + sizes'})")
    for col in ("dataset", "state", "files", "root", "problem"):
        table.add_column(col)
    failed = []
    for name in names:
        spec = DATASETS[name]
        bad = problems(paths.data, name, deep=deep)
        local_only = bad and not spec.sources and all(what == "missing" for _, what in bad)
        state = ("ok" if not bad else "absent (optional)" if spec.optional else
                 "absent (no download source)" if local_only else "MISSING/CORRUPT")
        if bad and not spec.optional and (not local_only or len(names) == 1):
            failed.append((name, bad))
        table.add_row(name, state, str(len(spec.files)), spec.root, "; ".join(f"{p}: {w}" for p, w in bad[:2]))
    console.print(table)
    return failed


def failure(failed, paths) -> str:
    """One line per failing dataset, each with a fix that works for it."""
    from bench.data.datasets import DATASETS, how_to_get

    lines = [f"{sum(len(b) for _, b in failed)} file(s) missing or corrupt."]
    for name, bad in failed:
        lines.append(f"  {name}: {paths.data / bad[0][0]} ({bad[0][1]}"
                     f"{f', and {len(bad) - 1} more' if len(bad) > 1 else ''}). Fix: {how_to_get(DATASETS[name])}")
    return "\n".join(lines)


def add(args, paths, console) -> int:
    """Record each file's bytes, lines and sha256 for dataset ``args.dataset`` in a data-files table."""
    from app.commands.plugins import plugins_table
    from bench.data.datasets import BUILTIN_DATASETS, SHIPPED_DATA_FILES, add_data_files, file_entry, get_dataset

    if not args.dataset or not args.files:
        raise BenchError("`bench data add` needs a dataset and its files. Fix: bench data add DATASET FILE...")
    spec = get_dataset(args.dataset)
    entries = [file_entry(paths.data, Path(f)) for f in args.files]
    for entry in entries:
        if not (entry.path == spec.root or entry.path.startswith(spec.root + "/")):
            raise BenchError(f"{entry.path} lies outside dataset '{spec.name}''s root `{spec.root}` under "
                             f"{paths.data}. Fix: move it there, or give the dataset's own files.")
    if spec.name in BUILTIN_DATASETS and not args.repo:
        raise BenchError(f"Dataset '{spec.name}' is built in: its reference is the shipped {SHIPPED_DATA_FILES}. "
                         f"Fix: add --repo (in a checkout, to change the reference on purpose).")
    table = SHIPPED_DATA_FILES if args.repo else plugins_table()
    add_data_files(table, entries)
    for entry in entries:
        console.print(f"{table}: {entry.path}\t{entry.bytes} bytes\t{entry.lines} lines\t{entry.sha256}")
    return 0

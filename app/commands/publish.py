"""bench publish --model M [--model M]... [--suite S]... [--from DIR] [--to DIR]: copy chosen result cells
from a development results directory into the published leaderboard (the checkout's results/).

Development runs write to $BENCH_HOME/results (or $BENCH_RESULTS_DIR), never into the checkout; this
step is how cells reach the committed results/. It copies the cells of the chosen models (and suites)
as they are, merges their plug-in metadata (plugins.json), and rewrites the destination's
leaderboard. `bench report --results-dir results` then regenerates reports/generated/.
"""

from __future__ import annotations

import warnings
from pathlib import Path

from bench.errors import BenchError, BenchWarning


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
    from bench.paths import PUBLISHED_RESULTS, Paths

    source = (args.source or Paths.from_env().results).expanduser().resolve()
    dest = (args.dest or PUBLISHED_RESULTS).expanduser().resolve()
    if source == dest:
        raise BenchError(f"--from and --to are both {source}: nothing to publish.")
    if not (source / "cells").is_dir():
        raise BenchError(f"No result cells under {source / 'cells'}. Run `bench run` first, or pass --from DIR.")
    chosen = choose_cells(source, args.models, args.suites, move=not args.dry_run)
    if not args.dry_run:  # a --to that is a file, read-only or full: refused before anything is copied
        from bench.results.store import check_writable

        check_writable(dest, "publish target", "--to")
    if args.dry_run:
        print("\n".join(str(c.relative_to(source)) for c, _ in chosen))
        print(f"{len(chosen)} cell(s) would be copied to {dest}.")
        return 0
    for _, files in chosen:
        for rel, blob in files:  # the evidence sidecar first, then the cell: the bytes that were checked
            _copy_bytes(blob, dest, rel)
    _merge_metadata(source, dest, args.models, {c.parent.parent.name for c, _ in chosen})
    from bench.results.store import ResultStore

    board = ResultStore(dest).write_leaderboard()
    print(f"Published {len(chosen)} cell(s) of {', '.join(args.models)} to {dest} (leaderboard {board}).")
    print(f"Regenerate the reports with: bench report --results-dir {dest}")
    return 0


def choose_cells(source: Path, models: list[str], suites: list[str] | None, move: bool = True) -> list[tuple[Path, list]]:
    """Per model, one cell per key (the one readers read, ``ResultStore.choose``), each with the bytes to copy:
    [(relative path, bytes)] of its evidence sidecar (``_files_of``) and of itself. A cell or sidecar that is a
    symbolic link is refused (exit 2: publishing copies regular files only); one whose values do not recompute
    from its evidence is never published (``move``: moved to quarantine/, saying both values); an unreadable
    cell or corrupt evidence is refused before anything is copied (exit 2)."""
    from bench.results.store import BadValue, ResultStore, model_dir

    store = ResultStore(source)
    chosen, bad = [], set()
    for model in dict.fromkeys(models):
        files = sorted((source / "cells" / model_dir(model)).glob("*/*/*.json"))
        for path in [c for c in files if not suites or c.parent.parent.name in suites]:
            _refuse_links(path)
            try:
                store.check_value(path, ResultStore.read(path))  # unreadable, bad evidence: exit 2
            except BadValue as exc:  # an edited number: never published
                bad.add(path)
                store.quarantine(exc) if move else warnings.warn(str(exc), BenchWarning, stacklevel=2)
        kept = [path for path, _ in store.cells_of(model)
                if path not in bad and (not suites or path.parent.parent.name in suites)]
        if not kept:
            raise BenchError(f"No cells of model '{model}'{' in suites ' + ', '.join(suites) if suites else ''} "
                             f"under {source / 'cells'}.")
        chosen += [(path, _files_of(path, source)) for path in kept]
    return chosen


def _files_of(cell: Path, source: Path) -> list[tuple[Path, bytes]]:
    """[(path relative to ``source``, bytes)] of a cell's evidence sidecar and the cell: a sidecar only when the
    cell does not record that it has none, and only the bytes whose sha256 the cell records."""
    import hashlib

    from bench.results.store import EVIDENCE_HASH, BadEvidence, ResultStore

    payload = ResultStore.read(cell)
    recorded, side = payload.get(EVIDENCE_HASH, ""), ResultStore.evidence_path(cell)
    files = []
    if recorded is not None and side.exists():
        blob = side.read_bytes()
        if recorded and hashlib.sha256(blob).hexdigest() != recorded:
            raise BadEvidence(cell, f"its evidence file {side.name} was altered while it was published")
        files.append((side.relative_to(source), blob))
    return files + [(cell.relative_to(source), cell.read_bytes())]


def _refuse_links(cell: Path) -> None:
    from bench.results.store import ResultStore

    for path in (cell, ResultStore.evidence_path(cell)):
        if path.is_symlink():
            raise BenchError(f"{path} is a symbolic link (to {path.readlink()}), not a result file; `bench publish` "
                             f"copies regular files only. Fix: replace it with the file itself (or re-run the "
                             f"`bench run` that made the cell), then publish again. Nothing was copied.")


def _copy_bytes(blob: bytes, dest: Path, rel: Path) -> None:
    from bench.io import atomic_write_bytes
    from bench.paths import inside

    atomic_write_bytes(inside(dest, *rel.parts, what="published file"), blob)


def _merge_metadata(source: Path, dest: Path, models: list[str], suites: set[str]) -> None:
    """The metadata of what was copied: the models' entries and the suites' descriptions."""
    from bench.results import metadata

    src_meta = metadata.read(source)

    def merge(dst_meta: dict) -> None:  # under plugins.json's lock; entries are merged, never dropped
        for key, names in (("models", set(models)), ("suites", suites)):
            dst_meta.setdefault(key, {}).update({k: v for k, v in (src_meta.get(key) or {}).items() if k in names})
        for key in ("bench_version", "package_versions"):
            if src_meta.get(key):
                dst_meta.setdefault(key, src_meta[key])

    metadata.update(dest, merge)

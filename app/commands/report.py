"""bench report [--suite S]... [--format md|tex|csv|html]... [--out DIR] [--results-dir DIR] [--check] [--card MODEL]...

Regenerates the paper tables and figures, results/leaderboard.csv and the per-suite leaderboards from
the result files. ``--check`` writes nothing and exits 1 when the reports or leaderboards on disk
differ from a regeneration (text files byte for byte; PNG/PDF by presence).
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

from bench.errors import BenchWarning
from bench.results.store import EvidenceWarning, ResultStore, SkippedCellWarning

FORMAT_NAMES = ("md", "tex", "csv", "html")


def add_arguments(parser):
    parser.add_argument("--suite", action="append", dest="suites", metavar="S",
                        help="repeatable; only tables and figures of these suites (default: all)")
    parser.add_argument("--format", action="append", dest="formats", choices=FORMAT_NAMES,
                        help="repeatable; table formats (default: all four). Figures are always PNG + PDF")
    parser.add_argument("--out", type=Path, help="reports directory (default: reports/ beside the results directory; "
                                                 "reports/generated/ for the checkout's results/)")
    parser.add_argument("--results-dir", type=Path,
                        help="results directory (default: $BENCH_RESULTS_DIR, else $BENCH_HOME/results); "
                             "`--results-dir results` reports the checkout's published leaderboard")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if the reports on disk differ from a regeneration")
    parser.add_argument("--card", action="append", dest="cards", metavar="MODEL",
                        help="repeatable; write only the robustness card of MODEL (card-MODEL.md and .html): every "
                             "headline with its 95%% CI and the paired difference from its base model and from SimCSE")


def main(args) -> int:
    from rich.console import Console

    import reports
    from bench.paths import Paths

    console = Console(soft_wrap=True)  # file paths stay whole, one per line
    paths = Paths.from_env().with_results(args.results_dir)
    out = (args.out or paths.reports).expanduser().resolve()
    if args.cards:
        from reports.card import card

        written = []
        for model in args.cards:
            written += reports.write(card(paths.results, model), out, record=True)
        console.print("Wrote " + ", ".join(str(p) for p in written))
        return 0
    if not args.check:  # it writes the reports and the leaderboards: refuse a read-only or full disk first
        from bench.results.store import check_writable

        check_writable(paths.results, "results directory", "BENCH_RESULTS_DIR")
        check_writable(out, "reports directory", "--out")
        from bench.models.registry import display_order
        from bench.results.metadata import refresh_order

        refresh_order(paths.results, display_order())  # rows in the registry's order
    artifacts = render(args, paths, out, console)
    complete = not args.suites and not args.formats
    if args.check:
        return check(artifacts, paths, out, complete, console)
    return write_all(artifacts, paths, out, complete, console)


def render(args, paths, out: Path, console):
    """Every report asked for, in memory; unreadable cells and bad evidence are warned of, not scored."""
    import reports

    with warnings.catch_warnings(record=True) as caught:  # unreadable cells: skipped, listed below
        warnings.simplefilter("always", BenchWarning)
        from bench.progress import progress

        with progress() as bar:  # a full render takes minutes: progress at least every 30 s
            artifacts = reports.generate(paths.results, suites=args.suites, formats=args.formats, reports_dir=out,
                                         progress=bar)
    told = [w for w in caught if issubclass(w.category, BenchWarning)
            and not issubclass(w.category, EvidenceWarning)]  # bad evidence: all cells checked below
    for message in dict.fromkeys(str(w.message) for w in told):
        print(f"bench: warning: {message}", file=sys.stderr)
    skipped = [str(w.message) for w in told if issubclass(w.category, SkippedCellWarning)]
    bad_evidence = ResultStore(paths.results).evidence_problems()
    for exc in bad_evidence:
        print(f"bench: warning: {exc}", file=sys.stderr)
    for w in caught:
        if not issubclass(w.category, BenchWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if skipped:
        console.print(f"[yellow]{len(set(skipped))} unreadable result cell(s) skipped[/yellow]: the reports below "
                      f"lack their rows (see the warnings). Re-run their `bench run` to recompute them.")
    if bad_evidence:
        console.print(f"[yellow]{len(bad_evidence)} result cell(s) with missing or corrupt evidence[/yellow]: their "
                      f"rows show no significance marks (see the warnings). Re-run their `bench run` to recompute them.")
    return artifacts


def check(artifacts, paths, out: Path, complete: bool, console) -> int:
    """`--check`: exit 1 and name every file that differs from the regeneration."""
    import reports

    problems = reports.compare(artifacts.reports, out, prune=complete)
    problems += reports.compare(artifacts.results, paths.results, prune=False)
    for p in problems:
        console.print(p)
    if problems:
        console.print(f"{len(problems)} file(s) differ from a regeneration of {paths.results}. "
                      f"Fix: run `bench report` (remove by hand a file named as not made by it) and commit "
                      f"{out.name}/ and the leaderboards.")
        return 1
    console.print(f"Reports in {out} match a regeneration from {paths.results}.")
    return 0


def write_all(artifacts, paths, out: Path, complete: bool, console) -> int:
    """Write the reports and leaderboards; a complete render first drops the reports it no longer makes."""
    import reports

    if complete:
        drop_stale(artifacts, out)
    boards = [name for name in artifacts.results if is_leaderboard(name)]
    written = (reports.write(artifacts.reports, out, record=True)
               + reports.write({k: v for k, v in artifacts.results.items() if k not in boards}, paths.results)
               + [rebuild_leaderboard(paths.results, name) for name in boards])
    from reports.specs import TABLES

    names = {spec.name for spec in TABLES}  # the paper tables only (not cards, the ledger or the index)
    tables = sorted({p.stem for p in written if p.stem in names})
    index = out / ("index.html" if "index.html" in artifacts.reports else "index.md")
    console.print(f"Wrote {len(written)} files: {len(artifacts.reports)} in {out} (index: {index}), "
                  f"{len(artifacts.results)} leaderboard CSV(s) in {paths.results}.")
    console.print("Tables: " + (", ".join(tables) if tables else "none (no matching results)"))
    return 0


def drop_stale(artifacts, out: Path) -> None:
    """Remove the reports a full regeneration no longer makes (only names its manifest lists)."""
    import reports

    stale = sorted(reports.owned_names(out) - set(artifacts.reports))
    for name in stale:
        (out / name).unlink(missing_ok=True)
    if reports.manifest(out) is not None:  # the removed names leave the manifest too
        from bench.io import atomic_write_text

        kept = sorted(reports.manifest(out) - set(stale))
        atomic_write_text(out / reports.MANIFEST, json.dumps({"written": kept}, indent=0) + "\n")


def is_leaderboard(name: str) -> bool:
    return name == "leaderboard.csv" or name.startswith("leaderboard-") and name.endswith(".csv")


def rebuild_leaderboard(results: Path, name: str) -> Path:
    """Rebuild a leaderboard from the cells on disk now, under the store's lock (not from the rows the report
    read at its start): a `bench run` or `bench publish` that finished during the report keeps its rows."""
    suite = name[len("leaderboard-"):-len(".csv")] if name != "leaderboard.csv" else None
    return ResultStore(results).write_leaderboard(name, suite=suite)

"""bench run --suite S --model M [--task T]...: evaluate one model on one suite."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bench.errors import BenchError


def add_arguments(parser):
    parser.add_argument("--suite", required=True, help="see `bench ls suites`")
    parser.add_argument("--model", required=True, help="see `bench ls models`")
    parser.add_argument("--task", action="append", dest="tasks", metavar="T", help="repeatable; default: all")
    from bench.plugins import PROFILE_HELP, PROFILES

    parser.add_argument("--profile", choices=PROFILES, default="smoke", help=PROFILE_HELP)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="auto|cpu|cuda|cuda:N|mps (auto: cuda, mps, cpu)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--limit", type=int, help="use only the first N examples of each task")
    parser.add_argument("--overwrite", choices=["never", "only-missing", "always"], default="only-missing",
                        help="never: keep any existing cell; only-missing (default): compute cells missing for "
                             "this configuration; always: recompute")
    from bench.plugins import add_option_flags
    from suites import all_suites

    add_option_flags(parser, all_suites())


def suite_options(args) -> dict:
    from bench.plugins import options_from_args
    from suites import all_suites

    return options_from_args(args, all_suites())


def open_encoder(spec, paths, device: str, batch_size: int, seed: int = 0, log=print):
    """The model's encoder, training it first if it is a registered method model with no checkpoint."""
    from bench.encoder import CheckpointMissing, Encoder

    try:
        return Encoder.from_spec(spec, paths.models, device=device, batch_size=batch_size)
    except CheckpointMissing:
        log(f"Model '{spec.name}' has no checkpoint yet: training it now "
            f"({spec.method} from {spec.base}, {spec.profile} profile).")
        from bench.train import train_registered

        train_registered(spec, paths, device=device, seed=seed)
        return Encoder.from_spec(spec, paths.models, device=device, batch_size=batch_size)


def results_table(outcomes, title: str) -> Table:
    """One line per (task, attack, split, aggregation, seed), one column per metric; paper values beside ours."""
    metrics, lines = [], {}
    for outcome in outcomes:
        for r in outcome.rows:
            if r["metric"] not in metrics:
                metrics.append(r["metric"])
            task = f"{r['task']} {r['attack']}" if r.get("attack") else r["task"]  # one line per attack recipe
            lines.setdefault((task, r["split"], r["aggregation"], r["seed"]), {})[r["metric"]] = r
    table = Table(title=title)
    for col, justify in (("task", "left"), ("split", "left"), ("aggregation", "left"), ("seed", "right"), *[(m, "right") for m in metrics],
                         ("n", "right")):
        table.add_column(col, justify=justify)

    def fmt(r):
        if r is None or r["value"] is None:
            return "–"
        paper = f" [dim](paper {r['paper_value']:.2f})[/dim]" if r.get("paper_value") is not None else ""
        return f"{r['value']:.2f}{paper}"

    for (task, split, agg, seed), cells in lines.items():
        n = next(iter(cells.values()))["n"]
        table.add_row(task, split, agg, str(seed), *[fmt(cells.get(m)) for m in metrics], "" if n is None else str(n))
    return table


def main(args) -> int:
    from bench.paths import Paths
    from bench.registry import get_model
    from suites import get_suite
    from suites.base import RunContext, run_suite

    console = Console()
    start = time.perf_counter()
    spec = get_model(args.model)
    suite = get_suite(args.suite)
    for name in args.tasks or []:
        suite.task(name)  # unknown task names fail before any model loads
    if args.limit is not None and args.limit <= 0:
        raise BenchError("--limit must be a positive number of examples")
    paths = Paths.from_env()
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        encoder = open_encoder(spec, paths, args.device, args.batch_size, args.seed, log=console.print)
        ctx = RunContext(paths=paths, seed=args.seed, device=encoder.device, batch_size=args.batch_size,
                         limit=args.limit, profile=args.profile, overwrite=args.overwrite,
                         options=suite_options(args), progress=progress, log=console.print)
        outcomes = run_suite(suite, spec, ctx, encoder, args.tasks)
    console.print(results_table(outcomes, f"{suite.name} · {spec.name} ({spec.pooler})"))
    cached = [o.task for o in outcomes if o.cached]
    fresh = [o for o in outcomes if not o.cached]
    if cached:
        console.print(f"Reused {len(cached)} finished cell(s) from the result store, recomputed nothing for them "
                      f"({', '.join(cached)}). Use --overwrite always to recompute.")
    for o in fresh:
        console.print(f"  {o.task}: {o.wall_s:.1f}s")
    console.print(f"Results: {paths.results} (cells under cells/{spec.name}/{suite.name}/, "
                  f"leaderboard {paths.results / 'leaderboard.csv'})")
    console.print(f"Wall time: {time.perf_counter() - start:.1f}s")
    return 0

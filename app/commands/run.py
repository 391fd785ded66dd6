"""bench run --suite S | --protocol P --model M [--task T]...: evaluate one model on one suite, or on a named
protocol (bench/protocols.toml): its suite, tasks, splits, averages, recipes and profile."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from rich.table import Table

from app.commands import add_unverified_data_flag, local_device, nonnegative_int, output_console, positive_int


DEFAULT_PROFILE = "smoke"


def add_arguments(parser):
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--suite", help="see `bench ls suites` (it runs its default protocol for the profile)")
    which.add_argument("--protocol", help="a named protocol (`bench ls protocols`): its suite, tasks, splits, "
                                         "averages, recipes and, unless --profile says otherwise, its profile")
    parser.add_argument("--model", required=True,
                        help="a name (`bench ls models`, $BENCH_HOME/models.toml), hf:ORG/NAME[@REVISION], or a "
                             "local model directory (bench checkpoint, sentence-transformers or Hugging Face)")
    parser.add_argument("--task", action="append", dest="tasks", metavar="T",
                        help="repeatable; default: the protocol's tasks (with --protocol: some of its tasks)")
    from bench.plugins import PROFILE_HELP, PROFILES

    parser.add_argument("--profile", choices=PROFILES, default=None,
                        help=f"{PROFILE_HELP} (default: the protocol's, else {DEFAULT_PROFILE})")
    parser.add_argument("--seed", type=nonnegative_int, default=0)
    parser.add_argument("--device", type=local_device, default="auto", help="auto|cpu|cuda|cuda:N|mps (auto: cuda, mps, cpu)")
    parser.add_argument("--batch-size", type=positive_int, default=64)
    parser.add_argument("--limit", type=positive_int, help="use only the first N examples of each task")
    from app.commands import add_dtype_argument

    add_dtype_argument(parser)
    parser.add_argument("--overwrite", choices=["never", "only-missing", "always"], default="only-missing",
                        help="never: keep any existing cell; only-missing (default): compute cells missing for "
                             "this configuration; always: recompute")
    add_unverified_data_flag(parser)
    from app.commands import add_cpu_paper_profile_flag

    add_cpu_paper_profile_flag(parser)
    parser.add_argument("--results-dir", type=Path,
                        help="results directory (default: $BENCH_RESULTS_DIR, else $BENCH_HOME/results); "
                             "`--results-dir results` writes the checkout's published leaderboard")
    from bench.plugins import add_option_flags
    from bench.models.registry import add_model_flags
    from bench.runner import all_suites

    add_model_flags(parser)
    add_option_flags(parser, all_suites())


def suite_options(args) -> dict:
    from bench.plugins import options_from_args
    from bench.runner import all_suites

    return options_from_args(args, all_suites())


def results_table(outcomes, title: str, caption: str = "") -> Table:
    """One line per (task, attack, split, aggregation, seed), one column per metric: value [95% CI], paper value;
    an average's line names the tasks it is over when it is not over all of its declared tasks."""
    from bench.results.averages import off_declared

    metrics, lines = [], {}
    for outcome in outcomes:
        for r in outcome.rows:
            if r["metric"] not in metrics:
                metrics.append(r["metric"])
            task = f"{r['task']} {r['attack']}" if r.get("attack") else r["task"]  # one line per attack recipe
            off = off_declared(r)
            task = f"{task} ({off})" if off else task
            lines.setdefault((task, r["split"], r["aggregation"], r["seed"]), {})[r["metric"]] = r
    table = Table(title=title, caption=caption or None)
    for col, justify in (("task", "left"), ("split", "left"), ("aggregation", "left"), ("seed", "right"), *[(m, "right") for m in metrics],
                         ("n", "right")):
        table.add_column(col, justify=justify)

    def fmt(r):
        if r is None or r["value"] is None:
            return "–"
        paper = f" [dim](paper {r['paper_value']:.2f})[/dim]" if r.get("paper_value") is not None else ""
        ci = (f" [dim][{r['ci_low']:.2f}, {r['ci_high']:.2f}][/dim]"
              if r.get("ci_low") is not None and r.get("ci_high") is not None else "")
        return f"{r['value']:.2f}{ci}{paper}"

    for (task, split, agg, seed), cells in lines.items():
        n = next(iter(cells.values()))["n"]
        table.add_row(task, split, agg, str(seed), *[fmt(cells.get(m)) for m in metrics], "" if n is None else str(n))
    return table


def chosen_protocol(args):
    """The protocol this run follows (--protocol's, else the suite's default for the profile), on the tasks
    --task names; sets ``args.profile`` to the profile the run uses."""
    from bench.protocols import protocol, run_profile
    from bench.runner import plan_protocol

    args.profile = run_profile(args.profile, protocol(args.protocol) if args.protocol else None, DEFAULT_PROFILE)
    return plan_protocol(suite=args.suite, protocol=args.protocol, tasks=args.tasks, profile=args.profile)


def main(args) -> int:
    from bench.paths import Paths
    from bench.models.registry import resolve_model
    from bench.results.store import ResultStore, model_dir
    from bench.runner import RunContext, check_data, get_suite, open_model, run_plan
    from bench.train import train_if_missing

    console = output_console()
    start = time.perf_counter()
    paths = Paths.from_env().with_results(args.results_dir)
    spec = resolve_model(args.model, paths, pooler=args.pooler, models_file=args.models_file)
    chosen = chosen_protocol(args)  # unknown suite, protocol or task names fail here
    suite = get_suite(chosen.suite)
    tasks = suite.plan_tasks(chosen)
    # Everything that can be refused is refused before the model loads or any work starts.
    ResultStore(paths.results).check_writable()
    from bench.models import hub
    from bench.models.registry import known_models

    stored = stored_outcomes(spec, chosen, args, paths, known_models(paths, args.models_file))
    if stored is not None:  # stored work needs nothing: no training, build or download, no data loaded
        return report_stored(console, spec, suite, stored, paths, start)
    hub.require_model(spec, paths.models, known_models(paths, args.models_file))  # offline: one message, now
    preflight(spec, suite, tasks, chosen, args, paths, console)
    ctx = RunContext(paths=paths, seed=args.seed, device=args.device, batch_size=args.batch_size,
                     limit=args.limit, profile=args.profile, overwrite=args.overwrite,
                     options=suite_options(args), log=console.print,
                     allow_unverified_data=args.allow_unverified_data)
    check_data([chosen], ctx, console.print)
    from bench.progress import progress as make_progress

    with make_progress() as progress:  # a live bar on a terminal, a plain line at least every 30 s in a log
        train_if_missing(spec, paths, device=args.device, seed=args.seed, dtype=args.dtype, log=console.print,
                         allow_unverified_data=args.allow_unverified_data)  # opening a model never trains it
        _, encoder = open_model(spec, paths, device=args.device, dtype=args.dtype, batch_size=args.batch_size)
        [(_, outcomes)] = run_plan(spec, [chosen], replace(ctx, progress=progress), encoder)
    console.print(results_table(outcomes, f"{suite.name} · {spec.name} ({spec.pooler}, {encoder.dtype})",
                                protocol_caption(chosen, args.profile)))
    print_reuse(console, outcomes)
    console.print(f"Results: {paths.results} (cells under cells/{model_dir(spec.name)}/{suite.name}/, "
                  f"leaderboard {paths.results / 'leaderboard.csv'})")
    console.print(f"Wall time: {time.perf_counter() - start:.1f}s")
    return 0


def preflight(spec, suite, tasks, chosen, args, paths, console) -> None:
    """The suite's own checks (e.g. attack resources not built: exit 2 in seconds, naming the build, before
    torch is imported), the device and dtype (fp16 off CUDA: exit 2), and what training will cost."""
    from bench.runner import RunContext

    suite.preflight(tasks, RunContext(paths=paths, limit=args.limit, profile=args.profile,
                                      options=suite_options(args), protocol=chosen))
    from bench.models.encoder import pick_device, resolve_dtype, slow_dtype_note

    device = pick_device(args.device)
    note = slow_dtype_note(device, resolve_dtype(device, args.dtype))
    if note:
        console.print(f"[yellow]{note}[/yellow]")
    from bench.train_cost import announce_training

    announce_training(spec, paths, device, args.allow_cpu_paper_profile, console.print)


def print_reuse(console, outcomes) -> None:
    """Which cells were reused from the store, and each fresh cell's wall time."""
    cached = [o.task for o in outcomes if o.cached]
    if cached:
        console.print(f"Reused {len(cached)} finished cell(s) from the result store, recomputed nothing for them "
                      f"({', '.join(cached)}). Use --overwrite always to recompute.")
    for o in outcomes:
        if not o.cached:
            console.print(f"  {o.task}: {o.wall_s:.1f}s")


def protocol_caption(chosen, profile: str) -> str:
    """Under the results: which protocol the run followed (none for a suite without one) and its profile."""
    from bench.protocols import PROTOCOLS

    if chosen.name not in PROTOCOLS:
        return f"profile {profile}"
    return f"protocol {chosen.name}: {chosen.title}; profile {profile}"


def stored_outcomes(spec, chosen, args, paths, known: dict):
    """The run's cells as the store holds them, when the model's weights are not at hand (it would be trained,
    built or downloaded first) and every cell is stored under one set of weights; else None."""
    from bench.models.encoder import dtype_name, pick_device, resolve_dtype
    from bench.runner import RunContext, stored_plan, weights_at_hand

    if weights_at_hand(spec, paths, known):
        return None  # the model's own weights decide which cells are its
    dtype = dtype_name(resolve_dtype(pick_device(args.device), args.dtype))  # part of a cell's configuration
    ctx = RunContext(paths=paths, seed=args.seed, device=args.device, batch_size=args.batch_size, limit=args.limit,
                     profile=args.profile, overwrite=args.overwrite, options=suite_options(args), dtype=dtype,
                     allow_unverified_data=args.allow_unverified_data)
    found = stored_plan(spec, [chosen], ctx)
    return None if found is None else found[0][1]


def report_stored(console, spec, suite, outcomes, paths, start: float) -> int:
    from bench.results.store import model_dir

    weights = {o.rows[0].get("weights_sha256", "") for o in outcomes if o.rows}
    console.print(results_table(outcomes, f"{suite.name} · {spec.name} (stored)"))
    console.print(f"All {len(outcomes)} cell(s) are stored (weights {', '.join(w[:12] for w in sorted(weights))}): "
                  f"reused from the result store. '{spec.name}' is not at hand here (it would be trained, built or "
                  "downloaded first), and nothing needed it; nothing was computed. Use --overwrite always to "
                  "recompute (after making the model).")
    console.print(f"Results: {paths.results} (cells under cells/{model_dir(spec.name)}/{suite.name}/)")
    console.print(f"Wall time: {time.perf_counter() - start:.1f}s")
    return 0

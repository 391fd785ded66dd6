"""bench grid --models A,B --suites S,T | --protocol P [--tasks ...] [--seeds N]: every (model, suite, task,
seed) cell on Ray (local by default, --address for a cluster), skipping cells already in the result store."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from app.commands import (add_unverified_data_flag, device_name, nonnegative_float, nonnegative_int, output_console,
                            positive_float, positive_int)
from bench.errors import BenchError

STATE_STYLE = {"pending": "dim", "running": "cyan", "done": "green", "stored": "blue", "failed": "red",
               "blocked": "yellow"}


DEFAULT_PROFILE = "smoke"


def add_arguments(parser):
    parser.add_argument("--models", required=True,
                        help="comma-separated: names (`bench ls models`, $BENCH_HOME/models.toml), hf:ORG/NAME, "
                             "or model directories")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--suites", help="comma-separated suite names (see `bench ls suites`); each runs its "
                                        "default protocol for the profile")
    which.add_argument("--protocol", help="a named protocol (`bench ls protocols`): its suite, tasks, splits, "
                                          "averages, recipes and, unless --profile says otherwise, its profile")
    parser.add_argument("--tasks", help="comma-separated: task (in every chosen suite that has it) or suite/task; "
                                        "default: each suite's protocol's tasks (with --protocol: some of its tasks)")
    parser.add_argument("--seeds", type=positive_int, default=1, metavar="N", help="run seeds 0..N-1 (default 1)")
    parser.add_argument("--address", help="join a running Ray cluster: auto or HOST:PORT (default: start a local "
                                          "Ray instance sized to this machine)")
    parser.add_argument("--num-cpus", type=positive_int, help="CPUs of the local Ray instance (default: all of this machine's)")
    parser.add_argument("--gpus-per-cell", type=nonnegative_float, default=0.0, metavar="G",
                        help="GPUs each cell reserves (fractions share a GPU; default 0 = CPU cells)")
    parser.add_argument("--cpus-per-cell", type=positive_float, default=1.0, help="CPUs each cell reserves (default 1)")
    parser.add_argument("--retries", type=nonnegative_int, default=1, metavar="R", help="retries of a failing cell (default 1)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the cells and their estimated cost from earlier runs; run nothing")
    from bench.plugins import PROFILE_HELP, PROFILES

    parser.add_argument("--profile", choices=PROFILES, default=None,
                        help=f"{PROFILE_HELP} (default: the protocol's, else {DEFAULT_PROFILE})")
    parser.add_argument("--device", type=device_name, default="auto",
                        help="device inside each cell; auto: cuda when --gpus-per-cell > 0, else cpu")
    parser.add_argument("--batch-size", type=positive_int, default=64)
    parser.add_argument("--limit", type=positive_int, help="use only the first N examples of each task")
    add_unverified_data_flag(parser)
    from app.commands import add_cpu_paper_profile_flag

    add_cpu_paper_profile_flag(parser)
    parser.add_argument("--results-dir", type=Path,
                        help="results directory (default: $BENCH_RESULTS_DIR, else $BENCH_HOME/results); "
                             "`--results-dir results` writes the checkout's published leaderboard")
    from app.commands import add_dtype_argument

    add_dtype_argument(parser)
    from bench.plugins import add_option_flags
    from bench.models.registry import add_model_flags
    from bench.runner import all_suites

    add_model_flags(parser)
    add_option_flags(parser, all_suites())


def build_plan(args):
    from app.commands.grid_runner import CellSettings, Plan, split_list
    from bench.paths import Paths
    from bench.models.registry import resolve_model

    paths = Paths.from_env().with_results(getattr(args, "results_dir", None))
    models = [resolve_model(name, paths, pooler=args.pooler, models_file=args.models_file)
              for name in dict.fromkeys(split_list(args.models))]
    if len({m.name for m in models}) < len(models):
        raise BenchError("--models names one model twice (two references resolve to the same name).")
    protocols = grid_protocols(args)
    if not models:
        raise BenchError("--models needs at least one name (comma-separated).")
    if args.seeds < 1:
        raise BenchError("--seeds must be at least 1 (seeds 0..N-1 run).")
    if args.retries < 0 or args.gpus_per_cell < 0 or args.cpus_per_cell <= 0:
        raise BenchError("--retries and --gpus-per-cell must be >= 0, --cpus-per-cell > 0.")
    if args.limit is not None and args.limit <= 0:
        raise BenchError("--limit must be a positive number of examples")
    device = args.device if args.device != "auto" else ("cuda" if args.gpus_per_cell > 0 else "cpu")
    if device.startswith("cuda") and args.gpus_per_cell <= 0:
        raise BenchError("--device cuda needs --gpus-per-cell > 0, so Ray gives each cell a GPU.")
    if args.dtype == "fp16" and not device.startswith("cuda"):
        raise BenchError(f"--dtype fp16 is a CUDA option (cells run on {device}); use --dtype bf16 or fp32.")
    from bench.plugins import options_from_args
    from bench.runner import all_suites

    given = options_from_args(args, all_suites())
    options = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in given.items()))
    settings = CellSettings(profile=args.profile, limit=args.limit, batch_size=args.batch_size, device=device,
                            options=options, allow_unverified_data=args.allow_unverified_data,
                            dtype=args.dtype)
    return Plan(models=models, protocols=protocols, seeds=range(args.seeds), settings=settings, paths=paths)


def grid_protocols(args) -> dict:
    """suite -> the protocol the grid runs for it (--protocol's, on the tasks --tasks names among its own; else
    each suite's default for the profile, on the tasks --tasks names); sets ``args.profile`` to the profile the
    grid uses."""
    from app.commands.grid_runner import select_tasks, split_list
    from bench.protocols import protocol, run_profile
    from bench.runner import plan_protocol

    named = protocol(args.protocol) if args.protocol else None
    args.profile = run_profile(args.profile, named, DEFAULT_PROFILE)
    suites = [named.suite] if named else split_list(args.suites)
    if not suites:
        raise BenchError("--suites needs at least one name (comma-separated), or name a --protocol.")
    tasks = select_tasks(suites, split_list(args.tasks), args.profile) if args.tasks else {s: None for s in suites}
    return {suite: plan_protocol(suite=suite, protocol=args.protocol, tasks=names, profile=args.profile)
            for suite, names in tasks.items()}


def cell_estimate(plan, timings, cell) -> tuple[float | None, str]:
    """A planned cell's estimated cost and how it is shown ("~": rough)."""
    from app.commands.grid_runner import estimate

    cost = 0.0 if cell.summary else estimate(timings, cell, plan.config(cell))  # summaries only aggregate
    shown = fmt_s(cost)
    if cost is None:  # a setting never run: cells of the same suite and task under other settings
        cost = estimate(timings, cell, plan.config(cell), rough=True)
        shown = f"~{fmt_s(cost)}" if cost is not None else shown
    return cost, shown


def fmt_s(seconds) -> str:
    if seconds is None:
        return "–"
    seconds = int(round(seconds))
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


TABLE_ROWS = 500  # a larger plan gets one row per model, suite and task (its seeds summed), and progress lines


@dataclass
class _PlanTotals:
    """What a dry run adds up: cells to run and their seconds, training seconds, items never timed, rough estimates."""
    to_run: int = 0
    cells_s: float = 0.0
    training_s: float = 0.0
    unknown: int = 0
    rough: int = 0
    elsewhere: int = 0  # cells to run that are stored under other settings


def dry_run(plan, console: Console) -> int:
    from app.commands.grid_runner import past_timings

    count = plan.cell_count()
    per_cell = count <= TABLE_ROWS
    table = Table(title=f"bench grid --dry-run: {count} cells (results: {plan.paths.results})"
                        + ("" if per_cell else "; one row per model, suite and task"))
    for col, justify in (("model", "left"), ("suite", "left"), ("task", "left"),
                         ("seed" if per_cell else "seeds", "right"), ("in store", "left"), ("est. cost", "right")):
        table.add_column(col, justify=justify)
    totals = _PlanTotals()
    _add_training_rows(table, plan, totals)
    _add_cell_rows(table, plan, past_timings(plan.paths.results), count, per_cell, totals)
    console.print(table)
    console.print(_plan_summary(totals))
    return 0


def _add_training_rows(table: Table, plan, totals: _PlanTotals) -> None:
    """A "train first" row for each trained model whose weights are not on this machine."""
    from app.commands.grid_runner import training_estimate

    for spec in plan.models:
        if spec.is_trained and not (spec.checkpoint_dir(plan.paths.models) / "config.json").exists():
            cost = training_estimate(spec, plan.paths.models)
            totals.training_s += cost or 0.0
            totals.unknown += cost is None
            table.add_row(spec.name, "[yellow]train first[/yellow]", f"{spec.method} from {spec.base}", "", "no",
                          fmt_s(cost))


def _add_cell_rows(table: Table, plan, timings, count: int, per_cell: bool, totals: _PlanTotals) -> None:
    """A row per cell, or, for a large plan, per model, suite and task (its seeds counted)."""
    import sys
    from contextlib import nullcontext

    from bench.progress import progress, track

    groups: dict[tuple, list] = {}  # (model, suite, task) -> [seeds, stored, cost, never timed, rough]
    with (nullcontext() if per_cell else progress(sys.stderr)) as bar:
        for cell in track(bar, plan.iter_cells(), count, "bench grid --dry-run: planning cells"):
            shas, elsewhere = plan.stored(cell)
            cost, shown = cell_estimate(plan, timings, cell)
            if not shas:
                totals.to_run += 1
                totals.cells_s += cost or 0.0
                totals.unknown += cost is None
                totals.rough += shown.startswith("~")
                totals.elsewhere += bool(elsewhere)
            if per_cell:
                stored = (f"yes (weights {', '.join(s[:8] for s in shas)})" if shas
                          else f"no ({elsewhere} under other settings)" if elsewhere else "no")
                table.add_row(cell.model, cell.suite, cell.task, str(cell.seed), stored, shown)
                continue
            group = groups.setdefault((cell.model, cell.suite, cell.task), [0, 0, 0.0, 0, 0])
            group[0] += 1
            group[1] += bool(shas)
            group[2] += 0.0 if shas else cost or 0.0
            group[3] += not shas and cost is None
            group[4] += not shas and shown.startswith("~")
    for (model, suite, task), (seeds, stored, cost, never, approx) in groups.items():
        shown = fmt_s(cost) + (f" (+{never} never timed)" if never else "")
        table.add_row(model, suite, task, str(seeds), f"{stored} of {seeds}", f"~{shown}" if approx else shown)


def _plan_summary(totals: _PlanTotals) -> str:
    unknown = f", plus {totals.unknown} item(s) never timed" if totals.unknown else ""
    rough = (f"; ~: {totals.rough} rough estimate(s) from cells under another constraint set or victim"
             if totals.rough else "")
    elsewhere = (f" Of the cells to run, {totals.elsewhere} are stored under other settings (another --profile, "
                 f"--dtype, --limit or option): give the settings they ran with to reuse them." if totals.elsewhere else "")
    return (f"{totals.to_run} cell(s) without a stored result for this configuration; estimated "
            f"{fmt_s(totals.cells_s + totals.training_s)} of CPU-slot time ({fmt_s(totals.training_s)} training, "
            f"{fmt_s(totals.cells_s)} cells){unknown}{rough} "
            f"(from earlier wall_s in the store, scaled by examples x runs x recipes, and from the model "
            f"cards of finished training runs of the same method and profile; excludes model loading). "
            f"'in store' matches model, suite, task, seed and configuration; a real run also checks the "
            f"weights sha256, so changed weights rerun.{elsewhere}")


class LiveView:
    """pending / running / done / failed counts, the running cells and an ETA, redrawn on each tick."""

    def __init__(self, live):
        self.live = live
        self.last = 0.0

    def __call__(self, runner) -> None:
        now = time.time()
        if now - self.last < 0.5:
            return
        self.last = now
        self.live.update(render(runner, runner.board_snapshot()))


class PlainView:
    """For a file or pipe: one plain line (cells done/total, running, failed, elapsed, ETA) at least every
    30 s (bench.progress.EVERY_S), instead of a live view that a log cannot show."""

    def __init__(self, write, every: float | None = None, clock=time.time):
        from bench.progress import EVERY_S

        self.write, self.every, self.clock = write, EVERY_S if every is None else every, clock
        self.last = clock()

    def __call__(self, runner) -> None:
        now = self.clock()
        if now - self.last < self.every:
            return
        self.last = now
        self.write(status_line(runner, runner.board_snapshot(), now))


def status_line(runner, snapshot: dict, now: float) -> str:
    states = [s.state for s in runner.states.values()]
    finished = sum(s in ("done", "stored") for s in states)
    preparing = any(kind == "model" for kind, _ in runner.inflight.values())
    return (f"[{time.strftime('%H:%M:%S')}] bench grid: {finished}/{len(states)} cells finished, "
            f"{states.count('running')} running, {states.count('failed')} failed; elapsed "
            f"{fmt_s(now - runner.started)}, " + _left(runner.eta_s(snapshot))
            + (" + model preparation" if preparing else ""))


def _left(eta_s: float | None) -> str:
    return "time left: estimating" if eta_s is None else f"~{fmt_s(eta_s)} left"


def render(runner, snapshot: dict):
    states = list(runner.states.values())
    counts = Table.grid(padding=(0, 2))
    names = ("pending", "running", "done", "stored", "failed", "blocked")
    for _ in names:
        counts.add_column()
    counts.add_row(*[Text(f"{n} {sum(s.state == n for s in states)}", style=STATE_STYLE[n]) for n in names])
    preparing = [name for kind, name in runner.inflight.values() if kind == "model"]
    eta = fmt_s(runner.eta_s(snapshot)) + (" + model preparation" if preparing else "")
    head = Text(f"bench grid · {len(states)} cells · {runner.slots} slot(s) · elapsed "
                f"{fmt_s(time.time() - runner.started)} · ETA {eta}")
    running = Table(box=None, show_header=False, padding=(0, 2))
    now = time.time()
    busy = [s for s in states if s.state == "running"]
    for st in busy[:12]:
        label = st.cell.label
        started = snapshot["started_at"].get(label)
        tries = snapshot["attempts"].get(label, 0)
        running.add_row(Text(label, style="cyan"),
                        "queued" if started is None else f"{fmt_s(now - started)} on {snapshot['hosts'].get(label, '?')}",
                        f"attempt {tries}" if tries > 1 else "")
    if len(busy) > 12:
        running.add_row(f"… and {len(busy) - 12} more", "", "")
    lines = [head, counts]
    if preparing:
        lines.append(Text(f"preparing model(s) (load, or train if no checkpoint): {', '.join(preparing)}", style="dim"))
    return Group(*lines, running)


def report(result, plan, console: Console) -> None:
    table = Table(title="bench grid")
    for col in ("model", "suite", "task", "seed", "state", "wall"):
        table.add_column(col)
    for st in result.states:
        table.add_row(st.cell.model, st.cell.suite, st.cell.task, str(st.cell.seed),
                      Text(st.state, style=STATE_STYLE[st.state]), fmt_s(st.wall_s))
    console.print(table)
    for name, prepared in result.models.items():
        done = "trained and loaded" if prepared["trained"] else "loaded"
        console.print(f"Model '{name}' {done} in {fmt_s(prepared['wall_s'])} (weights {prepared['sha'][:12]}).")
    for name, error in result.models_failed.items():
        console.print(Text(f"Model '{name}' could not be prepared:", style="bold red"))
        console.print(Text.from_ansi(error), soft_wrap=True)
    failed = [s for s in result.states if s.state == "failed"]
    if failed:
        console.print(Text(f"{len(failed)} failed cell(s), after their retries:", style="bold red"))
        for st in failed:
            console.print(Text(f"--- {st.cell.label} (failed {st.attempts} attempt(s))", style="red"))
            console.print(Text.from_ansi(st.error), soft_wrap=True)
    for st in (s for s in result.states if s.state == "blocked"):
        console.print(Text(f"{st.cell.label}: {st.error}", style="yellow"))
    ran = [s for s in result.states if s.state == "done"]
    console.print(f"Ran {len(ran)} cell(s), reused {result.count('stored')} from the store, "
                  f"{len(failed)} failed, {result.count('blocked')} not run. Results: {plan.paths.results} "
                  f"(leaderboard {plan.paths.results / 'leaderboard.csv'}). Wall time: {fmt_s(result.wall_s)}.")
    if result.exit_code:
        console.print("Re-run the same command to retry only the unfinished cells.")


def stored_models(plan, known: dict) -> dict[str, tuple[int, str]]:
    """model -> (its task cells, their weights' sha256 prefix) for each model of ``plan`` whose weights are not
    at hand (it would be trained, built or downloaded first) and whose every task cell is stored under one set
    of weights with this configuration (``bench.runner.stored_weights``)."""
    from bench.results.store import ResultStore
    from bench.runner import get_suite, stored_cells, stored_weights, weights_at_hand

    store, out = ResultStore(plan.paths.results), {}
    for spec in plan.models:
        cells = [c for c in plan.iter_cells() if c.model == spec.name and not c.summary]
        if not cells or weights_at_hand(spec, plan.paths, known):
            continue
        weights = stored_weights([stored_cells(store, get_suite(c.suite), c.model, c.task, c.seed, plan.config(c))
                                  for c in cells])
        if weights is not None:
            out[spec.name] = (len(cells), weights[:12])
    return out


def check_models(plan, models_file, allow_cpu_paper_profile: bool, log) -> None:
    """Before Ray starts: every model can be had (offline Hub models fail now, with one message), and each
    one trained on demand is announced with its estimate (a paper-profile one on CPU cells needs the opt-in)."""
    from bench.models import hub
    from bench.models.registry import known_models
    from bench.train_cost import announce_training

    known = known_models(plan.paths, models_file)
    for spec in plan.models:
        hub.require_model(spec, plan.paths.models, {**known, spec.name: spec})
        announce_training(spec, plan.paths, plan.settings.device, allow_cpu_paper_profile, log)


def main(args) -> int:
    from rich.live import Live

    from app.commands.grid_runner import import_ray, run_grid

    plan = build_plan(args)
    console = output_console()  # piped: whole values, no '…'
    if args.dry_run:
        return dry_run(plan, console)
    from dataclasses import replace

    from bench.models.registry import known_models

    stored = stored_models(plan, known_models(plan.paths, args.models_file))
    for name, (cells, sha) in stored.items():  # stored work needs nothing: no training, build, download or Ray
        console.print(f"'{name}': all {cells} cell(s) stored (weights {sha}), reused; the model is not at hand "
                      "here and nothing needed it.")
    plan = replace(plan, models=[spec for spec in plan.models if spec.name not in stored])
    if not plan.models:
        console.print(f"Nothing to run: every cell is stored. Results: {plan.paths.results}.")
        return 0
    import_ray()  # exit 2 with the install hint before anything starts
    check_models(plan, args.models_file, args.allow_cpu_paper_profile, console.print)
    from bench.results.store import ResultStore

    ResultStore(plan.paths.results).check_writable()  # a read-only or full results dir: exit 2 before any cell
    options = dict(address=args.address, num_cpus=args.num_cpus, gpus_per_cell=args.gpus_per_cell,
                   cpus_per_cell=args.cpus_per_cell, retries=args.retries)
    if console.is_terminal:
        with Live(Text("starting Ray…"), console=console, refresh_per_second=4, transient=True) as live:
            result = run_grid(plan, on_tick=LiveView(live), **options)
    else:  # a log: plain lines, at least every 30 s
        result = run_grid(plan, on_tick=PlainView(lambda line: print(line, flush=True)), **options)
    report(result, plan, console)
    return result.exit_code

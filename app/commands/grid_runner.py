"""``bench grid``: models x suites x tasks x seeds as Ray tasks, local by default or on a cluster.

A cell is (model, suite, task, seed), the same unit the result store keys on. The grid:

1. prepares each model once, as a Ray task (``prepare_model``): that trains a registered method model whose
   checkpoint is missing (``bench.train.train_if_missing``), opens it through ``bench.runner.open_model`` (as
   `bench run` and ``bench.evaluate`` do) and returns the weights sha256 that every cell key needs;
2. keys each of the model's cells with ``bench.runner.cell_key`` and skips those already in the
   store (the only-missing rule of ``bench run``);
3. runs each missing cell as a Ray task through ``bench.runner.run_cell``, the function
   ``bench run`` calls per task, and a suite's summary cell (the STS average) through
   ``bench.runner.run_summary`` once that seed's task cells are all finished.

Workers write cells straight into the driver's results directory (atomic rename), so on a
cluster BENCH_HOME, BENCH_DATA_DIR and BENCH_RESULTS_DIR must be one shared filesystem mounted
at the same path on every node (docs/scale-out.md). Ray is imported only inside functions.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench.errors import BenchError
from bench.paths import Paths
from bench.models.registry import ModelSpec
from bench.results.store import ResultStore, config_hash, model_dir

INSTALL_HINT = 'Ray is not installed. Install the grid extra: pip install -e ".[grid]"  (or: pip install "ray>=2.40")'
LOCAL_OBJECT_STORE_BYTES = 256 * 1024**2  # cells return a few paths and numbers: keep shared memory small


# --- the plan ------------------------------------------------------------------------------

@dataclass(frozen=True)
class CellSettings:
    """What every cell of one grid shares; together with the seed it makes the cell's RunContext."""

    profile: str = "smoke"
    limit: int | None = None
    batch_size: int = 64
    device: str = "cpu"
    options: tuple = ()  # suite options as sorted (key, value) pairs
    dtype: str = "auto"  # requested precision (bench.models.encoder.resolve_dtype), resolved where the cell runs
    allow_unverified_data: bool = False

    def context(self, paths: Paths, seed: int):
        from bench.models.encoder import dtype_name, resolve_dtype
        from bench.runner import RunContext

        return RunContext(paths=paths, seed=seed, device=self.device, batch_size=self.batch_size,
                          dtype=dtype_name(resolve_dtype(self.device, self.dtype)),
                          limit=self.limit, profile=self.profile, overwrite="only-missing",
                          options={k: list(v) if isinstance(v, tuple) else v for k, v in self.options},
                          progress=None, log=print, allow_unverified_data=self.allow_unverified_data)  # lists again, as `bench run` passes them; logs go to Ray's worker logs


@dataclass(frozen=True)
class Cell:
    model: str
    suite: str
    task: str
    seed: int
    summary: bool = False  # the suite's summary cell (e.g. sts/avg) over the grid's tasks of that suite

    @property
    def label(self) -> str:
        return f"{self.model} {self.suite}/{self.task} seed {self.seed}"

    @property
    def group(self) -> tuple[str, str, int]:
        return self.model, self.suite, self.seed


@dataclass
class Plan:
    models: list[ModelSpec]
    protocols: dict  # suite name -> the bench.protocols.Protocol the grid runs for it (its tasks, in order)
    seeds: list[int] | range  # in increasing order
    settings: CellSettings
    paths: Paths
    _listings: dict = field(default_factory=dict, repr=False, compare=False)  # stored()'s directory lists

    @property
    def tasks(self) -> dict[str, list[str]]:
        """suite name -> the task names its protocol runs."""
        return {name: list(p.tasks) for name, p in self.protocols.items()}

    def context(self, suite_name: str, seed: int):
        """The RunContext of the suite's cells at ``seed``: the grid's settings and the suite's protocol."""
        return replace(self.settings.context(self.paths, seed), protocol=self.protocols[suite_name])

    def suite_seeds(self, suite):
        """The seeds a suite runs for the grid's seeds (Suite.seeds may expand one seed into several), in order,
        each once; lazily, remembering only seeds an expansion added, so a long range costs no memory."""
        extra: set[int] = set()
        for seed in self.seeds:
            for s in suite.seeds(self.settings.context(self.paths, seed)):
                if s == seed and s not in extra:
                    yield s
                elif s != seed and s not in extra and not (s < seed and s in self.seeds):
                    extra.add(s)
                    yield s

    def iter_cells(self):
        """The grid's cells, in order, one at a time (``cells`` is the list)."""
        from bench.runner import get_suite

        for spec in self.models:
            for suite_name, task_names in self.tasks.items():
                suite = get_suite(suite_name)
                for seed in self.suite_seeds(suite):
                    yield from (Cell(spec.name, suite_name, t, seed) for t in task_names)
                    if suite.summary_task is not None:
                        yield Cell(spec.name, suite_name, suite.summary_task.name, seed, summary=True)

    def cells(self) -> list[Cell]:
        return list(self.iter_cells())

    def cell_count(self) -> int:
        """How many cells ``iter_cells`` yields, counted without making them."""
        from suites import get_suite

        count = 0
        for suite_name, task_names in self.tasks.items():
            suite = get_suite(suite_name)
            seeds = sum(1 for _ in self.suite_seeds(suite))
            count += seeds * (len(task_names) + (suite.summary_task is not None))
        return count * len(self.models)

    def spec(self, name: str) -> ModelSpec:
        return next(s for s in self.models if s.name == name)

    def config(self, cell: Cell) -> dict:
        """The cell's configuration, as ``bench run`` would store it."""
        from bench.runner import cell_config, for_model, get_suite, summary_config

        suite, protocol = get_suite(cell.suite), self.protocols[cell.suite]
        ctx = for_model(self.context(cell.suite, cell.seed), self.spec(cell.model))
        if cell.summary:
            return summary_config(suite, suite.plan_tasks(protocol), ctx)
        return cell_config(suite, suite.planned_task(cell.task, protocol), ctx)

    def config_hash(self, cell: Cell) -> str:
        """The cell's configuration hash: the part of its store key that needs no weights."""
        return config_hash(self.config(cell))

    def stored_path(self, cell: Cell, weights_sha256: str) -> Path | None:
        """The finished cell in the store for these weights and this configuration, if any."""
        from bench.results.store import CellKey

        key = CellKey(cell.model, weights_sha256, cell.suite, cell.task, cell.seed, self.config_hash(cell))
        return ResultStore(self.paths.results).existing(key)

    def stored(self, cell: Cell) -> tuple[list[str], int]:
        """Weights-sha prefixes of stored cells with this configuration, and how many other configurations this
        model, suite, task and seed are stored under (another --profile, --dtype or --limit than the plan's).
        No model load: for --dry-run. Each task directory is listed once per plan, so a grid of many seeds
        stays linear in their number."""
        key = (cell.model, cell.suite, cell.task)
        if key not in self._listings:
            listing = {}
            for path in (self.paths.results / "cells" / model_dir(cell.model) / cell.suite / cell.task).glob("*.json"):
                seed, sha, config = (path.stem.split("-", 2) + ["", ""])[:3]
                listing.setdefault((seed, config), []).append(sha)
            self._listings[key] = listing
        listing, seed, planned = self._listings[key], f"seed{cell.seed}", self.config_hash(cell)[:8]
        others = sum(stored_seed == seed and config != planned for stored_seed, config in listing)
        return sorted(listing.get((seed, planned), [])), others


def split_list(text: str | None) -> list[str]:
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def select_tasks(suite_names: list[str], task_filter: list[str], profile: str = "smoke") -> dict[str, list[str]]:
    """suite -> task names. A filter item is ``task`` (every chosen suite that has it) or ``suite/task``; no
    filter: each suite's default protocol's tasks for ``profile``."""
    from bench.runner import get_suite

    suites = {name: get_suite(name) for name in dict.fromkeys(suite_names)}
    if not task_filter:
        return {name: [t.name for t in suite.default_tasks(profile)] for name, suite in suites.items()}
    wanted: dict[str, set[str]] = {name: set() for name in suites}
    for item in task_filter:
        suite_part, _, task_part = item.rpartition("/")
        if suite_part:
            if suite_part not in suites:
                raise BenchError(f"--tasks {item}: suite '{suite_part}' is not in --suites ({', '.join(suites)}).")
            suites[suite_part].task(task_part)  # UnknownName with suggestions
            wanted[suite_part].add(task_part)
            continue
        owners = [name for name, suite in suites.items() if item in {t.name for t in suite.tasks}]
        if not owners:
            raise BenchError(f"--tasks {item}: no task of that name in suites {', '.join(suites)}. "
                             f"See `bench ls tasks`.")
        for name in owners:
            wanted[name].add(item)
    empty = [name for name, names in wanted.items() if not names]
    if empty:
        raise BenchError(f"--tasks names no task of suite(s) {', '.join(empty)}. Name their tasks as "
                         f"suite/task, or drop them from --suites.")
    return {name: [t.name for t in suites[name].tasks if t.name in wanted[name]] for name in suites}


# --- worker side: plain functions, wrapped with ray.remote by the driver --------------------

_ENCODER: dict = {}  # one loaded encoder per worker process: consecutive cells of a model reuse it


def _encoder(spec: ModelSpec, paths: Paths, settings: CellSettings, seed: int):
    """The model's encoder, trained first when it is a registered method model without its checkpoint."""
    from bench.runner import open_model
    from bench.train import train_if_missing

    key = (repr(spec), str(paths.models), settings.device, settings.batch_size, settings.dtype)
    if key not in _ENCODER:
        _ENCODER.clear()
        train_if_missing(spec, paths, device=settings.device, seed=seed, dtype=settings.dtype)
        _, _ENCODER[key] = open_model(spec, paths, device=settings.device, dtype=settings.dtype,
                                      batch_size=settings.batch_size)
    return _ENCODER[key]


def _check_shared(paths: Paths) -> None:
    if not paths.results.parent.exists() or not paths.data.exists():
        import socket

        raise BenchError(f"Worker on {socket.gethostname()} cannot see the data root {paths.data} or the results "
                         f"directory {paths.results}: on a cluster they must be on a filesystem shared by every "
                         f"node, at the same path (docs/scale-out.md).")


def prepare_model(spec: ModelSpec, paths: Paths, settings: CellSettings, seed: int) -> dict:
    """Load the model (training it first if it is a method model with no checkpoint); its weights sha256."""
    _check_shared(paths)
    start = time.perf_counter()
    trains = spec.is_trained and not (spec.checkpoint_dir(paths.models) / "config.json").exists()
    encoder = _encoder(spec, paths, settings, seed)
    return {"sha": encoder.weights_sha256, "wall_s": time.perf_counter() - start, "trained": trains}


def _tell_board(board, label: str, host: str) -> None:
    """Record the start before the work: waited on, so the count of attempts is complete when the cell ends."""
    if board is not None:
        import ray

        ray.get(board.started.remote(label, host))


def run_grid_cell(spec: ModelSpec, protocol, task_name: str, seed: int, paths: Paths,
                  settings: CellSettings, board=None, label: str = "") -> dict:
    """One task cell of ``protocol`` (a bench.protocols.Protocol), through the code ``bench run`` uses per task."""
    import socket

    from bench.runner import get_suite, run_cell

    _tell_board(board, label, socket.gethostname())
    _check_shared(paths)
    start = time.perf_counter()
    suite = get_suite(protocol.suite)
    ctx = replace(settings.context(paths, seed), protocol=protocol)
    outcome = run_cell(suite, spec, ctx, _encoder(spec, paths, settings, seed), suite.planned_task(task_name, protocol))
    return {"path": str(outcome.path), "cached": outcome.cached, "wall_s": time.perf_counter() - start}


def run_grid_summary(spec: ModelSpec, protocol, fresh: list[str], seed: int, paths: Paths, settings: CellSettings,
                     board=None, label: str = "") -> dict:
    """The summary cell of ``protocol``'s suite over its finished task cells; ``fresh`` names those computed in
    this grid run, so the summary is rewritten exactly when ``bench run`` would rewrite it."""
    import socket

    from bench.runner import get_suite, run_cell, run_summary

    _tell_board(board, label, socket.gethostname())
    suite = get_suite(protocol.suite)
    start = time.perf_counter()
    ctx = replace(settings.context(paths, seed), protocol=protocol)
    encoder = _encoder(spec, paths, settings, seed)
    tasks = suite.plan_tasks(protocol)
    outcomes = [run_cell(suite, spec, ctx, encoder, t) for t in tasks]
    outcomes = [replace(o, cached=o.cached and o.task not in fresh) for o in outcomes]
    outcome = run_summary(suite, spec, ctx, encoder, tasks, outcomes)
    path = str(outcome.path) if outcome is not None else ""
    return {"path": path, "cached": outcome is None or outcome.cached, "wall_s": time.perf_counter() - start}


class Board:
    """A tiny Ray actor the cells tell when they start, so the live view can show what is running."""

    def __init__(self):
        self.started_at: dict[str, float] = {}
        self.hosts: dict[str, str] = {}
        self.attempts: dict[str, int] = {}

    def started(self, label: str, host: str) -> None:
        self.started_at[label] = time.time()
        self.hosts[label] = host
        self.attempts[label] = self.attempts.get(label, 0) + 1

    def snapshot(self) -> dict:
        return {"started_at": dict(self.started_at), "hosts": dict(self.hosts), "attempts": dict(self.attempts)}


# --- cost estimates from earlier runs --------------------------------------------------------

# Settings that change a cell's cost by more than its size does: earlier cells must match on them.
COST_SETTINGS = ("profile", "victim", "constraints", "dtype", "mode")


def work_units(config: dict) -> tuple[int | None, int]:
    """(examples limit or None for the whole task, runs x recipes): what a cell's cost scales with."""
    runs = int(config.get("runs") or 1)
    recipes = len(config.get("recipes") or ()) or 1
    return config.get("limit"), runs * recipes


class Timings(dict):
    """(model, suite, task) -> [(configuration, wall seconds)], with every model's entries of one suite and task
    gathered once (``same_task``), so estimating many cells costs each a lookup."""

    def same_task(self, suite: str, task: str) -> list[tuple[dict, float]]:
        if not hasattr(self, "_by_task"):
            self._by_task: dict[tuple[str, str], list] = {}
            for (_, s, t), entries in self.items():
                self._by_task.setdefault((s, t), []).extend(entries)
        return self._by_task.get((suite, task), [])


def past_timings(results: Path) -> Timings:
    """(model, suite, task) -> (configuration, wall seconds) of the cells already in the store."""
    out = Timings()
    for path in ResultStore(results).cells():
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
            cell, rows, config = payload["cell"], payload["results"], payload.get("config") or {}
        except (OSError, ValueError, KeyError):
            continue
        walls = [r.get("wall_s") for r in rows if r.get("wall_s")]
        sizes = [r["n"] for r in rows if isinstance(r.get("n"), (int, float))]
        if walls:  # a cell without a limit ran its whole task: its largest n stands for its size
            config = {**config, "whole_task": config.get("limit") is None,
                      "limit": config.get("limit") or (max(sizes) if sizes else None)}
            out.setdefault((cell["model"], cell["suite"], cell["task"]), []).append((config, float(walls[0])))
    return out


# Settings a rough estimate may ignore, one more at a time, when no earlier cell matches them
# (``estimate(rough=True)``): the attack constraints and the victim mode change a cell's cost by a
# factor, not by orders.
ROUGH_SETTINGS = ("constraints", "victim")


def scaled_cost(config: dict, wall_s: float, planned: dict, ignore: tuple = ()) -> float | None:
    """An earlier cell's wall time scaled to the planned cell's size; None when they are not comparable."""
    if any(config.get(k) != planned.get(k) for k in COST_SETTINGS if k not in ignore):
        return None
    (limit, units), (planned_limit, planned_units) = work_units(config), work_units(planned)
    if planned_limit is None:  # the whole task: only an earlier whole-task cell tells its cost
        size = 1.0 if config.get("whole_task", limit is None) else None
    else:
        size = planned_limit / limit if limit else None
    if size is None:
        return None
    return wall_s * size * planned_units / units


def estimate(timings: dict, cell: Cell, planned: dict | None = None, rough: bool = False) -> float | None:
    """Median earlier wall time of this model's cell, else of any model's cell for the same suite/task,
    each scaled to the planned size (examples x runs x recipes) when ``planned`` (its config) is given.
    ``rough``: earlier cells may differ in the first one, then both, of ``ROUGH_SETTINGS`` (for a setting
    never run before)."""
    def costs(entries, ignore):
        if planned is None:
            return [wall for _, wall in entries]
        return [c for c in (scaled_cost(cfg, wall, planned, ignore) for cfg, wall in entries) if c is not None]

    same_task = (timings.same_task(cell.suite, cell.task) if isinstance(timings, Timings) else
                 [e for (m, s, t), entries in timings.items() if (s, t) == (cell.suite, cell.task) for e in entries])
    relaxed = [ROUGH_SETTINGS[:k] for k in range(1, len(ROUGH_SETTINGS) + 1)] if rough else [()]
    for ignore in relaxed:
        for entries in (timings.get((cell.model, cell.suite, cell.task), ()), same_task):
            found = costs(entries, ignore)
            if found:
                return statistics.median(found)
    return None


def training_estimate(spec: ModelSpec, models_dir: Path) -> float | None:
    """Wall seconds to train ``spec``: the median over finished models' cards with the same method and
    profile (so the same steps and batch); None when there is no such card."""
    from bench.models.registry import MODELS

    walls = []
    for other in MODELS.values():
        card_path = other.checkpoint_dir(models_dir) / "bench_card.json"
        if other.method != spec.method or other.profile != spec.profile or not card_path.exists():
            continue
        try:
            card = json.loads(card_path.read_text(encoding="utf-8"))
            walls.append(float(card["wall_s"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return statistics.median(walls) if walls else None


# --- driver side ------------------------------------------------------------------------------

def import_ray():
    try:
        import ray
    except ImportError:
        raise BenchError(INSTALL_HINT) from None
    return ray


def connect(ray, address: str | None, num_cpus: int | None) -> bool:
    """Join ``address`` or start a local instance sized to this machine; True if we started/joined here."""
    if ray.is_initialized():
        return False  # the caller's Ray session (tests, notebooks): use it, leave it running
    address = address or os.environ.get("RAY_ADDRESS")  # what plain ray.init() would join
    if address:
        try:
            ray.init(address=address, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise BenchError(f"Could not join the Ray cluster at '{address}' ({exc}). Start one with "
                             f"`ray start --head` (see docs/scale-out.md), or drop --address to run locally. A cluster "
                             f"with token authentication (the default of `ray start` in recent Ray) needs "
                             f"RAY_AUTH_MODE=token here, with the token in ~/.ray/auth_token or RAY_AUTH_TOKEN.") from exc
        return True
    cpus = num_cpus or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
    # Ray starts workers at nice 15, so a cell got ~12% of a core beside any other job on the machine (its
    # wall_s, which the dry-run estimate reads, then measures the neighbour); a local grid's cells run at 0.
    os.environ.setdefault("RAY_worker_niceness", "0")
    # address="local": a private instance even when `ray start` left a cluster (or a stale address) behind
    ray.init(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False,
             object_store_memory=LOCAL_OBJECT_STORE_BYTES)
    return True


@dataclass
class CellState:
    cell: Cell
    state: str = "pending"  # pending | stored | running | done | failed | blocked
    wall_s: float | None = None
    error: str = ""
    path: str = ""
    attempts: int = 0


@dataclass
class GridReport:
    states: list[CellState]
    models_failed: dict[str, str] = field(default_factory=dict)
    wall_s: float = 0.0
    models: dict[str, dict] = field(default_factory=dict)  # name -> prepare_model's answer (sha, wall_s, trained)

    def count(self, state: str) -> int:
        return sum(s.state == state for s in self.states)

    @property
    def ran(self) -> list[CellState]:
        return [s for s in self.states if s.state in ("done", "failed")]

    @property
    def exit_code(self) -> int:
        return 1 if any(s.state in ("failed", "blocked") for s in self.states) or self.models_failed else 0


class GridRunner:
    """Submits model preparation, then cells, then summary cells, as their inputs become ready."""

    def __init__(self, plan: Plan, ray, *, gpus_per_cell: float = 0.0, cpus_per_cell: float = 1.0,
                 retries: int = 1):
        self.plan, self.ray = plan, ray
        opts = dict(num_cpus=cpus_per_cell, num_gpus=gpus_per_cell, max_retries=retries, retry_exceptions=True)
        # max_calls=0: a worker lives on and keeps its loaded encoder for the next cell of that model
        self.prepare = ray.remote(max_calls=0)(prepare_model).options(**opts)
        self.run_cell = ray.remote(max_calls=0)(run_grid_cell).options(**opts)
        self.run_summary = ray.remote(max_calls=0)(run_grid_summary).options(**opts)
        self.board = ray.remote(num_cpus=0)(Board).remote()
        self.states = {c: CellState(c) for c in plan.cells()}
        self.inflight: dict = {}  # ObjectRef -> ("model", name) | ("cell", Cell)
        self.models: dict[str, dict] = {}
        self.fresh: dict[tuple, list[str]] = {}  # (model, suite, seed) -> task cells computed in this run
        self.models_failed: dict[str, str] = {}
        self.timings = past_timings(plan.paths.results)
        resources = ray.cluster_resources()
        by_cpu = resources.get("CPU", 1) / max(cpus_per_cell, 1e-9)
        by_gpu = resources.get("GPU", 0) / gpus_per_cell if gpus_per_cell else float("inf")
        self.slots = max(1, int(min(by_cpu, by_gpu)))
        self.started = time.time()

    # scheduling
    def start(self) -> None:
        first_seed = min(self.plan.seeds)
        for spec in self.plan.models:
            ref = self.prepare.remote(spec, self.plan.paths, self.plan.settings, first_seed)
            self.inflight[ref] = ("model", spec.name)

    def _submit(self, cell: Cell) -> None:
        spec = self.plan.spec(cell.model)
        if cell.summary:
            ref = self.run_summary.remote(spec, self.plan.protocols[cell.suite], self.fresh.get(cell.group, []),
                                          cell.seed, self.plan.paths, self.plan.settings, self.board, cell.label)
        else:
            ref = self.run_cell.remote(spec, self.plan.protocols[cell.suite], cell.task, cell.seed, self.plan.paths,
                                       self.plan.settings, self.board, cell.label)
        self.inflight[ref] = ("cell", cell)
        self.states[cell].state = "running"

    def _model_ready(self, name: str, prepared: dict) -> None:
        self.models[name] = prepared
        sha = prepared["sha"]
        for cell, st in self.states.items():
            if cell.model != name or cell.summary:
                continue
            if self.plan.stored_path(cell, sha) is not None:
                st.state = "stored"
            else:
                self._submit(cell)
        self._release_summaries(name)

    def _release_summaries(self, model: str) -> None:
        """Submit (or skip) each summary cell whose task cells have all finished."""
        for cell, st in self.states.items():
            if cell.model != model or not cell.summary or st.state != "pending":
                continue
            parts = [s for c, s in self.states.items() if c.group == cell.group and not c.summary]
            if any(s.state in ("pending", "running") for s in parts):
                continue
            failed = [s.cell.task for s in parts if s.state in ("failed", "blocked")]
            if failed:
                st.state, st.error = "blocked", f"not run: task cell(s) {', '.join(failed)} failed"
            elif not self.fresh.get(cell.group) and self.plan.stored_path(cell, self.models[model]["sha"]) is not None:
                st.state = "stored"
            else:
                self._submit(cell)

    def _finished(self, ref) -> None:
        kind, what = self.inflight.pop(ref)
        try:
            value = self.ray.get(ref)
        except Exception as exc:  # the task's exception after its retries, with the remote traceback
            error = str(exc)
            if kind == "model":
                self.models_failed[what] = error
                for cell, st in self.states.items():
                    if cell.model == what:
                        st.state, st.error = "blocked", f"not run: model '{what}' could not be prepared"
            else:
                st = self.states[what]
                st.state, st.error = "failed", error
                self._release_summaries(what.model)
            return
        if kind == "model":
            self._model_ready(what, value)
            return
        st = self.states[what]
        st.state, st.wall_s, st.path = "done", value["wall_s"], value["path"]
        if not what.summary and not value["cached"]:
            self.fresh.setdefault(what.group, []).append(what.task)
        self._release_summaries(what.model)

    def run(self, on_tick=None, tick_s: float = 0.5) -> GridReport:
        self.start()
        while self.inflight:
            done, _ = self.ray.wait(list(self.inflight), num_returns=1, timeout=tick_s)
            for ref in done:
                self._finished(ref)
            if on_tick is not None:
                on_tick(self)
        attempts = self.board_snapshot(timeout_s=60)["attempts"]
        for st in self.states.values():
            st.attempts = attempts.get(st.cell.label, 0)
        if any(st.state == "done" for st in self.states.values()):
            ResultStore(self.plan.paths.results).write_leaderboard()  # once, after the concurrent writers
            from bench.results.metadata import export as export_metadata
            from bench.runner import get_suite

            export_metadata(self.plan.paths.results, suites=[get_suite(n) for n in self.plan.tasks],
                            models=self.plan.models, models_dir=self.plan.paths.models)
        return GridReport(list(self.states.values()), dict(self.models_failed), time.time() - self.started,
                          dict(self.models))

    # for the live view
    def board_snapshot(self, timeout_s: float = 2) -> dict:
        try:
            return self.ray.get(self.board.snapshot.remote(), timeout=timeout_s)
        except Exception:
            return {"started_at": {}, "hosts": {}, "attempts": {}}

    def eta_s(self, snapshot: dict) -> float | None:
        """Remaining work / parallel slots; a cell's time is its earlier runs' (``estimate``), else the mean
        of this run's finished cells, else unknown (None)."""
        done = [st.wall_s for st in self.states.values() if st.state == "done" and st.wall_s]
        now, left = time.time(), 0.0
        for cell, st in self.states.items():
            if st.state not in ("pending", "running"):
                continue
            guess = estimate(self.timings, cell) or (statistics.mean(done) if done else None)
            if guess is None:
                return None
            started = snapshot["started_at"].get(cell.label) if st.state == "running" else None
            left += max(guess - (now - started), 0.0) if started else guess
        return left / self.slots


def run_grid(plan: Plan, *, address: str | None = None, num_cpus: int | None = None, gpus_per_cell: float = 0.0,
             cpus_per_cell: float = 1.0, retries: int = 1, on_tick=None) -> GridReport:
    ray = import_ray()
    started_here = connect(ray, address, num_cpus)
    try:
        runner = GridRunner(plan, ray, gpus_per_cell=gpus_per_cell, cpus_per_cell=cpus_per_cell, retries=retries)
        return runner.run(on_tick=on_tick)
    finally:
        if started_here:
            ray.shutdown()

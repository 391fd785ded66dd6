"""The run loop: the kernel runs suites, which are plug-ins named in ``SUITES`` ("module:attr", imported
on first use, so the kernel imports no suite module).

A suite only says how to score one task with an encoder (``run_task``); this module owns the rest: the cache
check, the cell key, progress, timing, provenance, uncertainty and atomic writes. ``bench run`` passes its
arguments down once: ``app.commands.run:main`` → ``run_plan`` → ``run_suite`` → ``run_cell`` → the suite's
``run_task`` → ``bench.results.store.ResultStore.write``. ``bench.evaluate`` (``bench/api.py``) and the grid's Ray
workers (``run_cell``, ``run_summary``) take the same path.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Protocol

from bench.errors import BenchError
from bench.results.metadata import export as export_metadata
from bench.papers import paper_values
from bench.paths import Paths
from bench.plugins import Registry
from bench.models.registry import ModelSpec, key_config
from bench.results.store import CellKey, Result, ResultStore, config_hash, git_commit, now_iso, package_versions
from bench.results.uncertainty import apply_uncertainty, summary_uncertainty

# name -> "module:SUITE". Adding a suite is one module (subclassing suites.base.Suite) plus one line here.
SUITES = Registry("suite", {
    "sts": "suites.sts:SUITE",
    "alignment": "suites.alignment:SUITE",
    "adversarial": "suites.adversarial:SUITE",
    "anli": "suites.anli:SUITE",
    "advsts": "suites.advsts:SUITE",
    "transfer": "suites.transfer:SUITE",
    "perturbation": "suites.perturbation:SUITE",
})


# task name -> ("module:attr" of a Task, where it was declared): plug-in tasks (a user's plug-in file, registered
# by the app), added to their suite when it is loaded, so no suite module is edited or imported early.
PLUGIN_TASKS: dict[str, tuple[str, str]] = {}


def get_suite(name: str):
    from bench.results.cell_schema import declare_metrics

    suite = SUITES.load(name)
    add_plugin_tasks(suite)
    check_protocols(suite)
    declare_metrics(suite.declared_metrics())  # a plug-in suite's own metrics pass the cell schema
    return suite


def add_plugin_task(name: str, target: str, where: str) -> None:
    if PLUGIN_TASKS.get(name, (target,))[0] != target:
        raise BenchError(f"{where}: a task '{name}' is already declared ({PLUGIN_TASKS[name][1]}). Fix: rename one.")
    PLUGIN_TASKS[name] = (target, where)


def add_plugin_tasks(suite) -> None:
    """Append the plug-in tasks naming this suite to its tasks (once); a BenchError names a bad entry and the fix."""
    for name, (target, where) in PLUGIN_TASKS.items():
        task = plugin_task(name, target, where)
        if task.suite != suite.name or any(t is task for t in suite.tasks):
            continue
        if any(t.name == name for t in suite.tasks):
            raise BenchError(f"{where}: suite '{suite.name}' already has a task '{name}'. Fix: rename yours.")
        suite.tasks = (*suite.tasks, task)
        warn_selection_set(task, where)


def plugin_task(name: str, target: str, where: str):
    from bench.plugins import import_target

    try:
        task = import_target(target)
    except (ImportError, AttributeError) as exc:
        raise BenchError(f"{where} = {target!r}: {exc}. Fix: point it at a Task record (suites/base.py).") from None
    if getattr(task, "name", None) != name or getattr(task, "suite", None) not in SUITES:
        raise BenchError(f"{where}: {target} is not a Task named '{name}' of a registered suite ({', '.join(SUITES)}). "
                         f"Fix: give the Task name='{name}' and suite= one of those.")
    return task


def warn_selection_set(task, where: str) -> None:
    """A task scored on the trainer's checkpoint-selection set is not held out for trained models: say so."""
    import warnings

    from bench.data.datasets import selection_set_overlap
    from bench.errors import BenchWarning

    overlap = selection_set_overlap(task.dataset, (task.split, *task.splits))
    if overlap:
        warnings.warn(f"{where}: task '{task.name}' scores {overlap}, the set `bench train` selects checkpoints "
                      f"on: its numbers for trained models are not held out (docs/extending.md).", BenchWarning)


def check_protocols(suite) -> None:
    """Before a suite runs: every protocol of protocols.toml names a registered suite, and those naming this
    suite name its tasks and recipes; else a ProtocolError (exit 2) naming the file, the protocol and the fix."""
    from bench.protocols import PROTOCOLS, PROTOCOLS_FILE, ProtocolError

    for name, declared in PROTOCOLS.items():
        if declared.suite not in SUITES:
            problem = f"suite '{declared.suite}' is none of the registered suites ({', '.join(SUITES)}; `bench ls suites`)"
        else:
            problem = suite.protocol_problem(declared) if declared.suite == suite.name else ""
        if problem:
            raise ProtocolError(f"{PROTOCOLS_FILE}: protocol '{name}': {problem}. Fix: correct it there, or restore "
                                f"the file (git checkout bench/protocols.toml).")


def all_suites():
    return [get_suite(name) for name in SUITES]


OVERWRITE_MODES = ("never", "only-missing", "always")


@dataclass
class RunContext:
    """What a run passes down to each suite: where things are, the seed, device, limits, the suite options,
    the protocol, progress and log. Built by the app (`bench run`, `bench grid`) or ``bench.evaluate``."""

    paths: Paths
    seed: int = 0
    device: str = "auto"
    batch_size: int = 64
    limit: int | None = None
    profile: str = "smoke"
    overwrite: str = "only-missing"
    options: dict = field(default_factory=dict)  # suite options by name (each suite declares its own)
    dtype: str = "float32"  # what the network runs in (Encoder.dtype): 'float32', 'bfloat16', ...
    progress: object | None = None  # a rich Progress, or None when quiet
    log: Callable[[str], None] = print
    allow_unverified_data: bool = False  # use data files whose sha256 differs from bench/data/data_files.tsv
    model_config: dict = field(default_factory=dict)  # the model's key settings (bench.models.registry.key_config)
    protocol: object | None = None  # the bench.protocols.Protocol run; None: each suite's default for the profile

    def __post_init__(self):
        if self.overwrite not in OVERWRITE_MODES:
            raise BenchError(f"--overwrite must be one of {', '.join(OVERWRITE_MODES)}")

    @property
    def store(self) -> ResultStore:
        return ResultStore(self.paths.results)

    def track(self, iterable, total: int | None = None, description: str = ""):
        """Iterate with progress (done/total, time left) when a progress is attached (bench/progress.py)."""
        from bench.progress import track

        yield from track(self.progress, iterable, total, description)

    @contextmanager
    def counter(self, description: str, total: int):
        """A callable ``advance(n)`` that reports ``n`` more of ``total`` done (e.g. sentences encoded)."""
        if self.progress is None:
            yield lambda n=1: None
            return
        task_id = self.progress.add_task(description, total=total)
        try:
            yield lambda n=1: self.progress.advance(task_id, n)
        finally:
            self.progress.remove_task(task_id)


@dataclass
class TaskOutcome:
    """One cell run or reused: its task, its stored rows and file."""

    task: str
    rows: list[dict]
    path: Path
    cached: bool
    wall_s: float


class SuitePlugin(Protocol):
    """What the runner uses of a suite; ``suites.base.Suite`` is the base class every suite extends, and its
    tasks are ``suites.base.Task`` records (name, version, main_metric, main_aggregation)."""

    name: str
    version: int
    options: tuple
    summary_task: object | None

    def task(self, name: str): ...
    def run_protocol(self, ctx: RunContext): ...
    def plan_tasks(self, protocol) -> list: ...
    def planned_task(self, name: str, protocol): ...
    def summarized(self, tasks, ctx: RunContext) -> list: ...
    def summary_task_of(self, protocol): ...
    def averages_config(self, ctx: RunContext) -> dict: ...
    def config(self, task, ctx: RunContext) -> dict: ...
    def datasets(self, task) -> tuple[str, ...]: ...
    def keyed_datasets(self, task, ctx: RunContext) -> tuple[str, ...]: ...
    def seeds(self, ctx: RunContext) -> list[int]: ...
    def run_task(self, task, encoder, ctx: RunContext) -> list[Result]: ...
    def needs_network(self, ctx: RunContext) -> str: ...
    def embedding_only_hint(self) -> str: ...
    def summarize(self, rows: list[dict], ctx: RunContext) -> list[Result]: ...
    def stored_config(self, cfg: dict, stored: dict) -> dict: ...


def precision_config(ctx: RunContext) -> dict:
    """The precision in a cell's configuration: float32 (the reference) adds nothing, so cells written
    before --dtype existed stay valid; any other dtype is a separate cell."""
    return {} if ctx.dtype == "float32" else {"dtype": ctx.dtype}


def data_config(datasets, ctx: RunContext) -> dict:
    """``{"data": {dataset: fingerprint}}`` after checking every file's sha256 against
    bench/data/data_files.tsv (cached by file identity, so a re-run re-reads nothing). A mismatch is a
    BenchError naming the file, unless ``ctx.allow_unverified_data``: then the differing files are
    listed under ``data_unverified`` (so in every row's config) and the fingerprint keeps those cells
    apart from cells on the reference data."""
    from bench.data.datasets import check_content

    checks = [check_content(ctx.paths.data, name, ctx.paths.cache, ctx.allow_unverified_data)
              for name in dict.fromkeys(datasets)]
    out: dict = {"data": {c.dataset: c.fingerprint for c in checks}} if checks else {}
    unverified = [f"{c.dataset}/{u}" for c in checks for u in c.unverified]
    if unverified:
        out["data_unverified"] = unverified
    return out


def _stamp(row: Result, spec: ModelSpec, encoder, ctx: RunContext, task, cfg: dict,
           cfg_hash: str, wall_s: float, seed: int) -> Result:
    main = task is not None and (row.metric, row.aggregation) == (task.main_metric, task.main_aggregation)
    paper, paper_source = (row.paper_value, row.paper_source) if row.paper_value is not None else (None, "")
    if main and paper is None:  # the one source of paper values: reports/paper_values.csv
        paper, paper_source = paper_values().for_row(spec.name, row.suite, row.task, row.metric, row.attack,
                                                     row.split, prefer=spec.paper_ref)
    return replace(
        row, model=spec.name, seed=seed, pooler=spec.pooler, method=spec.method or "",
        weights_sha256=encoder.weights_sha256, model_source=spec.model_source, batch_size=ctx.batch_size,
        dtype=encoder.dtype,
        device=encoder.device, profile=ctx.profile, config_hash=cfg_hash,
        # A row may add its own settings (e.g. the attack's repr) to the run configuration.
        config=json.dumps({**cfg, **(json.loads(row.config) if row.config else {})}, sort_keys=True, default=str),
        paper_value=paper, paper_source=paper_source,
        package_versions=package_versions(), git_commit=git_commit(), created_at=now_iso(),
        wall_s=row.wall_s if row.wall_s is not None else wall_s,
    )


def for_model(ctx: RunContext, spec: ModelSpec) -> RunContext:
    """``ctx`` with the model's pooler and maximum length in it where they enter the key (``key_config``)."""
    return replace(ctx, model_config=key_config(spec))


def cell_config(suite: SuitePlugin, task, ctx: RunContext) -> dict:
    """A task cell's configuration, the one place it is assembled: the suite's own part (``suite.config``: its
    task, options and scorer version), then what the runner knows: the fingerprints of the data the key names
    (``suite.keyed_datasets``), the model's key settings (``ctx.model_config``) and the precision."""
    return {**suite.config(task, ctx), **data_config(suite.keyed_datasets(task, ctx), ctx), **ctx.model_config,
            **precision_config(ctx)}


def cell_key(suite: SuitePlugin, spec: ModelSpec, weights_sha256: str, task, ctx: RunContext) -> CellKey:
    """The store key of one (model, weights, suite, task, seed, config) cell; ``ctx`` carries the seed."""
    ctx = for_model(ctx, spec)
    cfg_hash = config_hash(cell_config(suite, task, ctx))
    return CellKey(spec.name, weights_sha256, suite.name, task.name, ctx.seed, cfg_hash)


def summary_config(suite: SuitePlugin, tasks: list, ctx: RunContext) -> dict:
    # Options as the suite resolves them (e.g. transfer's default mode), so an omitted option and its
    # explicit default share one summary cell, as their task cells do.
    tasks = suite.summarized(tasks, ctx)
    resolved = suite.config(tasks[0], ctx) if tasks else {}
    return {"suite": suite.name, "summary_of": sorted(t.name for t in tasks), "limit": ctx.limit,
            "scorer_version": f"{suite.name}-{suite.version}." + ".".join(str(t.version) for t in tasks),
            "profile": ctx.profile, **{o.name: resolved.get(o.name, ctx.options.get(o.name)) for o in suite.options
                                        if o.changes_numbers},
            # the summary averages cells computed on this data: another data set is another summary cell
            **data_config([d for t in tasks for d in suite.datasets(t)], ctx), **ctx.model_config,
            **precision_config(ctx), **suite.averages_config(ctx)}


def run_cell(suite: SuitePlugin, spec: ModelSpec, ctx: RunContext, encoder, task, store=None) -> TaskOutcome:
    """One task cell at ``ctx.seed``: reused from the store under ``ctx.overwrite``, else computed and written."""
    store = store or ctx.store
    ctx = for_model(ctx, spec)
    cfg = cell_config(suite, task, ctx)
    key = cell_key(suite, spec, encoder.weights_sha256, task, ctx)
    found = None if ctx.overwrite == "always" else store.existing(key, any_config=ctx.overwrite == "never")
    if found is not None:
        return TaskOutcome(task.name, store.read(found)["results"], found, True, 0.0)
    start = time.perf_counter()
    rows = suite.run_task(task, encoder, ctx)
    wall = time.perf_counter() - start
    rows = [_stamp(r, spec, encoder, ctx, task, cfg, key.config_hash, wall, ctx.seed) for r in rows]
    evidence = apply_uncertainty(rows)  # 95% CIs from the rows' per-example evidence (bench/scoring/stats.py)
    path = store.write(key, rows, cfg, evidence=evidence)
    return TaskOutcome(task.name, store.read(path)["results"], path, False, wall)


def run_summary(suite: SuitePlugin, spec: ModelSpec, ctx: RunContext, encoder, tasks: list,
                seed_outcomes: list[TaskOutcome], store=None) -> TaskOutcome | None:
    """The suite's summary cell (e.g. the STS average) over one seed's task outcomes, if it has one."""
    store = store or ctx.store
    ctx = for_model(ctx, spec)
    seed_outcomes = [o for o in seed_outcomes if o.rows]
    summary = suite.summarize([r for o in seed_outcomes for r in o.rows], ctx)
    if not summary:
        return None
    cfg = summary_config(suite, tasks, ctx)
    key = CellKey(spec.name, encoder.weights_sha256, suite.name, summary[0].task, ctx.seed, config_hash(cfg))
    found = store.existing(key)
    if found is not None and all(o.cached for o in seed_outcomes):
        return TaskOutcome(summary[0].task, store.read(found)["results"], found, True, 0.0)
    task = suite.summary_task_of(suite.run_protocol(ctx))
    rows = [_stamp(r, spec, encoder, ctx, task, cfg, key.config_hash, 0.0, ctx.seed) for r in summary]
    evidence = summary_uncertainty(rows, [(o.path, o.rows) for o in seed_outcomes], store)
    path = store.write(key, rows, cfg, evidence=evidence)
    return TaskOutcome(summary[0].task, store.read(path)["results"], path, False, 0.0)


def check_encoder_fits(suite: SuitePlugin, encoder, ctx: RunContext) -> None:
    """A BenchError (exit 2) before any work when ``suite`` with these options fine-tunes the encoder and
    ``encoder`` exposes no network (a function or another object known only by its embeddings)."""
    from bench.models.model_objects import has_network

    reason = suite.needs_network(ctx)
    if not reason or has_network(encoder):
        return
    fine = [s.name for s in all_suites() if not s.needs_network(replace(ctx, options={}))]
    raise BenchError(f"Model '{encoder.name}' is known only by its embeddings (no network to fine-tune), and the "
                     f"{suite.name} suite {reason}. What works for it: the suites {', '.join(fine)}; "
                     f"{'; '.join(h for s in all_suites() if (h := s.embedding_only_hint()))}.")


def run_suite(suite: SuitePlugin, spec: ModelSpec, ctx: RunContext, encoder, task_names=None) -> list[TaskOutcome]:
    """Run (or reuse) each task cell of the run's protocol (``ctx.protocol``, else the suite's default; on
    ``task_names`` when given), then the suite's summary cell, then refresh the leaderboard."""
    protocol = suite.run_protocol(ctx)
    ctx = replace(ctx, protocol=protocol.with_tasks(task_names) if task_names else protocol)
    tasks = suite.plan_tasks(ctx.protocol)
    store = ctx.store
    outcomes: list[TaskOutcome] = []
    try:
        for seed in suite.seeds(ctx):
            seeded = replace(ctx, seed=seed)
            seed_outcomes = [run_cell(suite, spec, seeded, encoder, task, store)
                             for task in ctx.track(tasks, len(tasks), f"{suite.name} {spec.name} seed {seed}: tasks")]
            outcomes += seed_outcomes
            summary = run_summary(suite, spec, seeded, encoder, tasks, seed_outcomes, store)
            if summary is not None:
                outcomes.append(summary)
    finally:  # interrupted (Ctrl-C) or failed too: the cells that finished reach the leaderboard and the card
        store.write_leaderboard()
        export_metadata(ctx.paths.results, suites=[suite], models=[spec],  # labels, model facts, dev curves
                        models_dir=ctx.paths.models)
    return outcomes


def suites_of(plan) -> list[tuple[object, object]]:
    """(protocol, its suite) for each entry of a plan: a bench.protocols.Protocol (run by the registered suite
    of its name) or a (protocol, suite object) pair (a suite given as an object, e.g. to ``bench.evaluate``)."""
    return [entry if isinstance(entry, tuple) else (entry, get_suite(entry.suite)) for entry in plan]


def plan_protocol(*, suite: str | None = None, protocol: str | None = None, tasks=None, profile: str):
    """What one run follows: the protocol named ``protocol`` (on those of its tasks ``tasks`` names), else
    ``suite``'s default protocol for ``profile`` (on ``tasks``, any of the suite's); unknown names fail with
    the closest ones."""
    from bench.protocols import protocol as named

    if protocol is not None:
        chosen = named(protocol)
        get_suite(chosen.suite)  # its suite registered, its tasks and recipes the suite's (check_protocols)
        return chosen.restricted(tasks) if tasks else chosen
    owner = get_suite(suite)
    return owner.default_protocol(profile).with_tasks([owner.task(n).name for n in tasks]) if tasks \
        else owner.default_protocol(profile)


def check_data(plan, ctx: RunContext, log) -> None:
    """Check every data file the plan's tasks read (a BenchError names a file that differs), before any work;
    files let through by --allow-unverified-data are logged."""
    datasets = [d for p, suite in suites_of(plan) for t in suite.plan_tasks(p) for d in suite.datasets(t)]
    for item in data_config(datasets, ctx).get("data_unverified", []):
        log(f"[yellow]Unverified data (--allow-unverified-data; recorded in each row):[/yellow] {item}")


def check_fits(plan, encoder, ctx: RunContext) -> None:
    """A BenchError (exit 2) when a suite of ``plan`` needs a network ``encoder`` does not expose."""
    for p, suite in suites_of(plan):
        check_encoder_fits(suite, encoder, replace(ctx, protocol=p))


def run_plan(spec: ModelSpec, plan, ctx: RunContext, encoder) -> list[tuple[object, list[TaskOutcome]]]:
    """Run each protocol of ``plan`` (``suites_of``: protocols, each naming its suite and tasks) on
    ``encoder``: the run path of `bench run` and ``bench.evaluate``. Every suite is checked to fit the encoder
    first (``check_encoder_fits``)."""
    ctx = replace(ctx, device=encoder.device, dtype=encoder.dtype)
    check_fits(plan, encoder, ctx)
    return [(suite, run_suite(suite, spec, replace(ctx, protocol=p), encoder)) for p, suite in suites_of(plan)]


# ---------------------------------------------------------------- opening the model of a run ----------------

def open_model(model, paths: Paths, *, device: str, dtype: str, batch_size: int, name: str | None = None,
               pooler: str | None = None, models_file=None) -> tuple[ModelSpec, object]:
    """(ModelSpec, encoder) for a run: `bench run`, ``bench.evaluate`` and a grid worker open models here.

    ``model``: a ModelSpec, a ``--model`` text (a name, ``hf:ORG/NAME``, a directory) or a Python object
    (``bench.models.model_objects.wrap``, filed under ``name``). ``dtype`` (auto|fp32|bf16|fp16) is the
    requested precision. Opening never trains: a registered model whose checkpoint is missing raises
    ``CheckpointMissing`` (its message names the fix); the app or the API trains it first when it should.
    """
    import os

    if not isinstance(model, (ModelSpec, str, os.PathLike)):
        return _open_object(model, name, batch_size)
    from bench.models import hub
    from bench.models.encoder import Encoder, pick_device, resolve_dtype
    from bench.models.registry import known_models, resolve_model

    spec = model if isinstance(model, ModelSpec) else resolve_model(str(model), paths, pooler=pooler,
                                                                     models_file=models_file)
    hub.require_model(spec, paths.models, known_models(paths, models_file))  # offline: one message, now
    resolve_dtype(pick_device(device), dtype)  # fp16 off CUDA fails here, before any weights load
    return spec, Encoder.from_spec(spec, paths.models, device=device, batch_size=batch_size, dtype=dtype)


def _open_object(model, name: str, batch_size: int) -> tuple[ModelSpec, object]:
    """A Python object's encoder and the spec its rows are filed under (identity: ``model_objects``)."""
    from bench.models.model_objects import wrap

    encoder = wrap(model, name=name, batch_size=batch_size)
    identity = f"{encoder.source}; identity: {encoder.identity_note}"
    spec = ModelSpec(name=name, backbone=encoder.source, pooler=encoder.pooler, max_len=encoder.max_len or 512,
                     source=identity, description=f"evaluated from Python (bench.evaluate): {identity}")
    return spec, encoder


# ---------------------------------------------------------------- stored work, without the model ---------------

def stored_plan(spec: ModelSpec, plan, ctx: RunContext) -> list[tuple[object, list[TaskOutcome]]] | None:
    """Every task cell of ``plan``'s protocols (each seed; the suite's summary cell too where one is stored) as the store
    holds it under this configuration, found without opening the model: for a model whose weights are not at
    hand (``weights_at_hand``), so that reproducing stored results trains, builds and downloads nothing.
    None when a task cell is missing, or no one set of weights has them all (``stored_weights``), or
    ``ctx.overwrite`` is "always"."""
    if ctx.overwrite == "always":
        return None
    found = []  # (suite, task name, summary?, its stored cells)
    for p, suite in suites_of(plan):
        tasks = suite.plan_tasks(p)
        for seed in suite.seeds(ctx):
            seeded = for_model(replace(ctx, seed=seed, protocol=p), spec)
            found += [(suite, t.name, False, stored_cells(ctx.store, suite, spec.name, t.name, seed,
                                                          cell_config(suite, t, seeded))) for t in tasks]
            if suite.summary_task is not None and suite.summarized(tasks, seeded):
                found.append((suite, suite.summary_task.name, True, stored_cells(
                    ctx.store, suite, spec.name, suite.summary_task.name, seed, summary_config(suite, tasks, seeded))))
    weights = stored_weights([cells for _, _, summary, cells in found if not summary])
    if weights is None:
        return None
    done: dict = {}
    for suite, task, _, cells in found:
        done.setdefault(suite, []).extend(TaskOutcome(task, payload["results"], path, True, 0.0)
                                          for path, payload in cells if payload["cell"]["weights_sha256"] == weights)
    return list(done.items())


def stored_cells(store: ResultStore, suite: SuitePlugin, model: str, task: str, seed: int, cfg: dict) -> list:
    """(path, payload) of the readable cells of (model, suite, task, seed) under ``cfg`` (as the suite compares it
    with each cell's, ``stored_config``), whatever their weights."""
    return [(path, payload) for path, payload in store.cells_of(model, suite.name, task)
            if payload["cell"]["seed"] == seed
            and config_hash(suite.stored_config(cfg, payload.get("config") or {})) == payload["cell"]["config_hash"]]


def stored_weights(cells: list[list[tuple]]) -> str | None:
    """The weights (sha256) under which every one of ``cells`` (each a list of one cell's stored versions) is
    stored: the one set that has them all, or of several the one whose newest cell is newest (the one the
    reports show); None when a cell is not stored at all or no set of weights has every cell."""
    if not cells or not all(cells):
        return None
    common = set.intersection(*({payload["cell"]["weights_sha256"] for _, payload in versions} for versions in cells))

    def newest(weights: str) -> str:
        return max(r.get("created_at") or "" for versions in cells for _, payload in versions
                   if payload["cell"]["weights_sha256"] == weights for r in payload["results"])

    return max(sorted(common), key=newest) if common else None


def weights_at_hand(spec: ModelSpec, paths: Paths, known: dict) -> bool:
    """Whether opening ``spec`` needs nothing made first: no training (its checkpoint is there), no build (a
    provider such as `bench resources build`'s masked LM answers) and no download (every Hub model it needs
    is cached)."""
    from bench.models import hub
    from bench.models.encoder import resolve_backbone

    try:
        resolve_backbone(spec, paths.models)
    except (BenchError, ValueError):
        return False
    return all(hub.is_cached(repo, revision) for repo, revision in hub.needed_models(spec, paths.models, known))

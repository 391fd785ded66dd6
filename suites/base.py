"""What every suite shares: the Task record, the Suite base class and the loop that runs them.

The base owns the loop (cache check, progress, timing, provenance, atomic writes); a suite
only says how to score one task with an encoder.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from bench.errors import BenchError, lookup
from bench.metadata import export as export_metadata
from bench.papers import paper_values
from bench.plugins import Option
from bench.paths import Paths
from bench.registry import ModelSpec, key_config
from bench.store import CellKey, Result, ResultStore, config_hash, git_commit, now_iso, package_versions
from bench.uncertainty import AverageOf, apply_uncertainty, summary_uncertainty  # noqa: F401 (AverageOf: for suites)

OVERWRITE_MODES = ("never", "only-missing", "always")


@dataclass(frozen=True, kw_only=True)
class Task:
    """A task record, by keyword. ``label`` is how tables print it (the papers' spelling, e.g. "STS-B")."""

    suite: str
    name: str
    dataset: str
    split: str
    main_metric: str
    main_aggregation: str = "all"
    label: str = ""
    description: str = ""
    paper_ref: str = ""
    version: int = 1  # the task's scorer version: bump it with any change that moves its numbers

    def describe(self) -> dict:
        return {"name": self.name, "label": self.label or self.name, "dataset": self.dataset, "split": self.split,
                "main_metric": self.main_metric, "main_aggregation": self.main_aggregation,
                "description": self.description, "paper_ref": self.paper_ref, "version": self.version}


@dataclass
class RunContext:
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
    allow_unverified_data: bool = False  # use data files whose sha256 differs from bench/data_files.tsv
    model_config: dict = field(default_factory=dict)  # the model's key settings (bench.registry.key_config)

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
    task: str
    rows: list[dict]
    path: Path
    cached: bool
    wall_s: float


class Suite:
    """Subclasses set ``name``, ``description``, ``tasks`` and implement ``run_task``."""

    name: str = ""
    description: str = ""
    version: int = 1  # the suite's scorer version: bump it with any change that moves its numbers
    tasks: tuple[Task, ...] = ()
    options: tuple[Option, ...] = ()  # typed options (bench/plugins.py); the number-changing ones enter the config
    needs_encoder: bool = True
    summary_task: Task | None = None  # the Task that summary rows (averages) belong to

    label: str = ""  # how reports name the suite
    named_protocol: str = ""  # bench/protocols.toml: its tasks run by default and only they join the summary

    def task(self, name: str) -> Task:
        return lookup("task", {t.name: t for t in self.tasks}, name)

    def default_tasks(self) -> list[Task]:
        """The tasks run when none is named: the protocol's (every task of a suite without one)."""
        if not self.named_protocol:
            return list(self.tasks)
        from bench.protocols import protocol

        wanted = [self.task(name).name for name in protocol(self.named_protocol).tasks]  # unknown names fail
        return [t for t in self.tasks if t.name in wanted]

    def summarized(self, tasks) -> list[Task]:
        """The tasks of ``tasks`` that the summary (average) is over: those its protocol averages."""
        if not self.named_protocol:
            return list(tasks)
        from bench.protocols import protocol

        return [t for t in tasks if t.name in protocol(self.named_protocol).averaged]

    def describe(self) -> dict:
        """The suite's self-description, exported beside the results (``bench.metadata``) for reports."""
        tasks = list(self.tasks) + ([self.summary_task] if self.summary_task is not None else [])
        return {"name": self.name, "label": self.label or self.name, "description": self.description,
                "version": self.version, "options": [o.describe() for o in self.options],
                "tasks": {t.name: t.describe() for t in tasks}, "labels": self.labels()}

    def labels(self) -> dict:
        """Extra display labels a suite's rows need (e.g. attack recipes: {"attack": {name: label}})."""
        return {}

    def config(self, task: Task, ctx: RunContext) -> dict:
        # The scorer version is part of the configuration, so a fix that moves numbers never reuses old cells.
        cfg = {"suite": self.name, "task": task.name, "split": task.split, "limit": ctx.limit,
               "profile": ctx.profile, "scorer_version": f"{self.name}-{self.version}.{task.version}"}
        cfg.update({opt.name: ctx.options.get(opt.name) for opt in self.options if opt.changes_numbers})
        cfg.update(data_config(self.datasets(task), ctx))
        return {**cfg, **ctx.model_config, **precision_config(ctx)}

    def datasets(self, task: Task) -> tuple[str, ...]:
        """The datasets whose content decides the task's numbers; their fingerprints enter the cell
        configuration. Default: the task's own dataset. A suite that also reads others (e.g. training
        data that is always present) adds them here."""
        return (task.dataset,) if task.dataset else ()

    def seeds(self, ctx: RunContext) -> list[int]:
        return [ctx.seed]

    def preflight(self, tasks: list[Task], ctx: RunContext) -> None:
        """Refuse now (a BenchError, exit 2) what would fail only after the model loads, e.g. attack
        resources that are not built. Default: nothing to check."""

    def run_task(self, task: Task, encoder, ctx: RunContext) -> list[Result]:
        raise NotImplementedError

    def needs_network(self, ctx: RunContext) -> str:
        """Why this run needs the encoder's network (fine-tuning it), or "" when embeddings are enough. An
        encoder known only by its embeddings (a function) is refused such a run (``check_encoder_fits``)."""
        return ""

    def embedding_only_hint(self) -> str:
        """How to run this suite on an encoder known only by its embeddings, if an option allows it ("")."""
        return ""

    def summarize(self, rows: list[dict], ctx: RunContext) -> list[Result]:
        """Rows derived from the finished tasks (e.g. averages). Default: none."""
        return []


def precision_config(ctx: RunContext) -> dict:
    """The precision in a cell's configuration: float32 (the reference) adds nothing, so cells written
    before --dtype existed stay valid; any other dtype is a separate cell."""
    return {} if ctx.dtype == "float32" else {"dtype": ctx.dtype}


def data_config(datasets, ctx: RunContext) -> dict:
    """``{"data": {dataset: fingerprint}}`` after checking every file's sha256 against
    bench/data_files.tsv (cached by file identity, so a re-run re-reads nothing). A mismatch is a
    BenchError naming the file, unless ``ctx.allow_unverified_data``: then the differing files are
    listed under ``data_unverified`` (so in every row's config) and the fingerprint keeps those cells
    apart from cells on the reference data."""
    from bench.data import check_content

    checks = [check_content(ctx.paths.data, name, ctx.paths.cache, ctx.allow_unverified_data)
              for name in dict.fromkeys(datasets)]
    out: dict = {"data": {c.dataset: c.fingerprint for c in checks}} if checks else {}
    unverified = [f"{c.dataset}/{u}" for c in checks for u in c.unverified]
    if unverified:
        out["data_unverified"] = unverified
    return out


def _stamp(row: Result, spec: ModelSpec, encoder, ctx: RunContext, task: Task | None, cfg: dict,
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


def cell_key(suite: Suite, spec: ModelSpec, weights_sha256: str, task: Task, ctx: RunContext) -> CellKey:
    """The store key of one (model, weights, suite, task, seed, config) cell; ``ctx`` carries the seed."""
    ctx = for_model(ctx, spec)
    return CellKey(spec.name, weights_sha256, suite.name, task.name, ctx.seed, config_hash(suite.config(task, ctx)))


def summary_config(suite: Suite, tasks: list[Task], ctx: RunContext) -> dict:
    # Options as the suite resolves them (e.g. transfer's default mode), so an omitted option and its
    # explicit default share one summary cell, as their task cells do.
    tasks = suite.summarized(tasks)
    resolved = suite.config(tasks[0], ctx) if tasks else {}
    return {"suite": suite.name, "summary_of": sorted(t.name for t in tasks), "limit": ctx.limit,
            "scorer_version": f"{suite.name}-{suite.version}." + ".".join(str(t.version) for t in tasks),
            "profile": ctx.profile, **{o.name: resolved.get(o.name, ctx.options.get(o.name)) for o in suite.options
                                        if o.changes_numbers},
            # the summary averages cells computed on this data: another data set is another summary cell
            **data_config([d for t in tasks for d in suite.datasets(t)], ctx), **ctx.model_config,
            **precision_config(ctx)}


def run_cell(suite: Suite, spec: ModelSpec, ctx: RunContext, encoder, task: Task, store=None) -> TaskOutcome:
    """One task cell at ``ctx.seed``: reused from the store under ``ctx.overwrite``, else computed and written."""
    store = store or ctx.store
    ctx = for_model(ctx, spec)
    cfg = suite.config(task, ctx)
    key = cell_key(suite, spec, encoder.weights_sha256, task, ctx)
    found = None if ctx.overwrite == "always" else store.existing(key, any_config=ctx.overwrite == "never")
    if found is not None:
        return TaskOutcome(task.name, store.read(found)["results"], found, True, 0.0)
    start = time.perf_counter()
    rows = suite.run_task(task, encoder, ctx)
    wall = time.perf_counter() - start
    rows = [_stamp(r, spec, encoder, ctx, task, cfg, key.config_hash, wall, ctx.seed) for r in rows]
    evidence = apply_uncertainty(rows)  # 95% CIs from the rows' per-example evidence (bench/stats.py)
    path = store.write(key, rows, cfg, evidence=evidence)
    return TaskOutcome(task.name, store.read(path)["results"], path, False, wall)


def run_summary(suite: Suite, spec: ModelSpec, ctx: RunContext, encoder, tasks: list[Task],
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
    rows = [_stamp(r, spec, encoder, ctx, suite.summary_task, cfg, key.config_hash, 0.0, ctx.seed) for r in summary]
    evidence = summary_uncertainty(rows, [(o.path, o.rows) for o in seed_outcomes], store)
    path = store.write(key, rows, cfg, evidence=evidence)
    return TaskOutcome(summary[0].task, store.read(path)["results"], path, False, 0.0)


def check_encoder_fits(suite: Suite, encoder, ctx: RunContext) -> None:
    """A BenchError (exit 2) before any work when ``suite`` with these options fine-tunes the encoder and
    ``encoder`` exposes no network (a function or another object known only by its embeddings)."""
    from bench.model_objects import has_network

    reason = suite.needs_network(ctx)
    if not reason or has_network(encoder):
        return
    from suites import all_suites

    fine = [s.name for s in all_suites() if not s.needs_network(replace(ctx, options={}))]
    raise BenchError(f"Model '{encoder.name}' is known only by its embeddings (no network to fine-tune), and the "
                     f"{suite.name} suite {reason}. What works for it: the suites {', '.join(fine)}; "
                     f"{'; '.join(h for s in all_suites() if (h := s.embedding_only_hint()))}.")


def run_suite(suite: Suite, spec: ModelSpec, ctx: RunContext, encoder, task_names=None) -> list[TaskOutcome]:
    """Run (or reuse) each task cell, then the suite's summary cell, then refresh the leaderboard."""
    tasks = [suite.task(n) for n in task_names] if task_names else suite.default_tasks()
    store = ctx.store
    outcomes: list[TaskOutcome] = []
    for seed in suite.seeds(ctx):
        seeded = replace(ctx, seed=seed)
        seed_outcomes = [run_cell(suite, spec, seeded, encoder, task, store)
                         for task in ctx.track(tasks, len(tasks), f"{suite.name} {spec.name} seed {seed}: tasks")]
        outcomes += seed_outcomes
        summary = run_summary(suite, spec, seeded, encoder, tasks, seed_outcomes, store)
        if summary is not None:
            outcomes.append(summary)
    store.write_leaderboard()
    export_metadata(ctx.paths.results, suites=[suite], models=[spec],  # labels, model facts, dev curves for reports
                    models_dir=ctx.paths.models)
    return outcomes


def row(task: Task, metric: str, value, n: int | None, aggregation: str | None = None,
        split: str | None = None, **extra) -> Result:
    """A Result for ``task`` with the provenance fields left for the runner to stamp.

    ``evidence=`` (a ``bench.stats.Evidence``: per-pair predictions and gold, per-example outcomes)
    is what the base turns into the row's 95% CI and stores beside the cell for paired tests; a
    summary row passes ``evidence=AverageOf(task rows)`` for an average over tasks."""
    return Result(model="", suite=task.suite, task=task.name, split=split or task.split, metric=metric,
                  aggregation=aggregation or task.main_aggregation, value=value, n=n, **extra)

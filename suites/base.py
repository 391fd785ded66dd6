"""What a suite declares: the Task record, the Suite base class and the ``row`` helper.

A suite only says how to score one task with an encoder; the kernel runs it (``bench/runner.py``: the cache
check, progress, timing, provenance, atomic writes). What a run covers (tasks, splits, averages, headline
metrics, recipes) is its protocol's (``bench/protocols.py``: the one it names, else the suite's default),
which the base turns into tasks (``plan_tasks``) and average rows (``summarize``). ``RunContext`` (what a
run passes to the suite) and ``TaskOutcome`` are the runner's, re-exported here for suites; a suite's
``config`` is only its own part of a cell's configuration (``bench.runner.cell_config`` adds the rest).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import numpy as np

from bench.errors import lookup
from bench.plugins import PROFILES, Option
from bench.protocols import Average, Protocol, default_for
from bench.runner import RunContext, TaskOutcome  # noqa: F401 (for suites)
from bench.results.averages import AVERAGE_OF
from bench.results.store import Result
from bench.results.uncertainty import AverageOf  # noqa: F401 (for suites' summary rows)


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
    splits: tuple[str, ...] = ()  # every split it can be scored on (a protocol's choice); () = its own only

    def describe(self) -> dict:
        return {"name": self.name, "label": self.label or self.name, "dataset": self.dataset, "split": self.split,
                "main_metric": self.main_metric, "main_aggregation": self.main_aggregation,
                "description": self.description, "paper_ref": self.paper_ref, "version": self.version}


class Suite:
    """Subclasses set ``name``, ``description``, ``tasks`` and implement ``run_task``."""

    name: str = ""
    description: str = ""
    version: int = 1  # the suite's scorer version: bump it with any change that moves its numbers
    tasks: tuple[Task, ...] = ()
    metrics: tuple[str, ...] = ()  # metrics its rows write besides its tasks' main metrics (the cell schema's)
    options: tuple[Option, ...] = ()  # typed options (bench/plugins.py); the number-changing ones enter the config
    needs_encoder: bool = True
    summary_task: Task | None = None  # the Task that summary rows (averages) belong to
    # Config keys that describe a cell's other rows rather than a given row: key -> the row ``attack`` it applies
    # to ("": none). Reports leave them out of a row's setting (reports/results.py ``row_setting``).
    row_scoped: dict[str, str] = {}

    label: str = ""  # how reports name the suite
    # Averages: written only when every task of an average ran (else over those that ran), rounded (or not).
    complete_averages: bool = False
    average_decimals: int | None = None

    def declared_metrics(self) -> set[str]:
        """Every metric this suite's rows may carry: its tasks' main and clean metrics, and ``metrics``."""
        return {m for t in self.tasks for m in (t.main_metric, *getattr(t, "clean_metrics", ()))} | set(self.metrics)

    def task(self, name: str) -> Task:
        return lookup("task", {t.name: t for t in self.tasks}, name)

    # --- what a run covers: its protocol --------------------------------------------------------------

    def default_protocol(self, profile: str = PROFILES[0]) -> Protocol:
        """What a run naming no protocol follows on ``profile``: the protocol protocols.toml names as this
        suite's default there, else every task of the suite (no average, no recipe)."""
        return default_for(self.name, profile) or Protocol(name=self.name, suite=self.name, title=self.description,
                                                           tasks=tuple(t.name for t in self.tasks))

    def run_protocol(self, ctx: RunContext) -> Protocol:
        """The protocol this run follows: the one it carries when it is this suite's, else the default."""
        chosen = ctx.protocol
        return chosen if chosen is not None and chosen.suite == self.name else self.default_protocol(ctx.profile)

    def planned_task(self, name: str, protocol: Protocol) -> Task:
        """Task ``name`` as ``protocol`` scores it: on its split for the task (UnknownName for a task the
        suite lacks)."""
        task = self.task(name)
        split = protocol.split_of(task.name, task.split)
        return task if split == task.split else replace(task, split=split)

    def plan_tasks(self, protocol: Protocol) -> list[Task]:
        return [self.planned_task(name, protocol) for name in protocol.tasks]

    def default_tasks(self, profile: str = PROFILES[0]) -> list[Task]:
        """The tasks a run naming none covers: its default protocol's."""
        return self.plan_tasks(self.default_protocol(profile))

    def recipe_names(self) -> tuple[str, ...]:
        """The attack recipes a protocol of this suite may name (none, unless the suite attacks)."""
        return ()

    def protocol_problem(self, declared: Protocol) -> str:
        """What is wrong with a protocol of protocols.toml that names this suite ("" when nothing): a task the
        suite lacks, a split a task cannot be scored on, an unknown metric, or a recipe it cannot run."""
        from bench.results.cell_schema import METRICS

        tasks = {t.name: t for t in self.tasks}
        unknown = [name for name in declared.tasks if name not in tasks]
        if unknown:
            return (f"names task(s) {', '.join(unknown)} that the suite '{self.name}' does not have (it has: "
                    f"{', '.join(sorted(tasks))}; `bench ls tasks`)")
        for name in declared.tasks:
            split, task = declared.split_of(name, tasks[name].split), tasks[name]
            if split not in (task.splits or (task.split,)):
                return f"scores task {name} on split '{split}', which it has not (it has: " \
                       f"{', '.join(task.splits or (task.split,))})"
        if set(declared.metric) - METRICS:
            return f"names metric(s) {', '.join(sorted(set(declared.metric) - METRICS))} that no suite writes"
        stray = [name for name in declared.recipes if name not in self.recipe_names()]
        if stray:
            return (f"names recipe(s) {', '.join(stray)} that the suite '{self.name}' cannot run ("
                    f"{', '.join(self.recipe_names()) or 'it runs no attack recipe'}; `bench ls recipes`)")
        return ""

    def stored_config(self, cfg: dict, stored: dict) -> dict:
        """``cfg`` as it is compared with a stored cell's configuration ``stored`` when the model's weights are
        not at hand (``bench.runner.stored_plan``). Default: as it is."""
        return cfg

    # --- averages: the summary cell -------------------------------------------------------------------

    def summarized(self, tasks, ctx: RunContext) -> list[Task]:
        """The tasks of ``tasks`` that the run protocol's averages are over."""
        averaged = {name for average in self.run_protocol(ctx).averages for name in average.tasks}
        return [t for t in tasks if t.name in averaged]

    def summary_task_of(self, protocol: Protocol) -> Task | None:
        """The summary task as ``protocol`` heads it: its headline metric and its first average."""
        if self.summary_task is None or not protocol.averages:
            return self.summary_task
        return replace(self.summary_task, main_metric=protocol.headline_metric or self.summary_task.main_metric,
                       main_aggregation=protocol.averages[0].aggregation)

    def averaging(self, protocol: Protocol) -> dict:
        """How ``protocol`` averages: each average's name and tasks, the headline rows' metrics, aggregation
        and split per task."""
        return {"averages": [{"aggregation": a.aggregation, "tasks": list(a.tasks)} for a in protocol.averages],
                "metrics": list(protocol.metric), "aggregation": protocol.aggregation,
                "splits": {name: protocol.split_of(name, self.task(name).split)
                           for average in protocol.averages for name in average.tasks}}

    def averages_config(self, ctx: RunContext) -> dict:
        """What the run's protocol adds to the summary cell's configuration: how it averages, when that is not
        how the suite's default protocol does (so a default run keeps the key it had before protocols ran by
        name, and a protocol averaging alike shares its cell)."""
        mine = self.averaging(self.run_protocol(ctx))
        return {} if mine == self.averaging(self.default_protocol(ctx.profile)) else {"averaging": mine}

    def headline_rows(self, rows: list[dict], protocol: Protocol) -> list[dict]:
        """The task rows the protocol's averages read: each task's headline metrics, on its split, under its
        headline aggregation, with a value."""
        tasks = {t.name: t for t in self.tasks}
        out = []
        for r in rows:
            task = tasks.get(r["task"])
            if task is None or r["value"] is None:
                continue
            if (r["metric"] in (protocol.metric or (task.main_metric,))
                    and r["split"] == protocol.split_of(task.name, task.split)
                    and r["aggregation"] == (protocol.aggregation or task.main_aggregation)):
                out.append(r)
        return out

    def averaged_rows(self, rows: list[dict], ctx: RunContext) -> list[tuple[Average, str, list[dict]]]:
        """(average, metric, the rows it is over) for each average of the run's protocol and each headline
        metric with rows to average (with ``complete_averages``: a row for every task of the average)."""
        protocol = self.run_protocol(ctx)
        headline = self.headline_rows(rows, protocol)
        out = []
        for average in protocol.averages:
            for metric in protocol.metric or tuple(dict.fromkeys(self.task(t).main_metric for t in average.tasks)):
                used = [r for r in headline if r["metric"] == metric and r["task"] in average.tasks]
                if used and (not self.complete_averages or {r["task"] for r in used} == set(average.tasks)):
                    out.append((average, metric, used))
        return out

    def summarize(self, rows: list[dict], ctx: RunContext) -> list[Result]:
        """The run protocol's averages of the finished tasks' headline rows (none for a suite without a
        ``summary_task``); each row names the tasks it is over (``average_of`` in its configuration)."""
        if self.summary_task is None:
            return []
        out = []
        for average, metric, used in self.averaged_rows(rows, ctx):
            value = float(np.mean([r["value"] for r in used]))
            if self.average_decimals is not None:
                value = round(value, self.average_decimals)
            over = json.dumps({AVERAGE_OF: sorted(r["task"] for r in used)})
            out.append(row(self.summary_task, metric, value, len(used), aggregation=average.aggregation,
                           evidence=AverageOf(used), config=over))
        return out

    def describe(self) -> dict:
        """The suite's self-description, exported beside the results (``bench.results.metadata``) for reports."""
        summary = self.summary_task_of(self.default_protocol())
        tasks = list(self.tasks) + ([summary] if summary is not None else [])
        return {"name": self.name, "label": self.label or self.name, "description": self.description,
                "version": self.version, "options": [o.describe() for o in self.options],
                "tasks": {t.name: t.describe() for t in tasks}, "labels": self.labels(),
                "row_scoped": dict(self.row_scoped)}

    def labels(self) -> dict:
        """Extra display labels a suite's rows need (e.g. attack recipes: {"attack": {name: label}})."""
        return {}

    def config(self, task: Task, ctx: RunContext) -> dict:
        """The suite's own part of a cell's configuration: the task, its options and scorer version. The runner
        adds the rest (``bench.runner.cell_config``: data fingerprints, the model's settings, the precision)."""
        # The scorer version is part of the configuration, so a fix that moves numbers never reuses old cells.
        cfg = {"suite": self.name, "task": task.name, "split": task.split, "limit": ctx.limit,
               "profile": ctx.profile, "scorer_version": f"{self.name}-{self.version}.{task.version}"}
        cfg.update({opt.name: ctx.options.get(opt.name) for opt in self.options if opt.changes_numbers})
        treated = [opt.name for opt in self.options if opt.treatment and ctx.options.get(opt.name) is not None]
        if treated:  # only when set: untreated cells keep the keys they had before the option existed
            cfg.update({name: ctx.options[name] for name in treated}, treatments=treated)
        return cfg

    def datasets(self, task: Task) -> tuple[str, ...]:
        """The datasets whose content decides the task's numbers; their fingerprints enter the cell
        configuration. Default: the task's own dataset. A suite that also reads others (e.g. training
        data that is always present) adds them here."""
        return (task.dataset,) if task.dataset else ()

    def keyed_datasets(self, task: Task, ctx: RunContext) -> tuple[str, ...]:
        """The datasets whose fingerprints the runner puts in this run's cell configuration. Default:
        ``datasets``; a suite whose key names more data on some runs (e.g. a training mix) says so here."""
        return self.datasets(task)

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



def row(task: Task, metric: str, value, n: int | None, aggregation: str | None = None,
        split: str | None = None, **extra) -> Result:
    """A Result for ``task`` with the provenance fields left for the runner to stamp.

    ``evidence=`` (a ``bench.scoring.stats.Evidence``: per-pair predictions and gold, per-example outcomes)
    is what the base turns into the row's 95% CI and stores beside the cell for paired tests; a
    summary row passes ``evidence=AverageOf(task rows)`` for an average over tasks."""
    return Result(model="", suite=task.suite, task=task.name, split=split or task.split, metric=metric,
                  aggregation=aggregation or task.main_aggregation, value=value, n=n, **extra)

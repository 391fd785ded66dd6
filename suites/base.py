"""What a suite declares: the Task record, the Suite base class and the ``row`` helper.

A suite only says how to score one task with an encoder; the kernel runs it (``bench/runner.py``: the cache
check, progress, timing, provenance, atomic writes). ``RunContext`` (what a run passes to the suite),
``TaskOutcome``, ``data_config`` and ``precision_config`` are the runner's, re-exported here for suites.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.errors import lookup
from bench.plugins import Option
from bench.runner import RunContext, TaskOutcome, data_config, precision_config  # noqa: F401 (for suites)
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
    options: tuple[Option, ...] = ()  # typed options (bench/plugins.py); the number-changing ones enter the config
    needs_encoder: bool = True
    summary_task: Task | None = None  # the Task that summary rows (averages) belong to
    # Config keys that describe a cell's other rows rather than a given row: key -> the row ``attack`` it applies
    # to ("": none). Reports leave them out of a row's setting (reports/results.py ``row_setting``).
    row_scoped: dict[str, str] = {}

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

    def recipe_names(self) -> tuple[str, ...]:
        """The attack recipes a protocol of this suite may name (none, unless the suite attacks)."""
        return ()

    def protocol_problem(self, declared) -> str:
        """What is wrong with a protocol of protocols.toml that names this suite ("" when nothing): a task the
        suite lacks, or a recipe it cannot run."""
        tasks = {t.name for t in self.tasks}
        unknown = [name for name in declared.tasks if name not in tasks]
        if unknown:
            return (f"names task(s) {', '.join(unknown)} that the suite '{self.name}' does not have (it has: "
                    f"{', '.join(sorted(tasks))}; `bench ls tasks`)")
        stray = [name for name in declared.recipes if name not in self.recipe_names()]
        if stray:
            return (f"names recipe(s) {', '.join(stray)} that the suite '{self.name}' cannot run ("
                    f"{', '.join(self.recipe_names()) or 'it runs no attack recipe'}; `bench ls recipes`)")
        return ""

    def stored_config(self, cfg: dict, stored: dict) -> dict:
        """``cfg`` as it is compared with a stored cell's configuration ``stored`` when the model's weights are
        not at hand (``bench.runner.stored_plan``). Default: as it is."""
        return cfg

    def summarized(self, tasks) -> list[Task]:
        """The tasks of ``tasks`` that the summary (average) is over: those its protocol averages."""
        if not self.named_protocol:
            return list(tasks)
        from bench.protocols import protocol

        return [t for t in tasks if t.name in protocol(self.named_protocol).averaged]

    def describe(self) -> dict:
        """The suite's self-description, exported beside the results (``bench.results.metadata``) for reports."""
        tasks = list(self.tasks) + ([self.summary_task] if self.summary_task is not None else [])
        return {"name": self.name, "label": self.label or self.name, "description": self.description,
                "version": self.version, "options": [o.describe() for o in self.options],
                "tasks": {t.name: t.describe() for t in tasks}, "labels": self.labels(),
                "row_scoped": dict(self.row_scoped)}

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


def row(task: Task, metric: str, value, n: int | None, aggregation: str | None = None,
        split: str | None = None, **extra) -> Result:
    """A Result for ``task`` with the provenance fields left for the runner to stamp.

    ``evidence=`` (a ``bench.scoring.stats.Evidence``: per-pair predictions and gold, per-example outcomes)
    is what the base turns into the row's 95% CI and stores beside the cell for paired tests; a
    summary row passes ``evidence=AverageOf(task rows)`` for an average over tasks."""
    return Result(model="", suite=task.suite, task=task.name, split=split or task.split, metric=metric,
                  aggregation=aggregation or task.main_aggregation, value=value, n=n, **extra)

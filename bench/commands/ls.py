"""bench ls models|suites|tasks"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def add_arguments(parser):
    parser.add_argument("what", choices=["models", "suites", "tasks"])
    parser.add_argument("--suite", help="with 'tasks': only this suite")


def _models() -> Table:
    from bench.registry import MODELS

    table = Table(title="Models")
    for col in ("name", "backbone", "pooler", "training recipe", "description"):
        table.add_column(col)
    for spec in MODELS.values():
        recipe = ""
        if spec.is_trained:
            extra = ", ".join(f"{k}={v}" for k, v in spec.recipe.items())
            recipe = f"{spec.method} from {spec.base} ({spec.profile}){': ' + extra if extra else ''}"
        table.add_row(spec.name, spec.backbone if not spec.is_trained else "$BENCH_HOME/models/" + spec.name,
                      spec.pooler, recipe, spec.description)
    return table


def _suites() -> Table:
    from suites import all_suites

    table = Table(title="Suites")
    for col in ("suite", "tasks", "description"):
        table.add_column(col)
    for suite in all_suites():
        table.add_row(suite.name, ", ".join(t.name for t in suite.tasks), suite.description)
    return table


def _tasks(only: str | None) -> Table:
    from suites import all_suites, get_suite

    table = Table(title="Tasks")
    for col in ("suite", "task", "dataset", "split", "main score", "description"):
        table.add_column(col)
    for suite in [get_suite(only)] if only else all_suites():
        for t in suite.tasks:
            table.add_row(suite.name, t.name, t.dataset, t.split, f"{t.main_metric} ({t.main_aggregation})",
                          t.description)
    return table


def main(args) -> int:
    tables = {"models": _models, "suites": _suites, "tasks": lambda: _tasks(args.suite)}
    Console().print(tables[args.what]())
    return 0

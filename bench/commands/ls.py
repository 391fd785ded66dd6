"""bench ls models|suites|tasks"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def add_arguments(parser):
    parser.add_argument("what", choices=["models", "suites", "tasks", "methods", "recipes"])
    parser.add_argument("--suite", help="with 'tasks': only this suite")
    parser.add_argument("--models-file", metavar="TOML", help="with 'models': also the models this file declares")


def _models(models_file=None) -> Table:
    from bench.paths import Paths
    from bench.registry import MODELS, known_models

    table = Table(title="Models (built-in, then $BENCH_HOME/models.toml and --models-file; --model also takes "
                        "hf:ORG/NAME and model directories)")
    for col in ("name", "backbone", "pooler", "training recipe", "description"):
        table.add_column(col)
    for spec in known_models(Paths.from_env(), models_file).values():
        recipe = ""
        if spec.is_trained:
            extra = ", ".join(f"{k}={v}" for k, v in spec.recipe.items())
            recipe = f"{spec.method} from {spec.base} ({spec.profile}){': ' + extra if extra else ''}"
        where = spec.checkpoint or "$BENCH_HOME/models/" + spec.name
        table.add_row(spec.name + ("" if spec.name in MODELS else " (user)"),
                      spec.backbone if not spec.is_trained else where, spec.pooler, recipe, spec.description)
    return table


def _names(title: str, registry) -> Table:
    table = Table(title=title)
    for col in ("name", "label", "module"):
        table.add_column(col)
    for name, entry in registry.items():
        table.add_row(name, registry.label(name), entry if isinstance(entry, str) else
                      f"{entry.__module__}:{getattr(entry, '__qualname__', '')}")
    return table


def _methods() -> Table:
    from bench.methods import METHODS

    return _names("Training methods (bench train --method)", METHODS)


def _recipes() -> Table:
    from attacks.recipes import RECIPES

    return _names("Attack recipes (--recipe)", RECIPES)


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
    tables = {"models": lambda: _models(args.models_file), "suites": _suites, "tasks": lambda: _tasks(args.suite),
              "methods": _methods, "recipes": _recipes}
    Console().print(tables[args.what]())
    return 0

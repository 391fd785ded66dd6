"""bench ls models|suites|tasks|methods|recipes|datasets [--json]

On a terminal: a table. Piped (not a terminal): tab-separated lines with a header and whole values,
for scripts and logs; ``--json``: a JSON list of records. models/suites/tasks/datasets/recipes import
no torch; methods imports the method modules (torch) to read their configurations.
"""

from __future__ import annotations

import dataclasses
import json
import sys

KINDS = ("models", "suites", "tasks", "methods", "recipes", "datasets")


def add_arguments(parser):
    parser.add_argument("what", choices=KINDS)
    parser.add_argument("--suite", help="with 'tasks': only this suite")
    parser.add_argument("--json", action="store_true", help="print a JSON list of records (whole values)")


def _models(args) -> list[dict]:
    from bench.registry import MODELS

    out = []
    for spec in MODELS.values():
        recipe = ""
        if spec.is_trained:
            extra = ", ".join(f"{k}={v}" for k, v in spec.recipe.items())
            recipe = f"{spec.method} from {spec.base} ({spec.profile}){': ' + extra if extra else ''}"
        out.append({"name": spec.name,
                    "backbone": spec.backbone if not spec.is_trained else "$BENCH_HOME/models/" + spec.name,
                    "pooler": spec.pooler, "training recipe": recipe, "description": spec.description})
    return out


def _suites(args) -> list[dict]:
    from suites import all_suites

    return [{"suite": s.name, "tasks": ", ".join(t.name for t in s.tasks), "description": s.description}
            for s in all_suites()]


def _tasks(args) -> list[dict]:
    from suites import all_suites, get_suite

    return [{"suite": suite.name, "task": t.name, "dataset": t.dataset, "split": t.split,
             "main score": f"{t.main_metric} ({t.main_aggregation})", "description": t.description}
            for suite in ([get_suite(args.suite)] if args.suite else all_suites()) for t in suite.tasks]


def _methods(args) -> list[dict]:
    from bench.methods import METHOD_MODULES, get_method

    out = []
    for name in METHOD_MODULES:
        cls = get_method(name)
        defaults = cls.Config()
        settings = ", ".join(f"{f.name}={getattr(defaults, f.name)}" for f in dataclasses.fields(cls.Config))
        out.append({"method": name, "citation": cls.citation, "hyper-parameters (--set KEY=VALUE)": settings})
    return out


def _recipes(args) -> list[dict]:
    from attacks.recipes import RECIPES

    return [{"recipe": name, "description": (builder.__doc__ or "").strip().splitlines()[0] if builder.__doc__ else ""}
            for name, builder in RECIPES.items()]


def _datasets(args) -> list[dict]:
    from bench.data import DATASETS

    return [{"dataset": d.name, "root": d.root, "files": len(d.files), "optional": d.optional,
             "description": d.description} for d in DATASETS.values()]


LISTERS = {"models": _models, "suites": _suites, "tasks": _tasks, "methods": _methods, "recipes": _recipes,
           "datasets": _datasets}


def _plain(value) -> str:
    return " ".join(str(value).split())  # one line per record: no tabs or newlines inside a field


def main(args) -> int:
    records = LISTERS[args.what](args)
    if args.json:
        print(json.dumps(records, indent=1, ensure_ascii=False))
        return 0
    columns = list(records[0]) if records else []
    if not sys.stdout.isatty():  # piped: whole values, tab-separated, no styling
        print("\t".join(columns))
        for r in records:
            print("\t".join(_plain(r[c]) for c in columns))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=args.what.capitalize())
    for col in columns:
        table.add_column(col)
    for r in records:
        table.add_row(*[str(r[c]) for c in columns])
    Console().print(table)
    return 0

"""bench ls models|suites|tasks|methods|recipes|datasets|protocols [--json]

On a terminal: a table. Piped (not a terminal): tab-separated lines with a header and whole values,
for scripts and logs; ``--json``: a JSON list of records. Nothing here imports torch.
"""

from __future__ import annotations

import json
import sys

KINDS = ("models", "suites", "tasks", "methods", "recipes", "datasets", "protocols")


def add_arguments(parser):
    parser.add_argument("what", choices=KINDS)
    parser.add_argument("--suite", help="with 'tasks': only this suite")
    parser.add_argument("--models-file", metavar="TOML", help="with 'models': also the models this file declares")
    parser.add_argument("--json", action="store_true", help="print a JSON list of records (whole values)")


TITLES = {
    "models": "Models (built-in, then $BENCH_HOME/models.toml and --models-file; --model also takes hf:ORG/NAME and "
              "model directories)",
    "methods": "Training methods (bench train --method)",
    "recipes": "Attack recipes (--recipe)",
}


def _models(args) -> list[dict]:
    from bench.paths import Paths
    from bench.models.registry import MODELS, known_models

    out = []
    for spec in known_models(Paths.from_env(), args.models_file).values():
        recipe = ""
        if spec.is_trained:
            extra = ", ".join(f"{k}={v}" for k, v in spec.recipe.items())
            recipe = f"{spec.method} from {spec.base} ({spec.profile}){': ' + extra if extra else ''}"
        where = spec.checkpoint or "$BENCH_HOME/models/" + spec.name
        out.append({"name": spec.name + ("" if spec.name in MODELS else " (user)"),
                    "backbone": spec.backbone if not spec.is_trained else where, "pooler": spec.pooler,
                    "training recipe": recipe, "description": spec.description})
    return out


def _names(registry) -> list[dict]:
    from app.commands.plugins import origin

    return [{"name": name, "label": registry.label(name),
             "module": entry if isinstance(entry, str) else f"{entry.__module__}:{getattr(entry, '__qualname__', '')}",
             "origin": origin(registry.kind, name)}
            for name, entry in registry.items()]


def _methods(args) -> list[dict]:
    from bench.methods import METHODS

    return _names(METHODS)


def _recipes(args) -> list[dict]:
    from attacks.recipes import RECIPES

    return _names(RECIPES)


def _suites(args) -> list[dict]:
    from app.commands.plugins import origin
    from bench.runner import all_suites

    return [{"suite": s.name, "tasks": ", ".join(t.name for t in s.tasks), "description": s.description,
             "origin": origin("suite", s.name)} for s in all_suites()]


def _tasks(args) -> list[dict]:
    from app.commands.plugins import origin
    from bench.data.datasets import selection_set_overlap
    from bench.runner import all_suites, get_suite

    def note(task) -> str:  # a task scored on the trainer's checkpoint-selection set is not held out
        overlap = selection_set_overlap(task.dataset, (task.split, *task.splits))
        return f"may score {overlap}, bench train's checkpoint-selection set" if overlap else ""

    return [{"suite": suite.name, "task": t.name, "dataset": t.dataset, "split": t.split,
             "main score": f"{t.main_metric} ({t.main_aggregation})", "description": t.description,
             "origin": origin("task", t.name), "note": note(t)}
            for suite in ([get_suite(args.suite)] if args.suite else all_suites()) for t in suite.tasks]


def _datasets(args) -> list[dict]:
    from app.commands.plugins import origin
    from bench.data.datasets import DATASETS

    return [{"dataset": d.name, "root": d.root, "files": len(d.files), "optional": d.optional,
             "description": d.description, "origin": origin("dataset", d.name)} for d in DATASETS.values()]


def _protocols(args) -> list[dict]:
    from bench.protocols import PROTOCOLS

    return [{"protocol": name, "suite": p.suite, "tasks": ", ".join(p.tasks), "recipes": ", ".join(p.recipes),
             "averages": "; ".join(f"{a.aggregation} of {', '.join(a.tasks)}" for a in p.averages),
             "profile": p.profile, "default on": ", ".join(p.default), "title": p.title}
            for name, p in ((name, PROTOCOLS.load(name)) for name in PROTOCOLS)]


LISTERS = {"models": _models, "suites": _suites, "tasks": _tasks, "methods": _methods, "recipes": _recipes,
           "datasets": _datasets, "protocols": _protocols}


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

    table = Table(title=TITLES.get(args.what, args.what.capitalize()))
    for col in columns:
        table.add_column(col)
    for r in records:
        table.add_row(*[str(r[c]) for c in columns])
    Console().print(table)
    return 0

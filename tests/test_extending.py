"""Generic checks over every registry entry (docs/extending.md): a task, recipe or method registered
anywhere gets them without a test being edited. And the counts README.md states, read from the registries
and the claims ledger."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

import bench.runner as runner
from attacks.recipes import RECIPES
from app.commands.ls import LISTERS
from bench.methods import METHODS
from bench.paths import Paths
from bench.protocols import protocol
from bench.results.store import config_hash
from bench.runner import cell_config
from suites import SUITES, get_suite
from suites.base import RunContext

DOCS = Path(__file__).resolve().parents[1] / "docs"
README = Path(__file__).resolve().parents[1] / "README.md"
ALL_TASKS = [(name, task.name) for name in SUITES for task in get_suite(name).tasks]
NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve").split()


def listed(kind: str, **args) -> str:
    """What `bench ls <kind>` prints, as one text (the lister it runs, without starting a process)."""
    records = LISTERS[kind](SimpleNamespace(suite=None, models_file=None, json=True, **args))
    return "\n".join(" ".join(map(str, r.values())) for r in records)


@pytest.mark.parametrize("name", list(METHODS))
def test_every_method_loads_is_listed_and_documented(name):
    assert METHODS.load(name).name == name, "the registry line names a module:attribute holding the class"
    assert re.search(rf"\b{re.escape(name)}\b", listed("methods"))
    assert name in (DOCS / "training.md").read_text()


@pytest.mark.parametrize("name", list(RECIPES))
def test_every_recipe_is_listed_and_documented(name):
    assert re.search(rf"\b{re.escape(name)}\b", listed("recipes"))
    assert name in (DOCS / "attacks.md").read_text()


@pytest.mark.parametrize("suite_name,task_name", ALL_TASKS)
def test_every_task_is_listed_documented_and_keyed_stably(monkeypatch, tmp_path, suite_name, task_name):
    assert f"{suite_name} {task_name} " in listed("tasks") + " "
    docs = (DOCS / "suites.md").read_text() + (DOCS / "attacks.md").read_text()
    assert task_name in docs, f"docs/suites.md names no task '{task_name}'"
    if suite_name not in ("sts", "transfer", "alignment", "perturbation"):
        return  # the others' configurations read training data or attack resources
    monkeypatch.setattr(runner, "data_config", lambda datasets, ctx: {"data": {d: "fingerprint" for d in datasets}})
    suite = get_suite(suite_name)
    ctx = RunContext(paths=Paths(home=tmp_path, data=tmp_path, results=tmp_path), limit=10)
    before = config_hash(cell_config(suite, suite.task(task_name), ctx))
    monkeypatch.setitem(RECIPES, "dummy-recipe", lambda *a, **k: None)
    monkeypatch.setitem(METHODS, "dummy-method", "bench.methods.simcse:METHOD")
    assert config_hash(cell_config(suite, suite.task(task_name), ctx)) == before


def test_readme_counts_are_the_ledgers_and_the_protocols():
    from reports.claims import load

    text = README.read_text()
    claims = re.search(r"(\d+) headline claims", text)
    assert claims, "README.md states how many claims the ledger tests"
    papers = [c for c in load().claims if c.kind == "paper"]  # controls and the placebo are not the papers'
    assert int(claims.group(1)) == len(papers), (
        f"README.md says {claims.group(1)} claims; reports/claims.toml has {len(papers)} paper claims")
    recipes = len(protocol("robustembed-table3").recipes)
    for said in re.findall(r"\b(\w+) recipes\b", text):
        if said in NUMBER_WORDS:
            assert NUMBER_WORDS.index(said) == recipes, f"README.md says {said} recipes; the protocol runs {recipes}"

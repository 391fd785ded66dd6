"""Named protocols (bench/protocols.toml): what each suite runs and averages by default.

The main check: registering a new task, recipe and method changes no cell key and no average. Each protocol
suite's default task and summary configurations are built here, before and after the dummies are
registered; and every committed cell under results/cells of a suite with a protocol (when the checkout has
them) is keyed again from its stored configuration, with each option left out wherever leaving it out gives
the stored value (so the suite's defaults are what is checked).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import bench.runner as runner
from bench.runner import cell_config
from attacks import datasets as attack_data
from attacks.recipes import RECIPES
from bench.errors import UnknownName
from bench.methods import METHODS
from bench.paths import Paths
from bench.plugins import PROFILES
from bench.protocols import PROTOCOLS, default_for, parse, protocol
from bench.results.store import config_hash
from suites import SUITES, get_suite
from suites.base import RunContext, Task
from tests.conftest import committed_cells

PROTOCOL_SUITES = [name for name in SUITES if any(default_for(name, profile) for profile in PROFILES)]
NEEDS_COMMITTED = pytest.mark.skipif(not committed_cells(), reason="results/ holds no committed cells to key again")


def published_cells(suite_names) -> list[dict]:
    cells = []
    for path in committed_cells():
        stored = json.loads(path.read_text())
        if stored["cell"]["suite"] in suite_names:
            cells.append(stored)
    return cells


# --- the protocols themselves ------------------------------------------------------------------

@pytest.mark.parametrize("name", list(PROTOCOLS))
def test_protocol_names_only_registered_things(name):
    p = protocol(name)
    suite = get_suite(p.suite)
    assert p.tasks and set(p.averaged) <= set(p.tasks)
    for task in p.tasks:
        suite.task(task)  # UnknownName if the protocol names a task its suite lacks
    assert set(p.recipes) <= set(RECIPES), "a protocol names an unregistered recipe"


def test_protocol_typo_names_the_closest():
    with pytest.raises(UnknownName, match="robustembed-table1"):
        protocol("robustembed-tabel1")


def test_protocol_file_rejects_unknown_fields_and_stray_averages():
    with pytest.raises(ValueError, match="unknown field"):
        parse({"p": {"suite": "sts", "title": "t", "tasks": ["a"], "taks": ["a"]}})
    with pytest.raises(ValueError, match="average names tasks"):
        parse({"p": {"suite": "sts", "title": "t", "tasks": ["a"], "average": ["b"]}})
    with pytest.raises(ValueError, match="names no protocol"):
        parse({"p": {"suite": "sts", "title": "t", "tasks": ["a"], "recipes": "q"}})


def test_published_defaults_are_the_papers():
    """The lists published cells were run with, spelled here once to pin the protocol file."""
    assert [t.name for t in get_suite("sts").default_tasks()] == ["sts12", "sts13", "sts14", "sts15", "sts16",
                                                                  "stsb", "sickr"]
    assert [t.name for t in get_suite("adversarial").default_tasks()] == ["imdb", "mr", "sst2", "yelp", "mrpc",
                                                                          "snli", "mnli_mm"]  # CoLA when asked
    assert protocol("robustembed-table3").recipes == ("textfooler", "textbugger", "pwws", "bae", "bert-attack")
    assert protocol("robustembed-table4").recipes == protocol("robustembed-table3").recipes
    advsts = {profile: default_for("advsts", profile).recipes for profile in PROFILES}  # minutes per pair on CPU
    assert advsts == {"smoke": ("textfooler",), "study": ("textfooler",), "paper": protocol("robustembed-table3").recipes}
    transfer = {a.aggregation: a.tasks for a in default_for("transfer", "study").averages}
    assert transfer == {"mean-of-7-tasks": protocol("senteval-transfer-7").tasks,
                        "mean-of-6-tasks": ("mr", "cr", "subj", "mpqa", "sst2", "mrpc")}


# --- registering a task, recipe and method changes no key and no average ------------------------

def register_dummies(monkeypatch):
    """A dummy task in every suite, a dummy recipe and a dummy method, as a plug-in would add them."""
    monkeypatch.setitem(RECIPES, "dummy-recipe", lambda *a, **k: None)
    monkeypatch.setitem(METHODS, "dummy-method", "bench.methods.simcse:METHOD")
    for name in SUITES:
        suite = get_suite(name)
        dummy = Task(suite=name, name="dummy-task", dataset="", split="test", main_metric="spearman")
        monkeypatch.setattr(suite, "tasks", tuple(suite.tasks) + (dummy,))


class StoredWorld:
    """Serves a cell's stored data fingerprints, resource identity and training-data presence, so its
    configuration can be rebuilt without the data or the attack resources."""

    def __init__(self, monkeypatch):
        self.cfg: dict = {}
        monkeypatch.setattr(runner, "data_config", lambda datasets, ctx: self._data())  # every cell's, in one place
        monkeypatch.setattr("suites.adversarial.resource_identity", lambda paths, roles: self.cfg["attack_resources"])
        monkeypatch.setattr(attack_data.TrainingSet, "present", lambda _set, root: self.cfg["train_data_present"])

    def _data(self) -> dict:
        extra = {"data_unverified": self.cfg["data_unverified"]} if "data_unverified" in self.cfg else {}
        return {**({"data": self.cfg["data"]} if "data" in self.cfg else {}), **extra}


def context(stored: dict, world: StoredWorld, paths: Paths) -> tuple[RunContext, list[Task] | None]:
    """The narrowest command line that gives the stored configuration: every number-changing option the
    suite declares is left out where its default resolves to the stored value, and an option the suite
    records only when set (``changes_numbers=False``, e.g. victim_examples) is given where the cell records it.
    For a summary cell, also the tasks it was run with (None: the suite's defaults)."""
    cfg, cell = stored["config"], stored["cell"]
    suite = get_suite(cell["suite"])
    world.cfg = cfg
    ctx = RunContext(paths=paths, seed=cell["seed"], limit=cfg["limit"], profile=cfg["profile"],
                     dtype=cfg.get("dtype", "float32"), log=lambda _msg: None)
    ctx.options = {o.name: cfg[o.name] for o in suite.options if cfg.get(o.name) is not None}
    for name in list(ctx.options):
        without = replace(ctx, options={k: v for k, v in ctx.options.items() if k != name})
        if recompute(stored, without, None) == cell["config_hash"]:
            ctx = without
    tasks = None
    if "summary_of" in cfg and sorted(t.name for t in suite.default_tasks(ctx.profile)) != cfg["summary_of"]:
        tasks = [suite.task(name) for name in cfg["summary_of"]]
    return ctx, tasks


def recompute(stored: dict, ctx: RunContext, tasks) -> str:
    cfg, cell = stored["config"], stored["cell"]
    suite = get_suite(cell["suite"])
    if "summary_of" in cfg:
        return config_hash(runner.summary_config(suite, tasks if tasks is not None else suite.default_tasks(ctx.profile),
                                                 ctx))
    return config_hash(cell_config(suite, suite.task(cell["task"]), ctx))


def default_keys(paths: Paths, asked_extra: tuple[str, ...] = ()) -> dict[tuple[str, str], str]:
    """(suite, task) -> the config hash of each protocol suite's default tasks and of its summary over them
    (and over ``asked_extra`` tasks too, asked for beside the defaults), as a run with no options builds them."""
    keys = {}
    for name in PROTOCOL_SUITES:
        suite = get_suite(name)
        ctx = RunContext(paths=paths, log=lambda _msg: None)
        for task in suite.default_tasks():
            keys[name, task.name] = config_hash(cell_config(suite, task, ctx))
        if suite.summary_task is not None:
            asked = suite.default_tasks() + [suite.task(t) for t in asked_extra]
            keys[name, suite.summary_task.name] = config_hash(runner.summary_config(suite, asked, ctx))
    return keys


def test_registering_a_task_recipe_and_method_changes_no_default_key(monkeypatch, tmp_path):
    """Each protocol suite's default keys, built here from a fixed data fingerprint and resource identity."""
    world = StoredWorld(monkeypatch)
    world.cfg = {"data": {"fixture": "0" * 64}, "attack_resources": {"word_embedding": "fixture"},
                 "train_data_present": True}
    paths = Paths(home=tmp_path, data=tmp_path / "data", results=tmp_path / "results")
    before = default_keys(paths)
    assert {suite for suite, _ in before} == set(PROTOCOL_SUITES)
    register_dummies(monkeypatch)
    assert default_keys(paths) == before
    assert default_keys(paths, asked_extra=("dummy-task",)) == before  # asked for, the dummy is not averaged


@NEEDS_COMMITTED
def test_registering_a_task_recipe_and_method_changes_no_published_key(monkeypatch, tmp_path):
    cells = published_cells(PROTOCOL_SUITES)
    assert cells, "no committed cell of a protocol suite: the evidence this test compares against"
    world = StoredWorld(monkeypatch)
    paths = Paths(home=tmp_path, data=tmp_path / "data", results=tmp_path / "results")
    plans = []
    for stored in cells:
        ctx, tasks = context(stored, world, paths)
        assert recompute(stored, ctx, tasks) == stored["cell"]["config_hash"], stored["cell"]
        plans.append((stored, ctx, tasks))
    by_default = sum(1 for _, ctx, _ in plans if "recipes" not in ctx.options)
    assert by_default, "some published attack cells ran the default recipes"
    register_dummies(monkeypatch)
    for stored, ctx, tasks in plans:
        world.cfg = stored["config"]
        assert recompute(stored, ctx, tasks) == stored["cell"]["config_hash"], stored["cell"]
        if "summary_of" in stored["config"]:  # asking for the dummy too leaves the average's cell alone
            suite = get_suite(stored["cell"]["suite"])
            asked = (tasks if tasks is not None else suite.default_tasks(ctx.profile)) + [suite.task("dummy-task")]
            assert recompute(stored, ctx, asked) == stored["cell"]["config_hash"]


def test_readme_attack_example_keeps_its_key(monkeypatch, tmp_path):
    """`bench run --suite adversarial --model minilm --task mr --limit 50`: the five recipes, before and after."""
    world = StoredWorld(monkeypatch)
    world.cfg = {"data": {"textfooler": "x"}, "attack_resources": {}, "train_data_present": True}
    suite = get_suite("adversarial")
    ctx = RunContext(paths=Paths(home=tmp_path, data=tmp_path, results=tmp_path), limit=50)
    before = cell_config(suite, suite.task("mr"), ctx)
    register_dummies(monkeypatch)
    after = cell_config(suite, suite.task("mr"), ctx)
    assert before["recipes"] == list(protocol("robustembed-table3").recipes)
    assert config_hash(after) == config_hash(before)
    assert {t.name for t in suite.default_tasks()} == {t.name for t in suite.tasks} - {"cola", "dummy-task"}


def _rows(stored: dict) -> list[dict]:
    return stored["results"]


def task_rows(suite) -> list[dict]:
    """Rows of each default task as the suite's summary reads them, a different value each."""
    metrics = {"sts": ["spearman", "pearson"], "transfer": ["acc"]}[suite.name]
    return [{"suite": suite.name, "task": task.name, "split": "test", "metric": metric,
             "aggregation": task.main_aggregation, "attack": "", "value": 60.0 + 3 * i + j}
            for i, task in enumerate(suite.default_tasks()) for j, metric in enumerate(metrics)]


@pytest.mark.parametrize("suite_name", ["sts", "transfer"])
def test_averages_unchanged_by_a_new_task(monkeypatch, suite_name):
    """Each average of task rows written here: a far-off dummy task's row, once it is registered, moves none."""
    suite = get_suite(suite_name)
    ctx = RunContext(paths=Paths(home=Path("."), data=Path("."), results=Path(".")))
    rows = task_rows(suite)
    before = {(r.metric, r.aggregation): r.value for r in suite.summarize(rows, ctx)}
    assert before, "the suite averages the task rows written here"
    register_dummies(monkeypatch)
    with_dummy = rows + [{**r, "task": "dummy-task", "value": -1000.0} for r in rows if r["task"] == rows[0]["task"]]
    assert {(r.metric, r.aggregation): r.value for r in suite.summarize(with_dummy, ctx)} == before


@NEEDS_COMMITTED
@pytest.mark.parametrize("suite_name", ["sts", "transfer"])
def test_published_averages_unchanged_by_a_new_task(monkeypatch, suite_name):
    """Each published average, recomputed from its model's task cells plus a far-off dummy task row."""
    cells = published_cells([suite_name])
    suite = get_suite(suite_name)
    register_dummies(monkeypatch)
    checked = 0
    for summary in (c for c in cells if c["cell"]["task"] == suite.summary_task.name):
        peers = [c for c in cells if c["cell"]["model"] == summary["cell"]["model"]
                 and c["cell"]["seed"] == summary["cell"]["seed"] and c["cell"]["task"] in summary["config"]["summary_of"]
                 and c["config"]["limit"] == summary["config"]["limit"]
                 and c["config"]["profile"] == summary["config"]["profile"]
                 and c["config"].get("mode") == summary["config"].get("mode")]
        if sorted(c["cell"]["task"] for c in peers) != summary["config"]["summary_of"]:
            continue  # the task cells it averaged were rewritten since
        rows = [r for c in peers for r in _rows(c)]
        rows += [{**r, "task": "dummy-task", "value": -1000.0} for r in rows if r["task"] == rows[0]["task"]]
        ctx = RunContext(paths=Paths(home=Path("."), data=Path("."), results=Path(".")),
                         profile=summary["config"]["profile"], limit=summary["config"]["limit"])
        got = {(r.metric, r.aggregation): r.value for r in suite.summarize(rows, ctx)}
        for r in _rows(summary):
            assert got[(r["metric"], r["aggregation"])] == pytest.approx(r["value"], abs=0.011), summary["cell"]
        checked += 1
    assert checked, f"no published {suite_name} average could be recomputed from its task cells"



# --- every field of a protocol changes what a run of it does ---------------------------------------

from dataclasses import fields  # noqa: E402

from bench.protocols import Average, Protocol, run_profile  # noqa: E402
from bench.plugins import Registry  # noqa: E402

STS_PROBE = Protocol(name="probe", suite="sts", title="a probe", tasks=("stsb", "sickr"), splits=("test",),
                     metric=("spearman",), aggregation="all", average_aggregation="mean-of-probe", profile="study")
ATTACK_PROBE = Protocol(name="attack-probe", suite="advsts", title="an attack probe", tasks=("stsb",),
                        recipes=("textfooler",))
# field -> (a protocol, the same protocol differing in that field alone)
VARIANTS = {
    "name": (STS_PROBE, replace(STS_PROBE, name="probe-2")),
    "suite": (STS_PROBE, replace(STS_PROBE, suite="advsts")),
    "title": (STS_PROBE, replace(STS_PROBE, title="another probe")),
    "tasks": (STS_PROBE, replace(STS_PROBE, tasks=("stsb",))),
    "splits": (STS_PROBE, replace(STS_PROBE, splits=("dev",))),
    "metric": (STS_PROBE, replace(STS_PROBE, metric=("pearson",))),
    "aggregation": (STS_PROBE, replace(STS_PROBE, aggregation="wmean")),
    "average": (STS_PROBE, replace(STS_PROBE, average=("stsb",))),
    "average_aggregation": (STS_PROBE, replace(STS_PROBE, average_aggregation="mean-of-probe-2")),
    "also_averages": (STS_PROBE, replace(STS_PROBE, also_averages=(Average("mean-of-stsb", ("stsb",)),))),
    "recipes": (ATTACK_PROBE, replace(ATTACK_PROBE, recipes=("pwws",))),
    "profile": (STS_PROBE, replace(STS_PROBE, profile="paper")),
    "default": (STS_PROBE, replace(STS_PROBE, default=("smoke",))),
}


def _attempt(compute):
    try:
        return compute()
    except Exception as exc:  # a run the protocol makes fail is also something it decides
        return f"{type(exc).__name__}: {exc}"


def _task_rows(tasks) -> list[dict]:
    """Finished task rows: each correlation and aggregation, on each task's split, with distinct values."""
    return [{"task": t.name, "metric": metric, "aggregation": aggregation, "split": t.split, "value": value,
             "attack": ""}
            for i, t in enumerate(tasks) for j, (metric, aggregation) in enumerate(
                (m, a) for m in ("spearman", "pearson") for a in ("all", "wmean"))
            for value in [10.0 * i + j + 1]]


def what_a_run_does(p: Protocol, paths: Paths) -> dict:
    """What a run of ``p`` (alone in protocols.toml) plans, keys and writes, what a run naming no protocol
    follows, and how `bench ls protocols` lists it."""
    from app.commands.ls import _protocols

    suite = get_suite(p.suite)
    profile = run_profile(None, p, "smoke")
    ctx = RunContext(paths=paths, profile=profile, protocol=p, log=lambda _msg: None)
    tasks = _attempt(lambda: suite.plan_tasks(p))
    return {
        "suite": suite.name, "profile": profile, "tasks": [(t.name, t.split) for t in tasks],
        "cells": [_attempt(lambda t=t: config_hash(cell_config(suite, t, ctx))) for t in tasks],
        "summary cell": _attempt(lambda: config_hash(runner.summary_config(suite, tasks, ctx))),
        "averages": _attempt(lambda: [(r.metric, r.aggregation, r.value, r.n, r.config)
                                      for r in suite.summarize(_task_rows(tasks), ctx)]),
        "default runs": {name: [s.default_protocol(prof).name for prof in PROFILES] for name, s in
                         (("sts", get_suite("sts")), ("advsts", get_suite("advsts")))},
        "listing": _protocols(None),
    }


def test_the_variants_cover_every_field_of_a_protocol_one_at_a_time():
    assert set(VARIANTS) == {f.name for f in fields(Protocol)}, "a new protocol field needs a variant here"
    for name, (base, variant) in VARIANTS.items():
        assert [f.name for f in fields(Protocol) if getattr(base, f.name) != getattr(variant, f.name)] == [name]


@pytest.mark.parametrize("field_name", sorted(VARIANTS))
def test_every_protocol_field_changes_what_a_run_does(monkeypatch, tmp_path, field_name):
    """A field no code reads fails here: the protocol differing only in it plans, keys, writes, defaults or
    lists nothing differently."""
    import bench.protocols as protocols

    world = StoredWorld(monkeypatch)
    world.cfg = {"attack_resources": {}}
    paths = Paths(home=tmp_path, data=tmp_path, results=tmp_path)
    seen = []
    for p in VARIANTS[field_name]:
        monkeypatch.setattr(protocols, "PROTOCOLS", Registry("protocol", {p.name: p}))
        seen.append(what_a_run_does(p, paths))
    assert seen[0] != seen[1], f"no code reads the protocol field '{field_name}'"


# --- a protocol added to protocols.toml runs without a code change --------------------------------

NEW_PROTOCOL = '''
[sts-dev-pair]
suite = "sts"
title = "STS-B and SICK-R dev: their Spearman mean"
tasks = ["stsb", "sickr"]
splits = ["dev"]
metric = "spearman"
aggregation = "all"
average_aggregation = "mean-of-2-dev-tasks"
profile = "smoke"
'''


def test_a_protocol_added_to_the_file_alone_runs(bench_env, tiny_model, monkeypatch, tmp_path, capsys):
    import bench.protocols as protocols
    from app.cli import main

    extended = tmp_path / "protocols.toml"
    extended.write_text(protocols.PROTOCOLS_FILE.read_text(encoding="utf-8") + NEW_PROTOCOL, encoding="utf-8")
    monkeypatch.setattr(protocols, "PROTOCOLS", Registry("protocol", protocols.read(extended)))
    assert main(["run", "--protocol", "sts-dev-pair", "--model", "tiny", "--device", "cpu"]) == 0
    assert "protocol sts-dev-pair" in capsys.readouterr().out.replace("\n", " ")
    cells = {p.parent.name: json.loads(p.read_text()) for p in (bench_env.results / "cells/tiny/sts").rglob("*.json")}
    assert set(cells) == {"stsb", "sickr", "avg"}
    assert cells["stsb"]["config"]["split"] == "dev" and cells["stsb"]["config"]["profile"] == "smoke"
    (average,) = cells["avg"]["results"]
    assert (average["metric"], average["aggregation"], average["n"]) == ("spearman", "mean-of-2-dev-tasks", 2)
    assert json.loads(average["config"])["average_of"] == ["sickr", "stsb"]
    assert cells["avg"]["config"]["averaging"]["splits"] == {"stsb": "dev", "sickr": "dev"}

"""docs/extending.md's recipes, each performed from a plug-in file in a temporary BENCH_HOME: no source edit and
no pinned file edited by hand. And the traps the guide names: bad entries, data entries, sources, STS-B dev."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from app.cli import main

PAIRS = "".join(f"g\tf\t2024\t{i:04d}\t{i % 5}.0\tA man plays guitar {i}.\tA person plays music {i}.\n"
                for i in range(12))


@pytest.fixture
def plugin_home(bench_env, monkeypatch):
    """BENCH_HOME with room for a plug-in file; every registry and sys.path restored afterwards."""
    import attacks.recipes
    import bench.data.datasets as datasets
    import bench.methods
    import bench.runner
    from app.commands import plugins
    from bench.results import cell_schema

    tables = (attacks.recipes.RECIPES, bench.methods.METHODS, bench.runner.SUITES, datasets.DATASETS,
              bench.runner.PLUGIN_TASKS, plugins.ORIGINS)
    saved = [dict(t) for t in tables]
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(cell_schema, "DECLARED", set(cell_schema.DECLARED))
    yield bench_env
    for table, before in zip(tables, saved):
        table.clear()
        table.update(before)
    for name in bench.runner.SUITES:
        if not isinstance(bench.runner.SUITES[name], str):
            vars(bench.runner.SUITES[name]).pop("tasks", None)
    for loaded in list(bench.runner.SUITES._loaded.values()):
        vars(loaded[1]).pop("tasks", None)
    plugins.LOADED.clear()


def write(home, name: str, text: str) -> None:
    (home / name).write_text(textwrap.dedent(text), encoding="utf-8")


def bench_json(capsys, *argv) -> list[dict]:
    capsys.readouterr()
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_method_from_a_plugin_file_loads_and_is_listed_with_its_origin(plugin_home, capsys):
    write(plugin_home.home, "my_method.py", """
        from bench.methods.simcse import METHOD as SimCSE

        class MyCSE(SimCSE):
            name = "mycse"

        METHOD = MyCSE
    """)
    write(plugin_home.home, "plugins.toml", '[methods]\nmycse = { target = "my_method:METHOD", label = "MyCSE" }\n')
    listed = {r["name"]: r for r in bench_json(capsys, "ls", "methods")}
    assert listed["mycse"]["origin"] == str(plugin_home.home / "plugins.toml")
    assert listed["simcse"]["origin"] == "built-in"
    from bench.methods import get_method

    assert get_method("mycse").name == "mycse"


def test_a_recipe_from_a_plugin_file_is_listed_and_loads(plugin_home, capsys):
    write(plugin_home.home, "my_recipes.py", """
        from attacks.recipes import textfooler

        def swap(*args, **kwargs):
            return textfooler(*args, **kwargs)

        swap.roles = textfooler.roles
    """)
    write(plugin_home.home, "plugins.toml", '[recipes]\nswap = { target = "my_recipes:swap", label = "Swap" }\n')
    listed = {r["name"]: r for r in bench_json(capsys, "ls", "recipes")}
    assert listed["swap"]["label"] == "Swap" and listed["swap"]["origin"].endswith("plugins.toml")
    from attacks.recipes import RECIPES

    assert RECIPES.load("swap").roles == RECIPES.load("textfooler").roles


def test_a_task_with_a_new_dataset_from_a_plugin_file_runs(plugin_home, tiny_model, capsys):
    """The dataset's files are recorded by `bench data add` (no bytes or sha256 by hand), verified, and run."""
    write(plugin_home.home, "my_pairs.py", """
        from bench.data.datasets import DatasetSpec
        from suites.sts import STSBTask

        DATASET = DatasetSpec("my-pairs", "mine/pairs", "twelve guitar pairs")
        TASK = STSBTask(suite="sts", name="my-pairs", dataset="my-pairs", split="test", main_metric="spearman")
    """)
    write(plugin_home.home, "plugins.toml", """
        [datasets]
        my-pairs = "my_pairs:DATASET"
        [tasks]
        my-pairs = "my_pairs:TASK"
    """)
    (plugin_home.data / "mine/pairs").mkdir(parents=True)
    (plugin_home.data / "mine/pairs/sts-test.csv").write_text(PAIRS, encoding="utf-8")
    assert main(["data", "add", "my-pairs", str(plugin_home.data / "mine/pairs/sts-test.csv")]) == 0
    table = (plugin_home.home / "data_files.tsv").read_text()
    assert f"mine/pairs/sts-test.csv\t{len(PAIRS)}\t12\t" in table
    assert main(["data", "verify", "my-pairs"]) == 0
    assert {"sts", "my-pairs"} <= set(next(r for r in bench_json(capsys, "ls", "tasks") if r["task"] == "my-pairs").values())
    assert main(["run", "--model", "tiny", "--suite", "sts", "--task", "my-pairs", "--device", "cpu"]) == 0
    assert list((plugin_home.results / "cells/tiny/sts/my-pairs").rglob("*.json"))
    (plugin_home.data / "mine/pairs/sts-test.csv").write_text(PAIRS.replace("guitar", "violin"), encoding="utf-8")
    assert main(["data", "verify", "my-pairs"]) == 2, "an edited file no longer matches the entry bench data add wrote"


@pytest.mark.parametrize("text,named", [
    ('[methods]\nx = "no_such_module:METHOD"\n', "[methods] x: no module 'no_such_module'"),
    ('[methods]\nx = "no_colon"\n', "[methods] x = 'no_colon': not \"module:attr\""),
    ('[method]\nx = "a:b"\n', "unknown table [method]"),
    ('[methods]\nsimcse = "bench.methods.dcl:METHOD"\n', "a method 'simcse' is already registered"),
    ('[tasks]\nnot-it = "bench.data.datasets:DatasetSpec"\n', "[tasks] not-it: bench.data.datasets:DatasetSpec is not"),
])
def test_a_bad_plugin_entry_exits_2_naming_it_and_the_fix(plugin_home, capsys, text, named):
    write(plugin_home.home, "plugins.toml", text)
    assert main(["ls", "tasks"]) == 2
    err = capsys.readouterr().err
    assert named in err and "Fix:" in err


def test_plugins_flag_reads_another_file(plugin_home, tmp_path, capsys):
    (tmp_path / "elsewhere").mkdir()
    write(tmp_path / "elsewhere", "p.toml", '[methods]\nmine = "bench.methods.dcl:METHOD"\n')
    names = [r["name"] for r in bench_json(capsys, "--plugins", str(tmp_path / "elsewhere/p.toml"), "ls", "methods")]
    assert "mine" in names
    assert main(["--plugins", str(tmp_path / "missing.toml"), "ls", "methods"]) == 2


def test_a_dataset_without_a_download_source_fails_only_a_check_that_names_it(plugin_home, capsys):
    write(plugin_home.home, "local_data.py", """
        from bench.data.datasets import DatasetSpec

        DATASET = DatasetSpec("local-only", "local/only", "files only its owner has")
    """)
    write(plugin_home.home, "plugins.toml", '[datasets]\nlocal-only = "local_data:DATASET"\n')
    capsys.readouterr()
    main(["data", "verify"])  # the other datasets' state is the fixture's; this one must not be what fails
    out, err = capsys.readouterr()
    assert "absent (no download source)" in out and "local-only" not in err
    assert main(["data", "verify", "local-only"]) == 2
    err = capsys.readouterr().err
    assert "no download source" in err and "bench data fetch local-only" not in err


def test_a_plugin_task_scoring_stsb_dev_is_flagged(plugin_home, capsys):
    write(plugin_home.home, "dev_task.py", """
        from suites.sts import STSBTask

        TASK = STSBTask(suite="sts", name="stsb-dev", dataset="stsb", split="dev", main_metric="spearman")
    """)
    write(plugin_home.home, "plugins.toml", '[tasks]\nstsb-dev = "dev_task:TASK"\n')
    capsys.readouterr()
    assert main(["ls", "tasks", "--suite", "sts", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "bench: warning:" in err and "STS-B dev, the set `bench train` selects checkpoints on" in err
    rows = json.loads(out)
    assert "checkpoint-selection set" in next(r for r in rows if r["task"] == "stsb-dev")["note"]
    assert not next(r for r in rows if r["task"] == "sts12")["note"]


def test_bench_data_add_refuses_a_builtin_dataset_without_repo(plugin_home, capsys):
    (plugin_home.data / "senteval/downstream/STS/STSBenchmark").mkdir(parents=True, exist_ok=True)
    extra = plugin_home.data / "senteval/downstream/STS/STSBenchmark/extra.txt"
    extra.write_text("x\n")
    assert main(["data", "add", "stsb", str(extra)]) == 2
    assert "--repo" in capsys.readouterr().err


def test_a_claim_added_to_a_copy_of_the_ledger_loads(tmp_path):
    """A claim is one [[claim]] in reports/claims.toml, the file the guide names; this adds one to a copy (the
    first claim under a new id) and the ledger reads it; a claim with a field the schema lacks is refused."""
    import re

    from reports.claims import CLAIMS_FILE, load

    text = CLAIMS_FILE.read_text(encoding="utf-8")
    first = re.search(r"\[\[claim\]\]\n.*?(?=\n\[\[claim\]\]|\Z)", text, re.S).group(0)
    added = tmp_path / "claims.toml"
    added.write_text(text + "\n" + first.replace('id = "', 'id = "copy-of-', 1) + "\n", encoding="utf-8")
    before = len(load().claims)
    assert len(load(added).claims) == before + 1
    added.write_text(text + "\n" + first.replace('id = "', 'colour = "red"\nid = "x-', 1) + "\n", encoding="utf-8")
    with pytest.raises(Exception, match="colour"):
        load(added)


def test_a_suite_from_a_plugin_file_runs_and_writes_its_cell(plugin_home, tiny_model, capsys):
    """A whole suite (its own task, no dataset) from a plug-in file: listed with its origin, run, stored."""
    write(plugin_home.home, "my_suite.py", """
        import numpy as np

        from suites.base import Suite, Task, row

        class NormSuite(Suite):
            name = "norms"
            description = "mean embedding norm of three fixed sentences"
            tasks = (Task(suite="norms", name="three", label="three sentences", dataset="", split="test",
                          main_metric="norm", main_aggregation="mean"),)

            def run_task(self, task, encoder, ctx):
                vectors = encoder.encode(["a man plays guitar", "a dog runs", "the film was fine"])
                return [row(task, "norm", float(np.linalg.norm(vectors, axis=1).mean()), 3, aggregation="mean")]

        SUITE = NormSuite()
    """)
    write(plugin_home.home, "plugins.toml", '[suites]\nnorms = "my_suite:SUITE"\n')
    listed = {r["suite"]: r for r in bench_json(capsys, "ls", "suites")}
    assert listed["norms"]["origin"] == str(plugin_home.home / "plugins.toml")
    assert main(["run", "--model", "tiny", "--suite", "norms", "--device", "cpu"]) == 0
    (cell,) = list((plugin_home.results / "cells/tiny/norms/three").glob("*.json"))
    stored = json.loads(cell.read_text())["results"]
    assert stored[0]["metric"] == "norm" and stored[0]["value"] > 0

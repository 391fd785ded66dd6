"""Stored work needs nothing: `bench run`, `bench grid` and `bench.evaluate` find a model's fully stored cells
before training, building or downloading it, when its weights are not at hand; the docs' commands that
reproduce the committed results run on a fresh clone (an empty BENCH_HOME, no `bench resources build`) and
write nothing into results/."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import committed_cells

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"


def _versions(*weights_and_times) -> list[tuple]:
    """One cell's stored versions: (path, payload) per (weights, created_at)."""
    return [(Path(f"{w}-{t}.json"), {"cell": {"weights_sha256": w}, "results": [{"created_at": t}]})
            for w, t in weights_and_times]


def test_the_stored_weights_are_those_that_have_every_cell_and_of_several_the_newest():
    from bench.runner import stored_weights

    assert stored_weights([_versions(("a", "1")), _versions(("a", "2"))]) == "a"
    assert stored_weights([_versions(("a", "1"), ("b", "3")), _versions(("a", "2"))]) == "a"  # only a has both
    assert stored_weights([_versions(("a", "1"), ("b", "3")), _versions(("a", "2"), ("b", "3"))]) == "b"  # newest
    assert stored_weights([_versions(("a", "1")), _versions(("b", "2"))]) is None  # no one set has both
    assert stored_weights([_versions(("a", "1")), []]) is None and stored_weights([]) is None


def test_bench_run_reuses_the_cells_of_a_model_it_would_have_to_train(bench_env, tiny_model, monkeypatch, capsys):
    from app.cli import main
    from bench.models import registry

    assert main(["run", "--suite", "sts", "--model", "tiny", "--task", "stsb"]) == 0
    cells = sorted((bench_env.results / "cells").rglob("*.json"))
    # the same name, now a trained model whose checkpoint is not here: reaching the trainer is recorded
    monkeypatch.setitem(registry.MODELS, "tiny-base", replace(tiny_model, name="tiny-base"))
    monkeypatch.setitem(registry.MODELS, "tiny", replace(tiny_model, method="simcse", base="tiny-base", profile="smoke"))
    trained = []

    def no_training(spec, *args, **kwargs):
        trained.append(spec.name)
        raise RuntimeError("no training in this test")

    monkeypatch.setattr("bench.train.train_registered", no_training)
    capsys.readouterr()
    assert main(["run", "--suite", "sts", "--model", "tiny", "--task", "stsb"]) == 0
    out = capsys.readouterr().out
    assert "All 2 cell(s) are stored" in out and "not at hand here" in out and trained == []
    assert sorted((bench_env.results / "cells").rglob("*.json")) == cells
    # bench.evaluate likewise, by name
    import bench

    got = bench.evaluate("tiny", suites=["sts"], tasks=["stsb"], profile="smoke", log=lambda *_: None)
    assert got.cells and got.to_pandas().cached.all() and trained == []
    # a cell not stored yet: the model is needed after all, so it would be trained
    assert main(["run", "--suite", "sts", "--model", "tiny", "--task", "sts12"]) != 0
    assert trained == ["tiny"]


NOT_COMMITTED = "# not in the committed results"  # docs/study.md: what follows computes, so needs the build


def _blocks(page: str, after: str = "") -> list[str]:
    """The bash code blocks of a docs page (those after the heading ``after``), a backslash-continued line
    joined with the next."""
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    text = text[text.index(after):] if after else text
    return [b.replace("\\\n", " ") for b in re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)]


def docs_commands() -> list[tuple[str, str]]:
    """(page, a bash script) for the docs' commands that reproduce committed results: V-advCSE Table 3's ANLI
    runs (docs/suites.md, one by one), and the study's two Reproduce blocks (docs/study.md, each whole, up to
    the lines it marks as not committed)."""
    suites = [("suites.md", line) for block in _blocks("suites.md") for line in block.splitlines()
              if re.match(r"bench run --model \S+ --suite anli .*--results-dir results", line)]
    return suites + [("study.md", "set -e\n" + block.split(NOT_COMMITTED)[0])
                     for block in _blocks("study.md", after="## Reproduce")[:2]]


def test_the_docs_commands_are_found():
    found = docs_commands()
    assert [page for page, _ in found] == ["suites.md"] * 4 + ["study.md"] * 2, found
    first, scale = (script for page, script in found if page == "study.md")
    assert "bench grid --models minilm,minilm-mlm,$STUDY --suites sts,alignment" in first
    assert "--tasks sst2" not in first and "bench divergence" in scale


@pytest.mark.slow
@pytest.mark.skipif(not DATA.is_dir(), reason="the committed data root ../shared/data is absent")
@pytest.mark.skipif(not committed_cells(), reason="results/ holds no committed cells for the commands to find")
@pytest.mark.parametrize("page,command", docs_commands(), ids=lambda x: x if x.endswith(".md") else x[:70])
def test_a_docs_command_runs_on_a_fresh_clone(page, command, tmp_path):
    before = _committed_results()
    env = {**os.environ, "BENCH_HOME": str(tmp_path / "home"), "BENCH_DATA_DIR": str(DATA),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("BENCH_RESULTS_DIR", None)
    done = subprocess.run(["bash", "-c", command], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{page}: {command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert "stored" in done.stdout and "not at hand" in done.stdout, done.stdout[-2000:]
    assert not (tmp_path / "home" / "models").exists()  # nothing trained
    assert _committed_results() == before  # nothing changed in results/ (a leaderboard or divergence file)


def _committed_results() -> dict[str, str]:
    """sha256 of every committed file under results/."""
    import hashlib

    names = subprocess.run(["git", "ls-files", "results"], cwd=REPO, capture_output=True, text=True).stdout.split()
    return {n: hashlib.sha256((REPO / n).read_bytes()).hexdigest() for n in names if (REPO / n).is_file()}

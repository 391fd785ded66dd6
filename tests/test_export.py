"""bench export --format mteb: STS cells in mteb's results layout, read back by mteb's own loader with the cells'
scores; every other row in bench's robustness.json beside them."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def exported(bench_env, tiny_model, monkeypatch, capsys):
    from app.cli import main
    from app.commands import export

    assert main(["run", "--suite", "sts", "--model", "tiny"]) == 0
    assert main(["run", "--suite", "sts", "--model", "tiny", "--task", "stsb", "--limit", "5"]) == 0
    # the fixture's test sets stand for mteb's: their full pair counts are what mteb's would be
    for task, (name, revision, _) in list(export.MTEB_STS.items()):
        monkeypatch.setitem(export.MTEB_STS, task, (name, revision, _full_n(bench_env, task)))
    capsys.readouterr()
    assert main(["export", "--format", "mteb", "--model", "tiny"]) == 0
    assert "ResultCache" in capsys.readouterr().out
    return bench_env


def _main_rows(paths, task: str, metric: str) -> list[dict]:
    return [next(r for r in json.loads(cell.read_text())["results"] if (r["metric"], r["aggregation"]) == (metric, "all"))
            for cell in sorted((paths.results / "cells/tiny/sts" / task).glob("*.json"))]


def _full_n(paths, task: str) -> int:
    return max(r["n"] for r in _main_rows(paths, task, "spearman"))


def _cell_value(paths, task: str, metric: str) -> float:
    (row,) = [r for r in _main_rows(paths, task, metric) if r["n"] == _full_n(paths, task)]
    return row["value"]


def test_mteb_loader_reads_the_export_with_the_cells_scores(exported):
    mteb = pytest.importorskip("mteb", reason="mteb is not installed (pip install 'bench[mteb]')")
    cache = mteb.ResultCache(cache_path=exported.results / "export" / "mteb")
    results = cache.load_results(models=["tiny"], include_remote=False)
    (model,) = results.model_results
    by_task = {r.task_name: r for r in model.task_results}
    assert set(by_task) == {"STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark"}
    for task, name in (("sts12", "STS12"), ("stsb", "STSBenchmark")):
        (scores,) = by_task[name].scores["test"]
        assert scores["main_score"] == pytest.approx(_cell_value(exported, task, "spearman") / 100, abs=1e-9)
        assert scores["cosine_pearson"] == pytest.approx(_cell_value(exported, task, "pearson") / 100, abs=1e-9)
        assert by_task[name].get_score() == pytest.approx(scores["main_score"])
    assert by_task["STSBenchmark"].dataset_revision == mteb.get_task("STSBenchmark").metadata.revision


def test_what_mteb_has_no_task_for_goes_to_the_robustness_json(exported):
    (folder,) = (exported.results / "export/mteb/results/tiny").iterdir()
    meta = json.loads((folder / "model_meta.json").read_text())
    assert meta["name"] == "tiny" and meta["revision"] == folder.name
    robustness = json.loads((folder / "bench/robustness.json").read_text())
    assert robustness["format"] == "bench.robustness/1" and robustness["revision"] == folder.name
    kinds = {(r["task"], r["n"]) for r in robustness["rows"] if r["metric"] == "spearman" and r["aggregation"] == "all"}
    assert ("sickr", 8) in kinds and ("stsb", 5) in kinds  # SICK-R (another test set) and the --limit cell
    assert ("stsb", 8) not in kinds and not any(t == "sts12" for t, _ in kinds)  # in mteb files, not repeated
    assert sorted(robustness["mteb_files"]) == sorted(p.name for p in folder.glob("*.json") if p.name != "model_meta.json")


def test_unknown_model_exits_2(bench_env, capsys):
    from app.cli import main

    assert main(["export", "--format", "mteb", "--model", "nobody"]) == 2
    assert "No result cells of model 'nobody'" in capsys.readouterr().err

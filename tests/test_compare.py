"""Uncertainty end to end: rows carry CIs, evidence sidecars sit beside cells, `bench compare` pairs them."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from app.cli import main
from bench.results.store import CellKey, Result, ResultStore
from bench.results.uncertainty import apply_uncertainty, compare_models, stored_evidence


@pytest.fixture
def two_tiny_models(tiny_model, tmp_path_factory, monkeypatch):
    from bench.models import registry
    from tests.conftest import write_tiny_bert

    other = write_tiny_bert(tmp_path_factory.mktemp("tiny-bert-2"), seed=1)
    spec = registry.ModelSpec(name="tiny2", backbone=str(other), pooler="avg", max_len=64)
    monkeypatch.setitem(registry.MODELS, "tiny2", spec)
    return "tiny", "tiny2"


def test_sts_rows_carry_cis_and_sidecars(bench_env, two_tiny_models, capsys):
    assert main(["run", "--suite", "sts", "--model", "tiny", "--task", "stsb", "--task", "sts12"]) == 0
    store = ResultStore(bench_env.results)
    rows = {(r["task"], r["metric"], r["aggregation"]): r for r in store.rows()}
    for key in (("stsb", "spearman", "all"), ("sts12", "pearson", "all"), ("sts12", "spearman", "wmean"),
                ("avg", "spearman", "mean-of-tasks")):
        r = rows[key]
        assert r["ci_low"] is not None and r["ci_low"] <= r["value"] <= r["ci_high"], key
        assert isinstance(r["ci_low"], float) and r["ci_method"], key
    assert rows[("stsb", "spearman", "all")]["ci_method"] == "bootstrap(B=1000,seed=0)"
    assert rows[("sts12", "spearman", "wmean")]["ci_method"] == "bootstrap-stratified(B=1000,seed=0)"
    assert rows[("avg", "spearman", "mean-of-tasks")]["ci_method"] == "bootstrap-average-of-2(B=1000,seed=0)"
    cell = next(p for p in store.cells() if "/stsb/" in str(p))
    side = store.evidence_path(cell)
    payload = json.loads(gzip.decompress(side.read_bytes()))
    sample = next(iter(payload["samples"].values()))
    assert set(sample["columns"]) == {"pred", "gold"} and len(sample["ids"]) == 8
    assert len(payload["samples"]) == 1  # one stored sample for the four STS rows
    # The stored evidence reproduces the row's value and interval.
    ev = stored_evidence(store, cell)[("spearman", "all", "", "test")]
    r = rows[("stsb", "spearman", "all")]
    assert ev.point() == pytest.approx(r["value"], abs=1e-3)
    assert (ev.interval().low, ev.interval().high) == pytest.approx((r["ci_low"], r["ci_high"]), abs=1e-3)
    board = (bench_env.results / "leaderboard.csv").read_text().splitlines()[0].split(",")
    assert {"ci_low", "ci_high", "ci_method"} <= set(board)
    assert not any(p.name.endswith(".tmp") for p in side.parent.iterdir())


def test_stored_evidence_is_remembered_shared_unchanged_and_read_again_after_a_rewrite(bench_env, two_tiny_models):
    """A report asks for most cells' evidence many times: the store remembers the answer while the files it
    came from (the cell, its sidecar, and for an average the task cells it refers to) are unchanged. The
    answer is shared, so reading an average must not relabel its tasks' evidence in place."""
    import os

    assert main(["run", "--suite", "sts", "--model", "tiny", "--task", "stsb", "--task", "sts12"]) == 0
    store = ResultStore(bench_env.results)
    cell = {p.parent.name: p for p in store.cells()}
    key = ("spearman", "all", "", "test")
    task_ev = stored_evidence(store, cell["stsb"])[key]
    label_before = task_ev.label
    average = stored_evidence(store, cell["avg"])
    assert stored_evidence(store, cell["avg"]) is average
    parts = average[("spearman", "mean-of-tasks", "", "test")].parts
    assert sorted(p.label for p in parts) == ["sts12", "stsb"]
    assert stored_evidence(store, cell["stsb"])[key] is task_ev and task_ev.label == label_before
    side = store.evidence_path(cell["stsb"])
    stamp = side.stat().st_mtime_ns + 10 ** 9
    os.utime(side, ns=(stamp, stamp))  # a task's sidecar rewritten: the average is read again too
    again = stored_evidence(store, cell["avg"])
    assert again is not average
    assert again[("spearman", "mean-of-tasks", "", "test")].point() == pytest.approx(
        average[("spearman", "mean-of-tasks", "", "test")].point())


def test_compare_from_stored_results(bench_env, two_tiny_models, capsys, monkeypatch):
    for model in two_tiny_models:
        assert main(["run", "--suite", "sts", "--model", model, "--task", "stsb", "--task", "sickr"]) == 0
    capsys.readouterr()
    import bench.models.encoder

    def no_loading(*a, **k):
        raise AssertionError("compare must not load a model")

    monkeypatch.setattr(bench.models.encoder.Encoder, "from_spec", no_loading)
    assert main(["compare", "tiny", "tiny2", "--suite", "sts", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["shared_cells"] == 3  # stsb, sickr, avg
    rows = {(r["task"], r["metric"], r["aggregation"]): r for r in out["rows"]}
    stsb = rows[("stsb", "spearman", "all")]
    assert stsb["difference"] == pytest.approx(stsb["b"] - stsb["a"], abs=1e-3)
    assert stsb["ci_low"] <= stsb["difference"] <= stsb["ci_high"] and 0 < stsb["p"] <= 1
    assert stsb["pairs"] == 8 and stsb["method"].startswith("paired-bootstrap")
    avg = rows[("avg", "spearman", "mean-of-tasks")]
    assert avg["method"].startswith("paired-bootstrap-average-of-2")
    assert avg["difference"] == pytest.approx((stsb["difference"] + rows[("sickr", "spearman", "all")]["difference"]) / 2,
                                              abs=1e-3)
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps cells in narrow consoles
    monkeypatch.setenv("COLUMNS", "60")  # a narrow log: piped output must still keep every value whole
    assert main(["compare", "tiny", "tiny2", "--suite", "sts", "--task", "stsb"]) == 0
    text = capsys.readouterr().out
    assert "stsb" in text and "95% CI" in text and "sickr" not in text
    assert "…" not in text  # piped: whole values, no column cut to '…'
    assert main(["compare", "tiny", "tiny3"]) == 2
    assert "tiny" in capsys.readouterr().err


def _attack_cell(store, model, outcomes, queries, run_ids=(0,), config=None, config_hash="c" * 16):
    """An adversarial-like cell: per-example outcomes through attacks.metrics' evidence, as the suite does."""
    from attacks.metrics import attack_evidence, attack_metrics
    from bench.scoring.stats import Evidence

    runs = []
    for run in run_ids:
        records = [{"index": i, "result_type": k, "num_queries": q, "words_changed": 1, "num_words": 10}
                   for i, (k, q) in enumerate(zip(outcomes, queries))]
        runs.append((attack_metrics(records), attack_evidence(records)))
    rows = []
    for metric in ("attack_success_rate", "avg_queries"):
        ev = Evidence(parts=[e[metric] for _, e in runs], combine="runs")
        rows.append(Result(model=model, suite="adversarial", task="mr", split="attack", metric=metric,
                           aggregation="mean-of-runs", attack="textfooler", n=len(outcomes), seed=0,
                           value=float(np.mean([m[metric] for m, _ in runs])), evidence=ev))
    key = CellKey(model, "ab" * 32, "adversarial", "mr", 0, config_hash)
    store.write(key, rows, config or {"suite": "adversarial"}, evidence=apply_uncertainty(rows))
    return rows


def test_attack_rows_wilson_and_mcnemar_with_skips(tmp_path):
    store = ResultStore(tmp_path)
    n = 120
    a_kinds = ["skipped"] * 10 + ["successful"] * 100 + ["failed"] * 10
    b_kinds = ["successful"] * 10 + ["successful"] * 60 + ["failed"] * 40 + ["skipped"] * 10
    rows_a = _attack_cell(store, "a", a_kinds, [50.0] * n)
    _attack_cell(store, "b", b_kinds, [70.0] * n)
    asr = rows_a[0]
    assert asr.ci_method == "wilson" and asr.ci_low < asr.value < asr.ci_high
    assert rows_a[1].ci_method == "bootstrap(B=1000,seed=0)"
    diffs, counts = compare_models(store, "a", "b")
    assert counts == {"shared_cells": 1, "only_a": 0, "only_b": 0, "other_task_averages": []}
    d = {x.key["metric"]: x for x in diffs}
    asr_d = d["attack_success_rate"].diff
    # Each victim's own rate: A 100/110, B 70/110. The difference, its CI and McNemar rest on the 100
    # examples both attacked (A 100/100, B 60/100), as the ledger's; the own rates stay beside them.
    assert asr_d.estimate == pytest.approx(60.0 - 100.0) and asr_d.high < 0
    assert asr_d.extra["counted_by_both"] == 100 and asr_d.extra["counted_by_one"] == 20
    row = d["attack_success_rate"]
    assert (row.a, row.b) == (pytest.approx(100.0), pytest.approx(60.0))
    assert (row.stored_a, row.stored_b) == (pytest.approx(100 * 100 / 110), pytest.approx(100 * 70 / 110))
    assert asr_d.extra["mcnemar"]["a_only"] == 40 and asr_d.extra["mcnemar"]["b_only"] == 0
    assert asr_d.p < 1e-6 and d["attack_success_rate"].significant
    q = d["avg_queries"].diff
    assert q.estimate == pytest.approx(20.0) and q.low == pytest.approx(20.0) and "McNemar" not in q.method


def _average_cell(store, model, tasks, config_hash, value):
    """An STS summary cell whose average row names its tasks, as the suite writes it."""
    row = Result(model=model, suite="sts", task="avg", split="test", metric="spearman", aggregation="mean-of-tasks",
                 value=value, n=len(tasks), seed=0, config=json.dumps({"average_of": sorted(tasks)}))
    store.write(CellKey(model, "ab" * 32, "sts", "avg", 0, config_hash), [row],
                {"suite": "sts", "summary_of": sorted(tasks)})


def test_averages_over_different_tasks_are_not_compared(tmp_path, capsys):
    """Shared or not, two averages over different tasks get no difference: compare says which tasks each is over."""
    store = ResultStore(tmp_path)
    seven = ["sickr", "sts12", "sts13", "sts14", "sts15", "sts16", "stsb"]
    _average_cell(store, "a", seven, "e" * 16, 78.87)
    _average_cell(store, "b", ["stsb"], "f" * 16, 82.03)
    _average_cell(store, "a", seven, "d" * 16, 78.87)  # one configuration, a task without a value in b's run
    _average_cell(store, "b", ["sickr", "stsb"], "d" * 16, 80.0)
    diffs, counts = compare_models(store, "a", "b")
    (shared,) = diffs
    assert shared.estimate is None and shared.other_tasks == ("averages over different tasks: A over 7 tasks: "
                                                              + ", ".join(seven) + ", B over 2 tasks: sickr, stsb")
    (unshared,) = counts["other_task_averages"]
    assert unshared.startswith("sts/avg seed 0 spearman (mean-of-tasks): A over 7 tasks") and "B over stsb only" in unshared
    assert main(["compare", "a", "b", "--results-dir", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "≠" in out and "not compared." in out and "B over stsb only" in out


def test_summary_without_evidence_has_no_interval(tmp_path):
    store = ResultStore(tmp_path)
    row = Result(model="m", suite="sts", task="stsb", split="test", metric="spearman", aggregation="all", value=80.0)
    key = CellKey("m", "ab" * 32, "sts", "stsb", 0, "d" * 16)
    path = store.write(key, [row], {}, evidence=apply_uncertainty([row]))
    assert not store.evidence_path(path).exists()
    r = store.read(path)["results"][0]
    assert r["ci_low"] is None and r["ci_method"] == "" and "evidence" not in r


def test_compare_names_the_setting_of_each_cell_of_a_task(tmp_path, monkeypatch, capsys):
    """Two cells of one task under two victim modes: each row says which setting it is."""
    store = ResultStore(tmp_path)
    kinds = ["successful"] * 6 + ["failed"] * 4
    for model in ("a", "b"):
        for victim, h in (("frozen", "1" * 16), ("finetune", "2" * 16)):
            config = {"suite": "adversarial", "victim": victim, "constraints": "unified", "recipes": ["textfooler"],
                      "attack_resources": {"word_embedding": {"served": "x"}}}
            _attack_cell(store, model, kinds, [10.0] * 10, config=config, config_hash=h)
    diffs, counts = compare_models(store, "a", "b")
    assert counts["shared_cells"] == 2
    assert {d.setting for d in diffs} == {"victim=frozen", "victim=finetune"}  # equal entries are not repeated
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(tmp_path))
    assert main(["compare", "a", "b"]) == 0
    text = capsys.readouterr().out
    assert "setting" in text and "victim=frozen" in text and "victim=finetune" in text
    assert main(["compare", "a", "b", "--json"]) == 0
    assert {r["setting"] for r in json.loads(capsys.readouterr().out)["rows"]} == {"victim=frozen", "victim=finetune"}
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(tmp_path / "empty"))  # --results-dir wins over the environment
    assert main(["compare", "a", "b"]) == 2
    assert "--results-dir" in capsys.readouterr().err
    assert main(["compare", "a", "b", "--json", "--results-dir", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["shared_cells"] == 2

"""The benchmark scripts run end to end on tiny models and fixtures: each prints its ratio (or its figures)
and exits 0. They time nothing here (benchmarks/ prints ratios against a reference in the same run, on
request); these tests only keep a script from breaking silently when the code it times changes."""

from __future__ import annotations

import re
import sys

import pytest

from bench.paths import REPO_ROOT
from tests.conftest import benchmark_script
from tests.test_adversarial_suite import adv_env  # noqa: F401  (fixture: tiny model + MR fixtures)

BENCHMARKS = REPO_ROOT / "benchmarks"


def _main(name: str, args: list[str], monkeypatch, capsys) -> str:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # a script imports its neighbours, as when it runs as one
    module = benchmark_script(name)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *args])
    assert module.main() in (None, 0)
    return capsys.readouterr().out


def _ratio(pattern: str, out: str) -> float:
    found = re.search(pattern + r"\s*x?(\d+(?:\.\d+)?)", out)
    assert found, f"no ratio matching {pattern!r} in:\n{out}"
    return float(found.group(1))


def test_transfer_classifier_each_mode(monkeypatch, capsys):
    for mode in ("test", "fasttest"):
        out = _main("transfer_classifier", ["--n", "120", "--dim", "8", "--mode", mode], monkeypatch, capsys)
        assert _ratio(r"speed-up", out) > 0


def test_train_step_every_method_on_a_tiny_bert(bench_env, tiny_bert_dir, tmp_path, monkeypatch, capsys):
    from bench.methods import METHODS  # every registered method is timed
    from tests.test_methods_oraclecse import write_space
    from tests.test_methods_training import ADJECTIVES, NOUNS, SENTENCES

    (tmp_path / "wn").mkdir()
    (tmp_path / "wn" / "data.noun").write_text(NOUNS)
    (tmp_path / "wn" / "data.adj").write_text(ADJECTIVES)
    data = tmp_path / "sentences.txt"
    data.write_text("\n".join(SENTENCES * 2) + "\n")
    settings = ["--set", f"oraclecse:space_dir={write_space(tmp_path / 'space')}",
                "--set", f"dcl:wordnet_dir={tmp_path / 'wn'}", "--set", "adcse:num_adversaries=8"]
    methods = [arg for name in METHODS for arg in ("--method", name)]
    out = _main("train_step", ["--backbone", str(tiny_bert_dir), "--data", str(data), "--batch-size", "4",
                               "--repeats", "1", *settings, *methods], monkeypatch, capsys)
    for name in METHODS:
        assert re.search(rf"^{name}\s+median\s+[\d.]+ ms\s+x SimCSE\s+[\d.]+", out, re.M), out


def test_attack_throughput_and_profile_on_the_suites_victim(adv_env, monkeypatch, capsys):  # noqa: F811
    out = _main("attack_throughput", ["--model", "tiny", "--recipe", "pwws", "--n", "1", "--batch-size", "8"],
                monkeypatch, capsys)
    assert _ratio(r"ratio \(ours / stock, examples/min\):", out) > 0
    assert "identical outcomes on all examples" in out
    out = _main("attack_profile", ["--model", "tiny", "--recipe", "pwws", "--n", "1", "--batch-size", "8"],
                monkeypatch, capsys)
    assert re.search(r"^pwws\s+[\d.]+\s+[\d.]+%", out, re.M), out


def test_report_time_renders_a_fixture_cold_and_warm(tmp_path, monkeypatch, capsys):
    from tests.test_reports import write_fixture

    results = write_fixture(tmp_path / "results")
    out = _main("report_time", ["--results-dir", str(results)], monkeypatch, capsys)
    assert _ratio(r"cold / warm:", out) > 0
    assert "warm output identical to cold: True" in out


def test_precision_on_a_tiny_model(bench_env, tiny_model, monkeypatch, capsys):
    out = _main("precision", ["--model", "tiny", "--limit", "8"], monkeypatch, capsys)
    assert _ratio(r"speed ratio bf16 / fp32 =", out) > 0
    assert re.search(r"largest \|difference\| [\d.]+ points", out), out


@pytest.mark.slow
def test_encode_throughput_on_the_real_backbone(monkeypatch, capsys):
    out = _main("encode_throughput", ["--n", "16", "--repeats", "1", "--batch-size", "8"], monkeypatch, capsys)
    assert _ratio(r"ratio ours / sentence-transformers:", out) > 0
    assert float(re.search(r"min cosine between the two embeddings of a sentence = ([\d.]+)", out).group(1)) > 0.999


@pytest.mark.slow
def test_grid_overhead_on_the_real_backbone(monkeypatch, capsys):
    out = _main("grid_overhead", ["--seeds", "1", "--limit", "4", "--suites", "sts", "--num-cpus", "1"],
                monkeypatch, capsys)
    assert _ratio(r"ratio grid / one process:", out) > 0

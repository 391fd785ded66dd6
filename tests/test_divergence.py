"""How far apart two models are: the weight distance ratio, McNemar and the attack outcome agreement."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from bench.scoring.stats import mcnemar, outcome_agreement, weight_distance_ratio


def test_weight_distance_ratio_by_hand():
    base = {"layer.0.w": np.zeros((2, 2)), "layer.1.w": np.zeros(3), "head": np.ones(1)}
    a = {"layer.0.w": np.array([[3.0, 0.0], [0.0, 4.0]]), "layer.1.w": np.array([1.0, 0.0, 0.0])}
    b = {"layer.0.w": np.array([[3.0, 0.0], [0.0, 0.0]]), "layer.1.w": np.array([1.0, 2.0, 2.0]), "extra": np.ones(2)}
    out = weight_distance_ratio(a, b, base, group=lambda n: n.rsplit(".", 1)[0])
    g0, g1 = out["groups"]["layer.0"], out["groups"]["layer.1"]
    assert (g0["between"], g0["a_moved"], g0["b_moved"], g0["ratio"]) == pytest.approx((4.0, 5.0, 3.0, 0.8))
    assert (g1["between"], g1["a_moved"], g1["b_moved"], g1["ratio"]) == pytest.approx((math.sqrt(8), 1.0, 3.0, math.sqrt(8)))
    overall = out["overall"]  # sqrt(16 + 8) / sqrt(25 + 1)
    assert overall["ratio"] == pytest.approx(math.sqrt(24) / math.sqrt(26)) and overall["tensors"] == 2
    assert out["left_out"] == ["extra", "head"]
    assert weight_distance_ratio(base, base, base)["overall"]["ratio"] is None  # A never moved: no ratio


def test_mcnemar_on_a_hand_computed_table():
    # 1 example only A succeeds on, 5 only B: exact two-sided p = 2 (C(6,0) + C(6,1)) / 2^6 = 14/64,
    # mid-p = exact - C(6,1)/2^6 = 8/64; concordant examples do not enter.
    a = [1] * 10 + [0] * 7 + [1] + [0] * 5
    b = [1] * 10 + [0] * 7 + [0] + [1] * 5
    test = mcnemar(a, b)
    assert (test["a_only"], test["b_only"]) == (1, 5)
    assert test["p_exact"] == pytest.approx(14 / 64) and test["p_mid"] == pytest.approx(8 / 64)
    table = outcome_agreement(a + [math.nan, 1], b + [0, math.nan])
    assert (table["both_succeed"], table["both_fail"], table["a_only"], table["b_only"]) == (10, 7, 1, 5)
    assert (table["attacked_by_both"], table["attacked_by_one"]) == (23, 2)
    assert table["agreement"] == pytest.approx(17 / 23) and table["mcnemar_p_exact"] == pytest.approx(14 / 64)
    assert table["asr_difference"] == pytest.approx(100 * (15 - 11) / 23)
    assert table["asr_ci_low"] <= table["asr_difference"] <= table["asr_ci_high"]


HEADER = {"builds": {}, "constraints": {"mode": "unified"}, "query_budget": None, "recipe": "textfooler",
          "run_seed": 0, "served": {}, "task": "mr", "victim": "frozen"}
SENTENCES = ["a good film", "a bad film", "the plot is fun", "a boring story", "great actor"]


def write_log(root: Path, model: str, kinds: list[str], **header) -> Path:
    path = root / model / "mr" / header.get("recipe", "textfooler") / f"seed0-run{header.get('run_seed', 0)}-{model}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    head = {**HEADER, **header, "model": model, "victim_sha256": model * 2, "victim_base_sha256": model}
    lines = [{"header": head}] + [{"index": i, "result_type": k, "original": {"text": SENTENCES[i]},
                                    "perturbed": {"text": SENTENCES[i]}, "words_changed": 1}
                                   for i, k in enumerate(kinds)]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_agreement_from_a_log_pair(tmp_path):
    from attacks.agreement import agreement

    write_log(tmp_path, "simcse", ["successful", "failed", "successful", "skipped", "successful"])
    write_log(tmp_path, "robust", ["successful", "successful", "failed", "failed", "successful"])
    write_log(tmp_path, "simcse", ["successful"], recipe="pwws")  # a setting only A has: not paired
    write_log(tmp_path, "robust", ["failed"], recipe="pwws", run_seed=1)  # another run: not paired
    tables = agreement(tmp_path, "simcse", "robust")
    assert len(tables) == 1
    t = tables[0]
    assert t["setting"] == "mr textfooler frozen unified run0"
    assert (t["both_succeed"], t["both_fail"], t["a_only"], t["b_only"]) == (2, 0, 1, 1)
    assert (t["attacked_by_both"], t["attacked_by_one"], t["examples"]) == (4, 1, 5)
    assert t["agreement"] == pytest.approx(0.5) and t["asr_difference"] == pytest.approx(0.0)


def test_logs_of_other_sentences_are_refused(tmp_path):
    from attacks.agreement import agreement
    from bench.errors import BenchError

    write_log(tmp_path, "simcse", ["successful", "failed"])
    path = write_log(tmp_path, "robust", ["successful", "failed"])
    path.write_text(path.read_text().replace("a bad film", "another film"))
    with pytest.raises(BenchError, match="different sentences at index 1"):
        agreement(tmp_path, "simcse", "robust")


def test_divergence_command_on_tiny_checkpoints(bench_env, tmp_path_factory, monkeypatch, capsys):
    import torch
    from safetensors.torch import load_file, save_file

    from bench.models import registry
    from app.cli import main
    from tests.conftest import write_tiny_bert

    dirs = {}
    for name, seed in (("tiny-base", 0), ("tiny-a", 0), ("tiny-b", 0)):
        dirs[name] = write_tiny_bert(tmp_path_factory.mktemp(name), seed=seed)
        monkeypatch.setitem(registry.MODELS, name, registry.ModelSpec(name=name, backbone=str(dirs[name]),
                                                                      pooler="avg", max_len=64))
    # A moves one layer-0 weight by 3 and B by 3 + 4 on another: ||B - A|| / ||A - 0|| = 4/3 in layer 0.
    name = "encoder.layer.0.attention.self.query.weight"
    for model, (d1, d2) in (("tiny-a", (3.0, 0.0)), ("tiny-b", (3.0, 4.0))):
        weights = load_file(str(dirs[model] / "model.safetensors"))
        weights[name] = weights[name].clone()
        weights[name][0, 0] += d1
        weights[name][0, 1] += d2
        weights["bert.unused"] = torch.zeros(1)  # a prefixed name lines up; unmatched ones are left out
        save_file(weights, str(dirs[model] / "model.safetensors"))
    write_log(bench_env.results / "attack_logs", "tiny-a", ["successful", "failed", "skipped"])
    write_log(bench_env.results / "attack_logs", "tiny-b", ["successful", "successful", "failed"])
    assert main(["divergence", "tiny-a", "tiny-b", "--base", "tiny-base", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    w = out["weights"]
    assert w["groups"]["layer.0"]["ratio"] == pytest.approx(4 / 3, rel=1e-5)
    assert w["groups"]["layer.1"]["between"] == 0 and w["overall"]["ratio"] == pytest.approx(4 / 3, rel=1e-5)
    assert list(w["groups"])[:3] == ["embeddings", "layer.0", "layer.1"] and "unused" in w["left_out"]
    assert (out["outcomes"][0]["a_only"], out["outcomes"][0]["b_only"]) == (0, 1)
    written = bench_env.results / "divergence" / "tiny-a__tiny-b.json"
    assert json.loads(written.read_text()) == out
    assert main(["divergence", "tiny-a", "tiny-a"]) == 2
    # the checkpoints gone (a fresh clone): the stored measure is kept, the outcomes recomputed from the logs
    import shutil

    shutil.rmtree(dirs["tiny-b"])
    assert main(["divergence", "tiny-a", "tiny-b", "--base", "tiny-base"]) == 0
    assert "is kept" in capsys.readouterr().out and json.loads(written.read_text()) == out

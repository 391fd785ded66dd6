"""Adversarial suite, no TextAttack needed: metric arithmetic, the JSONL log and resume, our model wrapper."""

import json

import numpy as np
import pytest

from attacks.log import AttackLog
from attacks.metrics import attack_metrics, mean_std
from bench.errors import BenchError


def records(kinds: list[str], queries: int = 10, words: int = 20, changed: int = 2) -> list[dict]:
    return [{"index": i, "result_type": k, "num_queries": queries + i, "num_words": words,
             "words_changed": changed if k == "successful" else 0, "wall_s": 0.5} for i, k in enumerate(kinds)]


def test_attack_success_rate_excludes_skipped():
    # 200 examples, 43 already misclassified (skipped), 128 of the remaining 157 broken.
    recs = records(["skipped"] * 43 + ["successful"] * 128 + ["failed"] * 29)
    m = attack_metrics(recs)
    assert round(m["attack_success_rate"], 1) == 81.5
    assert m["attack_success_rate"] == pytest.approx(100 * 128 / 157)
    assert m["original_accuracy"] == pytest.approx(100 * 157 / 200)  # 78.5
    assert m["accuracy_under_attack"] == pytest.approx(100 * 29 / 200)  # 14.5
    assert m["accuracy_reduction"] == pytest.approx(m["original_accuracy"] - m["accuracy_under_attack"])
    assert m["avg_queries"] == pytest.approx(np.mean([10 + i for i in range(43, 200)]))  # skipped left out
    assert m["words_perturbed_pct"] == pytest.approx(10.0)  # 2 of 20 words, successful ones only
    assert m["examples_per_s"] == pytest.approx(2.0)
    assert (m["successful"], m["failed"], m["skipped"]) == (128, 29, 43)


def test_metrics_when_nothing_was_attacked():
    m = attack_metrics(records(["skipped"] * 3))
    assert m["attack_success_rate"] == 0.0  # TextAttack's convention
    assert m["avg_queries"] is None and m["words_perturbed_pct"] is None
    assert m["original_accuracy"] == 0.0


def test_mean_std_over_runs():
    assert mean_std([80.0, 90.0, None]) == (85.0, pytest.approx(7.0710678))
    assert mean_std([70.0]) == (70.0, None)
    assert mean_std([None]) == (None, None)


def _rec(i, kind="failed"):
    return {"index": i, "result_type": kind, "num_queries": 1, "num_words": 3, "words_changed": 0}


def test_log_resumes_and_drops_a_torn_line(tmp_path):
    path = tmp_path / "log.jsonl"
    log = AttackLog(path, {"recipe": "pwws", "n": 5})
    for i in range(3):
        log.add(_rec(i))
    log.close()
    with path.open("ab") as fh:  # a writer killed in the middle of a line
        fh.write(b'{"index": 3, "result_ty')
    with AttackLog(path, {"recipe": "pwws", "n": 5}) as again:
        assert sorted(again.records) == [0, 1, 2]
        assert [again.done(i) for i in range(5)] == [True, True, True, False, False]
        again.add(_rec(3, "successful"))
        lines = path.read_text().splitlines()
        assert len(lines) == 5 and json.loads(lines[-1])["index"] == 3  # header + 4 whole records
        with pytest.raises(ValueError):
            again.add(_rec(3))  # never recorded twice


def test_log_refuses_another_configuration_and_releases_its_lock(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "log.jsonl"
    with AttackLog(path, {"recipe": "pwws"}) as log:
        log.add(_rec(0))
    with pytest.raises(BenchError, match="different configuration"):
        AttackLog(path, {"recipe": "bae"})
    # another process can take the writer's lock at once: the refused log did not keep it
    take = "import fcntl, sys; f = open(sys.argv[1], 'a'); fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)"
    assert subprocess.run([sys.executable, "-c", take, f"{path}.lock"]).returncode == 0
    with AttackLog(path, {"recipe": "pwws"}) as fresh:
        fresh.reset()
        assert fresh.records == {} and len(path.read_text().splitlines()) == 1


@pytest.fixture
def classifier(tiny_bert_dir):
    import torch

    from bench.models.encoder import load_hf
    from bench.finetune import Classifier

    model, tokenizer = load_hf(str(tiny_bert_dir))
    torch.manual_seed(0)
    return Classifier(model, "avg", 3).eval(), tokenizer


def test_wrapper_matches_padded_forward_and_caches(classifier):
    import torch

    from attacks.wrapper import CachedModelWrapper

    model, tokenizer = classifier
    texts = ["a man is playing guitar", "the movie was great", "a dog", "a man is playing guitar",
             "the plot was boring and the actor was bad"]
    wrapper = CachedModelWrapper(model, tokenizer, max_length=64, batch_size=2)
    got = wrapper(texts)
    with torch.no_grad():  # the stock way: everything padded to max_length, one batch
        enc = tokenizer(texts, padding="max_length", max_length=64, truncation=True, return_tensors="pt")
        ref = model(**enc).numpy()
    assert got.shape == (5, 3)
    np.testing.assert_allclose(got, ref, atol=1e-5)
    assert wrapper.stats["forward_examples"] == 4  # the repeated text is computed once
    again = wrapper(texts[:2])
    np.testing.assert_array_equal(again, got[:2])
    assert wrapper.stats["forward_examples"] == 4 and wrapper.stats["cache_hits"] == 3


def test_wrapper_pairs_use_pair_encoding(classifier):
    import torch

    from attacks.wrapper import CachedModelWrapper

    model, tokenizer = classifier
    pairs = [("a man is running", "a woman is eating"), ("a dog", "a cat is sitting in the park")]
    got = CachedModelWrapper(model, tokenizer, max_length=64)(pairs)
    with torch.no_grad():
        enc = tokenizer([a for a, _ in pairs], [b for _, b in pairs], padding=True, return_tensors="pt")
        ref = model(**enc).numpy()
    np.testing.assert_allclose(got, ref, atol=1e-5)


def test_wrapper_cache_is_bounded(classifier):
    from attacks.wrapper import CachedModelWrapper

    model, tokenizer = classifier
    wrapper = CachedModelWrapper(model, tokenizer, cache_size=2)
    wrapper(["a dog", "a cat", "a man"])
    assert len(wrapper._cache) == 2


def test_the_yelp_stand_in_never_trains_on_an_attacked_example(tmp_path):
    """yelp-split: TextFooler's Yelp set, odd positions train the victim and even positions are attacked."""
    from attacks import datasets as ds
    from suites.adversarial import SUBSTITUTES, TASKS_BY_NAME

    folder = tmp_path / "textfooler_attack_sets"
    folder.mkdir()
    (folder / "yelp").write_text("".join(f"{i % 2} review number {i}\n" for i in range(10)), encoding="utf-8")
    task = TASKS_BY_NAME["yelp"]
    assert "yelp-split" in task.substitutes
    stand_in = SUBSTITUTES["yelp-split"]
    attacked = stand_in.attacked(task.attack_set(tmp_path))
    train = stand_in.load(tmp_path, attacked)
    assert [e.inputs[0] for e in attacked] == [f"review number {i}" for i in range(0, 10, 2)]
    assert {e.inputs for e in attacked}.isdisjoint({e.inputs for e in train}) and len(train) == 5
    assert stand_in.source != ds.YELP_TRAIN_SET.source


def test_the_mean_over_two_runs_gets_a_run_by_run_bootstrap_not_a_t_interval():
    """With two runs a t-interval has 1 degree of freedom and spans most of 0-100; the mean-of-runs row's CI
    resamples each run's attacked examples within that run instead, and one run keeps its own Wilson."""
    from bench.results.uncertainty import apply_uncertainty
    from bench.scoring.stats import Evidence, Sample
    from suites.adversarial import Replication, _run_rows
    from suites.base import Task

    task = Task(name="mr", suite="adversarial", dataset="mr", split="attack", main_metric="attack_success_rate")
    plan = [Replication(k, k, tuple(range(200 * k, 200 * (k + 1))), "block") for k in range(2)]
    outcomes = [np.r_[np.ones(140), np.zeros(60)], np.r_[np.ones(110), np.zeros(90)]]  # 70% and 55%
    evidence = [{"attack_success_rate": Evidence("proportion", Sample(list(range(200)), {"y": o}), ("y",),
                                                  scale=100.0)} for o in outcomes]
    per_run = [{"attack_success_rate": 100 * o.mean()} for o in outcomes]
    rows = _run_rows(task, "attack_success_rate", per_run, plan, "{}", {}, "textfooler", evidence=evidence)
    apply_uncertainty(rows)
    mean = rows[0]
    assert mean.aggregation == "mean-of-runs" and mean.value == pytest.approx(62.5)
    assert mean.ci_method.startswith("bootstrap-stratified") and 55 < mean.ci_low < 62.5 < mean.ci_high < 70
    one = _run_rows(task, "attack_success_rate", per_run[:1], plan[:1], "{}", {}, "textfooler", evidence=evidence[:1])
    apply_uncertainty(one)
    assert one[0].ci_method == "wilson"

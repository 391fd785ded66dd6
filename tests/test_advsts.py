import json
from collections import OrderedDict

import numpy as np
import pytest

from attacks.regression import SuccessRule
from suites import advsts
from suites.sts import TASKS as STS_TASKS

RULE = SuccessRule(margin=1.0)


def test_success_rule_on_constructed_scores():
    # gold 4.5, clean prediction 4.0: clean error 0.5; success needs error >= 1.5
    assert RULE.score(3.2, 4.5, 4.0) == pytest.approx(0.8)
    assert not RULE.is_success(3.2, 4.5, 4.0)
    assert RULE.is_success(3.0, 4.5, 4.0)  # error 1.5: exactly the margin
    assert RULE.is_success(2.0, 4.5, 4.0)
    assert not RULE.is_success(4.0, 4.5, 4.0)  # unchanged
    assert not RULE.is_success(5.0, 4.5, 4.0)  # moved, but error only 0.5
    # growing the error upwards counts too: gold 1.0, clean 1.2 (error 0.2) -> 2.2 (error 1.2)
    assert RULE.is_success(2.2, 1.0, 1.2) and not RULE.is_success(2.1, 1.0, 1.2)
    np.testing.assert_allclose(RULE.to_scale([-0.3, 0.0, 0.5, 1.0, 1.2]), [0.0, 0.0, 2.5, 5.0, 5.0])
    assert RULE.describe()["margin"] == 1.0 and RULE.describe()["perturbed"] == "sentence2"


@pytest.fixture(scope="module")
def textattack_ready(tmp_path_factory):
    """TextAttack imported the project's way: Resources.prepare() first (offline NLTK data)."""
    import os

    from attacks.resources import Resources
    from bench.paths import Paths

    os.environ.setdefault("BENCH_OFFLINE", "1")
    root = tmp_path_factory.mktemp("ta")
    resources = Resources(Paths(home=root, data=root / "data", results=root / "results"))
    resources.textattack()
    return resources


class ScoreTable:
    """A fake model wrapper: the score of a pair is looked up by its sentence2."""

    def __init__(self, table, default=4.0):
        self.table, self.default = table, default
        self.model = object()
        self.calls = []

    def __call__(self, pairs):
        self.calls.append(list(pairs))
        return np.array([self.table.get(b, self.default) for _, b in pairs])


def swap_recipe(words):
    def build(res, goal):
        from textattack import Attack
        from textattack.constraints.pre_transformation import RepeatModification
        from textattack.search_methods import GreedyWordSwapWIR
        from textattack.transformations import WordSwap

        class SwapToList(WordSwap):
            def _get_replacement_words(self, word):
                return [w for w in words if w != word]

        return Attack(goal, [RepeatModification()], SwapToList(), GreedyWordSwapWIR(wir_method="delete"))
    return build


def test_regression_goal_status_and_score(textattack_ready):
    from textattack.goal_function_results import GoalFunctionResultStatus as Status
    from textattack.shared import AttackedText

    from attacks.regression import goal_function

    table = {"a man is playing guitar": 4.0, "a dog is playing guitar": 3.2, "a man is playing sad": 2.0}
    goal = goal_function(ScoreTable(table), RULE)
    pair = lambda s2: AttackedText(OrderedDict(sentence1="a man plays the guitar", sentence2=s2))  # noqa: E731
    first, _ = goal.init_attack_example(pair("a man is playing guitar"), "4.5")
    assert first.goal_status == Status.SEARCHING and first.score == pytest.approx(0.0) and first.output == 4.0
    (near, far), _ = goal.get_results([pair("a dog is playing guitar"), pair("a man is playing sad")])
    assert near.goal_status == Status.SEARCHING and near.score == pytest.approx(0.8)
    assert far.goal_status == Status.SUCCEEDED and far.score == pytest.approx(2.0)
    assert goal.num_queries == 3


def test_attack_perturbs_only_sentence2_and_reaches_the_margin(textattack_ready, monkeypatch):
    from attacks.recipes import RECIPES
    from attacks.regression import goal_function

    s1, s2 = "a man is playing guitar", "a man is playing guitar"
    table = {"a man is playing sad": 1.0}
    monkeypatch.setitem(RECIPES, "swap", swap_recipe(["sad"]))
    wrapper = ScoreTable(table, default=4.6)
    attack = advsts.build_attack("swap", textattack_ready, goal_function(wrapper, RULE))
    record = advsts.attack_pair(attack, 0, s1, s2, 4.8, None, seed=0)
    assert record["result_type"] == "successful"
    assert record["adversarial"][0] == s1  # sentence1 is never perturbed
    assert record["adversarial"][1] == "a man is playing sad"
    assert record["original_score"] == 4.6 and record["perturbed_score"] == 1.0
    assert record["words_changed"] == 1 and record["num_words"] == 5
    assert all(a == s1 for batch in wrapper.calls for a, _ in batch)

    record = advsts.attack_pair(attack, 1, s1, "a dog", 4.8, None, seed=0)  # nothing moves the score
    assert record["result_type"] == "failed" and record["perturbed_score"] == 4.6


def test_attack_may_not_copy_words_from_sentence1(textattack_ready, monkeypatch):
    from attacks.recipes import RECIPES
    from attacks.regression import copied_words, goal_function

    assert copied_words("a woman is cutting onions", "a woman is cutting tofu", "a woman is cutting Onions") == {"onions"}
    assert copied_words("a woman is cutting onions", "the onions", "a onions") == {"a"}
    assert copied_words("a man", "a dog", "a cat") == set()
    # the only score-moving swap copies 'onions' from sentence1 (a real meaning change): refused
    s1, s2 = "a woman is cutting onions", "a woman is cutting tofu"
    monkeypatch.setitem(RECIPES, "swap", swap_recipe(["onions", "sad"]))
    wrapper = ScoreTable({"a woman is cutting onions": 5.0}, default=2.5)
    attack = advsts.build_attack("swap", textattack_ready, goal_function(wrapper, RULE))
    record = advsts.attack_pair(attack, 0, s1, s2, 1.8, None, seed=0)
    assert record["result_type"] == "failed"
    assert not any("onions" in b for batch in wrapper.calls for _, b in batch)


def _records():
    return [{"index": 0, "gold": 4.8, "adversarial": ["a man is  playing guitar", "a man is playing sad"],
             "result_type": "successful", "extra": "ENTAILMENT"},
            {"index": 7, "gold": 0.333, "adversarial": ["what is the answer", "who is\tthe actor"],
             "result_type": "failed", "extra": "NEUTRAL"},
            {"index": 9, "gold": 2.0, "adversarial": ["a child is happy", "a child is sad"],
             "result_type": "failed", "extra": None}]


@pytest.mark.parametrize("task_name", ["stsb", "sickr"])
def test_adversarial_file_round_trips_through_the_sts_loader(tmp_path, task_name):
    task = next(t for t in advsts.TASKS if t.name == task_name)
    path = task.write(tmp_path / task.out_name, _records(), "textfooler")
    sts_task = next(t for t in STS_TASKS if t.name == task_name)  # the STS suite's own loader
    pairs = sts_task.load(path.parent)
    s1, s2, gold = pairs.all_pairs()
    assert s1 == ["a man is playing guitar", "what is the answer", "a child is happy"]
    assert s2 == ["a man is playing sad", "who is the actor", "a child is sad"]
    assert gold == [4.8, 0.333, 2.0]


def test_advsts_end_to_end_with_resume(bench_env, tiny_model, monkeypatch, textattack_ready, capsys):
    from attacks.recipes import RECIPES
    from app.cli import main
    from bench.data.datasets import read_stsb

    monkeypatch.setenv("BENCH_OFFLINE", "1")
    monkeypatch.setitem(RECIPES, "swap", swap_recipe(["dog", "sad", "terrible", "question"]))
    args = ["run", "--device", "cpu", "--suite", "advsts", "--model", "tiny", "--task", "stsb",
            "--recipe", "swap", "--limit", "5"]
    assert main(args) == 0
    (cell,) = (bench_env.results / "cells" / "tiny" / "advsts" / "stsb").glob("*.json")
    rows = {r["metric"]: r for r in json.loads(cell.read_text())["results"]}
    assert set(rows) == set(advsts.ROW_METRICS)
    assert all(r["attack"] == "swap" and r["n"] == 5 for r in rows.values())
    cfg = json.loads(rows["attack_success_rate"]["config"])
    assert cfg["goal"]["success"].startswith("|pred_adv - gold|") and cfg["goal"]["margin"] == 1.0
    assert (cfg["goal"]["lo"], cfg["goal"]["hi"]) == (0.0, 5.0) and "not RobustEmbed Table 4" in cfg["asr_definition"]
    assert cfg["recipes"] == ["swap"] and cfg["limit"] == 5

    (log,) = (bench_env.results / "attack_logs" / "tiny" / "advsts-stsb" / "swap").glob("*.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()[1:]]
    assert [r["index"] for r in records] == list(range(5))
    successes = sum(r["result_type"] == "successful" for r in records)
    assert rows["attack_success_rate"]["value"] == pytest.approx(100.0 * successes / 5)
    for r in records:  # the recorded success agrees with the rule
        assert (r["result_type"] == "successful") == RULE.is_success(r["perturbed_score"], r["gold"], r["original_score"])
    adv_file = bench_env.results / json.loads(rows["attack_success_rate"]["resources"])["adversarial_file"]
    s1, s2, gold = read_stsb(adv_file.parent, "test").all_pairs()
    assert s2 == [" ".join(r["adversarial"][1].split()) for r in records] and gold == [r["gold"] for r in records]

    # resume: drop the cell and the last two records; only those two pairs are attacked again
    cell.unlink()
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:-2]))
    attacked = []
    original = advsts.attack_pair
    monkeypatch.setattr(advsts, "attack_pair", lambda attack, i, *a, **k: attacked.append(i) or original(attack, i, *a, **k))
    assert main(args) == 0
    assert attacked == [3, 4]


def test_sick_is_scored_on_its_own_1_to_5_scale(bench_env, tiny_model, monkeypatch, textattack_ready):
    """SICK-R's gold is 1-5: cosine maps to 1 + 4·clip(cos, 0, 1), with a margin of a fifth of that range."""
    from attacks.recipes import RECIPES
    from app.cli import main
    from bench.models.encoder import Encoder
    from bench.models.registry import get_model

    assert advsts.SICK_RULE.describe()["lo"] == 1.0 and advsts.SICK_RULE.margin == pytest.approx(0.2 * 4)
    np.testing.assert_allclose(advsts.SICK_RULE.to_scale([-0.5, 0.0, 0.5, 1.0]), [1.0, 1.0, 3.0, 5.0])
    assert advsts.STSB_RULE.margin == pytest.approx(0.2 * 5)
    monkeypatch.setenv("BENCH_OFFLINE", "1")
    monkeypatch.setitem(RECIPES, "swap", swap_recipe(["dog", "sad"]))
    assert main(["run", "--device", "cpu", "--suite", "advsts", "--model", "tiny", "--task", "sickr",
                 "--recipe", "swap", "--limit", "3"]) == 0
    (cell,) = (bench_env.results / "cells" / "tiny" / "advsts" / "sickr").glob("*.json")
    rows = {r["metric"]: r for r in json.loads(cell.read_text())["results"]}
    cfg = json.loads(rows["attack_success_rate"]["config"])
    assert (cfg["goal"]["lo"], cfg["goal"]["hi"], cfg["goal"]["margin"]) == (1.0, 5.0, 0.8)
    assert cfg["asr_definition"].startswith("ours, not RobustEmbed Table 4's")
    assert cfg["scorer_version"] == "advsts-2.2"
    (log,) = (bench_env.results / "attack_logs" / "tiny" / "advsts-sickr" / "swap").glob("*.jsonl")
    records = [json.loads(line) for line in log.read_text().splitlines()[1:]]
    encoder = Encoder.from_spec(get_model("tiny"), device="cpu")
    for r in records:
        a, b = encoder.encode(r["original"])
        cos = float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
        assert r["original_score"] == pytest.approx(1.0 + 4.0 * min(max(cos, 0.0), 1.0), abs=1e-4)
    # the paper's measure, Pearson on the adversarial pairs, is in the cell beside our ASR
    from scipy.stats import pearsonr

    gold = [r["gold"] for r in records]
    expected = pearsonr([r["perturbed_score"] for r in records], gold)[0] * 100
    assert rows["pearson_adversarial"]["value"] == pytest.approx(expected)

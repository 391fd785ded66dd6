"""Adversarial victims: NLI victims on their own training sets
(skipped with a message when absent, a substitute only behind a flag), replications that vary the
victim seed and the sample, the two victim modes, and BERT-Attack's candidates option."""

from __future__ import annotations

import json

import pytest

from tests.test_adversarial_suite import adv_env  # noqa: F401  (fixture: tiny model + MR fixtures)
from bench.runner import cell_config

NLI = [("entailment", "a man is playing guitar", "a man is playing"),
       ("contradiction", "a dog is running in the park", "a cat is sitting"),
       ("neutral", "a woman is eating food", "the woman is happy"),
       ("contradiction", "a child is sad", "a child is happy")]
SNLI_DEV = [("entailment", "a woman is playing guitar", "a woman is playing"),
            ("contradiction", "a cat is running", "a dog is sitting"),
            ("neutral", "a man is eating", "the man is sad"),
            ("entailment", "the film was good", "the film was good")]


def _cells(paths, task):
    return sorted((paths.results / "cells/tiny/adversarial" / task).glob("*.json"))


def _rows(cell):
    return json.loads(cell.read_text())["results"]


def _main(*args) -> int:
    from app.cli import main

    return main(["run", "--suite", "adversarial", "--model", "tiny", "--device", "cpu", *args])


def _write_nli(root):
    sets = root / "textfooler_attack_sets"
    for name in ("snli", "mnli_mismatched"):
        (sets / name).write_text("".join(f"{y}\t{a}\t{b}\n" for y, a, b in NLI))
    snli = root / "senteval/downstream/SNLI"
    snli.mkdir(parents=True, exist_ok=True)
    rows = SNLI_DEV * 4 + NLI[:1]  # one attack pair, which the substitute keeps out
    (snli / "s1.dev").write_text("".join(f"{a}\n" for _, a, _ in rows))
    (snli / "s2.dev").write_text("".join(f"{b}\n" for _, _, b in rows))
    (snli / "labels.dev").write_text("".join(f"{y}\n" for y, _, _ in rows))


# --- pure units -----------------------------------------------------------------------------

def test_replications_vary_the_victim_seed_and_take_disjoint_blocks():
    from suites.adversarial import replications, what_varied

    plan = replications(total=1000, n=200, runs=3, seed=0)
    assert [r.victim_seed for r in plan] == [0, 1000, 2000]
    assert [(r.indices[0], r.indices[-1], len(r.indices)) for r in plan] == [(0, 199, 200), (200, 399, 200),
                                                                           (400, 599, 200)]
    assert {r.sample for r in plan} == {"block"}
    assert what_varied(plan) == {"runs": 3, "victim_seed": True, "examples": "disjoint",
                                 "victim_seeds": [0, 1000, 2000]}
    # seed 1 never shares a victim with seed 0's runs
    assert {r.victim_seed for r in replications(1000, 200, 3, 1)}.isdisjoint({r.victim_seed for r in plan})

    # the pool runs out: later runs resample (seeded), and the record says they overlap
    plan = replications(total=10, n=4, runs=3, seed=0)
    assert [r.sample for r in plan] == ["block", "block", "resample"]
    assert plan[2].indices == replications(10, 4, 3, 0)[2].indices and len(set(plan[2].indices)) == 4
    assert what_varied(plan)["examples"] == "partly overlapping (pool exhausted)"
    # no --limit: every run attacks the whole pool; only the victim varies
    plan = replications(total=5, n=None, runs=2, seed=0)
    assert plan[0].indices == plan[1].indices == tuple(range(5))
    assert what_varied(plan)["examples"].startswith("same") and what_varied(plan)["victim_seed"] is True
    assert what_varied(replications(5, 2, 1, 0)) == {"runs": 1, "victim_seed": False, "examples": "single run"}


def test_bert_attack_candidates_follow_the_profile_unless_given():
    from attacks.recipes import recipe_parameters

    assert recipe_parameters(["bert-attack", "pwws"], {}, "paper") == {"bert-attack": {"max_candidates": 48}}
    assert recipe_parameters(["bert-attack"], {}, "smoke") == {"bert-attack": {"max_candidates": 8}}
    assert recipe_parameters(["bert-attack"], {}, "study") == {"bert-attack": {"max_candidates": 8}}
    assert recipe_parameters(["bert-attack"], {"bert_attack_candidates": 20}, "paper") == \
        {"bert-attack": {"max_candidates": 20}}
    assert recipe_parameters(["textfooler"], {"bert_attack_candidates": 20}, "paper") == {}


def test_bert_attack_candidates_enter_the_config_only_with_bert_attack(adv_env):
    from suites.adversarial import SUITE
    from suites.base import RunContext

    def cfg(profile, recipes, **options):
        ctx = RunContext(paths=adv_env, profile=profile, options={"recipes": recipes, **options})
        return cell_config(SUITE, SUITE.task("mr"), ctx)

    assert cfg("paper", ["bert-attack"])["bert_attack_candidates"] == 48
    assert cfg("smoke", ["bert-attack"])["bert_attack_candidates"] == 8
    assert cfg("smoke", ["bert-attack"], bert_attack_candidates=48)["bert_attack_candidates"] == 48
    # a flag that cannot change a textfooler cell does not make it a new cell
    assert cfg("smoke", ["textfooler"], bert_attack_candidates=48) == cfg("smoke", ["textfooler"])
    # the victim mode is part of the cell configuration, and so of its key
    assert cfg("smoke", ["pwws"])["victim"] == "finetune"
    frozen = cfg("smoke", ["pwws"], victim="frozen")
    assert frozen["victim"] == "frozen" and frozen["victim_training"]["epochs"] == 30
    assert cfg("smoke", ["pwws"], victim="finetune") == cfg("smoke", ["pwws"])


def test_victim_examples_caps_the_victims_training_and_enters_the_key_only_when_set(adv_env):
    from suites.adversarial import SUITE
    from suites.base import RunContext

    def cfg(**options):
        ctx = RunContext(paths=adv_env, profile="study", options={"recipes": ["pwws"], "victim": "frozen", **options})
        return cell_config(SUITE, SUITE.task("mr"), ctx)

    full, capped = cfg(), cfg(victim_examples=500)
    assert full["victim_training"]["max_examples"] is None and "victim_examples" not in full
    assert capped["victim_training"]["max_examples"] == 500 and capped["victim_examples"] == 500
    assert {k: v for k, v in capped.items() if k not in ("victim_training", "victim_examples")} == \
        {k: v for k, v in full.items() if k != "victim_training"}


# --- NLI victims ----------------------------------------------------------------------------

def test_mnli_without_mnli_train_is_skipped_naming_the_fetch(adv_env, capsys):
    _write_nli(adv_env.data)
    assert _main("--task", "mnli_mm", "--recipe", "pwws") == 0  # a skip, as Yelp's
    out = " ".join(capsys.readouterr().out.split())
    assert "Skipping 'mnli_mm'" in out and "MNLI train" in out and "bench data fetch mnli" in out
    assert "--substitute-victim snli-dev" in out
    (cell,) = _cells(adv_env, "mnli_mm")
    rows = _rows(cell)
    assert [(r["metric"], r["attack"], r["value"]) for r in rows] == [("attack_success_rate", "pwws", None)]
    cfg = json.loads(rows[0]["config"])
    assert cfg["victim_data"] is None and cfg["substitute_victim"] is None and cfg["train_data_present"] is False
    assert not (adv_env.home / "victims").exists()  # no victim trained on anything else

    capsys.readouterr()
    assert _main("--task", "snli", "--recipe", "pwws") == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Skipping 'snli'" in out and "SNLI train" in out and "bench data fetch snli-1.0" in out


def test_nli_victim_trains_on_its_own_training_set(adv_env):
    from attacks import datasets as ds

    _write_nli(adv_env.data)
    train = [("entailment", "a man is running in the park", "a man is running"),
             ("contradiction", "the movie was great", "the movie was terrible"),
             ("neutral", "a child is playing", "the child is happy")]
    mnli = adv_env.data / ds.MNLI_TRAIN
    mnli.parent.mkdir(parents=True)
    mnli.write_text("".join(json.dumps({"sentence1": a, "sentence2": b, "gold_label": y}) + "\n"
                            for y, a, b in train * 4 + [NLI[0], ("-", "a dog", "a cat")]))
    assert _main("--task", "mnli_mm", "--recipe", "pwws", "--limit", "2") == 0
    (cell,) = _cells(adv_env, "mnli_mm")
    rows = {(r["metric"], r["aggregation"]): r for r in _rows(cell)}
    asr = rows[("attack_success_rate", "mean-of-runs")]
    assert asr["value"] is not None and asr["n"] == 2
    cfg = json.loads(asr["config"])
    assert cfg["victim_data"] == "mnli:train" and cfg["substitute_victim"] is None and cfg["train_data_present"]
    (victim,) = json.loads(rows[("clean_accuracy", "mean-of-runs")]["resources"])["victims"]
    # the attack set's pair is kept out of training, and the unlabelled one is dropped
    assert [(d["source"], d["available"]) for d in victim["training_data"]] == [("mnli:train", 12)]


def test_substitute_victim_only_behind_the_flag_and_recorded(adv_env):
    _write_nli(adv_env.data)
    assert _main("--task", "snli", "--recipe", "pwws", "--limit", "2", "--substitute-victim", "snli-dev") == 0
    (cell,) = _cells(adv_env, "snli")
    rows = {(r["metric"], r["aggregation"]): r for r in _rows(cell)}
    asr = rows[("attack_success_rate", "mean-of-runs")]
    assert asr["value"] is not None and asr["n"] == 2
    cfg = json.loads(asr["config"])
    assert cfg["substitute_victim"] == "snli-dev" and cfg["victim_data"] == "snli:dev"
    (victim,) = json.loads(asr["resources"])["victims"]
    assert victim["training_data"][0]["source"] == "snli:dev" and victim["training_data"][0]["used"] == 16
    # the flag does not touch a task whose own training set is present
    assert _main("--task", "mr", "--recipe", "pwws", "--limit", "1", "--substitute-victim", "snli-dev") == 0
    (mr_cell,) = _cells(adv_env, "mr")
    mr_cfg = json.loads(_rows(mr_cell)[0]["config"])
    assert mr_cfg["substitute_victim"] is None and mr_cfg["victim_data"] == "mr:train"


# --- replications and protocols, end to end -----------------------------------------------

def test_two_replications_record_different_victim_seeds_and_disjoint_samples(adv_env):
    assert _main("--task", "mr", "--recipe", "pwws", "--limit", "2", "--runs", "2") == 0
    (cell,) = _cells(adv_env, "mr")
    rows = _rows(cell)
    runs = {r["aggregation"]: r for r in rows if r["metric"] == "attack_success_rate"}
    assert set(runs) == {"mean-of-runs", "run0", "run1"}
    reps = {k: json.loads(runs[k]["config"])["replication"] for k in ("run0", "run1")}
    assert (reps["run0"]["victim_seed"], reps["run1"]["victim_seed"]) == (0, 1000)
    assert (reps["run0"]["first_index"], reps["run0"]["last_index"]) == (0, 1)
    assert (reps["run1"]["first_index"], reps["run1"]["last_index"]) == (2, 3)
    varied = json.loads(runs["mean-of-runs"]["config"])["replication"]
    assert varied == {"runs": 2, "victim_seed": True, "examples": "disjoint", "victim_seeds": [0, 1000]}
    victims = json.loads(runs["mean-of-runs"]["resources"])["victims"]
    assert [v["seed"] for v in victims] == [0, 1000]
    assert victims[0]["weights_sha256"] != victims[1]["weights_sha256"]  # two different victims
    # each run attacked its own examples, logged apart
    logs = sorted((adv_env.results / "attack_logs/tiny/mr/pwws").glob("*.jsonl"))
    indices = [[json.loads(x)["index"] for x in p.read_text().splitlines()[1:]] for p in logs]
    assert sorted(indices) == [[0, 1], [2, 3]]
    clean = {r["aggregation"]: r for r in rows if r["metric"] == "clean_accuracy"}
    assert set(clean) == {"mean-of-runs", "run0", "run1"} and clean["run0"]["n"] == 5  # the whole attack set


def test_frozen_protocol_trains_a_head_and_attacks_through_the_encoder(adv_env):
    from bench.finetune import FrozenHeadClassifier

    assert _main("--task", "mr", "--recipe", "pwws", "--limit", "2", "--victim", "frozen") == 0
    assert _main("--task", "mr", "--recipe", "pwws", "--limit", "2") == 0  # finetune: another cell, another victim
    cells = _cells(adv_env, "mr")
    assert len(cells) == 2
    by_protocol = {json.loads(_rows(c)[0]["config"])["victim"]: _rows(c) for c in cells}
    assert set(by_protocol) == {"finetune", "frozen"}
    frozen = {(r["metric"], r["aggregation"]): r for r in by_protocol["frozen"]}
    asr = frozen[("attack_success_rate", "mean-of-runs")]
    assert asr["value"] is not None and asr["n"] == 2
    (victim,) = json.loads(asr["resources"])["victims"]
    assert victim["protocol"] == "frozen" and victim["hyperparameters"]["epochs"] == 30
    # the two victims sit side by side in the cache (keyed by protocol, seed and settings)
    dirs = sorted(p.name for p in (adv_env.home / "victims/tiny/mr").iterdir())
    assert len(dirs) == 2 and dirs[0].startswith("finetune-seed0-") and dirs[1].startswith("frozen-seed0-")
    card = json.loads((adv_env.home / "victims/tiny/mr" / dirs[1] / "card.json").read_text())
    assert card["protocol"] == "frozen" and card["training"]["features"] == 32  # the tiny encoder's width
    # the attack log's outcomes are what the frozen victim says
    (log,) = [p for p in (adv_env.results / "attack_logs/tiny/mr/pwws").glob("*.jsonl")
              if json.loads(p.read_text().splitlines()[0])["header"]["victim"] == "frozen"]
    records = [json.loads(x) for x in log.read_text().splitlines()[1:]]
    assert [r["index"] for r in records] == [0, 1]
    from bench.models.encoder import Encoder
    from bench.models.registry import get_model

    enc = Encoder.from_spec(get_model("tiny"), device="cpu")
    clf = FrozenHeadClassifier.load(adv_env.home / "victims/tiny/mr" / dirs[1], enc)
    for r in records:
        assert int(clf.predict([r["original"]["text"]])[0]) == r["original_output"]


def test_adversarial_training_adds_the_victims_own_adversarial_training_examples(adv_env):
    """The victim-level control: training sentences (never attack-set ones) are attacked against the plain
    victim, the successes join its training data, and the hardened victim is a cell of its own."""
    args = ("--task", "mr", "--recipe", "pwws", "--limit", "2", "--victim", "frozen")
    assert _main(*args, "--adversarial-training", "pwws", "--adversarial-training-examples", "6") == 0
    (log,) = (adv_env.results / "attack_logs/tiny/mr/adversarial-training-pwws").glob("*.jsonl")
    lines = log.read_text().splitlines()
    assert json.loads(lines[0])["header"]["attacked"] == "training set"
    records = [json.loads(x) for x in lines[1:]]
    from attacks import datasets as ds
    from suites.adversarial import SUITE

    attack_set = {e.inputs[0] for e in SUITE.task("mr").attack_set(adv_env.data)}
    assert len(records) == 6 and not {r["original"]["text"] for r in records} & attack_set
    made = sum(r["result_type"] == "successful" for r in records)
    assert made > 0
    (cell,) = _cells(adv_env, "mr")
    asr = {(r["metric"], r["aggregation"]): r for r in _rows(cell)}[("attack_success_rate", "mean-of-runs")]
    config = json.loads(asr["config"])
    assert (config["adversarial_training"], config["adversarial_training_examples"]) == ("pwws", 6)
    (victim,) = json.loads(asr["resources"])["victims"]
    sources = {d["source"]: d["used"] for d in victim["training_data"]}
    assert sources["mr:train-adversarial-pwws"] == made and len(sources) == 2
    # the plain victim's cell is another cell, whose key is what it was before the option existed
    assert _main(*args) == 0 and len(_cells(adv_env, "mr")) == 2
    plain = [c for c in _cells(adv_env, "mr") if c != cell]
    assert not any(k.startswith("adversarial_training") or k == "treatments"
                   for k in json.loads(_rows(plain[0])[0]["config"]))
    assert config["treatments"] == ["adversarial_training"]
    # the reports' rows are the plain victim's: a treated cell is a control's condition, not the model's number
    from reports.results import load_rows

    assert {r["_cell"] for r in load_rows(adv_env.results) if r["suite"] == "adversarial"} == {str(plain[0])}
    assert {r["_cell"] for r in load_rows(adv_env.results, treated=True)} == {str(plain[0]), str(cell)}
    # with the control's cell gone, a re-run takes its training-set attacks from the log and scores the same
    cell.unlink()
    assert _main(*args, "--adversarial-training", "pwws", "--adversarial-training-examples", "6") == 0
    assert log.read_text().splitlines() == lines
    (again,) = [c for c in _cells(adv_env, "mr") if "adversarial_training" in json.loads(_rows(c)[0]["config"])]
    assert {(r["metric"], r["aggregation"]): r for r in _rows(again)}[("attack_success_rate", "mean-of-runs")][
        "value"] == asr["value"]
    # a training-set log whose texts no longer match the training set is refused, as an attack-set log is
    tampered = json.loads(lines[1])
    tampered["original"]["text"] = "a sentence the training set does not hold"
    log.write_text("\n".join([lines[0], json.dumps(tampered), *lines[2:]]) + "\n")
    again.unlink()
    assert _main(*args, "--adversarial-training", "pwws", "--adversarial-training-examples", "6") == 2


def test_the_benchmarks_mr_victim_is_built_through_the_suites_own_api(adv_env):  # noqa: F811
    """benchmarks/attack_profile.py's mr_victim (attack_throughput.py uses it too) builds the suite's MR victim
    by calling the suite, so a change of the suite's signatures fails here, not only in a benchmark run."""
    import torch

    from bench.paths import Paths
    from tests.conftest import benchmark_script
    from tests.test_adversarial_suite import ATTACK

    task, examples, victim = benchmark_script("attack_profile").mr_victim(Paths.from_env(), "tiny", 8)
    assert task.name == "mr" and len(examples) == len(ATTACK)
    enc = victim.tokenizer(["a good film"], return_tensors="pt")
    with torch.no_grad():
        logits = victim.model(**enc)
    assert tuple(logits.shape) == (1, 2)

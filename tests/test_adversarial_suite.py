"""The adversarial suite end to end on a tiny random BERT and tiny fixture files: victim fine-tuning,
a real PWWS attack (WordNet from the system copy), rows with provenance, the JSONL log, and resume
after a simulated kill -9 (no finished example lost, none recomputed)."""

from __future__ import annotations

import json

import pytest
from bench.runner import cell_config

POS = ["the movie was great", "a good film", "the story was fun", "the actor was great and good",
       "a great plot", "the film was fun and good", "a very good story", "great fun"]
NEG = ["the movie was terrible", "a bad film", "the story was boring", "the actor was bad and terrible",
       "a boring plot", "the film was sad and bad", "a very bad story", "terrible fun"]
ATTACK = [(1, "the movie was very good"), (0, "the plot was very boring"), (1, "a great and fun film"),
          (0, "the story was bad"), (1, "a good actor")]


@pytest.fixture
def adv_env(bench_env, tiny_model, monkeypatch):
    from suites import adversarial

    root = bench_env.data
    (root / "textfooler_attack_sets").mkdir(parents=True)
    (root / "textfooler_attack_sets/mr").write_text("".join(f"{y} {t}\n" for y, t in ATTACK))
    mr = root / "senteval/downstream/MR"
    mr.mkdir(parents=True)
    (mr / "rt-polarity.pos").write_text("".join(f"{t}\n" for t in POS * 4 + ["a good actor"]))
    (mr / "rt-polarity.neg").write_text("".join(f"{t}\n" for t in NEG * 4))
    from tests.conftest import register_fixture_dataset

    # the fixtures stand for the datasets the run checks (content hashes enter the cell configuration)
    register_fixture_dataset(monkeypatch, root, "textfooler", "textfooler_attack_sets")
    register_fixture_dataset(monkeypatch, root, "mr", "senteval/downstream/MR")
    monkeypatch.setitem(adversarial.VICTIM_SETTINGS["finetune"], "smoke",
                        {"max_examples": 64, "epochs": 3, "max_len": 32, "lr": 1e-3, "head_lr": 1e-2,
                         "batch_size": 8})
    return bench_env


def _run(*extra) -> int:
    from app.cli import main

    return main(["run", "--suite", "adversarial", "--model", "tiny", "--task", "mr", "--recipe", "pwws",
                 "--limit", "4", *extra])


def _rows(paths):
    cells = sorted((paths.results / "cells/tiny/adversarial/mr").glob("*.json"))
    assert len(cells) == 1
    return cells[0], {(r["metric"], r["attack"]): r for r in json.loads(cells[0].read_text())["results"]}


def test_pwws_end_to_end_then_resume_after_kill(adv_env, monkeypatch):
    from attacks.metrics import attack_metrics
    from suites import adversarial

    assert _run() == 0
    cell, rows = _rows(adv_env)
    log_path = next((adv_env.results / "attack_logs/tiny/mr/pwws").glob("*.jsonl"))
    lines = log_path.read_text().splitlines()
    records = [json.loads(x) for x in lines[1:]]
    assert [r["index"] for r in records] == [0, 1, 2, 3]  # --limit 4: the first four, in order
    assert {r["result_type"] for r in records} <= {"successful", "failed", "skipped"}
    expected = attack_metrics(records)
    asr = rows[("attack_success_rate", "pwws")]
    assert asr["value"] == pytest.approx(expected["attack_success_rate"]) and asr["n"] == 4
    assert rows[("original_accuracy", "pwws")]["value"] == pytest.approx(expected["original_accuracy"])
    provenance = json.loads(asr["resources"])
    assert "WordSwapWordNet" in provenance["attack"] and "weighted-saliency" in provenance["attack"]
    assert provenance["served"]["wordnet"] == "wordnet-3.0"
    assert json.loads(asr["config"])["recipes"] == ["pwws"]
    assert "(search_method): GreedyWordSwapWIR" in json.loads(asr["config"])["attack"]  # repr(attack) in the config
    clean = rows[("clean_accuracy", "")]
    assert 0.0 <= clean["value"] <= 100.0 and clean["n"] == 5
    # the victim's accuracy on all 5 attack examples, with its Wilson interval from per-example evidence
    assert clean["ci_method"] == "wilson" and clean["ci_low"] <= clean["value"] <= clean["ci_high"]
    assert round(clean["value"] * 5 / 100) == pytest.approx(clean["value"] * 5 / 100)

    # kill -9 after two examples: the cell was never written, the third record was torn mid-line.
    cell.unlink()
    log_path.write_text("\n".join(lines[:3]) + "\n" + lines[3][: len(lines[3]) // 2])
    attacked = []
    real_attack_one = adversarial.attack_one
    monkeypatch.setattr(adversarial, "attack_one",
                        lambda attack, ex, i, *a: attacked.append(i) or real_attack_one(attack, ex, i, *a))
    assert _run() == 0
    assert attacked == [2, 3]  # resumed at the next example; 0 and 1 not recomputed
    resumed = [json.loads(x) for x in log_path.read_text().splitlines()[1:]]
    assert resumed[:2] == records[:2]
    assert [r["result_type"] for r in resumed] == [r["result_type"] for r in records]  # seeded, deterministic
    _, again = _rows(adv_env)
    assert again[("attack_success_rate", "pwws")]["value"] == asr["value"]

    assert _run() == 0  # a finished cell is reused: nothing attacked
    assert attacked == [2, 3]

    # the cell records the log's sha256; a hand-edited log stops the reuse (exit 2), never a silent number
    import hashlib

    from bench.results.store import LOGS

    (recorded,) = json.loads(cell.read_text())[LOGS]
    assert recorded["path"] == log_path.relative_to(adv_env.results).as_posix()
    assert recorded["sha256"] == hashlib.sha256(log_path.read_bytes()[:recorded["bytes"]]).hexdigest()
    edited = log_path.read_text().splitlines()
    first = json.loads(edited[1])
    first["result_type"] = "failed" if first["result_type"] != "failed" else "successful"
    log_path.write_text("\n".join([edited[0], json.dumps(first, sort_keys=True), *edited[2:]]) + "\n")
    assert _run() == 2 and attacked == [2, 3]


def test_unknown_recipe_is_a_usage_error(adv_env, capsys):
    from app.cli import main

    code = main(["run", "--suite", "adversarial", "--model", "tiny", "--task", "mr", "--recipe", "textfoolr"])
    assert code == 2
    assert "textfooler" in capsys.readouterr().err


@pytest.mark.slow
def test_real_attack_sets_and_victim_data():
    """Counts of the offline data the suite attacks and trains on; attack examples kept out of training."""
    import os
    from pathlib import Path

    from attacks import datasets as ds
    from suites.adversarial import TASKS_BY_NAME

    root = Path(os.environ.get("BENCH_DATA_DIR", "")).resolve()
    if not (root / "textfooler_attack_sets").is_dir():
        pytest.skip("BENCH_DATA_DIR has no benchmark data")
    sizes = {"mr": (1000, 9654), "sst2": (872, 67349), "mrpc": (408, 3668), "imdb": (1000, 25000)}
    for name, (n_attack, n_train) in sizes.items():
        task = TASKS_BY_NAME[name]
        attack = task.attack_set(root)
        train = task.train.load(root, attack)
        assert (len(attack), len(train)) == (n_attack, n_train), name
        assert {e.label for e in attack} == {e.label for e in train} == set(range(len(task.labels))), name
        assert all(len(e.inputs) == len(task.columns) for e in attack + train), name
    mr_attack = TASKS_BY_NAME["mr"].attack_set(root)
    train_keys = {ds._norm_key(e.inputs[0]) for e in TASKS_BY_NAME["mr"].train.load(root, mr_attack)}
    assert not any(ds._norm_key(e.inputs[0]) in train_keys for e in mr_attack)
    assert max(len(e.inputs[0].split()) for e in TASKS_BY_NAME["imdb"].train.load(root, [])) == ds.IMDB_MAX_WORDS
    # NLI: the attack sets are here; the victims' training sets (SNLI, MNLI train) are not offline.
    snli_attack = TASKS_BY_NAME["snli"].attack_set(root)
    assert len(snli_attack) == len(TASKS_BY_NAME["mnli_mm"].attack_set(root)) == 1000
    assert TASKS_BY_NAME["snli"].train.source == "snli:train" and TASKS_BY_NAME["mnli_mm"].train.source == "mnli:train"
    substitute = ds.SNLI_DEV_SUBSTITUTE.load(root, snli_attack)
    assert len(substitute) == 9842  # SNLI dev: TextFooler's SNLI pairs are not in it


def test_yelp_without_training_data_is_skipped_with_a_message(adv_env, capsys):
    (adv_env.data / "textfooler_attack_sets/yelp").write_text("1 great food\n0 bad service\n")
    from app.cli import main

    assert main(["run", "--suite", "adversarial", "--model", "tiny", "--task", "yelp", "--recipe", "pwws"]) == 0
    assert "Skipping 'yelp'" in " ".join(capsys.readouterr().out.split())
    cell = next((adv_env.results / "cells/tiny/adversarial/yelp").glob("*.json"))
    rows = json.loads(cell.read_text())["results"]
    assert [(r["metric"], r["attack"], r["value"]) for r in rows] == [("attack_success_rate", "pwws", None)]
    assert json.loads(rows[0]["config"])["train_data_present"] is False  # a train file later is a new cell


@pytest.mark.slow  # loads the numpy USE stand-in
def test_unified_constraints_run_end_to_end_recorded_and_keyed_apart(adv_env):
    from attacks.resources import Resources
    from bench.paths import Paths
    from tests.test_resources import _tiny_space

    _tiny_space(Resources(Paths.from_env()).layout.counterfit)  # the word-embedding role, built
    assert _run("--constraints", "unified") == 0
    _, rows = _rows(adv_env)
    asr = rows[("attack_success_rate", "pwws")]
    config = json.loads(asr["config"])
    assert config["constraints"] == "unified"
    assert config["unified_constraints"] == {"max_modify_rate": 0.3, "use_threshold": 0.840845057,
                                             "use_metric": "angular", "use_window": 15, "min_word_cos_sim": 0.9,
                                             "queries_per_word": 50}
    for part in ("MaxWordsPerturbed", "WordEmbeddingDistance", "USEM3Encoder", "queries_per_word"):
        assert part in config["attack"], part
    header = json.loads(next((adv_env.results / "attack_logs/tiny/mr/pwws").glob("*.jsonl")).read_text()
                        .splitlines()[0])
    assert "unified" in json.dumps(header)
    assert _run() == 0  # the paper constraints are another cell and another log
    assert len(list((adv_env.results / "cells/tiny/adversarial/mr").glob("*.json"))) == 2
    assert len(list((adv_env.results / "attack_logs/tiny/mr/pwws").glob("*.jsonl"))) == 2



def test_cell_key_names_only_the_resources_its_recipes_use_and_no_build_timings(adv_env):
    """Building the masked LM (BAE, BERT-Attack) must not re-key PWWS cells, and the same build made
    again (other wall times) must not re-key anything."""
    from attacks.resources import Resources
    from bench.paths import Paths
    from suites.adversarial import AdversarialSuite
    from suites.base import RunContext
    from tests.test_resources import _tiny_space

    paths = Paths.from_env()
    suite, layout = AdversarialSuite(), Resources(paths).layout
    _tiny_space(layout.counterfit)

    def key(*recipes, **options):
        ctx = RunContext(paths=paths, limit=4, options={"recipes": list(recipes), **options})
        return cell_config(suite, suite.task("mr"), ctx)

    pwws, pwws_unified = key("pwws"), key("pwws", constraints="unified")
    assert "word_embedding" not in pwws["attack_resources"] and "word_embedding" in pwws_unified["attack_resources"]
    layout.mlm.mkdir(parents=True)
    (layout.mlm / "model.safetensors").write_bytes(b"weights")
    (layout.mlm / "report.json").write_text(json.dumps({"top1": 21.0, "steps": 900, "train_s": 2100.0}))
    assert key("pwws") == pwws and key("pwws", constraints="unified") == pwws_unified
    bae = key("bae")
    assert bae["attack_resources"]["masked_lm"]["report"] == {"top1": 21.0, "steps": 900}
    (layout.mlm / "report.json").write_text(json.dumps({"top1": 21.0, "steps": 900, "train_s": 1900.0}))
    assert key("bae") == bae  # the same build, another wall time
    (layout.mlm / "report.json").write_text(json.dumps({"top1": 25.0, "steps": 1200, "train_s": 2100.0}))
    assert key("bae") != bae  # another build
    report = layout.counterfit / "report.json"
    report.write_text(json.dumps({**json.loads(report.read_text()), "build_s": 12.5, "fit_s": 3.0}))
    assert key("pwws", constraints="unified") == pwws_unified


def test_missing_attack_resource_fails_before_any_victim_is_trained(adv_env, capsys):
    """--constraints unified needs the counter-fitted vectors: without them the run stops at once with
    the build command, instead of after fine-tuning the victims."""
    assert _run("--constraints", "unified") == 2
    out = capsys.readouterr()
    assert "word_embedding" in out.err and "bench resources build" in out.err
    assert "Training a" not in out.out + out.err
    assert not list((adv_env.results / "cells").glob("tiny/adversarial/mr/*.json"))

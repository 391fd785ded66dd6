import json

import pytest

from bench.cli import main
from bench.errors import BenchError
from suites import anli
from tests.conftest import register_fixture_dataset

PAIRS = [("a man is playing guitar", "a man is playing", "entailment"),
         ("a dog is running in the park", "a cat is sitting", "contradiction"),
         ("a woman is eating food", "the woman is happy", "neutral"),
         ("a child is sad", "a child is happy", "contradiction"),
         ("the movie was great", "the film was good", "entailment"),
         ("a man is running", "a man is running in the park", "neutral")]


def write_nli_fixtures(monkeypatch, root):
    snli = root / "senteval/downstream/SNLI"
    snli.mkdir(parents=True)
    for split in ("dev", "test"):
        rows = PAIRS * 3 + [("a dog", "a cat", "-")]  # "-": no gold label, dropped
        (snli / f"s1.{split}").write_text("".join(f"{a} \n" for a, _, _ in rows))
        (snli / f"s2.{split}").write_text("".join(f"{b} \n" for _, b, _ in rows))
        (snli / f"labels.{split}").write_text("".join(f"{y}\n" for _, _, y in rows))
    register_fixture_dataset(monkeypatch, root, "snli", "senteval/downstream/SNLI")
    for rnd in anli.ROUNDS:
        for split in ("dev", "test"):
            d = root / "anli" / rnd
            d.mkdir(parents=True, exist_ok=True)
            (d / f"{split}.jsonl").write_text("".join(
                json.dumps({"uid": f"{rnd}-{split}-{i}", "context": a, "hypothesis": b, "label": y[0]}) + "\n"
                for i, (a, b, y) in enumerate(PAIRS * 2)))
    register_fixture_dataset(monkeypatch, root, "anli", "anli")


def test_label_mapping_is_one_order_across_sources(tmp_path):
    assert [anli.label_id(x) for x in ("entailment", "neutral", "contradiction")] == [0, 1, 2]
    assert [anli.label_id(x) for x in ("e", "n", "c")] == [0, 1, 2]
    assert [anli.label_id(x) for x in ("SUPPORTS", "NOT ENOUGH INFO", "REFUTES")] == [0, 1, 2]
    assert anli.label_id("-") is None
    with pytest.raises(BenchError, match="Unknown NLI label"):
        anli.label_id("yes")
    # the same pair read through both file formats gets the same label id
    (tmp_path / "SNLI").mkdir()
    for name, values in (("s1", [p for p, _, _ in PAIRS]), ("s2", [h for _, h, _ in PAIRS]),
                         ("labels", [y for _, _, y in PAIRS])):
        (tmp_path / "SNLI" / f"{name}.dev").write_text("".join(f"{v}\n" for v in values))
    (tmp_path / "R1").mkdir()
    (tmp_path / "R1" / "dev.jsonl").write_text("".join(
        json.dumps({"uid": str(i), "context": p, "hypothesis": h, "label": y[0]}) + "\n" for i, (p, h, y) in enumerate(PAIRS)))
    snli = anli.read_snli_senteval(tmp_path / "SNLI", "dev")
    adv = anli.read_anli(tmp_path, "R1", "dev")
    assert snli.labels == adv.labels == [anli.LABELS.index(y) for _, _, y in PAIRS]
    assert list(zip(snli.premises, snli.hypotheses)) == list(zip(adv.premises, adv.hypotheses))


def test_anli_end_to_end_rows_resume_and_cache(bench_env, tiny_model, monkeypatch, capsys):
    write_nli_fixtures(monkeypatch, bench_env.data)
    assert main(["run", "--device", "cpu", "--suite", "anli", "--model", "tiny"]) == 0
    cells = sorted((bench_env.results / "cells" / "tiny" / "anli").rglob("*.json"))
    assert [c.parent.name for c in cells] == ["all", "r1", "r2", "r3"]
    rows = {c.parent.name: json.loads(c.read_text())["results"] for c in cells}
    for task, task_rows in rows.items():
        # smoke trains on ANLI dev: only test is reported; "all" as the paper's mean of rounds, and pooled
        expected = ([("test", "accuracy", "mean-of-rounds", 36), ("test", "accuracy", "pooled", 36)] if task == "all"
                    else [("test", "accuracy", "all", 12)])
        assert [(r["split"], r["metric"], r["aggregation"], r["n"]) for r in task_rows] == expected
        cfg = json.loads(task_rows[0]["config"])
        assert [p["source"] for p in cfg["training_mix"]] == ["snli:dev", "anli:R1:dev", "anli:R2:dev", "anli:R3:dev"]
        assert cfg["dev_reported"] == []
        card = json.loads(task_rows[0]["resources"])["classifier"]
        assert {k: card["training_data"][0][k] for k in ("source", "available", "used")} == \
            {"source": "snli:dev", "available": 18, "used": 18}
    # accuracy equals what the per-example records say
    logs = sorted((bench_env.results / "examples" / "tiny" / "anli").rglob("*.jsonl"))
    assert [p.name for p in logs] == ["R1-test.jsonl", "R2-test.jsonl", "R3-test.jsonl"]
    recs = [json.loads(line) for p in logs for line in p.read_text().splitlines()]
    assert len(recs) == 36  # 'all' reused the rounds' predictions
    all_rows = {r["aggregation"]: r["value"] for r in rows["all"]}
    assert all_rows["pooled"] == pytest.approx(100.0 * sum(r["pred"] == r["label"] for r in recs) / 36)
    per_round = [100.0 * sum(json.loads(x)["pred"] == json.loads(x)["label"] for x in p.read_text().splitlines()) / 12
                 for p in logs]
    assert per_round == pytest.approx([rows[r][0]["value"] for r in ("r1", "r2", "r3")])
    assert all_rows["mean-of-rounds"] == pytest.approx(sum(per_round) / 3)
    (victim,) = (bench_env.home / "victims" / "tiny" / "anli-smoke").iterdir()
    assert victim.name.startswith("finetune-seed0-")
    assert (victim / "model.safetensors").exists() and (victim / "card.json").exists()

    # cells gone, predictions kept: the re-run reuses the classifier and every prediction
    for c in cells:
        c.unlink()
    from bench import finetune

    calls = []
    original = finetune.FinetunedClassifier.predict_logits
    monkeypatch.setattr(finetune.FinetunedClassifier, "predict_logits",
                        lambda self, inputs, batch_size=None: calls.append(len(inputs)) or original(self, inputs, batch_size))
    capsys.readouterr()
    assert main(["run", "--device", "cpu", "--suite", "anli", "--model", "tiny"]) == 0
    assert "Reusing the finetune classifier" in capsys.readouterr().out
    assert calls == []
    again = {c.parent.name: [r["value"] for r in json.loads(c.read_text())["results"]]
             for c in (bench_env.results / "cells" / "tiny" / "anli").rglob("*.json")}
    assert again == {k: [r["value"] for r in v] for k, v in rows.items()}


def test_dev_is_reported_when_not_trained_on(bench_env, tiny_model, monkeypatch):
    write_nli_fixtures(monkeypatch, bench_env.data)
    monkeypatch.setitem(anli.MIXES, "smoke", anli.MIXES["smoke"][:1])  # SNLI only
    assert main(["run", "--device", "cpu", "--suite", "anli", "--model", "tiny", "--task", "r2"]) == 0
    (cell,) = (bench_env.results / "cells" / "tiny" / "anli" / "r2").glob("*.json")
    assert [(r["split"], r["n"]) for r in json.loads(cell.read_text())["results"]] == [("test", 12), ("dev", 12)]


def test_all_is_the_unweighted_mean_of_the_rounds(bench_env, tiny_model, monkeypatch):
    """Rounds of unequal size (R3 has 1,200 in the real data): the paper's All is the mean of the
    three accuracies, not the pooled accuracy. Checked against predictions forced per round."""
    from suites.base import RunContext

    write_nli_fixtures(monkeypatch, bench_env.data)
    r3 = bench_env.data / "anli" / "R3" / "test.jsonl"
    r3.write_text(r3.read_text() * 3)  # 36 examples (uids repeat: make them unique)
    r3.write_text("".join(json.dumps({**json.loads(line), "uid": f"R3-{i}"}) + "\n"
                          for i, line in enumerate(r3.read_text().splitlines())))
    register_fixture_dataset(monkeypatch, bench_env.data, "anli", "anli")  # the new sizes are the reference
    right = {"R1": 12, "R2": 0, "R3": 36}  # correct per round: 100%, 0%, 100%

    class Oracle:
        card = {"weights_sha256": "0" * 64}

    def predictions(self, clf, data, encoder, ctx, rnd, split):
        return {uid: (y if i < right[rnd] else (y + 1) % 3) for i, (uid, y) in enumerate(zip(data.ids, data.labels))}

    monkeypatch.setattr(anli.ANLISuite, "classifier", lambda self, encoder, ctx: Oracle())
    monkeypatch.setattr(anli.ANLISuite, "predictions", predictions)
    ctx = RunContext(paths=bench_env, limit=None)
    rows = {r.aggregation: r for r in anli.SUITE.run_task(anli.SUITE.task("all"), None, ctx)}
    assert rows["mean-of-rounds"].value == pytest.approx((100 + 0 + 100) / 3)
    assert rows["pooled"].value == pytest.approx(100 * 48 / 60)
    assert rows["mean-of-rounds"].n == rows["pooled"].n == 60
    assert anli.SUITE.task("all").main_aggregation == "mean-of-rounds"  # the headline, and the paper's value
    # Their evidence: the mean of rounds averages the rounds' own resamples, the pooled row is a proportion.
    mean_ev, pooled_ev = rows["mean-of-rounds"].evidence, rows["pooled"].evidence
    assert mean_ev.combine == "average" and [p.label for p in mean_ev.parts] == ["R1", "R2", "R3"]
    assert mean_ev.point() == pytest.approx(rows["mean-of-rounds"].value)
    assert pooled_ev.point() == pytest.approx(rows["pooled"].value) and pooled_ev.interval().method == "wilson"


def test_study_profile_is_refused_with_the_profiles_it_has(bench_env, tiny_model, monkeypatch, capsys):
    write_nli_fixtures(monkeypatch, bench_env.data)
    assert main(["run", "--device", "cpu", "--suite", "anli", "--model", "tiny", "--profile", "study"]) == 2
    assert "no 'study' profile" in capsys.readouterr().err


def test_paper_profile_without_anli_train_names_the_fix(bench_env, tiny_model, monkeypatch, capsys):
    write_nli_fixtures(monkeypatch, bench_env.data)
    assert main(["run", "--device", "cpu", "--suite", "anli", "--model", "tiny", "--profile", "paper"]) == 2
    assert "anli/R1/train.jsonl" in capsys.readouterr().err


@pytest.mark.slow
def test_real_anli_files_parse_with_known_counts():
    import os
    from pathlib import Path

    root = Path(os.environ.get("BENCH_DATA_DIR", "")) / "anli"
    counts = {(r, s): len(anli.read_anli(root, r, s).labels) for r in anli.ROUNDS for s in ("dev", "test")}
    assert counts == {("R1", "dev"): 1000, ("R1", "test"): 1000, ("R2", "dev"): 1000, ("R2", "test"): 1000,
                      ("R3", "dev"): 1200, ("R3", "test"): 1200}
    snli = anli.read_snli_senteval(Path(os.environ["BENCH_DATA_DIR"]) / anli.SNLI_DIR, "test")
    assert set(snli.labels) == {0, 1, 2} and len(snli.labels) == 9824

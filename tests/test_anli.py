import json

import pytest

from app.cli import main
from bench.runner import cell_config
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


def test_a_profile_without_a_mix_is_refused_with_the_profiles_it_has(bench_env):
    from suites.base import RunContext

    with pytest.raises(BenchError, match="no 'huge' profile.*smoke, paper, study"):
        cell_config(anli.SUITE, anli.SUITE.task("r1"), RunContext(paths=bench_env, profile="huge"))


def test_paper_mix_refuses_a_swapped_anli_split_and_names_the_offline_mixes(bench_env, tiny_model, monkeypatch, capsys):
    write_nli_fixtures(monkeypatch, bench_env.data)
    assert main(["run", "--device", "cpu", "--suite", "anli", "--model", "tiny", "--profile", "paper",
                 "--anli-train-split", "test"]) == 2
    err = capsys.readouterr().err
    assert "trains on no ANLI dev" in err and "--profile smoke, study" in err


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


# --- the study mix (every offline NLI pair) and its symmetric set-up -------------------------------------

SICK_ROWS = [("A man is playing a guitar", "A man is playing", "ENTAILMENT"),
             ("A dog is running", "A cat is sleeping", "CONTRADICTION"),
             ("A woman is cooking", "A woman is cooking dinner for her family", "NEUTRAL")]
TEXTFOOLER_ROWS = [("entailment", "the dog runs in the yard .", "an animal moves ."),
                   ("neutral", "she reads a book .", "she reads a novel for school ."),
                   ("contradiction", "the room is empty .", "the room is full of people .")]


def write_study_fixtures(monkeypatch, root, sick=True, textfooler=True):
    """The smoke fixtures, an SNLI test long enough for the study mix's 1,000-pair check (plus 7 pairs
    after it, one sharing a premise with the check), and optionally SICK and TextFooler's MNLI sets."""
    write_nli_fixtures(monkeypatch, root)
    snli = root / "senteval/downstream/SNLI"
    labels = anli.LABELS
    rows = [(f"premise number {i} shows a scene .", f"hypothesis {i} .", labels[i % 3]) for i in range(1000)]
    rows += [(f"later premise {i} .", f"later hypothesis {i} .", labels[i % 3]) for i in range(6)]
    rows += [("Premise number 3 shows a scene", "a new hypothesis on a check premise .", "neutral")]
    rows += [("a dog", "a cat", "-")]
    for name, column in (("s1", 0), ("s2", 1), ("labels", 2)):
        (snli / f"{name}.test").write_text("".join(f"{r[column]}\n" for r in rows))
    register_fixture_dataset(monkeypatch, root, "snli", "senteval/downstream/SNLI")
    if sick:
        d = root / anli.SICK_DIR
        d.mkdir(parents=True, exist_ok=True)  # bench_env's STS fixtures may hold SICK already: replaced
        for k, file in enumerate(("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt")):
            (d / file).write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n" + "".join(
                f"{10 * k + i}\t{a}\t{b}\t3.5\t{y}\n" for i, (a, b, y) in enumerate(SICK_ROWS)))
        register_fixture_dataset(monkeypatch, root, "sick", anli.SICK_DIR)
    if textfooler:
        d = root / anli.TEXTFOOLER_DIR
        d.mkdir(parents=True)
        for name in ("mnli_matched", "mnli_mismatched"):
            (d / name).write_text("".join("\t".join(r) + "\n" for r in TEXTFOOLER_ROWS))
        register_fixture_dataset(monkeypatch, root, "textfooler", anli.TEXTFOOLER_DIR)


def _study_ctx(paths, split="dev"):
    from suites.base import RunContext

    return RunContext(paths=paths, profile="study", options={"anli_train_split": split})


def test_study_mix_is_assembled_from_the_parts_present(bench_env, monkeypatch):
    import shutil

    write_study_fixtures(monkeypatch, bench_env.data, sick=False, textfooler=False)
    shutil.rmtree(bench_env.data / anli.SICK_DIR)  # bench_env's STS fixtures hold SICK
    task = anli.SUITE.task("all")
    cfg = cell_config(anli.SUITE, task, _study_ctx(bench_env))
    assert [p["source"] for p in cfg["training_mix"]] == ["snli:dev", "snli:test", "anli:R1:dev", "anli:R2:dev",
                                                         "anli:R3:dev"]
    assert [x.split(" ")[0] for x in cfg["training_mix_left_out"]] == [
        "sick:train", "sick:dev", "sick:test", "mnli-matched:textfooler", "mnli-mismatched:textfooler"]
    assert set(cfg["data"]) == {"anli", "snli"}

    (bench_env.data / "anli").rename(bench_env.data / "anli-away")  # a required part absent: named with its fix
    with pytest.raises(BenchError, match="bench data fetch anli"):
        cell_config(anli.SUITE, task, _study_ctx(bench_env))


def test_study_mix_records_every_part_and_keeps_the_check_out_of_training(bench_env, monkeypatch):
    write_study_fixtures(monkeypatch, bench_env.data)
    ctx = _study_ctx(bench_env)
    cfg = cell_config(anli.SUITE, anli.SUITE.task("r1"), ctx)
    assert [p["source"] for p in cfg["training_mix"]] == [
        "snli:dev", "snli:test", "sick:train", "sick:dev", "sick:test", "mnli-matched:textfooler",
        "mnli-mismatched:textfooler", "anli:R1:dev", "anli:R2:dev", "anli:R3:dev"]
    assert cfg["training_mix"][1]["skip"] == anli.STUDY_HELD_OUT and "skip" not in cfg["training_mix"][0]
    assert cfg["training_mix_left_out"] == [] and set(cfg["data"]) == {"anli", "snli", "sick", "textfooler"}
    assert cfg["held_out_check"] == {"source": "snli:test", "cap": 1000, "premises_excluded_from_training": True}

    train, check = anli.SUITE.training_data(ctx)
    counts = {t.source: len(t.inputs) for t in train}
    # SNLI test: 1,007 gold pairs, 1,000 are the check, one of the 7 after it shares a check premise
    assert counts == {"snli:dev": 18, "snli:test": 6, "sick:train": 3, "sick:dev": 3, "sick:test": 3,
                      "mnli-matched:textfooler": 3, "mnli-mismatched:textfooler": 3, "anli:R1:dev": 12,
                      "anli:R2:dev": 12, "anli:R3:dev": 12}
    assert len(check.inputs) == 1000
    check_premises = {anli.premise_key(p) for p, _ in check.inputs}
    trained = [pair for t in train for pair in t.inputs]
    assert not check_premises & {anli.premise_key(p) for p, _ in trained}
    assert not set(check.inputs) & set(trained)
    # labels of every source in one order: entailment / neutral / contradiction = 0 / 1 / 2
    by_source = {t.source: dict(zip(t.inputs, t.labels)) for t in train}
    order = {"entailment": 0, "neutral": 1, "contradiction": 2}
    assert [by_source["sick:train"][(a, b)] for a, b, _ in SICK_ROWS] == [order[y.lower()] for _, _, y in SICK_ROWS]
    assert [by_source["mnli-matched:textfooler"][(a, b)] for _, a, b in TEXTFOOLER_ROWS] == [0, 1, 2]
    assert [by_source["snli:dev"][(a, b)] for a, b, _ in PAIRS] == [order[y] for _, _, y in PAIRS]
    assert [by_source["anli:R1:dev"][(a, b)] for a, b, _ in PAIRS] == [order[y] for _, _, y in PAIRS]


def test_a_malformed_sick_line_is_named(bench_env, monkeypatch):
    write_study_fixtures(monkeypatch, bench_env.data)
    path = bench_env.data / anli.SICK_DIR / "SICK_trial.txt"
    path.write_text(path.read_text() + "99\tonly a premise\n")
    with pytest.raises(BenchError, match="SICK_trial.txt:5: malformed line"):
        anli.read_sick_entailment(path, "sick:dev")


def test_trained_on_anli_test_the_study_classifier_scores_dev_and_not_test(bench_env, tiny_model, monkeypatch):
    write_study_fixtures(monkeypatch, bench_env.data)
    base = ["run", "--device", "cpu", "--suite", "anli", "--model", "tiny", "--profile", "study", "--task", "all"]
    assert main(base + ["--anli-train-split", "test"]) == 0
    assert main(base) == 0
    cells = {}
    for path in (bench_env.results / "cells" / "tiny" / "anli" / "all").glob("*.json"):
        rows = json.loads(path.read_text())["results"]
        cells[json.loads(rows[0]["config"]).get("anli_train_split", "dev")] = rows
    assert sorted(cells) == ["dev", "test"]  # two cells, keyed apart
    for trained, scored in (("test", "dev"), ("dev", "test")):
        rows = cells[trained]
        assert [(r["split"], r["aggregation"], r["n"]) for r in rows] == [(scored, "mean-of-rounds", 36),
                                                                         (scored, "pooled", 36)]
        cfg = json.loads(rows[0]["config"])
        assert [p["source"] for p in cfg["training_mix"]][-3:] == [f"anli:{r}:{trained}" for r in anli.ROUNDS]
        assert cfg["dev_reported"] == (["R1", "R2", "R3"] if trained == "test" else [])
        assert cfg.get("test_reported", ["R1", "R2", "R3"]) == ([] if trained == "test" else ["R1", "R2", "R3"])
        card = json.loads(rows[0]["resources"])["classifier"]
        assert card["dev_data"] == {"source": "snli:test", "n": 1000} and card["dev_accuracy"] is not None
        sources = [d["source"] for d in card["training_data"]]
        assert f"anli:R2:{trained}" in sources and f"anli:R2:{scored}" not in sources
    logs = sorted(p.name for p in (bench_env.results / "examples" / "tiny" / "anli").rglob("*.jsonl"))
    assert logs == sorted(f"{r}-{s}.jsonl" for r in anli.ROUNDS for s in ("dev", "test"))
    victims = sorted(p.name for p in (bench_env.home / "victims" / "tiny").iterdir())
    assert victims == ["anli-study", "anli-study-trained-on-anli-test"]


def test_smoke_cells_keep_their_keys(bench_env, monkeypatch):
    """The committed smoke-profile anli cells: the configuration the suite builds today is the one they were
    keyed by (the data fingerprint aside: the fixture data differ from the real files)."""
    from pathlib import Path

    from bench.results.store import config_hash
    from suites.base import RunContext

    write_nli_fixtures(monkeypatch, bench_env.data)
    committed = sorted((Path(__file__).parent.parent / "results" / "cells").glob("*/anli/*/*.json"))
    smoke = [c for c in committed if json.loads(json.loads(c.read_text())["results"][0]["config"])["profile"] == "smoke"]
    if not smoke:
        pytest.skip("no committed smoke-profile anli cells in this checkout")
    for cell in smoke:
        row0 = json.loads(cell.read_text())["results"][0]
        stored = json.loads(row0["config"])
        assert cell.stem.endswith(row0["config_hash"][:8])
        ctx = RunContext(paths=bench_env, profile="smoke", limit=stored["limit"])
        built = cell_config(anli.SUITE, anli.SUITE.task(stored["task"]), ctx)
        # a row adds its own settings to the stored configuration (the All rows: their rounds); the key is the suite's
        assert set(stored) - set(built) <= {"rounds"}
        assert {k: v for k, v in built.items() if k != "data"} == {k: stored[k] for k in built if k != "data"}
        assert config_hash({**built, "data": stored["data"]}) == row0["config_hash"], cell

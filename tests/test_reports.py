"""Reports: tables and figures from a results fixture written here, in tmp_path.

The fixture holds STS, transfer, adversarial (three seeds) and alignment rows for two BERT-base
models that RobustEmbed's tables name (so paper values sit beside them) and one MiniLM model
(its own backbone group), with deliberate holes: robustembed-bert has no SICK-R and no TREC.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.scoring.stats import Evidence, Sample
from bench.results.store import CellKey, Result, ResultStore, config_hash
from bench.results.uncertainty import apply_uncertainty

STS = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr")
TRANSFER = ("mr", "cr", "subj", "mpqa", "sst2", "trec", "mrpc")
MODELS = {"simcse-bert": 0.0, "robustembed-bert": 2.0, "minilm": -5.0}  # model -> offset added to every score
MODELS_USED = tuple(MODELS)


def _cell(store: ResultStore, model: str, suite: str, task: str, seed: int, rows: list[tuple], evidence=None,
          weights: str = "ab" * 32, **options):
    """One result cell; rows are (metric, value[, aggregation[, split[, attack[, std]]]]); ``evidence`` maps
    (metric, aggregation, attack) to a bench.scoring.stats.Evidence stored beside the cell, as the base suite does."""
    cfg = {"suite": suite, "task": task, "split": "test", "limit": None, "profile": "smoke", **options}
    key = CellKey(model, weights, suite, task, seed, config_hash(cfg))
    served = json.dumps({"served": {"word_embedding": "glove6b50d-counterfitted-local"}, "attack": "Attack(...)" * 50})
    results = []
    for metric, value, aggregation, split, attack, std in (tuple(r) + ("all", "test", "", None)[len(r) - 2:]
                                                            for r in rows):
        results.append(Result(model=model, suite=suite, task=task, split=split, metric=metric, aggregation=aggregation,
                              value=value, attack=attack, n=100, seed=seed, std=std, profile="smoke",
                              weights_sha256=weights, config=json.dumps(cfg, sort_keys=True), device="cpu",
                              config_hash=key.config_hash,
                              created_at=f"2026-11-21T20:00:{seed:02d}+00:00",
                              resources=served if suite in ("adversarial", "advsts") else "",
                              evidence=(evidence or {}).get((metric, aggregation, attack))))
    evidence_payload = apply_uncertainty(results)
    for r in results:  # the fixture's hand-set values come from other data than its evidence: an interval that holds them
        if r.value is not None and r.ci_low is not None and not r.ci_low <= r.value <= r.ci_high:
            r.ci_low, r.ci_high = min(r.ci_low, r.value), max(r.ci_high, r.value)
    store.write(key, results, cfg, evidence=evidence_payload)


# Per-example evidence for the significance marks: STS12 separates robustembed-bert from simcse-bert
# (its predictions are closer to gold), STS13 does not (nearly the same predictions); TextFooler on MR:
# robustembed-bert's successes are a subset of simcse-bert's in every run.
_RNG = np.random.default_rng(0)
_GOLD = _RNG.uniform(0, 5, 300)
_NOISE = _RNG.normal(0, 1.0, 300)
_JITTER = _RNG.normal(0, 0.01, 300)


def _sts_evidence(model: str, task: str):
    if model not in ("simcse-bert", "robustembed-bert") or task not in ("sts12", "sts13"):
        return None
    noise = _NOISE * (0.6 if (model, task) == ("robustembed-bert", "sts12") else 1.0)
    pred = _GOLD + noise + (_JITTER if (model, task) == ("robustembed-bert", "sts13") else 0.0)
    return {("spearman", "all", ""): Evidence("spearman", Sample(list(range(300)), {"p": pred, "g": _GOLD}), ("p", "g"))}


def _attack_evidence(model: str, task: str, recipe: str, successes: list[int]):
    if model not in ("simcse-bert", "robustembed-bert") or (task, recipe) != ("mr", "textfooler"):
        return {}
    return {("attack_success_rate", f"run{k}", recipe):
            Evidence("proportion", Sample(list(range(100)), {"s": [1.0] * s + [0.0] * (100 - s)}), ("s",))
            for k, s in enumerate(successes)}


def _runs(metric: str, values: list[float], attack: str) -> list[tuple]:
    """The adversarial suite's rows for one metric: the mean over runs, then one row per run."""
    mean = sum(values) / len(values)
    return [(metric, mean, "mean-of-runs", "test", attack, 1.0)] + [
        (metric, v, f"run{k}", "test", attack) for k, v in enumerate(values)]


def write_fixture(root: Path) -> Path:
    store = ResultStore(root)
    for model, off in MODELS.items():
        for i, task in enumerate(STS):
            if model == "robustembed-bert" and task == "sickr":
                continue
            _cell(store, model, "sts", task, 0, [("spearman", 70.0 + i + off), ("spearman", 60.0 + i + off, "wmean"),
                                                 ("pearson", 69.0 + i + off)], evidence=_sts_evidence(model, task))
        for i, task in enumerate(TRANSFER):
            if model == "robustembed-bert" and task == "trec":
                continue
            _cell(store, model, "transfer", task, 0, [("acc", 80.0 + i + off, "kfold-mean", "test", "", 0.7),
                                                      ("dev_acc", 81.0 + i, "kfold-mean", "dev")], mode="test")
        for task in ("mr", "sst2"):
            rows, evidence = [("clean_accuracy", 85.0)], {}
            for recipe, base in (("textfooler", 60.0), ("pwws", 50.0)):
                asr = [base - 4 * off + run for run in range(3)]
                evidence.update(_attack_evidence(model, task, recipe, [int(a) for a in asr]))
                rows += _runs("attack_success_rate", asr, recipe)
                rows += _runs("accuracy_reduction", [85.0 * a / 100 for a in asr], recipe)
                rows += _runs("avg_queries", [100.0 + 10 * off + run + (50 if recipe == "pwws" else 0)
                                              for run in range(3)], recipe)
            _cell(store, model, "adversarial", task, 0, rows, evidence=evidence, recipes=["textfooler", "pwws"], runs=3)
        if model != "minilm":
            for i, task in enumerate(("stsb", "sickr")):
                _cell(store, model, "advsts", task, 0, [("attack_success_rate", 20.0 - off + i, "all", "test", "textfooler"),
                                                        ("pearson_adversarial", 50.0 + off, "all", "test", "textfooler")])
        _cell(store, model, "alignment", "stsb", 0, [("align", 0.2 - off / 100, "mean"),
                                                     ("uniform", -2.0 - off / 10, "mean")])
    for i, task in enumerate(("r1", "r2", "r3")):
        _cell(store, "simcse-bert", "anli", task, 0, [("accuracy", 40.0 + i, "all", "test"),
                                                       ("accuracy", 41.0 + i, "all", "dev")])
    # "all": the paper's unweighted mean of the rounds, and the pooled accuracy (which the table must not read)
    _cell(store, "simcse-bert", "anli", "all", 0, [("accuracy", 43.0, "mean-of-rounds", "test"),
                                                   ("accuracy", 99.0, "pooled", "test"),
                                                   ("accuracy", 44.0, "mean-of-rounds", "dev"),
                                                   ("accuracy", 99.0, "pooled", "dev")])
    store.write_leaderboard()
    export_metadata(root)
    return root


def export_metadata(root: Path) -> None:
    """What `bench run` exports beside its results: the suites' labels and the models' facts."""
    from bench.results import metadata
    from bench.models.registry import MODELS
    from suites import all_suites

    metadata.export(root, suites=all_suites(), models=[MODELS[m] for m in MODELS_USED])


@pytest.fixture
def results(tmp_path) -> Path:
    return write_fixture(tmp_path / "results")


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict:
    """The reports of the fixture, generated once for the tests that only read them."""
    from reports import generate

    return generate(write_fixture(tmp_path_factory.mktemp("shared") / "results")).reports


def _bench(*args, env_extra=None, cwd=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd)


def _cells(csv_text: str) -> dict:
    return {(r["block"], r["model"], r["column"]): r for r in csv.DictReader(io.StringIO(csv_text))}


def test_missing_cell_is_a_dash_and_short_average_is_marked(generated):
    files = generated
    md = files["robustembed-table1.md"]
    line = next(ln for ln in md.splitlines() if ln.startswith("| robustembed-bert |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[7].startswith("–")  # SICK-R: no result
    assert "†" in cells[8] and "**" not in cells[8]  # average over 6 of 7 tasks: marked, never bold
    full = next(ln for ln in md.splitlines() if ln.startswith("| simcse-bert |"))
    assert "†" not in full
    rows = _cells(files["robustembed-table1.csv"])
    avg = rows[("", "robustembed-bert", "Avg.")]
    assert avg["partial"] == "1" and float(avg["mean"]) == pytest.approx(sum(70.0 + i + 2.0 for i in range(6)) / 6)
    assert avg["paper"] == "77.51" and avg["delta"] == ""  # no difference against the paper's 7-task average
    assert "74.50† [paper 77.51]" in md
    # Transfer: the 6-task average (no TREC) is complete for robustembed-bert, the 7-task one is not.
    t2 = _cells(files["robustembed-table2.csv"])
    assert t2[("", "robustembed-bert", "Avg. (6, no TREC)")]["partial"] == "0"
    assert t2[("", "robustembed-bert", "Avg. (7)")]["partial"] == "1"
    assert "†" in files["robustembed-table2.tex"] or "dagger" in files["robustembed-table2.tex"]


def test_bold_only_when_significantly_better_than_the_runner_up(generated):
    files = generated
    t1 = _cells(files["robustembed-table1.csv"])
    # STS12: robustembed-bert's stored per-pair predictions beat simcse-bert's in a paired bootstrap.
    assert (t1[("", "robustembed-bert", "STS12")]["bold"], t1[("", "robustembed-bert", "STS12")]["mark"]) == ("1", "")
    assert t1[("", "simcse-bert", "STS12")]["bold"] == "0"
    # STS13: best by value, but the paired test cannot separate it from the runner-up.
    assert (t1[("", "robustembed-bert", "STS13")]["bold"], t1[("", "robustembed-bert", "STS13")]["mark"]) == ("0", "n.s.")
    # STS-B: best by value, no stored evidence: neither bold nor n.s.
    assert (t1[("", "robustembed-bert", "STS-B")]["bold"], t1[("", "robustembed-bert", "STS-B")]["mark"]) == ("0", "")
    assert t1[("", "minilm", "STS12")]["bold"] == "0"  # alone in its backbone group: best of nothing
    assert t1[("", "simcse-bert", "SICK-R")]["bold"] == "0"  # the only BERT value in that column
    md1 = files["robustembed-table1.md"]
    assert "73.00 n.s." in md1 and "**72.00**" in md1
    t3 = _cells(files["robustembed-table3.csv"])
    assert t3[("TextFooler", "robustembed-bert", "MR")]["bold"] == "1"  # lower ASR is better, paired over runs
    assert t3[("TextFooler", "simcse-bert", "MR")]["bold"] == "0"
    assert t3[("TextFooler", "robustembed-bert", "SST2")]["bold"] == "0"  # no evidence stored for SST-2
    md = files["robustembed-table3.md"]
    assert "| TextFooler | robustembed-bert | **53.00 ± 1.00 (n=3)** (47.33–58.67) [paper 32.69, Δ +20.31] |" in md
    assert "| BAE |" not in md and "No results at all for: TextBugger, BAE, BERTAttack." in md


def test_attack_rate_intervals_pool_the_runs_examples(generated):
    """3 runs of 100 attacked examples each: the interval is over the 300 examples (a bootstrap stratified
    by run, close to Wilson over the pooled counts), never a t-interval over the 3 run values (53 ± 2.5)."""
    from bench.scoring.stats import t_interval, wilson

    t3 = _cells(generated["robustembed-table3.csv"])
    for model, successes in (("robustembed-bert", (52, 53, 54)), ("simcse-bert", (60, 61, 62))):
        cell = t3[("TextFooler", model, "MR")]
        pooled = wilson(sum(successes), 300)
        assert cell["ci_method"].startswith("bootstrap-stratified-by-run-of-3")
        assert float(cell["ci_low"]) == pytest.approx(pooled.low, abs=1.0)
        assert float(cell["ci_high"]) == pytest.approx(pooled.high, abs=1.0)
        over_runs = t_interval(list(successes))
        assert float(cell["ci_high"]) - float(cell["ci_low"]) > over_runs.high - over_runs.low
    no_evidence = t3[("TextFooler", "robustembed-bert", "SST2")]  # runs without stored evidence: no interval
    assert (no_evidence["ci_low"], no_evidence["ci_high"], no_evidence["seeds"]) == ("", "", "3")
    md = generated["robustembed-table3.md"]
    assert "conditional on the victims" in md and "± the sample std between runs" in md


def test_empty_rows_and_columns_are_left_out_and_counted(generated):
    md = generated["robustembed-table3.md"]
    header = next(ln for ln in md.splitlines() if ln.startswith("| Block |"))
    assert "MR ↓" in header and "SST2 ↓" in header and "Avg. ↓" in header
    assert "IMDB" not in header and "YELP" not in header  # no result of ours in any line
    assert "5 column(s) without a result of ours (IMDB, YELP, MRPC, SNLI, MNLI-mm" in md
    t1 = generated["robustembed-table1.md"]
    assert "Left out as empty" not in t1  # nothing to leave out: nothing said
    t3 = _cells(generated["robustembed-table3.csv"])
    assert ("TextFooler", "simcse-bert", "IMDB") in t3  # the CSV keeps every column of the built table


def test_cells_carry_the_rows_intervals(generated):
    t1 = _cells(generated["robustembed-table1.csv"])
    cell = t1[("", "robustembed-bert", "STS12")]
    assert cell["ci_method"] == "bootstrap(B=1000,seed=0)" and float(cell["ci_low"]) < float(cell["ci_high"])
    assert t1[("", "simcse-bert", "STS14")]["ci_low"] == ""  # no evidence, no interval
    t3 = _cells(generated["robustembed-table3.csv"])
    assert t3[("PWWS", "simcse-bert", "SST2")]["ci_method"] == ""  # runs without evidence: no 2-df t-interval


def test_paper_reference_rows_and_one_header_per_group(generated):
    md = generated["robustembed-table1.md"]
    headers = [ln for ln in md.splitlines() if ln.startswith("| *")]
    assert len(headers) == len(set(headers))  # each group header once
    assert headers[-1].startswith("| *paper (RobustEmbed Table 1, its backbones)*")
    # Table 3 is block-major: each recipe's block is closed by the paper's rows for that recipe
    md = generated["robustembed-table3.md"]
    assert "| TextFooler | paper · SimCSE-BERT_base | 65.53 | 71.49 | 72.61 |" in md  # our columns only
    assert "| PWWS | paper · RobustEmbed-BERT_base |" in md
    body = [ln for ln in md.splitlines() if ln.startswith("| TextFooler |") or ln.startswith("| PWWS |")]
    blocks = [ln.split(" | ")[0] for ln in body]
    assert blocks == sorted(blocks, key=lambda b: b != "| TextFooler")  # one block, then the next
    for recipe in ("TextFooler", "PWWS"):
        mine = [ln for ln in body if ln.startswith(f"| {recipe} |")]
        first_paper = next(i for i, ln in enumerate(mine) if "paper · " in ln)
        assert first_paper > 0 and all("paper · " in ln for ln in mine[first_paper:])  # ours, then the paper's
    t3 = _cells(generated["robustembed-table3.csv"])
    ref = t3[("TextFooler", "paper · RobustEmbed-BERT_base", "MR")]
    assert (ref["reference"], ref["paper"], ref["mean"], ref["bold"]) == ("1", "32.69", "", "0")
    assert "paper · SimCSE-BERT_base" in generated["robustembed-table1.md"]
    assert "paper · SimCSE-BERT_base" not in generated["robustembed-averages.md"]  # summaries list our models only
    assert "Lines 'paper · <row>': the paper's own rows as printed in RobustEmbed Table 1" in generated["robustembed-table1.md"]
    assert "Lines 'paper · <row>'" not in generated["robustembed-averages.md"]  # the legend only where such lines are


def test_report_card(results, tmp_path):
    from bench.results import metadata
    from bench.models import registry
    from reports.card import card

    # Two trained models from simcse-bert at one profile; the card knows them from plugins.json, as reports do.
    metadata.export(results, models=[
        registry.ModelSpec(name="simcse-x", backbone="b", method="simcse", base="simcse-bert", profile="smoke"),
        registry.ModelSpec(name="robust-x", backbone="b", method="robustembed", base="simcse-bert", profile="smoke")])
    store = ResultStore(results)
    for model, task_evidence in (("simcse-x", _sts_evidence("simcse-bert", "sts12")),
                                 ("robust-x", _sts_evidence("robustembed-bert", "sts12"))):
        _cell(store, model, "sts", "sts12", 0, [("spearman", 71.0), ("spearman", 60.0, "wmean")], evidence=task_evidence)
    files = card(results, "robust-x")
    md, page = files["card-robust-x.md"], files["card-robust-x.html"]
    line = next(ln for ln in md.splitlines() if ln.startswith("| sts12 |"))
    assert "bootstrap(B=1000,seed=0)" in line and "significant" in line  # vs base (simcse-bert) and vs SimCSE
    assert line.count("significant") == 2 and "wmean" not in md
    assert "Δ vs base (simcse-bert)" in md and "Δ vs SimCSE (simcse-x)" in md
    assert "profile: smoke" in md and "<table class=\"card\">" in page and "robust-x" in page
    assert "glove6b50d-counterfitted-local" not in md  # no attack rows of its own
    # with a second training seed of both, each seed's RobustEmbed is compared with the same seed's SimCSE
    from reports.card import baselines
    from reports.results import Catalog

    metadata.export(results, models=[
        registry.ModelSpec(name=n, backbone="b", method=m, base="simcse-bert", profile="smoke", recipe=r)
        for n, m, r in (("simcse-x", "simcse", {}), ("a-simcse-x-seed1", "simcse", {"seed": 1}),
                        ("robust-x", "robustembed", {}), ("robust-x-seed1", "robustembed", {"seed": 1}))])
    catalog = Catalog.load(results)
    assert baselines("robust-x", catalog)["SimCSE"] == "simcse-x"
    assert baselines("robust-x-seed1", catalog)["SimCSE"] == "a-simcse-x-seed1"
    # a checkpoint of a longer run is compared with SimCSE's checkpoint at the same step, once that has results
    steps = {"max_steps": 1000, "keep_steps": "250,1000"}
    metadata.export(results, models=[
        registry.ModelSpec(name="robustembed-x-step250", backbone="b", method="robustembed", base="simcse-bert",
                           profile="smoke", recipe=steps)])
    assert baselines("robustembed-x-step250", Catalog.load(results))["SimCSE"] == "simcse-x"  # no twin yet
    metadata.export(results, models=[
        registry.ModelSpec(name=n, backbone="b", method="simcse", base="simcse-bert", profile="smoke", recipe=steps)
        for n in ("simcse-x-step1000", "simcse-x-step250")])
    assert baselines("robustembed-x-step250", Catalog.load(results))["SimCSE"] == "simcse-x-step250"
    env = {"BENCH_RESULTS_DIR": str(results)}
    bad = _bench("report", "--card", "nobody", "--out", str(tmp_path / "r"), env_extra=env)
    assert bad.returncode == 2 and "nobody" in bad.stderr
    ok = _bench("report", "--card", "simcse-bert", "--out", str(tmp_path / "r"), env_extra=env)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "r" / "card-simcse-bert.md").exists() and (tmp_path / "r" / "card-simcse-bert.html").exists()


def test_seeds_give_mean_std_and_n(generated):
    files = generated
    t3 = _cells(files["robustembed-table3.csv"])
    cell = t3[("PWWS", "simcse-bert", "SST2")]
    assert float(cell["mean"]) == pytest.approx(51.0) and float(cell["std"]) == pytest.approx(1.0)
    assert cell["seeds"] == "3"
    assert "51.00 ± 1.00 (n=3)" in files["robustembed-table3.md"]
    assert t3[("PWWS", "simcse-bert", "YELP")]["mean"] == ""  # never ran: missing, not zero
    # A transfer row's own std is over CV folds, not seeds: not shown as a spread.
    t2 = _cells(files["robustembed-table2.csv"])
    assert t2[("", "simcse-bert", "MR")]["std"] == "" and "± 0.70" not in files["robustembed-table2.md"]


def test_seed_cells_are_averaged(results):
    from reports import generate

    _cell(ResultStore(results), "simcse-bert", "sts", "sts12", 1, [("spearman", 72.0)])
    cell = _cells(generate(results).reports["robustembed-table1.csv"])[("", "simcse-bert", "STS12")]
    assert (float(cell["mean"]), cell["seeds"]) == (71.0, "2") and float(cell["std"]) == pytest.approx(2 ** 0.5)


def test_anli_and_advsts_tables(generated):
    files = generated
    anli = _cells(files["vadvcse-table3.csv"])
    assert float(anli[("", "simcse-bert", "dev R1")]["mean"]) == 41.0
    assert float(anli[("", "simcse-bert", "test ALL")]["paper"]) == 46.8
    assert (float(anli[("", "simcse-bert", "test ALL")]["mean"]), float(anli[("", "simcse-bert", "dev ALL")]["mean"])) \
        == (43.0, 44.0)  # the mean of rounds, never the pooled row
    pearson = _cells(files["robustembed-advsts-pearson.csv"])  # the paper's AdvSTS measure, beside our ASR
    assert float(pearson[("TextFooler", "robustembed-bert", "AdvSTS-B")]["mean"]) == 50.0 + MODELS["robustembed-bert"]
    assert "not the paper's undefined one" in files["robustembed-table4.md"]
    assert "41.0 [paper 53.8, Δ -12.8]" in files["vadvcse-table3.md"]
    adv = _cells(files["robustembed-table4.csv"])
    assert adv[("TextFooler", "robustembed-bert", "AdvSTS-B")]["bold"] == "0"  # lower ASR, but no evidence stored
    assert float(adv[("TextFooler", "robustembed-bert", "Avg.")]["paper"]) == 8.22


def test_paper_value_and_difference_beside_ours(generated):
    files = generated
    # RobustEmbed Table 1, SimCSE-BERT_base, STS12 = 68.66; ours 70.00.
    # (with its stored evidence, the cell's 95% CI sits between our value and the paper's)
    assert re.search(r"\| 70\.00 \([\d.]+–[\d.]+\) \[paper 68\.66, Δ \+1\.34\] \|", files["robustembed-table1.md"])
    t1 = _cells(files["robustembed-table1.csv"])
    assert t1[("", "minilm", "STS12")]["paper"] == ""  # no paper row for MiniLM
    # Table 3, TextFooler, RobustEmbed-BERT_base, MR = 32.69; ours mean of 52, 53, 54 = 53.
    assert float(_cells(files["robustembed-table3.csv"])[("TextFooler", "robustembed-bert", "MR")]["delta"]) == \
        pytest.approx(53.0 - 32.69)


def test_settings_sentence_states_profile_mode_and_standins(generated):
    files = generated
    assert "profile: smoke" in files["robustembed-table1.md"] and "aggregation 'all'" in files["robustembed-table1.md"]
    assert "mode: test" in files["robustembed-table2.md"]
    assert "word_embedding=glove6b50d-counterfitted-local" in files["robustembed-table3.md"]


def test_settings_that_differ_name_their_columns(tmp_path):
    from reports import generate

    store = ResultStore(tmp_path)
    _cell(store, "minilm", "transfer", "mr", 0, [("acc", 70.0)], mode="fasttest")
    _cell(store, "minilm", "transfer", "cr", 0, [("acc", 75.0)], mode="test")
    bare = generate(tmp_path, formats=["md"]).reports["robustembed-table2.md"]
    assert "| mr ↑ | cr ↑ |" in bare and "not in the registry" in bare  # no metadata: names, no groups
    export_metadata(tmp_path)
    md = generate(tmp_path, formats=["md"]).reports["robustembed-table2.md"]
    assert "| MR ↑ | CR ↑ |" in md  # the labels the transfer suite exported
    assert "mode: fasttest (minilm: MR), test (minilm: CR)" in md
    _cell(store, "simcse-bert", "transfer", "mr", 0, [("acc", 71.0)], mode="test")
    md = generate(tmp_path, formats=["md"]).reports["robustembed-table2.md"]
    # One setting per column: MR under mode=test for every model, so minilm's fasttest MR is passed over
    # (never set beside simcse-bert's test-mode MR) and the caption says so.
    minilm = next(ln for ln in md.splitlines() if ln.startswith("| minilm |"))
    assert minilm.split("|")[2].strip().startswith("–") and "75.00" in minilm
    assert "mode: test;" in md and "1 cell(s) also have results under other settings" in md


def test_a_column_shows_every_model_under_one_setting(tmp_path):
    """Attack cells under two victim modes: a model with both is shown under the one its peers share,
    never its fine-tuned victims beside another model's frozen ones."""
    from reports import generate

    store = ResultStore(tmp_path)
    for model, victims in (("simcse-bert", ("finetune", "frozen")), ("robustembed-bert", ("frozen",))):
        for victim in victims:
            _cell(store, model, "adversarial", "mr", 0, [("attack_success_rate", 90.0 if victim == "finetune" else 60.0,
                                                          "mean-of-runs", "attack", "textfooler")], victim=victim)
    export_metadata(tmp_path)  # the recipes' labels
    reports = generate(tmp_path, formats=["md"]).reports
    md = reports["robustembed-table3.md"]  # frozen-encoder victims (their own table)
    rows = {ln.split("|")[2].strip(): ln for ln in md.splitlines() if ln.startswith("| TextFooler |")}
    assert "60.00" in rows["simcse-bert"] and "90.00" not in rows["simcse-bert"]
    assert "victim: frozen;" in md and "frozen-encoder victims" in md
    tuned = reports["robustembed-table3-finetuned.md"]  # simcse-bert's fine-tuned victims, never beside frozen ones
    rows = {ln.split("|")[2].strip(): ln for ln in tuned.splitlines() if ln.startswith("| TextFooler |")}
    assert "90.00" in rows["simcse-bert"] and "robustembed-bert" not in rows and "victim: finetune;" in tuned
    _cell(store, "robustembed-bert", "adversarial", "mr", 0, [("attack_success_rate", 80.0, "mean-of-runs", "attack",
                                                               "textfooler")], victim="finetune")
    tuned = generate(tmp_path, formats=["md"]).reports["robustembed-table3-finetuned.md"]
    assert "80.00" in tuned and "60.00" not in tuned


def test_an_attack_row_shares_a_setting_whichever_recipes_ran_beside_it(tmp_path):
    """One model's recipes ran as separate cells, its peer's in one five-recipe cell: a column shows both, since
    which other recipes a cell ran (and their parameters) is no part of a row's setting. The resources a row's
    own recipe was served are."""
    from reports import generate
    from reports.results import row_setting
    from attacks.recipes import RECIPE_SCOPED_CONFIG

    store = ResultStore(tmp_path)
    resources = {"word_embedding": {"served": "glove6b50d-counterfitted-local", "report": {}},
                 "masked_lm": {"served": "minilm-mlm-local", "report": {}}}
    five = ["textfooler", "textbugger", "pwws", "bae", "bert-attack"]
    _cell(store, "simcse-bert", "adversarial", "mr", 0, [("attack_success_rate", 61.0, "mean-of-runs", "attack",
                                                          "textfooler")], victim="frozen", recipes=five,
          bert_attack_candidates=8, attack_resources=resources)
    _cell(store, "robustembed-bert", "adversarial", "mr", 0, [("attack_success_rate", 41.0, "mean-of-runs", "attack",
                                                               "textfooler")], victim="frozen", recipes=["textfooler"],
          bert_attack_candidates=None, attack_resources={"word_embedding": resources["word_embedding"]})
    export_metadata(tmp_path)
    md = generate(tmp_path, formats=["md"]).reports["robustembed-table3.md"]
    rows = {ln.split("|")[2].strip(): ln for ln in md.splitlines() if ln.startswith("| TextFooler |")}
    assert "61.00" in rows["simcse-bert"] and "41.00" in rows["robustembed-bert"]

    config = {"suite": "adversarial", "recipes": five, "bert_attack_candidates": 8, "attack_resources": resources}
    served = json.dumps({"served": {"word_embedding": "glove6b50d-counterfitted-local"}})
    row = {"_config": config, "attack": "textfooler", "resources": served}
    alone = {"_config": {**config, "recipes": ["textfooler"], "bert_attack_candidates": None,
                         "attack_resources": {"word_embedding": resources["word_embedding"]}},
             "attack": "textfooler", "resources": served}
    assert row_setting(row, RECIPE_SCOPED_CONFIG) == row_setting(alone, RECIPE_SCOPED_CONFIG)
    assert row_setting(row, {}) != row_setting(alone, {})  # a suite that declares nothing: the whole config
    other_build = {**resources, "word_embedding": {"served": "glove6b50d-counterfitted-local", "report": {"k": 1}}}
    assert row_setting({**row, "_config": {**config, "attack_resources": other_build}},
                       RECIPE_SCOPED_CONFIG) != row_setting(row, RECIPE_SCOPED_CONFIG)
    k48 = {**row, "attack": "bert-attack", "_config": {**config, "bert_attack_candidates": 48}}
    assert row_setting(k48, RECIPE_SCOPED_CONFIG) != row_setting({**k48, "_config": config}, RECIPE_SCOPED_CONFIG)
    assert row_setting({**row, "_config": {**config, "bert_attack_candidates": 48}},
                       RECIPE_SCOPED_CONFIG) == row_setting(row, RECIPE_SCOPED_CONFIG)  # K is BERT-Attack's alone


def test_a_table_names_the_models_it_leaves_to_another_page(tmp_path):
    """Table 3 leaves the training-step series checkpoints to their own figure, and says so under it."""
    from reports import generate

    store = ResultStore(tmp_path)
    for model, asr in (("simcse-bert", 61.0), ("simcse-bert-scale-step500", 59.0)):
        _cell(store, model, "adversarial", "mr", 0, [("attack_success_rate", asr, "mean-of-runs", "attack",
                                                      "textfooler")], victim="frozen", constraints="unified")
    export_metadata(tmp_path)
    md = generate(tmp_path, formats=["md"]).reports["robustembed-table3.md"]
    shown = {ln.split("|")[2].strip() for ln in md.splitlines() if ln.startswith("| TextFooler |")}
    assert "simcse-bert" in shown and "simcse-bert-scale-step500" not in shown
    assert "simcse-bert-scale-step500: shown in the series" in md


def _tied_settings_fixture(root: Path) -> Path:
    """STS cells of two models where settings tie on every rank but the last: STS-B on verified data and
    on data that failed its sha256 check (both models have both), STS12 under two unranked options,
    STS16 on unverified data only."""
    store = ResultStore(root)
    unverified = {"data_unverified": ["stsb/sts-test.csv: sha256 differs"]}
    for model, off in (("simcse-bert", 0.0), ("minilm", -5.0)):
        _cell(store, model, "sts", "stsb", 0, [("spearman", 75.0 + off)])
        _cell(store, model, "sts", "stsb", 0, [("spearman", 11.0 + off)], **unverified)
        for option, value in (("a", 71.0), ("b", 41.0)):
            _cell(store, model, "sts", "sts12", 0, [("spearman", value + off)], note=option)
        _cell(store, model, "sts", "sts16", 0, [("spearman", 66.0 + off)], **unverified)
    export_metadata(root)
    return root


def test_tied_settings_are_chosen_by_a_written_order_not_by_hash_order(tmp_path):
    """`bench report` under two PYTHONHASHSEEDs writes the same bytes; verified data wins a tie, the
    setting key breaks the rest, and a number on unverified data is marked wherever it appears."""
    results = _tied_settings_fixture(tmp_path / "results")
    outputs = []
    for seed in ("1", "2"):
        out = tmp_path / f"reports-{seed}"
        run = _bench("report", "--out", str(out), env_extra={"BENCH_RESULTS_DIR": str(results), "PYTHONHASHSEED": seed})
        assert run.returncode == 0, run.stderr
        files = {p.name: p.read_bytes() for p in out.iterdir()}
        files.update({p.name: p.read_bytes() for p in results.iterdir() if p.is_file()})
        outputs.append(files)
    assert outputs[0] == outputs[1]
    md = outputs[0]["robustembed-table1.md"].decode()
    simcse = next(ln for ln in md.splitlines() if ln.startswith("| simcse-bert |")).split("|")
    header = next(ln for ln in md.splitlines() if ln.startswith("| Model |")).split("|")
    cell = dict(zip((h.strip() for h in header), (c.strip() for c in simcse)))
    assert cell["STS-B ↑"].startswith("75.00") and "‡" not in cell["STS-B ↑"]  # verified data first
    assert cell["STS12 ↑"].startswith("71.00")  # {"note": "a"} sorts before {"note": "b"}
    assert cell["STS16 ↑"].startswith("66.00‡")  # only unverified data: shown, and marked
    assert "‡: computed on data that failed its sha256 check" in md and "stsb/sts-test.csv" in md
    card = outputs[0]["card-simcse-bert.md"].decode()
    assert "66.00‡" in card or "66.0‡" in card
    assert "‡: computed on data that failed its sha256 check" in card


def test_compare_marks_values_on_unverified_data(tmp_path):
    results = _tied_settings_fixture(tmp_path / "results")
    run = _bench("compare", "minilm", "simcse-bert", "--suite", "sts", "--task", "sts16", "--metric", "spearman",
                 "--results-dir", str(results), env_extra={"COLUMNS": "200"})
    assert run.returncode == 0, run.stderr
    assert "61.00‡" in run.stdout and "66.00‡" in run.stdout
    assert "‡: computed on data that failed its sha256 check" in run.stdout and "stsb/sts-test.csv" in run.stdout


def test_preferred_setting_wins_over_others(tmp_path):
    from reports.results import load_rows, stat

    store = ResultStore(tmp_path)
    _cell(store, "minilm", "transfer", "mr", 0, [("acc", 70.0)], mode="fasttest")
    _cell(store, "minilm", "transfer", "mr", 0, [("acc", 75.0)], mode="test")
    rows = load_rows(tmp_path)
    assert stat(rows, {"model": "minilm", "task": "mr"}, {"mode": ("test", "fasttest")}).mean == 75.0
    assert stat(rows, {"model": "minilm", "task": "mr"}, {"mode": ("fasttest", "test")}).mean == 70.0


def test_figures_png_pdf_and_data(generated):
    files = generated
    for name in ("robustembed-figure2", "robustembed-figure3"):
        assert files[f"{name}.png"].startswith(b"\x89PNG") and files[f"{name}.pdf"].startswith(b"%PDF")
    fig2 = list(csv.DictReader(io.StringIO(files["robustembed-figure2.csv"])))
    assert len(fig2) == 6  # 3 models x 2 attacks
    point = next(p for p in fig2 if (p["model"], p["attack"]) == ("simcse-bert", "textfooler"))
    assert point["tasks"] == "mr sst2"
    # accuracy reduction = 85 * asr / 100, asr = mean over runs and tasks = 61
    assert float(point["x"]) == pytest.approx(85.0 * 61.0 / 100)
    fig3 = list(csv.DictReader(io.StringIO(files["robustembed-figure3.csv"])))
    robust = next(p for p in fig3 if p["model"] == "robustembed-bert")
    assert (float(robust["paper_x"]), float(robust["paper_y"])) == (-2.293, 0.058)


def test_a_figure_with_few_models_names_each_point():
    import matplotlib.pyplot as plt

    from reports.figures import Point, draw
    from reports.specs import FIGURES

    spec = next(f for f in FIGURES if f.name == "robustembed-figure3")
    pts = [Point({"model": f"m{i}"}, ("stsb",), -2.0 - i / 10, 0.2 + i / 100) for i in range(3)]
    fig = draw(spec, pts)
    ax = fig.axes[0]
    assert {t.get_text() for t in ax.texts} == {"m0", "m1", "m2"}
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["m0", "m1", "m2"]
    plt.close(fig)


def test_a_crowded_figure_draws_a_panel_per_base_with_the_method_pair_in_colour():
    """Many models: one panel per base model; RobustEmbed and SimCSE in colour, the base black, the other
    methods grey; one legend for the figure says which is which (no names beside the points)."""
    import matplotlib.pyplot as plt

    from reports.figures import CROWDED, HIGHLIGHT, Point, draw
    from reports.specs import FIGURES

    spec = next(f for f in FIGURES if f.name == "robustembed-figure3")
    methods = ["", "simcse", "robustembed", "dcl", "adcse"]
    pts = [Point({"model": f"{m or 'base'}-{base}"}, ("stsb",), -2.0 - i / 10, 0.2 + i / 100, group=base, method=m)
           for base in ("b1", "b2") for i, m in enumerate(methods)]
    assert len(pts) > CROWDED
    fig = draw(spec, pts)
    panels = [ax for ax in fig.axes if ax.collections]
    assert [ax.get_title() for ax in panels] == ["from b1", "from b2"]
    assert not any(t.get_text().startswith(("simcse-", "dcl-")) for ax in panels for t in ax.texts)
    legend = fig.legends[0]
    assert {t.get_text() for t in legend.get_texts()} == {"base model", "SimCSE", "RobustEmbed", "other methods"}
    colours = {tuple(c.get_facecolor()[0][:3]) for c in panels[0].collections}
    assert len(colours) == 4 and HIGHLIGHT["robustembed"][1] == "tab:red"
    plt.close(fig)


def test_cli_report_is_deterministic_and_check_detects_drift(results, tmp_path):
    env = {"BENCH_RESULTS_DIR": str(results)}
    out = tmp_path / "reports"
    first = _bench("report", "--out", str(out), env_extra=env)
    assert first.returncode == 0, first.stderr
    assert (out / "robustembed-table1.md").exists() and (out / "robustembed-figure2.png").exists()
    assert (results / "leaderboard-sts.csv").exists() and (results / "leaderboard.csv").exists()
    snapshot = {p.name: p.read_bytes() for p in out.iterdir()}
    assert _bench("report", "--out", str(out), env_extra=env).returncode == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == snapshot  # byte-identical, images included
    assert _bench("report", "--out", str(out), "--check", env_extra=env).returncode == 0
    (out / "robustembed-table1.md").write_text("hand-edited\n")
    drift = _bench("report", "--out", str(out), "--check", env_extra=env)
    assert drift.returncode == 1 and "robustembed-table1.md" in drift.stdout
    (out / "robustembed-table1.md").write_bytes(snapshot["robustembed-table1.md"])
    (out / "robustembed-table5.md").write_text("### RobustEmbed Table 5: norm constraint\n")  # a table since dropped
    assert _bench("report", "--out", str(out), env_extra=env).returncode == 0
    assert (out / "robustembed-table5.md").exists()  # never removed: the manifest does not say bench wrote it
    left = _bench("report", "--out", str(out), "--check", env_extra=env)
    assert left.returncode == 1 and "not made by `bench report`" in left.stdout and "robustembed-table5.md" in left.stdout
    (out / "robustembed-table5.md").unlink()
    assert _bench("report", "--out", str(out), "--check", env_extra=env).returncode == 0
    _cell(ResultStore(results), "simcse-bert", "sts", "sts12", 1, [("spearman", 90.0)])  # a new result lands
    assert _bench("report", "--out", str(out), "--check", env_extra=env).returncode == 1


def test_full_report_writes_a_card_per_model_and_prunes_cards_of_models_gone(results, tmp_path):
    import shutil

    env = {"BENCH_RESULTS_DIR": str(results)}
    out = tmp_path / "reports"
    assert _bench("report", "--out", str(out), env_extra=env).returncode == 0
    models = sorted(p.name for p in (results / "cells").iterdir() if p.is_dir())
    assert models and all((out / f"card-{m}.md").exists() and (out / f"card-{m}.html").exists() for m in models)
    assert f"card-{models[0]}.md" in (out / "index.md").read_text()
    shutil.rmtree(results / "cells" / models[0])  # that model's results are withdrawn
    check = _bench("report", "--out", str(out), "--check", env_extra=env)
    assert check.returncode == 1 and f"stale (no longer generated): {out / f'card-{models[0]}.md'}" in check.stdout
    assert _bench("report", "--out", str(out), env_extra=env).returncode == 0
    assert not (out / f"card-{models[0]}.md").exists() and (out / f"card-{models[1]}.md").exists()


def test_cli_bad_input_exits_2(results, tmp_path):
    bad = _bench("report", "--suite", "stss", "--out", str(tmp_path / "r"), env_extra={"BENCH_RESULTS_DIR": str(results)})
    assert bad.returncode == 2 and "sts" in bad.stderr
    empty = _bench("report", "--out", str(tmp_path / "r"), env_extra={"BENCH_RESULTS_DIR": str(tmp_path / "none")})
    assert empty.returncode == 2 and "bench run" in empty.stderr


def test_suite_filter_limits_outputs(results):
    from reports import generate

    files = generate(results, suites=["sts"], formats=["md"]).reports
    assert "robustembed-table1.md" in files and "robustembed-table3.md" not in files
    assert not any(name.endswith(".tex") for name in files)


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="no LaTeX toolchain (pdflatex) installed")
def test_latex_compiles(generated, tmp_path):
    files = generated
    for name in sorted(n for n in files if n.endswith(".tex")):
        doc = tmp_path / f"doc-{name}"
        doc.write_text("\\documentclass{article}\n\\usepackage[margin=1cm,landscape]{geometry}\n"
                       "\\begin{document}\n" + files[name] + "\n\\end{document}\n", encoding="utf-8")
        run = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, f"{name}:\n{run.stdout[-2000:]}"


def test_reports_import_no_torch_suites_or_attacks():
    code = ("import sys, reports, reports.specs, reports.card, app.commands.report, app.commands.compare; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'suites', 'attacks', 'transformers')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def _papers_dir() -> Path:
    data = os.environ.get("BENCH_DATA_DIR")
    return Path(data).resolve().parent / "papers" if data else Path("/nonexistent")


@pytest.mark.skipif(not _papers_dir().is_dir(), reason="../shared/papers not present")
def test_paper_values_are_read_from_the_papers():
    """Every transcribed value occurs in its paper's text, on a line of its table where the table is
    tab-separated; and each table has as many values as the paper prints."""
    from reports.paper import PaperValues

    def text(name):
        return (_papers_dir() / name).read_text(encoding="utf-8")

    # SimCSE's own paper is not in shared/papers: its Table 5 row is checked against AdCSE's reprint.
    texts = {"RobustEmbed": text("robustembed.txt"), "V-advCSE": text("v-advcse.txt"), "AdCSE": text("adcse.txt"),
             "L2P-CSR": text("l2p-csr.txt"), "SimCSE": text("adcse.txt"), "DCL": text("dcl.txt")}
    rows = PaperValues.load().rows
    for r in rows:
        if r["note"].startswith("not checkable here"):
            continue
        assert r["value"] in texts[r["paper"]], r
    # Rows of the other papers' STS tables sit on one line of the paper, in task order.
    for paper, table in (("AdCSE", "Table 1"), ("L2P-CSR", "Table 1"), ("V-advCSE", "Table 1"), ("SimCSE", "Table 5"),
                         ("L2P-CSR", "Table 2"), ("V-advCSE", "Table 2")):
        block = [r for r in rows if (r["paper"], r["table"]) == (paper, table)]
        for label in dict.fromkeys(r["row_model"] for r in block):
            values = [r["value"] for r in block if r["row_model"] == label]
            if len(values) == 8:
                assert any(re.sub(r"<[^>]+>", "", ln).split()[-8:] == values for ln in texts[paper].splitlines()), label
    counts = {}
    for r in rows:
        counts[(r["paper"], r["table"])] = counts.get((r["paper"], r["table"]), 0) + 1
    assert counts[("RobustEmbed", "Table 1")] == 16 * 8
    assert counts[("RobustEmbed", "Table 2")] == 12 * 7
    assert counts[("RobustEmbed", "Table 3")] == 15 * 8
    assert counts[("RobustEmbed", "Table 4")] == 15 * 3
    assert counts[("V-advCSE", "Table 3")] == 2 * 8
    assert counts[("V-advCSE", "Table 1")] == 9 * 8
    assert counts[("V-advCSE", "Table 2")] == 7 * 8
    assert counts[("AdCSE", "Table 1")] == 11 * 8
    assert counts[("L2P-CSR", "Table 1")] == 40 * 8 - 1  # RoBERTa-large CLS: its average is not in the text
    assert counts[("L2P-CSR", "Table 2")] == 16 * 8
    assert counts[("DCL", "Table 3")] == 3 * 2 * 2
    # Row by row for the tab-separated tables: the values of a row label sit on one line of the paper.
    lines = texts["RobustEmbed"].splitlines()
    t1 = [r for r in rows if (r["paper"], r["table"]) == ("RobustEmbed", "Table 1")]
    for label in dict.fromkeys(r["row_model"] for r in t1):
        values = [r["value"] for r in t1 if r["row_model"] == label]
        assert any(ln.split("\t")[1:] == values for ln in lines), label


REPO = Path(__file__).resolve().parents[1]
from bench.paths import PUBLISHED_REPORTS, PUBLISHED_RESULTS, Paths  # noqa: E402
from tests.conftest import committed_cells  # noqa: E402


@pytest.mark.skipif(not (PUBLISHED_REPORTS / "index.md").exists() or not committed_cells(),
                    reason="no committed reports/generated/ and results/ to compare")
def test_committed_reports_match_committed_results():
    """The committed reports/generated/ is what the committed code makes from the committed results/."""
    from reports import compare, generate

    artifacts = generate(PUBLISHED_RESULTS)
    problems = compare(artifacts.reports, PUBLISHED_REPORTS) + compare(artifacts.results, PUBLISHED_RESULTS, prune=False)
    assert not problems, ("stale reports; run `bench report --results-dir results` and commit:\n"
                          + "\n".join(problems))


def test_generated_reports_sit_apart_from_the_report_code():
    assert PUBLISHED_REPORTS == REPO / "reports" / "generated"
    assert not list(PUBLISHED_REPORTS.glob("*.py")) and not list((REPO / "reports").glob("*.md"))
    assert Paths(home=REPO, data=REPO, results=PUBLISHED_RESULTS.resolve()).reports == PUBLISHED_REPORTS.resolve()
    assert Paths(home=REPO, data=REPO, results=Path("/x/results")).reports == Path("/x/reports")


@pytest.mark.skipif(not committed_cells(), reason="no committed results/")
def test_committed_cells_come_from_the_current_scorer_versions():
    """A scorer fix bumps its suite's or task's version; a committed cell of an older version is stale
    (recompute it, or delete it) and must not stand in the published leaderboard."""
    from suites import get_suite

    stale = []
    for path in committed_cells():
        config = json.loads(path.read_text(encoding="utf-8"))["config"]
        suite = get_suite(config["suite"])
        if "summary_of" in config:
            versions = [suite.task(t).version for t in config["summary_of"]]
        else:
            versions = [(suite.summary_task if suite.summary_task and suite.summary_task.name == config["task"]
                         else suite.task(config["task"])).version]
        current = f"{suite.name}-{suite.version}." + ".".join(str(v) for v in versions)
        if config.get("scorer_version") != current:
            stale.append(f"{path.relative_to(PUBLISHED_RESULTS)}: {config.get('scorer_version')} (current {current})")
    assert not stale, "stale committed cells:\n" + "\n".join(stale)


# ---------------------------------------------------------------- the static site ---------------

class _Page:
    """What a link checker and a structure check need from an HTML page, read with the standard parser."""

    def __init__(self, text: str):
        from html.parser import HTMLParser

        self.links, self.tables, self.titles, self.scripts = [], [], [], []
        page = self

        class Parser(HTMLParser):
            in_title = False

            def handle_starttag(self, tag, attrs):
                attrs = dict(attrs)
                for key in ("href", "src"):
                    if attrs.get(key):
                        page.links.append(attrs[key])
                if tag == "table":
                    page.tables.append({"head": 0, "rows": []})
                elif tag == "tr" and page.tables:
                    page.tables[-1]["rows"].append(0)
                elif tag in ("th", "td") and page.tables:
                    page.tables[-1]["head"] += tag == "th"
                    page.tables[-1]["rows"][-1] += int(attrs.get("colspan") or 1)
                elif tag == "title":
                    self.in_title = True
                elif tag == "script":
                    page.scripts.append(attrs)

            def handle_endtag(self, tag):
                self.in_title = self.in_title and tag != "title"

            def handle_data(self, data):
                if self.in_title:
                    page.titles.append(data)

        Parser().feed(text)


def test_site_index_links_every_page_and_every_link_resolves(results, tmp_path):
    """`bench report --format html` writes an index; following every link from it, recursively, reaches
    only files that exist, all local (no network, no server)."""
    out = tmp_path / "site"
    run = _bench("report", "--format", "html", "--out", str(out), env_extra={"BENCH_RESULTS_DIR": str(results)})
    assert run.returncode == 0, run.stderr
    (out / "claims.html").write_text("<!DOCTYPE html><html><body><a href=\"index.html\">back</a></body></html>")
    run = _bench("report", "--format", "html", "--out", str(out), env_extra={"BENCH_RESULTS_DIR": str(results)})
    assert run.returncode == 0 and "index.html" in run.stdout
    seen, todo = set(), ["index.html"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        assert (out / name).is_file(), f"broken link to {name}"
        if name.endswith(".html"):
            page = _Page((out / name).read_text(encoding="utf-8"))
            assert all(not s.get("src") for s in page.scripts), name  # inline scripts only
            for link in page.links:
                assert "://" not in link and not link.startswith("//"), f"{name} links outside: {link}"
                todo.append(link.split("#")[0])
    models = sorted(p.name for p in (results / "cells").iterdir())
    expected = ({"claims.html", "leaderboard-sts.html", "leaderboard-adversarial.html", "robustembed-table1.html",
                 "robustembed-table3.html", "robustembed-figure2.png", "robustembed-figure3.png"}
                | {f"card-{m}.html" for m in models})
    assert expected <= seen
    leaderboard = (out / "leaderboard-sts.html").read_text(encoding="utf-8")
    assert "table class=\"sortable pivot\"" in leaderboard and "<details>" in leaderboard and "<script>" in leaderboard


def test_an_html_only_render_keeps_the_links_to_the_other_formats(results, tmp_path):
    """`bench report --format html` after a complete render: both indexes still link every table's md, tex
    and csv that the directory holds."""
    from reports import generate, write

    out = tmp_path / "site"
    complete = generate(results, reports_dir=out).reports
    write(complete, out, record=True)
    again = generate(results, formats=["html"], reports_dir=out).reports
    assert "robustembed-table1.md" not in again
    assert again["index.md"] == complete["index.md"] and again["index.html"] == complete["index.html"]
    for link in ("robustembed-table1.md", "robustembed-table1.tex", "robustembed-table1.csv"):
        assert f"({link})" in again["index.md"] and f"href=\"{link}\"" in again["index.html"], link
    fresh = generate(results, formats=["html"], reports_dir=tmp_path / "empty").reports  # none there: none linked
    assert "robustembed-table1.tex" not in fresh["index.md"] + fresh["index.html"]


def test_one_table_and_one_card_are_well_formed_html(generated):
    for name in ("robustembed-table3.html", "card-robustembed-bert.html"):
        text = generated[name]
        assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
        page = _Page(text)
        assert page.titles and page.titles[0].strip() and "index.html" in page.links
        assert page.tables and any(table["head"] for table in page.tables)
        for table in page.tables:  # every row spans the first row's columns, no more, no fewer
            rows = table["rows"]
            assert len(rows) > 1 and rows[0] > 1 and all(n == rows[0] for n in rows), name
    table3 = generated["robustembed-table3.html"]
    assert "<tr class=\"g\"><td colspan=" in table3 and "bert-base-uncased" in table3
    assert table3.count("<p class=\"note\">") >= 3  # the caption in paragraphs


def test_card_cites_the_measured_step_cost(tmp_path):
    from reports.card import step_cost_text

    figures = {"batch_size": 64, "cpu": "Test CPU", "date": "2026-01-01",
               "methods": {"simcse": {"ratio_to_simcse": 1.0}, "robustembed": {"ratio_to_simcse": 5.269}}}
    path = tmp_path / "steps.json"
    path.write_text(json.dumps(figures), encoding="utf-8")
    assert step_cost_text("robustembed", path).startswith("5.27× SimCSE's step (MiniLM, batch 64")
    assert step_cost_text("dcl", path) is None  # not measured: no row rather than a guess
    assert step_cost_text("simcse", tmp_path / "missing.json") is None


def test_card_shows_the_kept_step_and_the_papers_open_choices(results, tmp_path):
    """The trainer's card facts reach the robustness card through plugins.json: the step whose weights the
    model is, with the dev score that chose it, the passes over the data, the base build and the CPU it was trained
    from and on, and the choices the paper leaves open."""
    from bench.results import metadata
    from bench.models import registry
    from reports.card import card

    models = tmp_path / "models"
    (models / "robust-y").mkdir(parents=True)
    (models / "robust-y" / "bench_card.json").write_text(json.dumps({
        "method": "robustembed", "steps": 250, "epochs_seen": 1.344, "stsb_dev_before": 68.894,
        "best": {"step": 125, "stsb_dev_spearman": 74.198}, "open_choices": {"epsilon": "1e-5 (not given)"},
        "base_weights_sha256": "3be485e03d9a" + "0" * 52, "base_encoder_sha256": "c47b1af3ed19" + "0" * 52,
        "cpu": "Test CPU"}))
    metadata.export(results, models=[registry.ModelSpec(name="robust-y", backbone="b", method="robustembed",
                                                        base="simcse-bert", profile="smoke")], models_dir=models)
    _cell(ResultStore(results), "robust-y", "sts", "sts12", 0, [("spearman", 71.0)],
          evidence=_sts_evidence("robustembed-bert", "sts12"))
    md = card(results, "robust-y")["card-robust-y.md"]
    assert "| weights kept | step 125 of 250 (STS-B dev Spearman 74.20; 68.89 before training) |" in md
    assert "| passes over the training data | 1.34 |" in md
    assert "| base build (weights sha256) | 3be485e03d9a |" in md and "| trained on | Test CPU |" in md
    assert "| base build as its own cells name it | c47b1af3ed19 |" in md
    assert "## Choices the paper leaves open" in md and "| epsilon | 1e-5 (not given) |" in md


def test_a_cards_delta_from_its_base_reads_the_build_it_was_trained_from_or_says_it_cannot(results, tmp_path):
    """A base built on two machines has cells of two weights under one name; a model whose training card
    records the build it started from (base_encoder_sha256) is compared with that build's cells, at a glance
    and in the suite tables, even where the other build's cells are newer; one whose card predates the record
    is compared with the newest, and its card says they may be another build's."""
    from bench.models import registry
    from bench.results import metadata
    from reports.card import card

    models = tmp_path / "models"
    (models / "robust-z").mkdir(parents=True)
    (models / "robust-z" / "bench_card.json").write_text(json.dumps({
        "method": "robustembed", "steps": 250, "base_encoder_sha256": "cd" * 32}))
    metadata.export(results, models=[
        registry.ModelSpec(name="base-m", backbone="b"),
        registry.ModelSpec(name="robust-z", backbone="b", method="robustembed", base="base-m", profile="smoke")],
        models_dir=models)
    store = ResultStore(results)
    for model, weights, value in (("base-m", "cd" * 32, 65.0), ("base-m", "ef" * 32, 60.0),
                                  ("robust-z", "ab" * 32, 70.0)):
        _cell(store, model, "sts", "avg", 0, [("spearman", value, "mean-of-tasks")], weights=weights)
    md = card(results, "robust-z")["card-robust-z.md"]
    glance = next(ln for ln in md.splitlines() if ln.startswith("| STS avg."))
    assert [c.strip() for c in glance.strip("|").split("|")][-1] == "+5.00", md
    table = next(ln for ln in md.splitlines() if ln.startswith("| avg |"))
    assert "+5.00" in table and "+10.00" not in table, table
    assert "The base's cells are those of the build this model was trained from (weights cdcdcdcdcdcd…)" in md
    # a card that names only the base's file reads the weights another card records for that file
    (models / "robust-z" / "bench_card.json").write_text(json.dumps({
        "method": "robustembed", "steps": 250, "base_weights_sha256": "f1" * 32}))
    (models / "robust-w").mkdir()
    (models / "robust-w" / "bench_card.json").write_text(json.dumps({
        "method": "robustembed", "steps": 250, "base_weights_sha256": "f1" * 32, "base_encoder_sha256": "cd" * 32}))
    metadata.export(results, models=[
        registry.ModelSpec(name="base-m", backbone="b"),
        *(registry.ModelSpec(name=m, backbone="b", method="robustembed", base="base-m", profile="smoke")
          for m in ("robust-z", "robust-w"))], models_dir=models)
    md = card(results, "robust-z")["card-robust-z.md"]
    assert "+5.00" in next(ln for ln in md.splitlines() if ln.startswith("| avg |")), md
    # a card that predates both records reads the base's newest cells, and says that they may be another build's
    (models / "robust-z" / "bench_card.json").write_text(json.dumps({"method": "robustembed", "steps": 250}))
    metadata.export(results, models=[
        registry.ModelSpec(name="base-m", backbone="b"),
        registry.ModelSpec(name="robust-z", backbone="b", method="robustembed", base="base-m", profile="smoke")],
        models_dir=models)
    md = card(results, "robust-z")["card-robust-z.md"]
    assert "The base has cells from 2 builds (cdcdcdcdcdcd…, efefefefefef…); this model's training card predates" in md
    assert "+10.00" in next(ln for ln in md.splitlines() if ln.startswith("| avg |"))


def test_a_cell_on_a_stand_in_victim_is_marked_and_explained(results):
    """A dataset whose training set is not offline is attacked on a victim trained on a stand-in: the cell
    carries the mark, the legend names the stand-in, and the CSV records it."""
    from reports import generate

    _cell(ResultStore(results), "simcse-bert", "adversarial", "snli", 0,
          _runs("attack_success_rate", [70.0, 71.0, 72.0], "textfooler"), recipes=["textfooler"], runs=3,
          substitute_victim="snli-dev")
    reports = generate(results).reports
    md = reports["robustembed-table3.md"]
    line = next(ln for ln in md.splitlines() if ln.startswith("| TextFooler | simcse-bert |"))
    assert line.count("§") == 1  # SNLI's cell only
    assert "§: the dataset's training set is not offline, so the victim trained on a stand-in " \
           "(substitute_victim snli-dev" in md
    t3 = _cells(reports["robustembed-table3.csv"])
    assert t3[("TextFooler", "simcse-bert", "SNLI")]["standin"] == "snli-dev"
    assert t3[("TextFooler", "simcse-bert", "MR")]["standin"] == ""


def test_a_card_opens_with_its_robustness_beside_its_baselines(results):
    """The card's first section is the leaderboard's headline measures for the model, its base and SimCSE
    from the same base, then come its training details."""
    from bench.models import registry
    from bench.results import metadata
    from reports.card import card

    metadata.export(results, models=[
        registry.ModelSpec(name="simcse-x", backbone="b", method="simcse", base="simcse-bert", profile="smoke"),
        registry.ModelSpec(name="robust-x", backbone="b", method="robustembed", base="simcse-bert", profile="smoke")])
    store = ResultStore(results)
    for model, value in (("simcse-x", 70.0), ("robust-x", 72.5)):
        _cell(store, model, "sts", "avg", 0, [("spearman", value, "mean-of-tasks")])
    md = card(results, "robust-x")["card-robust-x.md"]
    assert re.findall(r"^## (.+)$", md, flags=re.M)[:2] == ["Robustness at a glance", "Model"]
    line = next(ln for ln in md.splitlines() if ln.startswith("| STS avg."))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1].startswith("72.50") and cells[3].startswith("70.00") and cells[-1] == "+2.50", cells


def test_report_csvs_escape_formulas_and_keep_numbers():
    """The ledger's CSVs (claims, null simulation, placebo battery, dose-response) go through one writer: a
    text field a spreadsheet would run gains an apostrophe, floats keep every digit, None is empty."""
    from bench.results.store import records_csv

    text = records_csv(("model", "note", "delta", "p"), [
        {"model": "=1+2", "note": "-2+3", "delta": -0.1234567890123, "p": None},
        {"model": "m", "note": "-0.5", "delta": 0.5, "p": 0.01}])
    rows = list(csv.DictReader(text.splitlines()))
    assert rows[0] == {"model": "'=1+2", "note": "'-2+3", "delta": "-0.1234567890123", "p": ""}
    assert rows[1] == {"model": "m", "note": "-0.5", "delta": "0.5", "p": "0.01"}


def test_table_and_figure_csvs_escape_a_model_a_spreadsheet_would_run():
    """A user names their own models, so a table's or a figure's CSV puts its text through the same
    spreadsheet-safe writer as the ledger's: "=1+2" is stored as text, numbers keep their digits."""
    from bench.scoring.stats import Interval
    from reports import figures, tables
    from reports.results import Stat

    stat = Stat(mean=71.123456789, std=None, by_seed=(((0, "all"), 71.123456789),), rows=(),
                ci=Interval(70.0, 72.25, "bootstrap(B=1000,seed=0)"))
    spec = tables.TableSpec(name="t", title="t", suite="sts", metric="spearman", unit="Spearman")
    table = tables.Table(spec, ["STS-B"], ["higher"], [tables.Line("", "minilm", "=1+2", "", [tables.Cell(stat)])], "")
    (row,) = csv.DictReader(io.StringIO(tables.to_csv(table)))
    assert (row["model"], row["mean"], row["ci_low"], row["seeds"]) == ("'=1+2", "71.123457", "70.0", "1")
    fig = figures.FigureSpec(name="f", title="f", suite="sts", point=("model",), x=None, y=None)
    (point,) = csv.DictReader(io.StringIO(figures.to_csv(fig, [figures.Point({"model": "=1+2"}, ("stsb",), 0.5, None)],
                                                          "@caption")))
    assert (point["model"], point["x"], point["y"], point["settings"]) == ("'=1+2", "0.5", "", "'@caption")

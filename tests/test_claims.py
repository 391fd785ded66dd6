"""The claims ledger: the verdict rule, the claims file's checks, and a render from a tiny results dir."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from bench.errors import BenchError
from bench.scoring.stats import Evidence, Sample
from bench.results.store import CellKey, Result, ResultStore
from bench.results.uncertainty import apply_uncertainty
from reports import claims, claims_pages
from reports.claims import (EXCLUDED, FEW_SEEDS, INCONCLUSIVE, NOT_RUN, NOT_TESTABLE, REPLICATED, REVERSED,
                            verdict)

# --------------------------------------------------------------------------- the verdict rule -------

def _t(direction=None, exclusion=None, equivalence=None):
    return claims.Tests(direction, exclusion, equivalence)


@pytest.mark.parametrize("direction, paper, estimate, tests, seeds, label, note", [
    # a direction stands: the paper's side or the other
    ("higher", 1.5, 1.2, _t(0.001, 0.9), 3, REPLICATED, ""),
    ("higher", 1.5, 0.4, _t(0.001, 0.01), 3, REPLICATED, "smaller than the exclusion margin"),
    ("lower", -30.0, -25.0, _t(0.001, 0.9), 3, REPLICATED, ""),
    ("higher", 1.5, -0.8, _t(0.001, 0.001), 3, REVERSED, ""),
    ("lower", -30.0, 2.0, _t(0.001, 0.001), 3, REVERSED, ""),
    # no direction: the exclusion test decides
    ("lower", -30.0, 0.5, _t(0.3, 0.001), 3, EXCLUDED, "stated share of the paper's Δ"),
    ("lower", -30.0, -10.0, _t(0.3, 0.2), 3, INCONCLUSIVE, ""),
    ("higher", 1.5, 0.5, _t(0.062, 0.04), 5, EXCLUDED, ""),  # p just above α after Holm: no direction
    # too few matched seeds: no verdict, whatever the tests say
    ("higher", 1.5, 1.2, _t(1e-9, 0.9), 2, FEW_SEEDS, "2 matched training seeds of the 3"),
    ("lower", -30.0, 0.5, _t(0.3, 1e-9), 1, FEW_SEEDS, "1 matched training seed of the 3"),
])
def test_verdicts(direction, paper, estimate, tests, seeds, label, note):
    v = verdict(direction, paper, estimate, tests, seeds, 3, paper / 2)
    assert v.label == label
    assert (note in v.note) if note else label not in (REPLICATED,) or "smaller" not in v.note


def test_the_headline_lines_need_five_seeds():
    v = verdict("higher", 1.5, 1.2, _t(1e-9, 0.9), 4, 5, 0.75)
    assert v.label == FEW_SEEDS and "4 matched training seeds of the 5" in v.note


@pytest.mark.parametrize("estimate, tests, label", [
    (0.1, _t(0.6, None, 0.001), REPLICATED),      # TOST: inside ±1
    (-2.3, _t(0.001, None, 0.9), REVERSED),       # a cost beyond the margin
    (-0.6, _t(0.001, None, 0.3), INCONCLUSIVE),   # a difference, but not shown beyond the margin
    (0.1, _t(0.6, None, 0.2), INCONCLUSIVE),      # neither
])
def test_a_claim_of_no_difference_is_a_tost(estimate, tests, label):
    assert verdict("same", 0.0, estimate, tests, 3, 3, None, margin=1.0).label == label


def test_verdict_rejects_bad_input():
    with pytest.raises(ValueError):
        verdict("better", 1.0, 0.5, _t(), 3, 3)


@pytest.mark.parametrize("paper, baseline, label", [
    (-18.61, 2.0, claims.FLOOR),     # BERT-Attack on AdvSTS-B: 2% success cannot fall by 18.6 points
    (-13.59, 8.5, claims.FLOOR),
    (-13.59, 66.2, None),
    (+5.0, 97.0, claims.CEILING),
    (+5.0, 90.0, None),
])
def test_no_verdict_at_a_floor_or_a_ceiling(paper, baseline, label):
    v = claims.bound_verdict(paper, baseline, (0.0, 100.0), no_example_differs=False)
    assert (v.label if v else None) == label
    if v:
        assert f"{baseline:.2f}" in v.note and f"{paper:+.2f}" in v.note
    assert claims.bound_verdict(paper, baseline, (0.0, 100.0), no_example_differs=True).label == claims.FLOOR


# --------------------------------------------------------------------------- the claims file --------

HEADER = """
[models]
"base" = ""
"better" = "simcse"
"base-seed1" = ""
"better-seed1" = "simcse"

[seeds]
suffixes = ["-seed1"]

[run_defaults]
profile = "study"

[costs]
train_steps = 250
train_seconds_per_step = { simcse = 2.4 }
suite_minutes = { sts = 1 }
"""

CLAIM = """
[[claim]]
id = "stsb"
paper = "RobustEmbed"
table = "Table 1"
claim = "the method raises STS-B"
suite = "sts"
task = "stsb"
metric = "spearman"
aggregation = "all"
method = "better"
baseline = "base"
paper_method = "RobustEmbed-BERT_base"
paper_baseline = "SimCSE-BERT_base"
direction = "higher"
run = { suite = "sts" }
differs = "a tiny fixture"
"""

UNTESTABLE = """
[[claim]]
id = "cola"
paper = "DCL"
table = "Table 3"
claim = "the method raises CoLA under attack"
suite = "adversarial"
task = "cola"
metric = "accuracy_under_attack"
aggregation = "mean-of-runs"
attack = "pwws"
method = "better"
baseline = "base"
paper_method = "DCL"
paper_baseline = "BERT"
direction = "higher"
differs = "n/a"
not_testable = "no CoLA data offline"
"""


def _file(tmp_path, text):
    path = tmp_path / "claims.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_committed_claims_file_loads_and_names_registered_models():
    from bench.models.registry import MODELS

    book = claims.load()
    assert len(book.claims) >= 15
    assert set(book.models) <= set(MODELS), set(book.models) - set(MODELS)
    for c in book.claims:
        if c.figure_only or c.kind != "paper":
            assert c.paper_delta is None, c.id
        elif c.direction == "same":
            assert abs(c.paper_delta) <= c.margin, c.id
        else:
            assert c.paper_delta != 0 and (c.paper_delta > 0) == (c.direction == "higher"), c.id
    # the scope: every table named gets at least one row
    tables = {(c.paper, c.table) for c in book.claims}
    scope = [("RobustEmbed", f"Table {i}") for i in (1, 2, 3, 4)] + [("V-advCSE", f"Table {i}") for i in (1, 2, 3)]
    for need in scope + [("AdCSE", "Table 1"), ("L2P-CSR", "Table 1"), ("L2P-CSR", "Table 2"), ("DCL", "Table 3")]:
        assert need in tables, need
    re_t1 = next(c for c in book.claims if c.id == "robustembed-t1-sts-vs-simcse")
    assert re_t1.paper_delta == pytest.approx(77.51 - 76.06)


@pytest.mark.parametrize("change, message", [
    (lambda t: t.replace('direction = "higher"', 'direction = "up"', 1), "direction"),
    (lambda t: t.replace('differs = "a tiny fixture"', ''), "lacks differs"),
    (lambda t: t.replace('run = {', 'colour = "red"\nrun = {'), "unknown field"),
    (lambda t: t.replace('method = "better"', 'method = "nobody"'), "not under [models]"),
    (lambda t: t.replace('paper_method = "RobustEmbed-BERT_base"', 'paper_method = "No Such Row"'),
     "does not hold"),
    (lambda t: t.replace('direction = "higher"', 'direction = "lower"'), "not on the asserted side"),
    (lambda t: t + CLAIM, "used twice"),
    (lambda t: t.replace('[[claim]]', '[[claim]', 1), "not valid TOML"),
    (lambda t: t.replace('run = { suite = "sts" }', 'run = "sts"'), "must be tables"),
])
def test_bad_claims_file_is_a_clear_error(tmp_path, change, message):
    path = _file(tmp_path, change(HEADER + CLAIM))
    with pytest.raises(BenchError) as err:
        claims.load(path)
    assert message in str(err.value) and "Fix:" in str(err.value) and str(path) in str(err.value)


def test_missing_claims_file_is_a_clear_error(tmp_path):
    with pytest.raises(BenchError, match="No claims file"):
        claims.load(tmp_path / "none.toml")


# --------------------------------------------------------------------------- render ----------------

def _sts_cell(store, model, noise, seed=0, task="stsb", weights="ab" * 32, config=None):
    rng = np.random.default_rng(seed)
    gold = np.linspace(0, 5, 60)
    pred = gold + rng.normal(0, noise, gold.size)
    sample = Sample(list(range(gold.size)), {"pred": pred, "gold": gold})
    from scipy.stats import spearmanr

    row = Result(model=model, suite="sts", task=task, split="test", metric="spearman", aggregation="all",
                 value=100 * spearmanr(pred, gold).statistic, n=gold.size, seed=0,
                 evidence=Evidence("spearman", sample, ("pred", "gold")))
    settings = {"suite": "sts", "task": task, "profile": "study", **(config or {})}
    key = CellKey(model, weights, "sts", task, 0, "c" * 16 if config is None else str(abs(hash(str(config))))[:16])
    store.write(key, [row], settings, evidence=apply_uncertainty([row]))


def _seeded(store, noise_base=3.0, noise_better=0.3, seeds=(0, 1, 2), models=("base", "better")):
    for seed in seeds:
        suffix = f"-seed{seed}" if seed else ""
        _sts_cell(store, models[0] + suffix, noise=noise_base, seed=10 + seed)
        _sts_cell(store, models[1] + suffix, noise=noise_better, seed=20 + seed)


THREE_SEEDS = HEADER.replace('"better-seed1" = "simcse"', '"better-seed1" = "simcse"\n"base-seed2" = ""\n'
                             '"better-seed2" = "simcse"').replace('suffixes = ["-seed1"]', 'suffixes = ["-seed1", "-seed2"]')


def test_a_seed_suffix_numbers_its_line_by_the_seed_it_names(tmp_path):
    """Seeds need not be consecutive (a seed block on another machine starts at a fresh number): the line of
    "-seed13" is seed 13, not the suffix's place in the list."""
    text = (HEADER.replace('"better-seed1" = "simcse"', '"better-seed1" = "simcse"\n"base-seed13" = ""\n'
                           '"better-seed13" = "simcse"')
            .replace('suffixes = ["-seed1"]', 'suffixes = ["-seed1", "-seed13"]'))
    ledger = claims.load(_file(tmp_path, text + CLAIM))
    assert [n for n, *_ in claims._pairs(ledger, ledger.claims[0])] == [0, 1, 13]


def test_render_on_a_tiny_results_dir(tmp_path):
    results = tmp_path / "results"
    store = ResultStore(results)
    _sts_cell(store, "base", noise=3.0)
    _sts_cell(store, "better", noise=0.3)
    _sts_cell(store, "base-seed1", noise=3.0, seed=1)  # the second seed's method has no cell yet
    path = _file(tmp_path, HEADER + CLAIM + UNTESTABLE)
    book, rows = claims.ledger(results, path)
    stsb, cola = rows
    first, second = stsb.effects[0].lines
    assert first.ran and first.low > 0 and first.pairs == 60
    assert first.estimate == pytest.approx(first.values[1] - first.values[0], abs=1e-6)
    assert second.missing == ("better-seed1",)
    assert "bench run --model better-seed1 --profile study --suite sts" in second.command
    assert second.cpu_minutes == pytest.approx(1 + 2.4 * 250 / 60)  # the run, and training: no cell at all
    # one seed: a direction, but not a replication
    assert stsb.verdict.label == FEW_SEEDS and stsb.effects[0].pooled.seeds == 1
    assert cola.claim.not_testable and not cola.effects and cola.verdict.label == NOT_TESTABLE
    files = claims_pages.render(results, path)
    md, page = files["claims.md"], files["claims.html"]
    assert md.count("\n| **") == 2  # one row per claim
    assert FEW_SEEDS in md and NOT_TESTABLE in md and "no CoLA data offline" in md
    assert "+3.03" in md  # the paper's Δ, from paper_values.csv (82.97 − 79.94)
    assert "a tiny fixture" in md
    (row_line,) = [ln for ln in md.splitlines() if ln.startswith("| **stsb")]
    assert "not run yet (no cell for better-seed1): plan step 1" in row_line and "`bench run" not in row_line
    assert "; stored so far: base-seed1 " in row_line and "no verdict until both are run" in row_line
    assert "\n1. `bench run --model better-seed1" in md
    assert "<table class=\"claims\">" in page and "claims-forest.png" in page and "no CoLA data offline" in page
    assert files["claims-forest.png"][:8] == b"\x89PNG\r\n\x1a\n"
    # the plot's label says how many seeds and what the verdict is; an untestable claim draws nothing
    ((label, *_),) = [p for pts in claims_pages.forest_points(rows).values() for p in pts]
    assert label == f"stsb (1 seed): {FEW_SEEDS}"
    # stored cells under another setting are not compared
    other = tmp_path / "other"
    _sts_cell(ResultStore(other), "base", noise=3.0)
    _sts_cell(ResultStore(other), "better", noise=0.3)
    quick = _file(tmp_path, (HEADER + CLAIM).replace('profile = "study"', 'profile = "paper"'))
    _, (only,) = claims.ledger(other, quick)
    assert only.verdict.label == NOT_RUN


def test_three_agreeing_seeds_replicate_and_the_ledger_is_data(tmp_path):
    import csv
    import io
    import json

    results = tmp_path / "results"
    _seeded(ResultStore(results))
    path = _file(tmp_path, THREE_SEEDS + CLAIM)
    _, (row,) = claims.ledger(results, path)
    e = row.primary
    assert row.verdict.label == REPLICATED and e.pooled.seeds == 3 and e.pooled.spread is not None
    assert e.pooled.estimate == pytest.approx(np.mean([ln.estimate for ln in e.lines]))
    assert e.p_adjusted == pytest.approx(e.pooled.p)  # a family of one: Holm changes nothing
    assert e.mde is not None and e.mde > 0 and e.relative is not None
    files = claims_pages.render(results, path)
    recs = list(csv.DictReader(io.StringIO(files["claims.csv"])))
    assert set(claims_pages.COLUMNS) == set(recs[0])
    assert [r["seed"] for r in recs] == ["0", "1", "2", "pooled"]
    pooled = recs[-1]
    assert pooled["verdict"] == REPLICATED and float(pooled["p_holm"]) < 0.05 and float(pooled["mde"]) > 0
    assert float(pooled["ci_low"]) <= float(pooled["delta"]) <= float(pooled["ci_high"])
    from scipy.stats import norm, t  # the p is re-computable from the record's Δ, SE and d.f.
    z = abs(float(pooled["delta"])) / float(pooled["se"])
    again = 2 * (t.sf(z, float(pooled["df"])) if pooled["df"] else norm.sf(z))
    assert float(pooled["p"]) == pytest.approx(again, rel=1e-6, abs=1e-300)
    data = json.loads(files["claims.json"])
    assert data["correction"] == "holm" and data["counts"] == {REPLICATED: 1} and len(data["lines"]) == 4


def test_an_unfinished_average_over_datasets_shows_its_progress_and_decides_nothing(tmp_path):
    results = tmp_path / "results"
    store = ResultStore(results)
    for task in ("stsb", "sickr"):
        _sts_cell(store, "base", noise=3.0, task=task)
    _sts_cell(store, "better", noise=0.3, task="stsb")  # the method's SICK-R cell is still missing
    two = CLAIM.replace('task = "stsb"', 'task = "avg"\ntasks = ["stsb", "sickr"]')
    path = _file(tmp_path, HEADER + two)
    _, (row,) = claims.ledger(results, path)
    (line, _) = row.effects[0].lines
    assert line.missing == ("better",) and row.verdict.label == NOT_RUN and row.primary.pooled is None
    assert line.note.startswith("partial: 1 of 2 datasets run for both (stsb), Δ +")
    assert "no verdict until every dataset is run" in line.note
    single = tmp_path / "single.toml"
    single.write_text(HEADER + CLAIM, encoding="utf-8")
    alone = claims.ledger(results, single)[1][0].effects[0].lines[0]
    assert f"Δ {alone.estimate:+.2f} [" in line.note  # stsb's own difference (its CI on the part's own stream)
    low, high = (float(x) for x in line.note.split("[")[1].split("]")[0].split(", "))
    assert low == pytest.approx(alone.low, abs=3) and high == pytest.approx(alone.high, abs=3)
    md = claims_pages.render(results, path)["claims.md"]
    assert "not run yet (no cell for better): plan step 1, about 1 min CPU; partial: 1 of 2 datasets" in md


def test_seeds_pointing_different_ways_widen_the_test(tmp_path):
    results = tmp_path / "results"
    store = ResultStore(results)
    _seeded(store, seeds=(0, 1))
    _sts_cell(store, "base-seed2", noise=0.3, seed=12)  # seed 2: the baseline is the better one
    _sts_cell(store, "better-seed2", noise=2.5, seed=22)
    _, (row,) = claims.ledger(results, _file(tmp_path, THREE_SEEDS + CLAIM))
    e = row.primary
    assert {ln.estimate > 0 for ln in e.lines} == {True, False}
    assert e.pooled.se ** 2 >= e.pooled.seed_part and e.pooled.df < 10  # the seeds' spread is in the test
    assert row.verdict.label in (INCONCLUSIVE, EXCLUDED)


def test_holm_decides_the_family(tmp_path):
    from bench.scoring.stats import holm

    results = tmp_path / "results"
    _seeded(ResultStore(results), noise_base=1.0, noise_better=0.9)
    path = _file(tmp_path, THREE_SEEDS + CLAIM + CLAIM.replace('id = "stsb"', 'id = "stsb-again"'))
    _, rows = claims.ledger(results, path)
    raw = [r.primary.pooled.p for r in rows]
    assert [r.primary.p_adjusted for r in rows] == pytest.approx(holm(raw))
    assert all(r.primary.p_adjusted >= r.primary.pooled.p for r in rows)


def test_a_claim_not_run_yet_counts_in_the_family_at_p_one(tmp_path):
    from bench.scoring.stats import holm

    results = tmp_path / "results"
    _seeded(ResultStore(results), noise_base=1.0, noise_better=0.9)
    waiting = CLAIM.replace('id = "stsb"', 'id = "sickr"').replace('task = "stsb"', 'task = "sickr"')
    _, (ran, pending) = claims.ledger(results, _file(tmp_path, THREE_SEEDS + CLAIM + waiting))
    assert pending.verdict.label == NOT_RUN and pending.primary.p_adjusted is None
    assert ran.primary.p_adjusted == pytest.approx(holm([ran.primary.pooled.p, 1.0])[0])
    assert "2 declared, 1 decidable so far" in claims_pages.family_text([ran, pending])


def test_classifiers_at_chance_make_a_claim_not_testable_and_leave_the_family():
    from bench.scoring.stats import Pooled

    claim = replace(claims.load().claims[0], chance=100 / 3)
    line = claims.Comparison("m", "b", {}, seed=2, estimate=0.4, low=-1.9, high=2.7, p=0.7, pairs=3200,
                             values=(33.6, 34.0))
    pooled = Pooled(0.4, -1.9, 2.7, 0.7, 1.2, 1, None, "x")
    flat = claims.Effect(claim, {}, (line,), pooled, primary=True)
    assert "at chance (33.33)" in flat.at_chance and "seed 2: 33.60 and 34.00 on 3200 examples" in flat.at_chance
    checked = replace(flat, lines=(replace(line, checks=("61.20 on snli:test", "60.80 on snli:test")),))
    assert "3200 examples, held-out checks 61.20 on snli:test and 60.80 on snli:test" in checked.at_chance
    book = claims.load()
    judged = claims.judge(flat, None, book)
    assert judged.verdict.label == NOT_TESTABLE and judged.verdict.note == flat.at_chance
    # one classifier above chance (its interval excludes it): the line tests the claim as any other
    learned = replace(flat, lines=(replace(line, values=(33.6, 38.0)),))
    assert learned.at_chance == "" and claims.judge(learned, claims.Tests(0.7), book).verdict.label != NOT_TESTABLE
    assert replace(flat, claim=replace(claim, chance=None)).at_chance == ""


def test_a_held_out_check_is_read_from_the_row_that_answers_the_claim(tmp_path):
    import json

    store = ResultStore(tmp_path / "results")
    card = {"classifier": {"dev_accuracy": 61.2, "dev_data": {"source": "snli:test", "n": 1000}}}
    row = Result(model="base", suite="sts", task="stsb", split="test", metric="spearman", aggregation="all",
                 value=50.0, n=10, seed=0, resources=json.dumps(card))
    store.write(CellKey("base", "ab" * 32, "sts", "stsb", 0, "c" * 16), [row],
                {"suite": "sts", "task": "stsb", "profile": "study"})
    claim = next(c for c in claims.load(_file(tmp_path, HEADER + CLAIM)).claims)

    def check(model, wanted):
        hit = claims.task_evidence(store, model, claim, claim.task, wanted)
        return claims.held_out_check(hit[2]) if hit else ""

    assert check("base", {}) == "61.20 on snli:test"
    assert check("better", {}) == ""  # no cell
    assert check("base", {"profile": "paper"}) == ""  # no matching cell
    assert claims.held_out_check({"resources": ""}) == ""  # a row without a classifier card


def test_the_setting_comes_from_the_cards():
    claim = claims.load().claims[0]
    card = {"method": "robustembed", "base": "minilm-mlm",
            "training": {"steps": 250, "batch_size": 64, "stsb_dev_before": 68.89,
                         "best": {"step": 25, "stsb_dev_spearman": 68.28},
                         "method_config": {"lam": 0.01, "wordnet_dir": "/home/me/wn", "vocab": "/tmp/v.txt"}}}
    text, flags = claims.setting_text({claim.method: card}, claim)
    assert "250 steps of 64" in text and "kept step 25" in text and "lam=0.01" in text
    assert "wordnet_dir" not in text and "/tmp" not in text  # a machine's paths are no setting
    assert any("below 20%" in f for f in flags) and any("below its base's" in f for f in flags)
    changed = {**card, "training": {**card["training"], "best": {"step": 200, "stsb_dev_spearman": 70.0},
                                    "method_config": {"lam": 1e-06}}}
    text2, flags2 = claims.setting_text({claim.method: changed}, claim)
    assert text2 != text and "lam=1e-06" in text2 and not flags2


def test_a_pair_from_two_builds_of_the_base_is_flagged():
    """Models trained from different builds of their base are flagged: by the base's hash, or, on older cards
    without it, by the base's STS-B dev score; one build on both sides is not."""
    claim = claims.load().claims[0]

    def card(dev, sha=None):
        training = {"steps": 250, "batch_size": 64, "stsb_dev_before": dev,
                    "best": {"step": 250, "stsb_dev_spearman": 73.0}, **({"base_weights_sha256": sha} if sha else {})}
        return {"method": "m", "base": "minilm-mlm", "training": training}

    pair = (claim.method, claim.baseline)
    old_card_new_card = {claim.method: card(68.89), claim.baseline: card(69.07, "e1467f5604f8aa")}
    _, flags = claims.setting_text(old_card_new_card, claim, (), pair)
    assert any("different builds of the base (base STS-B dev 68.89, 69.07)" in f for f in flags)
    two_hashes = {claim.method: card(69.07, "aaaaaaaaaaaa11"), claim.baseline: card(69.07, "bbbbbbbbbbbb22")}
    assert any("sha256 aaaaaaaaaaaa, bbbbbbbbbbbb" in f for f in claims.setting_text(two_hashes, claim, (), pair)[1])
    one_build = {claim.method: card(69.0701), claim.baseline: card(69.07, "e1467f5604f8aa")}
    assert not any("builds" in f for f in claims.setting_text(one_build, claim, (), pair)[1])


def test_a_pair_trained_at_two_precisions_is_flagged():
    """`--dtype auto` trains in bf16 on an AMX CPU and in fp32 on others: a pair that mixes them is flagged,
    a pair at one precision is not, and a card without the record says nothing."""
    claim = claims.load().claims[0]

    def card(amp, recorded=True):
        training = {"steps": 250, "batch_size": 64, "best": {"step": 250, "stsb_dev_spearman": 73.0},
                    **({"amp": amp} if recorded else {})}
        return {"method": "m", "base": "minilm-mlm", "training": training}

    pair = (claim.method, claim.baseline)
    mixed = {claim.method: card("bfloat16"), claim.baseline: card(None)}
    assert "its models were trained at different precisions (bfloat16, fp32)" in claims.setting_text(
        mixed, claim, (), pair)[1]
    for same in ({claim.method: card(None), claim.baseline: card(None)},
                 {claim.method: card("bfloat16"), claim.baseline: card(None, recorded=False)}):
        assert not any("precisions" in f for f in claims.setting_text(same, claim, (), pair)[1])


def test_a_seed_line_describes_its_own_models():
    """A training seed's line shows that seed's cards, not seed 0's; the claim's text flags every seed."""
    claim = claims.load().claims[0]
    card = {"method": "robustembed", "base": "minilm-mlm",
            "training": {"steps": 250, "batch_size": 64, "stsb_dev_before": 68.89,
                         "best": {"step": 250, "stsb_dev_spearman": 73.0}}}
    seed2 = {**card, "training": {**card["training"], "best": {"step": 25, "stsb_dev_spearman": 60.0}}}
    models = {claim.method: card, claim.method + "-seed2": seed2}
    whole, whole_flags = claims.setting_text(models, claim, ("-seed2",))
    own, own_flags = claims.setting_text(models, claim, ("-seed2",), (claim.method + "-seed2", claim.baseline))
    assert "kept step 250" in whole and any("-seed2" in f for f in whole_flags)
    assert "kept step 25 " in own and f"method {claim.method}-seed2" in own
    assert own_flags and all(f.startswith(claim.method + "-seed2") for f in own_flags)
    zero, zero_flags = claims.setting_text(models, claim, ("-seed2",), (claim.method, claim.baseline))
    assert zero == whole and not zero_flags


def test_attack_rates_compare_the_examples_both_victims_attacked():
    """The CI and the test of an attack success rate rest on the same examples: those both victims got right."""
    from bench.scoring.stats import paired_bootstrap

    ids = list(range(8))
    nan = float("nan")
    a = Evidence("proportion", Sample(ids, {"s": [1, 1, 0, 0, 1, nan, 1, 0]}), ("s",))
    b = Evidence("proportion", Sample(ids, {"s": [1, 0, 0, 0, nan, 1, 1, 1]}), ("s",))
    d = paired_bootstrap(a, b, common=True)
    assert d.n == 6 and d.extra["counted_by_both"] == 6
    assert d.extra["a"] == pytest.approx(100 * 3 / 6) and d.extra["b"] == pytest.approx(100 * 3 / 6)
    assert paired_bootstrap(a, b).n == 8  # without: each rate over its own attacked set


def test_every_claims_command_parses_as_bench_run(tmp_path):
    """The "not run yet" commands of the committed claims use options `bench run` has, with valid values."""
    import argparse

    from app.commands import run as run_command

    parser = argparse.ArgumentParser(exit_on_error=False)
    run_command.add_arguments(parser)
    book = claims.load()
    store = ResultStore(tmp_path)  # no cells: every line is "not run yet"
    for claim in book.claims:
        if claim.not_testable:
            continue
        for variant in claim.variants:
            command, minutes = claims.plan(book, claim, variant, (claim.method,), store)
            commands = command.split(" && ")
            assert len(commands) == len(claim.task_list), command  # one run per task (dataset)
            for one, task in zip(commands, claim.task_list):
                words = one.split()
                assert words[:2] == ["bench", "run"], one
                args = parser.parse_args(words[2:])
                assert args.suite == claim.suite and args.model == claim.method, one
                assert not claim.tasks or f"--task {task}" in one, one
            assert minutes > 0, claim.id


def test_compute_plan_counts_each_command_and_training_once(tmp_path):
    path = _file(tmp_path, HEADER + CLAIM + CLAIM.replace('id = "stsb"', 'id = "stsb-again"'))
    book, rows = claims.ledger(tmp_path / "results", path)
    todo, total = claims.compute_plan(rows)
    # both claims need the same four runs (base, better and their -seed1); each model trains once
    assert sorted(s.model for s in todo) == ["base", "base-seed1", "better", "better-seed1"]
    assert total == pytest.approx(4 * 1 + 2 * 2.4 * 250 / 60)
    md = claims_pages.to_markdown(book, rows, {})
    assert "4 distinct `bench run` commands" in md and [f"{i}. `bench run --model" in md for i in range(1, 6)] == \
        [True] * 4 + [False]
    # each claim's seed-0 line points at the plan steps of its two missing models
    numbers = claims_pages.plan_numbers(rows)
    first = rows[0].lines[0]
    assert len(first.steps) == 2 and {numbers[s.command] for s in first.steps} == {1, 2}
    assert ": plan steps 1, 2, about" in claims_pages.seed_line(first, numbers)
    assert "`bench run --model base " in claims_pages.seed_line(first)  # without a plan: the command


def test_attack_cost_uses_a_recipes_measured_seconds_where_known():
    costs = {"attack_seconds_per_example_recipe": 2, "attack_seconds": {"bae": 0.5},
             "victim_minutes": {"frozen": 1}}
    options = {"suite": "adversarial", "limit": 120, "runs": 2, "victim": "frozen"}
    # 120 examples x 2 runs: 0.5 s each for BAE, the default 2 s for PWWS; one frozen victim per run
    assert claims.run_minutes(costs, {**options, "recipe": ["bae"]}) == pytest.approx(240 * 0.5 / 60 + 2)
    assert claims.run_minutes(costs, {**options, "recipe": ["bae", "pwws"]}) == pytest.approx(240 * 2.5 / 60 + 2)
    assert claims.run_minutes(costs, {**options, "recipe": "pwws"}) == pytest.approx(240 * 2 / 60 + 2)
    # a hardened victim: each run first attacks 300 training sentences with BAE, and trains its victim twice
    hardened = {**options, "recipe": "pwws", "adversarial_training": "bae", "adversarial_training_examples": 300}
    assert claims.run_minutes(costs, hardened) == pytest.approx(240 * 2 / 60 + 600 * 0.5 / 60 + 4)


def test_the_cost_tables_defaults_are_the_suites_defaults():
    """The reports do not import the suites, so claims.toml repeats the adversarial suite's default; they agree."""
    from suites import adversarial

    costs = claims.load().costs
    assert costs["adversarial_training_default_examples"] == adversarial.ADVERSARIAL_TRAINING_EXAMPLES


def test_a_sampled_victim_costs_its_share_of_the_measured_minutes():
    costs = {"victim_minutes": {"finetune": 10}, "task_victim_minutes": {"finetune": {"sst2": 45, "cola": 17}},
             "task_victim_examples": {"finetune": {"sst2": 60000}}}
    sst2 = {"victim": "finetune", "task": "sst2"}
    assert claims.victim_minutes(costs, sst2) == 45
    assert claims.victim_minutes(costs, {**sst2, "victim_examples": 20000}) == pytest.approx(15)
    assert claims.victim_minutes(costs, {**sst2, "victim_examples": 90000}) == 45  # a cap above the set: all of it
    # where the measured size is not known the figure stands; an unlisted task takes the protocol's
    assert claims.victim_minutes(costs, {"victim": "finetune", "task": "cola", "victim_examples": 100}) == 17
    assert claims.victim_minutes(costs, {"victim": "finetune", "task": "mr"}) == 10


def test_a_rate_on_which_no_example_differs_still_has_an_mde():
    from bench.scoring.stats import Pooled, mcnemar_detectable_effect

    line = claims.Comparison("m", "b", {}, estimate=0.0, low=0.0, high=0.0, p=1.0, pairs=200, values=(2.0, 2.0),
                             test="paired-bootstrap-runs-of-2(B=1000,seed=0); McNemar mid-p pooled over parts",
                             binary=True)
    effect = claims.Effect(None, {}, (line,), Pooled(0.0, 0.0, 0.0, 1.0, 0.0, 1, None, "x"))
    assert effect.mde == pytest.approx(mcnemar_detectable_effect(200)) and 3 < effect.mde < 4
    other = claims.Effect(None, {}, (replace(line, binary=False),), effect.pooled)
    assert other.mde is None  # a continuous measure with zero spread has nothing to size a test by


def test_a_line_is_binary_when_its_test_is_mcnemars():
    from bench.scoring.stats import Difference, mcnemar

    line = claims.Comparison("m", "b", {})
    rate = Difference(0.0, 0.0, 0.0, 1.0, "paired-bootstrap", 200, {"mcnemar": mcnemar([1, 0], [1, 0])})
    assert claims._with_difference(line, rate).binary
    assert not claims._with_difference(line, replace(rate, extra={})).binary


# --------------------------------------------------------------------------- matched seeds, placebo, the committed ledger --

def test_a_pair_that_breaks_the_matched_seed_rule_is_refused_not_pooled(tmp_path):
    results = tmp_path / "results"
    store = ResultStore(results)
    _seeded(store)
    # "better-seed1" has a second set of weights among its cells: it is two models under one name
    _sts_cell(store, "better-seed1", noise=1.0, seed=4, task="sickr", weights="cd" * 32)
    _, (r,) = claims.ledger(results, _file(tmp_path, THREE_SEEDS + CLAIM))
    refused = [ln for ln in r.primary.lines if ln.refused]
    assert [ln.seed for ln in refused] == [1] and "better-seed1 has cells from 2 sets of weights" in refused[0].refused
    assert r.primary.pooled.seeds == 2 and r.verdict.label == FEW_SEEDS  # the other two pool; 2 < 3


def test_an_untrained_base_is_paired_by_the_build_each_method_started_from(tmp_path, monkeypatch):
    """The base is built anew on each machine, so its cells come from several builds: each pair reads the
    base's cells of the build its method's card names (or, for a card naming only the base's file, the
    weights other cards record for that file), and the pairs pool; a card without either record cannot
    tell the builds apart, and its pair is refused."""
    results = tmp_path / "results"
    store = ResultStore(results)
    one, two = "ab" * 32, "cd" * 32
    _sts_cell(store, "base", noise=3.0, seed=10, weights=one)
    _sts_cell(store, "base", noise=1.0, seed=11, weights=two)
    for seed in (0, 1, 2):
        _sts_cell(store, "better" + (f"-seed{seed}" if seed else ""), noise=0.3, seed=20 + seed)
    cards = {m: {"training": {"base_encoder_sha256": build}}
             for m, build in {"better": one, "better-seed1": two, "better-seed2": one}.items()}
    monkeypatch.setattr(claims, "catalog_models", lambda _: cards)
    text = (HEADER.replace('"base-seed1" = ""\n', "")
            .replace('"better-seed1" = "simcse"', '"better-seed1" = "simcse"\n"better-seed2" = "simcse"')
            .replace('suffixes = ["-seed1"]', 'suffixes = ["-seed1", "-seed2"]'))
    path = _file(tmp_path, text + CLAIM)
    _, (r,) = claims.ledger(results, path)
    assert not any(ln.refused for ln in r.primary.lines) and r.primary.pooled.seeds == 3
    base_value = {ln.seed: ln.values[0] for ln in r.primary.lines}
    assert base_value[0] == base_value[2] != base_value[1]  # seed 1 reads the other build's cell
    # a card that names only the base's file reads the weights another card records for that file
    cards["better-seed1"] = {"training": {"base_weights_sha256": "f1" * 32}}
    cards["elsewhere"] = {"training": {"base_weights_sha256": "f1" * 32, "base_encoder_sha256": two}}
    _, (r,) = claims.ledger(results, path)
    assert not any(ln.refused for ln in r.primary.lines) and r.primary.pooled.seeds == 3
    assert {ln.seed: ln.values[0] for ln in r.primary.lines} == base_value
    del cards["elsewhere"]  # no card knows that file's weights
    _, (r,) = claims.ledger(results, path)
    assert [ln.seed for ln in r.primary.lines if ln.refused] == [1]
    cards["better-seed1"] = {"training": {}}  # a card from before either record
    _, (r,) = claims.ledger(results, path)
    refused = [ln for ln in r.primary.lines if ln.refused]
    assert [ln.seed for ln in refused] == [1] and "base has cells from 2 sets of weights" in refused[0].refused
    cards["better-seed1"] = {"training": {"base_encoder_sha256": "ef" * 32}}  # a build the base was not run on
    _, (r,) = claims.ledger(results, path)
    (waiting,) = [ln for ln in r.primary.lines if ln.seed == 1]
    assert waiting.missing == ("base",) and "not of the one better-seed1 started from (efefefefefef)" in waiting.note
    assert not waiting.note.startswith(";"), waiting.note


def test_the_matched_seed_rule_refuses_two_builds_of_the_base():
    matching = claims.Matching(ResultStore(__import__("pathlib").Path("/nonexistent")), {
        "a": {"training": {"base_weights_sha256": "1" * 64}}, "b": {"training": {"base_weights_sha256": "2" * 64}}})
    assert "the two models were trained from different builds of the base" in matching.refusal("a", "b")
    same = claims.Matching(matching.store, {m: {"training": {"base_weights_sha256": "1" * 64}} for m in "ab"})
    assert same.refusal("a", "b") == ""


def test_a_placebo_of_equal_models_is_not_directional(tmp_path):
    """Both arms drawn from one distribution: the ledger's path must not call a direction."""
    results = tmp_path / "results"
    store = ResultStore(results)
    for seed in (0, 1, 2):
        suffix = f"-seed{seed}" if seed else ""
        _sts_cell(store, "base" + suffix, noise=1.0, seed=40 + seed)
        _sts_cell(store, "better" + suffix, noise=1.0, seed=50 + seed)
    placebo = CLAIM.replace('id = "stsb"', 'id = "placebo"\nkind = "placebo"')
    _, (row,) = claims.ledger(results, _file(tmp_path, THREE_SEEDS + placebo))
    assert row.claim.kind == "placebo" and row.primary.pooled.seeds == 3
    assert row.verdict.label not in (REPLICATED, REVERSED)


def test_a_placebo_that_comes_out_directional_says_it_fails(tmp_path):
    """Arms that differ after all (here by construction): the verdict keeps its direction and says the placebo
    fails, rather than reading like a replicated paper claim."""
    results = tmp_path / "results"
    _seeded(ResultStore(results))
    placebo = CLAIM.replace('id = "stsb"', 'id = "placebo"\nkind = "placebo"')
    _, (row,) = claims.ledger(results, _file(tmp_path, THREE_SEEDS + placebo))
    assert row.verdict.label == REPLICATED and claims.PLACEBO_FAILED in row.verdict.note


def test_each_placebo_is_judged_alone_at_the_nominal_level(tmp_path):
    """Holm over two placebos would halve what each must clear; each placebo is a family of its own."""
    results = tmp_path / "results"
    _seeded(ResultStore(results))
    placebo = CLAIM.replace('id = "stsb"', 'id = "placebo"\nkind = "placebo"')
    one = _file(tmp_path, THREE_SEEDS + placebo)
    _, (alone,) = claims.ledger(results, one)
    assert alone.primary.p_adjusted == claims.raw_tests(alone.primary, claims.load(one)).direction
    twins = placebo + placebo.replace('id = "placebo"', 'id = "placebo-twin"')
    _, rows = claims.ledger(results, _file(tmp_path, THREE_SEEDS + twins))
    assert [r.primary.p_adjusted for r in rows] == [alone.primary.p_adjusted] * 2


def test_the_committed_ledger_keeps_its_promises():
    """Every pooled line of the generated claims.csv: its interval excludes 0 exactly when p < 0.05, its SE is
    below neither source of noise, d.f. is a number or inf; no verdict at a floor. A placebo that comes out
    directional (the committed one does, at three seeds an arm) is never passed over: its line says the
    placebo fails and docs/statistics.md reports it."""
    import csv
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "reports" / "generated" / "claims.csv"
    if not path.is_file():
        pytest.skip("no generated ledger: run `bench report --results-dir results`")
    rows = [r for r in csv.DictReader(path.open(encoding="utf-8")) if r["seed"] == "pooled" and r["p"]]
    if "seed_part" not in rows[0]:
        pytest.skip("the generated ledger predates the seed-level test: run `bench report --results-dir results`")
    for r in rows:
        low, high, p, se = (float(r[k]) for k in ("ci_low", "ci_high", "p", "se"))
        assert (low > 0 or high < 0) == (p < 0.05), r["claim_id"]
        assert se ** 2 >= float(r["example_part"]) * (1 - 1e-9) and se ** 2 >= float(r["seed_part"]) * (1 - 1e-9)
        assert r["df"] == "inf" or 1.0 <= float(r["df"]) <= 1000.0
        if r["kind"] == "placebo" and r["verdict"] in (REPLICATED, REVERSED):
            assert claims.PLACEBO_FAILED in r["verdict_note"], r["claim_id"]
            statistics = (Path(__file__).resolve().parents[1] / "docs" / "statistics.md").read_text(encoding="utf-8")
            assert f'claim_id={r["claim_id"]} seed=pooled show=verdict -->{r["verdict"]}<!-- /q -->' in statistics
            assert "came out directional" in statistics


def test_an_insensitive_attack_is_not_judged_while_its_controls_show_it_and_the_declaration_lapses_after():
    from bench.scoring.stats import Pooled

    book = claims.load()
    declared = book.insensitive[0]
    by_id = {c.id: c for c in book.claims}

    def effect(claim, low, high):
        return claims.Effect(claim, {}, (), Pooled((low + high) / 2, low, high, 0.01, 1.0, 3, None, "t"),
                             primary=True)

    ref = by_id[declared.reference]
    controls = [c for c in book.claims if c.kind == "control" and c.attack == declared.attack
                and c.task == declared.task]
    papers = [c for c in book.claims if c.kind == "paper" and c.attack == declared.attack
              and c.task == declared.task]
    assert controls and papers

    def notes(ref_ci, control_ci):
        groups = [[effect(c, *ref_ci)] if c is ref else [effect(c, *control_ci)] if c in controls else []
                  for c in book.claims]
        return claims.insensitive_notes(book, groups)

    held = notes((-47.0, -36.0), (-1.6, 3.2))
    assert set(held) == {c.id for c in papers}
    note = next(iter(held.values()))
    assert declared.reference in note and "Δ -41.50 [-47.00, -36.00]" in note and "Δ +0.80 [-1.60, +3.20]" in note
    assert notes((-47.0, -36.0), (-9.0, -2.0)) == {}  # a control moves the attack: the lines are judged again
    assert notes((-3.0, 1.0), (-1.6, 3.2)) == {}  # the reference does not move: nothing is shown either way
    line = effect(papers[0], -2.0, 2.0)
    judged = claims.judge(line, claims.Tests(0.9), book, held[papers[0].id])
    assert judged.verdict.label == claims.INSENSITIVE and judged.verdict.note == note
    assert not claims.decidable(line, book, held)


def test_an_insensitive_declaration_must_name_a_control_on_another_attack_of_its_task(tmp_path):
    text = (tmp_path / "c.toml")
    source = claims.CLAIMS_FILE.read_text(encoding="utf-8")
    text.write_text(source.replace('reference = "control-canon-textfooler-mr"',
                                   'reference = "robustembed-t3-textfooler-mr"'), encoding="utf-8")
    with pytest.raises(BenchError, match="is not a control claim on another attack"):
        claims.load(text)


def test_explicit_pairs_are_numbered_by_their_training_seed():
    """A claim's own pairs (seeds 3-5 against 6-8) are labelled seed 3, 4, 5, not by their order in the file;
    a baseline shared by two pairs falls back to the pairs' order."""
    claim = claims.Claim(id="c", paper="p", table="t", claim="", suite="sts", task="avg", metric="spearman",
                         aggregation="mean-of-tasks", method="m-seed6", baseline="b-seed3", paper_method="M",
                         paper_baseline="B", direction="higher", differs="",
                         pairs=(("b-seed3", "m-seed6"), ("b-seed4", "m-seed7"), ("b", "m-seed8")))
    assert [s for s, *_ in claims._pairs(None, claim)] == [3, 4, 0]
    shared = replace(claim, pairs=(("b", "m-seed1"), ("b", "m-seed2")))
    assert [s for s, *_ in claims._pairs(None, shared)] == [0, 1]


def test_method_run_gives_the_methods_side_its_own_options(tmp_path):
    """A victim-level control: one encoder on both sides, the method's cells those run with its own option."""
    results = tmp_path / "results"
    store = ResultStore(results)
    _sts_cell(store, "base", noise=3.0, seed=1, config={"victim": "plain"})
    control = CLAIM.replace('method = "better"', 'method = "base"').replace(
        'run = { suite = "sts" }', 'run = { suite = "sts" }\nvariants = [{ victim = "plain" }]\n'
        'method_run = { victim = "hard" }\nkind = "control"\nmin_seeds = 1\nexpectation = "up"\n'
        'pairs = [["base", "base"]]')
    path = _file(tmp_path, HEADER + control)
    _, (row,) = claims.ledger(results, path)
    (line,) = row.primary.lines
    assert line.missing == ("base",) and "--victim hard" in line.command and "--victim plain" not in line.command
    _sts_cell(store, "base", noise=0.3, seed=2, config={"victim": "hard"})
    _, (row,) = claims.ledger(results, path)
    (line,) = row.primary.lines
    assert line.ran and line.estimate > 5 and row.primary.pooled.seeds == 1


def test_a_treated_cell_never_stands_in_for_the_untreated_side(tmp_path, monkeypatch):
    """A hardened victim's cell (adversarial_training recorded) is newer than the plain one, yet a claim
    that does not ask for the treatment reads the plain cell."""
    from bench.results import store as store_module

    stamps = iter(f"2026-01-01T00:00:0{i}+00:00" for i in range(9))
    monkeypatch.setattr(store_module, "now_iso", lambda: next(stamps))
    results = tmp_path / "results"
    store = ResultStore(results)
    _sts_cell(store, "base", noise=3.0, seed=1)
    _sts_cell(store, "better", noise=3.0, seed=1)
    _sts_cell(store, "better", noise=0.3, seed=2, config={"adversarial_training": "textfooler",
                                                            "treatments": ["adversarial_training"]})
    _, (row,) = claims.ledger(results, _file(tmp_path, HEADER + CLAIM))
    assert abs(row.primary.lines[0].estimate) < 1e-9  # the same noise on both sides: the plain cells

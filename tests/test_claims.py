"""The claims ledger: the verdict rule, the claims file's checks, and a render from a tiny results dir."""

from __future__ import annotations

import numpy as np
import pytest

from bench.errors import BenchError
from bench.stats import Evidence, Sample
from bench.store import CellKey, Result, ResultStore
from bench.uncertainty import apply_uncertainty
from reports import claims
from reports.claims import (INCONCLUSIVE, NOT_DETECTED, NOT_RUN, NOT_TESTABLE, REPLICATED, REVERSED, verdict)

# --------------------------------------------------------------------------- the verdict rule -------


@pytest.mark.parametrize("direction, paper, low, high, label, note", [
    # the paper's sign, CI excludes 0
    ("higher", 1.5, 0.5, 2.0, REPLICATED, ""),
    ("higher", 1.5, 0.2, 0.6, REPLICATED, "smaller"),  # CI excludes the paper's Δ: smaller effect
    ("higher", 1.5, 2.0, 3.0, REPLICATED, "larger"),
    ("lower", -30.0, -35.0, -25.0, REPLICATED, ""),
    ("lower", -30.0, -3.0, -1.0, REPLICATED, "smaller"),
    # the other sign, CI excludes 0
    ("higher", 1.5, -2.0, -0.1, REVERSED, ""),
    ("lower", -30.0, 0.1, 3.0, REVERSED, ""),
    # CI includes 0
    ("higher", 1.5, -0.5, 2.0, INCONCLUSIVE, ""),
    ("lower", -30.0, -31.0, 1.0, INCONCLUSIVE, ""),
    ("higher", 1.5, -0.5, 0.5, NOT_DETECTED, ""),
    ("lower", -30.0, -2.9, 3.2, NOT_DETECTED, ""),
])
def test_verdicts(direction, paper, low, high, label, note):
    v = verdict(direction, paper, low, high)
    assert v.label == label
    assert (note in v.note) if note else not v.note


@pytest.mark.parametrize("direction, paper, low, high, label", [
    ("higher", 1.5, 0.0, 1.0, NOT_DETECTED),  # an end exactly at 0 includes 0
    ("higher", 1.5, -1.0, 0.0, NOT_DETECTED),
    ("lower", -1.5, 0.0, 1.0, NOT_DETECTED),
    ("higher", 1.5, 0.0, 1.5, INCONCLUSIVE),  # ... and an end exactly at the paper's Δ includes it
    ("higher", 1.5, -1.0, 1.5, INCONCLUSIVE),
    ("higher", 1.5, 1.5, 2.0, REPLICATED),  # the paper's Δ at the low end: no "smaller/larger" note
    ("higher", 1.5, 1e-9, 1.4999, REPLICATED),
    ("higher", 1.5, 0.0, 0.0, NOT_DETECTED),  # a zero-width CI at 0
    ("lower", -1.5, -1e-9, -1e-9, REPLICATED),
])
def test_verdict_boundaries(direction, paper, low, high, label):
    assert verdict(direction, paper, low, high).label == label
    assert verdict("higher", 1.5, 1.5, 2.0).note == ""
    assert "smaller" in verdict("higher", 1.5, 1e-9, 1.4999).note


@pytest.mark.parametrize("paper, low, high, p, label", [
    (-13.59, 0.5, 4.0, 0.062, NOT_DETECTED),  # CI off 0, test not significant: no direction called
    (3.0, 0.5, 4.0, 0.062, INCONCLUSIVE),     # ... and the paper's Δ inside the CI
    (-0.3, -4.0, -0.5, 0.062, INCONCLUSIVE),  # ... or between the CI and 0
    (-13.59, 0.5, 4.0, 0.01, REVERSED),       # the test agrees: the direction stands
    (-13.59, -1.0, 4.0, 0.01, NOT_DETECTED),  # a CI that includes 0 is judged by the CI alone
])
def test_verdict_needs_the_paired_test_to_agree(paper, low, high, p, label):
    v = verdict("lower", paper, low, high, p)
    assert v.label == label
    assert ("paired test does not" in v.note) == (p >= 0.05 and (low > 0 or high < 0))


def test_verdict_rejects_bad_input():
    with pytest.raises(ValueError):
        verdict("better", 1.0, 0.0, 1.0)
    with pytest.raises(ValueError):
        verdict("higher", 1.0, 2.0, 1.0)


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
    from bench.registry import MODELS

    book = claims.load()
    assert len(book.claims) >= 15
    assert set(book.models) <= set(MODELS), set(book.models) - set(MODELS)
    for c in book.claims:
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
    (lambda t: t.replace('run = { suite = "sts" }', 'run = "sts"'), "run must be a table"),
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

def _sts_cell(store, model, noise, seed=0):
    rng = np.random.default_rng(seed)
    gold = np.linspace(0, 5, 60)
    pred = gold + rng.normal(0, noise, gold.size)
    sample = Sample(list(range(gold.size)), {"pred": pred, "gold": gold})
    from scipy.stats import spearmanr

    row = Result(model=model, suite="sts", task="stsb", split="test", metric="spearman", aggregation="all",
                 value=100 * spearmanr(pred, gold).statistic, n=gold.size, seed=0,
                 evidence=Evidence("spearman", sample, ("pred", "gold")))
    key = CellKey(model, "ab" * 32, "sts", "stsb", 0, "c" * 16)
    store.write(key, [row], {"suite": "sts", "task": "stsb", "profile": "study"}, evidence=apply_uncertainty([row]))


def test_render_on_a_tiny_results_dir(tmp_path):
    results = tmp_path / "results"
    store = ResultStore(results)
    _sts_cell(store, "base", noise=3.0)
    _sts_cell(store, "better", noise=0.3)
    _sts_cell(store, "base-seed1", noise=3.0, seed=1)  # the second seed's method has no cell yet
    path = _file(tmp_path, HEADER + CLAIM + UNTESTABLE)
    book, rows = claims.ledger(results, path)
    stsb, cola = rows
    first = stsb.lines[0]
    assert first.verdict.label == REPLICATED and first.low > 0 and first.pairs == 60
    assert first.estimate == pytest.approx(first.values[1] - first.values[0], abs=1e-6)
    second = stsb.lines[1]
    assert second.verdict.label == NOT_RUN and second.missing == ("better-seed1",)
    assert "bench run --model better-seed1 --profile study --suite sts" in second.command
    assert second.cpu_minutes == pytest.approx(1 + 2.4 * 250 / 60)  # the run, and training: no cell at all
    assert cola.claim.not_testable and not cola.lines
    files = claims.render(results, path)
    md, page = files["claims.md"], files["claims.html"]
    assert md.count("\n| **") == 2  # one row per claim
    assert "replicated" in md and NOT_TESTABLE + ": no CoLA data offline" in md
    assert "+3.03" in md  # the paper's Δ, from paper_values.csv (82.97 − 79.94)
    assert "a tiny fixture" in md
    # the table names the missing run by its number in the compute plan; the plan gives the command
    (seed1_line,) = [ln for ln in md.splitlines() if ln.startswith("| **")][:1]
    assert "not run yet (no cell for better-seed1): plan step 1" in seed1_line and "`bench run" not in seed1_line
    assert "\n1. `bench run --model better-seed1" in md
    assert "<table class=\"claims\">" in page and page.count("<div class=\"line\">") >= 2 and "no CoLA data offline" in page
    # stored cells under another setting are not compared
    other = tmp_path / "other"
    _sts_cell(ResultStore(other), "base", noise=3.0)
    _sts_cell(ResultStore(other), "better", noise=0.3)
    quick = _file(tmp_path, (HEADER + CLAIM).replace('profile = "study"', 'profile = "paper"'))
    _, (only,) = claims.ledger(other, quick)
    assert only.lines[0].verdict.label == NOT_RUN


def test_seeds_agree_or_not():
    claim = claims.load().claims[0]
    line = claims.Comparison("m", "b", {}, claims.Verdict(REPLICATED))
    seed1 = claims.Comparison("m-seed1", "b-seed1", {}, claims.Verdict(INCONCLUSIVE))
    assert "seeds agree" in claims.seeds_text(claims.Row(claim, (line, line)))
    text = claims.seeds_text(claims.Row(claim, (line, seed1)))
    assert "seeds disagree" in text and INCONCLUSIVE in text


def test_every_claims_command_parses_as_bench_run(tmp_path):
    """The "not run yet" commands of the committed claims use options `bench run` has, with valid values."""
    import argparse

    from bench.commands import run as run_command

    parser = argparse.ArgumentParser(exit_on_error=False)
    run_command.add_arguments(parser)
    book = claims.load()
    store = ResultStore(tmp_path)  # no cells: every line is "not run yet"
    for claim in book.claims:
        if claim.not_testable:
            continue
        for variant in claim.variants:
            command, minutes = claims.plan(book, claim, variant, (claim.method,), store)
            words = command.split()
            assert words[:2] == ["bench", "run"], command
            args = parser.parse_args(words[2:])
            assert args.suite == claim.suite and args.model == claim.method, command
            assert minutes > 0, claim.id


def test_compute_plan_counts_each_command_and_training_once(tmp_path):
    path = _file(tmp_path, HEADER + CLAIM + CLAIM.replace('id = "stsb"', 'id = "stsb-again"'))
    book, rows = claims.ledger(tmp_path / "results", path)
    todo, total = claims.compute_plan(rows)
    # both claims need the same four runs (base, better and their -seed1); each model trains once
    assert sorted(s.model for s in todo) == ["base", "base-seed1", "better", "better-seed1"]
    assert total == pytest.approx(4 * 1 + 2 * 2.4 * 250 / 60)
    md = claims.to_markdown(book, rows)
    assert "4 distinct `bench run` commands" in md and [f"{i}. `bench run --model" in md for i in range(1, 6)] == \
        [True] * 4 + [False]
    # each claim's seed-0 line points at the plan steps of its two missing models
    numbers = claims.plan_numbers(rows)
    first = rows[0].lines[0]
    assert len(first.steps) == 2 and {numbers[s.command] for s in first.steps} == {1, 2}
    assert ": plan steps 1, 2, about" in claims.line_text(first, rows[0].claim, numbers)
    assert "`bench run --model base " in claims.line_text(first, rows[0].claim)  # without a plan: the command


def test_attack_cost_uses_a_recipes_measured_seconds_where_known():
    costs = {"attack_seconds_per_example_recipe": 2, "attack_seconds": {"bae": 0.5},
             "victim_minutes": {"frozen": 1}}
    options = {"suite": "adversarial", "limit": 120, "runs": 2, "victim": "frozen"}
    # 120 examples x 2 runs: 0.5 s each for BAE, the default 2 s for PWWS; one frozen victim per run
    assert claims.run_minutes(costs, {**options, "recipe": ["bae"]}) == pytest.approx(240 * 0.5 / 60 + 2)
    assert claims.run_minutes(costs, {**options, "recipe": ["bae", "pwws"]}) == pytest.approx(240 * 2.5 / 60 + 2)
    assert claims.run_minutes(costs, {**options, "recipe": "pwws"}) == pytest.approx(240 * 2 / 60 + 2)

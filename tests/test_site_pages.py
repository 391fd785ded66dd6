"""The site reads as an answer: a pivot of one row per model with the intervals the tables use (never a
t-interval over a few attack runs), metric names in words, cards that show only the choices that apply and
readable versions, and an index that opens with the claims slot, the findings and the pivot."""

from __future__ import annotations

import json

from reports import pivot, site
from reports.card import applies, scorer_text
from reports.results import Catalog


def test_a_choice_named_as_a_condition_applies_only_when_the_recipe_meets_it():
    assert not applies("K=T=0", {})  # RobustEmbed's defaults have an adversary
    assert applies("K=T=0", {"K": 0, "T": 0})
    assert not applies("K=T=0", {"K": 0, "T": 3})
    assert applies("epsilon", {}) and applies("shared_gradient", {})


def test_scorer_versions_read_as_words():
    assert scorer_text("sts-1.1.1.1.1.1.1.1") == "sts v1, tasks v1 (all 7)"
    assert scorer_text("adversarial-2.1") == "adversarial v2, task v1"
    assert scorer_text("transfer-1.2.1") == "transfer v1, tasks v2/1"


def _row(model, suite, task, metric, value, aggregation="all", attack="", ci=None, method="", config=None):
    return {"model": model, "suite": suite, "task": task, "metric": metric, "value": value, "aggregation": aggregation,
            "attack": attack, "split": "test", "seed": 0, "ci_low": ci[0] if ci else None,
            "ci_high": ci[1] if ci else None, "ci_method": method, "_config": config or {}, "created_at": "2026"}


FROZEN = {"victim": "frozen", "constraints": "unified"}


def rows():
    out = []
    for model, sts, asr in (("a", 80.0, 60.0), ("b", 82.0, 50.0)):
        out.append(_row(model, "sts", "avg", "spearman", sts, "mean-of-tasks", ci=(sts - 1, sts + 1), method="bootstrap"))
        out.append(_row(model, "adversarial", "mr", "attack_success_rate", asr, "mean-of-runs", "textfooler",
                        ci=(0.0, 100.0), method="t-over-2-runs", config=FROZEN))
        for k, delta in ((0, -2.0), (1, 2.0)):
            out.append(_row(model, "adversarial", "mr", "attack_success_rate", asr + delta, f"run{k}", "textfooler",
                            config=FROZEN))
        out.append(_row(model, "adversarial", "mr", "attack_success_rate", 99.0, "mean-of-runs", "textfooler",
                        config={"victim": "finetune", "constraints": "paper"}))  # another protocol: not in the pivot
    return out


def test_the_pivot_has_one_row_per_model_and_never_a_t_interval_over_runs():
    catalog = Catalog({}, {})
    columns, lines = pivot.build(rows(), catalog, evidence=None)
    assert [c.suite for c in columns] == ["sts", "adversarial"]
    assert [ln.model for ln in lines] == ["a", "b"]
    sts, attack = lines[1].cells
    assert sts.mean == 82.0 and (sts.ci.low, sts.ci.high) == (81.0, 83.0)
    assert attack.mean == 50.0 and not attack.ci.present  # no stored evidence: no interval, not 0-100
    text = pivot.to_html(columns, lines, catalog)
    assert "100.00" not in text and "[81.00, 83.00]" in text
    sentences = pivot.findings(columns, lines, catalog)
    assert sentences[0].startswith("STS avg. (Spearman ×100): b is highest of 2 models at 82.00 [81.00, 83.00]")
    assert "a is lowest" not in sentences[1] and "b is lowest of 2 models at 50.00" in sentences[1]


def test_leaderboard_pages_open_with_the_pivot_and_hide_raw_rows_and_t_intervals():
    catalog = Catalog({}, {})
    mine = [r for r in rows() if r["suite"] == "adversarial"]
    own = tuple(c for c in pivot.COLUMNS if c.suite == "adversarial")
    text = site.leaderboard_page("adversarial", mine, pivot_html=pivot.to_html(*pivot.build(mine, catalog, None, own),
                                                                                 catalog), words=pivot.metric_words)
    assert text.index("table class=\"sortable pivot\"") < text.index("<details>")
    assert "attack success rate %" in text and ">attack_success_rate<" not in text
    assert "0.00–100.00" not in text  # the rows' t-interval over two runs is not shown


def test_the_index_opens_with_the_claims_slot_the_findings_and_the_pivot():
    catalog = Catalog({}, {})
    columns, lines = pivot.build(rows(), catalog, None)
    kwargs = dict(leaderboards=["sts"], tables=[], figures=[], cards=["a", "b"], claims=True, skipped=[],
                  findings=pivot.findings(columns, lines, catalog), pivot_html=pivot.to_html(columns, lines, catalog))
    empty = site.index_page(rows(), **kwargs)
    assert "<div class=\"claims-summary\">" not in empty  # empty-safe: no empty box
    text = site.index_page(rows(), claims_summary_html="<p>VERDICTS</p>", **kwargs)
    order = [text.index(x) for x in ("VERDICTS", "STS avg. (Spearman ×100): b", "sortable pivot", "<h2>Leaderboards")]
    assert order == sorted(order)


def _ledger() -> dict:
    """A claims.json as the ledger writes it, with a verdict the index has never heard of."""
    claims = [("s1", "STS (points)", "paper's effect excluded"), ("s2", "STS (points)", "paper's effect excluded"),
              ("a1", "Attack success rate (points)", "paper's effect excluded"),
              ("a2", "Attack success rate (points)", "paper's effect excluded"),
              ("a3", "Attack success rate (points)", "paper's effect excluded"),
              ("n1", "Accuracy (points)", "not testable here (floor)"), ("r1", "STS (points)", "replicated")]
    lines = [{"claim_id": cid, "seed": "pooled", "primary": True, "verdict": v, "delta": 0.1, "ci_low": -0.2,
              "ci_high": 0.4, "paper_delta": -5.0, "seeds": 3, "paper": "P", "table": "Table 1",
              "method_model": "m"} for cid, _, v in claims]
    lines.append({**lines[0], "primary": False, "verdict": "replicated"})  # a further setting: not counted
    lines.append({**lines[0], "claim_id": "c1", "kind": "control", "verdict": "replicated"})  # apart from the papers'
    claims.append(("c1", "Attack success rate (points)", "replicated"))
    return {"verdicts": {"replicated": "...", "paper's effect excluded": "an effect of the paper's size is ruled out",
                         "not testable here (floor)": "..."},
            "counts": {"replicated": 1, "paper's effect excluded": 5, "not testable here (floor)": 1},
            "claims": [{"claim_id": cid, "title": f"Title of {cid}", "unit": unit} for cid, unit, _ in claims],
            "lines": lines}


def test_the_index_states_the_ledger_finding_in_words_whatever_the_verdicts_are_called():
    from reports import overview

    catalog = Catalog({"m": {"base": "b", "profile": "study", "training": {"steps": 250, "device": "cpu"}}}, {})
    first, uniform, control, scale = overview.finding_sentences(_ledger(), catalog)
    assert first == ("Of the 7 headline claims of the seed papers tested here: 1 replicated (Title of r1), 5 "
                     "paper's effect excluded and 1 not testable here (floor) (Title of n1).")
    assert control.endswith(" 1 replicated (Title of c1).") and control.lower().startswith("positive control")
    assert uniform == ("All 3 claims on attack success rate: paper's effect excluded (an effect of the paper's size is "
                       "ruled out).")
    assert scale == "At this scale: encoders trained 250 steps (the study profile, on CPU) from b; 3 training seeds per claim."


def test_the_index_draws_every_primary_line_under_its_title_with_the_legend_first():
    from reports import overview

    text = overview.summary_html({"claims.json": json.dumps(_ledger())}, Catalog({}, {}))
    assert text.index("class=\"legend\"") < text.index("class=\"forest\"")
    assert text.count("class=\"fr\"") == 8 and text.count("<h3>") == 4  # a block per kind of measure, controls apart
    assert text.index(">Title of s1</a>") < text.index(">Title of a1</a>") < text.index(">Title of c1</a>")
    assert "href=\"claims.html#a1\" title=\"a1 (P Table 1)\">Title of a1</a>" in text
    assert "not testable here (floor)</span>" in text  # a verdict the site has never seen is shown as named
    assert overview.colours(_ledger())["not testable here (floor)"] == overview.colours(
        {"verdicts": {"not testable here": ""}})["not testable here"]  # in the colour of the verdict it refines
    assert "ours +0.10 [-0.20, +0.40], 3 seeds; paper -5.00" in text
    assert overview.summary_html({}, Catalog({}, {})) == ""  # no ledger this render: nothing


SEVEN = ["sickr", "sts12", "sts13", "sts14", "sts15", "sts16", "stsb"]


def averages_over_other_tasks():
    """Five models with the 7-task STS average, a sixth whose row predates rows naming their tasks, and one
    evaluated on STS-B alone, whose average is the highest number of all."""
    out = [_row(m, "sts", "avg", "spearman", v, "mean-of-tasks", ci=(v - 1, v + 1), method="bootstrap",
                config={"summary_of": SEVEN, "average_of": SEVEN})
           for m, v in (("a", 78.87), ("b", 79.63), ("c", 64.5), ("d", 65.1), ("e", 61.3))]
    out.append({**_row("f", "sts", "avg", "spearman", 70.2, "mean-of-tasks", config={"summary_of": SEVEN}), "n": 7})
    out.append({**_row("stsb-only", "sts", "avg", "spearman", 82.03, "mean-of-tasks", ci=(80.0, 84.0),
                       method="bootstrap", config={"summary_of": ["stsb"], "average_of": ["stsb"]}), "n": 1})
    return out


def test_an_average_over_other_tasks_is_marked_not_ranked_first():
    catalog = Catalog({}, {})
    rows = averages_over_other_tasks()
    columns, lines = pivot.build(rows, catalog, evidence=None)
    sentence = pivot.findings(columns, lines, catalog)[0]
    assert sentence.startswith("STS avg. (Spearman ×100): b is highest of 6 models at 79.63")
    assert sentence.endswith("; not ranked: stsb-only (an average over stsb only).")
    text = pivot.to_html(columns, lines, catalog)
    assert "data-v=\"\" title=\"an average over stsb only: not ranked\">82.03†" in text and "†: an average" in text
    page = site.leaderboard_page("sts", rows, pivot_html=text)
    assert "mean-of-tasks (over stsb only)" in page and page.count("(over ") == 1


def test_the_index_says_a_placebo_fails_when_its_line_says_so():
    from reports import claims, overview

    data = _ledger()
    placebo = {**data["lines"][0], "claim_id": "p1", "title": "Title of p1", "kind": "placebo", "verdict": "reversed",
               "verdict_note": claims.PLACEBO_FAILED}
    data = {**data, "lines": data["lines"] + [placebo],
            "claims": data["claims"] + [{"claim_id": "p1", "title": "Title of p1", "unit": "STS (points)"}]}
    sentence = overview.finding_sentences(data, Catalog({}, {}))[-2]  # the last one states the scale
    assert sentence.startswith("Placebo") and sentence.endswith(" The placebo fails: both arms run one recipe, so a "
                                                                 "direction is a false positive of the test or a "
                                                                 "difference between the arms' runs "
                                                                 "(docs/statistics.md, The placebo).")
    assert "placebo fails" not in " ".join(overview.finding_sentences(_ledger(), Catalog({}, {})))
    passing = {**placebo, "claim_id": "p2", "title": "Title of p2", "verdict": "inconclusive", "verdict_note": ""}
    both = {**data, "lines": data["lines"] + [passing],
            "claims": data["claims"] + [{"claim_id": "p2", "title": "Title of p2", "unit": "STS (points)"}]}
    sentence = overview.finding_sentences(both, Catalog({}, {}))[-2]
    assert sentence.endswith(" 1 of the 2 placebos fails: both arms run one recipe, so a direction is a false "
                             "positive of the test or a difference between the arms' runs (docs/statistics.md, "
                             "The placebo).")

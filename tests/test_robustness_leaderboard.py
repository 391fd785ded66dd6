"""The robustness leaderboard (reports/robustness.py): one MR setting, five recipes, ranked only among models
measured with the same recipes."""

from __future__ import annotations

import csv
import io

from reports import robustness

SETTING = {"victim": "frozen", "constraints": "unified", "limit": 200, "runs": 2}


def asr(model, recipe, value, config=None):
    return {"model": model, "suite": "adversarial", "task": "mr", "seed": 0, "aggregation": "mean-of-runs",
            "split": "test", "metric": "attack_success_rate", "attack": recipe, "value": value, "ci_low": value - 5,
            "ci_high": value + 5, "_config": config or SETTING}


def rows():
    out = [asr("sturdy", r, 40.0) for r in robustness.RECIPES]
    out += [asr("fragile", r, 80.0) for r in robustness.RECIPES]
    out += [asr("partial", r, 10.0) for r in ("textfooler", "pwws")]  # easy to look good on two attacks
    out.append(asr("sturdy", "textfooler", 5.0, config={**SETTING, "victim": "finetune"}))  # another setting
    out.append({"model": "sturdy", "suite": "sts", "task": "avg", "seed": 0, "aggregation": "mean-of-tasks",
                "split": "test", "metric": "spearman", "value": 77.0, "_config": {}})
    return out


def test_models_with_all_recipes_rank_first_and_fewer_recipes_are_marked():
    ranked = [(rank, e.model) for rank, e in robustness.ranked(robustness.entries(rows()))]
    assert ranked == [("1", "sturdy"), ("2", "fragile"), ("1 (2 of 5 recipes)", "partial")]


def test_only_the_setting_counts():
    found = {e.model: e for e in robustness.entries(rows())}
    assert found["sturdy"].attacks["textfooler"].mean == 40.0  # the fine-tuned victim's 5.0 is another setting
    sts = [c.label for c in robustness.BESIDE].index("STS avg")
    assert found["sturdy"].beside[sts][0].mean == 77.0 and found["fragile"].beside[sts][0].mean is None


def test_the_csv_leaves_missing_values_empty_and_escapes_formulas():
    table = rows() + [asr("=HYPERLINK(1)", "pwws", 50.0)]
    lines = list(csv.DictReader(io.StringIO(robustness.to_csv(robustness.entries(table)))))
    partial = next(r for r in lines if r["model"] == "partial")
    assert partial["bae_asr"] == "" and partial["sts_avg"] == "" and float(partial["pwws_asr"]) == 10.0
    assert any(r["model"] == "'=HYPERLINK(1)" for r in lines)


def test_no_attack_in_the_setting_makes_no_page():
    assert robustness.generate([asr("m", "textfooler", 1.0, config={**SETTING, "limit": 20})]) is None


def test_an_sts_average_over_other_tasks_is_marked_not_shown_as_the_column():
    stsb_only = {"model": "partial", "suite": "sts", "task": "avg", "seed": 0, "aggregation": "mean-of-tasks",
                 "split": "test", "metric": "spearman", "value": 82.0, "_config": {"average_of": ["stsb"]}}
    head, lines = robustness.table(robustness.entries(rows() + [stsb_only]))
    line = next(ln for ln in lines if ln[1] == "partial")
    assert line[head.index("STS avg")].startswith("82.00") and "† (stsb only)" in line[head.index("STS avg")]
    sturdy = next(ln for ln in lines if ln[1] == "sturdy")
    assert "†" not in sturdy[head.index("STS avg")]

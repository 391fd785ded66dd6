"""The training-length series figure: paired differences per step from stored cells, bench divergence's
numbers beside them, missing steps shown as missing, and the series on the models' cards."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench.scoring.stats import Evidence, Sample
from bench.results.store import CellKey, Result, ResultStore
from bench.results.uncertainty import apply_uncertainty
from reports.scale import DiffPanel, DivergencePanel, SeriesSpec, generate, series_points

SPEC = SeriesSpec(name="scale-test", title="B − A against steps", a="a-step{step}", b="b-step{step}",
                  steps=(250, 500, 1000),
                  panels=(DiffPanel("displacement", "perturbation", "mr-attacks", "displacement", "ratio-of-means"),
                          DiffPanel("ASR", "adversarial", "mr", "attack_success_rate", "mean-of-runs", "textfooler",
                                    {"victim": "frozen"}),
                          DivergencePanel("weights", "weights"),
                          DivergencePanel("agreement", "agreement", recipes=("textfooler",), where={"victim": "frozen"})))


def displacement_cell(store, model: str, d_pert, d_rand) -> float:
    sample = Sample([f"o{i}" for i in range(len(d_pert))], {"d_pert": d_pert, "d_rand": d_rand})
    ev = Evidence("ratio_of_means", sample, ("d_pert", "d_rand"), scale=1.0)
    rows = [Result(model=model, suite="perturbation", task="mr-attacks", split="v1", metric="displacement",
                   aggregation="ratio-of-means", value=ev.point(), n=len(d_pert), seed=0, evidence=ev)]
    store.write(CellKey(model, "ab" * 32, "perturbation", "mr-attacks", 0, "p" * 16), rows,
                {"suite": "perturbation"}, evidence=apply_uncertainty(rows))
    return ev.point()


def attack_cell(store, model: str, outcomes, victim: str, config_hash: str):
    ev = Evidence("proportion", Sample(list(range(len(outcomes))), {"s": np.asarray(outcomes, float)}), ("s",))
    rows = [Result(model=model, suite="adversarial", task="mr", split="attack", metric="attack_success_rate",
                   aggregation="mean-of-runs", attack="textfooler", value=ev.point(), n=len(outcomes), seed=0,
                   evidence=Evidence(parts=[ev], combine="runs"))]
    store.write(CellKey(model, "cd" * 32, "adversarial", "mr", 0, config_hash), rows,
                {"suite": "adversarial", "victim": victim}, evidence=apply_uncertainty(rows))


@pytest.fixture
def series_results(tmp_path):
    store = ResultStore(tmp_path)
    rng = np.random.default_rng(0)
    values = {}
    for step in (250, 500):  # step 1000 has no cells yet
        d_rand = rng.uniform(0.5, 0.9, 40)
        values[("a", step)] = displacement_cell(store, f"a-step{step}", rng.uniform(0.1, 0.2, 40), d_rand)
        values[("b", step)] = displacement_cell(store, f"b-step{step}", rng.uniform(0.1, 0.3, 40), d_rand)
    attack_cell(store, "a-step250", [1] * 30 + [0] * 10, "frozen", "f" * 16)
    attack_cell(store, "b-step250", [1] * 25 + [0] * 15, "frozen", "f" * 16)
    attack_cell(store, "a-step250", [1] * 40, "finetune", "e" * 16)  # another setting: not this panel's
    attack_cell(store, "b-step250", [0] * 40, "finetune", "e" * 16)
    (tmp_path / "divergence").mkdir()
    outcomes = [{"recipe": "textfooler", "victim": "frozen", "attacked_by_both": n, "both_succeed": s, "both_fail": f}
                for n, s, f in ((40, 20, 15), (60, 30, 25))]
    outcomes.append({"recipe": "textfooler", "victim": "finetune", "attacked_by_both": 10, "both_succeed": 0,
                     "both_fail": 0})
    (tmp_path / "divergence" / "a-step250__b-step250.json").write_text(json.dumps(
        {"weights": {"overall": {"ratio": 0.42, "tensors": 100}}, "outcomes": outcomes}))
    return tmp_path, values


def test_points_per_step_with_missing_ones(series_results):
    root, values = series_results
    points = {(p.panel, p.series, p.step): p for p in series_points(root, SPEC)}
    for step in (250, 500):
        p = points[("displacement", "", step)]
        assert p.value == pytest.approx(values[("b", step)] - values[("a", step)], abs=1e-6)
        assert p.low <= p.value <= p.high and p.n == 40
    assert points[("displacement", "", 1000)].value is None
    assert points[("displacement", "", 1000)].note.startswith("missing: no perturbation/mr-attacks cell")
    asr = points[("ASR", "", 250)]
    assert asr.value == pytest.approx(100 * (25 - 30) / 40) and 0 < asr.p <= 1  # the frozen cell, not the other
    assert points[("ASR", "", 500)].value is None
    assert points[("weights", "", 250)].value == 0.42
    assert points[("weights", "", 500)].note == "missing: run `bench divergence a-step500 b-step500`"
    assert points[("agreement", "textfooler", 250)].value == pytest.approx((20 + 15 + 30 + 25) / 100)
    assert points[("agreement", "textfooler", 1000)].value is None


def test_generate_writes_figure_table_and_card(series_results, monkeypatch):
    import reports
    import reports.specs
    from reports.card import card

    root, _ = series_results
    files = generate(root, SPEC)
    assert {"scale-test.png", "scale-test.pdf", "scale-test.csv", "scale-test.md"} == set(files)
    rows = files["scale-test.csv"].splitlines()
    assert rows[0] == "panel,series,step,value,ci_low,ci_high,p,n,note"
    assert sum("missing" in r for r in rows) == 7 and files["scale-test.png"].startswith(b"\x89PNG")
    assert generate(root / "nothing", SPEC) is None  # no point at all: no figure
    monkeypatch.setattr(reports.specs, "SERIES", (SPEC,))
    monkeypatch.setattr(reports, "SERIES", (SPEC,))
    made = reports.generate(root)
    assert "scale-test.png" in made.reports and "scale-test.md" in made.reports["index.md"]
    text = card(root, "b-step250")["card-b-step250.md"]
    assert "## Series: B − A against steps" in text and "Step 250" in text
    assert "Step 500" in card(root, "a-step500")["card-a-step500.md"]


def test_the_scale_series_reads_the_keys_the_adversarial_suite_writes():
    """Each setting a published series filters its cells by is a key of the cell configuration the suite
    writes, with the value that suite records (a filter on a key no cell has would leave every point missing)."""
    from attacks.recipes import constraints_config
    from reports.scale import _config_value
    from reports.specs import SERIES

    written = {"victim": "frozen", **constraints_config({"constraints": "unified"})}
    for spec in SERIES:
        for panel in spec.panels:
            if isinstance(panel, DiffPanel) and panel.suite == "adversarial":
                assert panel.where and all(_config_value(written, k) == v for k, v in panel.where.items()), panel

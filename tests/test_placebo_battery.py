"""The placebo battery (reports/placebo_battery.py): every arrangement of the placebos' seeds, tested as the
ledger tests one, and its range on simulated seeds."""

from __future__ import annotations

import csv
import itertools
import math

import numpy as np

from bench.paths import PUBLISHED_REPORTS
from bench.scoring.stats import Evidence, Sample, paired_distribution, pooled_test
from reports import placebo_battery as pb
from reports.claims_pages import battery_text


def test_arrangements_are_every_split_into_paired_arms_once():
    six = pb.arrangements(6, 3)
    assert six.shape == (15 * 4, 3, 2)  # 15 ways to pair six seeds, 2^(3-1) orientations up to swapping arms
    assert pb.arrangements(10, 5).shape == (945 * 16, 5, 2)
    assert all(len(set(a.ravel())) == 6 for a in six)
    seen = set()
    for a in six:
        key = frozenset(map(tuple, a))
        swapped = frozenset((m, b) for b, m in a)
        assert key not in seen and swapped not in seen
        seen.add(key)


def _model(gold: np.ndarray, rng, shift: float) -> Evidence:
    """A model's STS-like evidence on two tasks sharing their examples with every other model's."""
    parts = []
    for task, g in (("a", gold[:150]), ("b", gold[150:])):
        pred = g + rng.normal(0.0, 1.0 + shift, len(g))
        parts.append(Evidence("spearman", Sample(list(range(len(g))), {"p": pred, "g": g}), ("p", "g"), label=task))
    return Evidence(parts=parts, combine="average")


def test_the_battery_tests_each_arrangement_as_the_ledger_tests_a_line():
    rng = np.random.default_rng(3)
    gold = rng.normal(size=300)
    models = [_model(gold, rng, 0.1 * i) for i in range(6)]
    points = np.asarray([m.point() for m in models])
    boots = np.stack([m.bootstrap() for m in models])
    arranged = pb.arrangements(6, 3)[:7]
    battery = pb.battery_pvalues(points, boots, arranged)
    for a, p in zip(arranged, battery):
        made = [paired_distribution(models[base], models[method]) for base, method in a]
        ledger = pooled_test([d.estimate for d, _ in made], [dist for _, dist in made])
        assert math.isclose(p, ledger.p, rel_tol=1e-9, abs_tol=1e-12)


def test_a_calibrated_test_lands_near_five_percent_on_simulated_seeds():
    """Seeds and examples alike in size, the example noise shared by the models almost whole (as SimCSE's
    STS seeds show): the test is near its nominal rate there."""
    rates = pb.simulated_rates(8, 3, seeds=1.0, example=1.0, rho=0.99, seed=4, datasets=40)
    assert 0.03 <= float(np.median(rates)) <= 0.08
    assert rates.min() >= 0.0 and rates.max() < 0.3


def test_the_noise_model_recovers_its_parts():
    rng = np.random.default_rng(6)
    models, rho, example, seeds = 400, 0.8, 0.5, 2.0
    cov = example * ((1 - rho) * np.eye(models) + rho * np.ones((models, models)))
    chol = np.linalg.cholesky(cov)
    points = rng.normal(0, math.sqrt(seeds), models) + chol @ rng.normal(size=models)
    boots = points[:, None] + chol @ rng.normal(size=(models, 2000))
    s, e, r = pb.noise_model(points, boots)
    assert abs(e - example) < 0.05 and abs(r - rho) < 0.05 and abs(s - seeds) < 0.6


def test_the_real_seeds_keep_the_rate_a_calibrated_test_keeps():
    """On the committed ledger: over every arrangement of the placebos' real seeds the test calls a direction
    about as often as on simulated seeds of the same noise, inside their 5-95% range."""
    with open(PUBLISHED_REPORTS / pb.NAME, newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows
    for claim, group in itertools.groupby(rows, key=lambda r: (r["claim"], r["k"])):
        got = {r["what"]: r for r in group}
        real, sim = float(got["real"]["directional"]), got["simulated"]
        assert float(sim["low"]) <= real <= float(sim["high"]), (claim, real, sim)


def test_the_ledger_page_says_the_battery_in_words():
    battery = [{"what": "real", "claim": "p3", "k": 3, "models": 10, "arrangements": 12600, "directional": 0.0572},
               {"what": "simulated", "claim": "p3", "k": 3, "models": 10, "low": 0.021, "high": 0.071}]
    text = battery_text(battery)
    assert "10 seeds" in text and "5.7% of the 12,600 splits into arms of 3" in text and "2.1%–7.1%" in text
    assert "as often as a calibrated test" in text
    battery[0]["directional"] = 0.09
    assert "more often than a calibrated test" in battery_text(battery)
    assert battery_text([]) == ""

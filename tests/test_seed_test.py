"""The ledger's primary test (bench/scoring/seeds.py): its error rate under the null, measured by simulation
over the grid the ledger's variance components fall in, its interval agreeing with its p, and its standard
error never below either source of noise."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from bench.scoring.seeds import format_df, rejection_rate, seed_level_test, simulate_null, pooled_arrays
from bench.paths import PUBLISHED_REPORTS
from bench.scoring.stats import holm
from reports.null_simulation import GRID_CORRELATIONS, GRID_RATIOS, NAME, null_pvalues

GRID = [(k, ratio, rho) for k in (3, 5) for ratio in GRID_RATIOS for rho in GRID_CORRELATIONS]


@pytest.mark.parametrize("k, ratio, rho", GRID)
def test_type_one_error_is_at_most_six_percent_on_the_grid(k, ratio, rho):
    """Seed-to-example variance ratio 0.1-100, cross-seed correlation of the example noise 0-0.9, k = 3 and 5:
    the test rejects a true null at most 6% of the time at a nominal 5% (4,000 ledgers: MC SE 0.35 points)."""
    rate = rejection_rate(simulate_null(k, ratio, rho, sims=4000, seed=17))
    assert rate <= 0.06, f"k={k}, ratio={ratio}, rho={rho}: {rate:.3f}"


def _measured() -> tuple[float, float]:
    """Where the committed ledger's lines sit: the mean moment estimates over its pooled lines (seed-to-example
    variance ratio, cross-seed correlation of the example noise), null-simulation.csv's "measured" row."""
    with open(PUBLISHED_REPORTS / NAME, newline="") as f:
        row = next(r for r in csv.DictReader(f) if r["what"] == "measured")
    return float(row["seed_ratio"]), float(row["correlation"])


MEASURED = _measured()


def test_the_grid_surrounds_the_measured_point():
    ratio, rho = MEASURED
    assert min(GRID_RATIOS) <= ratio <= max(GRID_RATIOS) and min(GRID_CORRELATIONS) <= rho <= max(GRID_CORRELATIONS)


def test_type_one_error_is_near_nominal_at_the_measured_point():
    """With 5 seeds where the ledger's lines sit, the test neither over- nor under-rejects (40,000 ledgers)."""
    rate = rejection_rate(null_pvalues(5, *MEASURED, sims=40000, seed=23))
    assert 0.04 <= rate <= 0.06, f"{rate:.4f}"


def test_the_far_tail_holds_at_the_measured_point():
    """Holm's first step over ten lines tests at 0.5%: there too the test rejects no more than it says."""
    for k in (3, 5):
        rate = rejection_rate(null_pvalues(k, *MEASURED, sims=40000, seed=29 + k), alpha=0.005)
        assert rate <= 0.005 + 2 * math.sqrt(0.005 * 0.995 / 40000), f"k={k}: {rate:.5f}"


@pytest.mark.parametrize("ratio, rho", [MEASURED, (1.0, 0.9)])
def test_holm_holds_the_family_wise_error_at_five_percent(ratio, rho):
    """Ten null lines judged together: the chance that Holm lets any of them through is at most 5%."""
    lines, families = 10, 5000
    p = null_pvalues(5, ratio, rho, sims=lines * families, seed=31).reshape(families, lines)
    any_rejected = [min(q for q in holm(list(row))) < 0.05 for row in p]
    assert np.mean(any_rejected) <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / families)


def test_the_interval_excludes_zero_exactly_when_p_is_below_five_percent():
    rng = np.random.default_rng(5)
    est = rng.normal(0.3, 0.4, (3000, 3))
    dists = est[:, :, None] + rng.normal(0, 0.3, (3000, 3, 200))
    r = pooled_arrays(est, dists)
    excludes = (r["low"] > 0) | (r["high"] < 0)
    assert np.array_equal(excludes, r["p"] < 0.05)
    assert excludes.any() and (~excludes).any()


def test_the_standard_error_is_never_below_either_source_of_noise():
    rng = np.random.default_rng(8)
    agreeing = np.array([0.50, 0.50001, 0.49999])  # seeds that agree by chance: the shared noise remains
    shared = rng.normal(0, 0.2, 500)
    dists = agreeing[:, None] + shared[None, :] + rng.normal(0, 0.02, (3, 500))
    r = seed_level_test(agreeing, dists)
    assert r.se ** 2 >= r.example_part - 1e-12 and r.se ** 2 >= r.seed_part - 1e-12
    assert r.se == pytest.approx(np.std(dists.mean(axis=0), ddof=1), rel=0.05)  # not divided by k again
    assert math.isinf(r.df) and format_df(r.df) == "∞"
    scattered = np.array([-1.0, 0.2, 1.4])
    s = seed_level_test(scattered, scattered[:, None] + shared[None, :])
    assert s.se ** 2 >= np.var(scattered, ddof=1) / 3 and 2.0 <= s.df < 10 and format_df(s.df) == f"{s.df:.1f}"


def test_one_seed_is_its_own_example_bootstrap():
    dist = 0.4 + np.random.default_rng(2).normal(0, 0.1, (1, 2000))
    r = seed_level_test([0.4], dist)
    assert r.se == pytest.approx(0.1, rel=0.05) and math.isinf(r.df) and r.seed_part == 0


def test_an_unpooled_ledger_is_refused_rather_than_guessed():
    with pytest.raises(ValueError, match="no bootstrap resample"):
        seed_level_test([0.1, 0.2], np.full((2, 10), np.nan))

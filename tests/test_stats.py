"""bench/scoring/stats.py against independent computations written here (other code paths, other RNGs)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy.stats import binomtest, pearsonr, spearmanr, t as student_t

from bench.scoring import stats


def _sts_like(n=1379, noise=0.25, seed=1):
    rng = np.random.default_rng(seed)
    gold = np.round(rng.uniform(0, 5, n), 1)  # ties, as STS gold scores have
    pred = gold / 5 + rng.normal(0, noise, n)
    return pred, gold


def _independent_bootstrap(pred, gold, fn, resamples, seed):
    """A plain loop over resamples with Python's own RNG and scipy's correlation: a different code path."""
    rnd = random.Random(seed)
    n = len(gold)
    values = []
    for _ in range(resamples):
        idx = [rnd.randrange(n) for _ in range(n)]
        values.append(100 * fn(pred[idx], gold[idx])[0])
    values.sort()
    return values[int(0.025 * resamples)], values[int(math.ceil(0.975 * resamples)) - 1]


@pytest.mark.parametrize("metric,fn", [("spearman", spearmanr), ("pearson", pearsonr)])
def test_bootstrap_correlation_matches_an_independent_bootstrap(metric, fn):
    pred, gold = _sts_like()
    ev = stats.Evidence(metric, stats.Sample(list(range(len(gold))), {"pred": pred, "gold": gold}), ("pred", "gold"))
    assert ev.point() == pytest.approx(100 * fn(pred, gold)[0], abs=1e-9)
    ours = ev.interval()
    low, high = _independent_bootstrap(pred, gold, fn, 2000, seed=7)
    width = high - low
    assert ours.method == "bootstrap(B=1000,seed=0)"
    # Two Monte Carlo estimates of the same quantiles: they agree to a small part of the width.
    assert ours.low == pytest.approx(low, abs=0.12 * width) and ours.high == pytest.approx(high, abs=0.12 * width)
    assert ours.low < ev.point() < ours.high


def test_bootstrap_is_seeded_and_recorded():
    pred, gold = _sts_like(300)
    ev = stats.Evidence("spearman", stats.Sample(list(range(300)), {"p": pred, "g": gold}), ("p", "g"))
    assert ev.interval() == ev.interval()
    other = ev.interval(seed=5)
    assert other.method == "bootstrap(B=1000,seed=5)" and other != ev.interval()


def test_stratified_bootstrap_keeps_subset_sizes():
    strata = np.array(["a"] * 5 + ["b"] * 3)
    idx = stats.resample_indices(8, 200, 0, strata)
    assert np.all(idx[:, :5] < 5) and np.all(idx[:, 5:] >= 5)


def test_wmean_point_is_the_size_weighted_mean_of_subset_correlations():
    pred, gold = _sts_like(90)
    strata = np.array(["a"] * 30 + ["b"] * 60)
    sample = stats.Sample(list(range(90)), {"p": pred, "g": gold}, strata)
    ev = stats.Evidence("spearman_wmean", sample, ("p", "g"))
    expect = (30 * spearmanr(pred[:30], gold[:30])[0] + 60 * spearmanr(pred[30:], gold[30:])[0]) / 90
    assert ev.point() == pytest.approx(100 * expect)
    assert ev.interval().method.startswith("bootstrap-stratified")


@pytest.mark.parametrize("k,n", [(0, 10), (10, 10), (38, 50), (3, 200)])
def test_wilson_matches_the_textbook_formula(k, n):
    z = 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    iv = stats.wilson(k, n)
    assert (iv.low, iv.high) == pytest.approx((100 * max(0, centre - half), 100 * min(1, centre + half)))
    assert iv.method == "wilson" and iv.low <= 100 * p <= iv.high


def test_wilson_known_value_and_empty():
    iv = stats.wilson(38, 50)  # p = 0.76: 0.6259 .. 0.8570 (Newcombe 1998's method 3)
    assert (round(iv.low / 100, 4), round(iv.high / 100, 4)) == (0.6259, 0.8570)
    assert not stats.wilson(0, 0).present


def test_proportion_evidence_uses_wilson_over_counted_examples():
    outcome = np.array([1, 1, 0, np.nan, 1, 0, np.nan, 1])  # NaN: skipped, not counted
    ev = stats.Evidence("proportion", stats.Sample(list(range(8)), {"s": outcome}), ("s",))
    assert ev.point() == pytest.approx(100 * 4 / 6)
    assert ev.interval() == stats.wilson(4, 6)


def test_t_interval_over_runs():
    values = [60.0, 64.0, 62.0]
    iv = stats.t_interval(values)
    half = student_t.ppf(0.975, 2) * np.std(values, ddof=1) / math.sqrt(3)
    assert (iv.low, iv.high) == pytest.approx((62 - half, 62 + half)) and iv.method == "t-over-3-runs"
    assert not stats.t_interval([60.0]).present
    assert stats.t_interval(values, what="seeds").method == "t-over-3-seeds"


def test_runs_evidence_one_run_is_that_runs_interval():
    s = stats.Sample(list(range(4)), {"x": [1, 0, 1, 1]})
    run = stats.Evidence("proportion", s, ("x",))
    assert stats.Evidence(parts=[run], combine="runs").interval() == run.interval()
    two = stats.Evidence(parts=[run, stats.Evidence("proportion", stats.Sample([0, 1], {"x": [0, 1]}), ("x",))],
                         combine="runs")
    assert two.point() == pytest.approx((75 + 50) / 2)
    # t with 1 degree of freedom spans [-96, 221]; a success rate's interval stops at its range
    assert (two.interval().low, two.interval().high, two.interval().method) == (0.0, 100.0, "t-over-2-runs-clipped")


def test_runs_interval_is_cut_only_for_bounded_statistics():
    near_top = [stats.Evidence("proportion", stats.Sample(list(range(100)), {"x": [1] * k + [0] * (100 - k)}), ("x",))
                for k in (99, 95)]
    iv = stats.Evidence(parts=near_top, combine="runs").interval()
    unclipped = stats.t_interval([99.0, 95.0])
    assert unclipped.high > 100 and iv.high == 100.0 and iv.low == pytest.approx(unclipped.low)
    queries = [stats.Evidence("mean", stats.Sample([0, 1], {"q": [q, q + 10]}), ("q",)) for q in (40.0, 80.0)]
    iv_q = stats.Evidence(parts=queries, combine="runs").interval()
    assert iv_q.method == "t-over-2-runs" and iv_q.low < 0  # a mean of queries has no range to cut to


def test_average_bootstraps_the_tasks_own_resamples():
    parts = []
    for seed, n in ((1, 200), (2, 300)):
        pred, gold = _sts_like(n, seed=seed)
        parts.append(stats.Evidence("spearman", stats.Sample(list(range(n)), {"p": pred, "g": gold}), ("p", "g")))
    avg = stats.Evidence(parts=parts, combine="average")
    assert avg.point() == pytest.approx(np.mean([p.point() for p in parts]))
    dist = avg.bootstrap()
    own = [p.bootstrap(seed=stats.part_seed(0, p.label, i)) for i, p in enumerate(parts)]
    assert np.allclose(dist, (own[0] + own[1]) / 2)
    assert stats.part_seed(0, "", 0) != stats.part_seed(0, "", 1)  # each part on a stream of its own
    iv = avg.interval()
    assert iv.method == "bootstrap-average-of-2(B=1000,seed=0)" and iv.low < avg.point() < iv.high
    # Averaging independent tasks narrows the interval compared with either task alone.
    assert iv.high - iv.low < min(p.interval().high - p.interval().low for p in parts)


def test_mcnemar_exact_and_mid_p_against_scipy():
    a = np.array([1] * 30 + [0] * 12 + [1] * 5 + [0] * 3)
    b = np.array([1] * 30 + [0] * 12 + [0] * 5 + [1] * 3)
    out = stats.mcnemar(a, b)
    assert (out["a_only"], out["b_only"]) == (5, 3)
    assert out["p_exact"] == pytest.approx(binomtest(3, 8, 0.5).pvalue)
    from scipy.stats import binom
    assert out["p_mid"] == pytest.approx(out["p_exact"] - binom.pmf(3, 8, 0.5))
    assert stats.mcnemar(a, a)["p_mid"] == 1.0


def test_paired_bootstrap_sees_a_shift_that_unpaired_intervals_miss():
    rng = np.random.default_rng(3)
    n = 400
    gold = rng.uniform(0, 5, n)
    base = gold / 5 + rng.normal(0, 0.3, n)
    better = base + 0.05 * (gold / 5 - base)  # B moves every prediction a little towards gold
    ids = list(range(n))
    a = stats.Evidence("spearman", stats.Sample(ids, {"p": base, "g": gold}), ("p", "g"))
    b = stats.Evidence("spearman", stats.Sample(ids, {"p": better, "g": gold}), ("p", "g"))
    d = stats.paired_bootstrap(a, b)
    assert d.estimate == pytest.approx(b.point() - a.point()) and d.estimate > 0
    assert d.significant and d.p < 0.01 and d.low > 0
    ia, ib = a.interval(), b.interval()
    assert ib.low < ia.high  # the single-model intervals overlap: pairing is what resolves it
    same = stats.paired_bootstrap(a, a)
    assert same.estimate == 0 and not same.significant and same.p == 1.0


def test_paired_binary_handles_examples_skipped_by_one_model():
    # A skipped examples 0-1 (NaN); B skipped example 2; examples 10-11 exist only in B's sample.
    a = stats.Sample(list(range(10)), {"s": [np.nan, np.nan, 1, 1, 1, 1, 1, 1, 0, 1]})
    b = stats.Sample(list(range(12)), {"s": [1, 0, np.nan, 0, 0, 0, 0, 1, 0, 1, 1, 1]})
    ea, eb = stats.Evidence("proportion", a, ("s",)), stats.Evidence("proportion", b, ("s",))
    d = stats.paired_bootstrap(ea, eb)
    assert d.n == 10 and d.extra["unmatched"] == 2
    assert d.extra["counted_by_both"] == 7 and d.extra["counted_by_one"] == 3
    assert (d.extra["mcnemar"]["a_only"], d.extra["mcnemar"]["b_only"]) == (4, 0)
    # The estimate is the difference of each model's own rate on the shared examples.
    assert d.estimate == pytest.approx(100 * (3 / 9) - 100 * (7 / 8))
    assert d.p == d.extra["mcnemar"]["p_mid"]


def test_few_discordant_examples_all_one_way_are_not_significant():
    # 4 of 200 examples succeed only against B: every resample keeps B >= A, so the percentile CI stays off
    # 0, but McNemar's mid-p over 4 discordant pairs is 0.0625; "significant" needs both.
    a = np.zeros(200)
    b = a.copy()
    b[:4] = 1
    d = stats.paired_bootstrap(stats.Evidence("proportion", stats.Sample(list(range(200)), {"s": a}), ("s",)),
                               stats.Evidence("proportion", stats.Sample(list(range(200)), {"s": b}), ("s",)))
    assert d.estimate == pytest.approx(2.0) and d.low > 0
    assert d.p == pytest.approx(0.0625) and not d.significant


def test_paired_mean_difference_and_runs():
    rng = np.random.default_rng(0)
    q = rng.poisson(80, 200).astype(float)
    a = stats.Evidence("mean", stats.Sample(list(range(200)), {"q": q}), ("q",), scale=1.0)
    b = stats.Evidence("mean", stats.Sample(list(range(200)), {"q": q + rng.normal(5, 3, 200)}), ("q",), scale=1.0)
    d = stats.paired_bootstrap(a, b)
    assert 4 < d.estimate < 6 and d.significant and d.p < 0.01
    runs_a = stats.Evidence(parts=[a, a], combine="runs")
    runs_b = stats.Evidence(parts=[b, b], combine="runs")
    dr = stats.paired_bootstrap(runs_a, runs_b)
    assert dr.estimate == pytest.approx(d.estimate) and dr.n == 400


def test_storage_round_trip():
    pred, gold = _sts_like(50)
    sample = stats.Sample(list(range(50)), {"p": pred, "g": gold}, np.array(["x"] * 20 + ["y"] * 30))
    ev = stats.Evidence("spearman_wmean", sample, ("p", "g"))
    avg = stats.Evidence(parts=[ev, stats.Evidence("pearson", sample, ("p", "g"), label="t")], combine="average")
    samples = {}
    d = stats.evidence_to_dict(avg, samples)
    assert len(samples) == 1  # one stored sample for both rows
    stored = {name: stats.sample_from_dict(stats.sample_to_dict(s)) for name, s in samples.values()}
    back = stats.evidence_from_dict(d, stored)
    assert back.point() == pytest.approx(avg.point(), abs=1e-4) and back.parts[1].label == "t"


def test_uniformity_interval_matches_a_bootstrap_of_the_pair_statistic():
    """The pseudo-value bootstrap (cheap, per sentence) has the spread of resampling sentences and
    recomputing uniformity over all pairs (the pair matrix per resample); resampling each sentence's
    mean kernel instead would be half as wide."""
    from bench.scoring.metrics import normalise, uniformity, uniformity_pseudo_values
    from bench.scoring.stats import Evidence, Sample

    rng = np.random.default_rng(3)
    x = normalise(rng.normal(size=(160, 6)) + np.repeat(rng.normal(size=(8, 6)), 20, axis=0))
    pseudo = uniformity_pseudo_values(x)
    ev = Evidence("log_mean", Sample(list(range(len(x))), {"pseudo": pseudo}), ("pseudo",), scale=1.0)
    assert ev.point() == pytest.approx(uniformity(x), abs=1e-9)

    brute = []
    for _ in range(400):
        idx = rng.integers(0, len(x), len(x))
        sq = np.clip(2.0 - 2.0 * x[idx] @ x[idx].T, 0.0, None)
        distinct = idx[:, None] != idx[None, :]  # pairs of different sentences, as the point estimate
        brute.append(np.log(np.exp(-2.0 * sq)[distinct].mean()))
    fast = ev.bootstrap(1000, 0)
    assert np.std(fast) == pytest.approx(np.std(brute), rel=0.2)
    lo, hi = ev.interval().low, ev.interval().high
    assert lo < uniformity(x) < hi
    h = (pseudo + pseudo.mean()) / 2  # each sentence's own mean kernel
    naive = Evidence("log_mean", Sample(list(range(len(x))), {"h": h}), ("h",), scale=1.0).bootstrap(1000, 0)
    assert np.std(naive) < 0.6 * np.std(brute)
    # paired by sentence: B - A is the difference of the two uniformities, its CI narrower than either
    y = normalise(x + 0.3 * rng.normal(size=x.shape))
    ev_b = Evidence("log_mean", Sample(list(range(len(y))), {"pseudo": uniformity_pseudo_values(y)}), ("pseudo",),
                    scale=1.0)
    diff = stats.paired_bootstrap(ev, ev_b)
    assert diff.estimate == pytest.approx(uniformity(y) - uniformity(x), abs=1e-9)
    assert diff.low < diff.estimate < diff.high and diff.high - diff.low < hi - lo


def test_display_decimals_show_the_interval_width():
    assert stats.display_decimals(-1.77, 1.63) == 2  # an ASR difference: 2 decimals as everywhere
    assert stats.display_decimals(-0.0052, -0.0011) == 4  # a uniformity difference is not "-0.00 [-0.00, -0.00]"
    assert f"{-0.0031:+.{stats.display_decimals(-0.0052, -0.0011)}f}" == "-0.0031"
    assert stats.display_decimals(None, 1.0) == stats.display_decimals(1.0, 1.0) == 2
    assert stats.display_decimals(0.0, 1e-12) == 6  # capped


def test_average_of_tasks_takes_its_p_from_its_own_bootstrap_not_pooled_mcnemar():
    """A small task with a large difference beside a large task with none: the unweighted average
    differs, and its p agrees with its CI; pooling McNemar's counts would drown the small task."""
    rng = np.random.default_rng(1)

    def task(n, lost, swapped, label):
        a = (rng.random(n) < 0.8).astype(float)
        b = a.copy()
        right, wrong = np.flatnonzero(a == 1), np.flatnonzero(a == 0)
        b[right[:lost + swapped]] = 0.0  # B loses these examples A gets right ...
        b[wrong[:swapped]] = 1.0  # ... and wins as many others back, in the large task: noise, no difference
        ids = list(range(n))
        return (stats.Evidence("proportion", stats.Sample(ids, {"c": a}), ("c",), label=label),
                stats.Evidence("proportion", stats.Sample(ids, {"c": b}), ("c",), label=label))

    small, large = task(400, 24, 0, "trec"), task(20000, 0, 300, "sst")
    avg_a = stats.Evidence(parts=[small[0], large[0]], combine="average")
    avg_b = stats.Evidence(parts=[small[1], large[1]], combine="average")
    d = stats.paired_bootstrap(avg_a, avg_b)
    assert d.estimate == pytest.approx(-3.0) and d.high < 0 and d.p < 0.05
    assert "pooled" not in d.method and d.extra["mcnemar"]["a_only"] == 324  # the counts stay on record
    assert d.extra["mcnemar"]["p_mid"] > 0.3  # what pooling would have said
    runs = stats.paired_bootstrap(stats.Evidence(parts=[small[0], small[0]], combine="runs"),
                                  stats.Evidence(parts=[small[1], small[1]], combine="runs"))
    assert runs.p == runs.extra["mcnemar"]["p_mid"] and "McNemar mid-p pooled" in runs.method
    # a mean of runs stored with its run-by-run bootstrap ("strata") pairs with one stored as "runs": the
    # same point and the same paired bootstrap
    mixed = stats.paired_bootstrap(stats.Evidence(parts=[small[0], small[0]], combine="runs"),
                                   stats.Evidence(parts=[small[1], small[1]], combine="strata"))
    assert (mixed.estimate, mixed.low, mixed.high, mixed.p) == (runs.estimate, runs.low, runs.high, runs.p)
    assert stats.paired_bootstrap(stats.Evidence(parts=[small[0], small[0]], combine="runs"),
                                  stats.Evidence(parts=[small[1], small[1]], combine="average")).estimate is None


# --------------------------------------------------------------------------- seeds, many tests ------

def test_holm_matches_the_step_down_rule():
    from bench.scoring.stats import holm

    # sorted p 0.01, 0.02, 0.04 of m = 3: 3 x 0.01, max(0.03, 2 x 0.02), max(0.04, 1 x 0.04)
    assert holm([0.04, 0.01, None, 0.02]) == pytest.approx([0.04, 0.03, None, 0.04], nan_ok=True)
    assert holm([0.5, 0.9]) == [1.0, 1.0]  # capped at 1
    assert holm([]) == []


def test_pooled_effect_is_the_seed_level_test():
    """The pooled effect is bench.scoring.seeds' test: three scattered seeds are judged on their own spread
    (a few d.f.), seeds that agree on the shared example noise (∞ d.f., reported as None)."""
    from bench.scoring.stats import pooled_test

    rng = np.random.default_rng(0)
    shared = rng.normal(0, 0.05, 1000)
    scattered = np.array([0.2, 1.0, 1.6])
    pooled = pooled_test(scattered, [e + shared for e in scattered])
    assert pooled.seeds == 3 and pooled.df is not None and 2.0 <= pooled.df < 10
    assert pooled.low < pooled.estimate < pooled.high and (pooled.low > 0) == (pooled.p < 0.05)
    agreeing = pooled_test([0.5, 0.5, 0.5], [0.5 + shared] * 3)
    assert agreeing.df is None and agreeing.se == pytest.approx(0.05, rel=0.1)
    assert pooled.one_sided_p(3.0, above=False) < 0.05 < pooled.one_sided_p(1.5, above=False)
    assert agreeing.equivalence_p(0.8) < 0.05 < agreeing.equivalence_p(0.4)


def test_minimum_detectable_effect_is_2_8_standard_errors():
    from bench.scoring.stats import minimum_detectable_effect

    assert minimum_detectable_effect(1.0) == pytest.approx(1.96 + 0.8416, abs=1e-3)
    assert minimum_detectable_effect(0.0) is None and minimum_detectable_effect(None) is None


def test_matthews_correlation_matches_its_definition():
    from bench.scoring.stats import mcc_binary

    pred, gold = np.array([1, 1, 0, 0, 1, 0]), np.array([1, 0, 0, 0, 1, 1])
    tp, tn, fp, fn = 2, 2, 1, 1
    expected = (tp * tn - fp * fn) / np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    assert float(mcc_binary(pred, gold)) == pytest.approx(expected)
    assert float(mcc_binary(np.ones(4), np.array([1, 0, 1, 0]))) == 0.0  # an empty margin


def test_detectable_effect_when_no_example_differs():
    """Two victims that agree on every example have a zero standard error; the MDE then comes from how many
    one-way flips McNemar's test needs (5 at 5%: mid-p 0.031, 4 give 0.0625) and how likely n examples give them."""
    from scipy.stats import binom

    from bench.scoring.stats import mcnemar, mcnemar_detectable_effect

    assert mcnemar([1] * 5, [0] * 5)["p_mid"] < 0.05 < mcnemar([1] * 4, [0] * 4)["p_mid"]
    mde = mcnemar_detectable_effect(200)
    assert binom.sf(4, 200, mde / 100) == pytest.approx(0.8, abs=1e-6)
    assert mcnemar_detectable_effect(400) < mde  # more examples detect less
    assert mcnemar_detectable_effect(4) is None and mcnemar_detectable_effect(0) is None  # 4 flips never reject

"""Uncertainty: 95% confidence intervals for single numbers and paired tests between two models.

numpy/scipy only (kernel). Every interval is two-sided at ``LEVEL`` and on the scale of the row's
``value`` (x100 for correlations and rates). The choices, each recorded in a row's ``ci_method``:

- statistic over per-example data (a correlation over STS pairs, a mean over attacked examples):
  percentile bootstrap, ``RESAMPLES`` resamples of the examples with replacement drawn by
  ``numpy.random.default_rng(seed)`` (``BOOTSTRAP_SEED`` unless told), the same index matrix for
  every statistic of one sample size, so a paired comparison resamples the same pairs for both models;
  with strata (STS subsets for the ``wmean`` aggregation) each stratum is resampled within itself;
- a proportion (accuracy, attack success rate): Wilson score interval (no resampling needed);
- an average over tasks: percentile bootstrap of the average of the tasks' own bootstrap statistics,
  resample b of every task averaged (tasks are independent samples, so resample b of one task may
  be paired with resample b of another);
- a mean over seeds or runs (k >= 2 values): Student-t interval, mean +- t(0.975, k-1) s / sqrt(k);
  it treats the runs as a sample of replications and is wide for small k (k = 2 multiplies s by 8.98);
- paired differences (B - A, same examples): percentile bootstrap of the difference with one shared
  index matrix; p-value from the bootstrap distribution shifted to the null (two-sided:
  (1 + #{|d*_b - d| >= |d|}) / (B + 1)); for per-example binary outcomes McNemar's test on the
  discordant pairs, exact binomial and mid-p (the mid-p is the reported p: Fagerland, Lydersen and
  Laake 2013 recommend it; the exact p is kept beside it).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

LEVEL = 0.95
RESAMPLES = 1000
BOOTSTRAP_SEED = 0
# What the interval and paired-test functions compute; a change to their results bumps it, so the
# bootstrap results kept beside the results (bench/results/stats_cache.py) are computed afresh.
# Version 3: each part of a combined row (a dataset of an average, a run of an attack) resamples on its own
# stream, and a paired rate over the examples both victims attacked masks the others in place instead of
# dropping them; version 2 drew every part from one stream, so two runs of 159 and 160 examples got nearly
# the same indices. Version 2: with ``common``, counted_by_one also counts the examples the restriction
# leaves out; version 1 reported 0 there.
METHODS_VERSION = 3
# The same for the pooled effect over training seeds (``pooled_test``) alone, so a change to it recomputes
# only the pooled entries: bench.scoring.seeds.TEST_VERSION, whose docstring keeps the history.
POOLED_VERSION = 4


@dataclass(frozen=True)
class Interval:
    low: float | None
    high: float | None
    method: str

    @property
    def present(self) -> bool:
        return self.low is not None and self.high is not None


NO_INTERVAL = Interval(None, None, "")


def _finite(x) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


# ---------------------------------------------------------------- resampling ---------------------

def part_seed(seed: int, label: str, position: int) -> int:
    """The resample stream of one part of a combined row (a dataset of an average, a run of an attack): its
    own, named by its label (else its position), and the same for every model that scored that part, so two
    models' (or two training seeds') resamples of the same examples draw the same examples."""
    name = f"{seed}:{label or position}".encode()
    return int.from_bytes(hashlib.blake2b(name, digest_size=8).digest(), "little")


def resample_indices(n: int, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
                     strata: np.ndarray | None = None) -> np.ndarray:
    """(resamples, n) indices drawn with replacement; with ``strata``, position i draws from i's stratum,
    so stratum sizes stay fixed and position i still belongs to stratum strata[i]."""
    rng = np.random.default_rng(seed)
    if strata is None:
        return rng.integers(0, n, size=(resamples, n))
    strata = np.asarray(strata)
    out = np.empty((resamples, n), dtype=np.int64)
    for s in np.unique(strata):
        members = np.flatnonzero(strata == s)
        out[:, members] = members[rng.integers(0, len(members), size=(resamples, len(members)))]
    return out


def _counts(idx: np.ndarray | None, n: int) -> np.ndarray:
    """(B, n) multiplicity of each example in each resample ((1, n) ones for the data itself)."""
    if idx is None:
        return np.ones((1, n))
    b = idx.shape[0]
    flat = (idx + n * np.arange(b)[:, None]).ravel()
    return np.bincount(flat, minlength=b * n).reshape(b, n).astype(np.float64)


def _weighted_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Pearson r of (x, y) with per-example weights w (B, n): a resample's r, its copies as weights."""
    total = w.sum(-1, keepdims=True)
    mx = (w * x).sum(-1, keepdims=True) / total
    my = (w * y).sum(-1, keepdims=True) / total
    dx, dy = x - mx, y - my
    den = np.sqrt((w * dx * dx).sum(-1) * (w * dy * dy).sum(-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 1e-300, (w * dx * dy).sum(-1) / np.where(den > 1e-300, den, 1.0), np.nan)


def _weighted_ranks(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Average ranks (ties averaged, as scipy's rankdata) of every example within each resample whose
    multiplicities are w (B, n): the rank of x_i among the resampled values, for all B at once."""
    order = np.argsort(x, kind="stable")
    xs = x[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])  # first sorted position of each tie group
    group = np.cumsum(np.r_[True, xs[1:] != xs[:-1]]) - 1
    ends = np.r_[starts[1:], len(xs)]
    cum = np.cumsum(w[:, order], axis=-1)
    below = np.where(starts > 0, cum[:, np.maximum(starts - 1, 0)], 0.0)
    within = cum[:, ends - 1] - below
    ranks_sorted = (below + (within + 1.0) / 2.0)[:, group]
    ranks = np.empty_like(ranks_sorted)
    ranks[:, order] = ranks_sorted
    return ranks


def pearson(x, y, idx: np.ndarray | None = None) -> np.ndarray:
    """Pearson r of the data (idx None) or of each resample (idx (B, n))."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return _squeeze(_weighted_pearson(x[None, :], y[None, :], _counts(idx, len(x))), idx)


def spearman(x, y, idx: np.ndarray | None = None) -> np.ndarray:
    """Spearman rho (Pearson r of average ranks) of the data or of each resample; computed from each
    resample's multiplicities, so equal to ranking every resample and far cheaper."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    w = _counts(idx, len(x))
    return _squeeze(_weighted_pearson(_weighted_ranks(x, w), _weighted_ranks(y, w), w), idx)


def _squeeze(values: np.ndarray, idx) -> np.ndarray:
    return values[0] if idx is None else values


def _gathered(fn):
    """A statistic of the gathered resample values (fn over the last axis)."""
    def apply(*cols_and_idx):
        *cols, idx = cols_and_idx
        cols = [np.asarray(c, dtype=np.float64) for c in cols]
        return fn(*(c if idx is None else c[idx] for c in cols))
    return apply


def nan_mean(v: np.ndarray) -> np.ndarray:
    """Mean over the last axis of the non-missing (non-NaN) values; NaN where none is present."""
    v = np.asarray(v, dtype=np.float64)
    present = ~np.isnan(v)
    count = present.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, np.where(present, v, 0.0).sum(-1) / np.maximum(count, 1), np.nan)


def log_mean(v: np.ndarray) -> np.ndarray:
    """log of ``nan_mean``; NaN where the mean is not positive (uniformity from its pseudo-values)."""
    m = nan_mean(v)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(m > 0, np.log(np.where(m > 0, m, 1.0)), np.nan)


def ratio_of_means(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """mean(num) / mean(den) over the last axis, both over the examples where both are present
    (a ratio estimator: one resample draws the same examples for both means)."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    both = ~np.isnan(num) & ~np.isnan(den)
    top, bottom = nan_mean(np.where(both, num, np.nan)), nan_mean(np.where(both, den, np.nan))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(bottom != 0, top / np.where(bottom != 0, bottom, 1.0), np.nan)


def f1_binary(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """F1 of the positive class (label 1) over the last axis, as sklearn's f1_score."""
    pred, gold = np.asarray(pred) == 1, np.asarray(gold) == 1
    tp = (pred & gold).sum(-1)
    den = pred.sum(-1) + gold.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, 2.0 * tp / np.maximum(den, 1), 0.0)


@dataclass(frozen=True)
class Statistic:
    """A statistic of per-example columns: ``fn(*columns, idx)`` gives the data's value (idx None) or
    one value per resample (idx: (B, n) indices)."""

    name: str
    columns: int  # how many columns it reads
    fn: Callable[..., np.ndarray]
    interval: str = "bootstrap"  # "bootstrap" or "wilson"
    bounds: tuple[float, float] | None = None  # the statistic's range before scaling (None: unbounded)


def _stratified(fn):
    """Weighted mean (weights = stratum sizes) of ``fn`` within strata: SentEval's 'wmean'. Stratified
    resamples keep each position in its stratum, so a stratum's resamples are its own positions."""
    def within(strata, *cols_and_idx):
        *cols, idx = cols_and_idx
        total, weight = 0.0, 0
        for s in np.unique(strata):
            members = np.flatnonzero(strata == s)
            local = None if idx is None else np.searchsorted(members, idx[:, members])
            total = total + len(members) * fn(*(np.asarray(c)[members] for c in cols), local)
            weight += len(members)
        return total / weight
    return within


def mcc_binary(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Matthews correlation of binary predictions over the last axis (GLUE's CoLA metric, as sklearn's
    matthews_corrcoef): 0 where a margin is empty."""
    pred, gold = np.asarray(pred) == 1, np.asarray(gold) == 1
    tp, tn = (pred & gold).sum(-1), (~pred & ~gold).sum(-1)
    fp, fn = (pred & ~gold).sum(-1), (~pred & gold).sum(-1)
    den = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn) * 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (tp * tn - fp * fn) / np.where(den > 0, den, 1.0), 0.0)


STATISTICS: dict[str, Statistic] = {s.name: s for s in (
    Statistic("spearman", 2, spearman, bounds=(-1.0, 1.0)),
    Statistic("pearson", 2, pearson, bounds=(-1.0, 1.0)),
    Statistic("spearman_wmean", 2, _stratified(spearman), bounds=(-1.0, 1.0)),
    Statistic("pearson_wmean", 2, _stratified(pearson), bounds=(-1.0, 1.0)),
    Statistic("mean", 1, _gathered(nan_mean)),
    Statistic("log_mean", 1, _gathered(log_mean)),
    Statistic("ratio_of_means", 2, _gathered(ratio_of_means)),
    # 0/1 outcomes, NaN = not counted
    Statistic("proportion", 1, _gathered(nan_mean), interval="wilson", bounds=(0.0, 1.0)),
    Statistic("f1", 2, _gathered(f1_binary), bounds=(0.0, 1.0)),
    Statistic("mcc", 2, _gathered(mcc_binary), bounds=(-1.0, 1.0)),
)}


# ---------------------------------------------------------------- evidence -----------------------

@dataclass
class Sample:
    """Per-example columns of one scored set: the unit a bootstrap resamples and a paired test matches.

    ``ids`` name the examples (pair index, attack-set index, uid) so two models' samples can be
    matched; ``columns`` are float arrays with NaN for "not counted" (e.g. a skipped attack);
    ``strata`` (optional) label each example's subset for stratified resampling."""

    ids: list
    columns: dict[str, np.ndarray]
    strata: np.ndarray | None = None

    def __post_init__(self):
        self.ids = [i if isinstance(i, (int, str)) else str(i) for i in self.ids]
        self.columns = {k: np.asarray(v, dtype=np.float64) for k, v in self.columns.items()}
        if self.strata is not None:
            self.strata = np.asarray(self.strata)
        sizes = {len(v) for v in self.columns.values()} | {len(self.ids)}
        if len(sizes) != 1:
            raise ValueError(f"sample columns and ids differ in length: {sorted(sizes)}")

    def __len__(self) -> int:
        return len(self.ids)

    def subset(self, positions: np.ndarray) -> "Sample":
        return Sample([self.ids[i] for i in positions], {k: v[positions] for k, v in self.columns.items()},
                      None if self.strata is None else self.strata[positions])


@dataclass
class Evidence:
    """What one row's interval (and a paired test) is computed from.

    Either a ``statistic`` of ``columns`` of a ``sample`` (scaled by ``scale``: 100 for correlations
    and proportions, so intervals sit on the row's x100 scale), or ``parts`` combined by ``combine``:
    ``"average"`` (an average over tasks: bootstrap of the parts' resamples averaged), ``"runs"``
    (a mean over runs or seeds: t-interval over the parts' values; a single part is that part) or
    ``"strata"`` (a mean over parts that are independent samples, such as attack runs: each part is
    resampled within itself on draws of its own, so the interval is over all the parts' examples)."""

    statistic: str = ""
    sample: Sample | None = None
    columns: tuple[str, ...] = ()
    scale: float = 100.0
    parts: list["Evidence"] = field(default_factory=list)
    combine: str = ""  # "" | "average" | "runs"
    label: str = ""  # names a part (its task or run), so two rows' parts pair up by name
    _memo: dict = field(default_factory=dict, repr=False, compare=False)  # (resamples, seed) -> bootstrap

    def __post_init__(self):
        if self.parts or self.combine:
            if self.combine not in ("average", "runs", "strata") or not self.parts:
                raise ValueError("combined evidence needs combine='average'|'runs'|'strata' and at least one part")
        else:
            stat = STATISTICS.get(self.statistic)
            if stat is None or self.sample is None or len(self.columns) != stat.columns:
                raise ValueError(f"evidence needs a known statistic ({sorted(STATISTICS)}), a sample and "
                                 f"{stat.columns if stat else 'its'} column(s); got {self.statistic!r}, {self.columns}")
            missing = [c for c in self.columns if c not in self.sample.columns]
            if missing:
                raise ValueError(f"sample has no column(s) {missing}")

    # -- point and bootstrap values --
    def _apply(self, sample: Sample, idx: np.ndarray | None) -> np.ndarray:
        stat = STATISTICS[self.statistic]
        cols = [sample.columns[c] for c in self.columns]
        if self.statistic.endswith("_wmean"):
            return self.scale * stat.fn(sample.strata, *cols, idx)
        return self.scale * stat.fn(*cols, idx)

    def point(self) -> float | None:
        if self.combine:
            values = [p.point() for p in self.parts]
            return None if any(v is None for v in values) else float(np.mean(values))
        return _finite(self._apply(self.sample, None))

    def bootstrap(self, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> np.ndarray:
        """(resamples,) bootstrap values of the statistic (NaN where a resample leaves it undefined)."""
        if (resamples, seed) not in self._memo:
            if self.combine:  # each part on its own stream (``part_seed``)
                values = np.mean([p.bootstrap(resamples, part_seed(seed, p.label, i))
                                  for i, p in enumerate(self.parts)], axis=0)
            else:
                idx = resample_indices(len(self.sample), resamples, seed, self.sample.strata)
                values = np.asarray(self._apply(self.sample, idx), dtype=np.float64)
            self._memo[(resamples, seed)] = values
        return self._memo[(resamples, seed)]

    def bounds(self) -> tuple[float, float] | None:
        """The row's feasible range on its own scale (a rate's 0-100), or None when unbounded."""
        if self.combine:
            ranges = {p.bounds() for p in self.parts}
            return ranges.pop() if len(ranges) == 1 else None
        b = STATISTICS[self.statistic].bounds
        return None if b is None else (self.scale * b[0], self.scale * b[1])

    # -- the row's interval --
    def interval(self, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED, level: float = LEVEL) -> Interval:
        if self.combine == "runs":
            if len(self.parts) == 1:
                return self.parts[0].interval(resamples, seed, level)
            values = [p.point() for p in self.parts]
            if any(v is None for v in values):
                return NO_INTERVAL
            return t_interval(values, level, what="runs", bounds=self.bounds())
        if self.combine in ("average", "strata"):
            dist = self.bootstrap(resamples, seed)
            kind = "average" if self.combine == "average" else "stratified-by-part"
            return percentile_interval(dist, level, f"bootstrap-{kind}-of-{len(self.parts)}"
                                                    f"(B={resamples},seed={seed})")
        stat = STATISTICS[self.statistic]
        if stat.interval == "wilson":
            v = self.sample.columns[self.columns[0]]
            v = v[~np.isnan(v)]
            return wilson(int(round(float(v.sum()))), len(v), level, scale=self.scale)
        strat = "-stratified" if self.statistic.endswith("_wmean") else ""
        return percentile_interval(self.bootstrap(resamples, seed), level,
                                   f"bootstrap{strat}(B={resamples},seed={seed})")


# ---------------------------------------------------------------- intervals ----------------------

def percentile_interval(dist: np.ndarray, level: float = LEVEL, method: str = "bootstrap") -> Interval:
    """The central ``level`` range of a bootstrap distribution; NaN resamples (undefined statistic) dropped.
    No interval when more than half the resamples are undefined."""
    dist = np.asarray(dist, dtype=np.float64)
    ok = dist[np.isfinite(dist)]
    if len(ok) < max(2, len(dist) // 2):
        return NO_INTERVAL
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(ok, [alpha, 1.0 - alpha])
    return Interval(float(low), float(high), method)


def wilson(successes: int, n: int, level: float = LEVEL, scale: float = 100.0) -> Interval:
    """Wilson score interval for successes / n (Wilson 1927); none for n = 0."""
    from scipy.stats import norm

    if n <= 0:
        return NO_INTERVAL
    if not 0 <= successes <= n:
        raise ValueError(f"successes {successes} outside 0..{n}")
    z = float(norm.ppf(0.5 + level / 2.0))
    p = successes / n
    den = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    low = 0.0 if successes == 0 else max(0.0, centre - half)  # exact at the edges (no rounding past them)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(scale * low, scale * high, "wilson")


def t_interval(values, level: float = LEVEL, what: str = "runs",
               bounds: tuple[float, float] | None = None) -> Interval:
    """Student-t interval of the mean of k >= 2 values (runs or seeds); none for fewer. With ``bounds``
    (a rate's 0-100) it is cut to the feasible range: with 2 runs t has 1 degree of freedom
    (t = 12.7), so an interval around a 97% success rate would otherwise reach past 100."""
    from scipy.stats import t

    vals = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    k = len(vals)
    if k < 2:
        return NO_INTERVAL
    half = float(t.ppf(0.5 + level / 2.0, k - 1)) * float(vals.std(ddof=1)) / math.sqrt(k)
    mean = float(vals.mean())
    low, high = mean - half, mean + half
    if bounds is not None and (low < bounds[0] or high > bounds[1]):
        return Interval(max(low, bounds[0]), min(high, bounds[1]), f"t-over-{k}-{what}-clipped")
    return Interval(low, high, f"t-over-{k}-{what}")


def display_decimals(low: float | None, high: float | None, minimum: int = 2, maximum: int = 6) -> int:
    """Decimals that show an interval's width to two significant digits (at least ``minimum``): an
    alignment difference of 0.004 [0.003, 0.005] must not print as 0.00 [0.00, 0.00]."""
    if low is None or high is None or not (high > low):
        return minimum
    return int(min(maximum, max(minimum, 1 - math.floor(math.log10(high - low)))))


def format_number(x: float | None, decimals: int = 2, signed: bool = False) -> str:
    """A value, CI bound or difference as tables, cards and `bench compare` print it ('–' when missing)."""
    if x is None:
        return "–"
    return f"{x:+.{decimals}f}" if signed else f"{x:.{decimals}f}"


def format_p(p: float | None) -> str:
    return "–" if p is None else ("<0.001" if p < 0.001 else f"{p:.3f}")


# ---------------------------------------------------------------- paired tests -------------------

@dataclass(frozen=True)
class Difference:
    """B - A on the same examples: the estimate, its interval, a p-value and how they were made."""

    estimate: float | None
    low: float | None
    high: float | None
    p: float | None
    method: str
    n: int  # matched examples (pairs)
    extra: dict = field(default_factory=dict)

    @property
    def significant(self) -> bool:
        """The interval excludes 0 and, where there is a p, the test rejects at 1 - LEVEL too (with a few
        discordant examples all one way the percentile bootstrap stays off 0 while McNemar's test cannot reject)."""
        excludes_zero = self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)
        return excludes_zero and (self.p is None or self.p < 1 - LEVEL)


def bootstrap_p(dist: np.ndarray, estimate: float) -> float | None:
    """Two-sided p of 'no difference' from a bootstrap distribution of the difference, shifted to the
    null: (1 + #{|d*_b - d| >= |d|}) / (B + 1)."""
    ok = np.asarray(dist, dtype=np.float64)
    ok = ok[np.isfinite(ok)]
    if not len(ok) or estimate is None:
        return None
    return float((1 + np.sum(np.abs(ok - estimate) >= abs(estimate) - 1e-12)) / (len(ok) + 1))


def mcnemar(a, b) -> dict:
    """McNemar's test of paired binary outcomes (1/0 each, same examples): the discordant counts,
    the exact two-sided binomial p and the mid-p."""
    from scipy.stats import binom

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    only_a = int(np.sum((a == 1) & (b == 0)))
    only_b = int(np.sum((a == 0) & (b == 1)))
    n = only_a + only_b
    if n == 0:
        return {"a_only": 0, "b_only": 0, "p_exact": 1.0, "p_mid": 1.0}
    k = min(only_a, only_b)
    exact = min(1.0, 2.0 * float(binom.cdf(k, n, 0.5)))
    mid = min(1.0, 2.0 * float(binom.cdf(k, n, 0.5)) - float(binom.pmf(k, n, 0.5)))
    return {"a_only": only_a, "b_only": only_b, "p_exact": exact, "p_mid": mid}


def paired_bootstrap(a: Evidence, b: Evidence, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
                     level: float = LEVEL, common: bool = False) -> Difference:
    """B - A for two evidences of the same statistic over the same examples (matched by id; examples
    in only one are left out and counted). For proportions the p-value is McNemar's mid-p on the
    examples both count (non-missing in both), the interval the paired bootstrap's.

    Combined evidence (an average over tasks, a mean over runs) pairs part with part (by label, else
    in order); the difference of the averages is bootstrapped from each part's own paired resamples,
    and McNemar's counts are pooled over the parts.

    ``common``: for proportions, keep only the examples both count (both victims classified them
    correctly, so both were attacked), so that the two rates, their difference's interval and McNemar's
    test all rest on the same examples."""
    diff, _ = _paired(a, b, resamples, seed, level, common)
    return diff


def paired_distribution(a: Evidence, b: Evidence, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
                        level: float = LEVEL, common: bool = False) -> tuple[Difference, np.ndarray | None]:
    """``paired_bootstrap`` and the bootstrap distribution of B - A behind it (None when there is none)."""
    return _paired(a, b, resamples, seed, level, common)


def _counted_by_both(sa: Sample, sb: Sample, column: str) -> tuple[Sample, Sample]:
    """Both samples with ``column`` missing (NaN) wherever either side does not count the example. The
    examples stay in place, so every training seed's resamples of one attack set draw the same examples
    whichever of them its two victims attacked."""
    neither = np.isnan(sa.columns[column]) | np.isnan(sb.columns[column])

    def masked(s: Sample) -> Sample:
        return Sample(s.ids, {**s.columns, column: np.where(neither, np.nan, s.columns[column])}, s.strata)
    return masked(sa), masked(sb)


def _paired(a: Evidence, b: Evidence, resamples: int, seed: int, level: float,
            common: bool = False) -> tuple[Difference, np.ndarray | None]:
    if a.combine or b.combine:
        return _paired_parts(a, b, resamples, seed, level, common)
    if (a.statistic, a.columns) != (b.statistic, b.columns):
        raise ValueError(f"cannot pair {a.statistic}{a.columns} with {b.statistic}{b.columns}")
    restrict = common and STATISTICS[a.statistic].interval == "wilson"
    one_sided = 0  # examples one side counts and the other does not, left out by ``common``
    if a.sample.ids == b.sample.ids and not restrict:  # the same examples in the same order: reuse their bootstraps
        sa, sb, dropped, ea, eb = a.sample, b.sample, 0, a, b
    else:
        sa, sb, dropped = match(a.sample, b.sample)
        if restrict:
            col = a.columns[0]
            one_sided = int(np.sum(np.isnan(sa.columns[col]) != np.isnan(sb.columns[col])))
            sa, sb = _counted_by_both(sa, sb, col)
        ea, eb = Evidence(a.statistic, sa, a.columns, a.scale), Evidence(b.statistic, sb, b.columns, b.scale)
    counted = int(np.sum(~np.isnan(sa.columns[a.columns[0]]))) if restrict else len(sa)
    if not counted:
        return Difference(None, None, None, None, "no shared examples", 0, {"unmatched": dropped}), None
    pa, pb = ea.point(), eb.point()
    estimate = None if pa is None or pb is None else pb - pa
    dist = eb.bootstrap(resamples, seed) - ea.bootstrap(resamples, seed)
    ci = percentile_interval(dist, level)
    extra = {"unmatched": dropped, "a": pa, "b": pb, **({"common": True} if restrict else {})}
    strat = "-stratified" if a.statistic.endswith("_wmean") else ""
    method = f"paired-bootstrap{strat}(B={resamples},seed={seed})" + ("; examples counted by both" if restrict else "")
    p = bootstrap_p(dist, estimate) if estimate is not None else None
    if STATISTICS[a.statistic].interval == "wilson":
        va, vb = sa.columns[a.columns[0]], sb.columns[b.columns[0]]
        both = ~np.isnan(va) & ~np.isnan(vb)
        test = mcnemar(va[both], vb[both])
        extra.update(mcnemar=test, counted_by_both=int(both.sum()),
                     counted_by_one=int(np.sum(np.isnan(va) != np.isnan(vb))) + one_sided)
        p = test["p_mid"]
        method += "; McNemar mid-p on examples counted by both"
    return Difference(estimate, ci.low, ci.high, p, method, counted, extra), dist


def _pair_parts(a: Evidence, b: Evidence) -> list[tuple[Evidence, Evidence]] | None:
    if all(p.label for p in a.parts + b.parts):
        where_b = {p.label: p for p in b.parts}
        if {p.label for p in a.parts} != set(where_b):
            return None
        return [(p, where_b[p.label]) for p in a.parts]
    return list(zip(a.parts, b.parts)) if len(a.parts) == len(b.parts) else None


# Both a mean over parts that are independent samples (attack runs): one point and one paired bootstrap,
# differing only in a row's own interval, so a cell stored under either pairs with a cell under the other.
MEANS_OF_RUNS = ("runs", "strata")


def _paired_parts(a: Evidence, b: Evidence, resamples: int, seed: int, level: float, common: bool = False):
    alike = a.combine == b.combine or {a.combine, b.combine} <= set(MEANS_OF_RUNS)
    pairs = _pair_parts(a, b) if alike else None
    if pairs is None:
        return Difference(None, None, None, None, "the two rows combine different parts", 0), None
    leaves = [_paired(pa, pb, resamples, part_seed(seed, pa.label, i), level, common)
              for i, (pa, pb) in enumerate(pairs)]
    if any(d.estimate is None or dist is None for d, dist in leaves):
        return Difference(None, None, None, None, "a part has no shared examples", 0), None
    dist = np.mean([dist for _, dist in leaves], axis=0)
    diffs = [d for d, _ in leaves]
    estimate = float(np.mean([d.estimate for d in diffs]))
    ci = percentile_interval(dist, level)
    extra = {"parts": len(diffs), "unmatched": sum(d.extra.get("unmatched", 0) for d in diffs),
             **({"common": True} if any(d.extra.get("common") for d in diffs) else {})}
    if all(d.extra.get("a") is not None and d.extra.get("b") is not None for d in diffs):  # the two values the difference is between
        extra.update(a=float(np.mean([d.extra["a"] for d in diffs])), b=float(np.mean([d.extra["b"] for d in diffs])))
    method = f"paired-bootstrap-{a.combine}-of-{len(diffs)}(B={resamples},seed={seed})"
    p = bootstrap_p(dist, estimate)
    tests = [d.extra["mcnemar"] for d in diffs if "mcnemar" in d.extra]
    if tests and len(tests) == len(diffs):
        a_only, b_only = sum(t["a_only"] for t in tests), sum(t["b_only"] for t in tests)
        pooled = mcnemar([1] * a_only + [0] * b_only, [0] * a_only + [1] * b_only)
        extra.update(mcnemar=pooled, counted_by_both=sum(d.extra["counted_by_both"] for d in diffs),
                     counted_by_one=sum(d.extra["counted_by_one"] for d in diffs))
        # Pooling weighs each example alike: right for runs (replications of one design), wrong for an
        # unweighted average of tasks (500 TREC questions would drown among 38k others), whose p is the
        # bootstrap's, as its CI is.
        if a.combine in MEANS_OF_RUNS:
            p = pooled["p_mid"]
            method += "; McNemar mid-p pooled over parts"
    return Difference(estimate, ci.low, ci.high, p, method, sum(d.n for d in diffs), extra), dist


# ---------------------------------------------------------------- training seeds, many tests ------

@dataclass(frozen=True)
class Pooled:
    """An effect over training seeds: the mean of the per-seed differences, its standard error with a seed part
    and a shared-example part, and the one t test behind both its interval and its p (``pooled_test``)."""

    estimate: float | None
    low: float | None
    high: float | None
    p: float | None
    se: float | None
    seeds: int
    spread: float | None  # sample SD of the per-seed differences (None for one seed)
    method: str
    df: float | None = None  # degrees of freedom of the t reference (None: ∞, the normal)
    seed_part: float | None = None  # the seeds' share of se² (A/k)
    example_part: float | None = None  # the shared examples' share of se² (V)
    correlation: float | None = None  # the example noise's cross-seed correlation (bench.scoring.seeds)
    seed_ratio: float | None = None  # the seeds' own variance over the example variance

    def one_sided_p(self, bound: float, above: bool) -> float | None:
        """p of H0 'the effect is at or beyond ``bound``' against H1 'it lies above (``above``) or below it',
        on the same t: the exclusion test and the two halves of TOST."""
        from scipy.stats import norm, t

        if self.estimate is None or self.se is None:
            return None
        if self.se <= 0:
            return 0.0 if (self.estimate > bound if above else self.estimate < bound) else 1.0
        z = (self.estimate - bound) / self.se * (1 if above else -1)
        return float(norm.sf(z) if self.df is None else t.sf(z, self.df))

    def equivalence_p(self, margin: float) -> float | None:
        """TOST p that the effect lies inside ±margin: the larger of its two one-sided p."""
        low, high = self.one_sided_p(-margin, above=True), self.one_sided_p(margin, above=False)
        return None if low is None or high is None else max(low, high)


def pooled_test(estimates, dists, level: float = LEVEL) -> Pooled:
    """The pooled difference over training seeds and its one test (``bench.scoring.seeds``): ``estimates``
    the per-seed differences, ``dists`` their example bootstraps, drawn on the same resamples of the shared
    examples. d.f. None stands for ∞ (the normal)."""
    from bench.scoring.seeds import seed_level_test

    k = len(estimates)
    if k == 0:
        return Pooled(None, None, None, None, None, 0, None, "no seeds")
    r = seed_level_test(estimates, np.stack([np.asarray(d, dtype=np.float64) for d in dists]), level)
    df = None if r.df is None or math.isinf(r.df) else r.df
    return Pooled(r.estimate, r.low, r.high, r.p, r.se, k, r.spread, r.method, df, r.seed_part, r.example_part,
                  r.correlation, r.seed_ratio)


def holm(pvalues) -> list[float | None]:
    """Holm's step-down adjusted p-values (family-wise error rate; Holm 1979); None stays None and is not
    counted in the family."""
    present = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(present)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def minimum_detectable_effect(se: float | None, level: float = LEVEL, power: float = 0.8,
                              df: float | None = None) -> float | None:
    """The smallest true difference a two-sided test at 1 - ``level`` detects with probability ``power``,
    given the estimate's standard error: (z(1 - alpha/2) + z(power)) x SE, or t's quantiles with ``df``."""
    from scipy.stats import norm, t

    if se is None or not math.isfinite(se) or se <= 0:  # no example differs: nothing to size a test by
        return None
    if df is None:
        return float((norm.ppf(0.5 + level / 2.0) + norm.ppf(power)) * se)
    return float((t.ppf(0.5 + level / 2.0, df) + t.ppf(power, df)) * se)


def mcnemar_detectable_effect(n: int, level: float = LEVEL, power: float = 0.8, scale: float = 100.0) -> float | None:
    """For a paired rate over ``n`` examples on which the two sides never disagree (no discordant pair, so
    no standard error to size a test by): the smallest share of examples that, flipping one way, makes
    McNemar's mid-p test reject at 1 - ``level`` with probability ``power``, on the row's scale."""
    from scipy.stats import binom

    if n < 1:
        return None
    alpha = 1.0 - level
    needed = next(d for d in range(1, 64) if mcnemar([1] * d, [0] * d)["p_mid"] < alpha)
    if binom.sf(needed - 1, n, 1.0) < power:
        return None
    low, high = 0.0, 1.0
    for _ in range(60):  # bisection on the flip rate: P(at least `needed` flips of n) >= power
        mid = (low + high) / 2.0
        low, high = (low, mid) if binom.sf(needed - 1, n, mid) >= power else (mid, high)
    return float(scale * high)


def match(a: Sample, b: Sample) -> tuple[Sample, Sample, int]:
    """The examples both samples hold, in A's order, and how many were in only one."""
    where_b = {i: k for k, i in enumerate(b.ids)}
    pos_a = [k for k, i in enumerate(a.ids) if i in where_b]
    pos_b = [where_b[a.ids[k]] for k in pos_a]
    dropped = (len(a) - len(pos_a)) + (len(b) - len(pos_b))
    return a.subset(np.asarray(pos_a, dtype=np.int64)), b.subset(np.asarray(pos_b, dtype=np.int64)), dropped


# ---------------------------------------------------------------- storage form -------------------

def _num(x: float) -> float | None:
    return None if not math.isfinite(x) else float(np.round(x, 6))


def sample_to_dict(s: Sample) -> dict:
    out = {"ids": list(s.ids), "columns": {k: [_num(x) for x in v.tolist()] for k, v in s.columns.items()}}
    if s.strata is not None:
        out["strata"] = [x if isinstance(x, str) else int(x) for x in s.strata.tolist()]
    return out


def sample_from_dict(d: dict) -> Sample:
    return Sample(d["ids"], {k: np.array([np.nan if x is None else x for x in v], dtype=np.float64)
                             for k, v in d["columns"].items()},
                  None if d.get("strata") is None else np.asarray(d["strata"]))


EVIDENCE_FORMAT = "bench-evidence/1"


def evidence_to_dict(ev: Evidence, samples: dict[int, tuple[str, Sample]]) -> dict:
    """Storage form of an evidence; samples are stored once per cell (``samples``: id -> (name, sample)),
    since several rows (Spearman and Pearson, say) read the same one."""
    if ev.combine:
        out = {"combine": ev.combine, "parts": [evidence_to_dict(p, samples) for p in ev.parts]}
    else:
        name = samples.setdefault(id(ev.sample), (f"s{len(samples)}", ev.sample))[0]
        out = {"statistic": ev.statistic, "sample": name, "columns": list(ev.columns), "scale": ev.scale}
    if ev.label:
        out["label"] = ev.label
    return out


def evidence_from_dict(d: dict, samples: dict[str, Sample], resolve=None) -> Evidence | None:
    """The evidence again. A part may be ``{"ref": {"cell": <cell path relative to the results dir>,
    "key": <row key>}}`` (an average's task, stored in that task's cell): ``resolve(ref)`` loads it
    (None if it cannot, and then the whole evidence is None)."""
    if "ref" in d:
        found = resolve(d["ref"]) if resolve else None
        if found is not None and d.get("label"):
            found = replace(found, label=d["label"])  # a copy: the resolved evidence may be shared
        return found
    if d.get("combine"):
        parts = [evidence_from_dict(p, samples, resolve) for p in d["parts"]]
        if any(p is None for p in parts):
            return None
        return Evidence(parts=parts, combine=d["combine"], label=d.get("label", ""))
    return Evidence(d["statistic"], samples[d["sample"]], tuple(d["columns"]), d.get("scale", 100.0),
                    label=d.get("label", ""))


# ---------------------------------------------------------------- how far apart two models are ----

def outcome_agreement(a, b, ids=None, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> dict:
    """Paired attack outcomes of two victims on the same examples (1 = attack succeeded, 0 = failed,
    NaN = not attacked, e.g. skipped as already misclassified): over the examples both attacked, the
    table (both succeed, both fail, only A, only B), the share on which they agree, McNemar's exact and
    mid-p, and the paired difference in success rate B - A (x100) with its bootstrap CI."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    both = ~np.isnan(a) & ~np.isnan(b)
    x, y = a[both], b[both]
    n = int(both.sum())
    table = {"both_succeed": int(np.sum((x == 1) & (y == 1))), "both_fail": int(np.sum((x == 0) & (y == 0))),
             "a_only": int(np.sum((x == 1) & (y == 0))), "b_only": int(np.sum((x == 0) & (y == 1)))}
    out = {"attacked_by_both": n, "attacked_by_one": int(np.sum(np.isnan(a) != np.isnan(b))),
           "attacked_by_neither": int(np.sum(np.isnan(a) & np.isnan(b))), **table,
           "agreement": (table["both_succeed"] + table["both_fail"]) / n if n else None}
    test = mcnemar(x, y)
    out.update(mcnemar_p_exact=test["p_exact"], mcnemar_p_mid=test["p_mid"])
    if n:
        names = list(np.asarray(ids if ids is not None else range(len(a)), dtype=object)[both])
        diff = paired_bootstrap(Evidence("proportion", Sample(names, {"s": x}), ("s",)),
                                Evidence("proportion", Sample(names, {"s": y}), ("s",)), resamples, seed)
        out.update(asr_a=diff.extra["a"], asr_b=diff.extra["b"], asr_difference=diff.estimate,
                   asr_ci_low=diff.low, asr_ci_high=diff.high)
    return out


def weight_distance_ratio(theta_a: dict, theta_b: dict, theta_0: dict, group: Callable[[str], str] = lambda n: n) -> dict:
    """How far apart two models trained from one base are, relative to how far A moved from it:
    ||theta_B - theta_A|| / ||theta_A - theta_0|| (Frobenius over the tensors of a group), per group of
    tensors (``group(name)``, e.g. the layer) and over all. Tensors missing from one of the three or
    of another shape are left out and named."""
    shared = sorted(n for n in theta_a if n in theta_b and n in theta_0
                    and np.shape(theta_a[n]) == np.shape(theta_b[n]) == np.shape(theta_0[n]))
    sums: dict[str, np.ndarray] = {}
    for name in shared:
        a, b, o = (np.asarray(t[name], dtype=np.float64) for t in (theta_a, theta_b, theta_0))
        part = np.array([np.sum((b - a) ** 2), np.sum((a - o) ** 2), np.sum((b - o) ** 2)])
        sums[group(name)] = sums.get(group(name), np.zeros(3)) + part

    def distances(sq: np.ndarray) -> dict:
        between, a_moved, b_moved = np.sqrt(sq)
        return {"between": float(between), "a_moved": float(a_moved), "b_moved": float(b_moved),
                "ratio": float(between / a_moved) if a_moved > 0 else None}

    total = np.sum(list(sums.values()), axis=0) if sums else np.zeros(3)
    return {"overall": {**distances(total), "tensors": len(shared)},
            "groups": {g: distances(sq) for g, sq in sums.items()},
            "left_out": sorted((set(theta_a) | set(theta_b) | set(theta_0)) - set(shared))}

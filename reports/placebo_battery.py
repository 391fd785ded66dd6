"""The placebo battery: the ledger's test on every arrangement of the placebos' real seeds, beside the same
battery on simulated seeds. Written by `bench report` as placebo-battery.csv and quoted by docs/statistics.md.

One placebo is one draw: a test that errs 5% of the time fails one placebo in twenty. The battery asks the
question a single placebo cannot: over every way of splitting the placebos' training runs (one recipe, one
base build) into two arms of k paired seeds, how often does the test call a direction? Each arrangement is a
valid null comparison, but they share seeds, so their rate varies with the particular seeds drawn far more
than a count of independent tests would. The simulated rows give that variation: ledgers of as many seeds,
drawn with the seeds' spread, the example noise and its cross-model correlation measured on the real ones,
each run through the same battery: their 5th to 95th percentiles are where a calibrated test's rate on
seeds like these falls nine times in ten.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np

from bench.results.store import records_csv
from bench.scoring.seeds import exchangeable_factor, pooled_arrays

NAME = "placebo-battery.csv"
COLUMNS = ("what", "claim", "k", "models", "arrangements", "alpha", "directional", "p_declared",
           "declared_rank", "seed_variance", "example_variance", "correlation", "datasets", "low", "median", "high")
ALPHA = 0.05
SIM_DATASETS = 200  # simulated seed sets; their 5th-95th percentile is the range a calibrated test lands in
SIM_ARRANGEMENTS = 2000  # arrangements drawn per simulated set (all of them for the real seeds)
SIM_RESAMPLES = 200
CHUNK = 3000  # arrangements tested at once


def arrangements(models: int, k: int) -> np.ndarray:
    """Every way to take 2k of ``models`` seeds and pair them into k (baseline, method) pairs, up to swapping
    the two arms as a whole (which flips the estimate's sign, not its p): (n, k, 2) indices."""
    out = []
    for chosen in itertools.combinations(range(models), 2 * k):
        for pairs in _pairings(list(chosen)):
            for flips in itertools.product((False, True), repeat=k - 1):
                out.append([pairs[0]] + [(b, a) if f else (a, b) for (a, b), f in zip(pairs[1:], flips)])
    return np.asarray(out, dtype=np.int64).reshape(-1, k, 2)


def _pairings(items: list) -> list[list[tuple]]:
    if not items:
        return [[]]
    first, rest = items[0], items[1:]
    return [[(first, other)] + more for i, other in enumerate(rest) for more in _pairings(rest[:i] + rest[i + 1:])]


def battery_pvalues(points: np.ndarray, boots: np.ndarray, arranged: np.ndarray) -> np.ndarray:
    """The primary test's p for each arrangement: per pair the difference method − baseline of the models'
    points, and of their bootstraps on shared draws (as ``paired_distribution`` forms it for models scored on
    the same examples); ``points`` (m,), ``boots`` (m, B), ``arranged`` (n, k, 2)."""
    out = []
    for start in range(0, len(arranged), CHUNK):
        part = arranged[start:start + CHUNK]
        base, method = part[:, :, 0], part[:, :, 1]
        out.append(pooled_arrays(points[method] - points[base], boots[method] - boots[base])["p"])
    return np.concatenate(out) if out else np.empty(0)


def noise_model(points: np.ndarray, boots: np.ndarray) -> tuple[float, float, float]:
    """(seed variance, example variance, cross-model correlation of the example noise) of one recipe's seeds:
    the example parts from their bootstraps on shared draws, the seeds' part what is left of the points'
    spread once the unshared example noise is taken out (a moment estimate, floored at 0)."""
    example = float(np.mean(np.var(boots, axis=1, ddof=1)))
    corr = np.corrcoef(boots)
    rho = float(np.mean(corr[~np.eye(len(points), dtype=bool)]))
    seeds = max(float(np.var(points, ddof=1)) - example * (1.0 - rho), 0.0)
    return seeds, example, rho


def simulated_rates(models: int, k: int, seeds: float, example: float, rho: float, seed: int = 0,
                    datasets: int = SIM_DATASETS) -> np.ndarray:
    """The battery's directional rate on ``datasets`` simulated sets of ``models`` seeds of one recipe (true
    difference 0) with the given noise model, each on SIM_ARRANGEMENTS arrangements drawn at random."""
    rng = np.random.default_rng(seed)
    every = arrangements(models, k)
    chol = exchangeable_factor(models, rho, example)
    rates = []
    for _ in range(datasets):
        points = rng.normal(0.0, math.sqrt(seeds), models) + chol @ rng.normal(size=models)
        boots = points[:, None] + chol @ rng.normal(size=(models, SIM_RESAMPLES))
        drawn = every[rng.choice(len(every), min(SIM_ARRANGEMENTS, len(every)), replace=False)]
        rates.append(float(np.mean(battery_pvalues(points, boots, drawn) < ALPHA)))
    return np.asarray(rates)


def rows_for(claim_id: str, k: int, points: np.ndarray, boots: np.ndarray, declared_p: float | None,
             seed: int = 0) -> list[dict]:
    """The real battery's row and its simulated range for one placebo's k over the seeds ``points``/``boots``."""
    p = battery_pvalues(points, boots, arrangements(len(points), k))
    real = {"what": "real", "claim": claim_id, "k": k, "models": len(points), "arrangements": len(p),
            "alpha": ALPHA, "directional": float(np.mean(p < ALPHA))}
    if declared_p is not None:
        real.update(p_declared=declared_p, declared_rank=float(np.mean(p <= declared_p)))
    noise = noise_model(points, boots)
    rates = simulated_rates(len(points), k, *noise, seed=seed)
    low, median, high = (float(x) for x in np.quantile(rates, (0.05, 0.5, 0.95)))
    sim = {"what": "simulated", "claim": claim_id, "k": k, "models": len(points), "arrangements": SIM_ARRANGEMENTS,
           "alpha": ALPHA, **dict(zip(("seed_variance", "example_variance", "correlation"), noise)),
           "datasets": len(rates), "low": low, "median": median, "high": high}
    return [real, sim]


def simulate(results_dir: Path, book, rows, store=None) -> list[dict]:
    """The battery of every placebo over the seeds of all the placebos that share its row (suite, tasks,
    metric), at its own k; the declared arrangement's p from its ledger line."""
    from reports.claims import placebo_row, placebo_seeds

    out, loaded = [], {}  # placebos of one row share their seeds: load them (and bootstrap them) once
    for i, row in enumerate(r for r in rows if r.claim.kind == "placebo"):
        key = placebo_row(row.claim)
        if key not in loaded:
            loaded[key] = placebo_seeds(results_dir, book, row.claim, store)
        seeds = loaded[key]
        pooled = row.primary.pooled if row.primary is not None else None
        if seeds is None or pooled is None or pooled.seeds < 2:
            continue
        points, boots = seeds
        out += rows_for(row.claim.id, pooled.seeds, points, boots, pooled.p, seed=i)
    return out


def to_csv(records: list[dict]) -> str:
    return records_csv(COLUMNS, records)

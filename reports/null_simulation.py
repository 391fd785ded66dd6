"""The ledger test's error rate, measured: ledgers simulated under the null (bench.scoring.seeds.simulate_null)
over a grid around the variance components the stored cells show, at the measured point itself (at 5% and
in the far tail, 0.5%), and a family of lines under Holm. Written by `bench report` as null-simulation.csv
beside the claims ledger, and quoted by docs/statistics.md."""

from __future__ import annotations

import math
import statistics

import numpy as np

from bench.results.store import records_csv
from bench.scoring.seeds import rejection_rate, simulate_null
from bench.scoring.stats import holm

NAME = "null-simulation.csv"
COLUMNS = ("what", "k", "seed_ratio", "correlation", "lines", "alpha", "sims", "type_one_error", "mc_se")
GRID_RATIOS = (0.1, 1.0, 10.0, 100.0)  # the ledger's lines sit at a few tens (the measured row)
GRID_CORRELATIONS = (0.0, 0.5, 0.9)
SIMS = 4000
HOLM_LINES = 10
HOLM_FAMILIES = 10000  # MC SE about 0.2 points at 5%: enough to tell 5% from Holm's 6.75% under version 3
TAIL_SIMS = 40000  # at the measured point (MC SE 0.1 points at 5%) and in its far tail (Holm's first step: 0.5%)
CHUNK = 10000  # ledgers simulated at once (each holds k x 200 resamples)


def measured_point(rows) -> tuple[float, float] | None:
    """The seed-to-example variance ratio and the cross-seed correlation of the example noise where the
    ledger's lines sit: the mean of each line's moment estimates over the paper claims' pooled primary lines
    with at least two seeds (unbiased where a per-line median of clipped estimates is not), then clipped into
    their ranges."""
    pooled = [r.primary.pooled for r in rows if r.claim.kind == "paper" and r.primary is not None
              and r.primary.pooled is not None and r.primary.pooled.seeds >= 2
              and r.primary.pooled.correlation is not None and r.primary.pooled.seed_ratio is not None]
    if not pooled:
        return None
    ratio = statistics.fmean(p.seed_ratio for p in pooled)
    rho = statistics.fmean(p.correlation for p in pooled)
    return max(ratio, 0.0), min(max(rho, 0.0), 1.0)


def null_pvalues(k: int, ratio: float, rho: float, sims: int, seed: int) -> np.ndarray:
    """``simulate_null`` in chunks of CHUNK ledgers (a chunk's resamples take about 80 MB), seeded per chunk."""
    sizes = [min(CHUNK, sims - start) for start in range(0, sims, CHUNK)]
    return np.concatenate([simulate_null(k, ratio, rho, sims=n, seed=seed * 1000 + i) for i, n in enumerate(sizes)])


def _row(what: str, k: int, ratio: float, rho: float, sims: int, lines: int = 1, seed: int = 0,
         alpha: float = 0.05) -> dict:
    p = null_pvalues(k, ratio, rho, sims * lines, seed)
    if lines == 1:
        rate = rejection_rate(p, alpha)
    else:  # the chance that Holm lets any of ``lines`` null lines through
        rate = float(np.mean([min(holm(list(family))) < alpha for family in p.reshape(sims, lines)]))
    return {"what": what, "k": k, "seed_ratio": ratio, "correlation": rho, "lines": lines, "alpha": alpha,
            "sims": sims, "type_one_error": rate, "mc_se": math.sqrt(max(rate * (1 - rate), 1e-12) / sims)}


def simulate(rows) -> list[dict]:
    out = [_row("grid", k, ratio, rho, SIMS, seed=i) for i, (k, ratio, rho) in
           enumerate((k, r, c) for k in (3, 5) for r in GRID_RATIOS for c in GRID_CORRELATIONS)]
    point = measured_point(rows)
    if point is not None:
        ratio, rho = (round(x, 3) for x in point)
        out += [_row("measured", k, ratio, rho, TAIL_SIMS, seed=100 + k) for k in (3, 5)]
        out += [_row("measured tail", k, ratio, rho, TAIL_SIMS, seed=300 + k, alpha=0.005) for k in (3, 5)]
        out.append(_row("holm family", 5, ratio, rho, HOLM_FAMILIES, lines=HOLM_LINES, seed=200))
    return out


def to_csv(records: list[dict]) -> str:
    return records_csv(COLUMNS, records)

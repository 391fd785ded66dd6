"""Scores computed from embeddings, shared by the suites and the trainer (kernel: numpy + scipy only).

- ``cosine``, ``correlations`` and ``score_pairs``: STS scoring as SimCSE's evaluation.py does it
  (cosine of the two sentences' embeddings against the gold scores, Spearman/Pearson x100);
- ``alignment`` and ``uniformity``: Wang & Isola (2020), as SimCSE measures them.
"""

from __future__ import annotations

import numpy as np

POSITIVE_THRESHOLD = 4.0  # alignment's positive pairs: STS-B gold >= 4.0 (SimCSE)


def normalise(x: np.ndarray) -> np.ndarray:
    return x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (normalise(a) * normalise(b)).sum(1)


def correlations(pred, gold) -> dict[str, float]:
    from scipy.stats import pearsonr, spearmanr

    return {"spearman": 100.0 * float(spearmanr(pred, gold)[0]),
            "pearson": 100.0 * float(pearsonr(pred, gold)[0])}


def score_pairs(pairs, encode) -> dict[tuple[str, str], float]:
    """{(metric, aggregation): value} for one task (a ``bench.data.datasets.PairSet``), from an ``encode(list[str])``
    function: ``all`` is one correlation over every pair, ``wmean`` the subset correlations weighted by size."""
    per_subset, sizes, all_pred, all_gold = [], [], [], []
    for s1, s2, gold in pairs.subsets.values():
        pred = cosine(encode(s1), encode(s2))
        per_subset.append(correlations(pred, gold))
        sizes.append(len(gold))
        all_pred.append(pred)
        all_gold += gold
    overall = correlations(np.concatenate(all_pred), all_gold)
    out = {}
    for metric in ("spearman", "pearson"):
        out[(metric, "all")] = overall[metric]
        out[(metric, "wmean")] = float(np.average([c[metric] for c in per_subset], weights=sizes))
    return out


def alignment(x: np.ndarray, y: np.ndarray, alpha: float = 2.0) -> float:
    """E ||f(x) - f(x+)||^alpha over positive pairs, on L2-normalised embeddings (lower is better)."""
    return float((np.linalg.norm(normalise(x) - normalise(y), axis=1) ** alpha).mean())


def uniformity(x: np.ndarray, t: float = 2.0) -> float:
    """log E exp(-t ||f(x) - f(y)||^2) over all pairs of distinct rows, L2-normalised (lower is better)."""
    x = normalise(x).astype(np.float64)
    sq = np.clip(2.0 - 2.0 * x @ x.T, 0.0, None)  # squared distances of unit vectors
    iu = np.triu_indices(len(x), k=1)
    vals = -t * sq[iu]
    m = vals.max()
    return float(m + np.log(np.exp(vals - m).mean()))  # log-mean-exp, stable


def uniformity_pseudo_values(x: np.ndarray, t: float = 2.0) -> np.ndarray:
    """Per-row pseudo-values g_i = 2 h_i - U of the pair mean U = E exp(-t ||f(x) - f(y)||^2), where
    h_i is row i's mean kernel over the other rows: mean(g) = U, so log(mean(g)) is the uniformity, and
    a bootstrap of mean(g) over rows has the first-order variance of the U-statistic (4 Var(h) / n;
    resampling h_i itself would give a quarter of it)."""
    x = normalise(x).astype(np.float64)
    n = len(x)
    if n < 2:
        return np.full(n, np.nan)
    kernel = np.exp(-t * np.clip(2.0 - 2.0 * x @ x.T, 0.0, None))
    np.fill_diagonal(kernel, 0.0)
    h = kernel.sum(1) / (n - 1)
    return 2.0 * h - h.mean()


def alignment_uniformity(pairs, encode, threshold: float = POSITIVE_THRESHOLD) -> tuple[float, float, int, int]:
    """(alignment over pairs with gold >= threshold, uniformity over the distinct sentences, n positives,
    n sentences) for a ``PairSet``: the alignment suite's and the trainer's dev measure."""
    s1, s2, gold = pairs.all_pairs()
    pos = [i for i, g in enumerate(gold) if g >= threshold]
    sentences = list(dict.fromkeys(s1 + s2))
    encode(sentences)  # one pass over every sentence (encoders cache)
    align = alignment(encode([s1[i] for i in pos]), encode([s2[i] for i in pos]))
    return align, uniformity(encode(sentences)), len(pos), len(sentences)

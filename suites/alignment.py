"""Alignment and uniformity (Wang & Isola 2020), measured as SimCSE does.

- alignment = E ||f(x) - f(x+)||^2 over positive pairs: STS-B pairs with gold >= 4.0;
- uniformity = log E exp(-2 ||f(x) - f(y)||^2) over all pairs of distinct STS-B sentences;
embeddings are L2-normalised first. Lower is better for both; values are not x100.

Open choice: the split. SimCSE's figures use STS-B; we use the test split (1379 pairs) so the
numbers sit beside the STS suite's. The split is recorded in each row.
"""

from __future__ import annotations

import numpy as np

from bench.data import read_stsb, require
from bench.stats import Evidence, Sample
from suites.base import RunContext, Suite, Task, row

POSITIVE_THRESHOLD = 4.0


def normalise(x: np.ndarray) -> np.ndarray:
    return x / np.clip(np.linalg.norm(x, axis=1, keepdims=True), 1e-12, None)


def alignment(x: np.ndarray, y: np.ndarray, alpha: float = 2.0) -> float:
    return float((np.linalg.norm(normalise(x) - normalise(y), axis=1) ** alpha).mean())


def uniformity(x: np.ndarray, t: float = 2.0) -> float:
    x = normalise(x).astype(np.float64)
    sq = np.clip(2.0 - 2.0 * x @ x.T, 0.0, None)  # squared distances of unit vectors
    iu = np.triu_indices(len(x), k=1)
    vals = -t * sq[iu]
    m = vals.max()
    return float(m + np.log(np.exp(vals - m).mean()))  # log-mean-exp, stable


class AlignmentSuite(Suite):
    name = "alignment"
    description = "Alignment / uniformity on STS-B (Wang & Isola 2020, as in SimCSE; lower is better)"
    tasks = (Task("alignment", "stsb", "stsb", "test", "align", "mean",
                  f"STS-B test: positives gold >= {POSITIVE_THRESHOLD}", "RobustEmbed Figure 3"),)

    def run_task(self, task, encoder, ctx: RunContext):
        s1, s2, gold = read_stsb(require(ctx.paths.data, task.dataset), task.split).limit(ctx.limit).all_pairs()
        pos = [i for i, g in enumerate(gold) if g >= POSITIVE_THRESHOLD]
        sentences = list(dict.fromkeys(s1 + s2))
        encoder.encode(sentences)
        x, y = normalise(encoder.encode([s1[i] for i in pos])), normalise(encoder.encode([s2[i] for i in pos]))
        align = alignment(x, y)
        # Per positive pair, for the CI (bootstrap of the mean) and paired tests; uniformity has none
        # (a bootstrap would need the whole pair matrix per resample).
        pairs = Sample(pos, {"sq_dist": np.linalg.norm(x - y, axis=1) ** 2})
        return [row(task, "align", align, len(pos), aggregation="mean",
                    evidence=Evidence("mean", pairs, ("sq_dist",), scale=1.0)),
                row(task, "uniform", uniformity(encoder.encode(sentences)), len(sentences), aggregation="mean")]


SUITE = AlignmentSuite()

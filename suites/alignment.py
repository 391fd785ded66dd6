"""Alignment and uniformity (Wang & Isola 2020), measured as SimCSE does.

- alignment = E ||f(x) - f(x+)||^2 over positive pairs: STS-B pairs with gold >= 4.0;
- uniformity = log E exp(-2 ||f(x) - f(y)||^2) over all pairs of distinct STS-B sentences;
embeddings are L2-normalised first. Lower is better for both; values are not x100.

CIs: alignment's is a bootstrap over positive pairs; uniformity's a bootstrap over sentences of its
per-sentence pseudo-values (the U-statistic's first-order variance; ``bench.scoring.metrics``), which also
pairs two models' uniformity sentence by sentence in ``bench compare``.

Open choice: the split. SimCSE's figures use STS-B; we use the test split (1379 pairs) so the
numbers sit beside the STS suite's. The split is recorded in each row.
"""

from __future__ import annotations

import numpy as np

from bench.data.datasets import read_stsb, require
from bench.scoring.metrics import POSITIVE_THRESHOLD, alignment_uniformity, normalise, uniformity_pseudo_values
from bench.scoring.stats import Evidence, Sample
from suites.base import RunContext, Suite, Task, row


class AlignmentSuite(Suite):
    name = "alignment"
    description = "Alignment / uniformity on STS-B (Wang & Isola 2020, as in SimCSE; lower is better)"
    version = 2  # 2: uniformity rows carry a CI and paired evidence (values unchanged)
    tasks = (Task(suite="alignment", name="stsb", label="STS-B", dataset="stsb", split="test", main_metric="align",
                  main_aggregation="mean", description=f"STS-B test: positives gold >= {POSITIVE_THRESHOLD}",
                  paper_ref="RobustEmbed Figure 3"),)

    def run_task(self, task, encoder, ctx: RunContext):
        pairs = read_stsb(require(ctx.paths.data, task.dataset), task.split).limit(ctx.limit)
        align, uniform, n_pos, n_sentences = alignment_uniformity(pairs, encoder.encode)
        # Per positive pair (embeddings cached by the encoder), for the CI (a bootstrap of the mean) and
        # paired tests; uniformity's from per-sentence pseudo-values (bench.scoring.metrics.uniformity_pseudo_values),
        # ids = positions in the distinct-sentence list, the same sentences for every model on this data.
        s1, s2, gold = pairs.all_pairs()
        sentences = list(dict.fromkeys(s1 + s2))
        pseudo = Sample(list(range(len(sentences))), {"pseudo": uniformity_pseudo_values(encoder.encode(sentences))})
        pos = [i for i, g in enumerate(gold) if g >= POSITIVE_THRESHOLD]
        x, y = normalise(encoder.encode([s1[i] for i in pos])), normalise(encoder.encode([s2[i] for i in pos]))
        sq_dist = Sample(pos, {"sq_dist": (np.linalg.norm(x - y, axis=1) ** 2) if pos else np.zeros(0)})
        return [row(task, "align", align, n_pos, aggregation="mean",
                    evidence=Evidence("mean", sq_dist, ("sq_dist",), scale=1.0) if pos else None),
                row(task, "uniform", uniform, n_sentences, aggregation="mean",
                    evidence=Evidence("log_mean", pseudo, ("pseudo",), scale=1.0) if n_sentences > 1 else None)]


SUITE = AlignmentSuite()

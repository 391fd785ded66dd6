"""Attack metrics exactly as TextAttack 0.3.11 defines them (textattack/metrics/attack_metrics/).

Computed from our per-example records (``attacks.log``), so a resumed run scores the same as an
uninterrupted one. Rates are x100.

- attack success rate = successful / (successful + failed); skipped examples (already
  misclassified) are excluded (AttackSuccessRate.attack_success_rate_perc; 0 when nothing was attacked);
- original accuracy = (total - skipped) / total;
- accuracy under attack = failed / total;
- average queries over the non-skipped examples (QueryMetrics);
- % words perturbed: mean over successful examples with a change of words_changed / words
  (WordsPerturbed.avg_perturbation_perc);
- examples/s: attacked examples over the wall time spent attacking them.
"""

from __future__ import annotations

import math
from statistics import mean, stdev


def attack_metrics(records: list[dict]) -> dict[str, float | None]:
    total = len(records)
    kinds = [r["result_type"] for r in records]
    succeeded, failed, skipped = kinds.count("successful"), kinds.count("failed"), kinds.count("skipped")
    attacked = [r for r in records if r["result_type"] != "skipped"]
    perturbed = [100.0 * r["words_changed"] / r["num_words"] for r in records
                 if r["result_type"] == "successful" and r["num_words"] > 0 and r["words_changed"] > 0]
    wall = sum(r.get("wall_s", 0.0) for r in records)
    return {
        "attack_success_rate": 100.0 * succeeded / (succeeded + failed) if succeeded + failed else 0.0,
        "original_accuracy": 100.0 * (total - skipped) / total if total else None,
        "accuracy_under_attack": 100.0 * failed / total if total else None,
        "accuracy_reduction": 100.0 * succeeded / total if total else None,  # original - under attack
        "avg_queries": mean(r["num_queries"] for r in attacked) if attacked else None,
        "words_perturbed_pct": mean(perturbed) if perturbed else None,
        "examples_per_s": total / wall if wall > 0 else None,
        "successful": float(succeeded), "failed": float(failed), "skipped": float(skipped),
    }


def mean_std(values: list[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample std over runs (std None for one run); missing values are left out."""
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return None, None
    return mean(vals), (stdev(vals) if len(vals) > 1 else None)


def attack_evidence(records: list[dict]) -> dict[str, object]:
    """Per-example outcomes behind each rate in ``attack_metrics`` (bench.scoring.stats.Evidence, ids = attack-set
    index), so the base suite can give each row its CI and a paired test can match two victims' examples.
    NaN marks an example a metric does not count (e.g. a skipped example for the success rate)."""
    import numpy as np

    from bench.scoring.stats import Evidence, Sample

    kinds = [r["result_type"] for r in records]
    nan = float("nan")
    columns = {
        "success": [1.0 if k == "successful" else 0.0 if k == "failed" else nan for k in kinds],
        "attacked": [0.0 if k == "skipped" else 1.0 for k in kinds],
        "held": [1.0 if k == "failed" else 0.0 for k in kinds],
        "broken": [1.0 if k == "successful" else 0.0 for k in kinds],
        "queries": [nan if k == "skipped" else float(r["num_queries"]) for k, r in zip(kinds, records)],
        "words_pct": [100.0 * r["words_changed"] / r["num_words"]
                      if k == "successful" and r["num_words"] > 0 and r["words_changed"] > 0 else nan
                      for k, r in zip(kinds, records)],
    }
    sample = Sample([r["index"] for r in records], {k: np.asarray(v) for k, v in columns.items()})
    return {"attack_success_rate": Evidence("proportion", sample, ("success",)),
            "original_accuracy": Evidence("proportion", sample, ("attacked",)),
            "accuracy_under_attack": Evidence("proportion", sample, ("held",)),
            "accuracy_reduction": Evidence("proportion", sample, ("broken",)),
            "avg_queries": Evidence("mean", sample, ("queries",), scale=1.0),
            "words_perturbed_pct": Evidence("mean", sample, ("words_pct",), scale=1.0)}

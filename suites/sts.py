"""STS: cosine similarity of fixed embeddings against gold scores (no training).

Seven tasks, as SimCSE evaluates them (evaluation.py, "test" mode): STS12-16 (SentEval test
files, subsets concatenated), STS-B test and SICK-R test. Each task records Spearman and
Pearson under two aggregations:
- ``all``: one correlation over all pairs of the task (SimCSE's headline setting);
- ``wmean``: per-subset correlations averaged with subset sizes as weights (SentEval's "wmean").
``avg`` rows average the headline rows of the run's protocol (bench/protocols.toml; by default
``robustembed-table1``: Spearman and Pearson, ``all``, over the seven tasks) over those of its tasks that
ran, under the protocol's aggregation name, each naming the tasks it is over.

95% CIs (bench/scoring/stats.py, applied by the base suite): percentile bootstrap over pairs, 1,000
resamples, seeded; ``wmean`` resamples within each subset; ``avg`` bootstraps the average of the
tasks' own resamples. Per-pair predicted cosines and gold scores are stored beside each cell.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.data.datasets import PairSet, read_semeval_sts, read_sick, read_stsb, require
from bench.scoring.metrics import correlations, cosine
from bench.scoring.stats import Evidence, Sample
from suites.base import RunContext, Suite, Task, row


@dataclass(frozen=True)
class SemEvalTask(Task):
    subsets: tuple[str, ...] = ()

    def load(self, root: Path) -> PairSet:
        return read_semeval_sts(root, self.subsets)


@dataclass(frozen=True)
class STSBTask(Task):
    def load(self, root: Path) -> PairSet:
        return read_stsb(root, self.split)


@dataclass(frozen=True)
class SICKTask(Task):
    def load(self, root: Path) -> PairSet:
        return read_sick(root, self.split)


def _sts(name, subsets, ref):
    return SemEvalTask(suite="sts", name=name, label=name.upper(), dataset=name, split="test",
                       main_metric="spearman", main_aggregation="all", description=f"SemEval {name.upper()} test",
                       paper_ref=ref, subsets=subsets)


REF = "RobustEmbed Table 1 / SimCSE Table 5"
TASKS = (
    _sts("sts12", ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"), REF),
    _sts("sts13", ("FNWN", "headlines", "OnWN"), REF),
    _sts("sts14", ("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"), REF),
    _sts("sts15", ("answers-forums", "answers-students", "belief", "headlines", "images"), REF),
    _sts("sts16", ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"), REF),
    STSBTask(suite="sts", name="stsb", label="STS-B", dataset="stsb", split="test", main_metric="spearman",
             description="STS Benchmark test", paper_ref=REF, splits=("train", "dev", "test")),
    SICKTask(suite="sts", name="sickr", label="SICK-R", dataset="sick", split="test", main_metric="spearman",
             description="SICK relatedness test", paper_ref=REF, splits=("train", "dev", "test")),
)

# Its headline row is the run protocol's first average (Suite.summary_task_of).
AVG = Task(suite="sts", name="avg", label="Avg.", dataset="", split="test", main_metric="spearman",
           main_aggregation="", description="mean of the task headline scores", paper_ref=REF)


def pair_sample(pairs: PairSet, encode) -> Sample:
    """Per pair: predicted cosine, gold score and subset (stratum), ids = position in the task's pair order."""
    preds, golds, strata = [], [], []
    for name, (s1, s2, gold) in pairs.subsets.items():
        preds.append(cosine(encode(s1), encode(s2)))
        golds += list(gold)
        strata += [name] * len(gold)
    pred = np.concatenate(preds) if preds else np.zeros(0)
    return Sample(list(range(len(golds))), {"pred": pred, "gold": np.asarray(golds, dtype=np.float64)},
                  np.asarray(strata))


def score_sample(sample: Sample) -> dict[tuple[str, str], float]:
    """As ``bench.scoring.metrics.score_pairs``, from a pair sample: ``all`` over every pair, ``wmean`` by subset."""
    per_subset, sizes = [], []
    for name in dict.fromkeys(sample.strata.tolist()):
        members = np.flatnonzero(sample.strata == name)
        per_subset.append(correlations(sample.columns["pred"][members], sample.columns["gold"][members]))
        sizes.append(len(members))
    overall = correlations(sample.columns["pred"], sample.columns["gold"])
    out = {}
    for metric in ("spearman", "pearson"):
        out[(metric, "all")] = overall[metric]
        out[(metric, "wmean")] = float(np.average([c[metric] for c in per_subset], weights=sizes))
    return out


def evidence(sample: Sample, metric: str, aggregation: str) -> Evidence:
    """A row's CI: bootstrap over pairs ('all'), or within subsets ('wmean': SentEval's weighted mean)."""
    return Evidence(metric if aggregation == "all" else f"{metric}_wmean", sample, ("pred", "gold"))


class STSSuite(Suite):
    name = "sts"
    label = "STS"
    description = "Semantic textual similarity: STS12-16, STS-B, SICK-R (cosine, Spearman x100)"
    tasks = TASKS
    summary_task = AVG

    def run_task(self, task, encoder, ctx: RunContext):
        pairs = task.load(require(ctx.paths.data, task.dataset)).limit(ctx.limit)
        n = len(pairs.all_pairs()[2])
        sentences = [s for s1, s2, _ in pairs.subsets.values() for s in s1 + s2]
        unique = len(set(sentences))
        with ctx.counter(f"encode {task.name} (sentences)", unique) as advance:
            encoded = []
            encoder.encode(sentences, on_batch=lambda k: (encoded.append(k), advance(k)))  # fills the cache once
            advance(unique - sum(encoded))  # the rest came from the encoder's cache (an earlier task had them)
        sample = pair_sample(pairs, encoder.encode)
        return [row(task, metric, value, n, aggregation=agg, evidence=evidence(sample, metric, agg))
                for (metric, agg), value in score_sample(sample).items()]


SUITE = STSSuite()

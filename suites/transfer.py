"""SentEval transfer tasks: a logistic regression on frozen embeddings (MR, CR, SUBJ, MPQA, SST-2, TREC, MRPC).

The classifier is SentEval's own (see ``suites/senteval_classifier.py``), in the two published
configurations, chosen with ``--mode`` (default ``test``):
- MR, CR, SUBJ, MPQA: outer k-fold for test, inner k-fold on each outer train for the L2 penalty;
  the score is the mean of the outer-fold test accuracies (aggregation ``kfold-mean``, std over folds);
- SST-2: penalty chosen on dev (872 sentences), scored on test (1821). The train set is SentEval's
  67,349-phrase GLUE file, as SentEval and SimCSE use (recorded in the config);
- TREC: k-fold on the 5,452 training questions picks the penalty, then test on the 500 (6 coarse classes);
- MRPC: pair features ``[|u - v|, u * v]`` as in SentEval's mrpc.py (open choice, see below), k-fold on
  the 4,076 training pairs, test on 1,725; F1 is recorded too.

Inputs are read as SentEval reads them (latin-1 for MR/CR/SUBJ/MPQA/TREC, whitespace tokens joined
by one space, SentEval's batcher convention) and sorted as SentEval sorts them (token count, then
label), so folds match SentEval's for the same seed. Each unique sentence is encoded once.

Rows: ``acc`` (split test, x100) and ``dev_acc`` (split dev, x100: SentEval's "devacc") per task;
under task ``avg``, ``acc`` under each average of the run's protocol (bench/protocols.toml; by default
``senteval-transfer-7``: ``mean-of-7-tasks``, and RobustEmbed Table 2's ``mean-of-6-tasks``, without TREC),
each emitted only when all its tasks ran in the same configuration.
95% CIs (applied by the base suite): ``acc`` Wilson over the test examples (outer-fold predictions
pooled for the k-fold tasks), MRPC ``f1`` a bootstrap over test pairs, the averages a bootstrap of
the tasks' own resamples; ``dev_acc`` none (it is the best of the L2 grid, selected on itself).

Open choices:
- MRPC features: the issue text says ``[u, v, |u-v|, u*v]``; SentEval's code (and so every
  published SentEval MRPC number) uses ``[|u-v|, u*v]``. We follow the code; ``PAIR_FEATURES`` holds both.
- Classifier seed: SentEval's 1111 plus ``--seed`` (so the default seed 0 is SentEval's seed); it
  seeds folds, initialisation and permutations.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.data.datasets import require
from bench.errors import BenchError
from bench.plugins import Option
from bench.scoring.stats import Evidence, Sample
from suites.base import RunContext, Suite, Task, row
from suites.senteval_classifier import (L2_GRID, SENTEVAL_SEED, ClassifierConfig, Outcome, classifier_config,
                                        inner_kfold, kfold, single_thread, split)

DEFAULT_MODE = "test"
REF = "RobustEmbed Table 2 / V-advCSE Table 2 / SimCSE transfer table"
ENCODE_CHUNK = 2048  # sentences per progress step while encoding

Tokens = list[str]


def read_lines(path: Path, encoding: str = "utf-8") -> list[str]:
    return path.read_text(encoding=encoding).splitlines()


def senteval_sorted(*columns):
    """SentEval sorts by token count(s), then label, to reduce padding; folds depend on this order."""
    rows = sorted(zip(*columns), key=lambda r: tuple(len(c) for c in r[:-1]) + (r[-1],))
    return [list(c) for c in zip(*rows)] if rows else [[] for _ in columns]


def _limit(items: list, n: int | None) -> list:
    return items[:n] if n else items


def joined(tokens: Tokens) -> str:
    return " ".join(tokens)


# --- pair features (MRPC) ------------------------------------------------------------------------

def features_senteval(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.c_[np.abs(u - v), u * v]


def features_infersent(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.c_[u, v, np.abs(u - v), u * v]


PAIR_FEATURES = {"abs-diff,product": features_senteval, "u,v,abs-diff,product": features_infersent}
MRPC_FEATURES = "abs-diff,product"  # SentEval mrpc.py: np.c_[np.abs(A - B), A * B]


# --- tasks -----------------------------------------------------------------------------------

@dataclass
class TaskScores:
    """What one task's evaluation gives: the classifier outcome, SentEval's ndev/ntest, extra metrics."""

    outcome: Outcome
    n_dev: int
    n_test: int
    extra: dict
    test_labels: np.ndarray | None = None  # gold labels in the order of outcome.predictions


@dataclass(frozen=True)
class TransferTask(Task):
    nclasses: int = 2
    dev_aggregation: str = "kfold-mean"  # how SentEval's "devacc" is formed for this task
    notes: tuple[tuple[str, str], ...] = ()  # facts of the task's setup recorded in the config

    def sentences(self, data) -> list[Tokens]:
        raise NotImplementedError

    def load(self, root: Path, limit: int | None):
        raise NotImplementedError

    def evaluate(self, data, embed, classifier: ClassifierConfig, seed: int, track) -> TaskScores:
        raise NotImplementedError


@dataclass(frozen=True)
class BinaryTask(TransferTask):
    """MR, CR, SUBJ, MPQA: two files of one sentence a line; the first file is label 1."""

    label1_file: str = ""
    label0_file: str = ""

    def load(self, root, limit):
        first = [ln.split() for ln in read_lines(root / self.label1_file, "latin-1")]
        second = [ln.split() for ln in read_lines(root / self.label0_file, "latin-1")]
        if limit:  # keep both classes: half the limit from each file
            first, second = first[:(limit + 1) // 2], second[:limit // 2]
        return senteval_sorted(first + second, [1] * len(first) + [0] * len(second))

    def sentences(self, data):
        return data[0]

    def evaluate(self, data, embed, classifier, seed, track):
        X, y = embed(data[0]), np.array(data[1])
        return TaskScores(inner_kfold(X, y, self.nclasses, classifier, seed, track, self.name), len(y), len(y), {}, y)


@dataclass(frozen=True)
class SSTTask(TransferTask):
    """SST-2: ``text<TAB>label`` files sentiment-{train,dev,test}."""

    def load(self, root, limit):
        out = {}
        for part in ("train", "dev", "test"):
            cols = [ln.strip().split("\t") for ln in _limit(read_lines(root / f"sentiment-{part}"), limit)]
            out[part] = senteval_sorted([c[0].split() for c in cols], [int(c[1]) for c in cols])
        return out

    def sentences(self, data):
        return [s for part in data.values() for s in part[0]]

    def evaluate(self, data, embed, classifier, seed, track):
        (Xtr, ytr), (Xdv, ydv), (Xte, yte) = [(embed(data[p][0]), np.array(data[p][1]))
                                              for p in ("train", "dev", "test")]
        return TaskScores(split(Xtr, ytr, Xdv, ydv, Xte, yte, self.nclasses, classifier, seed), len(ydv), len(yte), {},
                          yte)


TREC_CLASSES = {"ABBR": 0, "DESC": 1, "ENTY": 2, "HUM": 3, "LOC": 4, "NUM": 5}  # SentEval trec.py


def parse_trec(lines: list[str]) -> tuple[list[Tokens], list[int]]:
    """``COARSE:fine question ...`` -> (question tokens, coarse class id); the fine label is dropped."""
    X, y = [], []
    for line in lines:
        if not line.strip():
            continue
        coarse, rest = line.strip().split(":", 1)
        if coarse not in TREC_CLASSES:
            raise BenchError(f"TREC line with unknown class '{coarse}': {line[:60]!r}. Re-fetch the TREC data.")
        X.append(rest.split(" ", 1)[1].split())
        y.append(TREC_CLASSES[coarse])
    return X, y


@dataclass(frozen=True)
class TRECTask(TransferTask):
    def load(self, root, limit):
        return {part: senteval_sorted(*parse_trec(_limit(read_lines(root / name, "latin-1"), limit)))
                for part, name in (("train", "train_5500.label"), ("test", "TREC_10.label"))}

    def sentences(self, data):
        return data["train"][0] + data["test"][0]

    def evaluate(self, data, embed, classifier, seed, track):
        (Xtr, ytr), (Xte, yte) = [(embed(data[p][0]), np.array(data[p][1])) for p in ("train", "test")]
        out = kfold(Xtr, ytr, Xte, yte, self.nclasses, classifier, seed, track, self.name)
        return TaskScores(out, len(ytr), len(yte), {}, yte)


def parse_mrpc(lines: list[str]) -> tuple[list[Tokens], list[Tokens], list[int]]:
    """SentEval's MRPC copy: a header row, then ``label, id1, id2, s1, s2`` tab separated."""
    a, b, y = [], [], []
    for line in lines[1:]:
        cols = line.strip().split("\t")
        if len(cols) >= 5:
            a.append(cols[3].split())
            b.append(cols[4].split())
            y.append(int(cols[0]))
    return a, b, y


@dataclass(frozen=True)
class MRPCTask(TransferTask):
    features: str = MRPC_FEATURES

    def load(self, root, limit):
        out = {}
        for part in ("train", "test"):
            a, b, y = parse_mrpc(read_lines(root / f"msr_paraphrase_{part}.txt"))
            out[part] = senteval_sorted(_limit(a, limit), _limit(b, limit), _limit(y, limit))
        return out

    def sentences(self, data):
        return [s for part in data.values() for s in part[0] + part[1]]

    def pair_features(self, u, v):
        return PAIR_FEATURES[self.features](u, v)

    def evaluate(self, data, embed, classifier, seed, track):
        from sklearn.metrics import f1_score

        (Xtr, ytr), (Xte, yte) = [(self.pair_features(embed(data[p][0]), embed(data[p][1])), np.array(data[p][2]))
                                  for p in ("train", "test")]
        out = kfold(Xtr, ytr, Xte, yte, self.nclasses, classifier, seed, track, self.name)
        return TaskScores(out, len(ytr), len(yte), {"f1": round(100 * float(f1_score(yte, out.predictions)), 2)},
                          yte)


SENTEVAL_DIR = "senteval/downstream"
TASKS = (
    BinaryTask(suite="transfer", name="mr", label="MR", dataset="mr", split="test", main_metric="acc",
               main_aggregation="kfold-mean", description="Movie review polarity (10,662)", paper_ref=REF,
               label1_file="rt-polarity.pos", label0_file="rt-polarity.neg"),
    BinaryTask(suite="transfer", name="cr", label="CR", dataset="cr", split="test", main_metric="acc",
               main_aggregation="kfold-mean", description="Customer review polarity (3,775)", paper_ref=REF,
               label1_file="custrev.pos", label0_file="custrev.neg"),
    BinaryTask(suite="transfer", name="subj", label="SUBJ", dataset="subj", split="test", main_metric="acc",
               main_aggregation="kfold-mean", description="Subjectivity (10,000)", paper_ref=REF,
               label1_file="subj.objective", label0_file="subj.subjective"),
    BinaryTask(suite="transfer", name="mpqa", label="MPQA", dataset="mpqa", split="test", main_metric="acc",
               main_aggregation="kfold-mean", description="MPQA opinion polarity (10,606)", paper_ref=REF,
               label1_file="mpqa.pos", label0_file="mpqa.neg"),
    SSTTask(suite="transfer", name="sst2", label="SST2", dataset="sst2", split="test", main_metric="acc",
            description="SST-2 binary (train 67,349 phrases / dev 872 / test 1,821)", paper_ref=REF,
            dev_aggregation="all", notes=(("train", "GLUE SST-2 phrase train, 67,349 (SentEval/SimCSE file)"),)),
    TRECTask(suite="transfer", name="trec", label="TREC", dataset="trec", split="test", main_metric="acc",
             description="TREC question type, 6 classes (5,452 / 500)", paper_ref=REF, nclasses=6),
    MRPCTask(suite="transfer", name="mrpc", label="MRPC", dataset="mrpc", split="test", main_metric="acc",
             description="MRPC paraphrase (4,076 / 1,725 pairs)", paper_ref=REF, notes=(("pair_features", MRPC_FEATURES),)),
)
# Its headline row is the run protocol's first average (Suite.summary_task_of).
AVG = Task(suite="transfer", name="avg", label="Avg.", dataset="", split="test", main_metric="acc",
           main_aggregation="", description="mean of the task test accuracies", paper_ref=REF)


def embedding_dir(encoder, ctx: RunContext) -> Path:
    """Where this encoder's transfer embeddings persist (weights, pooler, length cap and dtype in the key)."""
    ident = "|".join(str(getattr(encoder, a, "")) for a in ("weights_sha256", "pooler", "max_len", "dtype"))
    return ctx.paths.cache / "transfer-embeddings" / hashlib.sha256(ident.encode()).hexdigest()[:20]


def _load_chunk(path: Path, size: int) -> np.ndarray | None:
    try:
        vecs = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None  # absent, or cut short by a kill: encode again
    return vecs if len(vecs) == size else None


def embedder(encoder, ctx: RunContext, task: TransferTask, data):
    """Encode the task's unique sentences once; return a lookup tokens -> vectors.

    Sentences are length-sorted and encoded in chunks; each finished chunk is saved (atomic rename)
    under $BENCH_HOME/cache, so an interrupted run, the other --mode and later runs reuse them.
    """
    unique = list(dict.fromkeys(joined(s) for s in task.sentences(data)))
    unique.sort(key=len)
    chunks = [unique[i:i + ENCODE_CHUNK] for i in range(0, len(unique), ENCODE_CHUNK)]
    folder = embedding_dir(encoder, ctx)
    prepared = False
    table: dict[str, np.ndarray] = {}
    for chunk in ctx.track(chunks, len(chunks), f"{task.name}: encode {len(unique)} sentences"):
        path = folder / f"{hashlib.sha256(chr(10).join(chunk).encode()).hexdigest()[:24]}.npy"
        vecs = _load_chunk(path, len(chunk))
        if vecs is None:
            prepare = getattr(encoder, "prepare", None)  # external SentEval encoders build vocabularies here
            if prepare is not None and not prepared:
                prepare(unique)
                prepared = True
            vecs = np.asarray(encoder.encode(chunk), dtype=np.float32)
            folder.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.npy")
            np.save(tmp, vecs)
            tmp.replace(path)
        table.update(zip(chunk, vecs))
    return lambda sentences: np.stack([table[joined(s)] for s in sentences]) if sentences else \
        np.zeros((0, 0), dtype=np.float32)


EXTRA_STATISTICS = {"f1": "f1"}  # extra test metric -> bench.scoring.stats statistic of (pred, gold)


def test_sample(result: TaskScores) -> Sample | None:
    """Per test example (ids: position in SentEval's sorted order, the same for every encoder): correct,
    prediction and gold; the acc row's Wilson interval and paired tests read it."""
    preds, gold = result.outcome.predictions, result.test_labels
    if preds is None or gold is None or len(preds) != len(gold):
        return None
    preds, gold = np.asarray(preds), np.asarray(gold)
    return Sample(list(range(len(gold))), {"correct": (preds == gold).astype(float), "pred": preds, "gold": gold})


class TransferSuite(Suite):
    name = "transfer"
    description = "SentEval transfer: logistic regression on frozen embeddings (MR CR SUBJ MPQA SST-2 TREC MRPC)"
    tasks = TASKS
    complete_averages = True  # an average only over all of its tasks, in one configuration
    average_decimals = 2  # as SentEval reports accuracies
    options = (Option(name="mode", choices=("test", "fasttest"), default="test",
                      help="SentEval classifier configuration"),)
    summary_task = AVG

    def mode(self, ctx: RunContext) -> str:
        return ctx.options.get("mode") or DEFAULT_MODE

    def config(self, task, ctx):
        cfg = super().config(task, ctx)
        mode = self.mode(ctx)
        cfg.update(mode=mode, classifier=classifier_config(mode).as_config(), l2_grid=list(L2_GRID),
                   classifier_seed=SENTEVAL_SEED + ctx.seed, loss="mean cross-entropy",
                   **dict(getattr(task, "notes", ())))
        return cfg

    def run_task(self, task: TransferTask, encoder, ctx: RunContext):
        classifier = classifier_config(self.mode(ctx))
        data = task.load(require(ctx.paths.data, task.dataset), ctx.limit)
        start = time.perf_counter()
        embed = embedder(encoder, ctx, task, data)
        encoded = time.perf_counter()
        with single_thread():
            result = task.evaluate(data, embed, classifier, SENTEVAL_SEED + ctx.seed, ctx.track)
        ctx.log(f"  {task.name}: encoding {encoded - start:.1f}s, classifier {time.perf_counter() - encoded:.1f}s "
                f"(L2 chosen: {sorted(set(result.outcome.l2 or []))})")
        out = result.outcome
        sample = test_sample(result)
        rows = [row(task, "acc", out.test_acc, result.n_test, split="test", std=out.test_std,
                    evidence=sample and Evidence("proportion", sample, ("correct",))),
                # SentEval's devacc is the best of the L2 grid (selected on itself): no interval.
                row(task, "dev_acc", out.dev_acc, result.n_dev, split="dev",
                    aggregation=task.dev_aggregation)]
        rows += [row(task, metric, value, result.n_test, split="test",
                     evidence=sample and EXTRA_STATISTICS.get(metric) and
                     Evidence(EXTRA_STATISTICS[metric], sample, ("pred", "gold")))
                 for metric, value in result.extra.items()]
        return rows


SUITE = TransferSuite()

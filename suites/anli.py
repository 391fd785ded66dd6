"""ANLI: an NLI classifier fine-tuned on the encoder, scored on Adversarial NLI R1-R3 (V-advCSE Table 3).

The classifier is the encoder plus a linear head on its pooled (premise, hypothesis) pair encoding,
trained end to end by ``bench/finetune.py`` and cached under ``$BENCH_HOME/victims/<model>/anli-<profile>/`` (``bench.finetune.victim_dir``).

Training mixes (``MIXES``, recorded in every row's config):
- ``paper``: the ANLI leaderboard protocol, SNLI + MNLI + FEVER-NLI + ANLI train with the rounds
  up-sampled R1 x10, R2 x20, R3 x10 (facebookresearch/anli, script/example_scripts/train_roberta_small.sh,
  ``--train_weights 10,20,10``, max_length 156). Parts whose files are absent are left out (recorded);
  ANLI train itself is required.
- ``smoke`` (offline, CPU): what the offline data holds, SNLI dev (SentEval format) + ANLI dev R1-R3,
  each capped; SNLI test (capped) is the held-out check of the card's ``dev_accuracy``.
- ``study`` (offline, CPU, every NLI pair the offline data holds): SNLI dev + SNLI test after its first
  1,000 pairs, SICK-E (train, trial and test: SICK's entailment_judgment), TextFooler's MNLI matched and
  mismatched attack sets, and ANLI dev R1-R3, uncapped. The first 1,000 SNLI test pairs are the held-out
  check (as in ``smoke``, so the two cards' checks are the same pairs); no training pair shares a premise
  with them. The choices the ANLI paper and V-advCSE leave open are in ``STUDY_CHOICES``.

``--anli-train-split test`` (offline mixes) trains on ANLI test R1-R3 in place of ANLI dev, so the dev
rounds are scored by a classifier that never saw them (V-advCSE's dev column) and no test row is written.
Either way a split is scored only for the rounds not trained on (``reported``); the split trained on is
in every row (``training_mix``, and ``anli_train_split`` when it is test).

Rows: accuracy x100 on test for R1, R2, R3 and All, and on dev for every round whose dev set was not
trained on. The ``all`` task has two rows per split: ``mean-of-rounds``, the unweighted mean of the
three rounds' accuracies (its headline: V-advCSE Table 3's "All" is that mean, e.g. V-advCSE test
54.4 / 47.2 / 44.1 -> 48.6, where pooling the 3,200 examples would give 48.3), and ``pooled``, one
accuracy over the three rounds' examples together (R3 weighs 1,200 / 3,200). Per-example predictions go to an append-only JSONL
(``$BENCH_RESULTS_DIR/examples/<model>/anli/``) keyed by the classifier's weights, so an interrupted
run resumes and ``all`` reuses the rounds' predictions.

Labels: every source maps to one order, entailment / neutral / contradiction = 0 / 1 / 2
(``LABEL_IDS``): SNLI/MNLI spell them out, ANLI uses e / n / c, FEVER-NLI uses SUPPORTS /
NOT ENOUGH INFO / REFUTES. Examples without a gold label (SNLI's "-") are dropped.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from bench.data.datasets import SICK_FILES, malformed, require
from bench.errors import BenchError
from bench.plugins import Option
from bench.scoring.stats import Evidence, Sample
from suites.base import RunContext, Suite, Task, row

LABELS = ("entailment", "neutral", "contradiction")
LABEL_IDS = {
    **{name: i for i, name in enumerate(LABELS)},
    **{name[0]: i for i, name in enumerate(LABELS)},  # ANLI: e / n / c
    # FEVER-NLI (facebookresearch/anli build_data, recalled): SUPPORTS->e, NOT ENOUGH INFO->n, REFUTES->c
    "supports": 0, "not enough info": 1, "refutes": 2,
}
ROUNDS = ("R1", "R2", "R3")


def label_id(raw: str) -> int | None:
    """0/1/2 for any source's spelling; None for no gold label (SNLI "-"); BenchError otherwise."""
    key = raw.strip().lower()
    if key in ("-", ""):
        return None
    if key not in LABEL_IDS:
        raise BenchError(f"Unknown NLI label {raw!r}; expected one of {sorted(LABEL_IDS)}. The data file is "
                         f"not an NLI file in the expected format.")
    return LABEL_IDS[key]


@dataclass
class NLISet:
    premises: list[str]
    hypotheses: list[str]
    labels: list[int]
    ids: list[str]
    source: str

    def labelled(self, upsample: int = 1):
        from bench.finetune import Labelled

        return Labelled(list(zip(self.premises, self.hypotheses)) * upsample, self.labels * upsample,
                        f"{self.source}x{upsample}" if upsample > 1 else self.source)

    def head(self, n: int | None) -> "NLISet":
        if not n:
            return self
        return NLISet(self.premises[:n], self.hypotheses[:n], self.labels[:n], self.ids[:n], self.source)

    def tail(self, skip: int) -> "NLISet":
        """Without the first ``skip`` examples (those a held-out check takes)."""
        return NLISet(self.premises[skip:], self.hypotheses[skip:], self.labels[skip:], self.ids[skip:], self.source)

    def without_premises(self, premises: set[str]) -> "NLISet":
        """Without the pairs whose premise (case and punctuation aside) is in ``premises``."""
        keep = [i for i, p in enumerate(self.premises) if premise_key(p) not in premises]
        return NLISet([self.premises[i] for i in keep], [self.hypotheses[i] for i in keep],
                      [self.labels[i] for i in keep], [self.ids[i] for i in keep], self.source)


def premise_key(text: str) -> str:
    """A premise compared across sources: lower case, letters and digits only (SNLI's SentEval copy is
    PTB-tokenized, SICK's is not)."""
    return " ".join("".join(c if c.isalnum() else " " for c in text.lower()).split())


def _collect(rows, source: str) -> NLISet:
    out = NLISet([], [], [], [], source)
    for uid, premise, hypothesis, raw in rows:
        y = label_id(raw)
        if y is None:
            continue
        out.premises.append(" ".join(premise.split()))
        out.hypotheses.append(" ".join(hypothesis.split()))
        out.labels.append(y)
        out.ids.append(str(uid))
    return out


def read_snli_senteval(directory: Path, split: str) -> NLISet:
    """SentEval's SNLI: s1.<split>, s2.<split>, labels.<split>, one example per line."""
    files = [(directory / f"{name}.{split}").read_text(encoding="utf-8").splitlines() for name in ("s1", "s2", "labels")]
    if len({len(f) for f in files}) != 1:
        raise BenchError(f"{directory}: s1/s2/labels.{split} have different line counts; the data are corrupt. "
                         f"Re-fetch with `bench data fetch snli`.")
    return _collect(((f"{split}-{i}", a, b, y) for i, (a, b, y) in enumerate(zip(*files))), f"snli:{split}")


def read_jsonl_nli(path: Path, source: str, premise: str, hypothesis: str, label: str, uid: str) -> NLISet:
    rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return _collect(((r.get(uid, i), r[premise], r[hypothesis], r[label]) for i, r in enumerate(rows)), source)


def read_anli(root: Path, rnd: str, split: str) -> NLISet:
    """anli/<R>/<split>.jsonl: uid, context (premise), hypothesis, label e/n/c."""
    return read_jsonl_nli(root / rnd / f"{split}.jsonl", f"anli:{rnd}:{split}", "context", "hypothesis", "label", "uid")


def read_tsv_nli(path: Path, source: str, columns: tuple[int, int, int, int], header: bool = False) -> NLISet:
    """Tab-separated NLI pairs; ``columns`` are the (id, premise, hypothesis, label) column indexes,
    an id column of -1 numbers the lines."""
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = []
    for lineno, line in enumerate(lines[1:] if header else lines, 2 if header else 1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) <= max(columns):
            raise malformed(path, lineno, line, f"{max(columns) + 1}+ tab-separated fields with the premise, "
                                                f"hypothesis and label in columns {columns[1:]}")
        uid, premise, hypothesis, label = columns
        rows.append((cols[uid] if uid >= 0 else str(lineno), cols[premise], cols[hypothesis], cols[label]))
    return _collect(rows, source)


def read_sick_entailment(path: Path, source: str) -> NLISet:
    """SICK with a header row: pair_ID, sentence_A (premise), sentence_B (hypothesis), relatedness_score,
    entailment_judgment (ENTAILMENT / NEUTRAL / CONTRADICTION)."""
    return read_tsv_nli(path, source, (0, 1, 2, 4), header=True)


def read_textfooler_nli(path: Path, source: str) -> NLISet:
    """TextFooler's NLI attack sets: label, premise, hypothesis (text labels), one pair a line."""
    return read_tsv_nli(path, source, (-1, 1, 2, 0))


@dataclass(frozen=True)
class MixPart:
    """One training source: a reader over the data root, an optional cap and an up-sampling factor."""

    name: str
    path: str  # relative to the data root; the part is used when it exists
    read: Callable[[Path], NLISet]
    cap: int | None = None
    upsample: int = 1
    required: bool = False
    fetch: str = ""  # `bench data fetch <fetch>` gets it (bench/data/datasets.py)
    skip: int = 0  # leading examples left out: a held-out check's share of the same split
    dataset: str = ""  # its registered dataset (bench/data/datasets.py), fingerprinted in the cell key by the study mix

    def present(self, data_root: Path) -> bool:
        return (data_root / self.path).exists()

    def load(self, data_root: Path) -> NLISet:
        return self.read(data_root).tail(self.skip).head(self.cap)

    def describe(self) -> dict:
        out = {"source": self.name, "path": self.path, "cap": self.cap, "upsample": self.upsample}
        return {**out, "skip": self.skip} if self.skip else out  # older mixes' keys stay as they were


SNLI_DIR = "senteval/downstream/SNLI"


def _snli(split):
    return lambda root: read_snli_senteval(root / SNLI_DIR, split)


def _anli(rnd, split):
    return lambda root: read_anli(root / "anli", rnd, split)


def _jsonl(rel, source, *keys):
    return lambda root: read_jsonl_nli(root / rel, source, *keys)


SICK_DIR = "senteval/downstream/SICK"
TEXTFOOLER_DIR = "textfooler_attack_sets"


def _sick(file, source):
    return lambda root: read_sick_entailment(root / SICK_DIR / file, source)


def _textfooler(name, source):
    return lambda root: read_textfooler_nli(root / TEXTFOOLER_DIR / name, source)


def _anli_part(rnd: str, split: str, **kw) -> MixPart:
    return MixPart(f"anli:{rnd}:{split}", f"anli/{rnd}/{split}.jsonl", _anli(rnd, split), fetch="anli", **kw)


# Paper-profile sources that the offline bundle does not hold (declared in bench/data/datasets.py for fetching).
SNLI_TRAIN = "snli_1.0/snli_1.0_train.jsonl"
MNLI_TRAIN = "multinli_1.0/multinli_1.0_train.jsonl"
FEVER_TRAIN = "nli_fever/train_fitems.jsonl"

MIXES: dict[str, tuple[MixPart, ...]] = {
    "smoke": (
        MixPart("snli:dev", f"{SNLI_DIR}/s1.dev", _snli("dev"), cap=800, required=True, fetch="snli"),
        *(MixPart(f"anli:{r}:dev", f"anli/{r}/dev.jsonl", _anli(r, "dev"), cap=100, required=True, fetch="anli")
          for r in ROUNDS),
    ),
    "paper": (
        MixPart("snli:train", SNLI_TRAIN, _jsonl(SNLI_TRAIN, "snli:train", "sentence1", "sentence2", "gold_label",
                                                 "pairID"), fetch="snli-1.0"),
        MixPart("mnli:train", MNLI_TRAIN, _jsonl(MNLI_TRAIN, "mnli:train", "sentence1", "sentence2", "gold_label",
                                                 "pairID"), fetch="mnli"),
        MixPart("fever-nli:train", FEVER_TRAIN, _jsonl(FEVER_TRAIN, "fever-nli:train", "context", "query", "label",
                                                       "fid"), fetch="fever-nli"),
        *(MixPart(f"anli:{r}:train", f"anli/{r}/train.jsonl", _anli(r, "train"), upsample=w, required=True,
                  fetch="anli") for r, w in zip(ROUNDS, (10, 20, 10))),
    ),
}
STUDY_HELD_OUT = 1000  # the first SNLI test pairs: the study mix's held-out check, trained on by no mix
MIXES["study"] = (
    MixPart("snli:dev", f"{SNLI_DIR}/s1.dev", _snli("dev"), required=True, fetch="snli", dataset="snli"),
    MixPart("snli:test", f"{SNLI_DIR}/s1.test", _snli("test"), skip=STUDY_HELD_OUT, required=True, fetch="snli",
            dataset="snli"),
    *(MixPart(f"sick:{split}", f"{SICK_DIR}/{file}", _sick(file, f"sick:{split}"), fetch="sick", dataset="sick")
      for split, file in SICK_FILES.items()),
    *(MixPart(f"mnli-{kind}:textfooler", f"{TEXTFOOLER_DIR}/mnli_{kind}",
              _textfooler(f"mnli_{kind}", f"mnli-{kind}:textfooler"), fetch="textfooler", dataset="textfooler")
      for kind in ("matched", "mismatched")),
    *(_anli_part(r, "dev", required=True, dataset="anli") for r in ROUNDS),
)


@dataclass(frozen=True)
class HeldOut:
    """The held-out check whose accuracy is the card's ``dev_accuracy`` (never trained on)."""

    source: str
    read: Callable[[Path], NLISet]
    cap: int | None
    exclude_premises: bool = False  # training drops every pair whose premise is one of the check's

    def load(self, data_root: Path) -> NLISet:
        return self.read(data_root).head(self.cap)

    def describe(self) -> dict:
        out = {"source": self.source, "cap": self.cap}
        return {**out, "premises_excluded_from_training": True} if self.exclude_premises else out


HELD_OUT = {"smoke": HeldOut("snli:test", _snli("test"), 1000), "paper": HeldOut("snli:test", _snli("test"), None),
            "study": HeldOut("snli:test", _snli("test"), STUDY_HELD_OUT, exclude_premises=True)}
FINETUNE = {  # bench.finetune.FinetuneConfig fields per profile
    "smoke": {"max_len": 128, "epochs": 1, "lr": 5e-5, "batch_size": 16, "max_examples": None},
    "study": {"max_len": 128, "epochs": 1, "lr": 5e-5, "batch_size": 32, "max_examples": None},
    "paper": {"max_len": 156, "epochs": 2, "lr": 1e-5, "batch_size": 32, "max_examples": None},
}
EVAL_CAP = {"smoke": 400, "study": None, "paper": None}  # test/dev examples scored per round (CPU smoke cap)
# Mixes whose training datasets' content enters the cell key (the task's ANLI always does). The smoke mix
# predates this (its cells keep their keys; its card still hashes what it trained on); the paper mix's
# sources are downloads without reference hashes.
TRAINING_DATA_IN_KEY = {"smoke": False, "study": True, "paper": False}
ANLI_TRAIN_SPLITS = ("dev", "test")

# What the ANLI paper (Nie et al. 2020) and V-advCSE leave open, and what the study mix chose.
STUDY_CHOICES = {
    "training_data": "V-advCSE does not say what its ANLI classifier trains on; the ANLI paper's protocol (SNLI + "
                     "MNLI + FEVER-NLI + ANLI train, the 'paper' mix) needs data that are not offline. The study mix "
                     "is every labelled NLI pair offline: SNLI dev + test (minus the check), SICK-E, TextFooler's "
                     "MNLI sets, ANLI dev (or test, --anli-train-split test)",
    "classifier": "encoder + linear head on the encoder's own pooler, trained end to end (the ANLI paper fine-tunes "
                  "the whole model with a classification head; V-advCSE does not describe its head)",
    "up-sampling": "none: the paper's x10/x20/x10 weights apply to ANLI train (about 163k pairs); ANLI dev "
                   "(3,200 pairs) is already 10% of the study mix",
    "epochs": "1 (CPU budget; the paper's script runs 2 over about 1M pairs)",
    "max_len": "128: the longest SNLI/SICK/MNLI pairs fit; ANLI contexts (a few sentences) mostly fit (the paper "
               "uses 156)",
    "lr": "5e-5 with 10% linear warm-up then linear decay (FinetuneConfig's schedule); the top of Devlin et "
          "al.'s 2e-5..5e-5 grid, for a 6-layer model and one epoch (the paper's 1e-5 is for RoBERTa-large "
          "over 2 epochs of 1M pairs); the head at 1e-3",
    "batch_size": "32 (the paper's script: 32)",
    "held_out": "the first 1,000 SNLI test pairs (the smoke card's check too); pairs of any source sharing a "
                "premise with them are left out of training",
    "eval": "every ANLI example of the scored split (no cap); All = unweighted mean of R1-R3 (V-advCSE's)",
    "seed": "the run's --seed (one classifier per encoder and seed)",
}


@dataclass(frozen=True)
class ANLITask(Task):
    rounds: tuple[str, ...] = ROUNDS


REF = "V-advCSE Table 3 (ANLI R1-R3 dev/test)"
TASKS = tuple(ANLITask(suite="anli", name=r.lower(), label=r, dataset="anli", split="test", main_metric="accuracy",
                       description=f"ANLI {r}", paper_ref=REF, rounds=(r,)) for r in ROUNDS) + (
    ANLITask(suite="anli", name="all", label="ALL", dataset="anli", split="test", main_metric="accuracy",
             main_aggregation="mean-of-rounds",
             description="ANLI All: unweighted mean of R1-R3 (the paper's); also pooled", paper_ref=REF,
             rounds=ROUNDS, version=2),)


def mix_for(profile: str, data_root: Path, anli_split: str = "dev") -> tuple[list[MixPart], list[str]]:
    """The parts of the profile's mix that are present (with ANLI dev swapped for ``anli_split``), and the
    names of those left out."""
    parts = MIXES[profile] if anli_split == "dev" else swap_anli_split(profile, anli_split)
    missing_required = [p for p in parts if p.required and not p.present(data_root)]
    if missing_required:
        p = missing_required[0]
        raise BenchError(f"The '{profile}' ANLI training mix needs {data_root / p.path}. Get it with "
                         f"`bench data fetch {p.fetch}` (the ANLI zip holds every round's train.jsonl), "
                         f"or use --profile smoke for the offline mix.")
    return ([p for p in parts if p.present(data_root)],
            [f"{p.name} (bench data fetch {p.fetch})" for p in parts if not p.present(data_root)])


def swap_anli_split(profile: str, split: str) -> tuple[MixPart, ...]:
    """The profile's mix with each ANLI dev round replaced by that round's ``split`` (same cap)."""
    parts = MIXES[profile]
    rounds = {p.name: p.name.split(":")[1] for p in parts if p.name in {f"anli:{r}:dev" for r in ROUNDS}}
    if not rounds:
        offline = ", ".join(name for name, mix in MIXES.items() if any(p.name == "anli:R1:dev" for p in mix))
        raise BenchError(f"--anli-train-split {split} swaps the ANLI dev rounds of an offline mix for their {split} "
                         f"rounds; the '{profile}' mix trains on no ANLI dev. Use --profile {offline}.")
    return tuple(replace(_anli_part(rounds[p.name], split, required=True, dataset=p.dataset), cap=p.cap,
                         upsample=p.upsample) if p.name in rounds else p for p in parts)


def reported(task: ANLITask, used: list[MixPart], split: str) -> list[str]:
    """The task's rounds whose ``split`` was not trained on: the only ones scored on it."""
    trained = {p.name for p in used}
    return [r for r in task.rounds if f"anli:{r}:{split}" not in trained]


class ANLISuite(Suite):
    name = "anli"
    description = "Adversarial NLI R1-R3: NLI classifier fine-tuned on the encoder (accuracy x100)"
    tasks = TASKS
    # Not changes_numbers: the suite records it itself, only when it is test (so the keys of cells trained on
    # ANLI dev stay as they were); the mix it selects is in every row either way (training_mix).
    options = (Option(name="anli_train_split", choices=ANLI_TRAIN_SPLITS, default="dev", changes_numbers=False,
                      help="the ANLI split an offline mix (smoke, study) trains on: dev (then test is scored) or "
                           "test (then dev is scored, by a classifier that never saw it)"),)

    @staticmethod
    def anli_split(ctx: RunContext) -> str:
        return ctx.options.get("anli_train_split") or "dev"

    def config(self, task: ANLITask, ctx: RunContext) -> dict:
        if ctx.profile not in MIXES:
            raise BenchError(f"The anli suite has no '{ctx.profile}' profile (it has: {', '.join(MIXES)}); "
                             f"run it with --profile {' or --profile '.join(MIXES)}.")
        cfg = super().config(task, ctx)
        split = self.anli_split(ctx)
        used, left_out = mix_for(ctx.profile, ctx.paths.data, split)
        cfg.update(training_mix=[p.describe() for p in used], training_mix_left_out=left_out,
                   finetune=FINETUNE[ctx.profile], held_out_check=HELD_OUT[ctx.profile].describe(),
                   eval_cap_per_round=self.eval_cap(ctx), dev_reported=reported(task, used, "dev"),
                   labels=list(LABELS))
        if split != "dev":
            cfg.update(anli_train_split=split, test_reported=reported(task, used, "test"))
        return cfg

    def keyed_datasets(self, task: ANLITask, ctx: RunContext) -> tuple[str, ...]:
        """The task's ANLI, and on a mix whose training data enters the key, the mix's datasets too."""
        if not TRAINING_DATA_IN_KEY[ctx.profile]:
            return self.datasets(task)
        used, _ = mix_for(ctx.profile, ctx.paths.data, self.anli_split(ctx))
        return tuple(dict.fromkeys((task.dataset, *(p.dataset for p in used if p.dataset))))

    def needs_network(self, ctx: RunContext) -> str:
        return "fine-tunes an NLI classifier on the encoder end to end"

    @staticmethod
    def eval_cap(ctx: RunContext) -> int | None:
        caps = [c for c in (EVAL_CAP[ctx.profile], ctx.limit) if c]
        return min(caps) if caps else None

    def training_data(self, ctx: RunContext) -> tuple[list, object]:
        """The mix's parts as ``Labelled`` (minus the held-out check's premises where the mix says so) and the
        held-out check."""
        root = ctx.paths.data
        used, _ = mix_for(ctx.profile, root, self.anli_split(ctx))
        require(root, "snli")
        held_out = HELD_OUT[ctx.profile]
        check = held_out.load(root)
        excluded = {premise_key(p) for p in check.premises} if held_out.exclude_premises else set()
        train = []
        for part in used:
            data = part.load(root)
            train.append((data.without_premises(excluded) if excluded else data).labelled(part.upsample))
        return train, check.labelled()

    def classifier(self, encoder, ctx: RunContext):
        from bench.finetune import FinetuneConfig, load_or_finetune

        train, dev = self.training_data(ctx)
        split = self.anli_split(ctx)
        name = f"anli-{ctx.profile}" + ("" if split == "dev" else f"-trained-on-anli-{split}")
        config = FinetuneConfig(seed=ctx.seed, **FINETUNE[ctx.profile])
        return load_or_finetune(encoder, ctx.paths, name, len(LABELS), train, config, dev=dev,
                                label_names=LABELS, batch_size=ctx.batch_size, log=ctx.log)

    def run_task(self, task: ANLITask, encoder, ctx: RunContext):
        root = require(ctx.paths.data, "anli")
        clf = self.classifier(encoder, ctx)
        used, _ = mix_for(ctx.profile, ctx.paths.data, self.anli_split(ctx))
        cap = self.eval_cap(ctx)
        rows = []
        resources = json.dumps({"classifier": _card_summary(clf.card)}, sort_keys=True)
        for split in ("test", "dev"):
            rounds = reported(task, used, split)
            if not rounds:
                continue
            per_round = []  # (correct, n) per round
            ids, hits = [], []  # per example, for the pooled row's Wilson interval and paired tests
            round_evidence = []  # per round, for the mean of rounds' interval (a bootstrap of the rounds' resamples)
            for rnd in rounds:
                data = read_anli(root, rnd, split).head(cap)
                preds = self.predictions(clf, data, encoder, ctx, rnd, split)
                round_ids = [f"{rnd}:{uid}" for uid in data.ids]
                round_hits = [float(preds[uid] == y) for uid, y in zip(data.ids, data.labels)]
                ids += round_ids
                hits += round_hits
                if round_hits:
                    round_evidence.append(Evidence("proportion", Sample(round_ids, {"correct": round_hits}),
                                                   ("correct",), label=rnd))
                per_round.append((sum(int(preds[uid] == y) for uid, y in zip(data.ids, data.labels)), len(data.ids)))
            correct, n = sum(c for c, _ in per_round), sum(k for _, k in per_round)
            evidence = Evidence("proportion", Sample(ids, {"correct": hits}), ("correct",)) if n else None
            if len(task.rounds) == 1:
                rows.append(row(task, "accuracy", 100.0 * correct / n if n else None, n, split=split,
                                resources=resources, evidence=evidence))
                continue
            # "All": the paper's unweighted mean of the rounds (n = every example scored), and the pooled accuracy.
            # The mean is the paper's All only over all three rounds (dev may report fewer: those not trained on).
            complete = tuple(rounds) == task.rounds and all(k for _, k in per_round)
            mean = sum(100.0 * c / k for c, k in per_round) / len(per_round) if complete else None
            rows.append(row(task, "accuracy", mean, n, aggregation="mean-of-rounds", split=split, resources=resources,
                            config=json.dumps({"rounds": list(rounds)}),
                            evidence=Evidence(parts=round_evidence, combine="average") if complete else None))
            rows.append(row(task, "accuracy", 100.0 * correct / n if n else None, n, aggregation="pooled",
                            split=split, resources=resources, config=json.dumps({"rounds": list(rounds)}),
                            evidence=evidence))
        return rows

    def predictions(self, clf, data: NLISet, encoder, ctx: RunContext, rnd: str, split: str) -> dict[str, int]:
        """uid -> predicted label, from the append-only JSONL; only missing examples are scored."""
        sha = clf.card.get("weights_sha256", "")[:12]
        path = ctx.paths.results / "examples" / encoder.name / "anli" / f"seed{ctx.seed}-clf{sha}" / f"{rnd}-{split}.jsonl"
        done = _read_records(path) if ctx.overwrite != "always" else {}
        if ctx.overwrite == "always":
            path.unlink(missing_ok=True)
        todo = [i for i, uid in enumerate(data.ids) if uid not in done]
        chunk = 256  # appended after every chunk: an interrupted run keeps what it scored
        for start in ctx.track(range(0, len(todo), chunk), (len(todo) + chunk - 1) // chunk, f"anli {rnd} {split}"):
            idx = todo[start:start + chunk]
            logits = clf.predict_logits([(data.premises[i], data.hypotheses[i]) for i in idx])
            records = [{"uid": data.ids[i], "label": data.labels[i], "pred": int(l.argmax()),
                        "logits": [round(float(v), 5) for v in l]} for i, l in zip(idx, logits)]
            _append(path, records)
            done.update({r["uid"]: r for r in records})
        return {uid: done[uid]["pred"] for uid in data.ids}


def _read_records(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    raw = path.read_bytes()
    complete = raw[: raw.rfind(b"\n") + 1]
    if len(complete) != len(raw):  # torn last line from a killed writer
        with path.open("r+b") as fh:
            fh.truncate(len(complete))
    return {r["uid"]: r for r in map(json.loads, complete.decode("utf-8").splitlines())}


def _append(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records).encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _card_summary(card: dict) -> dict:
    return {k: card.get(k) for k in ("task", "weights_sha256", "dev_accuracy", "dev_data", "training_data",
                                     "hyperparameters")}


SUITE = ANLISuite()

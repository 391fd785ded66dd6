"""Supervised SimCSE (Gao, Yao, Chen, EMNLP 2021, §4): NLI entailment pairs as positives, contradiction
hypotheses as hard negatives.

Data: triples (x_i, x_i⁺, x_i⁻) = (premise, an entailment hypothesis, a contradiction hypothesis of the
same premise). Loss (§4, Eq. 5), τ = 0.05:

    −log e^{sim(h_i, h_i⁺)/τ} / Σ_j (e^{sim(h_i, h_j⁺)/τ} + e^{sim(h_i, h_j⁻)/τ})

so every other triple's entailment AND every contradiction of the batch are negatives (``info_nce`` with
``positives=[h⁺]``, ``negatives=[h⁻]``). The 3B sentences of a batch go through the encoder in one forward
pass with dropout on, as SimCSE's ``cl_forward`` does (num_sent = 3); the hard-negative weight is SimCSE's
default (``hard_negative_weight`` 0, i.e. Eq. 5 as printed).

Pooling (§6.3 / App. A: supervised SimCSE takes [CLS] with the MLP in training AND at evaluation): with the
``cls`` pooler the encoder's own pooler (dense + tanh over [CLS], the same layer as SimCSE's MLP, into
which the authors' ``simcse_to_huggingface.py`` copies it) is that MLP: it is trained and exported with
the encoder, and evaluation through ``cls`` keeps it. With any other pooler (``avg`` for all-MiniLM-L6-v2,
``cls_before_pooler``) a dense + tanh MLP sits over the pooled vector in training only, as in the
unsupervised setting (``mlp=false`` drops it).

Training data, offline (``nli_splits``, default ``snli:dev,snli:test,anli:dev``): SNLI's dev and test in
SentEval's format (s1/s2/labels; SNLI train is not offline) and ANLI R1-R3 dev. ANLI test is left out
because the ANLI suite reports it; SNLI test is in (the brief's data), so the adversarial suite's SNLI
attack set (TextFooler's 1,000 SNLI test examples) has been seen, with its labels' structure, by a model
trained here: its SNLI attack rows are not clean. ``--data FILE`` takes SimCSE's own
``nli_for_simcse.csv`` (columns sent0, sent1, hard_neg: 275,601 SNLI+MNLI triples, recalled) for the
paper setting. The model card records the sources, their pair and triple counts and the sha256.

Open choices (also in ``open_choices``):
- Triples: for each premise (in file order), its i-th entailment hypothesis is paired with its i-th
  contradiction hypothesis; unpaired hypotheses and neutral ones are dropped, so a hypothesis is used
  at most once. SNLI dev/test give one triple per premise; ANLI premises (paragraphs, truncated at
  max_len 32 like every sentence) may give several.
- Paper profile: batch 512, lr 5e-5, 3 epochs (App. A Table A.1 for BERT-base, recalled; the authors'
  ``run_sup_example.sh``: 4 GPUs x 128 = 512, lr 5e-5, 3 epochs, read), STS-B dev every 250 steps
  (App. A; the script uses 125). The brief recalled batch 64: that is unsupervised SimCSE's BERT-base
  batch. Smoke: the trainer's smoke profile (10 steps of 16 triples).
"""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError
from bench.methods.base import Method, MethodConfig, MLPPooler, TrainingData, info_nce

ANLI_LABELS = {"e": "entailment", "n": "neutral", "c": "contradiction"}
SIMCSE_CSV_COLUMNS = ("sent0", "sent1", "hard_neg")


def read_snli_senteval(directory: Path, split: str) -> list[tuple[str, str, str]]:
    """(premise, hypothesis, label) from SentEval's SNLI files s1.<split>, s2.<split>, labels.<split>."""
    columns = [(Path(directory) / f"{name}.{split}").read_text(encoding="utf-8").splitlines()
               for name in ("s1", "s2", "labels")]
    if len({len(c) for c in columns}) != 1:
        raise BenchError(f"SNLI {split} files under {directory} have different line counts "
                         f"({', '.join(str(len(c)) for c in columns)}): `bench data verify snli`.")
    return [(p.strip(), h.strip(), label.strip()) for p, h, label in zip(*columns)]


def read_anli(directory: Path, round_name: str, split: str) -> list[tuple[str, str, str]]:
    """(context, hypothesis, label) from ANLI's ``<round>/<split>.jsonl`` (labels e/n/c)."""
    rows = []
    for line in (Path(directory) / round_name / f"{split}.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            rows.append((item["context"].strip(), item["hypothesis"].strip(), ANLI_LABELS[item["label"]]))
    return rows


def nli_triples(pairs: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """(premise, entailment, contradiction): per premise in first-seen order, the i-th entailment with the
    i-th contradiction (docstring); neutral and unpaired hypotheses are dropped."""
    by_premise: dict[str, dict[str, list[str]]] = {}
    for premise, hypothesis, label in pairs:
        by_premise.setdefault(premise, {"entailment": [], "contradiction": []})
        if label in ("entailment", "contradiction"):
            by_premise[premise][label].append(hypothesis)
    return [(premise, pos, neg) for premise, h in by_premise.items()
            for pos, neg in zip(h["entailment"], h["contradiction"])]


def read_simcse_csv(path: Path) -> list[tuple[str, str, str]]:
    """SimCSE's ``nli_for_simcse.csv`` (header sent0, sent1, hard_neg)."""
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames or not set(SIMCSE_CSV_COLUMNS) <= set(reader.fieldnames):
            raise BenchError(f"{path}: supervised SimCSE reads a CSV with columns {', '.join(SIMCSE_CSV_COLUMNS)} "
                             f"(SimCSE's nli_for_simcse.csv); its header is {reader.fieldnames}.")
        return [tuple(row[c].strip() for c in SIMCSE_CSV_COLUMNS) for row in reader]


def triples_sha256(triples) -> str:
    return hashlib.sha256("".join("\t".join(t) + "\n" for t in triples).encode("utf-8")).hexdigest()


@dataclass
class SupSimCSEConfig(MethodConfig):
    temperature: float = 0.05  # §4 Eq. 5: τ (App. A)
    mlp: bool = True  # §6.3: [CLS] with MLP; with the `cls` pooler the encoder's pooler is the MLP (docstring)
    nli_splits: str = "snli:dev,snli:test,anli:dev"  # offline sources (docstring); ignored with --data FILE

    def __post_init__(self):
        for source in self.splits():
            dataset, _, split = source.partition(":")
            if dataset not in ("snli", "anli") or split not in ("dev", "test"):
                raise BenchError(f"nli_splits entries are snli:dev, snli:test, anli:dev or anli:test "
                                 f"(got {source!r} in {self.nli_splits!r})")

    def splits(self) -> list[str]:
        return [s.strip() for s in self.nli_splits.split(",") if s.strip()]


class SupSimCSE(Method):
    name = "sup-simcse"
    Config = SupSimCSEConfig
    citation = "Gao, Yao, Chen. SimCSE: Simple Contrastive Learning of Sentence Embeddings. EMNLP 2021 (supervised, §4)."
    # App. A / Table A.1 (BERT-base) and run_sup_example.sh: batch 512, lr 5e-5, 3 epochs; dev every 250 steps.
    training = {"paper": {"epochs": 3, "batch_size": 512, "lr": 5e-5, "eval_every": 250}}
    # a step / SimCSE's, not measured: three sentences a triple against SimCSE's two views
    step_cost = 1.5
    unlabeled_sentences = False
    open_choices = {
        "triples": "per premise, i-th entailment with i-th contradiction; neutral and unpaired hypotheses dropped",
        "data": "offline: SNLI dev+test (SentEval format) and ANLI R1-R3 dev; ANLI test held out (the ANLI suite "
                "reports it); SNLI test is in, so SNLI attack rows of this model are not clean; --data FILE takes "
                "SimCSE's nli_for_simcse.csv",
        "pooling": "`cls` pooler: the encoder's own dense+tanh pooler is the MLP, trained and kept at evaluation "
                   "(the paper's supervised setting); other poolers: MLP in training only",
        "paper_profile": "batch 512, lr 5e-5, 3 epochs (Table A.1, recalled; run_sup_example.sh 4x128, read), dev "
                         "every 250 steps (App. A; the script: 125); batch 64 is unsupervised SimCSE's",
        "hard_negative_weight": "0 (SimCSE's default): Eq. 5 as printed",
    }

    @classmethod
    def training_data(cls, cfg, ctx) -> TrainingData:
        """NLI triples: ``--data``'s SimCSE CSV, else built from the offline SNLI/ANLI splits (``nli_splits``)."""
        if ctx.data_path is not None:
            triples = read_simcse_csv(ctx.data_path)
            sources = [{"path": str(ctx.data_path), "format": "simcse-csv", "triples": len(triples)}]
        else:
            from bench.data.datasets import require
            from bench.paths import Paths

            root = ctx.data_root or Paths.from_env().data
            triples, sources = [], []
            for source in cfg.splits():
                dataset, _, split = source.partition(":")
                if dataset == "snli":
                    directory = require(root, "snli")
                    pairs = read_snli_senteval(directory, split)
                    found = nli_triples(pairs)
                    sources.append({"dataset": "snli", "split": split, "path": str(directory), "pairs": len(pairs),
                                    "triples": len(found)})
                    triples += found
                else:
                    directory = require(root, "anli")
                    for round_name in ("R1", "R2", "R3"):
                        pairs = read_anli(directory, round_name, split)
                        found = nli_triples(pairs)
                        sources.append({"dataset": "anli", "round": round_name, "split": split,
                                        "path": str(directory / round_name / f"{split}.jsonl"),
                                        "pairs": len(pairs), "triples": len(found)})
                        triples += found
        if not triples:
            raise BenchError("No (premise, entailment, contradiction) triples in the training data "
                             f"({', '.join(cfg.splits()) if ctx.data_path is None else ctx.data_path}).")
        sha = triples_sha256(triples)
        card = {"kind": "nli-triples (premise, entailment, contradiction)", "sources": sources,
                "triples": len(triples), "sha256": sha}
        return TrainingData(triples, sha, card, f"{len(triples)} NLI triples from "
                            + (Path(ctx.data_path).name if ctx.data_path else cfg.nli_splits))

    @classmethod
    def training_datasets(cls, cfg) -> list[str]:
        return sorted({source.partition(":")[0] for source in cfg.splits()})

    def build(self):
        # with the `cls` pooler the encoder's pooler is SimCSE's MLP (module docstring)
        return {"mlp": MLPPooler(self.hidden_size)} if self.cfg.mlp and self.pooler != "cls" else {}

    def collate(self, examples):
        """The batch's premises, then entailments, then contradictions: one padded [3B, L] batch."""
        sentences = [t[0] for t in examples] + [t[1] for t in examples] + [t[2] for t in examples]
        return self.ctx.tokenizer(sentences, padding=True, truncation=True, max_length=self.ctx.max_len,
                                  return_tensors="pt")

    def loss(self, batch, step):
        z = self.project(self.embed(batch)[0])  # one forward over the 3B sentences, dropout on
        if z.shape[0] % 3:
            raise BenchError(f"supervised SimCSE batches hold 3 sentences per example; got {z.shape[0]} rows")
        h, h_pos, h_neg = z.split(z.shape[0] // 3)
        loss = info_nce(h, [h_pos], self.cfg.temperature, negatives=[h_neg])  # Eq. 5
        return loss, {"loss": float(loss.detach())}


METHOD = SupSimCSE

"""Attack sets and victim training data for the adversarial suite (offline layout of $BENCH_DATA_DIR).

- Attack sets: TextFooler's 1000-example files (``textfooler_attack_sets/``: MR, IMDB, Yelp,
  SNLI, MNLI mismatched), GLUE SST-2 validation (872) and GLUE MRPC dev (408), as TextAttack's
  own evaluations use the GLUE validation splits.
- Training data: MR = SentEval MR minus every sentence of the attack set; SST-2 = GLUE train
  (67,349 phrases); IMDB = aclImdb train, reviews cut at ``IMDB_MAX_WORDS`` words; MRPC = GLUE
  train (3,668); SNLI = SNLI dev (9,842; SNLI train is not available offline) minus the
  attack-set pairs. Yelp needs ``yelp/train.csv`` (yelp_review_polarity_csv: "label","text",
  label 1 = negative, 2 = positive), absent offline.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError

IMDB_MAX_WORDS = 256  # training reviews are cut here; the victim's tokenizer truncates further
NLI_LABELS = ("entailment", "neutral", "contradiction")
YELP_TRAIN = "yelp/train.csv"


@dataclass
class Example:
    inputs: tuple[str, ...]  # one text, or (premise, hypothesis) / (sentence1, sentence2)
    label: int


def _read_lines(path: Path) -> list[str]:
    if not path.is_file():
        raise BenchError(f"Data file {path} is missing. Get it with `bench data fetch` or point "
                         f"BENCH_DATA_DIR at the benchmark data (see README 'Data').")
    # Split on "\n" only: str.splitlines() also breaks at U+2028/U+0085, which IMDB reviews contain.
    text = path.read_text(encoding="utf-8", errors="replace")
    return [line.rstrip("\r") for line in text.split("\n")[:-1 if text.endswith("\n") else None]]


def _norm_key(text: str) -> str:
    # Tokenisation and encodings differ between copies of MR ("clichés" vs "clich s"): compare
    # ASCII letters and digits only.
    return re.sub(r"[^a-z0-9]", "", text.lower())


# --- attack sets --------------------------------------------------------------------------

def textfooler_classification(name: str):
    def load(root: Path) -> list[Example]:
        out = []
        for line in _read_lines(root / "textfooler_attack_sets" / name):
            label, _, text = line.partition(" ")
            out.append(Example((text.strip(),), int(label)))
        return out
    load.__name__ = f"textfooler_{name}"
    return load


def textfooler_nli(name: str):
    def load(root: Path) -> list[Example]:
        out = []
        for line in _read_lines(root / "textfooler_attack_sets" / name):
            label, premise, hypothesis = line.split("\t")[:3]
            out.append(Example((premise.strip(), hypothesis.strip()), NLI_LABELS.index(label.strip())))
        return out
    load.__name__ = f"textfooler_{name}"
    return load


def sst2_dev(root: Path) -> list[Example]:
    rows = [ln.rsplit("\t", 1) for ln in _read_lines(root / "senteval/downstream/SST/binary/sentiment-dev") if ln.strip()]
    return [Example((text.strip(),), int(label)) for text, label in rows]


def _glue_mrpc(path: Path) -> list[Example]:
    rows = list(csv.reader(_read_lines(path)[1:], delimiter="\t", quoting=csv.QUOTE_NONE))
    return [Example((r[3], r[4]), int(r[0])) for r in rows if len(r) >= 5]


def mrpc_dev(root: Path) -> list[Example]:
    return _glue_mrpc(root / "glue_mrpc/dev.tsv")


# --- victim training data (given the attack set, to keep it out) --------------------------

def _ends(text: str, k: int = 24) -> set[str]:
    key = _norm_key(text)
    return {key} if len(key) <= k else {"<" + key[:k], key[-k:] + ">"}


def mr_train(root: Path, attack: list[Example]) -> list[Example]:
    # Held out if the first or last 24 letters match an attack example: the SentEval copy has some
    # accented letters spelled "M-i" (cat -v style), so whole-sentence keys miss 22 of the 1000.
    held_out = set().union(*(_ends(e.inputs[0]) for e in attack))
    out = []
    for name, label in (("rt-polarity.neg", 0), ("rt-polarity.pos", 1)):
        for line in _read_lines(root / "senteval/downstream/MR" / name):
            if line.strip() and not _ends(line) & held_out:
                out.append(Example((line.strip(),), label))
    return out


def sst2_train(root: Path, attack: list[Example]) -> list[Example]:
    rows = [ln.rsplit("\t", 1) for ln in _read_lines(root / "senteval/downstream/SST/binary/sentiment-train") if ln.strip()]
    return [Example((text.strip(),), int(label)) for text, label in rows]


def imdb_train(root: Path, attack: list[Example]) -> list[Example]:
    out = []
    for line in _read_lines(root / "imdb/train.jsonl"):
        rec = json.loads(line)
        words = rec["text"].replace("<br />", " ").split()
        out.append(Example((" ".join(words[:IMDB_MAX_WORDS]),), int(rec["label"])))
    return out


def mrpc_train(root: Path, attack: list[Example]) -> list[Example]:
    return _glue_mrpc(root / "glue_mrpc/train.tsv")


def snli_dev_train(root: Path, attack: list[Example]) -> list[Example]:
    d = root / "senteval/downstream/SNLI"
    held_out = {(_norm_key(e.inputs[0]), _norm_key(e.inputs[1])) for e in attack}
    rows = zip(_read_lines(d / "s1.dev"), _read_lines(d / "s2.dev"), _read_lines(d / "labels.dev"))
    return [Example((a.strip(), b.strip()), NLI_LABELS.index(y.strip())) for a, b, y in rows
            if y.strip() in NLI_LABELS and (_norm_key(a), _norm_key(b)) not in held_out]


def yelp_train(root: Path, attack: list[Example]) -> list[Example]:
    path = root / YELP_TRAIN
    with path.open(encoding="utf-8", newline="") as fh:
        return [Example((" ".join(text.replace("\\n", " ").split()),), int(label) - 1)
                for label, text in csv.reader(fh)]


def yelp_train_present(root: Path) -> bool:
    return (root / YELP_TRAIN).is_file()

"""Attack sets and victim training data for the adversarial suite (offline layout of $BENCH_DATA_DIR).

- Attack sets: TextFooler's 1000-example files (``textfooler_attack_sets/``: MR, IMDB, Yelp,
  SNLI, MNLI mismatched), GLUE SST-2 validation (872) and GLUE MRPC dev (408), as TextAttack's
  own evaluations use the GLUE validation splits.
- Training data (``TrainingSet``: what it is, whether it is present, how to get it): MR = SentEval MR
  minus every sentence of the attack set; SST-2 = GLUE train (67,349 phrases); IMDB = aclImdb
  train, reviews cut at ``IMDB_MAX_WORDS`` words; MRPC = GLUE train (3,668); SNLI = SNLI 1.0
  train (550,152 pairs; ``bench data fetch snli-1.0``, or SentEval's ``SNLI/s1.train`` when that
  copy has it); MNLI mismatched = MultiNLI 1.0 train (392,702; ``bench data fetch mnli``); both
  minus any attack-set pair. Yelp needs ``yelp/train.csv`` (yelp_review_polarity_csv:
  "label","text", label 1 = negative, 2 = positive). SNLI train, MNLI train and Yelp train are
  absent offline; the suite then skips the task, or, for SNLI and MNLI-mm only when asked
  (``--substitute-victim snli-dev``), trains the victim on ``snli_dev_train`` instead.
- TextFooler's NLI attack sets are PTB-tokenized ("ca n't"); the jsonl training text is raw. We
  leave both as released (TextFooler's own victims were trained on the raw text too).
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.errors import BenchError

IMDB_MAX_WORDS = 256  # training reviews are cut here; the victim's tokenizer truncates further
NLI_LABELS = ("entailment", "neutral", "contradiction")
YELP_TRAIN = "yelp/train.csv"
SNLI_TRAIN = "snli_1.0/snli_1.0_train.jsonl"  # bench data fetch snli-1.0 (bench/data/datasets.py)
SNLI_TRAIN_SENTEVAL = "senteval/downstream/SNLI/s1.train"  # SentEval's copy, where it has train
MNLI_TRAIN = "multinli_1.0/multinli_1.0_train.jsonl"  # bench data fetch mnli (bench/data/datasets.py)


@dataclass
class Example:
    inputs: tuple[str, ...]  # one text, or (premise, hypothesis) / (sentence1, sentence2)
    label: int


def _read_lines(path: Path) -> list[str]:
    if not path.is_file():
        raise BenchError(f"Data file {path} is missing. Get it with `bench data fetch` or point "
                         f"BENCH_DATA_DIR at the benchmark data (see docs/data.md).")
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


def _cola(path: Path) -> list[Example]:
    """CoLA's raw release: source, label (0/1), original annotation, sentence; tab-separated, no header."""
    rows = [ln.split("\t") for ln in _read_lines(path) if ln.strip()]
    return [Example((r[3].strip(),), int(r[1])) for r in rows]


def cola_dev(root: Path) -> list[Example]:
    """GLUE's CoLA dev (1,043): the in-domain dev followed by the out-of-domain dev."""
    return _cola(root / "cola/in_domain_dev.tsv") + _cola(root / "cola/out_of_domain_dev.tsv")


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


def cola_train(root: Path, attack: list[Example]) -> list[Example]:
    return _cola(root / "cola/in_domain_train.tsv")


def mrpc_train(root: Path, attack: list[Example]) -> list[Example]:
    return _glue_mrpc(root / "glue_mrpc/train.tsv")


def _pairs_kept(rows, attack: list[Example]) -> list[Example]:
    """(premise, hypothesis, label text) rows with a gold label, minus any attack-set pair."""
    held_out = {(_norm_key(e.inputs[0]), _norm_key(e.inputs[1])) for e in attack}
    out = []
    for a, b, y in rows:
        a, b, y = " ".join(a.split()), " ".join(b.split()), y.strip()
        if y in NLI_LABELS and (_norm_key(a), _norm_key(b)) not in held_out:
            out.append(Example((a, b), NLI_LABELS.index(y)))
    return out


def _senteval_nli(root: Path, split: str, attack: list[Example]) -> list[Example]:
    d = root / "senteval/downstream/SNLI"
    files = [_read_lines(d / f"{name}.{split}") for name in ("s1", "s2", "labels")]
    if len({len(f) for f in files}) != 1:
        raise BenchError(f"{d}: s1/s2/labels.{split} have different line counts; the data are corrupt. "
                         f"Re-fetch with `bench data fetch snli`.")
    return _pairs_kept(zip(*files), attack)


def _nli_jsonl(path: Path, attack: list[Example]) -> list[Example]:
    """SNLI/MultiNLI 1.0 jsonl: sentence1, sentence2, gold_label ("-" = no gold label, dropped)."""
    rows = (json.loads(line) for line in _read_lines(path) if line.strip())
    return _pairs_kept(((r["sentence1"], r["sentence2"], r.get("gold_label", "")) for r in rows), attack)


def snli_dev_train(root: Path, attack: list[Example]) -> list[Example]:
    """The offline substitute: SNLI dev (9,842) minus the attack-set pairs."""
    return _senteval_nli(root, "dev", attack)


def snli_train(root: Path, attack: list[Example]) -> list[Example]:
    if (root / SNLI_TRAIN).is_file():
        return _nli_jsonl(root / SNLI_TRAIN, attack)
    return _senteval_nli(root, "train", attack)


def snli_train_present(root: Path) -> bool:
    return (root / SNLI_TRAIN).is_file() or (root / SNLI_TRAIN_SENTEVAL).is_file()


def mnli_train(root: Path, attack: list[Example]) -> list[Example]:
    return _nli_jsonl(root / MNLI_TRAIN, attack)


def mnli_train_present(root: Path) -> bool:
    return (root / MNLI_TRAIN).is_file()


def yelp_train(root: Path, attack: list[Example]) -> list[Example]:
    path = root / YELP_TRAIN
    with path.open(encoding="utf-8", newline="") as fh:
        return [Example((" ".join(text.replace("\\n", " ").split()),), int(label) - 1)
                for label, text in csv.reader(fh)]


def yelp_train_present(root: Path) -> bool:
    return (root / YELP_TRAIN).is_file()


@dataclass(frozen=True)
class TrainingSet:
    """A victim's training data: its recorded name, its loader, and what to do when it is absent."""

    source: str  # recorded in the victim's card and every row, e.g. "mnli:train"
    load: Callable[[Path, list[Example]], list[Example]]  # (data root, attack examples to keep out)
    present: Callable[[Path], bool] = lambda root: True
    needs: str = ""  # what is missing, in words, for the skip message
    fetch: str = ""  # the `bench data fetch` argument that gets it ("" = no public download we know)
    # A stand-in cut from the attack set itself: the part attacked (the rest trains the victim, via ``load``).
    attacked: Callable[[list[Example]], list[Example]] = lambda examples: examples

    def how_to_get(self) -> str:
        if self.fetch:
            return f"Get it with `bench data fetch {self.fetch}`"
        return "Place the file under BENCH_DATA_DIR"


MR_TRAIN = TrainingSet("mr:train", mr_train)
SST2_TRAIN = TrainingSet("sst2:train", sst2_train)
IMDB_TRAIN = TrainingSet("imdb:train", imdb_train)
MRPC_TRAIN = TrainingSet("mrpc:train", mrpc_train)
COLA_TRAIN = TrainingSet("cola:train", cola_train)
YELP_TRAIN_SET = TrainingSet("yelp:train", yelp_train, yelp_train_present,
                             f"Yelp polarity train ({YELP_TRAIN}, yelp_review_polarity_csv)")
SNLI_TRAIN_SET = TrainingSet("snli:train", snli_train, snli_train_present, f"SNLI train ({SNLI_TRAIN})", "snli-1.0")
MNLI_TRAIN_SET = TrainingSet("mnli:train", mnli_train, mnli_train_present, f"MNLI train ({MNLI_TRAIN})", "mnli")
# Substitutes (only behind --substitute-victim): the offline victim of earlier versions.
SNLI_DEV_SUBSTITUTE = TrainingSet("snli:dev", snli_dev_train)


def even_positions(examples: list[Example]) -> list[Example]:
    return examples[0::2]


def yelp_odd_positions(root: Path, attack: list[Example]) -> list[Example]:
    """Yelp's offline stand-in victim data: the odd positions of TextFooler's 1,000 Yelp examples (500); the
    even positions are attacked (``even_positions``), so no attacked example is trained on."""
    return textfooler_classification("yelp")(root)[1::2]


# Yelp polarity train is not offline: split TextFooler's Yelp set, half to train the victim, half to attack.
YELP_SPLIT_SUBSTITUTE = TrainingSet("yelp:textfooler-set-odd-positions", yelp_odd_positions,
                                    attacked=even_positions)

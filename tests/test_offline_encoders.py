"""The leaderboard's public encoders that are not transformers: mean GloVe vectors and the USE stand-in."""

from __future__ import annotations

import numpy as np
import pytest

from bench.models.offline_encoders import mean_vectors


def test_mean_vectors_average_known_lowercased_words_and_skip_the_rest():
    index = {"good": 0, "film": 1, "isn't": 2}
    matrix = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 2.0]], dtype=np.float32)
    out = mean_vectors(["A GOOD film.", "zzz qqq", "Isn't good"], index, matrix)
    assert np.allclose(out[0], [0.5, 0.5])
    assert np.allclose(out[1], 0.0)  # no known word: the zero vector
    assert np.allclose(out[2], [1.5, 1.0])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["glove-mean", "use-m3"])
def test_the_registered_loaders_encode_and_hash_their_weights(name):
    from bench.models.registry import resolve_model
    from bench.paths import Paths
    from bench.plugins import import_target

    spec = resolve_model(name, Paths.from_env())
    encoder = import_target(spec.loader)(spec)
    vectors = encoder.encode(["a good film", "a great movie", "the stock market fell"])
    assert vectors.shape[0] == 3 and np.isfinite(vectors).all()
    cos = lambda a, b: float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))  # noqa: E731
    assert cos(vectors[0], vectors[1]) > cos(vectors[0], vectors[2])
    assert len(encoder.weights_sha256) == 64

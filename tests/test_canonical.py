"""The canonicalising wrapper (attacks/canonical.py), a positive control: words joined by near-neighbour edges
are written as one representative, stop words never, and the dose (the cosine threshold) sets how far groups
reach."""

from __future__ import annotations

import numpy as np

from attacks.canonical import build, groups

WORDS = ["good", "great", "fine", "bad", "terrible", "the", "movie"]


def _space():
    """Unit vectors: good/great/fine close together, bad/terrible close together, the rest apart."""
    rng = np.random.default_rng(0)
    base = {"good": [1, 0, 0, 0], "bad": [0, 1, 0, 0], "the": [0, 0, 1, 0], "movie": [0, 0, 0, 1]}
    vecs = []
    for w in WORDS:
        near = {"great": ("good", 0.05), "fine": ("good", 0.12), "terrible": ("bad", 0.05)}.get(w)
        v = np.array(base[near[0]], float) + near[1] * rng.normal(size=4) if near else np.array(base[w], float)
        vecs.append(v / np.linalg.norm(v))
    vecs = np.array(vecs)
    cos = vecs @ vecs.T
    nn = np.argsort(-cos, axis=1, kind="stable")
    return vecs, nn


def test_neighbours_above_the_threshold_share_one_representative():
    vecs, nn = _space()
    canon = build(WORDS, vecs, nn, neighbours=6, min_cos=0.95)
    assert canon("A great movie, not terrible.") == "A good movie, not bad."
    assert canon("good") == canon("great")


def test_the_dose_sets_how_far_groups_reach():
    vecs, nn = _space()
    tight, loose = (build(WORDS, vecs, nn, neighbours=6, min_cos=c) for c in (0.999, 0.9))
    assert len(tight.table) < len(loose.table)
    assert build(WORDS, vecs, nn, neighbours=0).table == {}  # no neighbourhood: the encoder itself
    assert tight.fingerprint != loose.fingerprint


def test_stop_words_are_never_merged():
    vecs, nn = _space()
    vecs[WORDS.index("the")] = vecs[WORDS.index("movie")]  # 'the' as close to 'movie' as can be
    canon = build(WORDS, vecs, nn, neighbours=6, min_cos=0.5)
    assert "the" not in canon.table and canon("the movie") == "the movie"


def test_groups_are_transitive_and_rooted_at_the_most_frequent_word():
    vecs, nn = _space()
    roots = groups(vecs, nn, neighbours=6, min_cos=0.9)
    assert roots[WORDS.index("fine")] == roots[WORDS.index("great")] == WORDS.index("good")

import json
import random

import numpy as np
import pytest

from bench.encoder import Encoder, load_hf
from bench.finetune import (FinetuneConfig, FinetunedClassifier, Labelled, finetune, load_or_finetune, mix,
                            victim_dir)
from bench.paths import Paths

FAST = FinetuneConfig(seed=0, lr=1e-3, head_lr=1e-2, batch_size=8, epochs=4, max_len=32, warmup_ratio=0.0)


def sentiment_set(n: int, seed: int = 0) -> Labelled:
    """Label 1 iff the sentence says 'good': learnable by a tiny model in a few steps."""
    rng = random.Random(seed)
    nouns = ["movie", "film", "plot", "story", "actor"]
    texts, labels = [], []
    for i in range(n):
        label = i % 2
        texts.append(f"the {rng.choice(nouns)} was {'good' if label else 'bad'}")
        labels.append(label)
    return Labelled(texts, labels, "toy:train")


def pair_set(n: int) -> Labelled:
    """Pairs: label 1 iff both sentences name the same animal."""
    animals = ["dog", "cat"]
    inputs, labels = [], []
    for i in range(n):
        a, b = animals[i % 2], animals[(i // 2) % 2]
        inputs.append((f"a {a} is running", f"the {b} is sitting"))
        labels.append(int(a == b))
    return Labelled(inputs, labels, "toy:pairs")


@pytest.fixture
def encoder(tiny_bert_dir):
    model, tokenizer = load_hf(str(tiny_bert_dir))
    return Encoder(model, tokenizer, pooler="avg", max_len=32, device="cpu", name="tiny")


def test_loss_drops_and_encoder_weights_untouched(encoder):
    before = encoder.weights_sha256
    clf, stats = finetune(encoder.model, encoder.tokenizer, "avg", 2, sentiment_set(64), FAST)
    assert stats["last_loss"] < 0.7 * stats["first_loss"]
    assert clf.accuracy(sentiment_set(20, seed=1)) == 100.0
    encoder.forget()
    assert encoder.weights_sha256 == before  # the backbone was copied, not trained in place


def test_pairs_train_and_predict(encoder):
    clf, stats = finetune(encoder.model, encoder.tokenizer, "cls_before_pooler", 2, pair_set(64), FAST)
    assert stats["last_loss"] < stats["first_loss"]
    logits = clf.predict_logits(pair_set(8).inputs)
    assert logits.shape == (8, 2) and logits.dtype == np.float32


def test_predict_logits_is_order_and_batch_invariant(encoder):
    clf, _ = finetune(encoder.model, encoder.tokenizer, "avg", 3, Labelled(
        ["a", "b c", "d e f"], [0, 1, 2], "x"), FinetuneConfig(batch_size=2, max_len=16))
    texts = ["the movie was good", "a dog", "a man is playing the guitar in the park", "a dog"]
    full = clf.predict_logits(texts, batch_size=4)
    one_by_one = np.concatenate([clf.predict_logits([t], batch_size=1) for t in texts])
    np.testing.assert_allclose(full, one_by_one, atol=1e-5)
    np.testing.assert_array_equal(full[1], full[3])


def test_save_load_round_trip_gives_identical_logits(encoder, tmp_path):
    clf, _ = finetune(encoder.model, encoder.tokenizer, "avg", 2, sentiment_set(16), FAST)
    clf.card = {"pooler": "avg", "num_labels": 2, "hyperparameters": {"dropout": FAST.dropout, "max_len": 32}}
    clf.save(tmp_path / "v")
    back = FinetunedClassifier.load(tmp_path / "v", encoder.model, encoder.tokenizer)
    texts = sentiment_set(10, seed=3).inputs
    np.testing.assert_array_equal(clf.predict_logits(texts), back.predict_logits(texts))


def test_load_rejects_corrupt_weights(encoder, tmp_path):
    from bench.errors import BenchError

    clf, _ = finetune(encoder.model, encoder.tokenizer, "avg", 2, sentiment_set(8), FinetuneConfig(max_len=16))
    clf.card = {"pooler": "avg", "num_labels": 2, "hyperparameters": {"dropout": 0.1, "max_len": 16}}
    clf.save(tmp_path / "v")
    with (tmp_path / "v" / "model.safetensors").open("r+b") as fh:
        fh.seek(-4, 2)
        fh.write(b"\x00\x01\x02\x03")
    with pytest.raises(BenchError, match="sha256"):
        FinetunedClassifier.load(tmp_path / "v", encoder.model, encoder.tokenizer)


def test_cache_is_reused_and_settings_change_retrains(encoder, tmp_path):
    paths = Paths(home=tmp_path / "home", data=tmp_path / "data", results=tmp_path / "results")
    logs = []
    dev = sentiment_set(10, seed=5)
    first = load_or_finetune(encoder, paths, "toy", 2, [sentiment_set(32)], FAST, dev=dev, log=logs.append)
    card = json.loads((victim_dir(paths.home, "tiny", "toy", 0) / "card.json").read_text())
    assert card["training_data"] == [{"source": "toy:train", "available": 32, "used": 32}]
    assert card["hyperparameters"]["epochs"] == 4 and card["base_weights_sha256"] == encoder.weights_sha256
    assert card["dev_accuracy"] == first.accuracy(dev)
    second = load_or_finetune(encoder, paths, "toy", 2, [sentiment_set(32)], FAST, dev=dev, log=logs.append)
    assert any("Reusing" in m for m in logs)
    np.testing.assert_array_equal(first.predict_logits(dev.inputs), second.predict_logits(dev.inputs))
    logs.clear()
    load_or_finetune(encoder, paths, "toy", 2, [sentiment_set(32)], FinetuneConfig(**{**FAST.__dict__, "epochs": 1}),
                     dev=dev, log=logs.append)
    assert any("retraining" in m for m in logs)


def test_mix_caps_with_per_source_counts():
    data, counts = mix([Labelled(["a"] * 10, [0] * 10, "s1"), Labelled(["b"] * 30, [1] * 30, "s2")], cap=20, seed=0)
    assert len(data.inputs) == 20
    assert sum(c["used"] for c in counts) == 20 and [c["available"] for c in counts] == [10, 30]
    again, _ = mix([Labelled(["a"] * 10, [0] * 10, "s1"), Labelled(["b"] * 30, [1] * 30, "s2")], cap=20, seed=0)
    assert again.inputs == data.inputs  # seeded

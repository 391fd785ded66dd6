import json
import random

import numpy as np
import pytest
import torch

from bench.models.encoder import Encoder, load_hf
from bench.finetune import (FinetuneConfig, FinetunedClassifier, FrozenHeadClassifier, FrozenHeadConfig, Labelled,
                            embedding_features, finetune, load_or_finetune, load_or_train_frozen, mix,
                            train_frozen_head)
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


def _victim_dirs(paths, task="toy"):
    return sorted((paths.home / "victims" / "tiny" / task).iterdir())


def test_cache_is_reused_and_keyed_by_everything_that_changes_the_victim(encoder, tmp_path):
    paths = Paths(home=tmp_path / "home", data=tmp_path / "data", results=tmp_path / "results")
    logs = []
    dev = sentiment_set(10, seed=5)
    first = load_or_finetune(encoder, paths, "toy", 2, [sentiment_set(32)], FAST, dev=dev, log=logs.append)
    (directory,) = _victim_dirs(paths)
    assert directory.name.startswith("finetune-seed0-")
    card = json.loads((directory / "card.json").read_text())
    assert card["protocol"] == "finetune"
    assert [{k: d[k] for k in ("source", "available", "used")} for d in card["training_data"]] == \
        [{"source": "toy:train", "available": 32, "used": 32}]
    assert len(card["training_data"][0]["sha256"]) == 64
    assert card["hyperparameters"]["epochs"] == 4 and card["base_weights_sha256"] == encoder.weights_sha256
    assert card["dev_accuracy"] == first.accuracy(dev)
    second = load_or_finetune(encoder, paths, "toy", 2, [sentiment_set(32)], FAST, dev=dev, log=logs.append)
    assert any("Reusing" in m for m in logs)
    np.testing.assert_array_equal(first.predict_logits(dev.inputs), second.predict_logits(dev.inputs))
    # other settings, another seed, other data: each a victim of its own, none overwriting another
    load_or_finetune(encoder, paths, "toy", 2, [sentiment_set(32)], FinetuneConfig(**{**FAST.__dict__, "epochs": 1}),
                     dev=dev, log=logs.append)
    load_or_finetune(encoder, paths, "toy", 2, [sentiment_set(32)], FinetuneConfig(**{**FAST.__dict__, "seed": 1}),
                     dev=dev, log=logs.append)
    other_data = sentiment_set(32, seed=9)  # same count and source name, other sentences
    load_or_finetune(encoder, paths, "toy", 2, [other_data], FAST, dev=dev, log=logs.append)
    names = [p.name for p in _victim_dirs(paths)]
    assert len(names) == 4 and sum(n.startswith("finetune-seed1-") for n in names) == 1
    assert (directory / "card.json").exists()  # the first victim is still there
    logs.clear()
    load_or_finetune(encoder, paths, "toy", 2, [sentiment_set(32)], FAST, dev=dev, log=logs.append)
    assert any("Reusing" in m for m in logs)


def test_frozen_head_learns_and_leaves_the_encoder_untouched(encoder):
    before = encoder.weights_sha256
    cfg = FrozenHeadConfig(seed=0, lr=1e-2, epochs=60, batch_size=16)
    clf, stats = train_frozen_head(encoder, 2, sentiment_set(64), cfg)
    assert stats["last_loss"] < 0.7 * stats["first_loss"] and stats["features"] == 32
    assert clf.accuracy(sentiment_set(20, seed=1)) >= 90.0
    encoder.forget()
    assert encoder.weights_sha256 == before
    # the victim is the encoder's embedding times the head, nothing else
    texts = sentiment_set(6, seed=2).inputs
    emb = encoder.encode(texts)
    ref = emb @ clf.head.weight.detach().numpy().T + clf.head.bias.detach().numpy()
    np.testing.assert_allclose(clf.predict_logits(texts), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(clf(texts), ref, rtol=1e-5, atol=1e-5)  # TextAttack's wrapper contract


def test_frozen_pairs_use_sentence_embedding_features(encoder):
    pairs = pair_set(8).inputs
    feats = embedding_features(encoder, pairs)
    u, v = encoder.encode([a for a, _ in pairs]), encoder.encode([b for _, b in pairs])
    np.testing.assert_allclose(feats, np.concatenate([u, v, np.abs(u - v), u * v], axis=1), rtol=1e-6)
    clf, stats = train_frozen_head(encoder, 2, pair_set(32), FrozenHeadConfig(epochs=5))
    assert stats["features"] == 4 * 32 and stats["pair_features"] == "[u, v, |u-v|, u*v]"
    assert clf.predict_logits([list(p) for p in pairs[:2]]).shape == (2, 2)  # TextAttack may pass lists


def test_frozen_cache_round_trip_and_protocols_side_by_side(encoder, tmp_path):
    paths = Paths(home=tmp_path / "home", data=tmp_path / "data", results=tmp_path / "results")
    dev = sentiment_set(10, seed=5)
    logs = []
    cfg = FrozenHeadConfig(seed=0, epochs=5)
    first = load_or_train_frozen(encoder, paths, "toy", 2, [sentiment_set(32)], cfg, dev=dev, log=logs.append)
    load_or_finetune(encoder, paths, "toy", 2, [sentiment_set(32)], FAST, dev=dev, log=logs.append)
    names = [p.name for p in _victim_dirs(paths)]
    assert [n.split("-seed")[0] for n in names] == ["finetune", "frozen"]
    again = load_or_train_frozen(encoder, paths, "toy", 2, [sentiment_set(32)], cfg, dev=dev, log=logs.append)
    assert isinstance(again, FrozenHeadClassifier) and any("Reusing the frozen" in m for m in logs)
    np.testing.assert_array_equal(first.predict_logits(dev.inputs), again.predict_logits(dev.inputs))
    assert again.card["encoder_max_len"] == 32 and again.card["dev_accuracy"] == first.accuracy(dev)


def test_mix_caps_with_per_source_counts():
    data, counts = mix([Labelled(["a"] * 10, [0] * 10, "s1"), Labelled(["b"] * 30, [1] * 30, "s2")], cap=20, seed=0)
    assert len(data.inputs) == 20
    assert sum(c["used"] for c in counts) == 20 and [c["available"] for c in counts] == [10, 30]
    again, _ = mix([Labelled(["a"] * 10, [0] * 10, "s1"), Labelled(["b"] * 30, [1] * 30, "s2")], cap=20, seed=0)
    assert again.inputs == data.inputs  # seeded


def test_a_corrupt_victim_card_is_retrained_and_a_direct_load_names_the_fix(encoder, tmp_path):
    from bench.errors import BenchError

    paths = Paths(home=tmp_path / "home", data=tmp_path / "data", results=tmp_path / "results")
    logs = []
    load_or_train_frozen(encoder, paths, "toy", 2, [sentiment_set(16)], FrozenHeadConfig(epochs=1), log=logs.append)
    (directory,) = _victim_dirs(paths)
    (directory / "card.json").write_text('{"protocol": "froz')  # half-written
    with pytest.raises(BenchError, match="Delete .* and re-run"):
        FrozenHeadClassifier.load(directory, encoder)
    logs.clear()
    again = load_or_train_frozen(encoder, paths, "toy", 2, [sentiment_set(16)], FrozenHeadConfig(epochs=1),
                                 log=logs.append)
    assert any("corrupt; retraining" in m for m in logs) and not any("Reusing" in m for m in logs)
    assert json.loads((directory / "card.json").read_text())["protocol"] == "frozen"
    assert isinstance(again, FrozenHeadClassifier)


def _weights(clf):
    return {k: v.detach().clone() for k, v in clf.model.state_dict().items()}


def test_an_interrupted_training_resumes_from_its_checkpoint_to_the_same_weights(encoder, tmp_path, monkeypatch):
    """Stopped after step 5 (Ctrl-C, a killed job), a run resumes there: the data order, dropout and the
    optimiser continue as if never stopped, so the classifier equals an uninterrupted run's."""
    import bench.finetune as ft

    data, ckpt = sentiment_set(48), tmp_path / "victim.partial.pt"
    whole, _ = finetune(encoder.model, encoder.tokenizer, "avg", 2, data, FAST)
    real_save = ft._save_checkpoint

    def save_then_stop(path, config, total, parts, losses, *rest):
        real_save(path, config, total, parts, losses, *rest)
        if len(losses) == 5:
            raise KeyboardInterrupt

    monkeypatch.setattr(ft, "_save_checkpoint", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        finetune(encoder.model, encoder.tokenizer, "avg", 2, data, FAST, checkpoint=ckpt, checkpoint_every_s=0)
    monkeypatch.setattr(ft, "_save_checkpoint", real_save)
    logs = []
    resumed, stats = finetune(encoder.model, encoder.tokenizer, "avg", 2, data, FAST, log=logs.append,
                              checkpoint=ckpt, checkpoint_every_s=1e9)
    assert stats["resumed_at_step"] == 5 and any("resuming from the checkpoint at step 5/24" in m for m in logs)
    a, b = _weights(whole), _weights(resumed)
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


def test_a_torn_or_foreign_checkpoint_starts_over(encoder, tmp_path):
    data, ckpt = sentiment_set(48), tmp_path / "victim.partial.pt"
    whole, _ = finetune(encoder.model, encoder.tokenizer, "avg", 2, data, FAST)
    ckpt.write_bytes(b"PK\x03\x04 half a file")
    logs = []
    clf, stats = finetune(encoder.model, encoder.tokenizer, "avg", 2, data, FAST, log=logs.append, checkpoint=ckpt)
    assert "resumed_at_step" not in stats and any("unreadable" in m for m in logs)
    a, b = _weights(whole), _weights(clf)
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    other = FinetuneConfig(**{**FAST.__dict__, "lr": 5e-4})  # a checkpoint of other settings is never resumed
    finetune(encoder.model, encoder.tokenizer, "avg", 2, data, other, checkpoint=ckpt, checkpoint_every_s=0)
    logs.clear()
    _, stats = finetune(encoder.model, encoder.tokenizer, "avg", 2, data, FAST, log=logs.append, checkpoint=ckpt)
    assert "resumed_at_step" not in stats and any("other settings" in m for m in logs)


def test_the_cache_removes_the_checkpoint_once_the_victim_is_saved(encoder, tmp_path, monkeypatch):
    import bench.finetune as ft

    monkeypatch.setattr(ft, "CHECKPOINT_EVERY_S", 0.0)
    paths = Paths(home=tmp_path / "home", data=tmp_path / "data", results=tmp_path / "results")
    saved = []
    real_save = ft._save_checkpoint
    monkeypatch.setattr(ft, "_save_checkpoint", lambda path, *a: (saved.append(path), real_save(path, *a)))
    load_or_finetune(encoder, paths, "toy", 2, [sentiment_set(32)], FAST, log=lambda _: None)
    (directory,) = _victim_dirs(paths)
    assert saved and {p for p in saved} == {ft.partial_path(directory)}
    assert not ft.partial_path(directory).exists() and (directory / "card.json").exists()


def test_a_checkpoint_that_cannot_be_written_costs_only_the_resume_point(encoder, tmp_path, monkeypatch):
    import bench.finetune as ft

    def full_disk(*_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ft, "atomic_write_bytes", full_disk)
    logs = []
    clf, stats = finetune(encoder.model, encoder.tokenizer, "avg", 2, sentiment_set(32), FAST, log=logs.append,
                          checkpoint=tmp_path / "v.partial.pt", checkpoint_every_s=0)
    assert stats["steps"] == 16 and any("No space left" in m and "training goes on" in m for m in logs)
    assert not (tmp_path / "v.partial.pt").exists()

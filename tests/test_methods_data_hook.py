"""The methods' data hook: TrainContext, ``training_data`` and ``collate``, with every existing
method keeping its behaviour (batches, fingerprints) and version-2 methods getting a new fingerprint."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from bench.errors import BenchError  # noqa: E402
from bench.methods import METHODS, get_method  # noqa: E402
from bench.methods.base import TrainContext, sentence_data  # noqa: E402

SENTENCE_METHODS = [m for m in METHODS if get_method(m).unlabeled_sentences]
# the methods that batch sentences with the trainer's default collate (the oracle control builds its own views)
DEFAULT_COLLATE = [m for m in SENTENCE_METHODS if "collate" not in vars(get_method(m))]


def fixed_job(method: str, method_config: dict):
    from bench.train import TrainConfig, TrainJob

    return TrainJob(name="x", method=method, backbone="/models/tiny", base="tiny", pooler="avg", profile="smoke",
                    train=TrainConfig(batch_size=4, max_steps=4), method_config=method_config,
                    data_path=Path("/data/c.txt"), dev_dir=None)


def test_fingerprints_of_running_studies_do_not_change():
    """SimCSE and RobustEmbed checkpoints are being trained with resume guarded by these fingerprints: the
    values are what the trainer before the data hook (main at 4a29d42) computed for the same jobs."""
    assert fixed_job("simcse", {}).fingerprint("0" * 64) == "999edc9c72e03887"
    robustembed = fixed_job("robustembed", {"pgd_steps": 2, "fgsm_steps": 2})
    assert robustembed.fingerprint("0" * 64) == "060903f3587734b1"
    assert robustembed.fingerprint("0" * 64, "float32", get_method("robustembed").version) == "060903f3587734b1"


def test_a_new_method_version_changes_the_fingerprint():
    """V-advCSE version 2 computes another loss: a run started under version 1 must not be resumed by it."""
    job = fixed_job("vadvcse", {})
    assert get_method("vadvcse").version == 2
    assert (job.fingerprint("0" * 64, method_version=2) != job.fingerprint("0" * 64, method_version=1)
            == job.fingerprint("0" * 64))


@pytest.mark.parametrize("method", DEFAULT_COLLATE)
def test_default_collate_is_the_trainers_former_tokenizer_call(method, tiny_bert_dir):
    from bench.models.encoder import load_hf

    _, tok = load_hf(str(tiny_bert_dir))
    cls = get_method(method)
    ctx = TrainContext(tokenizer=tok, max_len=6)
    texts = ["a man is playing guitar in the park", "the movie was great", "what"]
    instance = object.__new__(cls)  # collate needs only the context, not the method's modules
    instance.ctx = ctx
    batch = instance.collate(texts)
    expected = tok(texts, padding=True, truncation=True, max_length=6, return_tensors="pt")
    assert batch.keys() == expected.keys()
    assert all(torch.equal(batch[k], expected[k]) for k in expected)


def test_sentence_data_reads_lines_and_hashes_the_file(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("first sentence\n\n  second one  \n")
    data = sentence_data(path)
    import hashlib

    assert data.examples == ["first sentence", "second one"]
    assert data.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert data.card == {"path": str(path), "sha256": data.sha256, "sentences": 2}
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(BenchError, match="no sentences"):
        sentence_data(tmp_path / "empty.txt")


def test_unlabeled_methods_need_a_sentence_file():
    with pytest.raises(BenchError, match="--data"):
        get_method("simcse").training_data(get_method("simcse").Config(), TrainContext())


def test_the_trainer_hands_every_method_its_context(tiny_bert_dir, tmp_path, monkeypatch):
    """run_training builds the TrainContext (tokenizer, home, data root, resources) and the method keeps it."""
    from bench.methods.simcse import SimCSE
    from bench.train import TrainConfig, TrainJob, run_training

    seen = {}
    original = SimCSE.loss

    def spy(self, batch, step):
        seen["ctx"] = self.ctx
        return original(self, batch, step)

    monkeypatch.setattr(SimCSE, "loss", spy)
    data = tmp_path / "c.txt"
    data.write_text("\n".join(f"a man is playing guitar number {i}" for i in range(8)) + "\n")
    job = TrainJob(name="ctx", method="simcse", backbone=str(tiny_bert_dir), base="tiny", pooler="avg",
                   profile="smoke", train=TrainConfig(batch_size=4, max_steps=1, eval_every=0, log_every=0),
                   method_config={}, data_path=data, dev_dir=None, device="cpu", data_root=tmp_path)
    card = run_training(job, tmp_path / "home", log=lambda m: None)
    ctx = seen["ctx"]
    assert ctx.tokenizer is not None and ctx.max_len == 32 and ctx.home == tmp_path / "home"
    assert ctx.data_root == tmp_path and ctx.data_path == data and ctx.resources is not None
    assert card["data"] == {"path": str(data), "sha256": card["data"]["sha256"], "sentences": 8}
    assert card["method_version"] == 1 and card["method_resources"] == {}

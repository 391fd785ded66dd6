"""Supervised SimCSE (bench/methods/sup_simcse.py): NLI triples through the data hook, Eq. 5 with hard
negatives, pooling, and training through the shared trainer on tiny SNLI/ANLI fixtures."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from bench.errors import BenchError  # noqa: E402
from bench.methods import get_method  # noqa: E402
from bench.methods.base import TrainContext, info_nce  # noqa: E402
from bench.methods.sup_simcse import nli_triples, read_simcse_csv  # noqa: E402

SNLI = [  # premise, hypothesis, label (SentEval's SNLI layout: s1, s2, labels)
    ("a man is playing guitar", "a man is playing music", "entailment"),
    ("a man is playing guitar", "a man is sleeping", "contradiction"),
    ("a man is playing guitar", "a man is on the street", "neutral"),
    ("a dog is running in the park", "a dog is running", "entailment"),
    ("a dog is running in the park", "a cat is sitting", "contradiction"),
    ("a woman is eating food", "a woman is happy", "neutral"),  # no entailment: no triple
    ("the movie was great", "the film was great", "entailment"),
    ("the movie was great", "the movie was terrible", "contradiction"),
    ("a child is happy", "a child is sad", "contradiction"),
    ("a child is happy", "the child is happy", "entailment"),
]
ANLI = [  # context, hypothesis, label (e/n/c)
    ("the plot was boring", "the story was boring", "e"),
    ("the plot was boring", "the plot was fun", "c"),
    ("the plot was boring", "the plot was long", "n"),
    ("the plot was boring", "it was dull", "e"),  # a second entailment without a second contradiction
]


@pytest.fixture
def nli_root(tmp_path, monkeypatch):
    """A data root with SNLI (SentEval layout, dev and test) and ANLI R1-R3 dev/test fixtures, registered
    as the real datasets (sizes and hashes of these files)."""
    from tests.conftest import register_fixture_dataset

    root = tmp_path / "data"
    snli = root / "senteval" / "downstream" / "SNLI"
    snli.mkdir(parents=True)
    for split, rows in (("dev", SNLI), ("test", SNLI[:5])):
        for name, column in (("s1", 0), ("s2", 1), ("labels", 2)):
            (snli / f"{name}.{split}").write_text("".join(r[column] + " \n" for r in rows))
    for round_name in ("R1", "R2", "R3"):
        directory = root / "anli" / round_name
        directory.mkdir(parents=True)
        for split in ("dev", "test"):
            (directory / f"{split}.jsonl").write_text("".join(
                json.dumps({"uid": str(i), "context": c, "hypothesis": h, "label": label}) + "\n"
                for i, (c, h, label) in enumerate(ANLI)))
    register_fixture_dataset(monkeypatch, root, "snli", "senteval/downstream/SNLI")
    register_fixture_dataset(monkeypatch, root, "anli", "anli")
    return root


def test_triples_pair_entailments_with_contradictions_of_the_same_premise():
    pairs = [(p, h, {"e": "entailment", "c": "contradiction", "n": "neutral"}.get(label, label))
             for p, h, label in SNLI + ANLI]
    assert nli_triples(pairs) == [
        ("a man is playing guitar", "a man is playing music", "a man is sleeping"),
        ("a dog is running in the park", "a dog is running", "a cat is sitting"),
        ("the movie was great", "the film was great", "the movie was terrible"),
        ("a child is happy", "the child is happy", "a child is sad"),  # the order of labels does not matter
        ("the plot was boring", "the story was boring", "the plot was fun"),  # 'it was dull' has no partner
    ]


def test_training_data_builds_triples_from_the_offline_splits_and_records_them(nli_root):
    cls = get_method("sup-simcse")
    assert not cls.unlabeled_sentences
    data = cls.training_data(cls.Config(), TrainContext(data_root=nli_root))
    # SNLI dev 4 triples + SNLI test (first 5 rows) 2 + ANLI dev 1 per round x 3; ANLI test held out
    assert len(data.examples) == 9 and data.card["triples"] == 9
    counts = [(s["dataset"], s["split"], s.get("round"), s["pairs"], s["triples"]) for s in data.card["sources"]]
    assert counts == [("snli", "dev", None, 10, 4), ("snli", "test", None, 5, 2), ("anli", "dev", "R1", 4, 1),
                      ("anli", "dev", "R2", 4, 1), ("anli", "dev", "R3", 4, 1)]
    assert data.sha256 == data.card["sha256"] and "9 NLI triples" in data.summary
    only_snli = cls.training_data(cls.Config(nli_splits="snli:dev"), TrainContext(data_root=nli_root))
    assert len(only_snli.examples) == 4 and only_snli.sha256 != data.sha256
    with pytest.raises(BenchError, match="snli:dev"):
        cls.Config(nli_splits="mnli:train")


def test_a_simcse_csv_replaces_the_offline_splits(tmp_path):
    path = tmp_path / "nli_for_simcse.csv"
    path.write_text('sent0,sent1,hard_neg\n"a man, playing",a man plays,nobody plays\nx,y,z\n')
    assert read_simcse_csv(path) == [("a man, playing", "a man plays", "nobody plays"), ("x", "y", "z")]
    cls = get_method("sup-simcse")
    data = cls.training_data(cls.Config(), TrainContext(data_path=path))
    assert data.card["sources"] == [{"path": str(path), "format": "simcse-csv", "triples": 2}]
    (tmp_path / "bad.csv").write_text("premise,hypothesis\na,b\n")
    with pytest.raises(BenchError, match="sent0, sent1, hard_neg"):
        read_simcse_csv(tmp_path / "bad.csv")


def make(tiny_bert_dir, pooler="avg", **cfg):
    from bench.models.encoder import load_hf

    torch.manual_seed(0)
    model, tok = load_hf(str(tiny_bert_dir))
    model.train()
    cls = get_method("sup-simcse")
    return cls(cls.Config(**cfg), model, pooler, TrainContext(tokenizer=tok, max_len=32)), tok


def test_loss_is_eq5_with_in_batch_and_hard_negatives(tiny_bert_dir):
    method, tok = make(tiny_bert_dir)
    triples = [t for t in nli_triples(SNLI)]
    batch = method.collate(triples)
    assert batch["input_ids"].shape[0] == 3 * len(triples)  # premises, entailments, contradictions
    torch.manual_seed(5)
    loss, logs = method.loss(batch, 0)
    torch.manual_seed(5)  # the same dropout masks: one forward over all 3B sentences
    z = method.project(method.embed(batch)[0])
    h, pos, neg = z.split(len(triples))
    n = torch.nn.functional.normalize
    logits = n(h) @ torch.cat([n(pos), n(neg)]).T / 0.05  # [B, 2B]: every entailment and contradiction
    expected = torch.nn.functional.cross_entropy(logits, torch.arange(len(triples)))
    assert float(loss.detach()) == pytest.approx(float(expected), rel=1e-5)
    assert float(loss.detach()) == pytest.approx(float(info_nce(h, [pos], 0.05, negatives=[neg])), rel=1e-6)
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in method.model.parameters() if p.grad is not None)


def test_cls_pooler_trains_the_encoders_own_pooler_as_the_mlp(tiny_bert_dir):
    """The paper keeps [CLS] + MLP at evaluation: with the `cls` pooler the encoder's dense+tanh pooler is
    that MLP (trained, exported); other poolers get SimCSE's training-only MLP."""
    with_cls, _ = make(tiny_bert_dir, pooler="cls")
    assert "mlp" not in with_cls.modules
    loss, _ = with_cls.loss(with_cls.collate(nli_triples(SNLI)), 0)
    loss.backward()
    assert with_cls.model.pooler.dense.weight.grad.abs().sum() > 0
    with_avg, _ = make(tiny_bert_dir, pooler="avg")
    assert "mlp" in with_avg.modules


def test_sup_simcse_trains_through_the_trainer_and_its_card_records_the_data(tiny_bert_dir, tmp_path, nli_root):
    from bench.paths import Paths
    from bench.train import build_job, run_training

    paths = Paths(home=tmp_path / "home", data=nli_root, results=tmp_path / "results")
    job = build_job("sup-simcse", str(tiny_bert_dir), "smoke", paths, name="sup-tiny", device="cpu",
                    settings={"max_steps": 3, "eval_every": 0, "batch_size": 3, "log_every": 0})
    assert job.data_path is None and job.data_root == nli_root  # its own data, not the wiki sentences
    logs = []
    assert run_training(job, paths.home, log=logs.append, stop_after=1) == {"stopped_at": 1}
    card = run_training(job, paths.home, log=logs.append)
    assert any("Resuming" in line for line in logs) and any("9 NLI triples" in line for line in logs)
    assert card["method"] == "sup-simcse" and card["steps"] == 3
    assert card["data"]["triples"] == 9 and card["data"]["sources"][0]["dataset"] == "snli"
    assert card["open_choices"]["data"] and card["method_config"]["nli_splits"] == "snli:dev,snli:test,anli:dev"
    assert (paths.home / "models" / "sup-tiny" / "model.safetensors").exists()


def test_registered_as_the_seventh_method():
    from bench.models.registry import MODELS

    spec = MODELS["sup-simcse-minilm"]
    assert (spec.method, spec.base, spec.profile) == ("sup-simcse", "minilm", "smoke")
    paper = get_method("sup-simcse").training["paper"]
    assert (paper["batch_size"], paper["lr"], paper["epochs"]) == (512, 5e-5, 3)

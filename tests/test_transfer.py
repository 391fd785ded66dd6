"""SentEval transfer suite: the classifier protocol, the loaders, the external-batcher adapter."""

from __future__ import annotations

import copy
import json
import os
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest

from bench.errors import BenchError
from bench.protocols import protocol
from suites import senteval_classifier as sc
from suites import transfer

TINY = sc.ClassifierConfig(kfold=3, optim="rmsprop", batch_size=16, tenacity=2, epoch_size=1, max_epoch=20)


def blobs(n: int, d: int = 8, seed: int = 0, gap: float = 6.0):
    """Two well separated Gaussian clouds (linearly separable with a wide margin)."""
    rng = np.random.RandomState(seed)
    y = np.arange(n) % 2
    X = rng.randn(n, d).astype(np.float32)
    X[:, 0] += np.where(y == 1, gap, -gap)
    return X, y


# --- folds ----------------------------------------------------------------------------------------

def test_folds_are_stratified_partitions_and_seeded():
    y = np.array([0] * 70 + [1] * 30)
    folds = sc.stratified_folds(y, 5, seed=1111)
    tested = np.concatenate([test for _, test in folds])
    assert sorted(tested.tolist()) == list(range(100))  # every example tested exactly once
    for train, test in folds:
        assert set(train).isdisjoint(test)
        assert (y[test] == 1).sum() == 6 and (y[test] == 0).sum() == 14  # class ratio kept in every fold
    again = sc.stratified_folds(y, 5, seed=1111)
    other = sc.stratified_folds(y, 5, seed=1112)
    assert all((a[1] == b[1]).all() for a, b in zip(folds, again))
    assert any(not np.array_equal(a[1], b[1]) for a, b in zip(folds, other))


def test_too_few_examples_for_kfold_is_a_bench_error():
    with pytest.raises(BenchError, match="--limit"):
        sc.stratified_folds(np.array([0, 1, 0, 1]), 5, seed=0)


# --- the classifier equals SentEval's PyTorchClassifier.fit --------------------------------------

def senteval_fit(X, y, Xdev, ydev, reg, proto, nclasses, seed):
    """SentEval's MLP(nhid=0).fit with validation_data, written the way SentEval writes it."""
    import torch

    rng = np.random.RandomState(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = torch.nn.Linear(X.shape[1], nclasses)
    optim = {"adam": torch.optim.Adam, "rmsprop": torch.optim.RMSprop}[proto.optim]
    opt = optim(model.parameters(), weight_decay=reg)
    loss_fn = torch.nn.CrossEntropyLoss()
    Xt, yt = torch.from_numpy(X), torch.from_numpy(y)
    best, best_model, fails, nepoch, stop = -1.0, None, 0, 0, False
    while not stop and nepoch <= proto.max_epoch:
        for _ in range(proto.epoch_size):
            perm = rng.permutation(len(X))
            for i in range(0, len(X), proto.batch_size):
                idx = torch.from_numpy(perm[i:i + proto.batch_size])
                loss = loss_fn(model(Xt[idx]), yt[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        nepoch += proto.epoch_size
        with torch.no_grad():
            acc = float((model(torch.from_numpy(Xdev)).argmax(1).numpy() == ydev).mean())
        if acc > best:
            best, best_model = acc, copy.deepcopy(model)
        else:
            if fails >= proto.tenacity:
                stop = True
            fails += 1
    return best, best_model


@pytest.mark.parametrize("optim", ["adam", "rmsprop"])
def test_joint_grid_fit_equals_separate_senteval_fits(optim):
    rng = np.random.RandomState(3)
    X = rng.randn(120, 6).astype(np.float32)
    y = (X[:, 0] + 0.8 * rng.randn(120) > 0).astype(np.int64)  # noisy: accuracy moves between rounds
    Xdev, ydev = X[:40], y[:40]
    proto = sc.ClassifierConfig(kfold=2, optim=optim, batch_size=16, tenacity=2, epoch_size=1, max_epoch=8)
    regs = [1e-5, 1e-1]
    acc, models = sc.fit(X[40:], y[40:], regs, proto, 2, seed=7, validation=(Xdev, ydev))
    for col, reg in enumerate(regs):
        ref_acc, ref = senteval_fit(X[40:], y[40:], Xdev, ydev, reg, proto, 2, seed=7)
        assert acc[col] == pytest.approx(ref_acc)
        np.testing.assert_allclose(models.weight[:, col].numpy(), ref.weight.detach().T.numpy(), atol=1e-5)
        np.testing.assert_allclose(models.bias[0, col].numpy(), ref.bias.detach().numpy(), atol=1e-5)


# --- protocol outcomes ------------------------------------------------------------------------

def test_linearly_separable_fixture_scores_100_in_every_scheme():
    X, y = blobs(90)
    assert sc.inner_kfold(X, y, 2, TINY, seed=1111).test_acc == 100.0
    Xte, yte = blobs(30, seed=1)
    out = sc.kfold(X, y, Xte, yte, 2, TINY, seed=1111)
    assert out.test_acc == 100.0 and out.dev_acc == 100.0
    assert (out.predictions == yte).all()
    Xdv, ydv = blobs(30, seed=2)
    assert sc.split(X, y, Xdv, ydv, Xte, yte, 2, TINY, seed=1111).test_acc == 100.0


def test_random_labels_score_near_chance():
    rng = np.random.RandomState(5)
    X = rng.randn(600, 8).astype(np.float32)
    y = rng.randint(0, 2, 600)
    out = sc.inner_kfold(X, y, 2, TINY, seed=1111)
    assert 38.0 <= out.test_acc <= 62.0


def test_same_seed_gives_identical_numbers_other_seed_other_folds():
    rng = np.random.RandomState(9)
    X = rng.randn(150, 6).astype(np.float32)
    y = (X[:, 0] + rng.randn(150) > 0).astype(int)
    first = sc.inner_kfold(X, y, 2, TINY, seed=1111)
    second = sc.inner_kfold(X, y, 2, TINY, seed=1111)
    assert (first.dev_acc, first.test_acc, first.test_std, first.l2) == \
           (second.dev_acc, second.test_acc, second.test_std, second.l2)
    third = sc.inner_kfold(X, y, 2, TINY, seed=1112)
    assert (first.dev_acc, first.test_acc) != (third.dev_acc, third.test_acc)


def test_modes_are_senteval_published_configs():
    assert sc.MODES["test"] == sc.ClassifierConfig(kfold=10, optim="adam", batch_size=64, tenacity=5, epoch_size=4)
    assert sc.MODES["fasttest"] == sc.ClassifierConfig(kfold=5, optim="rmsprop", batch_size=128, tenacity=3, epoch_size=2)
    assert sc.L2_GRID == (1e-5, 1e-4, 1e-3, 1e-2)
    with pytest.raises(BenchError, match="--mode"):
        sc.classifier_config("quick")


# --- loaders on tiny fixtures ------------------------------------------------------------------

def test_mrpc_rows_and_pair_features(tmp_path):
    (tmp_path / "msr_paraphrase_train.txt").write_text(
        "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
        "1\t1\t2\tThe cat sat .\tA cat sat down .\n"
        "0\t3\t4\tShares fell 5 % .\tIt rained .\n", encoding="utf-8")
    a, b, y = transfer.parse_mrpc((tmp_path / "msr_paraphrase_train.txt").read_text(encoding="utf-8").splitlines())
    assert a == [["The", "cat", "sat", "."], ["Shares", "fell", "5", "%", "."]]
    assert b[1] == ["It", "rained", "."] and y == [1, 0]
    u = np.array([[1.0, -2.0], [0.5, 3.0]], dtype=np.float32)
    v = np.array([[3.0, 1.0], [0.5, -1.0]], dtype=np.float32)
    np.testing.assert_array_equal(transfer.features_senteval(u, v), [[2, 3, 3, -2], [0, 4, 0.25, -3]])
    np.testing.assert_array_equal(transfer.features_infersent(u, v)[0], [1, -2, 3, 1, 2, 3, 3, -2])
    assert transfer.TASKS[-1].pair_features(u, v).shape == (2, 4)  # the MRPC task uses SentEval's [|u-v|, u*v]


def test_trec_coarse_labels_and_tokens(tmp_path):
    lines = ["DESC:manner How did serfdom develop ?", "NUM:date When was it ?", "ABBR:exp What is AIDS ?",
             "HUM:ind Who was he ?", "LOC:city Where is it ?", "ENTY:animal What bird ?"]
    X, y = transfer.parse_trec(lines)
    assert y == [1, 5, 0, 3, 4, 2]
    assert X[0] == ["How", "did", "serfdom", "develop", "?"]  # the fine label is dropped
    with pytest.raises(BenchError, match="unknown class"):
        transfer.parse_trec(["COLOR:red What colour ?"])
    (tmp_path / "train_5500.label").write_bytes("\n".join(lines).encode("latin-1"))
    (tmp_path / "TREC_10.label").write_bytes("NUM:count How many caf\xe9s ?\n".encode("latin-1"))
    data = transfer.TASKS[5].load(tmp_path, None)
    assert data["test"] == [[["How", "many", "caf\xe9s", "?"]], [5]]
    assert [len(s) for s in data["train"][0]] == sorted(len(s) for s in X)  # SentEval's length sort


def test_binary_limit_keeps_both_classes(tmp_path):
    (tmp_path / "rt-polarity.pos").write_text("\n".join(f"good film {i}" for i in range(10)))
    (tmp_path / "rt-polarity.neg").write_text("\n".join(f"bad film {i}" for i in range(10)))
    sentences, labels = transfer.TASKS[0].load(tmp_path, 6)
    assert sorted(labels) == [0, 0, 0, 1, 1, 1]


# --- the whole suite through an external SentEval batcher ---------------------------------------

TOY_ENCODER = '''
import zlib
import numpy as np
from bench.models.senteval_adapter import BatcherEncoder

CALLS = {"batcher": 0, "prepare": 0}


def prepare(params, samples):
    CALLS["prepare"] += 1
    params.vocab_size = len({w for s in samples for w in s})


def batcher(params, batch):
    CALLS["batcher"] += 1
    out = np.zeros((len(batch), params.dim), dtype=np.float32)
    for i, tokens in enumerate(batch):
        for w in tokens:
            out[i, zlib.crc32(w.encode()) % params.dim] += 1.0
    return out


def build(spec, device="cpu", batch_size=64):
    return BatcherEncoder(batcher, prepare=prepare, params={"dim": 64}, name=spec.name,
                          batch_size=batch_size, fingerprint="toy-v1")
'''


def _bucket(word: str) -> int:
    return zlib.crc32(word.encode()) % 64


def write_senteval_fixture(root: Path) -> None:
    """All seven tasks in SentEval's layout; label words 'good'/'bad' decide the class."""
    assert _bucket("good") != _bucket("bad")
    rng = np.random.RandomState(0)
    filler = ["the", "film", "plot", "actor", "story", "music", "scene", "ending"]

    def sentence(label: int) -> str:
        # The label word three times: SentEval's early stopping on tiny folds keeps barely trained models.
        return " ".join(["good" if label else "bad"] * 3 + list(rng.choice(filler, rng.randint(2, 6))))

    for sub, (f1, f0) in {"MR": ("rt-polarity.pos", "rt-polarity.neg"), "CR": ("custrev.pos", "custrev.neg"),
                          "SUBJ": ("subj.objective", "subj.subjective"), "MPQA": ("mpqa.pos", "mpqa.neg")}.items():
        (root / sub).mkdir(parents=True)
        (root / sub / f1).write_text("\n".join(sentence(1) for _ in range(30)) + "\n")
        (root / sub / f0).write_text("\n".join(sentence(0) for _ in range(30)) + "\n")
    (root / "SST" / "binary").mkdir(parents=True)
    for part, n in (("train", 80), ("dev", 20), ("test", 20)):
        labels = np.arange(n) % 2
        (root / "SST" / "binary" / f"sentiment-{part}").write_text(
            "".join(f"{sentence(int(lab))} \t{lab}\n" for lab in labels))
    (root / "TREC").mkdir()
    classes = list(transfer.TREC_CLASSES)
    for name, n in (("train_5500.label", 90), ("TREC_10.label", 24)):
        (root / "TREC" / name).write_text("".join(
            f"{classes[i % 6]}:x {' '.join([classes[i % 6].lower()] * 3)} what {rng.choice(filler)} ?\n" for i in range(n)))
    (root / "MRPC").mkdir()
    for part, n in (("train", 80), ("test", 20)):
        rows = ["\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        for i in range(n):
            label = i % 2
            a = sentence(1)
            rows.append(f"{label}\t{i}\t{i + 1000}\t{a}\t{a if label else sentence(0)}")
        (root / "MRPC" / f"msr_paraphrase_{part}.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")


@pytest.fixture
def toy_run(tmp_path, monkeypatch):
    from bench.paths import Paths
    from bench.models.registry import ModelSpec
    from suites.base import RunContext

    module = f"toy_senteval_{os.getpid()}_{len(sys.modules)}"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(TOY_ENCODER))
    monkeypatch.syspath_prepend(str(tmp_path))
    data = tmp_path / "data"
    write_senteval_fixture(data)
    folders = {"mr": "MR", "cr": "CR", "subj": "SUBJ", "mpqa": "MPQA", "sst2": "SST/binary", "trec": "TREC",
               "mrpc": "MRPC"}
    # The fixture is tiny, so the size check against the real data's reference list is skipped.
    monkeypatch.setattr(transfer, "require", lambda root, name: root / folders[name])
    paths = Paths(home=tmp_path / "home", data=data, results=tmp_path / "results")
    spec = ModelSpec(name="toy-senteval", backbone="", pooler="external", loader=f"{module}:build")

    def run(overwrite="only-missing", mode="fasttest", tasks=None):
        from bench.models.encoder import Encoder
        from bench.runner import run_suite

        encoder = Encoder.from_spec(spec, device="cpu", batch_size=16)
        # the fixture is not the reference data: its content is fingerprinted, not checked
        ctx = RunContext(paths=paths, overwrite=overwrite, options={"mode": mode}, log=lambda *_: None,
                         allow_unverified_data=True)
        return encoder, run_suite(transfer.SUITE, spec, ctx, encoder, tasks)

    return run, module


def test_suite_runs_end_to_end_through_an_external_batcher(toy_run):
    run, module = toy_run
    encoder, outcomes = run()
    from bench.models.senteval_adapter import BatcherEncoder

    assert isinstance(encoder, BatcherEncoder)
    rows = [r for o in outcomes for r in o.rows]
    acc = {r["task"]: r for r in rows if r["metric"] == "acc" and r["task"] != "avg"}
    assert set(acc) == {"mr", "cr", "subj", "mpqa", "sst2", "trec", "mrpc"}
    for name in ("mr", "cr", "subj", "mpqa", "sst2", "trec"):  # chance: 50 (TREC 16.7); the label word is a feature
        assert acc[name]["value"] >= 70.0, (name, acc[name]["value"])
    assert acc["mr"]["n"] == 60 and acc["sst2"]["n"] == 20 and acc["trec"]["n"] == 24 and acc["mrpc"]["n"] == 20
    assert acc["mr"]["aggregation"] == "kfold-mean" and acc["mr"]["std"] is not None
    dev = {r["task"]: r for r in rows if r["metric"] == "dev_acc"}
    assert dev["sst2"]["split"] == "dev" and dev["sst2"]["n"] == 20 and dev["trec"]["n"] == 90
    assert any(r["task"] == "mrpc" and r["metric"] == "f1" for r in rows)
    averages = {r["aggregation"]: r for r in rows if r["task"] == "avg"}
    six = [acc[t]["value"] for t in protocol("robustembed-table2").averaged]
    assert averages["mean-of-6-tasks"]["value"] == pytest.approx(round(float(np.mean(six)), 2))
    assert averages["mean-of-7-tasks"]["n"] == 7 and averages["mean-of-6-tasks"]["n"] == 6
    assert json.loads(averages["mean-of-6-tasks"]["config"])["average_of"] == sorted(protocol("robustembed-table2").averaged)
    config = json.loads(acc["mr"]["config"])
    assert config["mode"] == "fasttest" and config["classifier"]["kfold"] == 5
    assert config["classifier_seed"] == 1111
    assert json.loads(acc["sst2"]["config"])["train"].startswith("GLUE SST-2 phrase train")
    assert sys.modules[module].CALLS["prepare"] == 7  # SentEval's do_prepare, once per task


def test_embeddings_persist_so_a_rerun_encodes_nothing(toy_run):
    run, module = toy_run
    run(tasks=["cr", "trec"])
    calls = dict(sys.modules[module].CALLS)
    assert calls["batcher"] > 0
    _, outcomes = run(overwrite="always", tasks=["cr", "trec"])  # a new encoder, recomputed cells
    assert sys.modules[module].CALLS["batcher"] == calls["batcher"]  # every embedding came from disk
    assert [o.task for o in outcomes] == ["cr", "trec"] and not any(o.cached for o in outcomes)


def test_default_mode_and_explicit_default_share_every_cell(toy_run):
    run, _ = toy_run
    _, first = run(mode="test")
    _, second = run(mode=None)  # no --mode: the suite's default, "test"
    assert any(o.task == "avg" for o in second)
    assert all(o.cached for o in second)
    assert {o.path for o in first} == {o.path for o in second}


def test_batcher_encoder_checks_the_batcher_output():
    from bench.models.senteval_adapter import BatcherEncoder

    enc = BatcherEncoder(lambda params, batch: np.zeros((1, 3)), name="bad")
    with pytest.raises(BenchError, match="one row per sentence"):
        enc.encode(["a b", "c d e"])
    good = BatcherEncoder(lambda params, batch: np.array([[len(t), 1.0] for t in batch]), batch_size=2)
    out = good.encode(["a b c", "a", "a b c", "x y"])
    np.testing.assert_array_equal(out[:, 0], [3, 1, 3, 2])
    assert good.stats == {"encoded": 3, "cache_hits": 1}
    np.testing.assert_array_equal(good.batcher(None, [["a", "b", "c"]]), [[3, 1]])


# --- the real data (slow: reads BENCH_DATA_DIR) -------------------------------------------------

@pytest.mark.slow
def test_real_senteval_files_load_with_the_canonical_counts():
    from bench.data.datasets import require
    from bench.paths import Paths

    root = Paths.from_env().data
    counts = {}
    for task in transfer.TASKS:
        data = task.load(require(root, task.dataset), None)
        sentences = task.sentences(data)
        counts[task.name] = len(sentences)  # blank lines count, as in SentEval (CR has a few)
    assert counts == {"mr": 10662, "cr": 3775, "subj": 10000, "mpqa": 10606, "sst2": 67349 + 872 + 1821,
                      "trec": 5452 + 500, "mrpc": 2 * (4076 + 1725)}
    trec = transfer.TASKS[5].load(require(root, "trec"), None)
    assert sorted(set(trec["train"][1])) == list(range(6))
    mrpc = transfer.TASKS[6].load(require(root, "mrpc"), None)
    assert sum(mrpc["train"][2]) == 2753 and sum(mrpc["test"][2]) == 1147  # MANIFEST: positives

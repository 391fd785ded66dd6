"""The shared trainer on a tiny random BERT: exact resume, best checkpoint + card, CLI, on-demand training."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main as cli
from bench.io import file_sha256

WORDS = "a man woman child dog cat is are was playing eating running sitting on the in with guitar ball food".split()


def write_corpus(path: Path, n: int = 64) -> Path:
    rng = random.Random(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) for _ in range(n)]
    path.write_text("\n".join(lines) + "\n\n")  # a trailing blank line is skipped
    return path


def tiny_job(tiny_bert_dir, tmp_path, name="tiny-run", method="robustembed", dev_dir=None, **train):
    from bench.train import TrainConfig, TrainJob

    cfg = TrainConfig(**{"batch_size": 4, "max_steps": 4, "eval_every": 0, "log_every": 0, "lr": 1e-3, **train})
    return TrainJob(name=name, method=method, backbone=str(tiny_bert_dir), base="tiny", pooler="cls_before_pooler",
                    profile="smoke", train=cfg, method_config={"pgd_steps": 2, "fgsm_steps": 2} if method == "robustembed" else {},
                    data_path=write_corpus(tmp_path / "corpus.txt"), dev_dir=dev_dir, eval_max_len=64, device="cpu")


def losses(home: Path, name: str) -> list:
    return json.loads((home / "train" / name / "losses.json").read_text())


@pytest.mark.parametrize("method", ["simcse", "robustembed"])
def test_resume_reproduces_the_next_steps_loss_exactly(tiny_bert_dir, tmp_path, method):
    from bench.train import run_training

    home = tmp_path / "home"
    run_training(tiny_job(tiny_bert_dir, tmp_path, "straight", method), home, log=lambda m: None)
    stopped = run_training(tiny_job(tiny_bert_dir, tmp_path, "resumed", method), home, log=lambda m: None,
                           stop_after=2)
    assert stopped == {"stopped_at": 2}
    assert not (home / "models" / "resumed").exists()  # unfinished: never visible as a model
    assert json.loads((home / "train" / "resumed" / "last" / "trainer_state.json").read_text())["step"] == 2
    messages = []
    card = run_training(tiny_job(tiny_bert_dir, tmp_path, "resumed", method), home, log=messages.append)
    assert any("Resuming 'resumed' at step 2/4" in m for m in messages)
    assert losses(home, "resumed") == losses(home, "straight")  # steps 3 and 4 equal to the last bit
    assert card["steps"] == 4 and card["sessions"] == 2


def test_ctrl_c_finishes_the_step_and_saves_it(tiny_bert_dir, tmp_path, monkeypatch):
    import bench.train as train

    class CtrlCDuringFirstStep(train._StopFlag):
        requested = property(lambda self: True, lambda self, value: None)

    monkeypatch.setattr(train, "_StopFlag", CtrlCDuringFirstStep)
    home = tmp_path / "home"
    with pytest.raises(KeyboardInterrupt):
        train.run_training(tiny_job(tiny_bert_dir, tmp_path, "interrupted"), home, log=lambda m: None)
    saved = json.loads((home / "train" / "interrupted" / "last" / "trainer_state.json").read_text())
    assert saved["step"] == 1 and len(saved["losses"]) == 1


def test_resume_refuses_a_changed_configuration(tiny_bert_dir, tmp_path):
    from bench.errors import BenchError
    from bench.train import run_training

    home = tmp_path / "home"
    run_training(tiny_job(tiny_bert_dir, tmp_path, "run"), home, log=lambda m: None, stop_after=1)
    with pytest.raises(BenchError, match="--restart"):
        run_training(tiny_job(tiny_bert_dir, tmp_path, "run", lr=5e-4), home, log=lambda m: None)
    card = run_training(tiny_job(tiny_bert_dir, tmp_path, "run", lr=5e-4), home, log=lambda m: None, restart=True)
    assert card["sessions"] == 1 and card["train_config"]["lr"] == 5e-4


def test_training_keeps_the_best_dev_checkpoint_and_writes_a_full_card(tiny_bert_dir, tmp_path, bench_env):
    from bench.data.datasets import require
    from bench.models.encoder import Encoder, load_hf
    from bench.train import run_training

    job = tiny_job(tiny_bert_dir, tmp_path, dev_dir=require(bench_env.data, "stsb"), eval_every=2, max_steps=6)
    card = run_training(job, bench_env.home, log=lambda m: None)
    out = bench_env.home / "models" / "tiny-run"
    assert {"config.json", "model.safetensors", "tokenizer.json", "bench_card.json", "modules.json"} <= {
        p.name for p in out.iterdir()}
    history = card["dev_history"]
    assert [h["step"] for h in history] == [0, 2, 4, 6]
    trained = history[1:]
    best = max(trained, key=lambda h: h["stsb_dev_spearman"])
    assert card["best"] == best and card["stsb_dev_before"] == history[0]["stsb_dev_spearman"]
    for key in ("method_config", "train_config", "open_choices", "trainer_choices", "git_commit", "wall_s",
                "package_versions"):
        assert key in card
    assert card["method_config"]["pgd_steps"] == 2 and card["method_config"]["reg_weight"] == 1 / 128
    # the base's file hash and the CPU: the ledger pairs seeds only within one base build
    assert card["base_weights_sha256"] == file_sha256(tiny_bert_dir / "model.safetensors") and card["cpu"]
    # ... and the hash the base's own cells carry, by which the ledger picks the base's cells of this build
    from bench.models.registry import resolve_model

    base = Encoder.from_spec(resolve_model(str(tiny_bert_dir), pooler="cls"), device="cpu")
    assert card["base_encoder_sha256"] == base.weights_sha256
    assert len(card["data"]["sha256"]) == 64 and card["data"]["sentences"] == 64
    recorded = json.loads((bench_env.home / "train" / "tiny-run" / "losses.json").read_text())
    assert card["first_loss"] == recorded[0][1] and card["final_loss"] == recorded[-1][1] and len(recorded) == 6
    # the saved weights are the best step's: re-scoring them gives the recorded dev score
    from bench.data.datasets import read_stsb
    from bench.scoring.metrics import score_pairs

    model, tokenizer = load_hf(str(out))
    encoder = Encoder(model, tokenizer, pooler="cls_before_pooler", max_len=64)
    score = score_pairs(read_stsb(require(bench_env.data, "stsb"), "dev"), encoder.encode)[("spearman", "all")]
    assert score == pytest.approx(best["stsb_dev_spearman"], abs=1e-4)
    # and sentence-transformers loads the same model with the same pooling
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(out), device="cpu")
    sentences = ["a man is playing guitar", "the dog was eating"]
    assert st.encode(sentences) == pytest.approx(encoder.encode(sentences), abs=1e-5)


def test_bench_train_cli_on_a_tiny_fixture(tiny_bert_dir, tmp_path, bench_env, capsys):
    corpus = write_corpus(tmp_path / "c.txt")
    args = ["train", "--method", "simcse", "--backbone", str(tiny_bert_dir), "--data", str(corpus), "--steps", "3",
            "--batch-size", "4", "--eval-every", "2", "--set", "temperature=0.1", "--name", "cli-tiny"]
    assert cli(args) == 0
    card = json.loads((bench_env.home / "models" / "cli-tiny" / "bench_card.json").read_text())
    assert card["steps"] == 3 and card["method_config"]["temperature"] == 0.1
    assert [h["step"] for h in card["dev_history"]] == [0, 2, 3]
    assert f"step 1/3: loss {card['first_loss']:.4g} (computed with the base's weights)" in capsys.readouterr().out
    assert cli(args) == 0  # finished: nothing to do
    assert "already trained" in capsys.readouterr().out
    assert cli([*args[:-2], "--name", "x", "--set", "no_such_knob=1"]) == 2
    assert "no_such_knob" in capsys.readouterr().err
    assert cli(["train", "--method", "simcsee", "--backbone", str(tiny_bert_dir)]) == 2
    assert "Did you mean: simcse" in capsys.readouterr().err


def test_bench_run_trains_a_registered_model_on_demand(tiny_model, tmp_path, bench_env, monkeypatch, capsys):
    from bench.models import registry
    from tests.conftest import register_fixture_dataset

    write_corpus(bench_env.data / "wiki" / "wiki1m_for_simcse.head11914.txt", 40)
    register_fixture_dataset(monkeypatch, bench_env.data, "wiki-sample", "wiki/wiki1m_for_simcse.head11914.txt")
    spec = registry.ModelSpec(name="simcse-tiny", backbone=tiny_model.backbone, pooler="avg", max_len=64,
                              method="simcse", base="tiny", profile="smoke",
                              recipe={"max_steps": 2, "batch_size": 4, "eval_every": 1})
    monkeypatch.setitem(registry.MODELS, "simcse-tiny", spec)
    assert cli(["run", "--suite", "sts", "--model", "simcse-tiny", "--task", "stsb"]) == 0
    out = capsys.readouterr().out
    assert "no checkpoint yet: training it now" in out
    card = json.loads((bench_env.home / "models" / "simcse-tiny" / "bench_card.json").read_text())
    assert card["steps"] == 2 and card["pooler"] == "avg" and card["data"]["sentences"] == 40
    rows = list((bench_env.results / "cells" / "simcse-tiny").rglob("*.json"))
    assert rows


def test_paper_model_offline_names_the_missing_backbone(tmp_path, bench_env, monkeypatch, capsys):
    from tests.conftest import register_fixture_dataset

    import huggingface_hub.constants
    import transformers.utils.hub

    # offline without waiting on network time-outs (both read the setting once, at import)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(transformers.utils.hub, "_is_offline_mode", True)
    write_corpus(bench_env.data / "wiki" / "wiki1m_for_simcse.head11914.txt", 40)
    register_fixture_dataset(monkeypatch, bench_env.data, "wiki-sample", "wiki/wiki1m_for_simcse.head11914.txt")
    code = cli(["train", "--method", "robustembed", "--backbone", "bert-base-cls", "--profile", "paper"])
    assert code == 2
    assert "bert-base-uncased" in capsys.readouterr().err


def test_training_modules_keep_torch_out_of_the_cli():
    code = ("import sys, app.cli, app.commands.train, bench.methods, bench.models.registry; "
            "sys.exit('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_keep_steps_writes_each_steps_weights_as_a_model_and_survives_a_resume(tiny_bert_dir, tmp_path):
    """A length series: ``keep_steps`` writes ``<name>-step<N>`` with the weights at step N, and ``select=last``
    keeps the last step's weights; an interrupted run writes the same snapshots as a straight one."""
    from safetensors.torch import load_file

    from bench.train import run_training

    home = tmp_path / "home"
    series = {"keep_steps": "2,4", "select": "last", "max_steps": 4}
    run_training(tiny_job(tiny_bert_dir, tmp_path, "straight", "simcse", **series), home, log=lambda m: None)
    run_training(tiny_job(tiny_bert_dir, tmp_path, "cut", "simcse", **series), home, log=lambda m: None, stop_after=3)
    assert (home / "models" / "cut-step2" / "bench_card.json").exists() and not (home / "models" / "cut").exists()
    run_training(tiny_job(tiny_bert_dir, tmp_path, "cut", "simcse", **series), home, log=lambda m: None)
    weights = {name: load_file(str(home / "models" / name / "model.safetensors"))
               for name in ("straight", "straight-step2", "straight-step4", "cut-step2", "cut-step4")}
    same = lambda a, b: all(bool((weights[a][k] == weights[b][k]).all()) for k in weights[a])  # noqa: E731
    assert same("straight", "straight-step4") and same("straight-step2", "cut-step2")
    assert same("straight-step4", "cut-step4") and not same("straight-step2", "straight-step4")
    card = json.loads((home / "models" / "straight-step2" / "bench_card.json").read_text())
    assert card["snapshot_of"] == "straight" and card["kept"] == "weights at step 2" and card["steps"] == 2
    assert json.loads((home / "models" / "straight" / "bench_card.json").read_text())["kept"] == "weights at step 4"


def test_new_trainer_settings_leave_old_fingerprints_alone(tiny_bert_dir, tmp_path):
    """keep_steps/select enter the fingerprint only when set, so runs from before they existed still resume."""
    import dataclasses
    import hashlib

    job = tiny_job(tiny_bert_dir, tmp_path)
    train = {k: v for k, v in dataclasses.asdict(job.train).items() if k not in ("keep_steps", "select")}
    blob = {"method": job.method, "backbone": job.backbone, "pooler": job.pooler, "train": train,
            "method_config": job.method_config, "data": "sha"}
    expected = hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:16]
    assert job.fingerprint("sha") == expected
    assert tiny_job(tiny_bert_dir, tmp_path, keep_steps="2").fingerprint("sha") != expected

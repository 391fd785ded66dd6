"""Models that cannot be had fail at once with one message naming the fix, and a missing trained model is
announced (what, which profile, how long here) before it is trained; a paper-profile model on a machine
without a GPU needs --allow-cpu-paper-profile. No test touches the network: the Hub's address is a
loopback port (listening, or closed) and the Hugging Face cache is an empty directory."""

from __future__ import annotations

import socket

import pytest

from bench.models import hub
from app.cli import main


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """An empty BENCH_HOME, results directory and Hugging Face cache; the Hub probe not yet made."""
    import huggingface_hub.constants

    monkeypatch.setenv("BENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # as the environment had it at import
    for name in (*hub.OFFLINE_ENVS, hub.ADDRESS_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(hub, "_probed", {})
    monkeypatch.setattr(hub, "go_offline", lambda: None)  # keep this process's hub client as it was
    return tmp_path


@pytest.fixture
def listening_hub(monkeypatch):
    """A loopback port that accepts connections: the Hub 'answers'."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    monkeypatch.setenv(hub.ADDRESS_ENV, f"127.0.0.1:{server.getsockname()[1]}")
    yield
    server.close()


@pytest.fixture
def closed_hub(monkeypatch):
    """A loopback port nothing listens on: the Hub does not answer (connection refused)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    monkeypatch.setenv(hub.ADDRESS_ENV, f"127.0.0.1:{port}")
    return port


def bench(*args: str, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, " ".join(err.split())


def assert_one_clear_message(err: str, *needles: str) -> None:
    assert err.count("bench: error:") == 1, err
    assert "Traceback" not in err and "Retrying" not in err and "MaxRetryError" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)


def test_hf_model_offline_fails_with_one_message(isolated, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, out, err = bench("run", "--suite", "sts", "--model", "hf:org/none", capsys=capsys)
    assert code == 2
    assert_one_clear_message(err, "'org/none'", "HF_HUB_OFFLINE is set", "huggingface-cli download org/none",
                             "--model DIR")


def test_hf_model_with_the_hub_unreachable_fails_after_one_probe(isolated, closed_hub, capsys):
    code, out, err = bench("run", "--suite", "sts", "--model", "hf:org/none", capsys=capsys)
    assert code == 2
    assert_one_clear_message(err, f"127.0.0.1:{closed_hub}", "huggingface-cli download org/none")
    assert "without HF_HUB_OFFLINE" not in err  # that advice only when the variable is the reason


def test_registry_model_on_a_hub_backbone_fails_offline_before_training(isolated, monkeypatch, capsys):
    """robustembed-bert is trained from bert-base-uncased: offline and uncached, nothing can start."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, out, err = bench("run", "--suite", "adversarial", "--model", "robustembed-bert", capsys=capsys)
    assert code == 2
    assert_one_clear_message(err, "'robustembed-bert' needs the Hugging Face model 'bert-base-uncased'",
                             "huggingface-cli download bert-base-uncased")
    assert "training it now" not in out and not (isolated / "home" / "train").exists()


def test_paper_profile_without_a_gpu_needs_the_opt_in(isolated, listening_hub, monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, out, err = bench("run", "--suite", "sts", "--model", "robustembed-bert", "--device", "cpu", capsys=capsys)
    assert code == 2
    assert_one_clear_message(err, "paper-profile", "no GPU",
                             "`bench train --method robustembed --backbone bert-base-cls --profile paper`",
                             "--allow-cpu-paper-profile", "an estimate")
    assert not (isolated / "home" / "train").exists()


def test_grid_checks_its_models_before_ray_starts(isolated, monkeypatch, listening_hub, capsys):
    """Offline, a grid over a model on a Hub backbone stops at once; online without GPU cells, a paper-profile
    model needs the opt-in, as with bench run."""
    pytest.importorskip("ray")
    from app.commands import grid_runner

    monkeypatch.setattr(grid_runner, "run_grid", lambda *a, **k: pytest.fail("Ray started"))
    code, out, err = bench("grid", "--models", "robustembed-bert", "--suites", "sts", capsys=capsys)
    assert code == 2
    assert_one_clear_message(err, "--allow-cpu-paper-profile", "`bench train --method robustembed")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, out, err = bench("grid", "--models", "simcse-minilm,robustembed-bert", "--suites", "sts", capsys=capsys)
    assert code == 2
    assert_one_clear_message(err, "needs the Hugging Face model 'bert-base-uncased'")


def test_the_opt_in_lets_a_cpu_paper_profile_run_through(isolated, monkeypatch):
    from bench.paths import Paths
    from bench.models.registry import get_model
    from bench.train_cost import check_cpu_paper_profile, plan

    training = plan(get_model("robustembed-bert"), Paths.from_env(), "cpu")
    check_cpu_paper_profile(training, allowed=True)  # no error
    with pytest.raises(Exception, match="--allow-cpu-paper-profile"):
        check_cpu_paper_profile(training, allowed=False)
    check_cpu_paper_profile(plan(get_model("robustembed-bert"), Paths.from_env(), "cuda"), allowed=False)


def test_the_plan_counts_the_profiles_steps_and_scales_the_step_time(isolated, monkeypatch):
    from bench import train_cost
    from bench.methods import get_method
    from bench.paths import Paths
    from bench.models.registry import get_model
    from bench.train_cost import CPU_SIMCSE_MINILM_S_PER_STEP, plan

    monkeypatch.setattr(train_cost, "cpu_threads", lambda: 2)  # the reference's threads
    paths = Paths.from_env()
    smoke = plan(get_model("robustembed-minilm"), paths, "cpu")
    assert (smoke.steps, smoke.batch_size, smoke.profile) == (10, 16, "smoke")
    assert "10 steps of batch 16" in smoke.describe() and "an estimate" in smoke.describe()
    study = plan(get_model("simcse-minilm-study"), paths, "cpu")
    assert study.steps == 250 and study.batch_size == 64
    assert "its config" in study.basis  # MiniLM's own config: SimCSE's measured step, 250 times
    assert study.seconds == pytest.approx(250 * CPU_SIMCSE_MINILM_S_PER_STEP)
    robust = plan(get_model("robustembed-minilm-study"), paths, "cpu")
    assert robust.seconds == pytest.approx(study.seconds * get_method("robustembed").step_cost)
    assert plan(get_model("simcse-minilm-study"), paths, "mps").seconds is None
    monkeypatch.setattr(train_cost, "cpu_threads", lambda: 1)  # OMP_NUM_THREADS=1: each step twice as long
    one = plan(get_model("simcse-minilm-study"), paths, "cpu")
    assert one.seconds == pytest.approx(2 * study.seconds) and "1 thread)" in one.describe()
    monkeypatch.setattr(train_cost, "cpu_threads", lambda: 16)  # no speed-up beyond the measured two
    assert plan(get_model("simcse-minilm-study"), paths, "cpu").seconds == pytest.approx(study.seconds)


def test_the_plan_prefers_this_machines_own_runs_of_the_method(isolated, monkeypatch):
    """Cards of earlier runs of the same method, backbone and batch on this CPU model and thread count give
    the step time (their median); a card of another thread count or method is no evidence."""
    import json

    from bench import train_cost
    from bench.models.encoder import resolve_backbone
    from bench.models.registry import get_model
    from bench.paths import Paths
    from bench.train_cost import plan

    monkeypatch.setattr(train_cost, "cpu_threads", lambda: 1)
    paths = Paths.from_env()
    backbone = resolve_backbone(get_model("minilm"))
    reference = plan(get_model("dcl-minilm-study"), paths, "cpu")

    def card(name, method="dcl", threads=1, wall_s=2500.0):
        from bench.results.store import cpu_model

        folder = paths.models / name
        folder.mkdir(parents=True)
        (folder / "bench_card.json").write_text(json.dumps({
            "method": method, "backbone": backbone, "train_config": {"batch_size": 64}, "device": "cpu",
            "cpu": cpu_model(), "threads": threads, "steps": 250, "wall_s": wall_s}))

    card("earlier-a", wall_s=2500.0)
    card("earlier-b", wall_s=3500.0)
    card("two-threads", threads=2, wall_s=100.0)
    card("simcse", method="simcse", wall_s=100.0)
    (paths.models / "broken").mkdir()
    (paths.models / "broken" / "bench_card.json").write_text("{not json")
    mine = plan(get_model("dcl-minilm-study"), paths, "cpu")
    assert mine.seconds == pytest.approx(3000.0)  # the median step, 12 s, 250 times
    assert "median step of 2 earlier runs of dcl" in mine.describe() and mine.seconds != reference.seconds
    monkeypatch.setattr(train_cost, "cpu_threads", lambda: 2)
    assert "median step of 1 earlier run of dcl" in plan(get_model("dcl-minilm-study"), paths, "cpu").basis


def test_a_cached_model_with_the_hub_unreachable_is_loaded_offline(isolated, closed_hub, monkeypatch):
    calls = []
    monkeypatch.setattr(hub, "is_cached", lambda repo, revision=None: True)
    monkeypatch.setattr(hub, "go_offline", lambda: calls.append("offline"))
    hub.require("org/cached")
    assert calls == ["offline"]


def test_a_bad_hub_address_is_named(isolated, monkeypatch):
    monkeypatch.setenv(hub.ADDRESS_ENV, "no-port")
    with pytest.raises(Exception, match="BENCH_HUB_ADDRESS"):
        hub.offline_reason()


def test_every_registered_run_reaches_the_steps_it_keeps(isolated):
    """A run that keeps its weights at chosen steps (a training-length series) must train that long on the
    data at hand: the trainer stops at epochs x steps-per-epoch even when max_steps asks for more."""
    from bench.paths import Paths
    from bench.models.registry import MODELS
    from bench.train_cost import planned_steps

    data = Paths.from_env().data
    short = {}
    for spec in MODELS.values():
        if spec.is_trained and spec.recipe.get("keep_steps"):
            steps = planned_steps(spec, data)
            if steps.kept and steps.total < max(steps.kept):
                short[spec.name] = (steps.total, max(steps.kept))
    assert not short, f"runs that stop before their last kept step (planned, kept): {short}"



def test_bench_train_says_how_long_it_will_take(tmp_path, tiny_bert_dir, monkeypatch):
    from bench import train_cost
    from bench.train import TrainConfig, TrainJob
    from bench.train_cost import CPU_SIMCSE_MINILM_S_PER_STEP, MINILM_SIZE, job_estimate

    monkeypatch.setattr(train_cost, "cpu_threads", lambda: 2)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"sentence {i}\n" for i in range(20)))
    job = TrainJob(name="tiny-simcse", method="simcse", backbone=str(tiny_bert_dir), base=str(tiny_bert_dir),
                   pooler="cls_before_pooler", profile="smoke", train=TrainConfig(batch_size=4, epochs=2),
                   method_config={}, data_path=corpus, dev_dir=None)
    line = job_estimate(job, "cpu")
    assert "10 steps of batch 4 (2 epochs of corpus.txt, 20 lines)" in line and "an estimate" in line
    seconds = 10 * CPU_SIMCSE_MINILM_S_PER_STEP * (2 * 32 ** 2 / MINILM_SIZE) * 4 / 64  # the tiny BERT's size
    assert f"about {max(seconds, 1):.0f} s on cpu" in line
    assert "no time estimate for mps" in job_estimate(job, "mps")


def test_attacks_without_built_resources_fail_in_seconds_naming_the_build(isolated, monkeypatch, capsys):
    """No attack stand-ins built and no network: exit 2 before torch or the model loads, naming the
    build and its time."""
    import time

    monkeypatch.setenv("BENCH_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    code, _, err = bench("run", "--suite", "adversarial", "--model", "minilm", "--task", "mr", "--limit", "5",
                         capsys=capsys)
    assert code == 2 and time.perf_counter() - start < 5
    assert_one_clear_message(err, "bench resources build", "CPU-hours", "resumes")

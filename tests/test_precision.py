"""--dtype: one resolver for every network path, fp32 cells and fingerprints unchanged,
bf16 cells apart, and RobustEmbed's δ under bf16 autocast on a tiny random BERT.

The capability check is simulated both ways (this project's CPU has neither AMX nor AVX-512-BF16,
and a CPU with them must get bf16), by patching what torch reports, not our function.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from app.cli import main as cli  # noqa: E402
from bench.errors import BenchError  # noqa: E402
from bench.models.encoder import Encoder, autocast, dtype_name, load_hf, native_bf16, resolve_dtype  # noqa: E402
from bench.runner import cell_config  # noqa: E402

SENTENCES = ["a man is playing guitar", "a dog is running in the park", "the movie was great",
             "what is the answer", "a child is happy", "the plot was boring", "a woman is eating food",
             "who is the actor"]


@pytest.fixture
def cpu_bf16(monkeypatch):
    """Simulate the CPU's answer: ``cpu_bf16(amx=..., avx512_bf16=..., onednn=...)``."""

    def simulate(amx=False, avx512_bf16=False, onednn=True):
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
        monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: onednn)

    return simulate


# --- the resolver ----------------------------------------------------------------------------

def test_auto_is_fp32_on_a_cpu_without_native_bf16(cpu_bf16):
    cpu_bf16(amx=False, avx512_bf16=False)  # this project's AMD EPYC (AVX2 only)
    assert not native_bf16("cpu")
    assert resolve_dtype("cpu", "auto") is None
    cpu_bf16(amx=False, avx512_bf16=False, onednn=True)
    assert resolve_dtype("cpu", "auto") is None  # oneDNN can emulate bf16, but that is not a reason to use it


@pytest.mark.parametrize("flags", [{"amx": True}, {"amx": True, "avx512_bf16": True}])
def test_auto_is_bf16_on_a_cpu_with_amx(cpu_bf16, flags):
    cpu_bf16(**flags)
    assert native_bf16("cpu")
    assert resolve_dtype("cpu", "auto") is torch.bfloat16
    cpu_bf16(**flags, onednn=False)  # oneDNN without bf16 kernels: no
    assert resolve_dtype("cpu", "auto") is None


def test_auto_is_fp32_on_a_cpu_with_avx512_bf16_but_no_amx(cpu_bf16):
    # measured on such a Xeon: bf16 autocast 1.7x slower than fp32 at inference (docs/precision.md)
    cpu_bf16(amx=False, avx512_bf16=True)
    assert not native_bf16("cpu")
    assert resolve_dtype("cpu", "auto") is None


def test_explicit_requests_and_their_errors(cpu_bf16):
    cpu_bf16()  # no native bf16: an explicit bf16 still runs bf16 (correct, only slower)
    assert resolve_dtype("cpu", "bf16") is torch.bfloat16
    assert resolve_dtype("cpu", "bfloat16") is torch.bfloat16
    assert resolve_dtype("cpu", "fp32") is None and resolve_dtype("cpu", "float32") is None
    with pytest.raises(BenchError, match="fp16 is a CUDA option"):
        resolve_dtype("cpu", "fp16")
    with pytest.raises(BenchError, match="choose one of"):
        resolve_dtype("cpu", "int8")
    with pytest.raises(BenchError, match="not mps"):
        resolve_dtype("mps", "bf16")
    assert resolve_dtype("mps", "auto") is None
    assert [dtype_name(d) for d in (None, torch.bfloat16, torch.float16)] == ["float32", "bfloat16", "float16"]


def test_no_command_leaves_a_precision_in_the_process_environment(bench_env, tiny_model):
    import os

    assert cli(["run", "--suite", "sts", "--model", "tiny", "--task", "stsb", "--dtype", "fp32"]) == 0
    assert not any("DTYPE" in name for name in os.environ)  # the precision is passed down, never a global


def test_autocast_helper_runs_linear_layers_in_bf16_and_is_a_no_op_for_fp32():
    layer = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    with autocast("cpu", torch.bfloat16):
        assert layer(x).dtype == torch.bfloat16
    with autocast("cpu", None):
        assert layer(x).dtype == torch.float32


# --- the encoder -----------------------------------------------------------------------------

def linear_output_dtypes(model) -> list:
    """Record the dtype of every Linear output during the next forward passes."""
    seen = []
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.register_forward_hook(lambda m, i, out: seen.append(out.dtype))
    return seen


def test_encoder_runs_in_the_resolved_dtype_with_embeddings_close_to_fp32(tiny_bert_dir, cpu_bf16):
    cpu_bf16()  # no native bf16 here
    model, tok = load_hf(str(tiny_bert_dir))
    fp32 = Encoder(model, tok, pooler="avg", max_len=32, dtype="auto")
    assert fp32.dtype == "float32" and fp32.amp_dtype is None
    seen = linear_output_dtypes(fp32.model)
    ref = fp32.encode(SENTENCES)
    assert set(seen) == {torch.float32}
    bf16 = Encoder(load_hf(str(tiny_bert_dir))[0], tok, pooler="avg", max_len=32, dtype="bf16")
    seen = linear_output_dtypes(bf16.model)
    got = bf16.encode(SENTENCES)
    assert bf16.dtype == "bfloat16" and set(seen) == {torch.bfloat16}
    assert got.dtype == np.float32  # pooled and returned in float32
    assert next(bf16.model.parameters()).dtype == torch.float32  # weights stay fp32
    cos = (ref * got).sum(1) / np.linalg.norm(ref, axis=1) / np.linalg.norm(got, axis=1)
    assert cos.min() > 0.99 and not np.array_equal(ref, got)


# --- cells -----------------------------------------------------------------------------------

def test_bf16_run_writes_a_separate_cell_and_fp32_cells_keep_their_configuration(tiny_model, bench_env, capsys):
    from bench.results.store import ResultStore
    from suites import get_suite
    from suites.base import RunContext

    base = ["run", "--suite", "sts", "--model", "tiny", "--task", "stsb"]
    assert cli([*base, "--dtype", "fp32"]) == 0
    assert cli([*base, "--dtype", "bf16"]) == 0
    capsys.readouterr()
    store = ResultStore(bench_env.results)
    cells = [store.read(p) for p in store.cells() if "/stsb/" in str(p)]
    assert len(cells) == 2
    by_dtype = {c["results"][0]["dtype"]: c for c in cells}
    assert set(by_dtype) == {"float32", "bfloat16"}
    assert all(r["dtype"] == "bfloat16" for r in by_dtype["bfloat16"]["results"])
    assert by_dtype["bfloat16"]["config"]["dtype"] == "bfloat16"
    # fp32 is the reference: its configuration (and so its key) is what it was before --dtype existed
    suite = get_suite("sts")
    ctx = RunContext(paths=bench_env, profile="smoke")
    assert "dtype" not in by_dtype["float32"]["config"]
    assert by_dtype["float32"]["config"] == json.loads(json.dumps(cell_config(suite, suite.task("stsb"), ctx)))
    fp32, bf16 = (by_dtype[d]["results"][0]["value"] for d in ("float32", "bfloat16"))
    assert fp32 is not None and bf16 is not None
    # a second bf16 run reuses its own cell, not the fp32 one
    assert cli([*base, "--dtype", "bf16"]) == 0
    assert "Reused 2 finished cell(s)" in " ".join(capsys.readouterr().out.split())  # stsb and its avg
    # both summary cells exist side by side too
    avg = [store.read(p) for p in store.cells() if "/avg/" in str(p)]
    assert sorted(c["results"][0]["dtype"] for c in avg) == ["bfloat16", "float32"]


def test_fp16_off_cuda_exits_2_in_every_command(tiny_model, bench_env, capsys):
    assert cli(["run", "--suite", "sts", "--model", "tiny", "--dtype", "fp16"]) == 2
    assert "fp16 is a CUDA option" in capsys.readouterr().err
    assert cli(["train", "--method", "simcse", "--backbone", "tiny", "--dtype", "fp16", "--device", "cpu"]) == 2
    assert "fp16 is a CUDA option" in capsys.readouterr().err
    assert cli(["grid", "--models", "tiny", "--suites", "sts", "--dtype", "fp16", "--dry-run"]) == 2
    assert "fp16 is a CUDA option" in capsys.readouterr().err
    assert cli(["resources", "build", "--only", "nltk", "--dtype", "fp16"]) == 2
    assert "fp16 is a CUDA option" in capsys.readouterr().err
    assert not list(bench_env.results.rglob("*.json"))


def test_grid_keys_bf16_cells_apart(tiny_model, bench_env):
    from app.commands.grid_runner import Cell, CellSettings, Plan

    from bench.runner import plan_protocol

    def plan(dtype):
        return Plan(models=[tiny_model], protocols={"sts": plan_protocol(suite="sts", tasks=["stsb"], profile="smoke")},
                    seeds=[0], settings=CellSettings(dtype=dtype), paths=bench_env)

    cell = Cell("tiny", "sts", "stsb", 0)
    assert plan("fp32").config_hash(cell) != plan("bf16").config_hash(cell)
    assert plan("bf16").settings.context(bench_env, 0).dtype == "bfloat16"


# --- training --------------------------------------------------------------------------------

def test_fp32_training_fingerprint_is_unchanged_and_other_dtypes_differ(tiny_bert_dir, tmp_path):
    from tests.test_train import tiny_job

    from bench.train import OPTIONAL_TRAIN_FIELDS

    job = tiny_job(tiny_bert_dir, tmp_path)
    # the formula before --dtype existed: checkpoints trained in fp32 must keep resuming (the trainer
    # settings added later, at their defaults, were not there)
    train = {k: v for k, v in __import__("dataclasses").asdict(job.train).items() if k not in OPTIONAL_TRAIN_FIELDS}
    blob = {"method": job.method, "backbone": job.backbone, "pooler": job.pooler,
            "train": train, "method_config": job.method_config, "data": "abc"}
    before = hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:16]
    assert job.fingerprint("abc") == job.fingerprint("abc", "float32") == before
    assert job.fingerprint("abc", "bfloat16") != before


def test_bf16_training_keeps_fp32_weights_and_optimiser_and_never_resumes_an_fp32_run(tiny_bert_dir, tmp_path,
                                                                                       cpu_bf16):
    from safetensors.torch import load_file

    from bench.train import run_training
    from tests.test_train import tiny_job

    cpu_bf16()  # no native bf16: auto -> fp32
    home = tmp_path / "home"
    job = tiny_job(tiny_bert_dir, tmp_path, "mixed", max_steps=3)
    assert run_training(job, home, log=lambda m: None, stop_after=1) == {"stopped_at": 1}
    job.dtype = "bf16"  # the same run asked for in bf16: a different configuration
    with pytest.raises(BenchError, match="different configuration"):
        run_training(job, home, log=lambda m: None)
    messages = []
    stopped = run_training(_with_dtype(tiny_job(tiny_bert_dir, tmp_path, "bf16-run", max_steps=3), "bf16"),
                           home, log=messages.append, stop_after=2)
    assert stopped == {"stopped_at": 2}
    assert any("emulated" in m for m in messages)  # bf16 asked for on a CPU without native bf16
    last = home / "train" / "bf16-run" / "last"
    assert {t.dtype for t in load_file(str(last / "modules.safetensors")).values()} == {torch.float32}
    optimizer = torch.load(last / "optimizer.pt", weights_only=True)
    moments = [t for state in optimizer["state"].values() for t in state.values() if t.dim() > 0]
    assert moments and {t.dtype for t in moments} == {torch.float32}
    card = run_training(_with_dtype(tiny_job(tiny_bert_dir, tmp_path, "bf16-run", max_steps=3), "bf16"), home,
                        log=lambda m: None)  # resumes its own bf16 state
    assert card["dtype"] == "bfloat16" and card["amp"] == "bfloat16" and card["steps"] == 3
    model_card = json.loads((home / "models" / "bf16-run" / "bench_card.json").read_text())
    assert model_card["dtype"] == "bfloat16"
    fp32_card = run_training(tiny_job(tiny_bert_dir, tmp_path, "mixed", max_steps=3), home, log=lambda m: None)
    assert fp32_card["dtype"] == "float32" and fp32_card["steps"] == 3  # the fp32 run still resumes


def _with_dtype(job, dtype):
    job.dtype = dtype
    return job


# --- RobustEmbed's δ under bf16 autocast ----------------------------------------------------

def robustembed_delta(tiny_bert_dir, dtype, **cfg):
    """(g at δ = 0, start δ¹, δ_final) of one RobustEmbed loss under ``dtype``, with the same dropout masks
    and δ¹ draw as any other dtype (train mode, as in training)."""
    from transformers import AutoModel, AutoTokenizer

    from bench.methods import get_method

    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    batch = dict(tok(SENTENCES, padding=True, return_tensors="pt"))
    torch.manual_seed(0)
    model = AutoModel.from_pretrained(tiny_bert_dir)
    model.train()
    method_cls = get_method("robustembed")
    method = method_cls(method_cls.Config.from_dict(cfg), model, "cls_before_pooler")
    seen = linear_output_dtypes(model)
    out = {}
    perturbation = method.perturbation

    def spy(batch, x, p_pos):
        mask = batch["attention_mask"].unsqueeze(-1).to(torch.float32)
        out["grad"] = method.adversarial_grad(batch, x, p_pos, torch.zeros_like(x)) * mask
        torch.manual_seed(9)
        out["start"] = torch.randn(x.shape) * method.cfg.init_std * mask  # the draw perturbation() makes
        torch.manual_seed(9)
        out["delta"] = perturbation(batch, x, p_pos)
        return out["delta"]

    method.perturbation = spy
    with autocast("cpu", dtype):
        torch.manual_seed(5)
        loss, _ = method.loss(batch, 0)
    out["linear_dtypes"] = set(seen)
    out["loss"] = float(loss.detach())
    return out


@pytest.mark.parametrize("norm,epsilon", [("inf", 1e-2), ("2", 5e-2)])
def test_robustembed_delta_directions_under_bf16_match_fp32(tiny_bert_dir, norm, epsilon):
    from bench.methods.robustembed import norm_of

    ref = robustembed_delta(tiny_bert_dir, None, norm=norm, epsilon=epsilon)
    got = robustembed_delta(tiny_bert_dir, torch.bfloat16, norm=norm, epsilon=epsilon)
    assert ref["linear_dtypes"] == {torch.float32} and got["linear_dtypes"] == {torch.bfloat16}
    assert torch.equal(ref["start"], got["start"])  # same δ¹: the comparison isolates the attack steps
    per_sentence = torch.nn.functional.cosine_similarity(ref["grad"].flatten(1), got["grad"].flatten(1), dim=1)
    assert per_sentence.min() >= 0.99  # ∇_δ L_con: PGD's direction (Eq. 3)
    moved_ref, moved_got = (d["delta"] - d["start"] for d in (ref, got))
    whole = torch.nn.functional.cosine_similarity(moved_ref.flatten(), moved_got.flatten(), dim=0)
    assert whole >= 0.99  # δ_final − δ¹ over the batch (PGD + FGSM, Eq. 5)
    # FGSM's sign(g) flips where |g| is tiny, so single sentences agree a little less
    each = torch.nn.functional.cosine_similarity(moved_ref.flatten(1), moved_got.flatten(1), dim=1)
    assert each.min() >= 0.95
    delta = got["delta"]
    assert delta.dtype == torch.float32
    assert (norm_of(delta, norm) <= epsilon * (1 + 1e-5)).all()
    assert norm_of(delta, norm).min() > 0
    assert got["loss"] == pytest.approx(ref["loss"], rel=0.05)


# --- victims: fine-tuning and attack queries -------------------------------------------------

def test_victims_train_and_answer_in_the_encoders_dtype_and_live_apart(tiny_bert_dir, tmp_path):
    from attacks.wrapper import CachedModelWrapper
    from bench.finetune import FinetuneConfig, Labelled, load_or_finetune
    from bench.paths import Paths

    paths = Paths(home=tmp_path / "home", data=tmp_path / "data", results=tmp_path / "results")
    texts = [f"the {n} was {'good' if i % 2 else 'bad'}" for i, n in enumerate(["movie", "film", "plot", "story"] * 4)]
    train = Labelled(texts, [i % 2 for i in range(len(texts))], "toy:train")
    config = FinetuneConfig(seed=0, lr=1e-3, head_lr=1e-2, batch_size=8, epochs=1, max_len=16, warmup_ratio=0.0)
    victims = {}
    for dtype in ("fp32", "bf16"):
        model, tok = load_hf(str(tiny_bert_dir))
        encoder = Encoder(model, tok, pooler="avg", max_len=32, name="tiny", dtype=dtype)
        victims[encoder.dtype] = load_or_finetune(encoder, paths, "toy", 2, [train], config, log=lambda m: None)
    # each precision is its own request, so its own cache directory (the key hashes the request)
    dirs = sorted((paths.home / "victims" / "tiny" / "toy").iterdir())
    assert len(dirs) == 2 and all(d.name.startswith("finetune-seed0-") for d in dirs)
    cards = [json.loads((d / "card.json").read_text()) for d in dirs]
    fp32_card = next(c for c in cards if "dtype" not in c)
    bf16_card = next(c for c in cards if "dtype" in c)
    assert "dtype" not in fp32_card and fp32_card["training"]["amp"] is None  # fp32 cards keep their fields
    assert bf16_card["dtype"] == "bfloat16" and bf16_card["training"]["amp"] == "bfloat16"
    assert victims["bfloat16"].amp_dtype is torch.bfloat16 and victims["float32"].amp_dtype is None
    assert {p.dtype for p in victims["bfloat16"].model.parameters()} == {torch.float32}
    # queries: the classifier's own predict and the attack wrapper both run under the victim's autocast
    victim = victims["bfloat16"]
    seen = linear_output_dtypes(victim.model)
    logits = victim.predict_logits(texts[:4])
    assert set(seen) == {torch.bfloat16} and logits.dtype == np.float32
    seen.clear()
    wrapped = CachedModelWrapper(victim.model, victim.tokenizer, victim.max_len, amp_dtype=victim.amp_dtype)
    np.testing.assert_allclose(wrapped(texts[:4]), logits, atol=1e-6)
    assert set(seen) == {torch.bfloat16}
    seen.clear()
    full = CachedModelWrapper(victim.model, victim.tokenizer, victim.max_len)(texts[:4])  # fp32 queries
    assert set(seen) == {torch.float32}
    np.testing.assert_allclose(full, logits, atol=0.1)  # close, not equal

"""The encoder: ModelSpec -> ``encode(list[str]) -> np.ndarray`` (SentEval's contract).

Nothing else in the project runs the Hugging Face model for inference. Training and
attack victims take the underlying module from ``Encoder.model``.
"""

from __future__ import annotations

import hashlib
import importlib
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from bench.errors import BenchError
from bench.models.poolers import NEEDS_HIDDEN_STATES, POOLERS
from bench.models.registry import ModelSpec


class CheckpointMissing(BenchError):
    """A trained model whose checkpoint is not on disk yet (``bench train`` makes it)."""

    def __init__(self, spec: ModelSpec, path: Path):
        super().__init__(
            f"Model '{spec.name}' has no checkpoint at {path}. Train it with "
            f"`bench train --method {spec.method} --backbone {spec.base} --profile {spec.profile}`, or run it "
            f"with `bench run --model {spec.name}`, which trains it first."
        )
        self.spec, self.path = spec, path


def resolve_backbone(spec: ModelSpec, models_dir: Path | None = None) -> str:
    """A local directory or Hugging Face id to load weights from."""
    if spec.is_trained:
        if models_dir is None and not spec.checkpoint:
            raise ValueError("trained models need the models directory")
        path = spec.checkpoint_dir(models_dir)
        if not (path / "config.json").exists():
            raise CheckpointMissing(spec, path)
        return str(path)
    module, sep, attr = spec.backbone.partition(":")
    if sep and "/" not in module:
        try:
            provider = getattr(importlib.import_module(module), attr)
        except ImportError as exc:
            raise BenchError(
                f"Backbone provider '{spec.backbone}' for model '{spec.name}' is not installed ({exc}). "
                f"Fix: pip install {module.replace('_', '-')}"
            ) from exc
        return str(provider())
    return spec.backbone


def pick_device(device: str = "auto") -> str:
    import torch

    if device != "auto":
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise BenchError("--device cuda was asked for but no CUDA device is visible; use --device cpu")
        return device
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


# --- precision ------------------------------------------------------------------------------
# One place decides the precision every network path runs in (encoder, trainer and the methods'
# extra passes, fine-tuner, attack victims, masked LM). Weights and optimiser state stay float32;
# "bf16"/"fp16" mean autocast around the forward passes.

DTYPES = ("auto", "fp32", "bf16", "fp16")  # what --dtype accepts
_ALIASES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def _requested(requested: str | None) -> str:
    name = _ALIASES.get(str(requested or "auto").lower(), str(requested or "auto").lower())
    if name not in DTYPES:
        raise BenchError(f"--dtype {requested}: choose one of {', '.join(DTYPES)}")
    return name


def native_bf16(device: str) -> bool:
    """Does ``device`` run bf16 matrix products fast enough in hardware that bf16 autocast pays off?

    Asks torch (CUDA: ``is_bf16_supported``; CPU: oneDNN's bf16 support and cpuinfo's AMX tile flag as
    torch reports them), never the processor's model name. AVX-512-BF16 alone is not enough: on an
    Intel Xeon with AVX-512-BF16 and no AMX (torch 2.13, 2 threads), MiniLM under bf16 autocast was
    1.7x slower than fp32 at inference and 1.1-1.25x slower per training step
    (``benchmarks/train_step.py --dtype bf16``); without either, oneDNN emulates bf16 (6.2x slower on
    an AVX2-only AMD EPYC). docs/precision.md.
    """
    import torch

    kind = device.split(":")[0]
    if kind == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if kind != "cpu":
        return False
    amx = getattr(getattr(torch, "cpu", None), "_is_amx_tile_supported", None)
    return bool(amx is not None and amx() and torch.ops.mkldnn._is_mkldnn_bf16_supported())


def resolve_dtype(device: str, requested: str | None = "auto"):
    """The autocast dtype for ``requested`` (auto|fp32|bf16|fp16) on ``device``; None means plain float32.

    auto: bf16 where the hardware runs it fast (``native_bf16``), else fp16 on CUDA devices without
    bf16, else float32. bf16 may be asked for explicitly on CPU and CUDA (correct, but slow on a CPU
    without native bf16); fp16 is a CUDA option only. Bad requests raise BenchError (exit 2).
    """
    name = _requested(requested)
    if name == "fp32":
        return None
    import torch

    kind = device.split(":")[0]
    if name == "auto":
        if native_bf16(device):
            return torch.bfloat16
        return torch.float16 if kind == "cuda" and torch.cuda.is_available() else None
    if name == "fp16":
        if kind != "cuda":
            raise BenchError(f"--dtype fp16 is a CUDA option (the device here is {device}); use --dtype bf16 "
                             f"or fp32")
        return torch.float16
    # (a grid driver without a GPU resolves its CUDA cells' dtype too: only a visible GPU can say no)
    if kind == "cuda" and torch.cuda.is_available() and not torch.cuda.is_bf16_supported():
        raise BenchError(f"--dtype bf16: {device} does not support bfloat16; use --dtype fp16 or fp32")
    if kind not in ("cpu", "cuda"):
        raise BenchError(f"--dtype bf16 runs on cpu and cuda devices, not {device}; use --dtype fp32")
    return torch.bfloat16


def dtype_name(dtype) -> str:
    """What ran, as rows and cards record it: 'float32' (no autocast), 'bfloat16' or 'float16'."""
    return "float32" if dtype is None else str(dtype).replace("torch.", "")


def autocast(device: str, dtype):
    """Autocast to ``dtype`` (from ``resolve_dtype``) on ``device``; a no-op context when ``dtype`` is None."""
    if dtype is None:
        import contextlib

        return contextlib.nullcontext()
    import torch

    return torch.autocast(device_type=device.split(":")[0], dtype=dtype)


def slow_dtype_note(device: str, dtype) -> str | None:
    """A warning when bf16 was asked for on a device that only emulates it, else None."""
    if dtype is None or str(dtype) != "torch.bfloat16" or native_bf16(device):
        return None
    return (f"Note: bf16 on {device} without AMX is slower than fp32 here (emulated, or AVX-512-BF16 only); "
            f"--dtype auto picks fp32 on this machine.")


def load_hf(name_or_path: str, spec_name: str = "", revision: str | None = None):
    """(model, tokenizer) from a directory or a Hub id (at ``revision``), with an actionable error offline."""
    from bench.models import hub

    if hub.is_hub_id(name_or_path):  # not cached and the Hub unreachable: one message now, not retries
        hub.require(name_or_path, revision, owner=spec_name)
    from safetensors import SafetensorError
    from transformers import AutoModel, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(name_or_path, revision=revision or None)
        model = AutoModel.from_pretrained(name_or_path, use_safetensors=None, revision=revision or None)
    except SafetensorError as exc:  # a truncated or damaged weights file
        owner = f" for model '{spec_name}'" if spec_name else ""
        raise BenchError(
            f"Backbone '{name_or_path}'{owner}: its model.safetensors is damaged or truncated ({exc}). Fix: copy or "
            f"download the model again (for a model bench trained: `bench train` with --restart)."
        ) from None
    except OSError as exc:
        owner = f" for model '{spec_name}'" if spec_name else ""
        refused = _refused_pickle(exc)
        if refused is not None:
            raise BenchError(
                f"Backbone '{name_or_path}'{owner}: its weights are a pickle (pytorch_model.bin) that the safe "
                f"loader (torch.load weights_only=True) refused, because it references code ({refused}). bench never "
                f"unpickles code from a weights file. Fix: use a copy with model.safetensors, or, only if you trust "
                f"the file, convert it once yourself (load it, then save_pretrained(..., safe_serialization=True))."
            ) from exc
        if Path(name_or_path).is_dir():
            raise BenchError(
                f"Backbone directory '{name_or_path}'{owner} could not be loaded ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0]}). Fix: it needs config.json, tokenizer files and model.safetensors "
                f"(as save_pretrained writes them)."
            ) from exc
        raise BenchError(
            f"Backbone '{name_or_path}'{owner} could not be loaded: it is neither a local directory nor "
            f"reachable on the Hugging Face Hub (offline?). Fix: run once with internet access so it is "
            f"cached in $HF_HOME, or register the model with a local directory as its backbone. "
            f"Offline, use the default model 'minilm'. ({type(exc).__name__}: {str(exc).splitlines()[0]})"
        ) from exc
    return model, tokenizer


def _refused_pickle(exc: BaseException) -> str | None:
    """The refusal text if ``exc`` was caused by torch's weights-only unpickler rejecting a global."""
    import pickle

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, pickle.UnpicklingError):
            import re

            found = re.search(r"GLOBAL ([\w.]+)", str(exc))
            return f"global {found.group(1)}" if found else str(exc).splitlines()[0][:120]
        exc = exc.__cause__ or exc.__context__
    return None


def state_dict_sha256(model) -> str:
    """sha256 over the weights (names, shapes, dtypes and bytes) in a stable order."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


class Encoder:
    """Wraps a Hugging Face encoder and a pooler behind ``encode``.

    Each unique sentence is encoded once per Encoder (the cache lives as long as the run);
    inputs are sorted by token length and padded per batch. ``dtype`` is the requested precision
    (``resolve_dtype``); ``self.dtype`` names what runs ('float32', 'bfloat16', ...).
    """

    def __init__(self, model, tokenizer, pooler: str = "cls", max_len: int = 512,
                 device: str = "cpu", batch_size: int = 64, name: str = "encoder", dtype: str = "auto"):
        import torch

        if pooler not in POOLERS:
            raise BenchError(f"Unknown pooler '{pooler}'. Choose one of: {', '.join(POOLERS)}")
        self.name, self.pooler, self.max_len, self.batch_size = name, pooler, max_len, batch_size
        self.device = device
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        # We pad pre-tokenized ids on purpose (tokenize once, sort by length); silence the hint.
        getattr(tokenizer, "deprecation_warnings", {})["Asking-to-pad-a-fast-tokenizer"] = True
        self.amp_dtype = resolve_dtype(device, dtype)  # None: float32, no autocast
        self.dtype = str(self.amp_dtype or next(model.parameters()).dtype).replace("torch.", "")
        self._pool: Callable = POOLERS[pooler]
        self._hidden = pooler in NEEDS_HIDDEN_STATES
        self._cache: dict[str, np.ndarray] = {}
        self._sha: str | None = None
        self.stats = {"encoded": 0, "cache_hits": 0}
        self._torch = torch

    @classmethod
    def from_spec(cls, spec: ModelSpec, models_dir: Path | None = None, device: str = "auto",
                  batch_size: int = 64, dtype: str = "auto") -> "Encoder":
        if spec.loader:  # external encoder (e.g. a SentEval batcher): same encode() contract
            from bench.models.senteval_adapter import load_encoder

            return load_encoder(spec, device=pick_device(device), batch_size=batch_size)
        backbone = resolve_backbone(spec, models_dir)
        model, tokenizer = load_hf(backbone, spec.name, revision=spec.revision if backbone == spec.backbone else None)
        return cls(model, tokenizer, pooler=spec.pooler, max_len=spec.max_len,
                   device=pick_device(device), batch_size=batch_size, name=spec.name, dtype=dtype)

    @property
    def weights_sha256(self) -> str:
        if self._sha is None:
            self._sha = state_dict_sha256(self.model)
        return self._sha

    def forget(self) -> None:
        """Drop cached embeddings and the weights hash (call after the weights change)."""
        self._cache.clear()
        self._sha = None

    def embed_batch(self, sentences: list[str]):
        """Differentiable pooled embeddings for one batch (no cache, no sorting): for training."""
        enc = self.tokenizer(sentences, padding=True, truncation=True, max_length=self.max_len,
                             return_tensors="pt").to(self.device)
        with autocast(self.device, self.amp_dtype):
            out = self.model(**enc, output_hidden_states=self._hidden)
            return self._pool(out, enc["attention_mask"])

    def encode(self, sentences: Iterable[str], batch_size: int | None = None, on_batch=None) -> np.ndarray:
        """``on_batch(n)``: called after each batch with the number of sentences it encoded (progress)."""
        sentences = list(sentences)
        todo = list(dict.fromkeys(s for s in sentences if s not in self._cache))
        self.stats["cache_hits"] += len(sentences) - len(todo)
        if todo:
            self._encode_new(todo, batch_size or self.batch_size, on_batch)
        if not sentences:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._cache[s] for s in sentences])

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    def _encode_new(self, todo: list[str], batch_size: int, on_batch=None) -> None:
        torch = self._torch
        ids = self.tokenizer(todo, truncation=True, max_length=self.max_len)["input_ids"]
        order = sorted(range(len(todo)), key=lambda i: len(ids[i]))
        with torch.inference_mode(), autocast(self.device, self.amp_dtype):
            for start in range(0, len(order), batch_size):
                chunk = order[start:start + batch_size]
                batch = self.tokenizer.pad({"input_ids": [ids[i] for i in chunk]}, return_tensors="pt")
                batch = {k: v.to(self.device) for k, v in batch.items()}
                out = self.model(**batch, output_hidden_states=self._hidden)
                vecs = self._pool(out, batch["attention_mask"]).float().cpu().numpy()
                for i, vec in zip(chunk, vecs):
                    self._cache[todo[i]] = vec
                if on_batch is not None:
                    on_batch(len(chunk))
        self.stats["encoded"] += len(todo)

    # SentEval adapter: batches arrive as lists of tokens.
    def batcher(self, params, batch: list[list[str]]) -> np.ndarray:
        return self.encode([" ".join(tokens) if not isinstance(tokens, str) else tokens for tokens in batch])

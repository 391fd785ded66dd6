"""Encoders from Python objects: a sentence-transformers model, any object with ``encode(list[str])``, or a plain
function ``f(list[str]) -> (n, d) array``, behind the same ``encode`` contract as ``bench.models.encoder.Encoder``.

Identity (what a result cell's ``weights_sha256`` holds, so a changed model never reuses a cell):
- a torch module (a ``SentenceTransformer`` included): the sha256 of its weights (``state_dict_sha256``; for a
  sentence-transformers stack bench can rebuild, of its Hugging Face module, as `bench run` hashes it);
- anything else: the sha256 of its embeddings of ``PROBE_SENTENCES`` (rounded to ``PROBE_DECIMALS``), so a
  function whose probe embeddings change gets new cells. A change that leaves every probe embedding as it was
  is not seen: give such a function a new name.
``identity_note`` says which, and the rows' ``model_source`` records it.

Network: a sentence-transformers model made of a Transformer, a Pooling bench has a pooler for (mean or CLS)
and optionally Normalize exposes its Hugging Face module, tokenizer and pooler, so suites that fine-tune the
encoder (``--victim finetune``, ANLI) can; any other object has no network (``has_network``) and only the
suites that need nothing but embeddings run on it. Such a model without prompts is also encoded by
``bench.models.encoder.Encoder`` over its own module (`bench run`'s path and speed), then normalised as it would be.
"""

from __future__ import annotations

import hashlib
from typing import Callable, Iterable

import numpy as np

from bench.errors import BenchError

PROBE_VERSION = 1
PROBE_DECIMALS = 5  # rounding before hashing: float noise below it does not split cells
PROBE_SENTENCES = (
    "A man is playing a guitar.",
    "A woman is slicing an onion in the kitchen.",
    "The cat sat on the mat.",
    "Two dogs are running through a snowy field.",
    "The stock market fell sharply on Monday.",
    "I did not like this movie at all; the plot was boring.",
    "An absolutely wonderful, moving film.",
    "What is the capital of France?",
    "Paris is the capital and largest city of France.",
    "He said he would come, but he never did.",
    "Quantum computers use qubits instead of bits.",
    "The children laughed as the clown fell over.",
    "Please send me the report by Friday.",
    "no",
    "The quick brown fox jumps over the lazy dog.",
    "Rain is expected tomorrow in most of the country, with snow in the mountains.",
)
# sentence-transformers pooling mode -> bench pooler (the CLS mode takes the token state, no dense+tanh pooler)
ST_POOLING = {"mean": "avg", "cls": "cls_before_pooler"}


def has_network(encoder) -> bool:
    """Does ``encoder`` expose a Hugging Face module and tokenizer (what fine-tuning needs)?"""
    return getattr(encoder, "model", None) is not None and getattr(encoder, "tokenizer", None) is not None


def probe_fingerprint(encode: Callable[[list[str]], np.ndarray]) -> str:
    """sha256 of the probe sentences' embeddings (rounded), with the probe set's version and the shape."""
    vecs = np.round(np.asarray(encode(list(PROBE_SENTENCES)), dtype=np.float64), PROBE_DECIMALS) + 0.0  # no -0.0
    digest = hashlib.sha256(f"bench-probe-v{PROBE_VERSION}:{vecs.shape}".encode())
    digest.update(np.ascontiguousarray(vecs).tobytes())
    return digest.hexdigest()


def qualified_name(obj) -> str:
    target = obj if callable(obj) and not hasattr(obj, "encode") and hasattr(obj, "__qualname__") else type(obj)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', type(obj).__name__)}"


class ObjectEncoder:
    """``encode(sentences) -> (n, d) float32`` over a user's function: each unique sentence is computed once
    per run (cached), sentences are sorted by length and passed ``batch_size`` at a time (``chunk=False``:
    all new sentences in one call, for an object that batches and sorts itself, such as sentence-transformers).
    """

    def __init__(self, call: Callable[[list[str]], object], *, name: str, batch_size: int = 64, chunk: bool = True,
                 device: str = "cpu", dtype: str = "float32", weights_sha256: str | None = None,
                 identity_note: str = "", source: str = ""):
        self._call, self.name, self.batch_size, self._chunk = call, name, batch_size, chunk
        self.device, self.dtype, self.source = device, dtype, source
        self.pooler, self.max_len = "external", None
        self.model = self.tokenizer = self.amp_dtype = None
        self._cache: dict[str, np.ndarray] = {}
        self.stats = {"encoded": 0, "cache_hits": 0, "calls": 0}
        self.dim: int | None = None
        self._sha = weights_sha256 or probe_fingerprint(self.encode)
        self.identity_note = identity_note or (f"sha256 of its embeddings of {len(PROBE_SENTENCES)} probe sentences "
                                               f"(probe set v{PROBE_VERSION}, rounded to {PROBE_DECIMALS} decimals)")

    @property
    def weights_sha256(self) -> str:
        return self._sha

    def forget(self) -> None:
        """Drop cached embeddings (the identity stays: it was fixed when the encoder was made)."""
        self._cache.clear()

    def encode(self, sentences: Iterable[str], batch_size: int | None = None, on_batch=None) -> np.ndarray:
        """As ``bench.models.encoder.Encoder.encode``: ``on_batch(n)`` after each batch, with the sentences it encoded."""
        sentences = list(sentences)
        todo = sorted(dict.fromkeys(s for s in sentences if s not in self._cache), key=len)
        self.stats["cache_hits"] += len(sentences) - len(todo)
        size = (batch_size or self.batch_size) if self._chunk else max(len(todo), 1)
        for start in range(0, len(todo), size):
            chunk = todo[start:start + size]
            # the function gets its own copy: one that reorders or edits its list in place cannot shift which
            # sentence each returned row is stored under
            self._cache.update(zip(chunk, self._checked(self._call(list(chunk)), chunk)))
            if on_batch is not None:
                on_batch(len(chunk))
        self.stats["encoded"] += len(todo)
        if not sentences:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        return np.stack([self._cache[s] for s in sentences])

    def _checked(self, out, chunk: list[str]) -> np.ndarray:
        self.stats["calls"] += 1
        vecs, n = self._as_array(out, len(chunk)), len(chunk)
        if vecs.ndim != 2 or len(vecs) != n:
            raise BenchError(f"Model '{self.name}': encode returned shape {vecs.shape} for {n} sentences; it must "
                             f"return an (n, d) array, one row per sentence.")
        if self.dim is not None and vecs.shape[1] != self.dim:
            raise BenchError(f"Model '{self.name}': encode returned {vecs.shape[1]} dimensions after {self.dim} "
                             f"earlier; every embedding must have the same size.")
        if not np.isfinite(vecs).all():
            raise BenchError(f"Model '{self.name}': encode returned NaN or infinite values; check the function.")
        zero = np.flatnonzero(~vecs.any(axis=1))
        if len(zero):
            raise BenchError(f"Model '{self.name}': encode returned {len(zero)} all-zero embedding(s) of {n} (the "
                             f"first for {chunk[zero[0]][:60]!r}); cosine similarity is undefined for them, so every "
                             f"score would be empty. Fix: return a non-zero vector for every sentence.")
        self.dim = vecs.shape[1]
        return vecs

    def _as_array(self, out, n: int) -> np.ndarray:
        """The function's output as float32, or a BenchError naming the model and what it returned."""
        fix = "it must return an (n, d) array (numpy, torch, or a list of equal-length lists of numbers)"
        if hasattr(out, "detach"):  # a torch tensor
            out = out.detach().cpu().numpy()
        if isinstance(out, (dict, str, bytes)) or not hasattr(out, "__len__"):
            raise BenchError(f"Model '{self.name}': encode returned a {type(out).__name__} for {n} sentences; {fix}.")
        try:
            vecs = np.asarray(out)
        except (ValueError, TypeError) as exc:  # ragged rows
            raise BenchError(f"Model '{self.name}': encode returned rows of different lengths or kinds for {n} "
                             f"sentences ({exc}); {fix}.") from None
        if np.iscomplexobj(vecs):
            raise BenchError(f"Model '{self.name}': encode returned complex numbers; {fix} of real numbers (e.g. "
                             f"return the real part, or the magnitudes, yourself).")
        if vecs.dtype == object or not (np.issubdtype(vecs.dtype, np.number) or vecs.dtype == bool):
            raise BenchError(f"Model '{self.name}': encode returned {vecs.dtype} values (shape {vecs.shape}) for {n} "
                             f"sentences; {fix}.")
        return vecs.astype(np.float32)

    # The same SentEval entry point as bench.models.encoder.Encoder.
    def batcher(self, params, batch: list[list[str]]) -> np.ndarray:
        return self.encode([" ".join(tokens) if not isinstance(tokens, str) else tokens for tokens in batch])


def _is_sentence_transformer(obj) -> bool:
    return any(f"{c.__module__}.{c.__name__}".startswith("sentence_transformers.") and c.__name__ ==
               "SentenceTransformer" for c in type(obj).__mro__)


def _st_network(st) -> tuple | None:
    """(HF module, tokenizer, bench pooler, max_len) when the stack is Transformer + Pooling(mean|cls)
    [+ Normalize], else None (bench cannot rebuild its embedding for fine-tuning)."""
    kinds = [type(m).__name__ for m in st]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return None
    pooling = st[1]
    mode = pooling.get_pooling_mode_str() if hasattr(pooling, "get_pooling_mode_str") else getattr(pooling, "pooling_mode", "")
    if mode not in ST_POOLING:
        return None
    transformer = st[0]
    if getattr(transformer, "auto_model", None) is None or getattr(transformer, "tokenizer", None) is None:
        return None
    return transformer.auto_model, transformer.tokenizer, ST_POOLING[mode], int(transformer.max_seq_length or 512)


def _bench_path(st, name: str, batch_size: int):
    """For a Transformer + Pooling(mean|cls) [+ Normalize] stack without prompts or lower-casing: a function that
    encodes with ``bench.models.encoder.Encoder`` over its own module, tokenizer, pooler and length cap (what `bench run`
    runs; MiniLM's embeddings agree to cosine 1.000000, benchmarks/encode_throughput.py), then normalises as its
    Normalize does. None for any other stack (it is called through its own encode)."""
    network = _st_network(st)
    prompts = [p for p in (getattr(st, "prompts", None) or {}).values() if p]  # ST 5 declares empty ones
    if (network is None or prompts or getattr(st, "default_prompt_name", None)
            or getattr(st[0], "do_lower_case", False)):
        return None
    from bench.models.encoder import Encoder

    module, tokenizer, pooler, max_len = network
    inner = Encoder(module, tokenizer, pooler=pooler, max_len=max_len, device=_module_device_dtype(st)[0],
                    batch_size=batch_size, name=name)
    normalise = type(st[-1]).__name__ == "Normalize"

    def encode(batch: list[str]) -> np.ndarray:
        vecs = inner.encode(batch)
        inner.forget()  # the ObjectEncoder keeps the cache
        if normalise:
            vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        return vecs

    return encode


def _module_device_dtype(module) -> tuple[str, str]:
    param = next(module.parameters(), None)
    if param is None:
        return "cpu", "float32"
    return str(param.device), str(param.dtype).replace("torch.", "")


def _weights_identity(module, network) -> tuple[str, str]:
    """(sha256, how it was formed) of a torch module's weights. A sentence-transformers stack bench can rebuild
    (``network``) is hashed over its Hugging Face module, as ``Encoder.weights_sha256`` hashes the same weights
    opened by name or directory: one identity for one set of weights, however it is opened."""
    from bench.models.encoder import state_dict_sha256

    if network is None:
        return state_dict_sha256(module), "sha256 of its weights (state_dict)"
    normalised = ", then normalised" if type(module[-1]).__name__ == "Normalize" else ""
    return (state_dict_sha256(network[0]),
            f"sha256 of its transformer's weights (state_dict, as `bench run` hashes them; pooler {network[2]}"
            f"{normalised})")


def wrap(model, *, name: str, batch_size: int = 64) -> ObjectEncoder:
    """An ObjectEncoder for ``model``: a SentenceTransformer, a torch module or object with ``encode``, or a
    callable ``f(list[str]) -> (n, d) array``. BenchError (exit 2) for anything else."""
    import sys

    torch = sys.modules.get("torch")  # a torch module can only come from an imported torch
    is_module = torch is not None and isinstance(model, torch.nn.Module)
    fast = _bench_path(model, name, batch_size) if _is_sentence_transformer(model) else None
    if fast is not None:  # bench run's own encoder over the same modules: the same speed as the CLI
        call, chunk, kind = fast, False, "sentence-transformers model"
    elif _is_sentence_transformer(model):
        call = lambda batch: model.encode(batch, batch_size=batch_size, convert_to_numpy=True,  # noqa: E731
                                          show_progress_bar=False)
        chunk, kind = False, "sentence-transformers model"
    elif callable(getattr(model, "encode", None)):
        call, chunk, kind = model.encode, True, "object with encode"
    elif callable(model):
        call, chunk, kind = model, True, "function"
    else:
        raise BenchError(f"bench.evaluate: model {type(model).__name__!r} is neither a model name, a "
                         f"SentenceTransformer, an object with encode(list[str]) nor a function of a list of "
                         f"sentences. Fix: pass one of those.")
    device, dtype = _module_device_dtype(model) if is_module else ("cpu", "float32")
    network = _st_network(model) if _is_sentence_transformer(model) else None
    sha, note = _weights_identity(model, network) if is_module else (None, "")
    encoder = ObjectEncoder(call, name=name, batch_size=batch_size, chunk=chunk, device=device, dtype=dtype,
                            weights_sha256=sha, identity_note=note,
                            source=f"python {kind} {qualified_name(model)}")
    if network is not None:
        encoder.model, encoder.tokenizer, encoder.pooler, encoder.max_len = network
    return encoder

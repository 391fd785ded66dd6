"""External SentEval-compatible encoders (a ``prepare``/``batcher`` pair) behind ``encode``.

SentEval's contract: ``prepare(params, samples)`` sees a task's sentences as token lists (to build a
vocabulary, say) and ``batcher(params, batch)`` maps a list of token lists to an ``(n, d)`` array.
``BatcherEncoder`` wraps such a pair so any suite can use it like ``bench.models.encoder.Encoder``
(deduplicated, length-sorted, cached per unique sentence).

To register one, give a ModelSpec a ``loader`` naming a function that builds the encoder::

    # my_encoders.py
    def build(spec, device="cpu", batch_size=64):
        return BatcherEncoder(my_batcher, prepare=my_prepare, params={"model": ...},
                              name=spec.name, batch_size=batch_size, fingerprint="my-weights-v1")

    register(ModelSpec(name="my-senteval-model", backbone="", pooler="external",
                       loader="my_encoders:build"))

There are no weights to hash here, so ``weights_sha256`` hashes ``fingerprint`` (pass the
checkpoint's own hash when you have one) with the batcher's qualified name and the JSON of params.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from typing import Callable, Iterable

import numpy as np

from bench.errors import BenchError


class Params(dict):
    """SentEval's ``dotdict``: params are read as attributes (``params.batch_size``)."""

    __getattr__ = dict.get
    __setattr__ = dict.__setitem__
    __delattr__ = dict.__delitem__


def _qualname(fn) -> str:
    return f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}"


class BatcherEncoder:
    def __init__(self, batcher: Callable, prepare: Callable | None = None, params: dict | None = None,
                 name: str = "external", batch_size: int = 64, fingerprint: str = "",
                 device: str = "cpu", dtype: str = "float32", pooler: str = "external", max_len: int | None = None):
        self._batcher, self._prepare = batcher, prepare
        self.params = Params(params or {})
        self.params.setdefault("batch_size", batch_size)
        self.name, self.batch_size, self.device, self.dtype = name, batch_size, device, dtype
        self.pooler, self.max_len = pooler, max_len
        self._fingerprint = fingerprint
        self._identity = self._hash()  # fixed at build time: prepare() may add vocabularies to params
        self._cache: dict[str, np.ndarray] = {}
        self.stats = {"encoded": 0, "cache_hits": 0}
        self.dim: int | None = None

    @property
    def weights_sha256(self) -> str:
        return self._identity

    def _hash(self) -> str:
        ident = json.dumps({"fingerprint": self._fingerprint, "batcher": _qualname(self._batcher),
                            "prepare": _qualname(self._prepare) if self._prepare else "",
                            "params": self.params}, sort_keys=True, default=str)
        return hashlib.sha256(ident.encode()).hexdigest()

    def prepare(self, sentences: Iterable[str]) -> None:
        """SentEval's ``do_prepare``: the task's sentences, as token lists, before any batch."""
        if self._prepare is not None:
            self._prepare(self.params, [s.split() for s in sentences])

    def forget(self) -> None:
        self._cache.clear()

    def encode(self, sentences: Iterable[str], batch_size: int | None = None, on_batch=None) -> np.ndarray:
        sentences = list(sentences)
        todo = sorted(dict.fromkeys(s for s in sentences if s not in self._cache), key=lambda s: len(s.split()))
        self.stats["cache_hits"] += len(sentences) - len(todo)
        size = batch_size or self.batch_size
        for start in range(0, len(todo), size):
            chunk = todo[start:start + size]
            vecs = np.asarray(self._batcher(self.params, [s.split() for s in chunk]), dtype=np.float32)
            if vecs.ndim != 2 or len(vecs) != len(chunk):
                raise BenchError(f"External encoder '{self.name}': batcher returned shape {vecs.shape} for "
                                 f"{len(chunk)} sentences; it must return an (n, d) array, one row per sentence.")
            self.dim = vecs.shape[1]
            self._cache.update(zip(chunk, vecs))
            if on_batch is not None:
                on_batch(len(chunk))
        self.stats["encoded"] += len(todo)
        if not sentences:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        return np.stack([self._cache[s] for s in sentences])

    # The same SentEval entry point as bench.models.encoder.Encoder.
    def batcher(self, params, batch: list[list[str]]) -> np.ndarray:
        return self.encode([" ".join(tokens) if not isinstance(tokens, str) else tokens for tokens in batch])


def load_encoder(spec, device: str = "cpu", batch_size: int = 64):
    """Build the encoder of a ModelSpec whose ``loader`` is ``"module:function"``."""
    module, sep, attr = spec.loader.partition(":")
    if not sep:
        raise BenchError(f"Model '{spec.name}': loader '{spec.loader}' must look like 'module:function'.")
    try:
        build = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise BenchError(f"Model '{spec.name}': loader '{spec.loader}' cannot be imported ({exc}). "
                         f"Fix: install the module or put it on PYTHONPATH.") from exc
    return build(spec, device=device, batch_size=batch_size)

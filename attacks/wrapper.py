"""Our TextAttack model wrapper: dynamic padding, length-sorted batching, inference mode, query cache.

TextAttack's ``HuggingFaceModelWrapper`` pads every query to the tokenizer's max length (512),
which on CPU costs about 12x the compute a 20-word sentence needs. This wrapper tokenizes each
query once, sorts by length, pads per batch, and remembers every output it has computed, so
a text queried again (the original under each recipe, a candidate revisited by the search) costs
nothing. TextAttack's goal function still counts every query it makes, so ``num_queries`` is
the same as on the stock path; only the wall time changes.

It duck-types TextAttack's ``ModelWrapper`` (``__call__`` and ``.model``), so importing this
module does not import textattack.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Sequence

import numpy as np


def _logits(output):
    return output.logits if hasattr(output, "logits") else output


class CachedModelWrapper:
    """Maps a list of inputs (strings, or (premise, hypothesis) tuples) to an array of logits."""

    def __init__(self, model, tokenizer, max_length: int = 512, batch_size: int = 64,
                 cache_size: int = 2 ** 18, device: str | None = None, amp_dtype=None):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.batch_size = batch_size
        self.cache_size = cache_size
        self.device = device or next(model.parameters()).device
        self.amp_dtype = amp_dtype  # autocast of the queries (bench.models.encoder.resolve_dtype); None: float32
        self._cache: OrderedDict = OrderedDict()
        # We pad pre-tokenized ids on purpose (tokenize once, sort by length); silence the hint.
        getattr(tokenizer, "deprecation_warnings", {})["Asking-to-pad-a-fast-tokenizer"] = True
        self.stats = {"queries": 0, "cache_hits": 0, "forward_examples": 0, "batches": 0}

    @staticmethod
    def _key(item):
        return tuple(item) if isinstance(item, (list, tuple)) else item

    def __call__(self, inputs: Sequence) -> np.ndarray:
        keys = [self._key(x) for x in inputs]
        self.stats["queries"] += len(keys)
        missing = [k for k in dict.fromkeys(keys) if k not in self._cache]
        self.stats["cache_hits"] += len(keys) - len(missing)
        fresh = dict(zip(missing, self._forward(missing))) if missing else {}
        out = []
        for k in keys:
            if k in fresh:
                out.append(fresh[k])
            else:
                self._cache.move_to_end(k)
                out.append(self._cache[k])
        for key, row in fresh.items():
            self._remember(key, row)
        return np.stack(out) if out else np.zeros((0, 0), dtype=np.float32)

    def _remember(self, key, row) -> None:
        self._cache[key] = row
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _tokenize(self, items: list) -> list[dict]:
        if isinstance(items[0], tuple):
            first, second = [x[0] for x in items], [x[1] for x in items]
            enc = self.tokenizer(first, second, truncation=True, max_length=self.max_length)
        else:
            enc = self.tokenizer(list(items), truncation=True, max_length=self.max_length)
        return [{k: enc[k][i] for k in enc.keys()} for i in range(len(items))]

    def _forward(self, items: list) -> np.ndarray:
        import torch

        from bench.models.encoder import autocast

        encoded = self._tokenize(items)
        order = sorted(range(len(items)), key=lambda i: len(encoded[i]["input_ids"]))
        rows: list = [None] * len(items)
        with torch.inference_mode(), autocast(str(self.device), self.amp_dtype):
            for start in range(0, len(order), self.batch_size):
                chunk = order[start:start + self.batch_size]
                batch = self.tokenizer.pad([encoded[i] for i in chunk], return_tensors="pt")
                batch = {k: v.to(self.device) for k, v in batch.items()}
                logits = _logits(self.model(**batch)).float().cpu().numpy()
                self.stats["batches"] += 1
                for i, row in zip(chunk, logits):
                    rows[i] = row
        self.stats["forward_examples"] += len(items)
        return np.stack(rows)

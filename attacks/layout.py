"""Where the attacks' resources live under ``$BENCH_HOME/resources``, and the one safe pickle reader.

A leaf module: the builders (counterfit, mlm, nltk_data), the stand-ins and ``attacks.resources``
all import it, and it imports none of them, so ``attacks/`` has no import cycle.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path


class Layout:
    def __init__(self, root: Path):
        self.root = root
        self.nltk = root / "nltk_data"
        self.ta_cache = root / "textattack"
        self.counterfit = root / "counterfit" / "glove6b50d"
        self.mlm = root / "mlm" / "minilm"


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refusing {module}.{name}: only plain containers are allowed")


def read_plain_pickle(path: Path):
    """A downloaded pickle of plain containers (TextAttack's word list: dict of str -> int), read
    with every class and function lookup refused, so loading it cannot run code."""
    return _PlainUnpickler(io.BytesIO(Path(path).read_bytes())).load()

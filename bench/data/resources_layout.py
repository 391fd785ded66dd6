"""Where the offline resources live under ``$BENCH_HOME/resources`` and where the system WordNet is,
and the one safe pickle reader.

Kernel code that the attacks (builders, stand-ins, ``attacks.resources``) and the training methods
(``bench.methods.resources``, WordNet for DCL) share; it imports nothing of either.
"""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path

# WordNet 3.0 as the system installs it (Debian's packages below): what `bench resources build` copies.
SYSTEM_WORDNET = Path(os.environ.get("BENCH_SYSTEM_WORDNET", "/usr/share/wordnet"))
APT_PACKAGES = "wordnet-base wordnet-sense-index"


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

"""Weights read from safetensors checkpoints (numpy, no torch), and how far apart two of them are.

A checkpoint directory holds ``model.safetensors`` (a saved Hugging Face model). Names lose a leading
``bert.``/``roberta.``/``model.`` so that an encoder saved alone and one saved inside a masked-LM
(``minilm-mlm`` is a ``BertForMaskedLM``) line up; heads the encoder lacks (``cls.*``) are left out.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from bench.errors import BenchError
from bench.scoring.stats import weight_distance_ratio

PREFIXES = ("bert.", "roberta.", "model.")
LAYER = re.compile(r"(?:^|\.)layer\.(\d+)\.")


def read_weights(directory: Path) -> dict[str, np.ndarray]:
    """Floating-point tensors of ``directory/model.safetensors`` by name (prefix stripped)."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    path = Path(directory) / "model.safetensors"
    if not path.is_file():
        raise BenchError(f"No weights at {path}: train or build the model first (`bench train`, "
                         f"`bench resources build`), or pass its checkpoint directory.")
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise BenchError(f"{path} is not a readable safetensors file ({exc}); rebuild the checkpoint.") from None
    out = {}
    for name, value in tensors.items():
        if np.issubdtype(value.dtype, np.floating):
            out[next((name[len(p):] for p in PREFIXES if name.startswith(p)), name)] = value
    return out


def layer_of(name: str) -> str:
    """The group a tensor belongs to: ``layer.N`` for a transformer layer, else its first name part."""
    found = LAYER.search(name)
    return f"layer.{found.group(1)}" if found else name.split(".", 1)[0]


def _group_order(group: str) -> tuple:
    found = re.fullmatch(r"layer\.(\d+)", group)
    return (1, int(found.group(1)), "") if found else (0 if group == "embeddings" else 2, 0, group)


def weight_distances(a_dir: Path, b_dir: Path, base_dir: Path) -> dict:
    """||theta_B - theta_A|| / ||theta_A - theta_0|| per layer and overall (bench.scoring.stats.weight_distance_ratio),
    groups in network order (embeddings, layer.0, ..., then the rest)."""
    out = weight_distance_ratio(read_weights(a_dir), read_weights(b_dir), read_weights(base_dir), group=layer_of)
    out["groups"] = dict(sorted(out["groups"].items(), key=lambda kv: _group_order(kv[0])))
    return out

"""Small pure-torch pieces shared by the methods that perturb inputs or representations (V-advCSE, AdCSE,
DCL, L2P-CSR, ConSERT, USCAL).

- hooks that read or replace the token-embedding output and scale the outputs of the first layers
  (every BERT-style encoder works unchanged: the encoder itself is never edited);
- the ε-ball step and projection (the projection itself is RobustEmbed's, imported, not copied);
- the exponential moving average of one module's weights into another (AdCSE Eq. 4, DCL Eq. 7).
"""

from __future__ import annotations

import contextlib
import copy

import torch
from torch import nn

from bench.errors import BenchError
from bench.methods.base import embedding_module
from bench.methods.robustembed import norm_of, project

__all__ = ["norm_of", "project", "ascent_step", "ema_update", "frozen_copy", "capture_embedding_output",
           "replace_embedding_output", "scale_layer_outputs", "weakenable_layers"]


def ascent_step(delta, grad, step_size: float, norm: str):
    """δ + η·(steepest-ascent direction of ``grad`` under ‖·‖_norm), per sentence.

    L2: g/‖g‖₂ (Miyato et al.'s VAT, V-advCSE Eq. 3); L∞: sign(g) (Eq. 4); L1: g/‖g‖₁ (as RobustEmbed).
    """
    if norm == "inf":
        return delta + step_size * grad.sign()
    return delta + step_size * grad / norm_of(grad, norm).clamp(min=1e-12)


@torch.no_grad()
def ema_update(target: nn.Module, online: nn.Module, momentum: float) -> None:
    """target ← m·target + (1−m)·online for every parameter; buffers are copied (AdCSE Eq. 4, DCL Eq. 7)."""
    for t, o in zip(target.parameters(), online.parameters()):
        t.mul_(momentum).add_(o.detach().to(t.dtype), alpha=1.0 - momentum)
    for t, o in zip(target.buffers(), online.buffers()):
        t.copy_(o)


def frozen_copy(module: nn.Module) -> nn.Module:
    """A deep copy that receives no gradient (momentum / target networks)."""
    clone = copy.deepcopy(module)
    for p in clone.parameters():
        p.requires_grad_(False)
    return clone


@contextlib.contextmanager
def capture_embedding_output(model, store: dict):
    """Record the embedding module's output (with its graph) in ``store['x']`` on the first call."""
    hook = embedding_module(model).register_forward_hook(lambda m, i, out: store.setdefault("x", out))
    try:
        yield store
    finally:
        hook.remove()


@contextlib.contextmanager
def replace_embedding_output(model, x):
    """Run the encoder on ``x`` in place of its token-embedding output (the perturbed input)."""
    hook = embedding_module(model).register_forward_hook(lambda m, i, out: x)
    try:
        yield
    finally:
        hook.remove()


def weakenable_layers(model, k: int) -> list[nn.Module]:
    """The modules whose outputs are E⁽⁰⁾..E⁽ᵏ⁻¹⁾ (L2P-CSR footnote 1: E⁽⁰⁾ is the embedding output)."""
    layers = getattr(getattr(model, "encoder", None), "layer", None)
    if layers is None:
        raise BenchError(f"{type(model).__name__} has no `encoder.layer` list; layer-output perturbations need a "
                         f"BERT-style encoder (BERT, RoBERTa, MiniLM, ...).")
    if not 1 <= k <= len(layers) + 1:
        raise BenchError(f"k = {k} weakened layers asked for, but the encoder has the embedding layer and "
                         f"{len(layers)} transformer layers; choose 1 <= k <= {len(layers) + 1}")
    return [embedding_module(model), *list(layers)[: k - 1]]


@contextlib.contextmanager
def scale_layer_outputs(modules: list[nn.Module], masks: list):
    """Multiply each module's output (its first element when it returns a tuple) by its mask."""

    def hook_for(mask):
        def hook(module, inputs, out):
            if isinstance(out, tuple):
                return (out[0] * mask.to(out[0].dtype), *out[1:])
            return out * mask.to(out.dtype)
        return hook

    handles = [m.register_forward_hook(hook_for(mask)) for m, mask in zip(modules, masks)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()

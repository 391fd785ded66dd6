"""L2P-CSR (bench/methods/l2pcsr.py) on a tiny random BERT: weakening masks only halve or zero, and a
probability step raises the contrastive loss."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tests.conftest import make_method  # noqa: E402
from bench.methods.l2pcsr import keep_masks, probability_ascent, weakening_mask  # noqa: E402

SENTENCES = ["a man is playing guitar", "the movie was great fun", "a dog is running in the park",
             "what is the answer", "a woman is eating food", "the plot was boring"]


def make(tiny_bert_dir, **cfg):
    return make_method(tiny_bert_dir, "l2pcsr", SENTENCES, **cfg)


def test_masks_only_halve_or_zero(tiny_bert_dir):
    from bench.methods.perturb import scale_layer_outputs, weakenable_layers

    method, batch = make(tiny_bert_dir, threshold=0.5)
    method.model.eval()
    tok, fea = method.init_probabilities(batch)
    masks = [weakening_mask(keep_masks(t, 0.5), keep_masks(f, 0.5)) for t, f in zip(tok, fea)]
    for m in masks:
        assert set(torch.unique(m).tolist()) == {0.0, 0.5, 1.0}
    # every value of the perturbed layer outputs is the clean value, its half, or zero
    layers = weakenable_layers(method.model, method.cfg.layers)
    doubled = {k: v.repeat(2, 1) for k, v in batch.items()}
    seen_clean, seen_perturbed = {}, {}

    def record(store, i):
        return lambda m, inp, out: store.__setitem__(i, (out[0] if isinstance(out, tuple) else out).detach())

    # clean outputs of E(0): the embedding layer's output does not depend on earlier masks
    handle = layers[0].register_forward_hook(record(seen_clean, 0))
    with torch.no_grad():
        method.model(**doubled)
    handle.remove()
    with scale_layer_outputs(layers, masks):
        handles = [layer.register_forward_hook(record(seen_perturbed, i)) for i, layer in enumerate(layers)]
        with torch.no_grad():
            method.model(**doubled)
        for h in handles:
            h.remove()
    clean, perturbed, m = seen_clean[0], seen_perturbed[0], masks[0]
    assert torch.allclose(perturbed, clean * m)
    ratio_ok = (torch.isclose(perturbed, clean) | torch.isclose(perturbed, clean / 2) | (perturbed == 0))
    assert ratio_ok.all()
    assert (perturbed == 0).any() and torch.isclose(perturbed, clean / 2).logical_and(clean.abs() > 1e-3).any()
    # the hooks scale exactly the first k outputs and leave the rest of the encoder alone
    assert len(layers) == 3 and layers[0] is method.model.embeddings


def test_probability_step_raises_the_contrastive_loss(tiny_bert_dir):
    method, batch = make(tiny_bert_dir, threshold=0.5, step_size=0.5, iterations=1)
    method.model.eval()  # deterministic: the loss changes only through the masks
    torch.manual_seed(2)
    tok, fea = method.init_probabilities(batch)

    def loss_at(tok, fea):
        with torch.no_grad():
            return float(method.perturbed_loss(batch, [keep_masks(p, 0.5) for p in tok],
                                               [keep_masks(p, 0.5) for p in fea]))

    before = loss_at(tok, fea)
    up_tok, up_fea = method.learn_perturbation(batch, tok, fea)
    assert all(((p >= 0) & (p <= 1)).all() for p in up_tok + up_fea)
    assert any(not torch.equal(keep_masks(a, 0.5), keep_masks(b, 0.5)) for a, b in zip(tok + fea, up_tok + up_fea))
    assert loss_at(up_tok, up_fea) > before
    # the opposite (descent) step lowers it: the gradient direction is the real one
    method.cfg.step_size = -0.5
    down_tok, down_fea = method.learn_perturbation(batch, tok, fea)
    assert loss_at(down_tok, down_fea) < before


def test_probability_ascent_is_normalised_per_sentence_and_clipped():
    p = torch.tensor([[0.5, 0.5], [0.98, 0.02]])
    g = torch.tensor([[3.0, 4.0], [1.0, 0.0]])
    out = probability_ascent(p, g, 0.5)
    assert torch.allclose(out, torch.tensor([[0.5 + 0.3, 0.5 + 0.4], [1.0, 0.02]]))


def test_training_loss_runs_and_no_gradient_reaches_parameters_from_the_ascent(tiny_bert_dir):
    method, batch = make(tiny_bert_dir)
    tok, fea = method.init_probabilities(batch)
    method.learn_perturbation(batch, tok, fea)
    assert all(p.grad is None for p in method.model.parameters())
    loss, logs = method.loss(batch, 0)
    loss.backward()
    assert torch.isfinite(loss) and 0 <= logs["weakened_tokens"] <= 1
    assert any(p.grad is not None for p in method.model.parameters())
    # padding is never weakened
    assert all((t[~batch["attention_mask"].repeat(2, 1).bool()] == 1).all() for t in tok)

"""AdCSE (bench/methods/adcse.py) on a tiny random BERT: Eq. 4 momentum update, Eq. 5 loss, Eq. 7 ascent."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tests.conftest import make_method  # noqa: E402
from bench.methods.adcse import adcse_loss, adversary_ascent  # noqa: E402

SENTENCES = ["a man is playing guitar", "the movie was great fun", "a dog is running in the park",
             "what is the answer"]


def make(tiny_bert_dir, **cfg):
    return make_method(tiny_bert_dir, "adcse", SENTENCES, **cfg)


def train_step(method, batch, lr=1e-2):
    opt = torch.optim.AdamW(method.param_groups(lr, 0.0))
    loss, _ = method.loss(batch, 0)
    loss.backward()
    opt.step()
    opt.zero_grad()
    method.after_step(0)
    return loss


def test_momentum_update_equals_the_ema_formula(tiny_bert_dir):
    method, batch = make(tiny_bert_dir, momentum=0.9)
    p_before = {k: v.clone() for k, v in method.modules["momentum_encoder"].state_dict().items()}
    mlp_p_before = {k: v.clone() for k, v in method.modules["momentum_mlp"].state_dict().items()}
    train_step(method, batch)
    q_after = dict(method.model.named_parameters())
    changed = 0
    for name, p in method.modules["momentum_encoder"].named_parameters():
        expected = 0.9 * p_before[name] + 0.1 * q_after[name].detach()
        assert torch.allclose(p, expected, atol=1e-7), name
        changed += int(not torch.equal(p, p_before[name]))
    assert changed > 0  # q moved, so p moved towards it
    for name, p in method.modules["momentum_mlp"].named_parameters():
        mlp_q = dict(method.modules["mlp"].named_parameters())[name].detach()
        assert torch.allclose(p, 0.9 * mlp_p_before[name] + 0.1 * mlp_q, atol=1e-7)
    # p gets no gradient and is not in the optimiser
    optimised = {id(p) for g in method.param_groups(1e-3, 0.0) for p in g["params"]}
    assert not any(id(p) in optimised for p in method.modules["momentum_encoder"].parameters())
    assert id(method.adversaries) not in optimised


def test_adversary_step_moves_up_the_loss_gradient(tiny_bert_dir):
    method, batch = make(tiny_bert_dir, adversary_lr=0.5, adversary_weight_decay=0.0)
    torch.manual_seed(1)
    h, h_pos = torch.randn(4, 32), torch.randn(4, 32)
    n0 = method.adversaries.detach().clone()
    before = float(adcse_loss(h, h_pos, n0, 0.05))
    # the method's own path: the gradient is taken in loss(), applied in after_step()
    method.loss(batch, 0)
    grad = method._adv_grad.clone()
    method.after_step(0)
    n1 = method.adversaries.detach()
    assert torch.allclose(n1, n0 + 0.5 * grad, atol=1e-7)  # first step: velocity = gradient (Eq. 7)
    # and an ascent step raises the loss it differentiates
    adv = n0.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(adcse_loss(h, h_pos, adv, 0.05), adv)
    stepped = n0.clone()
    adversary_ascent(stepped, g, torch.zeros_like(g), lr=0.01, momentum=0.9, weight_decay=0.0)
    assert float(adcse_loss(h, h_pos, stepped, 0.05)) > before
    descended = n0.clone()
    adversary_ascent(descended, -g, torch.zeros_like(g), lr=0.01, momentum=0.9, weight_decay=0.0)
    assert float(adcse_loss(h, h_pos, descended, 0.05)) < before


def test_adversary_momentum_accumulates():
    n = torch.ones(2, 3)
    v = torch.zeros(2, 3)
    g = torch.full((2, 3), 0.5)
    adversary_ascent(n, g, v, lr=0.1, momentum=0.9, weight_decay=0.0)
    adversary_ascent(n, g, v, lr=0.1, momentum=0.9, weight_decay=0.0)
    assert torch.allclose(v, torch.full((2, 3), 0.5 * 1.9))
    assert torch.allclose(n, torch.full((2, 3), 1 + 0.1 * 0.5 + 0.1 * 0.95))


def test_eq5_has_only_adversary_negatives():
    torch.manual_seed(0)
    h, h_pos, adv = torch.randn(3, 8), torch.randn(3, 8), torch.randn(5, 8)
    cos = lambda a, b: torch.nn.functional.cosine_similarity(a[:, None], b[None], dim=-1)  # noqa: E731
    pos = cos(h, h_pos).diagonal() / 0.05
    neg = cos(h, adv) / 0.05
    expected = -(pos - torch.logsumexp(torch.cat([pos[:, None], neg], 1), 1)).mean()
    assert torch.allclose(adcse_loss(h, h_pos, adv, 0.05), expected, atol=1e-5)
    assert float(adcse_loss(h, h_pos, adv, 0.05, in_batch_negatives=True)) > float(expected)


def test_one_training_step_runs_and_only_q_learns(tiny_bert_dir):
    method, batch = make(tiny_bert_dir)
    loss, logs = method.loss(batch, 0)
    assert torch.isfinite(loss) and logs["loss"] > 0
    loss.backward()
    assert any(p.grad is not None for p in method.model.parameters())
    assert all(p.grad is None for p in method.modules["momentum_encoder"].parameters())
    assert method.adversaries.grad is None  # the adversaries move only by their own ascent


def test_paper_profile_puts_weight_decay_on_the_adversaries_only():
    """The authors' run_adcse.sh sets --mem_wd 1e-4 (the adversaries) and no encoder weight decay."""
    from bench.methods import get_method
    from bench.train import make_train_config

    adcse = get_method("adcse")
    paper = make_train_config(adcse, "paper", {})
    assert paper.weight_decay == 0.0  # encoder q: the HF Trainer default the authors keep
    assert (paper.lr, paper.batch_size, paper.eval_every) == (3e-5, 64, 125)
    assert adcse.Config().adversary_weight_decay == 1e-4
    assert "weight_decay" in adcse.open_choices


def test_adversary_weight_decay_shrinks_the_adversaries():
    torch.manual_seed(0)
    n = torch.randn(4, 8)
    grad = torch.zeros_like(n)
    decayed, kept = n.clone(), n.clone()
    adversary_ascent(decayed, grad, torch.zeros_like(n), lr=1.0, momentum=0.0, weight_decay=0.1)
    adversary_ascent(kept, grad, torch.zeros_like(n), lr=1.0, momentum=0.0, weight_decay=0.0)
    assert torch.allclose(decayed, 0.9 * n) and torch.equal(kept, n)

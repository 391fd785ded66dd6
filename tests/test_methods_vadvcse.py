"""V-advCSE (bench/methods/vadvcse.py) on a tiny random BERT: the ε-ball, the divergences, the loss."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from bench.errors import BenchError  # noqa: E402
from tests.conftest import make_method  # noqa: E402
from bench.methods.vadvcse import DIVERGENCES, BatchNormMLP, js_divergence, kl_divergence, symmetric_kl  # noqa: E402

SENTENCES = ["a man is playing guitar", "the movie was great fun", "a dog is running in the park",
             "what is the answer", "a woman is eating food"]


def make(tiny_bert_dir, **cfg):
    return make_method(tiny_bert_dir, "vadvcse", SENTENCES, **cfg)


def clean_state(method, batch):
    """What Algorithm 1 receives: the embedding output x, the clean logits and the positives."""
    from bench.methods.perturb import capture_embedding_output
    from bench.methods.vadvcse import similarity_logits

    store = {}
    with capture_embedding_output(method.model, store):
        z, z_pos = method.embed(batch, views=2)
    n = batch["input_ids"].shape[0]
    p, p_pos = method.project(z), method.project(z_pos)
    ref = similarity_logits(p, p_pos, method.cfg.temperature).detach()
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return store["x"][:n].detach(), ref, p_pos.detach(), mask


@pytest.mark.parametrize("norm,eps", [("2", 0.5), ("inf", 0.01), ("1", 2.0)])
def test_perturbation_stays_inside_the_epsilon_ball(tiny_bert_dir, norm, eps):
    from bench.methods.perturb import norm_of

    # A step ten times the radius: without the projection Π the norm would be far above ε.
    method, batch = make(tiny_bert_dir, norm=norm, epsilon=eps, step_size=10 * eps, init_std=0.1)
    x, ref, p_pos, mask = clean_state(method, batch)
    r = method.perturbation(batch, x, ref, p_pos, mask)
    norms = norm_of(r, norm).flatten()
    assert torch.all(norms <= eps * (1 + 1e-5)), norms
    assert torch.all(norms >= 0.99 * eps)  # the step reached the boundary: the projection was active
    assert torch.all(r[batch["attention_mask"] == 0] == 0)  # padding is never perturbed


def test_perturbation_ascends_the_divergence(tiny_bert_dir):
    from bench.methods.vadvcse import similarity_logits

    method, batch = make(tiny_bert_dir, epsilon=1.0, step_size=1.0, init_std=1e-3)
    method.model.eval()  # no dropout: compare the divergence at two perturbations
    x, ref, p_pos, mask = clean_state(method, batch)

    def divergence(r):
        with torch.no_grad():
            return float(js_divergence(ref, similarity_logits(method.project(method.embed_on(batch, x + r)),
                                                              p_pos, method.cfg.temperature)))

    torch.manual_seed(1)
    adversarial = method.perturbation(batch, x, ref, p_pos, mask)
    random = torch.randn_like(adversarial) * mask
    random = random / random.flatten(1).norm(dim=1).view(-1, 1, 1)
    assert divergence(adversarial) > divergence(random)


def test_divergences_match_their_definitions():
    torch.manual_seed(0)
    a, b = torch.randn(4, 6), torch.randn(4, 6)
    p, q = a.softmax(-1), b.softmax(-1)
    kl = (p * (p.log() - q.log())).sum(-1).mean()
    m = (p + q) / 2
    js = (0.5 * (p * (p.log() - m.log())).sum(-1) + 0.5 * (q * (q.log() - m.log())).sum(-1)).mean()
    assert torch.allclose(kl_divergence(a, b), kl, atol=1e-6)
    assert torch.allclose(symmetric_kl(a, b), 0.5 * (kl + kl_divergence(b, a)), atol=1e-6)
    assert torch.allclose(js_divergence(a, b), js, atol=1e-6)
    assert torch.allclose(js_divergence(a, b), js_divergence(b, a), atol=1e-6)  # symmetric
    assert float(js_divergence(a, b)) <= math.log(2)
    for f in DIVERGENCES.values():
        assert abs(float(f(a, a))) < 1e-6


def test_loss_is_contrastive_plus_weighted_vadv_and_trains(tiny_bert_dir):
    method, batch = make(tiny_bert_dir, vadv_weight=0.5)
    assert isinstance(method.modules["mlp"], BatchNormMLP)
    assert any(isinstance(m, torch.nn.BatchNorm1d) for m in method.modules["mlp"].modules())
    loss, logs = method.loss(batch, 0)
    assert logs["loss"] == pytest.approx(logs["loss_cont"] + 0.5 * logs["loss_vadv"], rel=1e-5)
    assert logs["loss_vadv"] > 0 and logs["r_norm"] <= method.cfg.epsilon * (1 + 1e-5)
    loss.backward()
    grads = [p.grad for p in method.model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_zero_weight_is_simcse(tiny_bert_dir):
    from bench.methods.base import info_nce

    method, batch = make(tiny_bert_dir, vadv_weight=0.0)
    torch.manual_seed(3)
    loss, _ = method.loss(batch, 0)
    torch.manual_seed(3)
    z, z_pos = method.embed(batch, views=2)
    assert float(loss.detach()) == pytest.approx(float(info_nce(method.project(z), [method.project(z_pos)], 0.05).detach()), rel=1e-6)


def test_bad_settings_name_the_choices():
    from bench.methods.vadvcse import VAdvCSEConfig

    with pytest.raises(BenchError, match="js"):
        VAdvCSEConfig(divergence="wasserstein")
    with pytest.raises(BenchError, match="inf"):
        VAdvCSEConfig(norm="3")

"""V-advCSE (bench/methods/vadvcse.py) on a tiny random BERT: the ε-ball, the divergences, the loss."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from bench.errors import BenchError  # noqa: E402
from tests.conftest import make_method  # noqa: E402
from bench.methods.vadvcse import DIVERGENCES, BatchNormMLP, js_rows, kl_rows, symmetric_kl_rows  # noqa: E402

SENTENCES = ["a man is playing guitar", "the movie was great fun", "a dog is running in the park",
             "what is the answer", "a woman is eating food"]


def make(tiny_bert_dir, **cfg):
    return make_method(tiny_bert_dir, "vadvcse", SENTENCES, **cfg)


def clean_state(method, batch):
    """What Algorithm 1 receives: the embedding output x, the clean logits and the positives."""
    from bench.methods.perturb import capture_embedding_output

    store = {}
    with capture_embedding_output(method.model, store):
        z, z_pos = method.embed(batch, views=2)
    n = batch["input_ids"].shape[0]
    p, p_pos = method.project(z), method.project(z_pos)
    ref = method.prediction_logits(p, p_pos.detach()).detach()
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


@pytest.mark.parametrize("prediction", ["features", "instances"])
def test_perturbation_ascends_the_divergence(tiny_bert_dir, prediction):
    method, batch = make(tiny_bert_dir, epsilon=1.0, step_size=1.0, init_std=1e-3, prediction=prediction)
    method.model.eval()  # no dropout: compare the divergence at two perturbations
    x, ref, p_pos, mask = clean_state(method, batch)

    def divergence(r):
        with torch.no_grad():
            return float(method.divergence(ref, method.prediction_logits(
                method.project(method.embed_on(batch, x + r)), p_pos)))

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
    assert torch.allclose(kl_rows(a, b).mean(), kl, atol=1e-6)
    assert torch.allclose(symmetric_kl_rows(a, b).mean(), 0.5 * (kl + kl_rows(b, a).mean()), atol=1e-6)
    assert torch.allclose(js_rows(a, b).mean(), js, atol=1e-6)
    assert torch.allclose(js_rows(a, b), js_rows(b, a), atol=1e-6)  # symmetric
    assert float(js_rows(a, b).max()) <= math.log(2)
    for f in DIVERGENCES.values():  # per-row F
        assert f(a, b).shape == (4,) and float(f(a, a).abs().max()) < 1e-6


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
    with pytest.raises(BenchError, match="instances"):
        VAdvCSEConfig(prediction="logits")
    with pytest.raises(BenchError, match="sum"):
        VAdvCSEConfig(reduction="max")


def test_prediction_is_the_softmax_of_the_representation_and_f_is_summed_over_sentences(tiny_bert_dir):
    """Version 2: p(y|x) = softmax over the features of g(f(x)) (Algorithm 1's F(f(x), f(x+r))); F summed
    over the batch's sentences (Algorithm 1's "for all x in X"); 'instances' + 'mean' is version 1."""
    from bench.methods.vadvcse import similarity_logits

    method, batch = make(tiny_bert_dir)
    assert (method.cfg.prediction, method.cfg.reduction, method.version) == ("features", "sum", 2)
    torch.manual_seed(0)
    p, p_pos, other = torch.randn(5, 32), torch.randn(5, 32), torch.randn(5, 32)
    assert torch.equal(method.prediction_logits(p, p_pos), p)
    rows = torch.cat([js_rows(p[i:i + 1], other[i:i + 1]) for i in range(5)])  # one sentence at a time
    assert float(method.divergence(p, other)) == pytest.approx(float(rows.sum()), rel=1e-5)
    v1, _ = make(tiny_bert_dir, prediction="instances", reduction="mean")
    assert torch.allclose(v1.prediction_logits(p, p_pos), similarity_logits(p, p_pos, 0.05))
    assert float(v1.divergence(p, other)) == pytest.approx(float(rows.mean()), rel=1e-5)


def sgd_displacement(backbone, vadv_weight, steps=3, lr=0.1):
    """Parameters after ``steps`` plain-SGD steps of V-advCSE minus the start (same seeds for every call)."""
    from bench.models.encoder import load_hf
    from bench.methods import get_method

    torch.manual_seed(0)
    model, tok = load_hf(str(backbone))
    model.train()
    cls = get_method("vadvcse")
    method = cls(cls.Config(vadv_weight=vadv_weight), model, "avg")
    batch = tok(TRAINING_SENTENCES, padding=True, return_tensors="pt")
    params = [p for p in (*model.parameters(), *method.modules.parameters()) if p.requires_grad]
    start = [p.detach().clone() for p in params]
    optimizer = torch.optim.SGD(params, lr=lr)
    for step in range(steps):
        torch.manual_seed(100 + step)  # the same dropout masks and random starts for every weight
        loss, _ = method.loss(batch, step)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return torch.cat([(p.detach() - s).flatten() for p, s in zip(params, start)])


TRAINING_SENTENCES = SENTENCES + ["the plot was boring", "a child is happy", "the film was terrible",
                                  "a cat is sitting on the street", "who is the actor", "the story was sad",
                                  "a big red ball"]


def test_doubling_the_default_weight_visibly_moves_the_trained_weights(tmp_path):
    """The adversarial term must act at the default λ. Doubling λ must move the weights after a
    few training steps by a visible fraction (> 0.5%) of how far training moves them; version 1 (λ = 1e-6
    on the in-batch softmax, averaged) moved them by about 1e-7 of it.

    The tiny BERT has dropout 0.01 so that, as for any trained encoder (all-MiniLM-L6-v2: L_cont 0.004 at
    batch 64), the two dropout views are close and L_cont is small; at dropout 0.1 a random tiny BERT has
    L_cont near ln(batch), a regime no real run is in. Plain SGD, because AdamW's per-coordinate
    normalisation turns even a 1e-6 relative change of the gradient into a few percent of the weights'
    displacement within four steps (measured), so that comparison could not tell an inert term from a live one."""
    from transformers import BertConfig, BertModel

    from bench.methods.vadvcse import VAdvCSEConfig
    from tests.conftest import write_tiny_bert

    backbone = write_tiny_bert(tmp_path / "tiny-low-dropout")
    config = BertConfig.from_pretrained(backbone)
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.01
    torch.manual_seed(0)
    BertModel(config).save_pretrained(backbone, safe_serialization=True)
    weight = VAdvCSEConfig().vadv_weight
    once, twice = sgd_displacement(backbone, weight), sgd_displacement(backbone, 2 * weight)
    fraction = float((twice - once).norm() / once.norm())
    assert fraction > 5e-3, f"doubling lambda={weight} moved the weights by only {fraction:.2e} of training's move"
    assert torch.equal(sgd_displacement(backbone, weight), once)  # deterministic: the difference is the term's

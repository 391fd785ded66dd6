"""RobustEmbed and SimCSE on a tiny random BERT: the ε-ball, the SimCSE limit, one step lowers the loss."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from bench.errors import BenchError  # noqa: E402
from bench.methods import get_method  # noqa: E402
from bench.methods.base import info_nce  # noqa: E402
from bench.methods.robustembed import norm_of, project  # noqa: E402

SENTENCES = ["a man is playing guitar", "a dog is running in the park", "the movie was great",
             "what is the answer", "a child is happy", "the plot was boring"]


@pytest.fixture
def batch(tiny_bert_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert_dir)
    return dict(tokenizer(SENTENCES, padding=True, return_tensors="pt"))


def make(tiny_bert_dir, name, seed=0, **overrides):
    from transformers import AutoModel

    torch.manual_seed(seed)
    model = AutoModel.from_pretrained(tiny_bert_dir)
    model.train()
    method_cls = get_method(name)
    return method_cls(method_cls.Config.from_dict(overrides), model, "cls_before_pooler")


@pytest.mark.parametrize("norm", ["inf", "2", "1"])
def test_projection_lands_in_the_ball_and_keeps_inner_points(norm):
    torch.manual_seed(0)
    big = torch.randn(5, 7, 3) * 3
    eps = 0.5
    projected = project(big, norm, eps)
    assert (norm_of(projected, norm) <= eps * (1 + 1e-5)).all()
    assert torch.allclose(norm_of(projected, norm), torch.full((5, 1, 1), eps), rtol=1e-4)  # outside -> boundary
    small = big / norm_of(big, norm) * eps * 0.5
    assert torch.allclose(project(small, norm, eps), small)


def test_l1_projection_is_the_nearest_point():
    # Against a brute-force check: no random point of the ball is closer than the projection.
    torch.manual_seed(1)
    v = torch.randn(1, 4, 2)
    p = project(v, "1", 1.0)
    candidates = project(torch.randn(4000, 4, 2), "1", 1.0)
    assert (candidates - v).flatten(1).norm(dim=1).min() >= (p - v).norm() - 1e-6


@pytest.mark.parametrize("norm", ["inf", "2", "1"])
@pytest.mark.parametrize("shared", [False, True])
def test_delta_stays_inside_the_epsilon_ball(tiny_bert_dir, batch, norm, shared):
    # Big steps so that the attack really pushes against the boundary.
    method = make(tiny_bert_dir, "robustembed", norm=norm, epsilon=0.05, init_std=0.04, pgd_step_size=0.5,
                  fgsm_step_size=0.5, shared_gradient=shared)
    captured = {}
    original = method.perturbation

    def spy(*args):
        captured["delta"] = original(*args)
        return captured["delta"]

    method.perturbation = spy
    loss, logs = method.loss(batch, 0)
    delta = captured["delta"]
    assert torch.isfinite(loss)
    assert (norm_of(delta, norm) <= 0.05 * (1 + 1e-4)).all()
    assert norm_of(delta, norm).min() > 0  # the attack moved
    pad = batch["attention_mask"] == 0
    assert pad.any() and (delta[pad] == 0).all()  # padding is never perturbed


def test_perturbation_ascends_the_contrastive_loss(tiny_bert_dir, batch):
    # FGSM steps along sign(g) must raise L_con(X+δ, {X+}) over the random start (same dropout masks).
    method = make(tiny_bert_dir, "robustembed", pgd_steps=0, fgsm_steps=3, fgsm_step_size=0.05, epsilon=0.2,
                  init_std=0.0, mix=0.0)
    method.model.eval()  # no dropout: the comparison is deterministic
    z, z_pos = method.embed(batch, views=2)
    p_pos = method.project(z_pos).detach()
    x = method.model.embeddings(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"]).detach()
    delta = method.perturbation(batch, x, p_pos)

    def adv_loss(d):
        with torch.no_grad():
            p_adv = method.project(method.embed_perturbed(batch, x + d))
            return float(info_nce(p_adv, [p_pos], 0.05))

    assert adv_loss(delta) > adv_loss(torch.zeros_like(delta))


def test_no_attack_and_no_regulariser_is_simcse_exactly(tiny_bert_dir, batch):
    simcse = make(tiny_bert_dir, "simcse")
    robust = make(tiny_bert_dir, "robustembed", pgd_steps=0, fgsm_steps=0, reg_weight=0.0)
    torch.manual_seed(123)
    expected, _ = simcse.loss(batch, 0)
    torch.manual_seed(123)
    got, _ = robust.loss(batch, 0)
    assert got.item() == expected.item()
    # and the attack changes it
    attacked = make(tiny_bert_dir, "robustembed")
    torch.manual_seed(123)
    assert attacked.loss(batch, 0)[0].item() != expected.item()


@pytest.mark.parametrize("name", ["simcse", "robustembed"])
def test_one_optimiser_step_lowers_the_loss_on_a_fixed_batch(tiny_bert_dir, batch, name):
    method = make(tiny_bert_dir, name)
    groups = method.param_groups(1e-3, 0.0)
    optimizer = torch.optim.AdamW(groups, lr=1e-3)
    torch.manual_seed(7)
    before, _ = method.loss(batch, 0)
    before.backward()
    optimizer.step()
    optimizer.zero_grad()
    torch.manual_seed(7)  # same dropout masks and δ start
    after, _ = method.loss(batch, 1)
    assert after.item() < before.item()


def test_info_nce_multi_positive_matches_the_formula():
    torch.manual_seed(0)
    a, p1, p2 = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)
    n = torch.nn.functional.normalize
    sims = torch.exp(n(a) @ torch.cat([n(p1), n(p2)]).T / 0.1)
    manual = -torch.log((sims[range(3), range(3)] + sims[range(3), [3, 4, 5]]) / sims.sum(1)).mean()
    assert torch.allclose(info_nce(a, [p1, p2], 0.1), manual, atol=1e-6)
    ce = torch.nn.functional.cross_entropy(n(a) @ n(p1).T / 0.1, torch.arange(3))
    assert torch.allclose(info_nce(a, [p1], 0.1), ce)


def test_config_parses_strings_and_rejects_unknown_names():
    cfg = get_method("robustembed").Config.from_dict({"reg_weight": "1/64", "pgd_steps": "3", "norm": "2",
                                                      "shared_gradient": "true"})
    assert (cfg.reg_weight, cfg.pgd_steps, cfg.norm, cfg.shared_gradient) == (1 / 64, 3, "2", True)
    with pytest.raises(BenchError, match="Unknown hyper-parameter"):
        get_method("robustembed").Config.from_dict({"epsilonn": 1})
    with pytest.raises(BenchError, match="norm"):
        get_method("robustembed").Config.from_dict({"norm": "3"})
    with pytest.raises(BenchError, match="Did you mean: robustembed"):
        get_method("robustembd")

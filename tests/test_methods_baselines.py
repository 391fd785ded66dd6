"""The ConSERT and USCAL baselines (bench/methods/consert.py, uscal.py) on a tiny random BERT."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tests.conftest import make_method  # noqa: E402
from bench.methods.consert import feature_cutoff, shuffle_positions, token_cutoff  # noqa: E402

SENTENCES = ["a man is playing guitar", "the movie was great fun", "a dog is running in the park", "what is it"]


def make(tiny_bert_dir, name, **cfg):
    return make_method(tiny_bert_dir, name, SENTENCES, **cfg)


def test_shuffle_permutes_only_the_inner_tokens():
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0]])
    torch.manual_seed(0)
    pos = shuffle_positions(mask)
    assert torch.equal(pos[0, [0, 5, 6, 7]], torch.tensor([0, 5, 6, 7]))  # [CLS], [SEP], padding stay
    assert sorted(pos[0, 1:5].tolist()) == [1, 2, 3, 4]
    assert torch.equal(pos[1], torch.arange(8))  # one inner token: nothing to shuffle
    moved = sum(not torch.equal(shuffle_positions(mask)[0], torch.arange(8)) for _ in range(10))
    assert moved > 0


def test_cutoffs_zero_whole_tokens_or_whole_features():
    torch.manual_seed(0)
    x = torch.randn(2, 6, 10) + 5
    mask = torch.tensor([[1] * 6, [1, 1, 1, 1, 0, 0]])
    cut = token_cutoff(x, mask, 0.3)
    zero_tokens = (cut == 0).all(-1)
    assert zero_tokens[0].sum() == 2 and zero_tokens[1].sum() == 1  # ceil(rate x inner tokens)
    assert not zero_tokens[:, 0].any()  # [CLS] kept
    fcut = feature_cutoff(x, mask, 0.2)
    zero_features = (fcut == 0).all(1)
    assert zero_features.sum(1).tolist() == [2, 2]
    assert ((fcut == 0) | (fcut == x)).all()


def test_consert_trains_without_dropout(tiny_bert_dir):
    method, batch = make(tiny_bert_dir, "consert")
    assert all(m.p == 0 for m in method.model.modules() if isinstance(m, torch.nn.Dropout))
    loss, _ = method.loss(batch, 0)
    loss.backward()
    assert torch.isfinite(loss) and any(p.grad is not None for p in method.model.parameters())
    # two identical views (no augmentation, no dropout) are the easiest case: lower loss
    same, _ = make(tiny_bert_dir, "consert", view1="none", view2="none")
    assert float(same.loss(batch, 0)[0].detach()) < float(loss.detach())


def test_uscal_fgm_step_has_norm_epsilon_and_raises_the_loss(tiny_bert_dir):
    from bench.methods.base import info_nce
    from bench.methods.perturb import capture_embedding_output, norm_of, replace_embedding_output

    method, batch = make(tiny_bert_dir, "uscal", epsilon=0.5)
    method.model.eval()
    store = {}
    with capture_embedding_output(method.model, store), torch.no_grad():
        z, z_pos = method.embed(batch, views=2)
    x, p_pos = store["x"][:4], method.project(z_pos)
    delta = method.fgm(batch, x, p_pos)
    assert torch.allclose(norm_of(delta, "2").flatten(), torch.full((4,), 0.5), atol=1e-5)

    def loss_at(d):
        with replace_embedding_output(method.model, x + d), torch.no_grad():
            return float(info_nce(method.project(method.embed(batch, views=1)[0]), [p_pos], 0.05))

    assert loss_at(delta) > loss_at(torch.zeros_like(delta)) > loss_at(-delta)
    method.model.train()
    loss, logs = method.loss(batch, 0)
    assert logs["loss"] == pytest.approx(logs["loss_clean"] + logs["loss_adv"], rel=1e-5)

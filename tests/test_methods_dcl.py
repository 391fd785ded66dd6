"""DCL (bench/methods/dcl.py) on a tiny random BERT: stop-gradient target + EMA, power normalization
with the running quadratic mean, WordNet synonym replacement, and the MLM head where one exists."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from bench.models.encoder import load_hf  # noqa: E402
from bench.methods import get_method  # noqa: E402
from bench.methods.dcl import PowerNorm, synonym_replace, synonym_table, wordnet_synonyms  # noqa: E402

SENTENCES = ["the movie was great", "the plot was boring", "a dog is running in the park", "what is the answer"]

# WordNet 3.0 data-file lines (offset, lex file, pos, hex word count, word/lex-id pairs, pointers, gloss).
NOUNS = """  1 This software and database is being provided to you, the LICENSEE, by
00000001 10 n 02 movie 0 film 0 000 | a form of entertainment
00000002 10 n 03 plot 0 story 0 secret_plan 0 000 | the story that is told
00000003 05 n 02 dog 0 domestic_dog 0 000 | a member of the genus Canis
"""
ADJECTIVES = """00000004 00 a 02 great(a) 0 good 0 000 | very good
00000005 00 a 02 boring 0 dull 0 000 | so lacking in interest as to cause weariness
"""


@pytest.fixture
def wordnet_dir(tmp_path):
    (tmp_path / "data.noun").write_text(NOUNS)
    (tmp_path / "data.adj").write_text(ADJECTIVES)
    return tmp_path


def make(backbone_dir, wordnet_dir, resources_home=None, **cfg):
    """DCL as the trainer builds it: with a TrainContext holding the tokenizer (and the home whose
    resources/ the offline MLM head comes from)."""
    from bench.methods.base import TrainContext

    torch.manual_seed(0)
    model, tok = load_hf(str(backbone_dir))
    model.train()
    cls = get_method("dcl")
    ctx = TrainContext(tokenizer=tok, home=resources_home)
    return cls(cls.Config(wordnet_dir=str(wordnet_dir), **cfg), model, "avg", ctx), tok


def test_target_branch_gets_no_gradient_and_follows_by_ema(tiny_bert_dir, wordnet_dir):
    method, tok = make(tiny_bert_dir, wordnet_dir, ema=0.5)
    batch = tok(SENTENCES, padding=True, return_tensors="pt")
    loss, logs = method.loss(batch, 0)
    loss.backward()
    target = method.modules["target"]
    assert all(p.grad is None and not p.requires_grad for p in target.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in method.model.parameters())
    assert any(p.grad is not None for p in method.modules["projection"].parameters())
    optimised = {id(p) for g in method.param_groups(1e-3, 0.0) for p in g["params"]}
    assert not any(id(p) in optimised for p in target.parameters())
    before = {k: v.clone() for k, v in target.named_parameters()}
    opt = torch.optim.SGD(method.param_groups(0.1, 0.0)[0]["params"], lr=0.1)
    opt.step()
    method.after_step(0)
    online = dict(method.model.named_parameters())
    for name, p in target.named_parameters():  # Eq. 7: ξ ← τξ + (1−τ)θ
        assert torch.allclose(p, 0.5 * before[name] + 0.5 * online[name].detach(), atol=1e-7), name
    assert logs["mlm_used"] == 0.0 and method.cfg.mlm == "off"  # the tiny BERT ships no MLM head


def test_alignment_loss_is_symmetric_normalised_mse(tiny_bert_dir, wordnet_dir):
    from bench.methods.dcl import alignment_loss

    torch.manual_seed(0)
    a, b = torch.randn(3, 5), torch.randn(3, 5)
    na, nb = torch.nn.functional.normalize(a, dim=-1), torch.nn.functional.normalize(b, dim=-1)
    assert torch.allclose(alignment_loss(a, b), ((na - nb) ** 2).sum(-1).mean(), atol=1e-6)


def test_power_norm_uses_the_running_quadratic_mean():
    torch.manual_seed(0)
    pn = PowerNorm(4, alpha_fwd=0.9, alpha_bkw=0.9, eps=1e-5)
    with torch.no_grad():
        pn.weight.copy_(torch.tensor([1.0, 2.0, 0.5, 1.5]))
        pn.bias.copy_(torch.tensor([0.0, 0.1, -0.1, 0.2]))
        pn.running_phi2.copy_(torch.tensor([4.0, 1.0, 0.25, 9.0]))
    x = (torch.randn(8, 4) * 3).requires_grad_(True)
    phi2 = pn.running_phi2.clone()
    y = pn(x)
    # forward divides by ψ⁽ᵗ⁻¹⁾, the running value, not by the batch's quadratic mean; no centring
    assert torch.allclose(y, x / (phi2 + 1e-5).sqrt() * pn.weight + pn.bias, atol=1e-6)
    # Eq. 9: (ψ⁽ᵗ⁾)² = (ψ⁽ᵗ⁻¹⁾)² + (1−α)(ψ_B² − (ψ⁽ᵗ⁻¹⁾)²)
    assert torch.allclose(pn.running_phi2, phi2 + 0.1 * ((x.detach() ** 2).mean(0) - phi2), atol=1e-6)
    # backward through the running statistics: with ν = 0 the gradient is g/ψ⁽ᵗ⁻¹⁾ exactly
    grad_out = torch.randn(8, 4)
    y.backward(grad_out)
    g = grad_out * pn.weight.detach()
    assert torch.allclose(x.grad, g / (phi2 + 1e-5).sqrt(), atol=1e-6)
    x_hat = x.detach() / (phi2 + 1e-5).sqrt()
    nu = 0.1 * (g * x_hat).mean(0)
    assert torch.allclose(pn.running_nu, nu, atol=1e-6)
    # second step: ∂L/∂x = (g − ν⁽ᵗ⁻¹⁾·x̂)/ψ⁽ᵗ⁻¹⁾
    phi2 = pn.running_phi2.clone()
    x2 = torch.randn(8, 4).requires_grad_(True)
    grad2 = torch.randn(8, 4)
    pn(x2).backward(grad2)
    x2_hat = x2.detach() / (phi2 + 1e-5).sqrt()
    expected = (grad2 * pn.weight.detach() - nu * x2_hat) / (phi2 + 1e-5).sqrt()
    assert torch.allclose(x2.grad, expected, atol=1e-6)
    # evaluation uses the running statistic too
    pn.eval()
    assert torch.allclose(pn(x2.detach()), x2.detach() / (pn.running_phi2 + 1e-5).sqrt() * pn.weight + pn.bias)


def test_wordnet_synonyms_and_token_replacement(tiny_bert_dir, wordnet_dir):
    syn = wordnet_synonyms(str(wordnet_dir))
    assert syn["movie"] == {"film"} and syn["great"] == {"good"} and syn["plot"] == {"story"}
    assert "dog" not in syn  # its only synonym is a multi-word lemma
    _, tok = load_hf(str(tiny_bert_dir))
    table = synonym_table(tok.get_vocab(), syn, stopwords=frozenset({"the"}))
    batch = tok(["the movie was great", "the plot was boring"], padding=True, return_tensors="pt")
    out = synonym_replace(batch["input_ids"], batch["attention_mask"], *table, prob=1.0)
    assert tok.batch_decode(out, skip_special_tokens=True) == ["the film was good", "the story was boring"]
    none = synonym_replace(batch["input_ids"], batch["attention_mask"], *table, prob=0.0)
    assert torch.equal(none, batch["input_ids"])


def test_missing_wordnet_names_the_fix(tmp_path):
    from bench.errors import BenchError

    with pytest.raises(BenchError, match="wordnet-base"):
        wordnet_synonyms(str(tmp_path / "nowhere"))


def test_mlm_objective_is_used_where_the_backbone_has_a_head(tmp_path, wordnet_dir):
    from transformers import BertConfig, BertForMaskedLM

    from tests.conftest import write_tiny_bert

    directory = write_tiny_bert(tmp_path / "with-head")
    config = BertConfig.from_pretrained(directory)
    torch.manual_seed(0)
    BertForMaskedLM(config).save_pretrained(directory, safe_serialization=True)
    method, tok = make(directory, wordnet_dir)
    assert method.mlm_used and method.cfg.mlm == "on"
    batch = tok(SENTENCES * 4, padding=True, return_tensors="pt")
    loss, logs = method.loss(batch, 0)
    assert logs["mlm_used"] == 1.0 and logs["loss_mlm"] > 0
    assert logs["loss"] == pytest.approx(logs["loss_align"] + logs["loss_mlm"], rel=1e-5)
    loss.backward()
    assert method.modules["mlm_head"].decoder_weight.grad is not None
    off, _ = make(directory, wordnet_dir, mlm="off")
    assert not off.mlm_used


def test_mlm_head_from_another_checkpoint_only_when_vocabulary_and_width_match(tmp_path, tiny_bert_dir,
                                                                               wordnet_dir, monkeypatch):
    from transformers import BertConfig, BertForMaskedLM

    from tests.conftest import write_tiny_bert

    # the offline masked-LM head (bench resources build --only mlm) lives under the trainer's home: resources/mlm/minilm
    head_dir = tmp_path / "home" / "resources" / "mlm" / "minilm"
    write_tiny_bert(head_dir)
    BertForMaskedLM(BertConfig.from_pretrained(head_dir)).save_pretrained(head_dir, safe_serialization=True)
    method, _ = make(tiny_bert_dir, wordnet_dir, resources_home=tmp_path / "home")  # the backbone has no head
    assert method.mlm_used and method.cfg.mlm_head_dir == str(head_dir)
    wide = write_tiny_bert(tmp_path / "wide", hidden=48)
    BertForMaskedLM(BertConfig.from_pretrained(wide)).save_pretrained(wide, safe_serialization=True)
    mismatched, _ = make(tiny_bert_dir, wordnet_dir, mlm_head_dir=str(wide))
    assert not mismatched.mlm_used and mismatched.cfg.mlm == "off"


class FakeResources:
    """A stand-in for the trainer's MethodResources: serves one WordNet directory and counts the calls."""

    def __init__(self, directory):
        self.directory, self.calls = directory, 0

    def wordnet_dir(self):
        self.calls += 1
        return self.directory


def test_tokenizer_and_wordnet_come_from_the_trainer_context(tiny_bert_dir, wordnet_dir, monkeypatch):
    """No re-loaded tokenizer and no hard-coded WordNet path: both come from the TrainContext."""
    import transformers

    from bench.methods.base import TrainContext

    def no_reload(*args, **kwargs):
        raise AssertionError("DCL must use the trainer's tokenizer, not load its own")

    torch.manual_seed(0)
    model, tok = load_hf(str(tiny_bert_dir))
    model.train()
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", no_reload)
    resources = FakeResources(wordnet_dir)
    cls = get_method("dcl")
    method = cls(cls.Config(synonym_prob=1.0), model, "avg", TrainContext(tokenizer=tok, resources=resources))
    batch = tok(["the movie was great", "the plot was boring"], padding=True, return_tensors="pt")
    loss, logs = method.loss(batch, 0)
    assert torch.isfinite(loss) and logs["replaced"] > 0  # synonyms from the context's WordNet replaced words
    assert resources.calls == 1 and method.cfg.wordnet_dir == str(wordnet_dir)  # recorded for the card
    method.loss(batch, 1)
    assert resources.calls == 1  # resolved once


def test_without_a_tokenizer_or_wordnet_dcl_names_the_fix(tiny_bert_dir):
    from bench.errors import BenchError

    torch.manual_seed(0)
    model, tok = load_hf(str(tiny_bert_dir))
    cls = get_method("dcl")
    batch = tok(SENTENCES, padding=True, return_tensors="pt")
    with pytest.raises(BenchError, match="TrainContext"):
        cls(cls.Config(), model, "avg").loss(batch, 0)
    from bench.methods.base import TrainContext

    with pytest.raises(BenchError, match="wordnet_dir"):
        cls(cls.Config(), model, "avg", TrainContext(tokenizer=tok)).loss(batch, 0)


def test_trainer_resources_serve_wordnet_from_bench_resources_then_the_system(tmp_path, wordnet_dir, monkeypatch):
    """MethodResources.wordnet_dir: the `bench resources build` copy first, else the system WordNet it is
    built from; the card records which served; neither present names the fix."""
    from bench.data import resources_layout
    from bench.errors import BenchError
    from bench.methods.resources import MethodResources

    for name in ("data.verb", "data.adv"):
        (wordnet_dir / name).write_text("")
    monkeypatch.setattr(resources_layout, "SYSTEM_WORDNET", wordnet_dir)
    home = tmp_path / "trainer-home"
    resources = MethodResources(home)
    assert resources.wordnet_dir() == wordnet_dir and "system" in resources.served()["wordnet"]
    built = home / "resources" / "nltk_data" / "corpora" / "wordnet"
    built.mkdir(parents=True)
    for name in ("data.noun", "data.verb", "data.adj", "data.adv"):
        (built / name).write_text((wordnet_dir / name).read_text())
    resources = MethodResources(home)
    assert resources.wordnet_dir() == built and "bench-resources" in resources.served()["wordnet"]
    monkeypatch.setattr(resources_layout, "SYSTEM_WORDNET", tmp_path / "none")
    with pytest.raises(BenchError, match="wordnet-base"):
        MethodResources(tmp_path / "empty-home").wordnet_dir()

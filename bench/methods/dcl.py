"""DCL: disentangled contrastive learning for robust textual representations (seed paper ``dcl.txt``,
an anonymous ICLR submission; not DCLR).

No negatives: contrast is split into alignment and uniformity.
- Alignment (§4.1): an online network θ and a target network ξ = EMA(θ), ξ ← τ_m·ξ + (1−τ_m)·θ (Eq. 7).
  With X and its augmentation X', L_align = ‖ḡ(f_θ(X)) − f̄_ξ(X')‖² = 2 − 2·cos (Eq. 8), made symmetric
  by swapping X and X', minimised w.r.t. θ only (stop-gradient on the target branch).
- Uniformity (§4.2): power normalization (Shen et al. 2020) inside the projection g (Eq. 9):
  X̂ = X/ψ⁽ᵗ⁻¹⁾, Y = γ⊙X̂ + β, (ψ⁽ᵗ⁾)² = (ψ⁽ᵗ⁻¹⁾)² + (1−α)(ψ_B² − (ψ⁽ᵗ⁻¹⁾)²): the running quadratic
  mean, no mean subtraction, and approximate backpropagation through the running statistics.
- Augmentation (§4.3): WordNet synonym replacement. WordNet comes from the trainer's context
  (``ctx.resources.wordnet_dir()``: the copy ``bench resources build`` keeps, else the system WordNet
  it is built from), or ``wordnet_dir`` when set; the card records the directory that served.
  The vocabulary, special ids and [MASK] come from the trainer's tokenizer (``ctx.tokenizer``).
- The MLM objective (§4.3) wherever a masked-LM head exists for the backbone: the backbone's own
  checkpoint (``cls.predictions.*``, e.g. bert-base-uncased), else the offline MiniLM head that
  ``bench resources build --only mlm`` trains under $BENCH_HOME/resources/mlm/minilm, when
  vocabulary and width match. all-MiniLM-L6-v2 ships no head, so without that build its runs train
  without MLM. ``mlm_used`` is logged every step, and the model card's config records ``mlm``
  ("auto" resolves to "on" or "off" at build time) and ``mlm_head_dir`` (the head's source).

Open choices (also in ``open_choices``):
- EMA rate τ_m = 0.996 (BYOL's base rate, which §4.1 follows; the paper gives none).
- PowerNorm α = 0.9 for the forward statistics and for the backward estimate ν (PowerNorm's
  defaults); ψ² starts at 1, no warm-up (Eq. 9 as written).
- g = Linear → PowerNorm → ReLU → Linear at the encoder width (BYOL's predictor, BN replaced by PN).
- Synonym replacement acts on whole-word WordPiece tokens whose WordNet synonym is itself one
  whole-word token (the trainer hands methods token ids, not text); each eligible word is replaced
  with probability 0.1 (EDA's α_sr; the paper gives no rate); stop-words are never replaced. X is
  the sentence, X' its replacement view; both keep dropout.
- MLM: BERT's 15% masking (80/10/10) on X, weight 1.0 next to the alignment loss; the head's
  decoder is an untied copy of the checkpoint's (trained with it).
- Paper profile: Adam lr 1e-5, batch 32 (§5.1); the paper pre-trains from scratch on BERT's corpus
  for a month and uses a cosine schedule; here DCL continues from the backbone on the trainer's
  unlabeled sentences with the trainer's linear schedule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from bench.errors import BenchError
from bench.methods.base import Method, MethodConfig
from bench.methods.perturb import ema_update, frozen_copy


# --- power normalization (Eq. 9) ------------------------------------------------------------------
class _PowerNormFunction(torch.autograd.Function):
    """Forward with the running quadratic mean ψ⁽ᵗ⁻¹⁾; backward through the running statistics
    (PowerNorm Algorithm 1): ∂L/∂x = (g − ν⁽ᵗ⁻¹⁾·x̂)/ψ⁽ᵗ⁻¹⁾, ν⁽ᵗ⁾ = ν⁽ᵗ⁻¹⁾(1 − (1−α)Γ) + (1−α)Λ,
    g = ∂L/∂x̂, Γ = mean_B(x̂²), Λ = mean_B(g·x̂)."""

    @staticmethod
    def forward(ctx, x, weight, bias, running_phi2, running_nu, alpha_fwd, alpha_bkw, eps):
        phi = (running_phi2 + eps).sqrt()
        x_hat = x / phi
        batch_phi2 = (x.detach() ** 2).mean(0)
        running_phi2.add_((1.0 - alpha_fwd) * (batch_phi2 - running_phi2))  # Eq. 9, third line
        ctx.save_for_backward(x_hat, weight, phi.clone(), running_nu)
        ctx.alpha_bkw = alpha_bkw
        return x_hat * weight + bias

    @staticmethod
    def backward(ctx, grad_out):
        x_hat, weight, phi, running_nu = ctx.saved_tensors
        a = ctx.alpha_bkw
        g = grad_out * weight
        grad_x = (g - running_nu * x_hat) / phi
        gamma, lam = (x_hat ** 2).mean(0), (g * x_hat).mean(0)
        running_nu.mul_(1.0 - (1.0 - a) * gamma).add_((1.0 - a) * lam)
        return grad_x, (grad_out * x_hat).sum(0), grad_out.sum(0), None, None, None, None, None


class PowerNorm(nn.Module):
    """Power normalization over [batch, features] (Shen et al., ICML 2020), as DCL Eq. 9 uses it."""

    def __init__(self, features: int, alpha_fwd: float = 0.9, alpha_bkw: float = 0.9, eps: float = 1e-5):
        super().__init__()
        self.alpha_fwd, self.alpha_bkw, self.eps = alpha_fwd, alpha_bkw, eps
        self.weight = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))
        self.register_buffer("running_phi2", torch.ones(features))  # (ψ⁽ᵗ⁾)², the running quadratic mean²
        self.register_buffer("running_nu", torch.zeros(features))  # ν, backward estimate

    def forward(self, x):
        if not self.training:
            return x / (self.running_phi2 + self.eps).sqrt() * self.weight + self.bias
        return _PowerNormFunction.apply(x, self.weight, self.bias, self.running_phi2, self.running_nu,
                                        self.alpha_fwd, self.alpha_bkw, self.eps)


class Projection(nn.Module):
    """g: Linear → PowerNorm → ReLU → Linear (BYOL's predictor with PN in place of BN)."""

    def __init__(self, hidden: int, alpha_fwd: float, alpha_bkw: float):
        super().__init__()
        self.inp, self.norm, self.out = nn.Linear(hidden, hidden), PowerNorm(hidden, alpha_fwd, alpha_bkw), nn.Linear(hidden, hidden)

    def forward(self, x):
        return self.out(F.relu(self.norm(self.inp(x))))


def alignment_loss(online, target):
    """Eq. 8: ‖ḡ − p̄‖² = 2 − 2·cos(g, p), mean over the batch; ``target`` is a constant."""
    return (2 - 2 * F.cosine_similarity(online.float(), target.detach().float(), dim=-1)).mean()


# --- WordNet synonyms on token ids ------------------------------------------------------------------
_WORD = re.compile(r"^[a-z]{2,}$")


@lru_cache(maxsize=4)
def wordnet_synonyms(wordnet_dir: str) -> dict[str, frozenset[str]]:
    """word → its single-word WordNet synonyms, read from WordNet 3.0's ``data.{noun,verb,adj,adv}``."""
    root = Path(wordnet_dir)
    files = [root / f"data.{pos}" for pos in ("noun", "verb", "adj", "adv")]
    if not any(f.exists() for f in files):
        raise BenchError(f"No WordNet data files (data.noun, ...) under {root}. Fix: `apt-get install wordnet-base "
                         f"wordnet-sense-index` (Debian/Ubuntu) then `bench resources build --only nltk`, or pass "
                         f"--set wordnet_dir=<dir with data.noun>.")
    groups: dict[str, set[str]] = {}
    for path in files:
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if not line or line.startswith(" "):
                continue  # the licence header lines start with spaces
            fields = line.split()
            count = int(fields[3], 16)
            words = {re.sub(r"\(.*\)$", "", w).lower() for w in fields[4:4 + 2 * count:2]}
            words = {w for w in words if _WORD.match(w)}
            for w in words:
                groups.setdefault(w, set()).update(words - {w})
    return {w: frozenset(s) for w, s in groups.items() if s}


def synonym_table(vocab: dict[str, int], synonyms: dict[str, frozenset[str]], stopwords=frozenset()):
    """(ids [V, K] padded with -1, counts [V], continuation [V]) over a WordPiece vocabulary:
    row v lists the whole-word tokens that are WordNet synonyms of token v."""
    size = max(vocab.values()) + 1
    rows: dict[int, list[int]] = {}
    for token, idx in vocab.items():
        if token in stopwords or token not in synonyms:
            continue
        ids = sorted(vocab[s] for s in synonyms[token] if s in vocab and s not in stopwords)
        if ids:
            rows[idx] = ids
    width = max((len(v) for v in rows.values()), default=1)
    table = torch.full((size, width), -1, dtype=torch.long)
    counts = torch.zeros(size, dtype=torch.long)
    for idx, ids in rows.items():
        table[idx, : len(ids)] = torch.tensor(ids)
        counts[idx] = len(ids)
    continuation = torch.zeros(size, dtype=torch.bool)
    for token, idx in vocab.items():
        continuation[idx] = token.startswith("##")
    return table, counts, continuation


def synonym_replace(input_ids, attention_mask, table, counts, continuation, prob: float, generator=None):
    """Replace each whole-word token that has synonyms, with probability ``prob``, by a random synonym."""
    followed_by_piece = torch.zeros_like(input_ids, dtype=torch.bool)
    followed_by_piece[:, :-1] = continuation[input_ids[:, 1:]]
    n = counts[input_ids]
    eligible = (n > 0) & ~followed_by_piece & ~continuation[input_ids] & attention_mask.bool()
    draw = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    pick = (torch.rand(input_ids.shape, generator=generator, device=input_ids.device) * n).long()
    pick = torch.minimum(pick, (n - 1).clamp(min=0))
    replaced = table[input_ids, pick]
    return torch.where(eligible & (draw < prob), replaced, input_ids)


# --- the masked-LM head, where the backbone has one -----------------------------------------------
def mlm_head_candidates(model, explicit: str = "", resources_dir: Path | None = None) -> list[str]:
    """Where a masked-LM head for ``model`` may be: an explicit directory, else the backbone checkpoint
    itself, then the offline MiniLM head that ``bench resources build --only mlm`` trains
    under ``resources_dir`` (the trainer's $BENCH_HOME/resources; BENCH_HOME's when not given)."""
    if explicit:
        return [explicit]
    if resources_dir is None:
        from bench.paths import Paths

        resources_dir = Paths.from_env().resources
    own = getattr(model.config, "_name_or_path", "") or ""
    return [c for c in (own, str(Path(resources_dir) / "mlm" / "minilm")) if c]


def load_mlm_head(model, candidates: list[str]):
    """(head, source): the first candidate checkpoint with a trained BERT MLM head (``cls.predictions``)
    whose vocabulary and width match ``model``; (None, "") when there is none (e.g. all-MiniLM-L6-v2
    before the offline head is built)."""
    import transformers
    from transformers import AutoModelForMaskedLM

    for source in candidates:
        verbosity = transformers.logging.get_verbosity()
        transformers.logging.set_verbosity_error()  # "newly initialized" warnings are expected here
        try:
            mlm, info = AutoModelForMaskedLM.from_pretrained(source, output_loading_info=True)
        except (OSError, ValueError, KeyError):
            continue
        finally:
            transformers.logging.set_verbosity(verbosity)
        head = getattr(getattr(mlm, "cls", None), "predictions", None)
        matches = (mlm.config.vocab_size, mlm.config.hidden_size) == (model.config.vocab_size, model.config.hidden_size)
        if head is None or not matches or any(k.startswith("cls.") for k in info.get("missing_keys", [])):
            continue
        return MLMHead(head), source
    return None, ""


class MLMHead(nn.Module):
    """BERT's prediction head (transform, then decoder) as plain parameters: nothing shared, so the
    checkpoint can be written as safetensors."""

    def __init__(self, predictions):
        super().__init__()
        import copy

        self.transform = copy.deepcopy(predictions.transform)
        self.decoder_weight = nn.Parameter(predictions.decoder.weight.detach().clone())
        self.decoder_bias = nn.Parameter(predictions.bias.detach().clone())

    def forward(self, states):
        return F.linear(self.transform(states), self.decoder_weight, self.decoder_bias)


def mask_tokens(input_ids, attention_mask, special_ids, mask_id: int, vocab_size: int, prob: float = 0.15,
                generator=None):
    """BERT's masking: ``prob`` of the real tokens are targets; of those 80% → [MASK], 10% random, 10% kept."""
    device = input_ids.device
    special = torch.isin(input_ids, torch.tensor(sorted(special_ids), device=device)) | ~attention_mask.bool()
    targets = (torch.rand(input_ids.shape, generator=generator, device=device) < prob) & ~special
    labels = torch.where(targets, input_ids, torch.full_like(input_ids, -100))
    roll = torch.rand(input_ids.shape, generator=generator, device=device)
    masked = torch.where(targets & (roll < 0.8), torch.full_like(input_ids, mask_id), input_ids)
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, device=device)
    masked = torch.where(targets & (roll >= 0.8) & (roll < 0.9), random_ids, masked)
    return masked, labels


@dataclass
class DCLConfig(MethodConfig):
    mlp: bool = False  # DCL's projection is g (with PowerNorm), not SimCSE's MLP
    ema: float = 0.996  # τ_m, Eq. 7: open choice (BYOL's)
    powernorm_alpha: float = 0.9  # α, Eq. 9 (PowerNorm's default; also the backward estimate's rate)
    synonym_prob: float = 0.1  # §4.3 WordNet synonym replacement: open choice (EDA's α_sr)
    wordnet_dir: str = ""  # "" → the trainer's WordNet (ctx.resources); the card records the one that served
    mlm: str = "auto"  # §4.3 MLM objective: auto (use a head where one exists) | off; "on" after build
    mlm_head_dir: str = ""  # "" → the backbone's own head, else the offline MiniLM head
    mlm_weight: float = 1.0  # open choice: MLM next to alignment, unweighted
    mlm_probability: float = 0.15  # BERT's masking rate

    def __post_init__(self):
        if self.mlm not in ("auto", "off", "on"):
            raise BenchError(f"mlm must be auto or off (got {self.mlm!r})")
        if not 0.0 <= self.synonym_prob <= 1.0:
            raise BenchError(f"synonym_prob must lie in [0, 1] (got {self.synonym_prob})")


class DCL(Method):
    name = "dcl"
    Config = DCLConfig
    citation = "Disentangled Contrastive Learning for Learning Robust Textual Representations (anonymous ICLR submission; seed paper dcl.txt)."
    # §5.1: Adam, lr 1e-5, batch 32.
    training = {"paper": {"lr": 1e-5, "batch_size": 32}}
    # a step / SimCSE's, benchmarks/train_step.py (MiniLM, batch 32, 1 thread, beside two jobs)
    step_cost = 1.39
    open_choices = {
        "ema": "tau_m = 0.996 (BYOL's base rate; paper gives none)",
        "powernorm": "alpha = 0.9 forward and backward (PowerNorm defaults), psi^2 starts at 1, no warm-up",
        "projection": "g = Linear -> PowerNorm -> ReLU -> Linear at encoder width, online branch only",
        "augmentation": "WordNet synonym replacement on whole-word WordPiece tokens, p = 0.1 per eligible "
                        "word (EDA), stop-words (sklearn list) kept; X = sentence, X' = replaced view; WordNet 3.0 "
                        "from the trainer's resources (bench resources copy, else the system one), recorded as "
                        "wordnet_dir",
        "mlm": "auto: the backbone checkpoint's own MLM head, else the offline MiniLM head of `bench resources "
               "build --only mlm` when vocabulary and width match; 15% BERT masking on X, weight 1.0",
        "schedule": "trainer's linear schedule, continuing from the backbone (paper: pre-training, cosine)",
    }

    def __init__(self, cfg, model, pooler="cls_before_pooler", ctx=None):
        super().__init__(cfg, model, pooler, ctx)
        self._synonyms = None
        self._tokenizer_info = None

    def build(self):
        cfg = self.cfg
        modules = {"projection": Projection(self.hidden_size, cfg.powernorm_alpha, cfg.powernorm_alpha),
                   "target": frozen_copy(self.model)}
        candidates = mlm_head_candidates(self.model, cfg.mlm_head_dir, self.ctx.resources_dir)
        head, source = load_mlm_head(self.model, candidates) if cfg.mlm != "off" else (None, "")
        if head is not None:
            modules["mlm_head"] = head
        # recorded in the model card with the config: whether MLM ran, and whose head it used
        cfg.mlm, cfg.mlm_head_dir = ("on", source) if head is not None else ("off", cfg.mlm_head_dir)
        return modules

    @property
    def mlm_used(self) -> bool:
        return "mlm_head" in self.modules

    def param_groups(self, lr, weight_decay):
        params = [p for p in self.model.parameters() if p.requires_grad]
        params += list(self.modules["projection"].parameters())
        if self.mlm_used:
            params += list(self.modules["mlm_head"].parameters())
        return [{"params": params, "lr": lr, "weight_decay": weight_decay}]

    # --- tokens -----------------------------------------------------------------------------------
    def tokenizer_info(self):
        """(vocab, special ids, mask id) from the trainer's tokenizer (``ctx.tokenizer``; batches are token ids)."""
        if self._tokenizer_info is None:
            tok = self.ctx.tokenizer
            if tok is None:
                raise BenchError("DCL needs the backbone's tokenizer for synonym replacement and masking: construct "
                                 "it with a TrainContext(tokenizer=...) (bench/train.py passes the one it loaded).")
            vocab = tok.get_vocab()
            if not any(t.startswith("##") for t in vocab):
                raise BenchError("DCL's token-level synonym replacement supports WordPiece vocabularies (BERT, "
                                 "MiniLM); this backbone's tokenizer is not WordPiece.")
            self._tokenizer_info = (vocab, set(tok.all_special_ids), tok.mask_token_id)
        return self._tokenizer_info

    def synonyms(self, device):
        if self._synonyms is None:
            from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

            vocab = self.tokenizer_info()[0]
            if not self.cfg.wordnet_dir:
                if self.ctx.resources is None:
                    raise BenchError("DCL needs WordNet: pass --set wordnet_dir=DIR or train through bench/train.py, "
                                     "whose context resolves it.")
                self.cfg.wordnet_dir = str(self.ctx.resources.wordnet_dir())  # recorded in the card's config
            table = synonym_table(vocab, wordnet_synonyms(self.cfg.wordnet_dir), frozenset(ENGLISH_STOP_WORDS))
            self._synonyms = tuple(t.to(device) for t in table)
        return self._synonyms

    # --- the loss ---------------------------------------------------------------------------------
    def loss(self, batch, step):
        cfg = self.cfg
        ids, mask = batch["input_ids"], batch["attention_mask"]
        augmented = dict(batch, input_ids=synonym_replace(ids, mask, *self.synonyms(ids.device), cfg.synonym_prob))
        both = {k: torch.cat([batch[k], augmented[k]]) for k in batch}
        online = self.modules["projection"](self.embed(both, views=1)[0])  # g(f_θ(X)), g(f_θ(X'))
        target_net = self.modules["target"]
        target_net.train(self.model.training)
        with torch.no_grad():
            target = self.embed(both, views=1, model=target_net)[0]  # f_ξ(X), f_ξ(X')
        n = ids.shape[0]
        align = alignment_loss(online[:n], target[n:]) + alignment_loss(online[n:], target[:n])  # Eq. 8 + sym.
        logs = {"loss_align": float(align.detach()), "mlm_used": float(self.mlm_used),
                "replaced": float((augmented["input_ids"] != ids).float().sum() / mask.sum())}
        loss = align
        if self.mlm_used and cfg.mlm_weight > 0:
            mlm = self.mlm_loss(batch)
            loss = loss + cfg.mlm_weight * mlm
            logs["loss_mlm"] = float(mlm.detach())
        logs["loss"] = float(loss.detach())
        return loss, logs

    def mlm_loss(self, batch):
        _, special, mask_id = self.tokenizer_info()
        masked, labels = mask_tokens(batch["input_ids"], batch["attention_mask"], special, mask_id,
                                     self.model.config.vocab_size, self.cfg.mlm_probability)
        states = self.model(**dict(batch, input_ids=masked)).last_hidden_state
        logits = self.modules["mlm_head"](states)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), labels.view(-1), ignore_index=-100)

    def after_step(self, step):
        ema_update(self.modules["target"], self.model, self.cfg.ema)  # Eq. 7


METHOD = DCL

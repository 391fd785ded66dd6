"""V-advCSE: virtual adversarial contrastive sentence embeddings (seed paper ``v-advcse.txt``; no public code).

Loss (Eq. 10): L = L_cont + λ·L_vadv, with
- L_cont: unsupervised SimCSE's InfoNCE over two dropout views (Eq. 7, τ = 0.05);
- L_vadv = F[p(y|x, θ̂), p(y|x + r_vadv, θ)] (Eq. 8), r_vadv from Algorithm 1:
  r ~ N(0, σ²), then K = 1 step r ← Π_{‖r‖ ≤ ε}(r + η·g), g = ∇_r F(f(x; θ̂), f(x + r; θ));
- F = Jensen-Shannon divergence (Table 5's best), KL and symmetric KL as options (Eq. 11-13);
- an MLP pooler with BatchNorm over [CLS] during training (§4.1, Table 4); λ = 1e-6 (Table 6).

What p(y|x) is for an unsupervised encoder (the paper names none): the model's own prediction for
SimCSE's instance-discrimination task, i.e. row i of softmax_j(sim(h_i, h_j⁺)/τ) over the in-batch
positives. L_cont is exactly the cross-entropy of this distribution against the label "i", so it
is the only output distribution the model is trained to produce; the virtual label is the whole
distribution the clean model assigns (VAT's "virtual label"). θ̂ is a constant copy of θ: the clean
logits are detached, which is the same function with the gradient stopped (no second network).

Open choices (also in ``open_choices``, copied into the model card):
- r perturbs the token-embedding output of the anchor view ("we add the perturbation to the original
  embedding", §3); the positives h⁺ (the other dropout view) are the classes of p(y|·) and are
  constants in L_vadv (the contrastive loss already trains them).
- Ball: L2 per sentence (tokens × hidden flattened), as Miyato et al.'s VAT; ε = 1.0, about 1% of
  the L2 norm of a 32-token embedding output of a 384- or 768-wide LayerNorm-ed encoder; η = ε
  (K = 1 and VAT's r_adv = ε·g/‖g‖ steps to the boundary); σ = 1e-3 per coordinate, i.e. a random
  start of L2 norm ≈ 0.11 (32 tokens × 384) to 0.16 (× 768), well inside the ball, so the gradient
  step, not the noise, sets r. L∞ and L1 are options (``norm``).
- MLP with BatchNorm: Linear → BatchNorm1d → ReLU → Linear ("a two-layer pooler with Batch
  Normalization", §5 citing SimCLR); dropped at evaluation like SimCSE's MLP.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bench.errors import BenchError
from bench.methods.base import Method, MethodConfig, MLPPooler, info_nce
from bench.methods.perturb import (ascent_step, capture_embedding_output, norm_of, project,
                                   replace_embedding_output)


VADV_WEIGHT = 1e-2
OPEN_CHOICES = {}


def similarity_logits(anchor, candidates, temperature: float):
    """sim(h_i, h_j⁺)/τ with cosine similarity: the logits of the instance prediction p(y = j | x_i)."""
    return F.normalize(anchor.float(), dim=-1) @ F.normalize(candidates.float(), dim=-1).T / temperature


def kl_rows(ref_logits, logits):
    """F_KL(P‖Q) (Eq. 11) per row, P = softmax(ref_logits), Q = softmax(logits)."""
    log_p, log_q = F.log_softmax(ref_logits, -1), F.log_softmax(logits, -1)
    return (log_p.exp() * (log_p - log_q)).sum(-1)


def symmetric_kl_rows(ref_logits, logits):
    """F_SKL = ½(KL(P‖Q) + KL(Q‖P)) (Eq. 12) per row."""
    return 0.5 * (kl_rows(ref_logits, logits) + kl_rows(logits, ref_logits))


def js_rows(ref_logits, logits):
    """F_JS = ½KL(P‖M) + ½KL(Q‖M), M = ½(P + Q) (Eq. 13-14) per row."""
    p, q = F.softmax(ref_logits, -1), F.softmax(logits, -1)
    log_m = (0.5 * (p + q)).clamp(min=1e-12).log()
    kl = lambda a: (a * (a.clamp(min=1e-12).log() - log_m)).sum(-1)  # noqa: E731
    return 0.5 * kl(p) + 0.5 * kl(q)


def kl_divergence(ref_logits, logits):
    """Mean over rows of F_KL (Eq. 11)."""
    return kl_rows(ref_logits, logits).mean()


def symmetric_kl(ref_logits, logits):
    """Mean over rows of F_SKL (Eq. 12)."""
    return symmetric_kl_rows(ref_logits, logits).mean()


def js_divergence(ref_logits, logits):
    """Mean over rows of F_JS (Eq. 13)."""
    return js_rows(ref_logits, logits).mean()


DIVERGENCES = {"js": js_rows, "kl": kl_rows, "skl": symmetric_kl_rows}  # per-row F, Eq. 11-13
NORMS = ("2", "inf", "1")
PREDICTIONS = ("features", "instances")
REDUCTIONS = ("sum", "mean")


class BatchNormMLP(nn.Module):
    """Linear → BatchNorm1d → ReLU → Linear over the pooled vector (V-advCSE §4.1, Table 4)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden))

    def forward(self, x):
        return self.net(x)


@dataclass
class VAdvCSEConfig(MethodConfig):
    temperature: float = 0.05  # Eq. 7: τ (SimCSE's)
    mlp: bool = True  # §4.1: MLP over [CLS] in training only
    batchnorm: bool = True  # §4.1 / Table 4: the MLP has BatchNorm (False: SimCSE's dense+tanh)
    vadv_weight: float = VADV_WEIGHT  # λ, Eq. 10: open choice (docstring: §5's balance, not Table 6's 1e-6)
    divergence: str = "js"  # F, Eq. 11-13 / Table 5: js | kl | skl
    prediction: str = "features"  # p(y|x), Eq. 8 / Algorithm 1 F(f(x), f(x+r)): features | instances (v1)
    reduction: str = "sum"  # Algorithm 1 lines 2-9: F summed over the batch's sentences | mean
    steps: int = 1  # K, Algorithm 1 (Miyato et al.: one iteration suffices)
    norm: str = "2"  # normtype, Algorithm 1 line 6: 2 | inf | 1 (open choice: 2)
    epsilon: float = 1.0  # ε, Algorithm 1: open choice (docstring)
    step_size: float = 1.0  # η, Algorithm 1: open choice (= ε)
    init_std: float = 1e-3  # σ, Algorithm 1 line 3: open choice

    def __post_init__(self):
        for name, value, choices in (("divergence", self.divergence, tuple(DIVERGENCES)), ("norm", self.norm, NORMS),
                                     ("prediction", self.prediction, PREDICTIONS),
                                     ("reduction", self.reduction, REDUCTIONS)):
            if value not in choices:
                raise BenchError(f"{name} must be one of {', '.join(choices)} (got {value!r})")
        if self.steps < 0 or self.epsilon < 0 or self.init_std < 0 or self.vadv_weight < 0:
            raise BenchError("steps, epsilon, init_std and vadv_weight must be >= 0")


class VAdvCSE(Method):
    name = "vadvcse"
    version = 2  # v1 took p(y|x) as the in-batch softmax, averaged: the term was inert (issue 12)
    Config = VAdvCSEConfig
    citation = "V-advCSE: virtual adversarial contrastive learning of sentence embeddings (seed paper v-advcse.txt)."
    # §4.1: "the same settings as the unsupervised SimCSE": 1 epoch, STS-B dev every 125 steps.
    training = {"paper": {"epochs": 1, "eval_every": 125}}
    open_choices = OPEN_CHOICES

    def build(self):
        if not self.cfg.mlp:
            return {}
        return {"mlp": BatchNormMLP(self.hidden_size) if self.cfg.batchnorm else MLPPooler(self.hidden_size)}

    def prediction_logits(self, p, p_pos):
        """Logits of p(y|x): the training-time representation's features, or the in-batch instance logits."""
        if self.cfg.prediction == "features":
            return p.float()
        return similarity_logits(p, p_pos, self.cfg.temperature)

    def divergence(self, ref_logits, logits):
        """F (Eq. 11-13) per sentence, summed (Algorithm 1) or averaged over the batch."""
        rows = DIVERGENCES[self.cfg.divergence](ref_logits, logits)
        return rows.sum() if self.cfg.reduction == "sum" else rows.mean()

    def loss(self, batch, step):
        cfg = self.cfg
        store = {}
        with capture_embedding_output(self.model, store):
            z, z_pos = self.embed(batch, views=2)
        p, p_pos = self.project(z), self.project(z_pos)
        contrastive = info_nce(p, [p_pos], cfg.temperature)  # Eq. 7
        logs = {"loss_cont": float(contrastive.detach())}
        if cfg.vadv_weight == 0:
            return contrastive, {"loss": float(contrastive.detach()), **logs}
        n = batch["input_ids"].shape[0]
        x = store["x"][:n]
        p_pos = p_pos.detach()  # the instance classes (prediction="instances") are constants in L_vadv
        ref_logits = self.prediction_logits(p, p_pos).detach()  # p(y|x, θ̂): θ̂ is a constant copy of θ
        mask = batch["attention_mask"].unsqueeze(-1).to(torch.float32)
        r = self.perturbation(batch, x.detach(), ref_logits, p_pos, mask)
        adv_logits = self.prediction_logits(self.project(self.embed_on(batch, x + r.to(x.dtype))), p_pos)
        vadv = self.divergence(ref_logits, adv_logits)  # Algorithm 1 line 8
        loss = contrastive + cfg.vadv_weight * vadv  # Eq. 10
        weighted = cfg.vadv_weight * float(vadv.detach())
        return loss, {"loss": float(loss.detach()), **logs, "loss_vadv": float(vadv.detach()),
                      "weighted_vadv_over_cont": weighted / max(logs["loss_cont"], 1e-12),
                      "r_norm": float(norm_of(r, cfg.norm).mean())}

    def embed_on(self, batch, x):
        """Pooled vectors of the encoder run on ``x`` as its token-embedding output."""
        with replace_embedding_output(self.model, x):
            return self.embed(batch, views=1)[0]

    def perturbation(self, batch, x, ref_logits, p_pos, mask):
        """r_vadv of Algorithm 1 (float32, zero on padding, inside the ε-ball); no parameter gets a gradient."""
        cfg = self.cfg
        r = project(torch.randn(x.shape, device=x.device) * cfg.init_std * mask, cfg.norm, cfg.epsilon)
        for _ in range(cfg.steps):
            r = r.detach().requires_grad_(True)
            logits = self.prediction_logits(self.project(self.embed_on(batch, x + r.to(x.dtype))), p_pos)
            (g,) = torch.autograd.grad(self.divergence(ref_logits, logits), r)
            r = project(ascent_step(r.detach(), g * mask, cfg.step_size, cfg.norm), cfg.norm, cfg.epsilon)
        return r.detach()


METHOD = VAdvCSE

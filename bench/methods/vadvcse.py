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


def similarity_logits(anchor, candidates, temperature: float):
    """sim(h_i, h_j⁺)/τ with cosine similarity: the logits of p(y = j | x_i)."""
    return F.normalize(anchor.float(), dim=-1) @ F.normalize(candidates.float(), dim=-1).T / temperature


def kl_divergence(ref_logits, logits):
    """F_KL(P‖Q) (Eq. 11), P = softmax(ref_logits), Q = softmax(logits), mean over rows."""
    log_p, log_q = F.log_softmax(ref_logits, -1), F.log_softmax(logits, -1)
    return (log_p.exp() * (log_p - log_q)).sum(-1).mean()


def symmetric_kl(ref_logits, logits):
    """F_SKL = ½(KL(P‖Q) + KL(Q‖P)) (Eq. 12)."""
    return 0.5 * (kl_divergence(ref_logits, logits) + kl_divergence(logits, ref_logits))


def js_divergence(ref_logits, logits):
    """F_JS = ½KL(P‖M) + ½KL(Q‖M), M = ½(P + Q) (Eq. 13)."""
    p, q = F.softmax(ref_logits, -1), F.softmax(logits, -1)
    log_m = (0.5 * (p + q)).clamp(min=1e-12).log()
    kl = lambda a: (a * (a.clamp(min=1e-12).log() - log_m)).sum(-1)  # noqa: E731
    return (0.5 * kl(p) + 0.5 * kl(q)).mean()


DIVERGENCES = {"js": js_divergence, "kl": kl_divergence, "skl": symmetric_kl}
NORMS = ("2", "inf", "1")


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
    vadv_weight: float = 1e-6  # λ, Eq. 10 / Table 6
    divergence: str = "js"  # F, Eq. 11-13 / Table 5: js | kl | skl
    steps: int = 1  # K, Algorithm 1 (Miyato et al.: one iteration suffices)
    norm: str = "2"  # normtype, Algorithm 1 line 6: 2 | inf | 1 (open choice: 2)
    epsilon: float = 1.0  # ε, Algorithm 1: open choice (docstring)
    step_size: float = 1.0  # η, Algorithm 1: open choice (= ε)
    init_std: float = 1e-3  # σ, Algorithm 1 line 3: open choice

    def __post_init__(self):
        if self.divergence not in DIVERGENCES:
            raise BenchError(f"divergence must be one of {', '.join(DIVERGENCES)} (got {self.divergence!r})")
        if self.norm not in NORMS:
            raise BenchError(f"norm must be one of {', '.join(NORMS)} (got {self.norm!r})")
        if self.steps < 0 or self.epsilon < 0 or self.init_std < 0 or self.vadv_weight < 0:
            raise BenchError("steps, epsilon, init_std and vadv_weight must be >= 0")


class VAdvCSE(Method):
    name = "vadvcse"
    Config = VAdvCSEConfig
    citation = "V-advCSE: virtual adversarial contrastive learning of sentence embeddings (seed paper v-advcse.txt)."
    # §4.1: "the same settings as the unsupervised SimCSE": 1 epoch, STS-B dev every 125 steps.
    training = {"paper": {"epochs": 1, "eval_every": 125}}
    open_choices = {
        "p(y|x)": "softmax over in-batch similarity logits sim(h_i, h_j+)/tau: the instance-discrimination "
                  "prediction that L_cont trains; theta-hat = detached clean logits",
        "r": "added to the token-embedding output of the anchor view; positives h+ are constants in L_vadv",
        "ball": "L2 per sentence (tokens x hidden), epsilon = 1.0 (~1% of a 32-token embedding output's norm)",
        "step_size": "eta = epsilon: with K = 1 this is VAT's r = eps*g/||g||",
        "init_std": "sigma = 1e-3 per coordinate: random start of L2 norm ~0.1-0.16, well inside the ball",
        "mlp": "Linear -> BatchNorm1d -> ReLU -> Linear (two-layer pooler with BN, as SimCLR); training only",
    }

    def build(self):
        if not self.cfg.mlp:
            return {}
        return {"mlp": BatchNormMLP(self.hidden_size) if self.cfg.batchnorm else MLPPooler(self.hidden_size)}

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
        ref_logits = similarity_logits(p, p_pos, cfg.temperature).detach()  # p(y|x, θ̂)
        mask = batch["attention_mask"].unsqueeze(-1).to(torch.float32)
        r = self.perturbation(batch, x.detach(), ref_logits, p_pos.detach(), mask)
        adv_logits = similarity_logits(self.project(self.embed_on(batch, x + r.to(x.dtype))), p_pos.detach(),
                                       cfg.temperature)
        vadv = DIVERGENCES[cfg.divergence](ref_logits, adv_logits)  # Algorithm 1 line 8
        loss = contrastive + cfg.vadv_weight * vadv  # Eq. 10
        return loss, {"loss": float(loss.detach()), **logs, "loss_vadv": float(vadv.detach()),
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
            logits = similarity_logits(self.project(self.embed_on(batch, x + r.to(x.dtype))), p_pos, cfg.temperature)
            (g,) = torch.autograd.grad(DIVERGENCES[cfg.divergence](ref_logits, logits), r)
            r = project(ascent_step(r.detach(), g * mask, cfg.step_size, cfg.norm), cfg.norm, cfg.epsilon)
        return r.detach()


METHOD = VAdvCSE

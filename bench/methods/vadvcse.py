"""V-advCSE: virtual adversarial contrastive sentence embeddings (seed paper ``v-advcse.txt``; no public code).

Loss (Eq. 10): L = L_cont + λ·L_vadv, with
- L_cont: unsupervised SimCSE's InfoNCE over two dropout views (Eq. 7, τ = 0.05), a mean over the batch;
- L_vadv = F[p(y|x, θ̂), p(y|x + r_vadv, θ)] (Eq. 8), r_vadv from Algorithm 1:
  r ~ N(0, σ²), then K = 1 step r ← Π_{‖r‖ ≤ ε}(r + η·g), g = ∇_r F(f(x; θ̂), f(x + r; θ));
- F = Jensen-Shannon divergence (Table 5's best), KL and symmetric KL as options (Eq. 11-13);
- an MLP pooler with BatchNorm over [CLS] during training (§4.1, Table 4).

Version 2: p(y|x) over the representation's features. Version 1 took p(y|x) as the in-batch instance
softmax and averaged F over the batch at λ = 1e-6: JS ≤ ln 2 per sentence, so λ·L_vadv ≤ 7e-7 and
the term moved nothing (on all-MiniLM-L6-v2 at batch 64: L_vadv = 1.2·L_cont, and doubling λ changed
the gradient by 2e-6 of its norm); the model trained as SimCSE with a BatchNorm MLP. What changed,
and why:
- p(y|x) is the model's OUTPUT distribution as Algorithm 1 writes it, F(f(x; θ̂), f(x + r; θ)) with
  f(x) = h the sentence representation (§3: h_i = f(x_i)): the softmax over the features of the
  training-time representation (the BatchNorm-MLP output that L_cont also sees), as VAT takes the
  softmax of a network's output (Miyato et al. 2018). ``prediction=instances`` keeps v1's reading.
- F is summed over the batch's sentences: Algorithm 1 computes it "for all x ∈ X" (and Eq. 11 is a
  sum); L_cont stays SimCSE's mean. With both, L_vadv ≈ 67·L_cont on all-MiniLM-L6-v2 (batch 64 wiki
  sentences, mean pooling, at step 0: L_cont 0.0044, L_vadv 0.29), the paper's §5 "about 100 times".
- λ = 1e-2, not Table 6's 1e-6. §5: "scale of contrastive loss is 100 times smaller than the virtual
  adversarial loss. Therefore, we used smaller coefficient values to balance between each other":
  balancing a 100× ratio is λ ≈ 1/100. Table 6's λ = 1e-6 contradicts §5's own ratio: it would weight
  the term at 1e-6 × 100 = 1e-4 of L_cont, i.e. inert, whatever p(y|x) is (no reading of the paper
  gives L_vadv the ~1e6·L_cont that λ = 1e-6 would need to act). Table 6 is also flat over three
  decades of λ (83.2-84.6 for 1e-6..1e-3), and its λ = 0 row may differ from the others in more
  than the weight: a λ = 0 run that skips the adversarial passes draws another dropout stream (here,
  4 trainer steps on a tiny BERT at λ = 0 and at λ = 1e-2 end 59% of the training displacement
  apart, λ and 2λ 0.7% apart). At λ = 1e-2 on all-MiniLM-L6-v2 (batch 64): λ·L_vadv = 0.67·L_cont
  and the term is 17% of the gradient (doubling λ moves the gradient by 17% of its norm).
  ``--set vadv_weight=1e-6`` runs the printed value.

Other open choices (also in ``open_choices``, copied into the model card):
- θ̂ is a constant copy of θ: the clean logits (anchor view, its own dropout mask) are detached, the
  same function with the gradient stopped (no second network); the perturbed pass draws fresh dropout.
- r perturbs the token-embedding output of the anchor view ("we add the perturbation to the original
  embedding", §3); with ``prediction=instances`` the positives h⁺ are the classes and constants.
- Ball: L2 per sentence (tokens × hidden flattened), as Miyato et al.'s VAT; ε = 1.0, about 1% of
  the L2 norm of a 32-token embedding output of a 384- or 768-wide LayerNorm-ed encoder; η = ε
  (K = 1 and VAT's r_adv = ε·g/‖g‖ steps to the boundary); σ = 1e-3 per coordinate, i.e. a random
  start of L2 norm ≈ 0.11 (32 tokens × 384) to 0.16 (× 768), well inside the ball, so the gradient
  step, not the noise, sets r. L∞ and L1 are options (``norm``).
- MLP with BatchNorm: Linear → BatchNorm1d → ReLU → Linear ("a two-layer pooler with Batch
  Normalization", §5 citing SimCLR); dropped at evaluation like SimCSE's MLP. BatchNorm runs in
  training mode in every pass (clean, attack, adversarial), each with its own batch statistics.
- The summed L_vadv grows with the batch size, so λ's balance holds at the paper's batch 64;
  ``reduction=mean`` divides by the batch. The log line shows ``weighted_vadv_over_cont`` = λ·L_vadv/L_cont.
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


OPEN_CHOICES = {
    "version": "2: p(y|x) over the representation's features, F summed over sentences, lambda = 1e-2; "
               "version 1 (in-batch softmax, mean, lambda 1e-6) made the term inert: the model trained as SimCSE + "
               "a BatchNorm MLP",
    "p(y|x)": "softmax over the features of the training-time representation g(f(x)) (Algorithm 1's "
              "F(f(x), f(x+r)), VAT's softmax of the output); prediction=instances = v1's in-batch softmax",
    "theta_hat": "detached clean logits of the anchor view (its dropout mask); the perturbed pass draws fresh dropout",
    "reduction": "F summed over the batch's sentences (Algorithm 1: for all x in X); L_cont a mean. Measured on "
                 "all-MiniLM-L6-v2, batch 64, step 0: L_vadv = 67 x L_cont (paper section 5: about 100)",
    "vadv_weight": "lambda = 1e-2: section 5 balances a 100x ratio with a small coefficient; Table 6's 1e-6 would "
                   "weight the term at 1e-4 of L_cont by section 5's own ratio (inert). At 1e-2 on MiniLM: "
                   "lambda*L_vadv = 0.67 L_cont, 17% of the gradient. --set vadv_weight=1e-6 runs the printed value",
    "lambda_zero": "lambda = 0 skips the adversarial passes, which also changes the dropout random stream: compare "
                   "lambda values > 0 with each other, not with 0, to see the term's own effect",
    "r": "added to the token-embedding output of the anchor view; padding never perturbed",
    "ball": "L2 per sentence (tokens x hidden), epsilon = 1.0 (~1% of a 32-token embedding output's norm)",
    "step_size": "eta = epsilon: with K = 1 this is VAT's r = eps*g/||g||",
    "init_std": "sigma = 1e-3 per coordinate: random start of L2 norm ~0.1-0.16, well inside the ball",
    "mlp": "Linear -> BatchNorm1d -> ReLU -> Linear (two-layer pooler with BN, as SimCLR); training only; "
           "BN in training mode in every pass",
}


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
    vadv_weight: float = 1e-2  # λ, Eq. 10: §5's balance of a 100x ratio, not Table 6's 1e-6 (docstring)
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
    version = 2  # v1 took p(y|x) as the in-batch softmax, averaged: the term was inert
    Config = VAdvCSEConfig
    citation = "V-advCSE: virtual adversarial contrastive learning of sentence embeddings (seed paper v-advcse.txt)."
    # §4.1: "the same settings as the unsupervised SimCSE": 1 epoch, STS-B dev every 125 steps.
    training = {"paper": {"epochs": 1, "eval_every": 125}}
    # a step / SimCSE's, benchmarks/train_step.py (MiniLM, batch 32, 1 thread, beside two jobs)
    # (one extra pass to find r_vadv)
    step_cost = 1.84
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

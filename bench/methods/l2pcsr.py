"""L2P-CSR: learning to perturb for contrastive sentence representations (Zhou et al.; seed paper
``l2p-csr.txt``; code RUCAIBox/L2P-CSR, a SimCSE fork, read not vendored).

Per batch (Algorithm 1):
1. for each of the two views and each of the first k layer outputs E⁽⁰⁾..E⁽ᵏ⁻¹⁾ (E⁽⁰⁾: the embedding
   output), weakening probabilities P_tok ∈ [0,1]^m (one per token) and P_fea ∈ [0,1]^d (one per
   feature) start U(0,1) (Eq. 4);
2. t times: masks α = 1[p ≥ φ] (Eq. 1), M_ij = (α_i^t + α_j^f)/2 (Eq. 2), Ẽ = E ⊙ M (Eq. 3), so a
   weakened token or feature is halved and a value is zeroed only when both are weakened; the
   contrastive loss L_CL(h̃, h̃⁺) (Eq. 9) is differentiated w.r.t. the discrete masks (Eq. 7-8) and
   P ← Π_[0,1](P + β·g/‖g‖₂) (Eq. 5-6: normalised gradient ASCENT);
3. the final masks perturb both views and the encoder is trained on InfoNCE between them (Eq. 9,
   τ = 0.05, in-batch negatives, MLP over [CLS] in training).
Paper values (App. B): φ = 0.05, the embedding layer and the first two layers (k = 3 outputs),
β = 0.5, batch 512, lr 3e-5 (BERT) / 1e-5 (RoBERTa), STS-B dev every 150 steps, dropout kept.
Training data (App. B): 100,000 sentences drawn at random from English Wikipedia ("following
SimCSE"), 1 epoch at batch 512, i.e. about 195 steps. The paper profile here trains 1 epoch on the
trainer's data: wiki1m (1,000,000 sentences, 1,953 steps at batch 512, ten times the paper's data)
when it is under the data root, else the 11.9k-sentence sample (23 steps). ``--set max_steps=195``
with wiki1m trains on 99,840 sentences of a seeded random permutation, the paper's amount.

Open choices (also in ``open_choices``):
- t = 1 ascent iteration (Algorithm 1 has t; the paper gives no value; one step as in VAT/FreeLB's
  single-step setting and it costs one extra forward+backward).
- One P_tok and one P_fea per sentence, per view, per layer (Eq. 5 normalises "the" probability
  vector of a sentence: ‖g‖₂ is taken per sentence). Padding tokens are never weakened.
- The "k" of the paper's Figure 2b counts transformer layers; the App. B setting "the embedding
  layer and the first two layers" is ``layers = 3`` outputs here (E⁽⁰⁾, E⁽¹⁾, E⁽²⁾).
- The ascent pass runs with the training-time MLP and dropout (the same L_CL that is then minimised);
  it gives no gradient to any parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bench.errors import BenchError
from bench.methods.base import Method, MethodConfig, info_nce
from bench.methods.perturb import scale_layer_outputs, weakenable_layers


def keep_masks(p, phi: float):
    """Eq. 1: α = 1 where p ≥ φ (kept), 0 where p < φ (weakened)."""
    return (p >= phi).to(p.dtype)


def weakening_mask(alpha_tok, alpha_fea):
    """Eq. 2: M[b, i, j] = (α_i^t + α_j^f)/2 ∈ {0, ½, 1} for [B, m] token and [B, d] feature masks."""
    return (alpha_tok[:, :, None] + alpha_fea[:, None, :]) / 2


def probability_ascent(p, grad, beta: float):
    """Eq. 5-6: P ← Π_[0,1](P + β·g/‖g‖₂), the norm taken per sentence (row)."""
    norm = grad.flatten(1).norm(dim=1).clamp(min=1e-12).view(-1, *([1] * (grad.dim() - 1)))
    return (p + beta * grad / norm).clamp(0.0, 1.0)


@dataclass
class L2PCSRConfig(MethodConfig):
    temperature: float = 0.05  # Eq. 9: τ (App. B)
    mlp: bool = True  # App. B: MLP over [CLS], training only (SimCSE's)
    threshold: float = 0.05  # φ, Eq. 1 (App. B, Figure 2a)
    layers: int = 3  # outputs E⁽⁰⁾..E⁽ᵏ⁻¹⁾ weakened: the embedding layer and the first two layers (App. B)
    step_size: float = 0.5  # β, Eq. 5-6 (App. B: learning rate of the probability vectors)
    iterations: int = 1  # t, Algorithm 1 line 6: open choice

    def __post_init__(self):
        if not 0.0 <= self.threshold <= 1.0:
            raise BenchError(f"threshold φ must lie in [0, 1] (got {self.threshold})")
        if self.layers < 0 or self.iterations < 0 or self.step_size < 0:
            raise BenchError("layers, iterations and step_size must be >= 0")


class L2PCSR(Method):
    name = "l2pcsr"
    Config = L2PCSRConfig
    citation = ("Zhou, Zhang, Zhao, Wen. Learning to Perturb for Contrastive Learning of Unsupervised "
                "Sentence Representations. IEEE/ACM TASLP 2023 (L2P-CSR).")
    # App. B: 1 epoch, batch 512, lr 3e-5 (BERT), STS-B dev every 150 steps.
    training = {"paper": {"epochs": 1, "batch_size": 512, "lr": 3e-5, "eval_every": 150}}
    # a step / SimCSE's, benchmarks/train_step.py (MiniLM, batch 32, 1 thread, beside two jobs)
    step_cost = 1.8
    open_choices = {
        "iterations": "t = 1 ascent step per batch (paper gives no t)",
        "granularity": "one P_tok (tokens) and one P_fea (features) per sentence, per view, per layer; "
                       "||g||_2 per sentence; padding never weakened",
        "layers": "3 outputs: embedding layer + first two transformer layers (App. B)",
        "ascent_pass": "with the training MLP and dropout (the same L_CL), no parameter gradient",
        "data": "the paper trains on 100,000 random Wikipedia sentences (App. B: 1 epoch at 512 = ~195 steps); the "
                "paper profile uses the trainer's data (wiki1m: 10x that, or the 11.9k sample); --set max_steps=195 "
                "with wiki1m matches the paper's amount",
    }

    def init_probabilities(self, batch):
        """Eq. 4: U(0,1) token and feature probabilities, [2 views × B] rows for each weakened layer."""
        ids, mask = batch["input_ids"], batch["attention_mask"]
        rows, length = 2 * ids.shape[0], ids.shape[1]
        pad = ~mask.bool().repeat(2, 1)
        tok = [torch.rand(rows, length, device=ids.device).masked_fill(pad, 1.0) for _ in range(self.cfg.layers)]
        fea = [torch.rand(rows, self.hidden_size, device=ids.device) for _ in range(self.cfg.layers)]
        return tok, fea

    def perturbed_loss(self, batch, alpha_tok, alpha_fea):
        """L_CL(h̃, h̃⁺) with both views' layer outputs multiplied by their weakening masks (Eq. 2-3, 9)."""
        masks = [weakening_mask(t, f) for t, f in zip(alpha_tok, alpha_fea)]
        with scale_layer_outputs(weakenable_layers(self.model, self.cfg.layers), masks):
            z, z_pos = self.embed(batch, views=2)
        return info_nce(self.project(z), [self.project(z_pos)], self.cfg.temperature)

    def learn_perturbation(self, batch, tok, fea):
        """Algorithm 1 lines 6-13: t steps of normalised gradient ascent on the probabilities."""
        cfg = self.cfg
        valid = batch["attention_mask"].repeat(2, 1).to(torch.float32)
        for _ in range(cfg.iterations):
            alpha_tok = [keep_masks(p, cfg.threshold).requires_grad_(True) for p in tok]
            alpha_fea = [keep_masks(p, cfg.threshold).requires_grad_(True) for p in fea]
            loss = self.perturbed_loss(batch, alpha_tok, alpha_fea)
            grads = torch.autograd.grad(loss, alpha_tok + alpha_fea)  # Eq. 7-8
            g_tok, g_fea = grads[: len(tok)], grads[len(tok):]
            tok = [probability_ascent(p, g * valid, cfg.step_size) for p, g in zip(tok, g_tok)]  # Eq. 5
            fea = [probability_ascent(p, g, cfg.step_size) for p, g in zip(fea, g_fea)]  # Eq. 6
        return tok, fea

    def loss(self, batch, step):
        cfg = self.cfg
        if cfg.layers == 0:
            z, z_pos = self.embed(batch, views=2)
            loss = info_nce(self.project(z), [self.project(z_pos)], cfg.temperature)
            return loss, {"loss": float(loss.detach())}
        tok, fea = self.learn_perturbation(batch, *self.init_probabilities(batch))
        alpha_tok = [keep_masks(p, cfg.threshold) for p in tok]
        alpha_fea = [keep_masks(p, cfg.threshold) for p in fea]
        loss = self.perturbed_loss(batch, alpha_tok, alpha_fea)  # Algorithm 1 lines 15-18
        valid = batch["attention_mask"].repeat(2, 1).bool()
        weakened_tokens = sum(float((a[valid] == 0).float().mean()) for a in alpha_tok) / len(alpha_tok)
        weakened_features = sum(float((a == 0).float().mean()) for a in alpha_fea) / len(alpha_fea)
        return loss, {"loss": float(loss.detach()), "weakened_tokens": weakened_tokens,
                      "weakened_features": weakened_features}


METHOD = L2PCSR

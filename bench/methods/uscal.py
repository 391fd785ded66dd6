"""USCAL-style baseline: unsupervised contrastive adversarial learning (Miao et al. 2021, "Simple
Contrastive Representation Adversarial Learning for NLP Tasks", arXiv:2111.13301), kept simple.

Source followed: the paper's abstract and framing (read through public summaries; no code consulted):
unsupervised SimCSE pairs, plus an adversarial example made in the embedding space by one
fast-gradient step on the contrastive loss itself, which then serves as a further positive.
- two dropout views z, z⁺ (SimCSE), InfoNCE with in-batch negatives, τ = 0.05, MLP in training;
- δ = ε·g/‖g‖₂ with g = ∇_x L_con(x, x⁺) on the token-embedding output x of the anchor view (FGM,
  Miyato et al. 2017), per sentence;
- L = L_con(z, {z⁺}) + w·L_con(z_adv, {z⁺}), w = 1.

Open choices (also in ``open_choices``): ε = 1.0 per sentence in L2 (the common FGM value; about 1%
of a 32-token embedding output's norm); the adversarial term weighs 1; one FGM step, no projection
(‖δ‖₂ = ε exactly); z⁺ is a constant while δ is computed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bench.errors import BenchError
from bench.methods.base import Method, MethodConfig, info_nce
from bench.methods.perturb import ascent_step, capture_embedding_output, replace_embedding_output


@dataclass
class USCALConfig(MethodConfig):
    temperature: float = 0.05  # SimCSE's τ (USCAL builds on unsupervised SimCSE)
    mlp: bool = True  # SimCSE's training-time MLP
    epsilon: float = 1.0  # FGM step ‖δ‖₂ = ε per sentence: open choice
    adv_weight: float = 1.0  # w of the adversarial-positive term: open choice

    def __post_init__(self):
        if self.epsilon < 0 or self.adv_weight < 0:
            raise BenchError("epsilon and adv_weight must be >= 0")


class USCAL(Method):
    name = "uscal"
    Config = USCALConfig
    citation = ("Miao, Zhang, Xie, Song, Li, Jia, Guo. Simple Contrastive Representation Adversarial Learning "
                "for NLP Tasks. arXiv:2111.13301, 2021 (USCAL).")
    training = {"paper": {"epochs": 1, "eval_every": 125}}
    # a step / SimCSE's, benchmarks/train_step.py (MiniLM, batch 32, 1 thread, beside two jobs)
    # (one extra FGM pass)
    step_cost = 1.96
    open_choices = {
        "source": "paper abstract/framing only; FGM on the contrastive loss, adversarial view as extra positive term",
        "epsilon": "1.0, L2 per sentence on the token-embedding output (common FGM value)",
        "adv_weight": "1.0",
    }

    def loss(self, batch, step):
        cfg = self.cfg
        store = {}
        with capture_embedding_output(self.model, store):
            z, z_pos = self.embed(batch, views=2)
        p, p_pos = self.project(z), self.project(z_pos)
        clean = info_nce(p, [p_pos], cfg.temperature)
        if cfg.adv_weight == 0 or cfg.epsilon == 0:
            return clean, {"loss": float(clean.detach())}
        n = batch["input_ids"].shape[0]
        x = store["x"][:n]
        delta = self.fgm(batch, x.detach(), p_pos.detach())
        with replace_embedding_output(self.model, x + delta.to(x.dtype)):
            p_adv = self.project(self.embed(batch, views=1)[0])
        adversarial = info_nce(p_adv, [p_pos], cfg.temperature)
        loss = clean + cfg.adv_weight * adversarial
        return loss, {"loss": float(loss.detach()), "loss_clean": float(clean.detach()),
                      "loss_adv": float(adversarial.detach())}

    def fgm(self, batch, x, p_pos):
        """δ = ε·g/‖g‖₂, g = ∇_x L_con(x + 0, x⁺); zero on padding; no parameter gets a gradient."""
        mask = batch["attention_mask"].unsqueeze(-1).to(torch.float32)
        delta = torch.zeros(x.shape, device=x.device, requires_grad=True)
        with replace_embedding_output(self.model, x + delta.to(x.dtype)):
            p_adv = self.project(self.embed(batch, views=1)[0])
        (g,) = torch.autograd.grad(info_nce(p_adv, [p_pos], self.cfg.temperature), delta)
        return ascent_step(torch.zeros_like(g), g * mask, self.cfg.epsilon, "2").detach()


METHOD = USCAL

"""AdCSE (Li et al., DASFAA 2022; seed paper ``adcse.txt``; code lirenhao1997/AdCSE, read not vendored).

- Untied dual encoder (§3.2): h_i = g_q(f_q(x_i)) (Eq. 2) is trained by gradient descent (Eq. 6);
  h_i⁺ = g_p(f_p(x_i)) (Eq. 3) comes from encoder p (BERT + its own dense+tanh pooler), which follows
  q by momentum: θ_p ← m·θ_p + (1−m)·θ_q with m = 0.995 (Eq. 4). x_i⁺ = x_i (no augmentation).
- M = 64 negative adversaries n_j ∈ R^d (§3.3), updated by gradient ASCENT on the same loss (Eq. 7)
  with lr 3e-3 and momentum 0.9 (§4.1), weight decay 1e-4 on the adversaries only (the authors'
  ``run_adcse.sh``: ``--mem_wd 1e-4``, AdCo's memory weight decay; the paper names no weight decay).
- Encoder q: AdamW at lr 3e-5 WITHOUT weight decay (the authors' script leaves the HF Trainer's
  ``weight_decay`` at its default 0, as SimCSE does). The paper profile once also put 1e-4 on the
  encoder; that was a misreading of ``--mem_wd``, since corrected.
- Loss (Eq. 5): −log e^{s(h_i,h_i⁺)/τ} / (e^{s(h_i,h_i⁺)/τ} + Σ_j e^{s(h_i,n_j)/τ}), τ = 0.05, plus
  the other sentences' h_j⁺ as negatives (see below).
- The projection layer is removed at evaluation (§4.1): the exported encoder is q, pooled without g_q.

Open choices (also in ``open_choices``):
- In-batch negatives are kept next to the adversaries, although Eq. 5 prints only the adversaries:
  the ablation "w/o negative adversaries: ... ONLY different in-batch samples were used as
  negatives" (§4.3, Table 2) implies the full model has both, and the authors' code builds the
  logits as [q·kᵀ (N×N) | q·nᵀ (N×M)] with label i. Without them, adversaries that start far from
  the (anisotropic) sentence cone give a near-zero loss and no signal. ``in_batch_negatives=false``
  is Eq. 5 as printed.
- The adversaries are updated by this method itself, not by the trainer's AdamW: Eq. 7 is plain
  gradient ascent, and AdCo (which AdCSE follows) uses SGD with momentum for them. The gradient
  ∂L/∂θ_n is taken in ``loss`` (a second tiny backward through the similarity logits only) and
  applied in ``after_step``, so θ_q and θ_n both move from the same θ^(k−1) (Eq. 6-7).
- Adversaries start as standard Gaussian vectors, not normalised (the paper: "randomly
  initialized"; the authors' code: ``torch.randn(dim, M)``). They enter the loss through cosine
  similarity, so their norm only scales the step: ∂L/∂n ∝ 1/‖n‖.
- The momentum encoder p runs in training mode (dropout 0.1, §4.1) without gradient; the exported
  model is q (the encoder trained by gradient descent).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bench.errors import BenchError
from bench.methods.base import Method, MethodConfig, MLPPooler
from bench.methods.perturb import ema_update, frozen_copy


def adcse_loss(h, h_pos, adversaries, temperature: float, in_batch_negatives: bool = False):
    """Eq. 5: InfoNCE whose negatives are the M adversaries (plus the in-batch positives if asked)."""
    h, h_pos, n = (F.normalize(t.float(), dim=-1) for t in (h, h_pos, adversaries))
    pos = (h * h_pos).sum(-1, keepdim=True)
    neg = h @ n.T
    if in_batch_negatives:
        in_batch = h @ h_pos.T
        off_diagonal = ~torch.eye(h.shape[0], dtype=torch.bool, device=h.device)
        neg = torch.cat([neg, in_batch[off_diagonal].view(h.shape[0], -1)], dim=1)
    logits = torch.cat([pos, neg], dim=1) / temperature
    return F.cross_entropy(logits, torch.zeros(h.shape[0], dtype=torch.long, device=h.device))


@torch.no_grad()
def adversary_ascent(adversaries, grad, velocity, lr: float, momentum: float, weight_decay: float) -> None:
    """Eq. 7 with SGD momentum (AdCo): v ← μ·v + (∂L/∂n − wd·n); n ← n + lr·v (in place)."""
    velocity.mul_(momentum).add_(grad - weight_decay * adversaries)
    adversaries.add_(velocity, alpha=lr)


@dataclass
class AdCSEConfig(MethodConfig):
    temperature: float = 0.05  # Eq. 5: τ (§4.1, Fig. 4b)
    mlp: bool = True  # Eq. 2-3: g_q, g_p = linear + tanh, removed at evaluation (§4.1)
    momentum: float = 0.995  # m, Eq. 4 (§4.1)
    num_adversaries: int = 64  # M, Eq. 5 (§4.1: "the number of negatives ... 64")
    adversary_lr: float = 3e-3  # α_n, Eq. 7 (§4.1)
    adversary_momentum: float = 0.9  # §4.1: momentum of the negative adversaries
    adversary_weight_decay: float = 1e-4  # authors' run_adcse.sh --mem_wd 1e-4 (AdCo's memory decay); adversaries only
    in_batch_negatives: bool = True  # §4.3 ablation wording + authors' code (docstring); False = Eq. 5 as printed

    def __post_init__(self):
        if self.num_adversaries < 1 and not self.in_batch_negatives:
            raise BenchError("AdCSE needs negatives: num_adversaries >= 1 (Eq. 5) or in_batch_negatives=true")
        if not 0.0 <= self.momentum <= 1.0:
            raise BenchError(f"momentum m must lie in [0, 1] (got {self.momentum})")


class AdCSE(Method):
    name = "adcse"
    Config = AdCSEConfig
    citation = ("Li, Duan, Zeng, Yu. AdCSE: An Adversarial Method for Contrastive Learning of Sentence "
                "Embeddings. DASFAA 2022.")
    # §4.1: 1 epoch of wiki1m (following SimCSE), STS-B dev every 125 steps, lr 3e-5, batch 64.
    # No encoder weight decay: the authors' 1e-4 (--mem_wd) is the adversaries' (adversary_weight_decay).
    training = {"paper": {"epochs": 1, "eval_every": 125, "lr": 3e-5, "batch_size": 64}}
    # a step / SimCSE's, benchmarks/train_step.py (MiniLM, batch 32, 1 thread, beside two jobs): 0.66 and 0.84
    # (one view through q with gradients, p without)
    step_cost = 0.75
    open_choices = {
        "adversary_update": "SGD with momentum inside the method (Eq. 7 plain ascent, AdCo's optimiser), "
                            "gradient taken from the same loss as q's step",
        "adversary_init": "standard Gaussian, unnormalised (paper: randomly initialized; authors' code)",
        "in_batch_negatives": "kept with the adversaries (ablation wording, authors' code); Eq. 5 prints none",
        "encoder_p": "training mode (dropout 0.1), no gradient; exported model is q",
        "weight_decay": "1e-4 on the adversaries only (authors' --mem_wd); encoder q has none (HF Trainer default 0, "
                        "the authors' script sets no --weight_decay); earlier, the paper profile put 1e-4 on q by misreading --mem_wd",
    }

    def build(self):
        modules = {"momentum_encoder": frozen_copy(self.model)}
        if self.cfg.mlp:
            modules["mlp"] = MLPPooler(self.hidden_size)
            modules["momentum_mlp"] = frozen_copy(modules["mlp"])
        adversaries = torch.randn(max(self.cfg.num_adversaries, 0), self.hidden_size)  # authors' init
        holder = nn.Module()
        holder.vectors = nn.Parameter(adversaries, requires_grad=False)  # θ_n: moved by its own ascent (Eq. 7)
        holder.register_buffer("velocity", torch.zeros_like(adversaries))
        modules["adversaries"] = holder
        self._adv_grad = None
        return modules

    @property
    def adversaries(self) -> torch.Tensor:
        return self.modules["adversaries"].vectors

    def param_groups(self, lr, weight_decay):
        params = [p for p in self.model.parameters() if p.requires_grad]
        if "mlp" in self.modules:
            params += list(self.modules["mlp"].parameters())
        return [{"params": params, "lr": lr, "weight_decay": weight_decay}]

    def positives(self, batch):
        """h⁺ = g_p(f_p(x)) from the momentum encoder (Eq. 3), no gradient."""
        encoder_p = self.modules["momentum_encoder"]
        encoder_p.train(self.model.training)
        with torch.no_grad():
            z = self.embed(batch, views=1, model=encoder_p)[0]
            return self.modules["momentum_mlp"](z) if "momentum_mlp" in self.modules else z

    def loss(self, batch, step):
        cfg = self.cfg
        h = self.project(self.embed(batch, views=1)[0])  # Eq. 2
        h_pos = self.positives(batch)
        adversaries = self.adversaries
        loss = adcse_loss(h, h_pos, adversaries.detach(), cfg.temperature, cfg.in_batch_negatives)
        if adversaries.numel():
            # ∂L/∂θ_n at the same (θ_q, θ_n) as q's gradient (Eq. 6-7); only the logits are re-derived.
            adv = adversaries.detach().requires_grad_(True)
            (self._adv_grad,) = torch.autograd.grad(
                adcse_loss(h.detach(), h_pos, adv, cfg.temperature, cfg.in_batch_negatives), adv)
        return loss, {"loss": float(loss.detach())}

    def after_step(self, step):
        cfg = self.cfg
        if self._adv_grad is not None:
            holder = self.modules["adversaries"]
            adversary_ascent(holder.vectors.data, self._adv_grad, holder.velocity, cfg.adversary_lr,
                             cfg.adversary_momentum, cfg.adversary_weight_decay)
            self._adv_grad = None
        ema_update(self.modules["momentum_encoder"], self.model, cfg.momentum)  # Eq. 4
        if "mlp" in self.modules:
            ema_update(self.modules["momentum_mlp"], self.modules["mlp"], cfg.momentum)


METHOD = AdCSE

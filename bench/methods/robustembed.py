"""RobustEmbed (Rafiei Asl et al., EMNLP Findings 2023), Algorithm 1 and Eq. 3-8.

Per batch:
1. two dropout views in one forward pass (SimCSE): sentence vectors z, z+; the token-embedding
   output of the first view is kept as X = f.embedding(B, m1) (a forward hook on ``model.embeddings``);
2. δ¹ ~ N(0, σ²I) (zero on padding), projected into the ε-ball; K-step PGD (Eq. 3, step α along
   g/‖g‖_P) and T-step FGSM (Eq. 4, step β·sign(g)) each ascend g = ∇_δ L_con(X+δ, {X+}) and are
   projected back (Π) after every step; the encoder runs on X+δ by replacing the embeddings
   module's output, so every BERT-style encoder works unchanged;
3. δ_final = λ·δ_pgd + (1-λ)·δ_fgsm (Eq. 5; a convex mix of two points of the ball stays in it);
4. z_adv = f(X + δ_final) and L = L_con(z, {z+, z_adv}) + γ·L_con(z_adv, {z+}) (Eq. 7, 8), with the
   training-time MLP over the pooled [CLS] (App. A: "a pooler layer on top of [CLS]").

Open choices (the paper is silent; also in ``open_choices``, copied into every model card):
- ε = 1e-2 (L∞). The paper gives none. The authors' pre-training code (jasl1/RobustEmbed,
  ``robust_model2.py``) projects onto ε = 1e-6 around the clean embedding (``epsilon=1e-6``); its
  1e-5 is the random start's noise std (``noise_var=1e-5``, used as a std, not a variance) and, as
  ``_epsilon2_``, the stabiliser of the gradient normalisation; their fine-tuning script
  (``adversarial_fine_tunning.py``) has ``_epsilon_=1e-5``. ε = 1e-6 would clip the first FGSM step
  (β = 1e-3) a thousandfold and make Figure 4's β axis (1e-4..1e-2) meaningless. ε must be
  at least T·β = 5e-3 for the five FGSM steps to count; 1e-2 leaves room for β up to 2e-3 and is
  about 1% of the LayerNorm-ed embedding scale (still "imperceptible").
- σ = 1e-3 (δ¹'s std; the authors' code draws 1e-5): an order below ε, so the attack steps, not
  the noise, set δ; it also equals one FGSM step. With α = 1e-5 PGD moves at most K·α = 5e-5 (L∞),
  so δ_pgd stays close to δ¹: σ matters for λ's ablation (Table 6) and is a config field.
- Separate gradients: PGD and FGSM each evaluate g at their own iterate (as PGD and FGSM are
  defined), costing K+T gradient passes per step. ``shared_gradient=True`` reads Algorithm 1's
  single g(δ^t) literally: one gradient per iteration, at the λ-mix of the two iterates
  (max(K, T) passes).
- The ball is per sentence (δ of one sentence flattened over tokens x hidden). For L∞ this is
  the same as per coordinate; for L2/L1 the same ε gives a much smaller ball (set ε per norm
  when reproducing Table 5).
- X (embedding output with dropout mask m1) is fixed during the attack (Algorithm 1 computes it
  once); the transformer layers draw fresh dropout masks on each pass. z+ is computed once and
  is a constant for the attack; the final loss back-propagates through X as well.
- Eq. 7's negatives for sentence i are every other sentence's z+ AND z_adv (Eq. 2: "the other
  positive pairs" of the batch).
- K = T = 0 means no adversary: x_adv is not formed and the loss is exactly SimCSE's (no noise
  draw either, so the random stream matches SimCSE's).
- lr 3e-5 (BERT-base) / 1e-5 (RoBERTa-base), SimCSE's; the paper names batch 64 or 128, 2 epochs,
  evaluation every 250 steps, but no learning rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bench.errors import BenchError
from bench.methods.base import Method, MethodConfig, embedding_module, info_nce

NORMS = ("inf", "2", "1")


@dataclass
class RobustEmbedConfig(MethodConfig):
    temperature: float = 0.05  # Eq. 2: τ (the 0.05, SimCSE's value)
    mlp: bool = True  # App. A: pooler layer on top of [CLS], training only
    pgd_steps: int = 5  # K, Algorithm 1 / App. B.2, Figure 5 (N = K = T = 5)
    fgsm_steps: int = 5  # T, Algorithm 1 / App. B.2, Figure 5
    pgd_step_size: float = 1e-5  # α, Eq. 3 / App. B.1, Figure 4
    fgsm_step_size: float = 1e-3  # β, Eq. 4 / App. B.1, Figure 4
    norm: str = "inf"  # P, Eq. 3-4 / App. B.3, Table 5 (inf | 2 | 1)
    epsilon: float = 1e-2  # ε, Eq. 3-4: open choice (module docstring)
    init_std: float = 1e-3  # σ, Algorithm 1 δ¹ ~ N(0, σ²I): open choice
    mix: float = 0.5  # λ, Eq. 5 / App. B.4, Table 6
    reg_weight: float = 1 / 128  # γ, Eq. 8 / App. D, Table 8
    shared_gradient: bool = False  # open choice: one g per iteration for both attacks

    def __post_init__(self):
        if self.norm not in NORMS:
            raise BenchError(f"norm must be one of {', '.join(NORMS)} (got {self.norm!r})")
        if not 0.0 <= self.mix <= 1.0:
            raise BenchError(f"mix (λ) must lie in [0, 1] (got {self.mix})")
        if self.pgd_steps < 0 or self.fgsm_steps < 0 or self.epsilon < 0 or self.init_std < 0:
            raise BenchError("pgd_steps, fgsm_steps, epsilon and init_std must be >= 0")


def _flat(v):
    return v.reshape(v.shape[0], -1)


def norm_of(v, p: str):
    """Per-sentence ‖v‖_p, shaped to broadcast against v."""
    flat = _flat(v)
    value = {"inf": lambda: flat.abs().amax(1), "2": lambda: flat.norm(dim=1), "1": lambda: flat.abs().sum(1)}[p]()
    return value.reshape(-1, *([1] * (v.dim() - 1)))


def _project_l1(v, eps: float):
    # Euclidean projection onto the L1 ball (Duchi et al., ICML 2008), one row per sentence.
    flat = _flat(v)
    inside = flat.abs().sum(1, keepdim=True) <= eps
    u = flat.abs().sort(dim=1, descending=True).values
    cssv = u.cumsum(1) - eps
    ranks = torch.arange(1, u.shape[1] + 1, device=v.device, dtype=u.dtype)
    rho = ((u - cssv / ranks) > 0).sum(1, keepdim=True).clamp(min=1)
    theta = cssv.gather(1, rho - 1) / rho.to(u.dtype)
    projected = flat.sign() * (flat.abs() - theta).clamp(min=0)
    return torch.where(inside, flat, projected).reshape(v.shape)


def project(v, p: str, eps: float):
    """Π onto {‖δ‖_p ≤ ε}, per sentence."""
    if p == "inf":
        return v.clamp(-eps, eps)
    if p == "2":
        return v * (eps / norm_of(v, "2").clamp(min=1e-12)).clamp(max=1.0)
    return _project_l1(v, eps)


class RobustEmbed(Method):
    name = "robustembed"
    Config = RobustEmbedConfig
    citation = ("Rafiei Asl, Panzade, Blanco, Takabi, Cai. RobustEmbed: Robust Sentence Embeddings Using "
                "Self-Supervised Contrastive Pre-Training. Findings of EMNLP 2023.")
    # App. A: 2 epochs, evaluation every 250 steps, batch 64 (or 128).
    training = {"paper": {"epochs": 2, "eval_every": 250}}
    # a step / SimCSE's: 10.9 s / 2.47 s, MiniLM, batch 64, fp32, 2 threads, quiet Intel Xeon (train_step.py)
    step_cost = 4.4
    open_choices = {
        "epsilon": "1e-2 (L-inf): paper gives none; the authors' pre-training code projects onto 1e-6 (its 1e-5 is "
                   "the noise std), which would clip FGSM's beta=1e-3 step and flatten Figure 4; needs >= T*beta = "
                   "5e-3; ~1% of the embedding scale",
        "init_std": "sigma = 1e-3: an order below epsilon so the attack steps dominate; equals one FGSM step",
        "shared_gradient": "False: PGD and FGSM each take g at their own iterate (K+T passes); True = one g per "
                           "iteration at the lambda-mix (max(K,T) passes)",
        "ball": "per sentence (tokens x hidden flattened); padding positions stay 0",
        "X": "embedding-module output (word+position+type, LayerNorm, dropout m1), fixed during the attack; "
             "z+ computed once and constant for the attack",
        "negatives": "Eq. 7: other sentences' z+ and z_adv are negatives",
        "K=T=0": "no adversary: loss is SimCSE's exactly",
        "lr": "3e-5 BERT-base / 1e-5 RoBERTa-base (SimCSE's); paper gives none",
    }

    @property
    def attacking(self) -> bool:
        return self.cfg.pgd_steps > 0 or self.cfg.fgsm_steps > 0

    def loss(self, batch, step):
        cfg = self.cfg
        if not self.attacking:
            z, z_pos = self.embed(batch, views=2)
            loss = info_nce(self.project(z), [self.project(z_pos)], cfg.temperature)
            return loss, {"loss": float(loss.detach())}
        captured = {}
        hook = embedding_module(self.model).register_forward_hook(lambda m, i, out: captured.setdefault("x", out))
        try:
            z, z_pos = self.embed(batch, views=2)
        finally:
            hook.remove()
        n = batch["input_ids"].shape[0]
        x = captured["x"][:n]  # X = f.embedding(B, m1), with its graph
        p, p_pos = self.project(z), self.project(z_pos)
        delta = self.perturbation(batch, x.detach(), p_pos.detach())
        p_adv = self.project(self.embed_perturbed(batch, x + delta.to(x.dtype)))
        main = info_nce(p, [p_pos, p_adv], cfg.temperature)  # Eq. 7
        reg = info_nce(p_adv, [p_pos], cfg.temperature)  # Eq. 8, second term
        loss = main + cfg.reg_weight * reg
        return loss, {"loss": float(loss.detach()), "loss_robustembed": float(main.detach()),
                      "loss_adv_pos": float(reg.detach()), "delta_norm": float(norm_of(delta, cfg.norm).mean())}

    def embed_perturbed(self, batch, x_perturbed):
        """Pooled vectors of the encoder run on ``x_perturbed`` in place of its embedding output."""
        hook = embedding_module(self.model).register_forward_hook(lambda m, i, out: x_perturbed)
        try:
            return self.embed(batch, views=1)[0]
        finally:
            hook.remove()

    def adversarial_grad(self, batch, x, p_pos, delta):
        """g(δ) = ∇_δ L_con(X + δ, {X+}) (Eq. 3-4); parameters get no gradient from this pass."""
        delta = delta.detach().requires_grad_(True)
        p_adv = self.project(self.embed_perturbed(batch, x + delta.to(x.dtype)))
        loss = info_nce(p_adv, [p_pos], self.cfg.temperature)
        (grad,) = torch.autograd.grad(loss, delta)
        return grad

    def perturbation(self, batch, x, p_pos):
        """δ_final of Eq. 5 (float32, zero on padding, inside the ε-ball)."""
        cfg = self.cfg
        mask = batch["attention_mask"].unsqueeze(-1).to(torch.float32)
        start = project(torch.randn(x.shape, device=x.device) * cfg.init_std * mask, cfg.norm, cfg.epsilon)
        pgd, fgsm = start, start.clone()
        for t in range(max(cfg.pgd_steps, cfg.fgsm_steps)):
            do_pgd, do_fgsm = t < cfg.pgd_steps, t < cfg.fgsm_steps
            if cfg.shared_gradient:
                g_pgd = g_fgsm = self.adversarial_grad(batch, x, p_pos, cfg.mix * pgd + (1 - cfg.mix) * fgsm) * mask
            else:
                g_pgd = self.adversarial_grad(batch, x, p_pos, pgd) * mask if do_pgd else None
                g_fgsm = self.adversarial_grad(batch, x, p_pos, fgsm) * mask if do_fgsm else None
            if do_pgd:  # Eq. 3
                step = cfg.pgd_step_size * g_pgd / norm_of(g_pgd, cfg.norm).clamp(min=1e-12)
                pgd = project(pgd + step, cfg.norm, cfg.epsilon)
            if do_fgsm:  # Eq. 4
                fgsm = project(fgsm + cfg.fgsm_step_size * g_fgsm.sign(), cfg.norm, cfg.epsilon)
        return (cfg.mix * pgd + (1 - cfg.mix) * fgsm).detach()  # Eq. 5


METHOD = RobustEmbed

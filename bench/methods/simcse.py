"""Unsupervised SimCSE (Gao, Yao, Chen, EMNLP 2021): dropout positives, in-batch negatives.

Each sentence is encoded twice with different dropout masks (one forward pass over the batch
repeated twice); the two views are positives, the other sentences of the batch negatives
(InfoNCE, Eq. 1, τ = 0.05). An MLP (dense + tanh) sits over the [CLS] vector during training only;
evaluation uses ``cls_before_pooler``. Paper training: batch 64, lr 3e-5 (BERT-base) / 1e-5
(RoBERTa-base), max_len 32, 1 epoch of wiki1m, STS-B dev every 125 steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.methods.base import Method, MethodConfig, info_nce


@dataclass
class SimCSEConfig(MethodConfig):
    temperature: float = 0.05  # SimCSE Eq. 1 / Table D.1: τ = 0.05
    mlp: bool = True  # SimCSE §3 / Table 6: MLP in training only (mlp_only_train)


class SimCSE(Method):
    name = "simcse"
    Config = SimCSEConfig
    citation = "Gao, Yao, Chen. SimCSE: Simple Contrastive Learning of Sentence Embeddings. EMNLP 2021."
    # SimCSE §3 and Appendix A: 1 epoch, evaluation every 125 steps on STS-B dev.
    training = {"paper": {"epochs": 1, "eval_every": 125}}

    def loss(self, batch, step):
        z1, z2 = self.embed(batch, views=2)
        loss = info_nce(self.project(z1), [self.project(z2)], self.cfg.temperature)
        return loss, {"loss": float(loss.detach())}


METHOD = SimCSE

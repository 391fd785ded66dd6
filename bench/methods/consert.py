"""ConSERT baseline (Yan et al., ACL 2021), unsupervised, kept simple: two augmented views of each
sentence in the embedding layer, NT-Xent with in-batch negatives (τ = 0.1), no projection head.

Augmentations (§3.2), each one entry of ``AUGMENTATIONS``:
- ``shuffle``: token shuffle, a random permutation of the position ids of the real tokens;
- ``token_cutoff``: zero the whole embedding of a random ``cutoff_rate`` of the tokens;
- ``feature_cutoff``: zero a random ``cutoff_rate`` of the embedding dimensions (all tokens);
- ``none``: the sentence as is.
The authors' unsupervised recipe (README of yym6472/ConSERT): view 1 feature cutoff 0.2, view 2
token shuffle, τ = 0.1, dropout off, lr 5e-7, batch 96, max length 64, average pooling.

Open choices (also in ``open_choices``): the shuffle permutes the real tokens only ([CLS], [SEP]
and padding keep their positions); cutoff acts on the embedding-module output (word + position +
type, after LayerNorm), where ConSERT applies it; training data are the trainer's unlabeled
Wikipedia sentences (ConSERT trained on the unlabeled STS sentences); the paper profile keeps the
trainer's max length 32.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from bench.errors import BenchError
from bench.methods.base import Method, MethodConfig, embedding_module, info_nce
from bench.methods.perturb import replace_embedding_output


def _inner_tokens(attention_mask):
    """Real tokens that are neither the first ([CLS]) nor the last real one ([SEP])."""
    mask = attention_mask.bool().clone()
    lengths = mask.sum(1)
    mask[:, 0] = False
    mask[torch.arange(mask.shape[0]), (lengths - 1).clamp(min=0)] = False
    return mask


def shuffle_positions(attention_mask, generator=None):
    """Position ids in which the inner real tokens' positions are randomly permuted (per sentence)."""
    batch, length = attention_mask.shape
    index = torch.arange(length, device=attention_mask.device).repeat(batch, 1)
    inner = _inner_tokens(attention_mask)
    keys = torch.rand(batch, length, generator=generator, device=attention_mask.device)
    order = torch.where(inner, keys, index.float() + 2.0).argsort(dim=1)  # inner tokens first, shuffled
    slot = (inner.long().cumsum(1) - 1).clamp(min=0)  # the k-th inner slot takes the k-th shuffled one
    return torch.where(inner, order.gather(1, slot), index)


def token_cutoff(x, attention_mask, rate: float, generator=None):
    """Zero the embeddings of ``rate`` of the real tokens of each sentence (at least one)."""
    inner = _inner_tokens(attention_mask)
    scores = torch.rand(inner.shape, generator=generator, device=x.device).masked_fill(~inner, 2.0)
    n_cut = (inner.sum(1).float() * rate).ceil().long().clamp(min=1)
    ranks = scores.argsort(1).argsort(1)
    cut = (ranks < n_cut[:, None]) & inner
    return x * (~cut).unsqueeze(-1).to(x.dtype)


def feature_cutoff(x, attention_mask, rate: float, generator=None):
    """Zero ``rate`` of the embedding dimensions of each sentence (every token)."""
    batch, _, dim = x.shape
    n_cut = max(1, int(round(dim * rate)))
    ranks = torch.rand(batch, dim, generator=generator, device=x.device).argsort(1).argsort(1)
    keep = (ranks >= n_cut).to(x.dtype)
    return x * keep[:, None, :]


AUGMENTATIONS = {"none", "shuffle", "token_cutoff", "feature_cutoff"}
_CUTOFFS = {"token_cutoff": token_cutoff, "feature_cutoff": feature_cutoff}


@dataclass
class ConSERTConfig(MethodConfig):
    temperature: float = 0.1  # τ, Eq. 1 / authors' recipe
    mlp: bool = False  # ConSERT has no projection head
    view1: str = "feature_cutoff"  # authors' unsupervised recipe (da_final_1)
    view2: str = "shuffle"  # authors' unsupervised recipe (da_final_2)
    cutoff_rate: float = 0.2  # authors' recipe (cutoff_rate_final_1)
    dropout: bool = False  # authors' recipe: --no_dropout

    def __post_init__(self):
        for view in (self.view1, self.view2):
            if view not in AUGMENTATIONS:
                raise BenchError(f"ConSERT view {view!r} is unknown. Choose one of: {', '.join(sorted(AUGMENTATIONS))}")
        if not 0.0 <= self.cutoff_rate < 1.0:
            raise BenchError(f"cutoff_rate must lie in [0, 1) (got {self.cutoff_rate})")


class ConSERT(Method):
    name = "consert"
    Config = ConSERTConfig
    citation = ("Yan, Li, Wang, Zhang, Wu, Xu. ConSERT: A Contrastive Framework for Self-Supervised Sentence "
                "Representation Transfer. ACL 2021.")
    training = {"paper": {"lr": 5e-7, "batch_size": 96, "eval_every": 200}}
    # a step / SimCSE's, benchmarks/train_step.py (MiniLM, batch 32, 1 thread, beside two jobs): 1.01
    step_cost = 1.0
    open_choices = {
        "shuffle": "permutes the inner real tokens' position ids ([CLS]/[SEP]/padding stay)",
        "cutoff": "on the embedding-module output",
        "data": "trainer's unlabeled wiki sentences (ConSERT: unlabeled STS sentences); max_len 32",
    }

    def build(self):
        if not self.cfg.dropout:
            for m in self.model.modules():
                if isinstance(m, nn.Dropout):
                    m.p = 0.0
        return super().build()

    def view(self, batch, augmentation: str):
        if augmentation == "shuffle":
            positions = shuffle_positions(batch["attention_mask"])
            return self.embed(dict(batch, position_ids=positions), views=1)[0]
        if augmentation == "none":
            return self.embed(batch, views=1)[0]
        x = embedding_module(self.model)(input_ids=batch["input_ids"], token_type_ids=batch.get("token_type_ids"))
        x = _CUTOFFS[augmentation](x, batch["attention_mask"], self.cfg.cutoff_rate)
        with replace_embedding_output(self.model, x):
            return self.embed(batch, views=1)[0]

    def loss(self, batch, step):
        z1 = self.project(self.view(batch, self.cfg.view1))
        z2 = self.project(self.view(batch, self.cfg.view2))
        loss = info_nce(z1, [z2], self.cfg.temperature)
        return loss, {"loss": float(loss.detach())}


METHOD = ConSERT

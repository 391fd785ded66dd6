"""A positive control, not a published method: SimCSE whose positive is the sentence with some of its
words swapped for counter-fitted neighbours, the very neighbourhoods TextFooler searches.

RobustEmbed, V-advCSE and AdCSE perturb the embedding space and hope the invariance reaches the words an
attacker swaps. This method teaches that invariance by the most direct route: for each sentence x of a
batch, x' replaces each word with probability ``swap_prob`` by one of its ``neighbours`` nearest
counter-fitted neighbours at cosine ≥ ``min_cos``, drawn uniformly: TextFooler's 50 candidates under the
attacks' unified constraints (cosine ≥ 0.9), its stop words never swapped nor swapped in. Then SimCSE's InfoNCE (Eq. 1, τ =
0.05, MLP in training only) with x' as x's positive: one forward pass over the 2B sentences, dropout on
both, the batch's other x' as negatives. If the harness can see robustness, an encoder trained this way
must be harder to attack with TextFooler than SimCSE trained the same way from the same base.

The word space is the one ``bench resources build --only counterfit`` makes (``ctx.resources``), or
``space_dir`` when set. The methods layer imports no attack code, so the space's three files are read here.

The dose: SimCSE's InfoNCE saturates within a few dozen steps at this scale (the swapped view is already the
nearest sentence of the batch), so with ``align_weight`` = 0 the encoder barely moves (seed 3: TextFooler's
success and the attack-free displacement as SimCSE's). ``align_weight`` > 0 adds Wang & Isola's alignment
(α = 2) between x and x' on the pooled vectors the victims read, which keeps pulling x' onto x.

Open choices (also in ``open_choices``): words are maximal runs of letters, digits and apostrophes,
looked up lower-cased; a swap keeps the word's capitalisation of its first letter; ``swap_prob`` 0.3 (so a
sentence of ten content words carries about three swaps, TextFooler's typical edit on MR); the draw is a
function of the seed and the batch's sentences, so a resumed run draws the same views.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

import torch

from bench.errors import BenchError
from bench.methods.base import Method, MethodConfig, info_nce

WORD = re.compile(r"[A-Za-z0-9']+")


@dataclass
class OracleConfig(MethodConfig):
    swap_prob: float = 0.3  # open choice: share of eligible words swapped in the positive view
    neighbours: int = 50  # TextFooler's K (Jin et al. 2020, §3.1: N = 50 synonyms)
    min_cos: float = 0.9  # the unified attack constraints' word-embedding cosine (attacks/recipes.py)
    space_dir: str = ""  # the counter-fitted space; empty: where `bench resources build` put it
    align_weight: float = 0.0  # open choice (the dose): weight of an explicit alignment term (see loss)


@lru_cache(maxsize=4)
def neighbourhoods(space_dir: str, neighbours: int, min_cos: float) -> dict[str, tuple[str, ...]]:
    """word -> its neighbours at cosine ≥ min_cos among its first ``neighbours`` (only words that have any);
    TextFooler's stop words take part in no swap."""
    from bench.data.stopwords import TEXTFOOLER_STOPWORDS

    directory = Path(space_dir)
    if not (directory / "nn.npy").is_file():
        raise BenchError(f"No counter-fitted word space in {directory}: run `bench resources build --only "
                         f"counterfit`, or pass --set space_dir=DIR.")
    words = (directory / "words.txt").read_text(encoding="utf-8").split("\n")[:-1]
    vectors = np.load(directory / "vectors.npy", allow_pickle=False)
    nn = np.load(directory / "nn.npy", allow_pickle=False)[:, 1:neighbours + 1]
    cos = np.einsum("nd,nkd->nk", vectors, vectors[nn])
    table = {}
    for i, word in enumerate(words):
        if word in TEXTFOOLER_STOPWORDS:
            continue
        close = tuple(words[j] for j, c in zip(nn[i], cos[i]) if c >= min_cos and words[j] not in TEXTFOOLER_STOPWORDS)
        if close:
            table[word] = close
    return table


def swap_view(sentence: str, table: dict[str, tuple[str, ...]], prob: float, rng: random.Random) -> str:
    """``sentence`` with each word that has neighbours replaced, with probability ``prob``, by one of them."""
    def swap(match):
        word = match.group(0)
        close = table.get(word.lower())
        if not close or rng.random() >= prob:
            return word
        new = rng.choice(close)
        return new[:1].upper() + new[1:] if word[:1].isupper() else new
    return WORD.sub(swap, sentence)


class OracleCSE(Method):
    name = "oraclecse"
    Config = OracleConfig
    citation = ("Positive control of this harness (not a published method): SimCSE (Gao, Yao, Chen, EMNLP 2021) "
                "with counter-fitted word swaps (Mrkšić et al. 2016) as positives, TextFooler's neighbourhoods "
                "(Jin et al. 2020).")
    training = {"paper": {"epochs": 1, "eval_every": 125}}
    open_choices = {
        "swap_prob": "0.3 of the words that have neighbours are swapped (about TextFooler's edit on MR)",
        "neighbourhood": "what TextFooler searches here: 50 nearest counter-fitted neighbours at cosine ≥ 0.9 (the "
                         "unified constraints), stop words excluded",
        "views": "anchor x (dropout) and positive x' (swaps + dropout), SimCSE's InfoNCE, x' of others as negatives",
        "draws": "seeded by the run's seed and the batch's sentences, so a resumed run draws the same views",
        "align_weight": "0 (InfoNCE alone, SimCSE's form); the dose adds alignment on the pooled vectors",
    }

    def table(self) -> dict[str, tuple[str, ...]]:
        space = self.cfg.space_dir or str(self._built_space())
        return neighbourhoods(space, self.cfg.neighbours, self.cfg.min_cos)

    def _built_space(self) -> Path:
        from bench.data.resources_layout import Layout

        if self.ctx.resources_dir is None:
            raise BenchError("oraclecse needs the counter-fitted word space: pass --set space_dir=DIR.")
        return Layout(self.ctx.resources_dir).counterfit

    def collate(self, examples: list) -> dict:
        """The batch's sentences, then their swapped views: one padded [2B, L] batch."""
        rng = random.Random(hashlib.sha256(f"{self.ctx.seed}\n{chr(10).join(examples)}".encode()).digest())
        table = self.table()
        views = [swap_view(s, table, self.cfg.swap_prob, rng) for s in examples]
        return self.ctx.tokenizer(list(examples) + views, padding=True, truncation=True,
                                  max_length=self.ctx.max_len, return_tensors="pt")

    def loss(self, batch, step):
        pooled = self.embed(batch)[0]
        z = self.project(pooled)
        anchor, positive = z.split(z.shape[0] // 2)
        contrast = info_nce(anchor, [positive], self.cfg.temperature)
        if not self.cfg.align_weight:
            return contrast, {"loss": float(contrast.detach())}
        # InfoNCE saturates within a few dozen steps here (loss ~1e-3: the swapped view is already the nearest),
        # so it barely moves the encoder; alignment (Wang & Isola 2020, α = 2) pulls x' onto x on the pooled
        # vectors the victims read, whatever the other sentences of the batch.
        x, x_swapped = torch.nn.functional.normalize(pooled.float(), dim=-1).split(pooled.shape[0] // 2)
        align = (x - x_swapped).pow(2).sum(-1).mean()
        loss = contrast + self.cfg.align_weight * align
        return loss, {"loss": float(loss.detach()), "contrast": float(contrast.detach()), "align": float(align.detach())}


METHOD = OracleCSE

"""Poolers: how token states become one sentence vector (SimCSE's definitions).

Each takes the model output (with hidden states) and the attention mask.
"""

from __future__ import annotations


def _masked_mean(states, mask):
    mask = mask.unsqueeze(-1).to(states.dtype)
    return (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


def cls(outputs, mask):
    # [CLS] through the pretrained dense+tanh pooler (supervised SimCSE's "cls").
    if getattr(outputs, "pooler_output", None) is None:
        raise ValueError("pooler 'cls' needs a model with a pooler layer; use 'cls_before_pooler'")
    return outputs.pooler_output


def cls_before_pooler(outputs, mask):
    return outputs.last_hidden_state[:, 0]


def avg(outputs, mask):
    return _masked_mean(outputs.last_hidden_state, mask)


def avg_first_last(outputs, mask):
    # SimCSE's current code uses hidden_states[1] (first transformer layer), not the embeddings;
    # that is why it reports 60.73 where the paper's older definition gave 56.70.
    hs = outputs.hidden_states
    return _masked_mean((hs[1] + hs[-1]) / 2.0, mask)


def avg_top2(outputs, mask):
    hs = outputs.hidden_states
    return _masked_mean((hs[-1] + hs[-2]) / 2.0, mask)


POOLERS = {f.__name__: f for f in (cls, cls_before_pooler, avg, avg_first_last, avg_top2)}
NEEDS_HIDDEN_STATES = {"avg_first_last", "avg_top2"}

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from bench.models.encoder import Encoder
from bench.models.poolers import POOLERS

SENTENCES = ["a man is playing guitar", "a dog", "the movie was great and the plot was fun", "a dog"]


@pytest.fixture(scope="module")
def hf(tiny_bert_dir):
    return AutoModel.from_pretrained(tiny_bert_dir), AutoTokenizer.from_pretrained(tiny_bert_dir)


def reference_embedding(model, tokenizer, sentence, pooler):
    """One sentence at a time, no padding: what each pooler should compute."""
    enc = tokenizer([sentence], return_tensors="pt")
    with torch.no_grad():
        out = model(**enc, output_hidden_states=True)
    hs = out.hidden_states
    expected = {
        "cls": out.pooler_output[0],
        "cls_before_pooler": out.last_hidden_state[0, 0],
        "avg": out.last_hidden_state[0].mean(0),
        "avg_first_last": ((hs[1] + hs[-1]) / 2)[0].mean(0),
        "avg_top2": ((hs[-1] + hs[-2]) / 2)[0].mean(0),
    }
    return expected[pooler].numpy()


@pytest.mark.parametrize("pooler", sorted(POOLERS))
def test_each_pooler_matches_unbatched_reference(hf, pooler):
    model, tokenizer = hf
    enc = Encoder(model, tokenizer, pooler=pooler, device="cpu", batch_size=2)
    got = enc.encode(SENTENCES)
    assert got.shape == (4, model.config.hidden_size)
    for sentence, vec in zip(SENTENCES, got):
        np.testing.assert_allclose(vec, reference_embedding(model, tokenizer, sentence, pooler), atol=1e-5)


def test_each_unique_sentence_is_encoded_once(hf):
    model, tokenizer = hf
    enc = Encoder(model, tokenizer, pooler="avg", device="cpu")
    enc.encode(SENTENCES)
    assert enc.stats["encoded"] == 3
    enc.encode(SENTENCES[:2])
    assert enc.stats["encoded"] == 3


def test_weights_hash_changes_with_weights(hf):
    model, tokenizer = hf
    enc = Encoder(model, tokenizer, pooler="avg", device="cpu")
    before = enc.weights_sha256
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    enc.forget()
    assert enc.weights_sha256 != before
    with torch.no_grad():
        next(model.parameters()).sub_(1.0)

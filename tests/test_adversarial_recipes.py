"""Our five recipes against TextAttack 0.3.11's own recipe builders: same goal, constraints,
transformation and search, parameter for parameter (compared through ``repr(attack)``).

Both sides get the same cheap components in place of the heavy downloads (a 4-word embedding, a
tiny masked LM); the sentence encoder and POS tagger load lazily, so their real classes are used.
"""

from __future__ import annotations

import numpy as np
import pytest


class Victim:
    """The minimum TextAttack's goal function needs from a model wrapper."""

    model = object()

    def __call__(self, inputs):
        return np.tile([0.9, 0.1], (len(inputs), 1))


class RecordingResources:
    """Serves each role with TextAttack's own class (the published one), built from cheap parts,
    and records the parameters each recipe asked for."""

    def __init__(self, real, embedding, mlm):
        self.real, self.embedding, self.mlm, self.calls = real, embedding, mlm, []

    def textattack(self):
        return self.real.textattack()

    def served(self):
        return {}

    def word_swap_embedding(self, max_candidates):
        from textattack.transformations import WordSwapEmbedding

        self.calls.append(("word_swap_embedding", {"max_candidates": max_candidates}))
        return WordSwapEmbedding(max_candidates=max_candidates, embedding=self.embedding)

    def word_embedding_distance(self, **kwargs):
        from textattack.constraints.semantics import WordEmbeddingDistance

        self.calls.append(("word_embedding_distance", kwargs))
        return WordEmbeddingDistance(embedding=self.embedding, **kwargs)

    def use(self, **kwargs):
        from textattack.constraints.semantics.sentence_encoders import UniversalSentenceEncoder

        self.calls.append(("use", kwargs))
        return UniversalSentenceEncoder(**kwargs)

    def part_of_speech(self, **kwargs):
        from textattack.constraints.grammaticality import PartOfSpeech

        self.calls.append(("part_of_speech", kwargs))
        return PartOfSpeech(**kwargs)

    def word_swap_masked_lm(self, method, max_candidates, **kwargs):
        from textattack.transformations import WordSwapMaskedLM

        self.calls.append(("word_swap_masked_lm", {"method": method, "max_candidates": max_candidates, **kwargs}))
        return WordSwapMaskedLM(method=method, max_candidates=max_candidates, masked_language_model=self.mlm[0],
                                tokenizer=self.mlm[1], **kwargs)

    def homoglyph_swap(self):
        self.calls.append(("homoglyph_swap", {}))
        return self.real.homoglyph_swap()  # the stock class reads a file the 0.3.11 wheel lacks

    def word_swap_wordnet(self):
        from textattack.transformations import WordSwapWordNet

        self.calls.append(("word_swap_wordnet", {}))
        return WordSwapWordNet()


@pytest.fixture(scope="module")
def stock(tmp_path_factory, tiny_bert_dir):
    """Resources prepared in a temporary home; TextAttack's download hooks pointed at cheap parts."""
    from bench.paths import Paths
    from attacks.resources import Resources

    home = tmp_path_factory.mktemp("home")
    real = Resources(Paths(home=home, data=home / "data", results=home / "results"), prefer_real=False)
    real.textattack()
    import nltk
    import transformers
    from textattack.shared import WordEmbedding

    words = ["good", "great", "bad", "awful"]
    matrix = np.array([[1, 0], [0.9, 0.1], [-1, 0], [-0.9, -0.1]], dtype=np.float32)
    nn = np.argsort(-(matrix @ matrix.T), axis=1)
    embedding = WordEmbedding(matrix, {w: i for i, w in enumerate(words)}, dict(enumerate(words)), nn)
    mlm = (transformers.BertForMaskedLM(transformers.BertConfig.from_pretrained(tiny_bert_dir)),
           transformers.AutoTokenizer.from_pretrained(tiny_bert_dir))
    patches = pytest.MonkeyPatch()
    patches.setattr(WordEmbedding, "counterfitted_GLOVE_embedding", staticmethod(lambda: embedding))
    patches.setattr(nltk, "download", lambda *a, **k: True)  # WordSwapWordNet() asks for omw-1.4
    import textattack.transformations.word_swaps.word_swap_masked_lm as masked

    patches.setattr(masked.AutoModelForMaskedLM, "from_pretrained", staticmethod(lambda *a, **k: mlm[0]))
    patches.setattr(masked.AutoTokenizer, "from_pretrained", staticmethod(lambda *a, **k: mlm[1]))
    import textattack.attack_recipes.textbugger_li_2018 as textbugger

    patches.setattr(textbugger, "WordSwapHomoglyphSwap", real.homoglyph_swap)
    yield RecordingResources(real, embedding, mlm)
    patches.undo()


def _stock_recipe(name):
    from textattack import attack_recipes as r

    return {"textfooler": r.TextFoolerJin2019, "textbugger": r.TextBuggerLi2018, "pwws": r.PWWSRen2019,
            "bae": r.BAEGarg2019, "bert-attack": r.BERTAttackLi2020}[name]


@pytest.mark.parametrize("name", ["textfooler", "textbugger", "pwws", "bae", "bert-attack"])
def test_recipe_matches_textattack(stock, name):
    from attacks.recipes import build_attack

    victim = Victim()
    ours = build_attack(name, stock, victim)
    theirs = _stock_recipe(name).build(victim)
    # Stock BAE is an Attack subclass named after the recipe; the composition below it is what counts.
    assert repr(ours).split("\n", 1)[1] == repr(theirs).split("\n", 1)[1]


PUBLISHED = {
    "textfooler": [("word_embedding_distance", {"min_cos_sim": 0.5}),
                   ("part_of_speech", {"allow_verb_noun_swap": True}),
                   ("use", {"threshold": 0.840845057, "metric": "angular", "window_size": 15,
                            "compare_against_original": False, "skip_text_shorter_than_window": True}),
                   ("word_swap_embedding", {"max_candidates": 50})],
    "bae": [("part_of_speech", {"allow_verb_noun_swap": True}),
            ("use", {"threshold": 0.936338023, "metric": "cosine", "window_size": 15,
                     "compare_against_original": True, "skip_text_shorter_than_window": True}),
            ("word_swap_masked_lm", {"method": "bae", "max_candidates": 50, "min_confidence": 0.0})],
    "bert-attack": [("use", {"threshold": 0.2, "metric": "cosine", "window_size": None,
                             "compare_against_original": True, "skip_text_shorter_than_window": False}),
                    ("word_swap_masked_lm", {"method": "bert-attack", "max_candidates": 8})],
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_recipe_asks_resources_for_published_parameters(stock, name):
    from attacks.recipes import build_attack

    stock.calls.clear()
    attack = build_attack(name, stock, Victim(), query_budget=500)
    assert stock.calls == PUBLISHED[name]
    assert attack.goal_function.query_budget == 500

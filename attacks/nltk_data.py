"""An NLTK data directory built offline: WordNet 3.0 from the system, English stopwords.

TextAttack reads NLTK's ``stopwords`` corpus when it is imported and WordNet for PWWS. Offline,
``nltk.download`` cannot run, so we assemble the corpora NLTK's readers expect:

- ``corpora/wordnet``: the Debian packages ``wordnet-base`` and ``wordnet-sense-index`` (Princeton
  WordNet 3.0, the version NLTK ships) COPIED file by file (NLTK's reader refuses symlinked
  corpora) plus a generated ``lexnames`` file, which Debian keeps only as a man page.
- ``corpora/stopwords/english``: NLTK's own English list when one is installed anywhere on
  ``nltk.data.path``; otherwise scikit-learn's ``ENGLISH_STOP_WORDS`` (318 words, the Glasgow
  IR list) as a documented stand-in for NLTK's 179-word list.

No torch, transformers or textattack import here.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from bench.errors import BenchError
from bench.io import atomic_write_text
from bench.data.resources_layout import APT_PACKAGES, SYSTEM_WORDNET, Layout

# WordNet 3.0 lexicographer files, lexnames(5WN): number, name, syntactic category (1 n, 2 v, 3 a, 4 r).
LEXNAMES = (
    ("adj.all", 3), ("adj.pert", 3), ("adv.all", 4), ("noun.Tops", 1), ("noun.act", 1), ("noun.animal", 1),
    ("noun.artifact", 1), ("noun.attribute", 1), ("noun.body", 1), ("noun.cognition", 1),
    ("noun.communication", 1), ("noun.event", 1), ("noun.feeling", 1), ("noun.food", 1), ("noun.group", 1),
    ("noun.location", 1), ("noun.motive", 1), ("noun.object", 1), ("noun.person", 1),
    ("noun.phenomenon", 1), ("noun.plant", 1), ("noun.possession", 1), ("noun.process", 1),
    ("noun.quantity", 1), ("noun.relation", 1), ("noun.shape", 1), ("noun.state", 1),
    ("noun.substance", 1), ("noun.time", 1), ("verb.body", 2), ("verb.change", 2), ("verb.cognition", 2),
    ("verb.communication", 2), ("verb.competition", 2), ("verb.consumption", 2), ("verb.contact", 2),
    ("verb.creation", 2), ("verb.emotion", 2), ("verb.motion", 2), ("verb.perception", 2),
    ("verb.possession", 2), ("verb.social", 2), ("verb.stative", 2), ("verb.weather", 2), ("adj.ppl", 3),
)
# The files NLTK's WordNetCorpusReader opens (index.sense for sense keys, lemma_from_key).
WORDNET_FILES = tuple(f"{kind}.{pos}" for kind in ("data", "index") for pos in ("noun", "verb", "adj", "adv")) + (
    "noun.exc", "verb.exc", "adj.exc", "adv.exc", "index.sense", "cntlist.rev")

STOPWORDS_NLTK = "nltk-stopwords-english"
STOPWORDS_SKLEARN = "sklearn-english-stopwords-standin"


def lexnames_text() -> str:
    return "".join(f"{i:02d}\t{name}\t{pos}\n" for i, (name, pos) in enumerate(LEXNAMES))


def build_wordnet(nltk_dir: Path, source: Path = SYSTEM_WORDNET) -> Path:
    """Copy the system WordNet into ``nltk_dir/corpora/wordnet`` (idempotent)."""
    target = nltk_dir / "corpora" / "wordnet"
    missing = [f for f in WORDNET_FILES if not (source / f).is_file()]
    if missing:
        raise BenchError(
            f"System WordNet not found ({source}/{missing[0]} is missing). Install it with "
            f"`apt-get install {APT_PACKAGES}` (listed in .ci/apt.txt), or set BENCH_SYSTEM_WORDNET to a "
            f"WordNet 3.0 dict directory; then run `bench resources build`.")
    target.mkdir(parents=True, exist_ok=True)
    for name in WORDNET_FILES:
        dest = target / name
        if not dest.is_file() or dest.stat().st_size != (source / name).stat().st_size:
            tmp = target / f".{name}.tmp"
            shutil.copyfile(source / name, tmp)  # a real copy: NLTK refuses symlinks
            tmp.replace(dest)
    atomic_write_text(target / "lexnames", lexnames_text())
    return target


def _installed_nltk_stopwords(exclude: Path) -> Path | None:
    """NLTK's real English stopword file if some other NLTK data dir has it."""
    import nltk

    for root in nltk.data.path:
        candidate = Path(root) / "corpora" / "stopwords" / "english"
        if candidate.is_file() and Path(root).resolve() != exclude.resolve():
            return candidate
    return None


def build_stopwords(nltk_dir: Path) -> str:
    """Write ``corpora/stopwords/english``; returns the id of the list used."""
    target = nltk_dir / "corpora" / "stopwords"
    real = _installed_nltk_stopwords(nltk_dir)
    if real is not None:
        words, served = real.read_text(encoding="utf-8").split(), STOPWORDS_NLTK
    else:
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        words, served = sorted(ENGLISH_STOP_WORDS), STOPWORDS_SKLEARN
    atomic_write_text(target / "english", "".join(w + "\n" for w in words))
    atomic_write_text(target / "SOURCE", served + "\n")
    return served


def stopwords_source(nltk_dir: Path) -> str | None:
    source = nltk_dir / "corpora" / "stopwords" / "SOURCE"
    return source.read_text(encoding="utf-8").strip() if source.is_file() else None


def is_built(nltk_dir: Path) -> bool:
    wordnet = nltk_dir / "corpora" / "wordnet"
    return ((nltk_dir / "corpora" / "stopwords" / "english").is_file() and (wordnet / "lexnames").is_file()
            and all((wordnet / f).is_file() for f in WORDNET_FILES))


def build(nltk_dir: Path) -> dict[str, str]:
    build_wordnet(nltk_dir)
    return {"wordnet": "wordnet-3.0-system", "stopwords": build_stopwords(nltk_dir)}


def activate(nltk_dir: Path) -> None:
    """Put ``nltk_dir`` first on NLTK's search path, for this process and its children."""
    os.environ["NLTK_DATA"] = os.pathsep.join(
        [str(nltk_dir)] + [p for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p and p != str(nltk_dir)])
    import nltk

    if str(nltk_dir) in nltk.data.path:
        nltk.data.path.remove(str(nltk_dir))
    nltk.data.path.insert(0, str(nltk_dir))


def build_for(paths, force: bool, log, options: dict) -> str:
    """`bench resources build --only nltk`."""
    nltk_dir = Layout(paths.resources).nltk
    if is_built(nltk_dir) and not force:
        return f"already built in {nltk_dir} (stopwords: {stopwords_source(nltk_dir)})"
    served = build(nltk_dir)
    return f"built in {nltk_dir}: " + ", ".join(f"{k}={v}" for k, v in served.items())

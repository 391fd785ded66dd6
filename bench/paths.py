"""The one place where directories are resolved: BENCH_HOME, BENCH_DATA_DIR, BENCH_RESULTS_DIR.

Results default to ``$BENCH_HOME/results`` (so a run from a checkout leaves it clean); the checkout's
``results/`` is the published leaderboard, written only with ``--results-dir results`` or ``bench publish``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# The committed leaderboard of a checkout: written only when asked (--results-dir results, bench publish).
PUBLISHED_RESULTS = REPO_ROOT / "results"
PUBLISHED_REPORTS = REPO_ROOT / "reports" / "generated"
LONGEST_NAME = 160  # bytes of one file name a user's name may take (file systems allow 255; room for suffixes)


def file_name(name: str, what: str = "name") -> str:
    """The one mapping of a user-given name (a model, a card, a divergence pair) to one file-name component:
    a slash or backslash becomes "--" (``org/enc`` -> ``org--enc``, so Hub ids round-trip), a name longer
    than LONGEST_NAME bytes keeps its start and gains a hash of the whole; an empty name, "." or "..", or a
    control character is a BenchError (exit 2) naming the fix."""
    import hashlib

    from bench.errors import BenchError

    mapped = name.replace("/", "--").replace("\\", "--")
    if mapped in ("", ".", "..") or any(ord(c) < 32 for c in mapped):
        raise BenchError(f"The {what} {name!r} cannot name a file (empty, '.', '..' or a control character). "
                         f"Fix: give a {what} of letters, digits, '-', '_', '.' or '/'.")
    if len(mapped.encode("utf-8")) > LONGEST_NAME:
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:12]
        mapped = mapped.encode("utf-8")[:LONGEST_NAME - 13].decode("utf-8", "ignore") + "-" + digest
    return mapped


def inside(root: Path, *parts: str, what: str = "file") -> Path:
    """``root / parts`` after checking that it resolves inside ``root`` (symbolic links followed); a
    BenchError (exit 2) naming the path and the fix when it would escape."""
    from bench.errors import BenchError

    root = Path(root)
    path = root.joinpath(*parts)
    if not path.resolve().is_relative_to(root.resolve()):
        raise BenchError(f"The {what} {path} would lie outside {root}. Fix: give a plain name (no '..', no "
                         f"absolute path, no link leading out).")
    return path


@dataclass(frozen=True)
class Paths:
    home: Path  # models, caches, trained checkpoints
    data: Path  # SentEval-style data root (senteval/downstream/..., anli/, imdb/, ...)
    results: Path  # result cells + leaderboard.csv

    @classmethod
    def from_env(cls) -> "Paths":
        from platformdirs import user_cache_dir

        home = Path(os.environ.get("BENCH_HOME") or user_cache_dir("bench")).expanduser()
        data = Path(os.environ.get("BENCH_DATA_DIR") or home / "data").expanduser()
        # A development run never writes into the checkout: results default to $BENCH_HOME/results.
        results = Path(os.environ.get("BENCH_RESULTS_DIR") or home / "results").expanduser()
        return cls(home=home.resolve(), data=data.resolve(), results=results.resolve())

    def with_results(self, results: Path | str | None) -> "Paths":
        """These paths with another results directory (``--results-dir``); None keeps them."""
        if results is None:
            return self
        return Paths(home=self.home, data=self.data, results=Path(results).expanduser().resolve())

    @property
    def reports(self) -> Path:
        """Where `bench report` writes: reports/generated/ for the checkout's published results/,
        else a ``reports`` directory beside the results directory."""
        if self.results == PUBLISHED_RESULTS.resolve():
            return PUBLISHED_REPORTS.resolve()
        return self.results.parent / "reports"

    @property
    def models(self) -> Path:
        return self.home / "models"

    @property
    def cache(self) -> Path:
        return self.home / "cache"

    @property
    def resources(self) -> Path:
        return self.home / "resources"

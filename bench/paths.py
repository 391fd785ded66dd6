"""The one place where directories are resolved: BENCH_HOME, BENCH_DATA_DIR, BENCH_RESULTS_DIR."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def _from_checkout() -> bool:
    return (REPO_ROOT / ".git").exists() and (REPO_ROOT / "pyproject.toml").exists()


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
        default_results = REPO_ROOT / "results" if _from_checkout() else home / "results"
        results = Path(os.environ.get("BENCH_RESULTS_DIR") or default_results).expanduser()
        return cls(home=home.resolve(), data=data.resolve(), results=results.resolve())

    @property
    def models(self) -> Path:
        return self.home / "models"

    @property
    def cache(self) -> Path:
        return self.home / "cache"

    @property
    def resources(self) -> Path:
        return self.home / "resources"

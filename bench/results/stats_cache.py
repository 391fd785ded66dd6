"""Bootstrap results kept between runs: paired differences and intervals of stored evidence, computed once.

A bootstrap over thousands of examples takes a fraction of a second; a report makes a thousand of them.
``StatsCache`` keeps each result under a key made of what the result is a function of, and nothing else:

- the content of both evidences (``evidence_digest``: statistic, columns, scale, labels and every
  example's id and values, so a changed or re-scored cell never hits an old entry; a cell's recorded
  evidence sha256 is implied by it),
- the computation and its parameters (resamples, seed, level) and ``bench.scoring.stats.METHODS_VERSION``
  (``POOLED_VERSION`` too for a pooled effect).

So an entry never goes stale: a key either names exactly this computation or is never asked for again.
The cache file beside the results (``<results>/comparisons.jsonl``) is one JSON object per line, sorted
by key; ``text()`` writes only the entries this process asked for, so a render of unchanged results
writes the same bytes, and a clean clone with the committed file renders without a single bootstrap.
"""

from __future__ import annotations

import hashlib
import json
import math
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from bench.scoring.stats import (BOOTSTRAP_SEED, LEVEL, METHODS_VERSION, POOLED_VERSION, RESAMPLES, Difference,
                                 Evidence, Interval, Pooled, paired_bootstrap, pooled_test,
                                 paired_distribution)

CACHE_FILE = "comparisons.jsonl"
CACHE_FORMAT = "bench-stats-cache/1"


def _sample_digest(sample) -> str:
    """sha256 of a sample's ids, columns and strata; kept on the sample (samples are shared by rows)."""
    known = getattr(sample, "_digest", None)
    if known is None:
        h = hashlib.sha256(json.dumps(sample.ids, default=str).encode())
        for name in sorted(sample.columns):
            h.update(name.encode() + b"\0")
            h.update(np.ascontiguousarray(sample.columns[name], dtype="<f8").tobytes())
        if sample.strata is not None:
            h.update(json.dumps([str(s) for s in sample.strata.tolist()]).encode())
        known = h.hexdigest()
        sample._digest = known
    return known


def _shape(ev: Evidence) -> dict:
    if ev.combine:
        return {"combine": ev.combine, "label": ev.label, "parts": [_shape(p) for p in ev.parts]}
    return {"statistic": ev.statistic, "columns": list(ev.columns), "scale": ev.scale, "label": ev.label,
            "sample": _sample_digest(ev.sample)}


def evidence_digest(ev: Evidence) -> str:
    """sha256 of everything a statistic of ``ev`` depends on."""
    return hashlib.sha256(json.dumps(_shape(ev), sort_keys=True).encode()).hexdigest()


def _finite_or_none(x):
    if isinstance(x, dict):
        return {k: _finite_or_none(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite_or_none(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    return x


def _difference_to_dict(d: Difference) -> dict:
    return _finite_or_none({"estimate": d.estimate, "low": d.low, "high": d.high, "p": d.p, "method": d.method,
                            "n": d.n, "extra": d.extra})


def _difference_from_dict(d: dict) -> Difference:
    return Difference(d["estimate"], d["low"], d["high"], d["p"], d["method"], d["n"], d.get("extra") or {})


def _interval_to_dict(iv: Interval) -> dict:
    return _finite_or_none({"low": iv.low, "high": iv.high, "method": iv.method})


def _interval_from_dict(d: dict) -> Interval:
    return Interval(d["low"], d["high"], d["method"])


class StatsCache:
    """Paired differences and intervals by content key; ``path`` None keeps them in memory only."""

    def __init__(self, entries: dict[str, dict] | None = None, path: Path | None = None):
        self._entries = dict(entries or {})
        self._used: set[str] = set()
        self.path = path
        self.computed = 0  # entries this process had to compute (not found in the file)

    @classmethod
    def load(cls, results_dir: Path | None) -> "StatsCache":
        """The cache beside ``results_dir`` (empty when there is none, or it does not parse); inside
        ``shared(results_dir)``, that one cache object, so every caller's bootstraps land in it."""
        if results_dir is None:
            return cls()
        if _key_of(results_dir) in _SHARED:
            return _SHARED[_key_of(results_dir)]
        path = Path(results_dir) / CACHE_FILE
        entries = {}
        try:
            lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
            header = json.loads(lines[0]) if lines else {}
            if header.get("format") == CACHE_FORMAT:
                for line in lines[1:]:
                    entry = json.loads(line)
                    entries[entry["key"]] = entry
        except (OSError, ValueError, KeyError, TypeError):
            entries = {}  # a damaged cache only costs time: everything is recomputed
        return cls(entries, path)

    def _get(self, key: str, kind: str, compute, to_dict, from_dict):
        entry = self._entries.get(key)
        if entry is None or entry.get("kind") != kind:
            entry = {"key": key, "kind": kind, "value": to_dict(compute())}
            self._entries[key] = entry
            self.computed += 1
        self._used.add(key)
        return from_dict(entry["value"])  # read back from the stored form, so a hit and a miss agree

    def paired(self, a: Evidence, b: Evidence, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
               level: float = LEVEL, common: bool = False) -> Difference:
        """``bench.scoring.stats.paired_bootstrap(a, b, common=common)``, B - A, computed once per content. Raises
        ValueError as it does when the two cannot be paired (not cached)."""
        key = _key("paired", resamples, seed, level, f"common={common}", evidence_digest(a), evidence_digest(b))
        return self._get(key, "paired", lambda: paired_bootstrap(a, b, resamples, seed, level, common),
                         _difference_to_dict, _difference_from_dict)

    def pooled(self, pairs: list[tuple[Evidence, Evidence]], common: bool = False, resamples: int = RESAMPLES,
               seed: int = BOOTSTRAP_SEED, level: float = LEVEL) -> tuple[list[Difference], Pooled]:
        """One paired difference B - A per training seed (``pairs``: (A, B) evidence per seed) and their
        pooled effect (``bench.scoring.stats.pooled_test``), computed once per content. Raises
        ValueError as ``paired_bootstrap`` does when a pair cannot be paired (not cached)."""
        digests = [evidence_digest(x) for pair in pairs for x in pair]
        key = _key(f"pooled/{POOLED_VERSION}", resamples, seed, level, f"common={common}", *digests)

        def compute():
            made = [paired_distribution(a, b, resamples, seed, level, common) for a, b in pairs]
            diffs = [d for d, _ in made]
            if any(dist is None or d.estimate is None for d, dist in made):
                return diffs, Pooled(None, None, None, None, None, len(made), None, "a seed has no shared examples")
            return diffs, pooled_test([d.estimate for d in diffs], [dist for _, dist in made], level)

        def to_dict(value):
            diffs, pooled = value
            return {"lines": [_difference_to_dict(d) for d in diffs], "pooled": _finite_or_none(pooled.__dict__)}

        def from_dict(d):
            return [_difference_from_dict(x) for x in d["lines"]], Pooled(**d["pooled"])

        return self._get(key, "pooled", compute, to_dict, from_dict)

    def interval(self, ev: Evidence, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
                 level: float = LEVEL) -> Interval:
        """``ev.interval()``, computed once per content."""
        key = _key("interval", resamples, seed, level, evidence_digest(ev))
        return self._get(key, "interval", lambda: ev.interval(resamples, seed, level),
                         _interval_to_dict, _interval_from_dict)

    def text(self) -> str:
        """The entries asked for since loading, one per line sorted by key, after a format header."""
        lines = [json.dumps({"format": CACHE_FORMAT, "methods_version": METHODS_VERSION})]
        lines += [json.dumps(self._entries[k], sort_keys=True) for k in sorted(self._used)]
        return "\n".join(lines) + "\n"


_SHARED: dict[str, StatsCache] = {}


def _key_of(results_dir: Path) -> str:
    return str(Path(results_dir).resolve())


@contextmanager
def shared(results_dir: Path):
    """One cache for ``results_dir`` while the block runs: ``StatsCache.load(results_dir)`` anywhere
    (bench compare's machinery, tables, cards, claims) returns it, so a render's ``text()`` holds every
    bootstrap the render used, whoever asked for it."""
    key = _key_of(results_dir)
    if key in _SHARED:  # nested: the outer block's cache
        yield _SHARED[key]
        return
    _SHARED[key] = StatsCache.load(results_dir)
    try:
        yield _SHARED[key]
    finally:
        del _SHARED[key]


def _key(kind: str, resamples: int, seed: int, level: float, *digests: str) -> str:
    text = json.dumps([kind, METHODS_VERSION, resamples, seed, level, *digests])
    return hashlib.sha256(text.encode()).hexdigest()

"""Bootstrap results kept by content (bench/results/stats_cache.py): a hit gives what a computation gives, a
changed evidence never hits, and the file holds only what was asked for, sorted."""

from __future__ import annotations

import numpy as np

from bench.scoring import stats
from bench.results.stats_cache import CACHE_FILE, StatsCache, evidence_digest


def _sts(noise: float, seed: int = 0, n: int = 120) -> stats.Evidence:
    rng = np.random.default_rng(seed)
    gold = rng.uniform(0, 5, n)
    pred = gold + rng.normal(0, noise, n)
    return stats.Evidence("spearman", stats.Sample(list(range(n)), {"p": pred, "g": gold}), ("p", "g"))


def _runs(rates: list[int], n: int = 80) -> stats.Evidence:
    parts = [stats.Evidence("proportion", stats.Sample(list(range(n)), {"s": [1.0] * k + [0.0] * (n - k)}), ("s",),
                            label=f"run{i}") for i, k in enumerate(rates)]
    return stats.Evidence(parts=parts, combine="runs")


def test_a_hit_gives_what_the_computation_gives(tmp_path):
    a, b = _sts(1.0), _sts(0.6)
    cache = StatsCache()
    assert cache.paired(a, b) == stats.paired_bootstrap(a, b)
    assert cache.interval(b) == b.interval()
    runs_a, runs_b = _runs([40, 44]), _runs([30, 35])
    assert cache.paired(runs_a, runs_b) == stats.paired_bootstrap(runs_a, runs_b)  # McNemar details included
    assert cache.computed == 3
    (tmp_path / CACHE_FILE).write_text(cache.text())

    again = StatsCache.load(tmp_path)
    assert again.paired(_sts(1.0), _sts(0.6)) == stats.paired_bootstrap(a, b)  # equal content, new objects
    assert again.interval(_sts(0.6)) == b.interval()
    assert again.paired(_runs([40, 44]), _runs([30, 35])) == cache.paired(runs_a, runs_b)
    assert again.computed == 0
    assert again.text() == cache.text()


def test_changed_evidence_never_hits_an_old_entry():
    cache = StatsCache()
    base = _sts(1.0)
    cache.paired(base, _sts(0.6))
    changed = _sts(0.6)
    changed.sample.columns["p"][0] += 1.0  # one example re-scored
    assert evidence_digest(changed) != evidence_digest(_sts(0.6))
    cache.paired(base, changed)
    relabelled = _runs([40, 44])
    relabelled.parts[1].label = "run7"  # parts pair up by label: a different pairing
    assert evidence_digest(relabelled) != evidence_digest(_runs([40, 44]))
    assert cache.computed == 2


def test_the_file_holds_the_entries_asked_for_sorted(tmp_path):
    first = StatsCache()
    first.paired(_sts(1.0), _sts(0.6))
    first.paired(_sts(1.0), _sts(0.8))
    (tmp_path / CACHE_FILE).write_text(first.text())
    later = StatsCache.load(tmp_path)
    later.paired(_sts(1.0), _sts(0.8))  # the other comparison is no longer asked for: pruned
    lines = later.text().splitlines()
    assert len(lines) == 2 and "bench-stats-cache" in lines[0]
    keys = [line.split('"key": "')[1][:64] for line in first.text().splitlines()[1:]]
    assert keys == sorted(keys)


def test_a_damaged_file_is_recomputed_not_trusted(tmp_path):
    (tmp_path / CACHE_FILE).write_text('{"format": "bench-stats-cache/1"}\n{not json\n')
    cache = StatsCache.load(tmp_path)
    assert cache.paired(_sts(1.0), _sts(0.6)) == stats.paired_bootstrap(_sts(1.0), _sts(0.6))
    assert cache.computed == 1

"""Result rows -> statistics for one table cell: select the rows, pick one setting, average over seeds.

Reads only result files (through bench.results.store.ResultStore) and the plug-in metadata exported beside them.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from bench.results import metadata
from bench.errors import BenchError
from bench.scoring.stats import NO_INTERVAL, Evidence, Interval, t_interval
from bench.results.stats_cache import StatsCache
from bench.results.store import ResultStore
from bench.results.uncertainty import identity_order, row_key, stored_evidence

# Config keys that differ between rows of one setting: the cell's identity, and a replication's own
# record (run k's sample and victim seed), so the rows of a cell's runs stay one setting.
# An average row's own tasks (``average_of``) are compared where averages are ranked (bench.results.averages).
PER_CELL_KEYS = ("suite", "task", "split", "seed", "summary_of", "replication", "average_of")
UNREGISTERED = "not in the registry"
CODE_PATH = re.compile(r"[\w.]+:[\w.]+")  # a loader named as module:function


@dataclass(frozen=True)
class Catalog:
    """What the runs exported beside the results (bench/results/metadata.py, ``plugins.json``): model facts
    (family, method, recipe, display order) and the suites' labels. Reports know models and labels
    from here only, never from the registry or the plug-ins themselves."""

    models: dict
    suites: dict

    @classmethod
    def load(cls, results_dir: Path) -> "Catalog":
        data = metadata.read(results_dir)
        return cls(dict(data.get("models") or {}), dict(data.get("suites") or {}))

    def order(self, names) -> list[str]:
        """Registry order (as exported), then the others alphabetically."""
        def key(name):
            entry = self.models.get(name)
            return (0, entry.get("order", 0), name) if entry and entry.get("builtin") else (1, 0, name)
        return sorted(set(names), key=key)

    def group(self, model: str) -> str:
        """The pre-trained encoder a model starts from (its family), for grouping and bold. A family that
        is a loader's code path ("module:function", a local base built by bench itself) is named by the
        model it starts from and that model's own description instead."""
        entry = self.models.get(model)
        if not entry:
            return UNREGISTERED
        family = entry.get("family") or entry.get("backbone") or UNREGISTERED
        return self._named_root(model) if CODE_PATH.fullmatch(family) else family

    def _named_root(self, model: str) -> str:
        seen = {model}
        while (self.models[model].get("base") or "") in self.models and self.models[model]["base"] not in seen:
            model = self.models[model]["base"]
            seen.add(model)
        head = re.split(r" \(|; |\. ", self.models[model].get("description") or "", maxsplit=1)[0].strip()
        return f"{model} ({head})" if head else model

    def recipe(self, model: str) -> str:
        recipe = (self.models.get(model) or {}).get("recipe") or {}
        return ", ".join(f"{k}={v}" for k, v in sorted(recipe.items()))

    def method(self, model: str) -> str:
        return (self.models.get(model) or {}).get("method") or ""

    def task_label(self, suite: str, task: str) -> str:
        entry = ((self.suites.get(suite) or {}).get("tasks") or {}).get(task) or {}
        return entry.get("label") or task

    def label(self, suite: str, kind: str, key: str) -> str:
        """A suite's extra label, e.g. ("adversarial", "attack", "textfooler") -> "TextFooler"."""
        return (((self.suites.get(suite) or {}).get("labels") or {}).get(kind) or {}).get(key) or key


EMPTY_CATALOG = Catalog({}, {})


@dataclass(frozen=True)
class Stat:
    """Mean over the seed (or run) rows of one setting; std is the sample std over them; the 95% CI is
    the row's own (one row) or a t-interval over the seed/run values (several)."""

    mean: float | None
    std: float | None
    by_seed: tuple[tuple[tuple, float], ...]  # ((seed, aggregation), value)
    rows: tuple[dict, ...]
    passed_over: int = 0  # other settings with results for this cell, not shown
    ci: Interval = NO_INTERVAL
    parts: tuple = ()  # for an average of cells: the averaged Stats (for its evidence)

    @property
    def seeds(self) -> int:
        return len(self.by_seed)


EMPTY = Stat(None, None, (), ())


def load_rows(results_dir: Path, treated: bool = False) -> list[dict]:
    """Every result row under ``results_dir/cells``, each with its parsed config as ``_config``; not those of
    a treated cell (``treatments`` in its config, a hardened victim, say) unless ``treated``: a control's
    condition, which the claims ledger reads from the store by name, never a model's own number in a table or
    leaderboard page (the results' leaderboard CSVs, the record of every cell, keep them)."""
    store = ResultStore(results_dir)
    cells = store.cells()
    if not cells:
        raise BenchError(f"No result cells under {Path(results_dir) / 'cells'}. Run `bench run --suite S --model M` "
                         f"first, or point BENCH_RESULTS_DIR at a results directory.")
    scoped = {name: entry.get("row_scoped") or {} for name, entry in Catalog.load(results_dir).suites.items()}
    rows = []
    for path, payload in store.readable_cells():
        for row in payload["results"]:
            try:
                config = json.loads(row.get("config") or "{}")
            except json.JSONDecodeError:
                config = {}
            row = {**row, "_config": config if isinstance(config, dict) else {}, "_cell": str(path)}
            if is_treated(row) and not treated:
                continue
            row["_setting"] = row_setting(row, scoped.get(row.get("suite"), {}))
            rows.append(row)
    return rows


def is_treated(row: dict) -> bool:
    """A row of a treated cell (``treatments`` in its parsed config): a control's condition, not the model's."""
    return bool(row["_config"].get("treatments"))


class EvidenceIndex:
    """The stored per-example evidence of result rows (cell sidecars), read once per cell, and the
    bootstrap results already computed from it (``cache``, see bench/results/stats_cache.py)."""

    def __init__(self, results_dir: Path, cache: StatsCache | None = None):
        self.store = ResultStore(results_dir)
        self.cache = cache if cache is not None else StatsCache()
        self._cells: dict[str, dict] = {}

    def of_row(self, row: dict) -> Evidence | None:
        cell = row.get("_cell")
        if not cell:
            return None
        if cell not in self._cells:
            self._cells[cell] = stored_evidence(self.store, Path(cell))
        key = row_key(row)
        return self._cells[cell].get(tuple(key[k] for k in ("metric", "aggregation", "attack", "split")))

    def of_stat(self, s: "Stat") -> Evidence | None:
        """One row: its evidence; several seeds/runs: their evidences as a mean over runs, paired by
        (seed, aggregation); an average of cells: the cells' evidences averaged, paired by position."""
        if s.mean is None:
            return None
        if s.parts:
            parts = [self.of_stat(p) for p in s.parts]
            if any(p is None for p in parts):
                return None
            return Evidence(parts=[_labelled(p, f"part{i}") for i, p in enumerate(parts)], combine="average")
        by_key = {(r.get("seed") or 0, r.get("aggregation") or ""): r for r in s.rows}
        evs = [(key, self.of_row(by_key[key])) for key, _ in s.by_seed if key in by_key]
        if not evs or any(ev is None for _, ev in evs):
            return None
        if len(evs) == 1:
            return evs[0][1]
        return Evidence(parts=[_labelled(ev, f"seed{k[0]}-{k[1]}") for k, ev in evs], combine="runs")


def _labelled(ev: Evidence, label: str) -> Evidence:
    from dataclasses import replace

    return replace(ev, label=label)


def row_setting(row: dict, row_scoped: dict) -> str:
    """The setting a row was computed under: its cell's config minus the cell's identity (PER_CELL_KEYS) and
    minus what describes the cell's other rows (the suite's ``row_scoped``: which recipes ran beside this one,
    their parameters), with the cell's resources cut to those this row's recipe was served. So an attack's
    rows from a cell that ran it alone and from one that ran all five share a setting when they ran alike."""
    config, attack = row["_config"], row.get("attack") or ""
    setting = {k: v for k, v in config.items()
               if k not in PER_CELL_KEYS and (k not in row_scoped or (row_scoped[k] and row_scoped[k] == attack))}
    if "attack_resources" in row_scoped and attack:
        resources = config.get("attack_resources") or {}
        setting["attack_resources"] = {role: resources.get(role) for role in sorted(_served(row))}
    return json.dumps(setting, sort_keys=True, default=str)


def _served(row: dict) -> dict:
    """The resources a row's recipe was served (role -> name), as the row records them."""
    return row_resources(row).get("served") or {}


def base_build(entry: dict | None, models: dict | None = None) -> str | None:
    """The weights hash the base's own cells carry for the build a trained model started from: its training
    card's base_encoder_sha256 (plugins.json). A card that predates that record but names the base's file
    (base_weights_sha256) gets the weights hash the other cards of ``models`` record for that same file: one
    file loads as one set of weights. None when neither says, or the cards disagree."""
    training = (entry or {}).get("training") or {}
    if training.get("base_encoder_sha256") or not training.get("base_weights_sha256"):
        return training.get("base_encoder_sha256") or None
    same_file = {t.get("base_encoder_sha256") for other in (models or {}).values()
                 if (t := (other or {}).get("training") or {}).get("base_weights_sha256")
                 == training["base_weights_sha256"]} - {None, ""}
    return same_file.pop() if len(same_file) == 1 else None


def row_resources(row: dict) -> dict:
    """A row's ``resources`` record, parsed ({} when it is empty, not JSON or not a mapping)."""
    raw = row.get("resources") or {}
    try:
        record = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def setting_key(row: dict) -> str:
    return row["_setting"] if "_setting" in row else row_setting(row, {})


def matches(row: dict, where: dict) -> bool:
    return all(str(row.get(k) if row.get(k) is not None else "") == str(v) for k, v in where.items())


def unverified_files(rows) -> list[str]:
    """The data files that failed their sha256 check (``--allow-unverified-data``) under any of ``rows``."""
    return sorted({item for r in rows for item in r["_config"].get("data_unverified") or ()})


def _rank(rows: list[dict], prefer: dict) -> tuple:
    """Lower is preferred: the spec's preferred option values, then no limit / a larger limit, then more seeds."""
    config = rows[0]["_config"]
    pref = tuple(values.index(config.get(key)) if config.get(key) in values else len(values)
                 for key, values in prefer.items())
    limit = config.get("limit")
    return (*pref, 0 if limit is None else 1, -(limit or 0), -len({r.get("seed") for r in rows}))


def common_setting(rows_of_models: list[list[dict]], where: dict, prefer: dict | None = None) -> str | None:
    """The one setting (``setting_key``) a table column shows for every model, so two models are never
    set side by side under different settings (say one's fine-tuned victims against the other's frozen
    ones). A total order, first difference decides:

    1. verified data before data that failed its sha256 check (cells run with --allow-unverified-data);
    2. the setting most of the models have results under;
    3. the spec's preferred option values, then no limit or the largest, then more seeds (``_rank``);
    4. the setting key itself (its sorted JSON), so that no tie is left to chance."""
    models_with: dict[str, int] = {}
    rows_of: dict[str, list[dict]] = {}
    for rows in rows_of_models:
        keys = set()
        for r in rows:
            if matches(r, where):
                keys.add(setting_key(r))
                rows_of.setdefault(setting_key(r), []).append(r)
        for key in keys:
            models_with[key] = models_with.get(key, 0) + 1
    if not models_with:
        return None
    return min(models_with, key=lambda k: (bool(unverified_files(rows_of[k])), -models_with[k],
                                           _rank(rows_of[k], prefer or {}), k))


def stat(rows: list[dict], where: dict, prefer: dict | None = None) -> Stat:
    """Statistics of the rows matching ``where``; when several settings match, the preferred one."""
    hits = [r for r in rows if matches(r, where)]
    if not hits:
        return EMPTY
    settings: dict[str, list[dict]] = {}
    for r in hits:
        settings.setdefault(setting_key(r), []).append(r)
    # Verified data first, then the preferred setting (_rank); among equals the newest, then the setting key.
    newest_first = sorted(sorted(settings), key=lambda k: max(r.get("created_at") or "" for r in settings[k]),
                          reverse=True)
    groups = [settings[k] for k in newest_first]
    chosen = min(groups, key=lambda g: (bool(unverified_files(g)), _rank(g, prefer or {})))
    per_seed: dict[tuple, dict] = {}
    for r in sorted(chosen, key=identity_order):  # other weights under one name: the newest, as cards and compare
        if r.get("value") is not None:
            # One sample per seed (and per run, for suites that write a row per run); a re-run replaces the older row.
            per_seed[(r.get("seed") or 0, r.get("aggregation") or "")] = r
    passed_over = len(groups) - 1
    if not per_seed:
        return Stat(None, None, (), tuple(chosen), passed_over)
    by_seed = tuple(sorted((key, float(r["value"])) for key, r in per_seed.items()))
    values = [v for _, v in by_seed]
    # A row's own ``std`` (over folds, say) is not a spread over seeds: never shown as one.
    std = statistics.stdev(values) if len(values) > 1 else None
    if len(values) == 1:
        only = next(iter(per_seed.values()))
        ci = (Interval(float(only["ci_low"]), float(only["ci_high"]), only.get("ci_method") or "")
              if only.get("ci_low") is not None and only.get("ci_high") is not None else NO_INTERVAL)
    elif std == 0:
        # Identical values (a deterministic evaluation repeated): the seeds varied nothing, so the
        # interval is the rows' own (sampling over examples), never a zero-width t-interval.
        first = next(iter(per_seed.values()))
        ci = (Interval(float(first["ci_low"]), float(first["ci_high"]), first.get("ci_method") or "")
              if first.get("ci_low") is not None and first.get("ci_high") is not None else NO_INTERVAL)
    else:
        ci = t_interval(values, what="runs" if any(k[1].startswith("run") for k, _ in by_seed) else "seeds")
    return Stat(statistics.fmean(values), std, by_seed, tuple(per_seed.values()), passed_over, ci)


def mean_of(stats: list[Stat]) -> Stat:
    """Mean of cell means; per-seed means (and so a std) only when every cell has the same seeds."""
    present = [s for s in stats if s.mean is not None]
    if not present:
        return EMPTY
    mean = statistics.fmean(s.mean for s in present)
    seed_sets = {tuple(seed for seed, _ in s.by_seed) for s in present}
    by_seed: tuple = ()
    std = None
    if len(seed_sets) == 1 and len(present) == len(stats):
        seeds = next(iter(seed_sets))
        by_seed = tuple((seed, statistics.fmean(dict(s.by_seed)[seed] for s in present)) for seed in seeds)
        std = statistics.stdev(v for _, v in by_seed) if len(by_seed) > 1 else None
    rows = tuple(r for s in present for r in s.rows)
    ci = t_interval([v for _, v in by_seed], what="seeds") if len(by_seed) > 1 and std else NO_INTERVAL
    return Stat(mean, std, by_seed, rows, ci=ci, parts=tuple(stats) if len(present) == len(stats) else ())


def resource_pairs(rows: list[dict], key: str | None) -> set[str]:
    """role=resource pairs: the map under ``key`` when given, else the row's top-level short strings."""
    out = set()
    for r in rows:
        res = row_resources(r)
        if key is not None:
            res = res.get(key) if isinstance(res.get(key), dict) else {}
        out |= {f"{k}={v}" for k, v in res.items() if isinstance(v, str) and len(v) <= 80}
    return out

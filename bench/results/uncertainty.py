"""Uncertainty applied to result rows and read back from the store (kernel: numpy/scipy, no torch).

- ``apply_uncertainty(rows)``: the base suite calls it on a task cell's rows; each row that carries
  ``evidence`` (a ``bench.scoring.stats.Evidence``) gets ``ci_low``/``ci_high``/``ci_method``, and the
  evidence goes into the cell's sidecar (``<cell>.evidence.json.gz``, written with the cell);
- ``summary_uncertainty(rows, ...)``: the same for a summary cell whose rows average task rows
  (``AverageOf``): the interval bootstraps the average of the tasks' own resamples, and the sidecar
  refers to the tasks' cells instead of copying their data;
- ``stored_evidence`` / ``compare_models``: the evidence of stored rows, and paired differences
  B - A over every cell two models share (``bench compare``, the reports' significance marks).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench.scoring.stats import (BOOTSTRAP_SEED, EVIDENCE_FORMAT, RESAMPLES, Difference, Evidence, evidence_from_dict,
                         evidence_to_dict, sample_from_dict, sample_to_dict)
from bench.results.stats_cache import StatsCache
from bench.results.store import ResultStore, file_identity

KEY_FIELDS = ("metric", "aggregation", "attack", "split")
UNVERIFIED = "‡"  # marks a number computed on data that failed its sha256 check, wherever it is shown


@dataclass
class AverageOf:
    """A summary row's evidence: the stored task rows (dicts) it averages."""

    rows: list[dict] = field(default_factory=list)


def row_key(row) -> dict:
    get = row.get if isinstance(row, dict) else (lambda k: getattr(row, k))
    return {k: get(k) or "" for k in KEY_FIELDS}


def _key_tuple(key: dict) -> tuple:
    return tuple(key.get(k) or "" for k in KEY_FIELDS)


def _set_interval(row, ev: Evidence) -> None:
    if row.ci_low is not None or row.ci_high is not None:
        return  # the suite set its own
    iv = ev.interval()
    row.ci_low, row.ci_high, row.ci_method = iv.low, iv.high, iv.method


def _payload(entries: list[dict], samples: dict) -> dict | None:
    if not entries:
        return None
    return {"format": EVIDENCE_FORMAT, "resamples": RESAMPLES, "seed": BOOTSTRAP_SEED,
            "samples": {name: sample_to_dict(s) for name, s in samples.values()}, "rows": entries}


def apply_uncertainty(rows: list) -> dict | None:
    """Set each evidenced row's 95% CI; return the cell's sidecar payload (None: no row has evidence)."""
    samples: dict = {}
    entries = []
    for r in rows:
        ev = r.evidence
        if not isinstance(ev, Evidence):
            continue
        _set_interval(r, ev)
        entries.append({"key": row_key(r), "evidence": evidence_to_dict(ev, samples)})
    return _payload(entries, samples)


def summary_uncertainty(rows: list, task_cells: list[tuple[Path, list[dict]]], store: ResultStore) -> dict | None:
    """CIs of summary rows that average task rows (``evidence=AverageOf([...])``), from the task cells'
    sidecars; a row whose parts lack evidence gets no interval. Returns the summary sidecar payload."""
    where = {}
    for path, task_rows in task_cells:
        for tr in task_rows:
            where[(tr["task"], *_key_tuple(row_key(tr)))] = Path(path)
    entries = []
    for r in rows:
        if not isinstance(r.evidence, AverageOf):
            continue
        parts, refs = [], []
        for tr in r.evidence.rows:
            key = row_key(tr)
            path = where.get((tr["task"], *_key_tuple(key)))
            ev = stored_evidence(store, path).get(_key_tuple(key)) if path is not None else None
            if ev is None:
                parts = []
                break
            parts.append(replace(ev, label=tr["task"]))  # a copy: stored evidence is shared
            refs.append({"ref": {"cell": _relative(path, store.root), "key": key}, "label": tr["task"]})
        if not parts:
            continue
        _set_interval(r, Evidence(parts=parts, combine="average"))
        entries.append({"key": row_key(r), "evidence": {"combine": "average", "parts": refs}})
    return _payload(entries, {})


def _relative(path: Path, root: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path(root).resolve()))
    except ValueError:
        return str(path)


def stored_evidence(store: ResultStore, cell_path: Path | None, _seen: frozenset = frozenset()) -> dict[tuple, Evidence]:
    """row key tuple -> Evidence, from a cell's sidecar ({} when it has none). Remembered on the store while
    the files it came from are unchanged (a report asks for most cells' evidence many times): the dict and
    its Evidence objects are shared, so read them and never change them."""
    return {} if cell_path is None else _stored(store, Path(cell_path), _seen)[0]


def _stored(store: ResultStore, cell_path: Path, seen: frozenset) -> tuple[dict, dict | None]:
    """(evidence by row key, the identity of every file it was read from; None when a circular reference
    was cut, so the answer depends on ``seen`` and is not remembered)."""
    known = store.evidence_objects.get(str(cell_path))
    if known is not None and known[1].keys().isdisjoint(seen) and all(
            file_identity(Path(name)) == identity for name, identity in known[1].items()):
        return known
    evidence, files = _read_stored(store, cell_path, seen)
    if files is not None:
        store.evidence_objects[str(cell_path)] = (evidence, files)
    return evidence, files


def _read_stored(store: ResultStore, cell_path: Path, seen: frozenset) -> tuple[dict, dict | None]:
    files: dict | None = {str(p): file_identity(p) for p in (cell_path, store.evidence_path(cell_path))}
    payload = store.read_evidence(cell_path)
    if not payload or payload.get("format") != EVIDENCE_FORMAT:
        return {}, files
    samples = {name: sample_from_dict(d) for name, d in payload.get("samples", {}).items()}
    seen = seen | {str(cell_path)}

    def resolve(ref: dict):
        nonlocal files
        target = Path(ref["cell"])
        target = target if target.is_absolute() else store.root / target
        if str(target) in seen:
            files = None
            return None
        found, read_from = _stored(store, target, seen) if target.exists() else ({}, {str(target): ()})
        files = None if files is None or read_from is None else {**files, **read_from}
        return found.get(_key_tuple(ref["key"]))

    out = {}
    for entry in payload.get("rows", []):
        ev = evidence_from_dict(entry["evidence"], samples, resolve)
        if ev is not None:
            out[_key_tuple(entry["key"])] = ev
    return out, files


# ---------------------------------------------------------------- comparisons -------------------

@dataclass
class CellDiff:
    """One row two models share: A's and B's values and the paired difference B - A."""

    suite: str
    task: str
    seed: int | None
    config_hash: str
    key: dict
    a: float | None
    b: float | None
    diff: Difference | None  # None: a model has no stored evidence for this row
    note: str = ""
    setting: str = ""  # what sets this cell apart from the other shared cells of its task ("victim=frozen, ...")
    unverified_a: tuple = ()  # data files under A's row that failed their sha256 check (--allow-unverified-data)
    unverified_b: tuple = ()
    stored_a: float | None = None  # each cell's own value (a and b: over the examples the difference rests on)
    stored_b: float | None = None
    other_tasks: str = ""  # two averages over different tasks: which each is over (then no difference is taken)

    @property
    def estimate(self) -> float | None:
        if self.other_tasks:
            return None
        if self.diff is not None and self.diff.estimate is not None:
            return self.diff.estimate
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def significant(self) -> bool:
        return self.diff is not None and self.diff.significant

    def as_dict(self) -> dict:
        d = self.diff
        return {"suite": self.suite, "task": self.task, "seed": self.seed, "config_hash": self.config_hash,
                **self.key, "a": self.a, "b": self.b, "stored_a": self.stored_a, "stored_b": self.stored_b,
                "difference": _clean(self.estimate),
                "ci_low": _clean(d.low) if d else None, "ci_high": _clean(d.high) if d else None,
                "p": _clean(d.p) if d else None, "significant": self.significant,
                "method": d.method if d else "", "pairs": d.n if d else None,
                "details": _jsonable(d.extra) if d else {}, "note": self.note, "setting": self.setting,
                "other_tasks": self.other_tasks,
                "unverified_data": {"a": list(self.unverified_a), "b": list(self.unverified_b)}}


def _clean(x):
    return None if x is None or not math.isfinite(x) else float(x)


def _jsonable(x):
    return json.loads(json.dumps(x, default=float))


def model_cells(store: ResultStore, model: str, suite: str | None = None, task: str | None = None,
                weights: str | None = None) -> dict[tuple, Path]:
    """(suite, task, seed, config hash) -> cell path, for one model's stored cells (those of ``weights`` only,
    when given); of two files claiming one key, the one ``ResultStore.choose`` keeps (unreadable and duplicate
    files are named in warnings). Of cells of other weights under one name, the newest by ``identity_order``
    (the reports' rule too), named in a warning: two identities share the name."""
    import warnings

    from bench.errors import BenchWarning

    found: dict[tuple, list[tuple[tuple, Path]]] = {}
    for path, cell in store.cells_of(model, suite, task):
        c = cell["cell"]
        if weights is not None and c["weights_sha256"] != weights:
            continue
        found.setdefault((c["suite"], c["task"], c["seed"], c["config_hash"]), []).append(
            (identity_order(cell["results"][0], c["weights_sha256"], cell["results"]), path))
    for key, claims in found.items():
        if len(claims) > 1:
            claims.sort(reverse=True)
            shas = ", ".join(f"{order[-1][:12]}…" for order, _ in claims)
            warnings.warn(f"Model '{model}' has cells of {len(claims)} weights identities ({shas}) for {key[0]}/"
                          f"{key[1]} seed {key[2]}: the newest ({claims[0][0][-1][:12]}…, {claims[0][1]}) is shown. "
                          f"Fix: give each model its own name (or move the other cells away).", BenchWarning,
                          stacklevel=2)
    return {key: max(claims)[1] for key, claims in found.items()}


def identity_order(row: dict, weights_sha256: str | None = None, rows: list[dict] | None = None) -> tuple:
    """Which of the rows (or cells) of other weights under one name is the newest: the later ``created_at``
    (seconds), then the larger weights sha256, so that two identities written in the same second are ordered
    the same way by every reader (cards, compare and the reports' tables)."""
    stamp = max((r.get("created_at") or "" for r in rows), default="") if rows else row.get("created_at") or ""
    return stamp, weights_sha256 if weights_sha256 is not None else row.get("weights_sha256") or ""


def distinguishing_settings(configs: dict[tuple, dict]) -> dict[tuple, str]:
    """cell key -> "k=v, ..." of the scalar configuration entries that differ between cells of the same
    (suite, task), so that rows of one task under several settings (victim mode, constraints) can be
    told apart; "" where a task has one cell."""
    out = {}
    for key, config in configs.items():
        peers = [c for k, c in configs.items() if k[:2] == key[:2]]
        names = sorted({n for c in peers for n, v in c.items() if not isinstance(v, dict)})
        differing = [n for n in names if len({json.dumps(c.get(n), sort_keys=True) for c in peers}) > 1]
        out[key] = ", ".join(f"{n}={_setting_value(config.get(n))}" for n in differing)
    return out


def _setting_value(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def unverified_data(row: dict) -> tuple[str, ...]:
    """The data files a stored row was computed on that failed their sha256 check (its config's
    ``data_unverified``, written by a run with --allow-unverified-data)."""
    try:
        config = json.loads(row.get("config") or "{}")
    except (TypeError, json.JSONDecodeError):
        return ()
    return tuple(config.get("data_unverified") or ()) if isinstance(config, dict) else ()


def compare_cells(store: ResultStore, path_a: Path, path_b: Path, include=lambda key: True,
                  setting: str = "", cache: StatsCache | None = None) -> list[CellDiff]:
    """Paired differences B - A over the rows of two cells of one (suite, task, seed, config), each
    bootstrap taken from ``cache`` when it holds it (default: the cache beside the results).

    Rates over a subset (an attack success rate counts only the examples its victim classified
    correctly) are compared over the examples both count, so A, B, B - A, its CI and McNemar's test
    all rest on the same examples, as in the claims ledger; ``stored_a``/``stored_b`` keep each
    cell's own value."""
    cache = cache if cache is not None else StatsCache.load(store.root)
    cell_a, cell_b = store.read(path_a), store.read(path_b)
    ev_a, ev_b = stored_evidence(store, path_a), stored_evidence(store, path_b)
    rows_b = {_key_tuple(row_key(r)): r for r in cell_b["results"]}
    c = cell_a["cell"]
    out = []
    for ra in cell_a["results"]:
        k = _key_tuple(row_key(ra))
        rb = rows_b.get(k)
        if rb is None or not include(row_key(ra)):
            continue
        other = _other_tasks(ra, rb)
        if other:  # averages over different tasks are not compared
            out.append(CellDiff(c["suite"], c["task"], c["seed"], c["config_hash"], row_key(ra), ra.get("value"),
                                rb.get("value"), None, "not compared: " + other, setting, other_tasks=other))
            continue
        diff, note = None, ""
        if k in ev_a and k in ev_b:
            try:
                diff = cache.paired(ev_a[k], ev_b[k], common=True)
            except ValueError as exc:
                note = f"not comparable: {exc}"
        else:
            missing = [m for m, ev in (("A", ev_a), ("B", ev_b)) if k not in ev]
            note = f"no stored evidence for {' and '.join(missing)}"
        a, b = _compared_values(diff, ra.get("value"), rb.get("value"))
        out.append(CellDiff(c["suite"], c["task"], c["seed"], c["config_hash"], row_key(ra), a, b, diff, note,
                            setting, unverified_data(ra), unverified_data(rb), ra.get("value"), rb.get("value")))
    return out


def _other_tasks(ra: dict, rb: dict) -> str:
    """"" when two rows are no averages or averages over the same tasks; else which tasks each is over."""
    from bench.results.averages import average_of, describe

    over_a, over_b = average_of(ra), average_of(rb)
    return "" if over_a == over_b else f"averages over different tasks: A over {describe(over_a) or '?'}, B over " \
                                       f"{describe(over_b) or '?'}"


def _compared_values(diff: Difference | None, stored_a, stored_b) -> tuple:
    """A and B over the examples the difference rests on: the stored values, unless the comparison
    kept only the examples both count."""
    if diff is not None and diff.extra.get("common") and diff.extra.get("a") is not None:
        return diff.extra["a"], diff.extra["b"]
    return stored_a, stored_b


def compare_models(store: ResultStore, model_a: str, model_b: str, suite: str | None = None,
                   task: str | None = None, include=lambda key: True,
                   cache: StatsCache | None = None, weights_a: str | None = None) -> tuple[list[CellDiff], dict]:
    """The paired difference B - A on every cell both models have (same suite, task, seed and
    configuration), row by row; plus counts of the cells only one model has. ``weights_a``: A's cells of
    those weights only (a base built on several machines: the build B was trained from). Bootstraps come
    from ``cache`` (default: ``StatsCache.load(store.root)``, the one beside the results), computed only
    where it lacks them; pass one cache to many calls to share it and then write ``cache.text()``."""
    cache = cache if cache is not None else StatsCache.load(store.root)
    a, b = model_cells(store, model_a, suite, task, weights=weights_a), model_cells(store, model_b, suite, task)
    shared = sorted(set(a) & set(b), key=lambda k: tuple(str(x) for x in k))
    settings = distinguishing_settings({k: store.read(a[k]).get("config", {}) for k in shared})
    diffs = [d for k in shared for d in compare_cells(store, a[k], b[k], include, settings[k], cache)]
    return diffs, {"shared_cells": len(shared), "only_a": len(set(a) - set(b)), "only_b": len(set(b) - set(a)),
                   "other_task_averages": other_task_averages(store, a, b)}


def other_task_averages(store: ResultStore, a: dict, b: dict) -> list[str]:
    """The averages both models have for one (suite, task, seed) in cells they do not share, over different
    tasks (so never compared): "sts/avg seed 0 spearman (mean-of-tasks): A over 7 tasks: ..., B over stsb only"."""
    from bench.results.averages import average_of, describe

    overs: dict[tuple, dict[str, set]] = {}
    for side, cells, other in (("A", a, b), ("B", b, a)):
        for key, path in cells.items():
            if key in other:
                continue
            for r in store.read(path)["results"]:
                if average_of(r) is not None:
                    where = (*key[:3], r["metric"], r["aggregation"])
                    overs.setdefault(where, {}).setdefault(side, set()).add(average_of(r))
    return [f"{suite}/{task} seed {seed} {metric} ({aggregation}): A over "
            f"{' or '.join(describe(o) for o in sorted(by['A']))}, B over {' or '.join(describe(o) for o in sorted(by['B']))}"
            for (suite, task, seed, metric, aggregation), by in sorted(overs.items(), key=str)
            if len(by) == 2 and by["A"] != by["B"]]

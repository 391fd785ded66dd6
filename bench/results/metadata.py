"""Plug-in metadata exported beside the results: ``<results>/plugins.json``.

Each run merges in the self-description of the suites it ran (labels, typed options, tasks with their
labels, versions, extra labels such as attack recipes'), the models it evaluated (backbone, base,
method, recipe, pooler, family, source, display order) and the package versions; ``bench report`` sets
the built-in models' display order to the registry's before it renders. Reports read
labels and model facts from this file only, so reports/ never imports the registry, suites or
attacks, and a results directory carries what is needed to render it.

The file is checked against ``PluginsFile`` when read. It is updated under an exclusive lock
(``.plugins.lock``) and written atomically, and it never shrinks: entries are replaced by name,
never removed, so a run that knows fewer models or suites than the file merges into it. A file
that does not parse or breaks the schema is named in a warning and read as empty; the next update
moves it to ``quarantine/`` first and says that the new file starts afresh.
"""

from __future__ import annotations

import json
import os
import warnings
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, StrictStr, ValidationError

from bench.errors import BenchWarning
from bench.io import atomic_write_text, read_json

FILE = "plugins.json"
LOCK = ".plugins.lock"


class PluginsFile(BaseModel):
    """What ``plugins.json`` must hold: each suite and model entry a table under its name."""

    model_config = ConfigDict(extra="allow")  # keys a newer bench adds are kept, not refused

    bench_version: StrictStr = ""
    package_versions: dict[str, StrictStr] = {}
    suites: dict[str, dict[str, Any]] = {}
    models: dict[str, dict[str, Any]] = {}


class MetadataWarning(BenchWarning):
    """plugins.json is unreadable: reports lack the labels and model facts it held."""


def _load(results_dir: Path) -> tuple[dict, str | None]:
    """(the results' plugins.json, None), ({}, None) when absent, or ({}, what is wrong with it)."""
    path = Path(results_dir) / FILE
    if not path.exists():
        return {}, None
    data, wrong = read_json(path)
    if wrong:
        return {}, wrong
    try:
        PluginsFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = " ".join(str(part) for part in first["loc"]) or "the file"
        return {}, f"breaks its schema at {where}: {first['msg']}"
    return data, None


def read(results_dir: Path) -> dict:
    """The results' plugins.json, checked; {} when it is absent, or when it is invalid (then a
    MetadataWarning names the file, what is wrong and the fix)."""
    data, wrong = _load(results_dir)
    if wrong:
        warnings.warn(f"{Path(results_dir) / FILE} {wrong}: its labels and model facts are left out. Fix: restore "
                      f"it (e.g. `git checkout -- {FILE}` in a checkout), or re-run `bench run` for each model "
                      f"(finished cells are reused) to export them again.", MetadataWarning, stacklevel=2)
    return data


@contextmanager
def _locked(results_dir: Path):
    """An exclusive flock on ``.plugins.lock``: two runs merging at once never drop each other's entries."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock; single-writer use only
        yield
        return
    Path(results_dir).mkdir(parents=True, exist_ok=True)
    with open(Path(results_dir) / LOCK, "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _quarantine(results_dir: Path, wrong: str) -> None:
    from bench.results.store import QUARANTINE_DIR

    path = Path(results_dir) / FILE
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    target = Path(results_dir) / QUARANTINE_DIR / f"{FILE}.{stamp}"
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, target)
    warnings.warn(f"{path} {wrong}: moved it to {target}; the new {FILE} holds only this run's suites and models. "
                  f"Fix: re-run `bench run` for the other models (finished cells are reused) to export theirs "
                  f"again, or merge the entries back from {target}.", MetadataWarning, stacklevel=3)


def update(results_dir: Path, change: Callable[[dict], None]) -> Path:
    """Read plugins.json (an invalid one is quarantined), ``change`` it in place, and write it back
    atomically, all under the lock. Entries are merged: none that was there before is dropped."""
    path = Path(results_dir) / FILE
    with _locked(results_dir):
        data, wrong = _load(results_dir)
        if wrong:
            _quarantine(results_dir, wrong)
        before = {key: dict(data.get(key) or {}) for key in ("suites", "models")}
        change(data)
        for key, entries in before.items():
            data[key] = dict(sorted({**entries, **(data.get(key) or {})}.items()))
        PluginsFile.model_validate(data)  # never write a file the next reader would refuse
        atomic_write_text(path, json.dumps(data, indent=1, sort_keys=False, default=str) + "\n")
    return path


# What a trained model's card lends to the results: its training budget and the dev curve (reports draw it).
TRAINING_FIELDS = ("method", "profile", "steps", "epochs_seen", "wall_s", "amp", "device", "stsb_dev_before", "best",
                   "dev_history", "final_loss", "git_commit", "open_choices", "method_config", "method_version",
                   "overrides", "base_weights_sha256", "base_encoder_sha256", "cpu", "threads")


def training_entry(spec, models_dir: Path | None) -> dict:
    """The card facts of a trained model's checkpoint, or {} (not trained here, or no card)."""
    if models_dir is None or not spec.method:
        return {}
    path = Path(models_dir) / spec.name / "bench_card.json"
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    entry = {k: card[k] for k in TRAINING_FIELDS if k in card}
    train_config = card.get("train_config") or {}
    entry["batch_size"] = train_config.get("batch_size")
    entry["seed"] = train_config.get("seed")
    return entry


def export(results_dir: Path, *, suites=(), models=(), known: dict | None = None,
           models_dir: Path | None = None) -> Path:
    """Merge ``suites`` and ``models`` (ModelSpecs; with ``models_dir``, the training facts of their cards) into
    ``plugins.json``: each describes itself (``describe()``), so this module imports neither suites nor the
    registry, and reports can read the file through it."""
    from bench.version import __version__
    from bench.results.store import package_versions

    def merge(data: dict) -> None:
        data["bench_version"] = __version__
        data["package_versions"] = json.loads(package_versions())
        for suite in suites:
            data.setdefault("suites", {})[suite.name] = suite.describe()
        for spec in models:
            entry = spec.describe(known)
            # a model run again where its checkpoint's card is not at hand keeps the training facts exported before
            training = (training_entry(spec, models_dir)
                        or (data.get("models", {}).get(spec.name) or {}).get("training"))
            if training:
                entry["training"] = training
            data.setdefault("models", {})[spec.name] = entry

    return update(results_dir, merge)


def refresh_order(results_dir: Path, order: dict[str, int]) -> None:
    """Give the built-in models already in plugins.json today's display order (``order``: name -> position in
    the registry). Each run stamps the order of its own day, so a model registered since would leave the
    entries of earlier runs out of step with the later ones; nothing is added and nothing else changes. A missing
    or damaged file is left as it is (the report names a damaged one; a run quarantines it)."""
    if not (Path(results_dir) / FILE).is_file() or _load(results_dir)[1]:
        return

    def reorder(data: dict) -> None:
        for name, entry in (data.get("models") or {}).items():
            if entry.get("builtin") and name in order:
                entry["order"] = order[name]

    update(results_dir, reorder)

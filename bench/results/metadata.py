"""Plug-in metadata exported beside the results: ``<results>/plugins.json``.

Each run merges in the self-description of the suites it ran (labels, typed options, tasks with their
labels, versions, extra labels such as attack recipes'), the models it evaluated (backbone, base,
method, recipe, pooler, family, source, display order) and the package versions. Reports read
labels and model facts from this file only, so reports/ never imports the registry, suites or
attacks, and a results directory carries what is needed to render it. Written atomically; entries
are replaced by name, never removed.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.data.datasets import atomic_write_text

FILE = "plugins.json"


def read(results_dir: Path) -> dict:
    path = Path(results_dir) / FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


# What a trained model's card lends to the results: its training budget and the dev curve (reports draw it).
TRAINING_FIELDS = ("method", "profile", "steps", "epochs_seen", "wall_s", "amp", "device", "stsb_dev_before", "best",
                   "dev_history", "final_loss", "git_commit", "open_choices", "method_config", "method_version",
                   "overrides", "base_weights_sha256")


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

    data = read(results_dir)
    data["bench_version"] = __version__
    data["package_versions"] = json.loads(package_versions())
    for suite in suites:
        data.setdefault("suites", {})[suite.name] = suite.describe()
    for spec in models:
        entry = spec.describe(known)
        # a model run again where its checkpoint's card is not at hand keeps the training facts exported before
        training = training_entry(spec, models_dir) or (data.get("models", {}).get(spec.name) or {}).get("training")
        if training:
            entry["training"] = training
        data.setdefault("models", {})[spec.name] = entry
    data["suites"] = dict(sorted(data.get("suites", {}).items()))
    data["models"] = dict(sorted(data.get("models", {}).items()))
    path = Path(results_dir) / FILE
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=False, default=str) + "\n")
    return path

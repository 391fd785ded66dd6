"""The result store: one JSON file per cell, written atomically; leaderboard.csv derived from them.

A cell is (model, weights sha256, suite, task, seed, config hash). The config hash covers the
options that change a number (limit, mode, recipe, profile, ...), so runs with different settings
sit side by side, each row carrying its configuration.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import math
import os
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from bench import __version__
from bench.data import atomic_write_text
from bench.paths import REPO_ROOT

PACKAGES = ("torch", "transformers", "sentence-transformers", "numpy", "scipy", "scikit-learn",
            "textattack", "nltk")


@dataclass
class Result:
    """One number with its provenance. Correlations and accuracies are x100, as in the papers."""

    model: str
    suite: str
    task: str
    split: str
    metric: str
    aggregation: str
    value: float | None
    attack: str = ""  # attack recipe for adversarial/AdvSTS rows, else ""
    n: int | None = None
    seed: int | None = None
    paper_value: float | None = None
    paper_source: str = ""  # which paper and table paper_value is from (reports/paper_values.csv)
    std: float | None = None  # over seeds or runs, where the row is a mean
    ci_low: float | None = None  # 95% interval, same scale as value (bench/stats.py)
    ci_high: float | None = None
    ci_method: str = ""  # how the interval was made, e.g. "bootstrap(B=1000,seed=0)", "wilson", "t-over-3-runs"
    pooler: str = ""
    weights_sha256: str = ""
    model_source: str = ""  # where the weights came from: backbone id@revision, directory, models file entry
    batch_size: int | None = None
    dtype: str = ""
    device: str = ""
    method: str = ""
    profile: str = ""
    config_hash: str = ""
    config: str = ""  # JSON of the options that produced the number (incl. attack parameters)
    resources: str = ""  # JSON: which resource served each role (attacks), or ""
    package_versions: str = ""
    bench_version: str = __version__
    git_commit: str = ""
    created_at: str = ""
    wall_s: float | None = None
    # Per-example data behind the interval (bench.stats.Evidence), handed from the suite to the base
    # suite; stored in the cell's evidence sidecar, never in the row itself.
    evidence: object = field(default=None, repr=False, compare=False, metadata={"stored": False})


COLUMNS = [f.name for f in fields(Result) if f.metadata.get("stored", True)]
NUMBER_FIELDS = ("value", "paper_value", "std", "ci_low", "ci_high", "wall_s")
EVIDENCE_SUFFIX = ".evidence.json.gz"


def row_dict(row: Result) -> dict:
    """The stored fields of a row (the evidence goes to the sidecar)."""
    return {name: getattr(row, name) for name in COLUMNS}


@dataclass(frozen=True)
class CellKey:
    model: str
    weights_sha256: str
    suite: str
    task: str
    seed: int
    config_hash: str

    def relpath(self) -> Path:
        return (Path("cells") / model_dir(self.model) / self.suite / self.task /
                f"seed{self.seed}-{self.weights_sha256[:12]}-{self.config_hash[:8]}.json")

    def glob_any_config(self) -> str:
        return str(Path("cells") / model_dir(self.model) / self.suite / self.task /
                   f"seed{self.seed}-{self.weights_sha256[:12]}-*.json")


def model_dir(model: str) -> str:
    """A model name as one directory name: a Hub id's slash becomes "--" (``org/name`` -> ``org--name``)."""
    return model.replace("/", "--").replace("\\", "--")


def config_hash(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


@lru_cache(maxsize=1)
def git_commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                             text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"{sha}-dirty" if sha and dirty else sha


@lru_cache(maxsize=1)
def package_versions() -> str:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return json.dumps(versions, sort_keys=True)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def clean_number(value):
    """Floats stay floats; NaN/inf and None become None (an empty CSV field, never 'nan')."""
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int):
        return value
    value = float(value)
    return value if math.isfinite(value) else None


def _atomic_write_bytes(path: Path, blob: bytes) -> None:
    """Temporary file in the same directory, fsync, rename (as bench.data.atomic_write_text)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ResultStore:
    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, key: CellKey) -> Path:
        return self.root / key.relpath()

    def existing(self, key: CellKey, any_config: bool = False) -> Path | None:
        if any_config:
            hits = sorted(self.root.glob(key.glob_any_config()))
            return hits[0] if hits else None
        path = self.path(key)
        return path if path.exists() else None

    def write(self, key: CellKey, rows: list[Result], config: dict, extra: dict | None = None,
              evidence: dict | None = None) -> Path:
        for row in rows:
            for f in NUMBER_FIELDS:
                setattr(row, f, None if getattr(row, f) is None else clean_number(getattr(row, f)))
        payload = {"cell": asdict(key), "config": config, "written_at": now_iso(),
                   "results": [row_dict(r) for r in rows], **(extra or {})}
        path = self.path(key)
        # The sidecar first: a cell on disk never points at evidence from an older computation.
        self.write_evidence(path, evidence)
        atomic_write_text(path, json.dumps(payload, indent=1, sort_keys=False) + "\n")
        return path

    # ---- evidence sidecars: what a paired test needs, beside the cell (gzip'd JSON) ----
    @staticmethod
    def evidence_path(cell_path: Path) -> Path:
        cell_path = Path(cell_path)
        return cell_path.with_name(cell_path.stem + EVIDENCE_SUFFIX)

    def write_evidence(self, cell_path: Path, evidence: dict | None) -> None:
        """Atomically write (or, for ``None``, remove) the cell's evidence sidecar."""
        side = self.evidence_path(cell_path)
        if evidence is None:
            side.unlink(missing_ok=True)
            return
        blob = gzip.compress(json.dumps(evidence, separators=(",", ":"), sort_keys=True).encode("utf-8"), mtime=0)
        _atomic_write_bytes(side, blob)

    def read_evidence(self, cell_path: Path) -> dict | None:
        """The cell's evidence sidecar, or None when there is none (or it is unreadable)."""
        side = self.evidence_path(cell_path)
        if not side.exists():
            return None
        try:
            return json.loads(gzip.decompress(side.read_bytes()).decode("utf-8"))
        except (OSError, EOFError, ValueError):
            return None

    @staticmethod
    def read(path: Path) -> dict:
        return json.loads(Path(path).read_text(encoding="utf-8"))

    def cells(self) -> list[Path]:
        return sorted((self.root / "cells").glob("**/*.json"))

    def rows(self) -> list[dict]:
        out = []
        for path in self.cells():
            out.extend(self.read(path)["results"])
        return out

    def write_leaderboard(self, name: str = "leaderboard.csv", rows: list[dict] | None = None) -> Path:
        rows = self.rows() if rows is None else rows
        rows = sorted(rows, key=lambda r: (r["model"], r["suite"], r["task"], r["metric"],
                                           r["aggregation"], r.get("attack", ""), r.get("seed") or 0, r.get("created_at", "")))
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if row.get(k) is None else row.get(k) for k in COLUMNS})
        path = self.root / name
        atomic_write_text(path, buf.getvalue())
        return path


class Timer:
    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start
        return False

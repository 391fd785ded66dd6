"""The result store: one JSON file per cell, written atomically; leaderboard.csv (one row per result, its
sorting fields and the path of its cell) derived from them.

A cell is (model, weights sha256, suite, task, seed, config hash). The config hash covers the
options that change a number (limit, mode, recipe, profile, data fingerprint, ...), so runs with
different settings sit side by side, each row carrying its configuration.

Faults it survives: a cell file that does not parse is named in a warning, skipped by readers and,
when its cell is looked up for a run, moved to ``quarantine/`` and recomputed (so is a cell whose
evidence sidecar is missing or differs from the sha256 the cell records); ``check_writable``
fails before any work on a read-only or full results directory; files get the umask's permissions
(``bench.io.atomic_write_text``); the leaderboard is rebuilt under an exclusive ``flock`` on
``.leaderboard.lock``, so concurrent writers (a grid on a shared filesystem) never drop a cell.
Evidence sidecars are hashed on their stored bytes before they are decompressed (and never inflated past
``EVIDENCE_LIMIT``); a cell records the sha256 of the attack logs it was computed from (``LOGS``), and a
cell whose log was edited since is not reused (``BadLog``, exit 2).
"""

from __future__ import annotations

import csv
import fnmatch
import gzip
import hashlib
import io
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
import zlib
from contextlib import contextmanager
from dataclasses import asdict, astuple, dataclass, field, fields
from datetime import datetime, timezone
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from bench.version import __version__
from bench.results.cell_schema import CellError, validate_cell
from bench.io import atomic_write_bytes, atomic_write_text
from bench.errors import BenchError, BenchWarning
from bench.paths import REPO_ROOT, file_name

QUARANTINE_DIR = "quarantine"  # unreadable cell files are moved here (same relative path + a time stamp)
LOCK_FILE = ".leaderboard.lock"
MIN_FREE_BYTES = 16 << 20  # below this, a run would likely fail on its last write: refuse up front

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
    ci_low: float | None = None  # 95% interval, same scale as value (bench/scoring/stats.py)
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
    # Per-example data behind the interval (bench.scoring.stats.Evidence), handed from the suite to the base
    # suite; stored in the cell's evidence sidecar, never in the row itself.
    evidence: object = field(default=None, repr=False, compare=False, metadata={"stored": False})
    # The files the number was computed from (attack logs), whose sha256 the cell records (``LOGS``).
    logs: object = field(default=None, repr=False, compare=False, metadata={"stored": False})


STORED_FIELDS = [f.name for f in fields(Result) if f.metadata.get("stored", True)]
NUMBER_FIELDS = ("value", "paper_value", "std", "ci_low", "ci_high", "wall_s")
EVIDENCE_SUFFIX = ".evidence.json.gz"
# In a cell: the sha256 of its evidence sidecar's bytes; null: the cell has no sidecar; absent: a cell
# written before the field (its sidecar is only checked to parse; backfill_evidence_hashes records it).
EVIDENCE_HASH = "evidence_sha256"


# In a cell: [{"path", "bytes", "sha256"}] of each attack log its rows were computed from (path relative to the
# results directory; sha256 of the log's first ``bytes`` bytes, since a log only grows: a later run of the same
# attack setting with a larger --limit appends). Absent: a cell written before cells recorded it (not checked).
LOGS = "attack_logs"


def log_record(path: Path, root: Path) -> dict:
    """What a cell records of a log it was computed from: its path (relative to ``root``), size and sha256."""
    path = Path(path)
    blob = path.read_bytes()
    rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
    return {"path": rel, "bytes": len(blob), "sha256": hashlib.sha256(blob).hexdigest()}


def log_bytes_problem(raw: bytes, record: dict) -> str | None:
    """``log_problem`` of a log's bytes already read (hashed before anything parses them)."""
    if len(raw) < record["bytes"]:
        return f"is {len(raw)} bytes long, shorter than the {record['bytes']} it recorded"
    digest = hashlib.sha256(raw[:record["bytes"]]).hexdigest()
    if digest != record["sha256"]:
        return (f"was edited (sha256 of its first {record['bytes']} bytes {digest[:12]}…, the cell recorded "
                f"{record['sha256'][:12]}…)")
    return None


def log_problem(path: Path, record: dict) -> str | None:
    """None when the log at ``path`` begins with the bytes ``record`` hashed (or is gone: a deleted log is
    not checked), else what is wrong. Only the recorded prefix is read and hashed; nothing is parsed."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(record["bytes"])
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return log_bytes_problem(raw, record)


class BadLog(BenchError):
    """An attack log that differs from what a cell computed from it recorded: the cell is not reused."""

    def __init__(self, cell_path: Path, log_path: Path, problem: str):
        self.cell_path, self.log_path, self.problem = Path(cell_path), Path(log_path), problem
        super().__init__(f"Attack log {log_path} {problem}, after result cell {cell_path} was computed from it, so "
                         f"neither is trusted. Fix: restore the log (e.g. from a backup or `git checkout`), or "
                         f"re-run the `bench run` that made the cell with --overwrite always (the log starts "
                         f"afresh and its attacks are recomputed).")


def row_dict(row: Result) -> dict:
    """The stored fields of a row (the evidence goes to the sidecar)."""
    return {name: getattr(row, name) for name in STORED_FIELDS}


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
    """A model name as one directory name (``bench.paths.file_name``: ``org/name`` -> ``org--name``)."""
    return file_name(model, "model name")


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


@lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's model name (Linux), else the platform's processor string: which machine a model was trained
    on, since trained weights and base builds differ in their last bits between CPUs."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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


def check_writable(directory: Path, what: str, env_var: str, min_free_bytes: int = MIN_FREE_BYTES) -> None:
    """Create ``directory`` if needed, write and delete a 4 KiB probe, and check the free space; a BenchError
    naming the directory, ``env_var`` and the fix otherwise, so a read-only or full disk never wastes a
    long run at its last write."""
    directory = Path(directory)
    fix = f"or point {env_var} at another directory. Nothing was computed."
    blocking = next((p for p in (directory, *directory.parents) if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise BenchError(f"The {what} {directory} cannot be created: {blocking} is a file, not a directory. "
                         f"Fix: move that file away, {fix}")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=directory, prefix=".write-check-")
        try:
            os.write(fd, b"\0" * 4096)
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        raise BenchError(f"The {what} {directory} cannot be written ({exc.strerror or exc}). "
                         f"Fix: make it writable or free space there, {fix}") from None
    free = shutil.disk_usage(directory).free
    if free < min_free_bytes:
        raise BenchError(f"The {what} {directory} has {free / 2**20:.1f} MiB free, less than the "
                         f"{min_free_bytes / 2**20:.0f} MiB a run needs to write safely. "
                         f"Fix: free space there, {fix}")


class CorruptCell(BenchError):
    """A cell file that does not parse (truncated, empty, not a cell)."""

    state = "was unreadable"

    def __init__(self, path: Path, reason: str):
        self.path, self.reason = Path(path), reason
        super().__init__(self.explain())

    def explain(self) -> str:
        return (f"Result cell {self.path} is unreadable ({self.reason}). Fix: re-run the `bench run` that made it "
                f"(the file is moved to {QUARANTINE_DIR}/ and the cell recomputed), or delete the file.")


def _parse_cell(path: Path) -> dict:
    """A cell's payload, checked against the one cell schema (``bench.results.cell_schema``); CorruptCell otherwise."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
        payload = json.loads(text)
    except IsADirectoryError:
        raise CorruptCell(path, "a directory, not a cell file") from None
    except FileNotFoundError:
        raise CorruptCell(path, "a dangling link or a file that vanished") from None
    except OSError as exc:
        raise CorruptCell(path, f"cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise CorruptCell(path, f"not UTF-8: {exc.reason}") from None
    except json.JSONDecodeError as exc:
        raise CorruptCell(path, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise CorruptCell(path, "nested too deeply to be a cell") from None
    try:
        validate_cell(payload)
    except CellError as exc:
        raise CorruptCell(path, f"not a valid cell: {exc}") from None
    return payload


class BadEvidence(CorruptCell):
    """A readable cell whose evidence sidecar is missing, altered (sha256 differs) or does not parse."""

    state = "had bad evidence"

    def explain(self) -> str:
        return (f"Result cell {self.path}: {self.reason}, so its intervals and paired tests are left out. Fix: "
                f"re-run the `bench run` that made it (it moves the cell and its evidence to {QUARANTINE_DIR}/ "
                f"and recomputes them).")


class BadValue(CorruptCell):
    """A readable cell whose stored value differs from what its own evidence recomputes (an edited number)."""

    state = "did not recompute from its evidence"

    def explain(self) -> str:
        return (f"Result cell {self.path}: {self.reason}, so it is not trusted. Fix: re-run the `bench run` that "
                f"made it (it moves the cell to {QUARANTINE_DIR}/ and recomputes it).")


# A stored value and its evidence's recomputation may differ in rounding (SentEval's two decimals, float32
# predictions): relative to max(1, |value|), the published cells differ by at most 2.4e-4.
VALUE_TOLERANCE = 1e-3
ROW_KEY = ("metric", "aggregation", "attack", "split")  # what names a row within its cell


def recomputed_values(evidence: dict | None) -> dict[tuple, float | None]:
    """Row key (``ROW_KEY``) -> the value a sidecar's own evidence recomputes; rows whose evidence lies in
    other cells (an average's parts) are left out."""
    from bench.scoring.stats import EVIDENCE_FORMAT, evidence_from_dict, sample_from_dict

    if not evidence or evidence.get("format") != EVIDENCE_FORMAT:
        return {}
    samples = {name: sample_from_dict(d) for name, d in (evidence.get("samples") or {}).items()}
    out = {}
    for entry in evidence.get("rows") or ():
        ev = evidence_from_dict(entry["evidence"], samples)  # a part stored in another cell: None
        if ev is not None:
            out[tuple(entry["key"].get(k) or "" for k in ROW_KEY)] = ev.point()
    return out


class DuplicateCell(CorruptCell):
    """A second cell file claiming the key of another (a copy, a hand edit): one of them is kept."""

    state = "duplicated another"


# Which of several files claiming one key is kept: the one whose evidence matches the sha256 it records, then
# the newest (written_at, then the file's modification time).
KEEP_RULE = "the one whose evidence matches its recorded sha256, then the newest"


def cell_key_of(payload: dict) -> tuple:
    """The key a (valid) cell payload claims, as a tuple in CellKey's field order."""
    return astuple(CellKey(**payload["cell"]))


class EvidenceWarning(BenchWarning):
    """A cell's evidence sidecar is missing or corrupt: its rows are used without evidence."""


class SkippedCellWarning(BenchWarning):
    """A cell file was skipped (unreadable, or a duplicate of a key another file holds): its rows are not read."""


def file_identity(path: Path) -> tuple:
    """What tells one version of a file from another within a process (() when it does not exist)."""
    try:
        st = Path(path).stat()
    except OSError:
        return ()
    return (st.st_ino, st.st_size, st.st_mtime_ns)


# The most an evidence sidecar may decompress to (the largest real one is under 1 MiB): a sidecar beyond it
# is refused as damage rather than inflated into memory.
EVIDENCE_LIMIT = 256 << 20


def _decode_evidence(blob: bytes, limit: int | None = None) -> dict:
    """A sidecar's payload, decompressed at most to ``limit`` bytes (default ``EVIDENCE_LIMIT``)."""
    limit = EVIDENCE_LIMIT if limit is None else limit
    inflate = zlib.decompressobj(wbits=31)  # gzip framing
    raw = inflate.decompress(blob, limit + 1)
    if len(raw) > limit:
        raise ValueError(f"it decompresses to more than {limit >> 20} MiB")
    if not inflate.eof:
        raise EOFError("compressed file ended before the end-of-stream marker was reached")
    payload = json.loads(raw.decode("utf-8"))
    if not isinstance(payload, dict):
        raise ValueError("not an evidence object")
    return payload


class ResultStore:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.skipped: list[CorruptCell] = []  # unreadable cells that rows() passed over
        self.bad_evidence: dict[str, BadEvidence] = {}  # cells whose sidecar read_evidence refused
        # read_evidence's decoded sidecars, by the two files' identity: a report reads each cell's several
        # times (tables, cards, the ledger), and a rewritten file (a new inode, size or mtime) misses
        self._evidence_read: dict[str, tuple[tuple, dict | None]] = {}
        # bench.results.uncertainty.stored_evidence's answers, with the identities of the files they came from
        self.evidence_objects: dict[str, tuple[dict, dict]] = {}

    def path(self, key: CellKey) -> Path:
        return self.root / key.relpath()

    def existing(self, key: CellKey, any_config: bool = False) -> Path | None:
        """The stored, readable cell for ``key`` (any configuration: the first in name order). An unreadable
        file found here is quarantined, so the caller recomputes the cell; so is a second file claiming the
        same key (``choose``: the one kept is the one a reader reads)."""
        claims: dict[tuple, list[tuple[Path, dict]]] = {}
        wanted = Path(key.glob_any_config()).name if any_config else self.path(key).name
        for path in sorted(self.path(key).parent.glob("*.json")):
            try:
                payload = _parse_cell(path)
            except CorruptCell as exc:
                if fnmatch.fnmatch(path.name, wanted):  # an unreadable file where this cell would be
                    self.quarantine(exc)
                continue
            claimed = cell_key_of(payload)
            if claimed == astuple(key) or any_config and claimed[:5] == astuple(key)[:5]:
                claims.setdefault(claimed, []).append((path, payload))
        for claimed in sorted(claims, key=lambda c: min(p.name for p, _ in claims[c])):
            kept, others = self.choose(claims[claimed])
            for path, _ in others:
                self.quarantine(DuplicateCell(path, f"claims the key of {kept}, which is kept ({KEEP_RULE})"))
            try:
                self.check_value(kept, dict(claims[claimed])[kept])
            except CorruptCell as exc:  # BadEvidence, BadValue: a cell is reused only with its evidence intact
                self.quarantine(exc)
                continue
            self.check_logs(kept, dict(claims[claimed])[kept])  # BadLog (exit 2): the user decides
            return kept
        return None

    def check_logs(self, cell_path: Path, payload: dict) -> None:
        """BadLog when an attack log the cell recorded (``LOGS``) no longer begins with the recorded bytes."""
        for record in payload.get(LOGS) or ():
            log_path = self.root / record["path"]
            problem = log_problem(log_path, record)
            if problem:
                raise BadLog(cell_path, log_path, problem)

    def recorded_logs(self, model: str | None = None) -> dict[str, tuple[Path, dict]]:
        """Every attack log the readable cells of ``model`` (default: of every model) record: its resolved
        path -> (the cell, the record)."""
        out = {}
        for cell_path, payload in (self.cells_of(model) if model else self.readable_cells()):
            for record in payload.get(LOGS) or ():
                out[str((self.root / record["path"]).resolve())] = (cell_path, record)
        return out

    def choose(self, claims: list[tuple[Path, dict]]) -> tuple[Path, list[tuple[Path, dict]]]:
        """Of several files claiming one key, the one to keep (``KEEP_RULE``) and the others."""
        def rank(claim):
            path, payload = claim
            try:
                self.check_value(path, payload)  # its evidence intact, and its values recompute from it
                intact = 1
            except CorruptCell:
                intact = 0
            return intact, payload.get("written_at") or "", file_identity(path)[2:] or (0,), str(path)

        ordered = sorted(claims, key=rank, reverse=True)
        return ordered[0][0], ordered[1:]

    def quarantine(self, bad: CorruptCell) -> Path:
        """Move an unreadable cell file aside (never delete it: it may help explain a fault)."""
        rel = bad.path.relative_to(self.root) if bad.path.is_relative_to(self.root) else Path(bad.path.name)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        target = self.root / QUARANTINE_DIR / rel.parent / f"{rel.name}.{stamp}"
        target.parent.mkdir(parents=True, exist_ok=True)
        side = self.evidence_path(bad.path)
        if side.exists():  # the sidecar goes with its cell
            os.replace(side, target.with_name(f"{side.name}.{stamp}"))
        os.replace(bad.path, target)
        warnings.warn(f"Result cell {bad.path} {bad.state} ({bad.reason}): moved it to {target}; "
                      f"{'the kept one is used' if isinstance(bad, DuplicateCell) else 'the cell is recomputed'}.",
                      BenchWarning, stacklevel=2)
        return target

    def write(self, key: CellKey, rows: list[Result], config: dict, extra: dict | None = None,
              evidence: dict | None = None) -> Path:
        for row in rows:
            for f in NUMBER_FIELDS:
                setattr(row, f, None if getattr(row, f) is None else clean_number(getattr(row, f)))
        payload = {"cell": asdict(key), "config": config, "written_at": now_iso(),
                   "results": [row_dict(r) for r in rows], **(extra or {})}
        path = self.path(key)
        try:  # the schema every reader checks: a cell that would be refused on reading is never written
            validate_cell({**payload, EVIDENCE_HASH: None})
        except CellError as exc:
            raise BenchError(f"Refusing to write result cell {path}: {exc}. This is a fault in the suite "
                             f"'{key.suite}' (its rows must pass bench/results/cell_schema.py); nothing was written.") from None
        logs = sorted({str(p) for r in rows for p in (r.logs or ())})
        if logs:
            payload[LOGS] = [log_record(Path(p), self.root) for p in logs]
        # The sidecar first: a cell on disk never points at evidence from an older computation.
        payload[EVIDENCE_HASH] = self.write_evidence(path, evidence)
        atomic_write_text(path, json.dumps(payload, indent=1, sort_keys=False) + "\n")
        return path

    # ---- evidence sidecars: what a paired test needs, beside the cell (gzip'd JSON) ----
    @staticmethod
    def evidence_path(cell_path: Path) -> Path:
        cell_path = Path(cell_path)
        return cell_path.with_name(cell_path.stem + EVIDENCE_SUFFIX)

    def write_evidence(self, cell_path: Path, evidence: dict | None) -> str | None:
        """Atomically write (or, for ``None``, remove) the cell's evidence sidecar; its sha256 (None: none)."""
        side = self.evidence_path(cell_path)
        if evidence is None:
            side.unlink(missing_ok=True)
            return None
        blob = gzip.compress(json.dumps(evidence, separators=(",", ":"), sort_keys=True).encode("utf-8"), mtime=0)
        atomic_write_bytes(side, blob)
        return hashlib.sha256(blob).hexdigest()

    def check_evidence(self, cell_path: Path, payload: dict | None = None, decode: bool = True) -> dict | None:
        """The cell's evidence, checked like data: None when the cell has none; BadEvidence when its sidecar
        is missing or altered (sha256 differs from the one the cell recorded) or does not parse. A cell
        without a recorded sha256 (written before cells recorded it) only has its sidecar parsed.
        ``decode=False``: only check (a sidecar matching its recorded sha256 is not decoded; returns None)."""
        payload = _parse_cell(cell_path) if payload is None else payload
        side = self.evidence_path(cell_path)
        recorded = payload.get(EVIDENCE_HASH, "")
        if recorded is None:
            return None
        try:
            blob = side.read_bytes()
        except FileNotFoundError:
            if not recorded:
                return None
            raise BadEvidence(cell_path, f"its evidence file {side.name} is missing") from None
        except OSError as exc:
            raise BadEvidence(cell_path, f"its evidence file {side.name} cannot be read ({exc.strerror})") from None
        # The stored bytes are hashed before anything decompresses or parses them: an altered file (a
        # gzip bomb included) is refused without being inflated.
        digest = hashlib.sha256(blob).hexdigest()
        if recorded and digest != recorded:
            raise BadEvidence(cell_path, f"its evidence file {side.name} was altered or truncated (sha256 "
                                         f"{digest[:12]}…, the cell recorded {str(recorded)[:12]}…)")
        if not decode and recorded:  # the bytes written, which parsed then
            return None
        try:
            return _decode_evidence(blob)
        except (OSError, EOFError, ValueError, zlib.error) as exc:
            raise BadEvidence(cell_path, f"its evidence file {side.name} does not parse ({exc})") from None

    def check_value(self, cell_path: Path, payload: dict | None = None) -> dict | None:
        """``check_evidence``, then each row's value against what its evidence recomputes (within
        ``VALUE_TOLERANCE``): BadValue naming both values when a row differs. Returns the evidence."""
        payload = _parse_cell(cell_path) if payload is None else payload
        evidence = self.check_evidence(cell_path, payload)
        points = recomputed_values(evidence)
        for row in payload["results"]:
            key = tuple(row.get(k) or "" for k in ROW_KEY)
            stored, again = row.get("value"), points.get(key)
            if stored is None or again is None:
                continue
            if abs(stored - again) > VALUE_TOLERANCE * max(1.0, abs(stored)):
                raise BadValue(cell_path, f"its {row['metric']} ({row['aggregation']}) is {stored:g}, but its "
                                          f"evidence recomputes {again:g}")
        return evidence

    def read_evidence(self, cell_path: Path) -> dict | None:
        """The cell's evidence sidecar, or None when there is none. A missing or corrupt one (see
        ``check_evidence``) is None too, named in an EvidenceWarning once and kept in ``bad_evidence``,
        so readers (compare, reports) can say which cells lack it. Returned dicts are shared between
        callers: read them, do not change them."""
        identity = file_identity(cell_path) + file_identity(self.evidence_path(cell_path))
        known = self._evidence_read.get(str(cell_path))
        if known is not None and known[0] == identity:
            return known[1]
        try:
            evidence = self.check_evidence(cell_path)
            self._evidence_read[str(cell_path)] = (identity, evidence)
            return evidence
        except BadEvidence as exc:
            if str(exc.path) not in self.bad_evidence:
                self.bad_evidence[str(exc.path)] = exc
                warnings.warn(str(exc), EvidenceWarning, stacklevel=2)
            return None
        except CorruptCell:  # an unreadable cell: its readers skip it and say so
            return None

    @staticmethod
    def read(path: Path) -> dict:
        """A cell's payload; CorruptCell (a BenchError naming the file and the fix) if it does not parse."""
        return _parse_cell(path)

    def cells(self) -> list[Path]:
        # cells/<model>/<suite>/<task>/<file>.json: a model directory whose name ends in .json is no cell
        return sorted((self.root / "cells").glob("*/*/*/*.json"))

    def readable_cells(self, cells: list[Path] | None = None):
        """(path, payload) of every readable cell (of ``cells``, default all). Unreadable cells are skipped, each
        named in a warning and listed in ``self.skipped``; of two files claiming one key only the one
        ``choose`` keeps is read (the other is named in a warning too). Nothing is moved (readers such as
        reports stay read-only)."""
        claims: dict[tuple, list[tuple[Path, dict]]] = {}
        for path in self.cells() if cells is None else cells:
            try:
                payload = _parse_cell(path)
            except CorruptCell as exc:
                self._skip(exc)
                continue
            claims.setdefault(cell_key_of(payload), []).append((path, payload))
        for claimed in claims.values():
            kept, others = self.choose(claimed) if len(claimed) > 1 else (claimed[0][0], [])
            for path, _ in others:
                self._skip(DuplicateCell(path, f"claims the key of {kept}, which is read instead ({KEEP_RULE})"))
            yield kept, next(payload for path, payload in claimed if path == kept)

    def cells_of(self, model: str, suite: str | None = None, task: str | None = None):
        """(path, payload) of one model's readable cells (of one suite and task), one per key, as
        ``readable_cells`` reads them."""
        root = self.root / "cells" / model_dir(model)
        found = sorted(root.glob(f"{suite or '*'}/{task or '*'}/*.json"))
        return [(p, c) for p, c in self.readable_cells(found) if c["cell"]["model"] == model]

    def _skip(self, exc: "CorruptCell") -> None:
        self.skipped.append(exc)
        what = "duplicate" if isinstance(exc, DuplicateCell) else "unreadable"
        warnings.warn(f"Skipped {what} result cell {exc.path} ({exc.reason}); its rows are "
                      f"{'not read' if what == 'duplicate' else 'missing'}. Re-run its `bench run` to "
                      f"{'move it to ' + QUARANTINE_DIR + '/' if what == 'duplicate' else 'recompute it'}.",
                      SkippedCellWarning, stacklevel=3)

    def rows(self) -> list[dict]:
        """Every row of every readable cell (see ``readable_cells``)."""
        return [row for _, payload in self.readable_cells() for row in payload["results"]]

    def load(self, path: Path) -> dict | None:
        """One cell's payload, or None for an unreadable one (named in a warning, as ``readable_cells`` does)."""
        try:
            return _parse_cell(path)
        except CorruptCell as exc:
            self._skip(exc)
            return None

    def evidence_problems(self) -> list[BadEvidence]:
        """Every readable cell whose evidence is missing, altered or unparsable (``check_evidence``)."""
        found = []
        for path in self.cells():
            try:
                self.check_evidence(path, decode=False)
            except BadEvidence as exc:
                found.append(exc)
            except CorruptCell:  # unreadable cells are named by the readers that skip them
                continue
        return found

    def check_writable(self, min_free_bytes: int = MIN_FREE_BYTES) -> None:
        """Before any work: the results directory takes a file and has room, else a BenchError (exit 2)."""
        check_writable(self.root, "results directory", "BENCH_RESULTS_DIR", min_free_bytes)

    @contextmanager
    def _leaderboard_lock(self):
        """An exclusive flock on ``.leaderboard.lock`` (NFS: Linux maps flock to POSIX locks)."""
        try:
            import fcntl
        except ImportError:  # Windows: no flock; single-writer use only
            yield
            return
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / LOCK_FILE, "a") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def leaderboard_rows(self) -> list[dict]:
        """Every row of every readable cell (``readable_cells``) with its cell's path relative to the results
        directory as ``cell``, which is where a leaderboard reader finds the row's full configuration."""
        return [{**row, "cell": path.relative_to(self.root).as_posix()}
                for path, payload in self.readable_cells() for row in payload["results"]]

    def write_leaderboard(self, name: str = "leaderboard.csv", suite: str | None = None) -> Path:
        """Rebuild ``name`` from the cells (of ``suite`` only, when given), under the leaderboard lock: reading
        the cells and replacing the file is one step for concurrent writers, so the last rebuild sees every
        cell written before it."""
        with self._leaderboard_lock():
            rows = [r for r in self.leaderboard_rows() if suite is None or r["suite"] == suite]
            path = self.root / name
            atomic_write_text(path, leaderboard_text(rows))
        return path


# The leaderboard: one row per result, with what a reader sorts and filters by and short provenance. The
# configuration, resources, package versions and device stay in the cell file a row names (``cell``), the
# source of truth; repeated in every row, they were most of the leaderboards' bytes.
LEADERBOARD_COLUMNS = ("model", "suite", "task", "split", "metric", "aggregation", "attack", "value", "ci_low",
                       "ci_high", "ci_method", "std", "n", "seed", "method", "profile", "weights_sha256",
                       "config_hash", "cell", "bench_version", "git_commit", "wall_s")
LEADERBOARD_ORDER = ("model", "suite", "task", "metric", "aggregation", "attack", "seed", "created_at", "split",
                     "cell")
COMMIT_DIGITS = 12  # of a git commit in a leaderboard row (the cell keeps all 40)
SHA_DIGITS = 12  # of a weights sha256 in a leaderboard row (the cell keeps all 64), as the cards print it
FLOAT_DIGITS = 10  # significant digits of a leaderboard number (the cell keeps the float's full 17)
NUMBER_COLUMNS = ("value", "ci_low", "ci_high", "std")
DIRTY = "-dirty"  # ``git_commit``'s mark of a checkout with uncommitted changes


def short_commit(commit: str) -> str:
    """``commit`` cut to COMMIT_DIGITS hex digits, keeping its ``-dirty`` mark."""
    sha = commit.removesuffix(DIRTY)
    return sha[:COMMIT_DIGITS] + commit[len(sha):]


def leaderboard_row(row: dict) -> dict:
    """A result row (with its ``cell``, see ``ResultStore.leaderboard_rows``) as the leaderboard writes it: its
    columns only, the commit and weights hash shortened, numbers to FLOAT_DIGITS significant digits, the wall
    time to 0.01 s, text a spreadsheet would run escaped."""
    wall = row.get("wall_s")
    short = {**row, "git_commit": short_commit(row.get("git_commit") or ""),
             "weights_sha256": (row.get("weights_sha256") or "")[:SHA_DIGITS],
             "wall_s": None if wall is None else round(wall, 2),
             **{k: _significant(row.get(k)) for k in NUMBER_COLUMNS}}
    return {k: csv_safe(short.get(k)) for k in LEADERBOARD_COLUMNS}


def _significant(value):
    """A number cut to FLOAT_DIGITS significant digits (what a reader of a CSV can use); anything else as it is."""
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.{FLOAT_DIGITS}g}")
    return value


def leaderboard_text(rows: list[dict]) -> str:
    """The leaderboard CSV of ``rows`` (each with its ``cell``), in a fixed order whatever order they come in."""
    ordered = sorted(rows, key=lambda r: tuple(_sort_value(r.get(k)) for k in LEADERBOARD_ORDER))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=LEADERBOARD_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(leaderboard_row(r) for r in ordered)
    return buf.getvalue()


def _sort_value(value) -> tuple:
    """A field as a sort key: missing first, then numbers, then text (a seed may be None, a name never is)."""
    if value is None or value == "":
        return (0, 0, "")
    return (1, value, "") if isinstance(value, (int, float)) else (2, 0, str(value))


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet read a CSV field as a formula


def csv_safe(value):
    """A CSV field: None is empty; text a spreadsheet would run as a formula (``=HYPERLINK(...)``, a model
    named ``=1+2``) gains a leading apostrophe, which spreadsheets show as text; numbers stay as they are."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        try:
            float(value)  # "-0.5" is a number, not a formula
        except ValueError:
            return "'" + value
    return value


def records_csv(columns, records, digits: int | None = None) -> str:
    """Records (dicts) as CSV text in ``columns`` order: floats at full precision (repr), or rounded to
    ``digits`` places, None empty, text made safe from spreadsheets (``csv_safe``)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for rec in records:
        writer.writerow({k: repr(v if digits is None else round(v, digits)) if isinstance(v, float) else csv_safe(v)
                         for k, v in rec.items()})
    return buf.getvalue()


class Timer:
    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start
        return False


def backfill_evidence_hashes(root: Path) -> dict[str, list]:
    """Record ``evidence_sha256`` in every readable cell under ``root`` written before cells recorded it:
    the sha256 of its sidecar when the sidecar parses, null when it has none. A sidecar that does not parse
    is left unrecorded (recording it would vouch for it) and listed under "refused"."""
    store = ResultStore(root)
    done: dict[str, list] = {"recorded": [], "no_evidence": [], "refused": [], "already": []}
    for path in store.cells():
        try:
            payload = _parse_cell(path)
        except CorruptCell as exc:
            done["refused"].append(exc)
            continue
        if EVIDENCE_HASH in payload:
            done["already"].append(path)
            continue
        side = store.evidence_path(path)
        try:
            digest = hashlib.sha256(side.read_bytes()).hexdigest() if side.exists() else None
            store.check_evidence(path, payload)  # parses: safe to vouch for
        except CorruptCell as exc:
            done["refused"].append(exc)
            continue
        atomic_write_text(path, json.dumps({**payload, EVIDENCE_HASH: digest}, indent=1, sort_keys=False) + "\n")
        done["recorded" if digest else "no_evidence"].append(path)
    return done


def _main(argv: list[str]) -> int:
    """``python -m bench.results.store backfill-evidence-hashes DIR``: see ``backfill_evidence_hashes``."""
    if len(argv) != 2 or argv[0] != "backfill-evidence-hashes" or not (Path(argv[1]) / "cells").is_dir():
        print("usage: python -m bench.results.store backfill-evidence-hashes RESULTS_DIR   (a directory holding cells/)",
              file=sys.stderr)
        return 2
    done = backfill_evidence_hashes(Path(argv[1]))
    for exc in done["refused"]:
        print(f"not recorded: {exc}", file=sys.stderr)
    print(f"{len(done['recorded'])} cell(s) now record their evidence sha256, {len(done['no_evidence'])} record "
          f"that they have no evidence, {len(done['already'])} recorded it already, {len(done['refused'])} refused.")
    return 2 if done["refused"] else 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

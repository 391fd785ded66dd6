"""Append-only per-example attack log (JSONL) with resume.

One line per attacked example, written with a single ``write`` and ``fsync`` before the next
example starts, so a run killed at any moment loses at most the example in flight. A torn last
line (killed mid-write) is cut off on open; every complete line is kept and never recomputed.
A line that is not a record is named with its line number; of two records for one example the
first written is used (``KEEP_RULE``) and the others are named. A result cell records the sha256
of the logs it was computed from (``bench.results.store.LOGS``); ``read_log`` checks it before parsing.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

from bench.errors import BenchError, BenchWarning

RESULT_TYPES = ("successful", "failed", "skipped")
_HELD: dict[str, object] = {}  # the attack-log locks this process holds, by lock file
KEEP_RULE = "the first written of each is used"  # a resumed log never replaces an outcome it already holds


def _records(path: Path, lines: list[str]) -> dict[int, dict]:
    """index -> record of a log's record lines (those after the header), one per example (``KEEP_RULE``)."""
    records: dict[int, dict] = {}
    repeated = []
    for number, line in enumerate(lines, 2):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            index = record["index"]
        except (ValueError, KeyError, TypeError):
            index = None
        if not isinstance(index, int) or isinstance(index, bool):
            raise BenchError(f"{path}:{number}: not an attack record (a JSON object with an integer 'index'). "
                             f"Fix: restore the log, or delete it (or re-run with --overwrite always): its "
                             f"attacks are recomputed.")
        if index in records:
            repeated.append(index)
        else:
            records[index] = record
    if repeated:
        warnings.warn(f"Attack log {path} holds more than one record for example(s) "
                      f"{', '.join(map(str, sorted(set(repeated))[:5]))}: {KEEP_RULE}.", BenchWarning, stacklevel=3)
    return records


def _header(path: Path, line: str) -> dict:
    try:
        header = json.loads(line).get("header")
    except (ValueError, AttributeError):
        header = None
    if not isinstance(header, dict):
        raise BenchError(f"{path} is not an attack log (its first line is not a header). Fix: move it out of "
                         f"the results' attack_logs/, or delete it.")
    return header


class AttackLog:
    """Records keyed by ``index`` (position of the example in the attack set)."""

    def __init__(self, path: Path, header: dict):
        self.path = Path(path)
        self.header = header
        self.records: dict[int, dict] = {}
        self._lock()
        try:
            self._open()
        except BaseException:  # a refused log (another configuration, not a log) must not keep its lock
            self.close()
            raise

    def _lock(self) -> None:
        """Hold an exclusive lock on ``<log>.lock`` while this log is open: a second writer of the same log (two
        runs of one cell) stops with a message instead of interleaving its records with ours."""
        try:
            import fcntl
        except ImportError:  # Windows: no flock; single-writer use only
            return
        lock_path = str(self.path.with_name(self.path.name + ".lock"))
        self._lock_path = lock_path
        if lock_path in _HELD:  # this process holds it already (a resumed log in the same run)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(lock_path, "a")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            _HELD[lock_path] = handle  # until ``close`` (the end of a ``with``) or the process ends
        except BlockingIOError:
            handle.close()
            raise BenchError(f"Attack log {self.path} is being written by another bench process. Fix: wait for "
                             f"that run to finish (then re-run: finished examples are reused).") from None

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            self._append({"header": self.header})
            return
        raw = self.path.read_bytes()
        complete = raw[: raw.rfind(b"\n") + 1]
        if len(complete) != len(raw):  # a torn line from a killed writer: drop it, keep the rest
            with self.path.open("r+b") as fh:
                fh.truncate(len(complete))
        lines = complete.decode("utf-8", "replace").splitlines()
        if not lines:
            self._append({"header": self.header})
            return
        first = _header(self.path, lines[0])
        if first != json.loads(json.dumps(self.header)):
            raise BenchError(f"Attack log {self.path} was written by a different configuration "
                             f"({first}). Delete it, or re-run with --overwrite always.")
        self.records = _records(self.path, lines[1:])

    def _append(self, obj: dict) -> None:
        data = (json.dumps(obj, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Release the writer's lock (another process may then resume the log)."""
        handle = _HELD.pop(getattr(self, "_lock_path", ""), None)
        if handle is not None:
            handle.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def done(self, index: int) -> bool:
        return index in self.records

    def add(self, record: dict) -> None:
        if record["result_type"] not in RESULT_TYPES:
            raise ValueError(f"result_type must be one of {RESULT_TYPES}, got {record['result_type']!r}")
        if record["index"] in self.records:
            raise ValueError(f"example {record['index']} is already in {self.path}")
        self._append(record)
        self.records[record["index"]] = record

    def reset(self) -> None:
        """Start over (``--overwrite always``)."""
        self.path.unlink(missing_ok=True)
        self.records = {}
        self._open()

    def ordered(self, indices) -> list[dict]:
        return [self.records[i] for i in indices if i in self.records]


def read_log(path: Path, recorded: tuple[Path, dict] | None = None) -> tuple[dict, list[dict]]:
    """A log's header and records, read only (a torn last line from a killed writer is ignored). With
    ``recorded`` (the cell computed from it and its ``bench.results.store.LOGS`` record), the bytes are checked
    against the recorded sha256 before they are parsed: an edited log is a BadLog (exit 2)."""
    from bench.results.store import BadLog, log_bytes_problem

    raw = Path(path).read_bytes()
    if recorded is not None:
        problem = log_bytes_problem(raw, recorded[1])
        if problem:
            raise BadLog(recorded[0], Path(path), problem)
    lines = raw[: raw.rfind(b"\n") + 1].decode("utf-8", "replace").splitlines()
    if not lines:
        raise BenchError(f"{path} is not an attack log (it is empty). Fix: move it out of the results' "
                         f"attack_logs/, or delete it.")
    header = _header(Path(path), lines[0])
    return header, list(_records(Path(path), lines[1:]).values())

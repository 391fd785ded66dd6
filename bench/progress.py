"""Progress that never goes quiet: done/total and the time left, at least every 30 s.

On a terminal it is a live rich bar. In a file or a pipe it is plain lines, no control characters:
one when a piece of work starts, one at least every ``every`` seconds while it runs (a heartbeat
thread prints even while one item takes long, e.g. a model loading or a victim training), and one
when it ends. Both expose the subset of ``rich.progress.Progress`` the commands use (``add_task``,
``advance``, ``update``, ``remove_task``, a context manager), so code that reports progress does not
know which one it has.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, TextIO

EVERY_S = 30.0  # the longest silence a long command allows itself


def duration(seconds: float) -> str:
    """'45s', '3m05s', '1h02m': short, for a progress line."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


@dataclass
class _Work:
    description: str
    total: float | None
    started: float
    completed: float = 0.0
    at_start: float = 0.0  # done before this process began (a resumed run): not part of the rate

    def line(self, now: float) -> str:
        elapsed = now - self.started
        if not self.total:
            return f"{self.description}: {self.completed:g} done, {duration(elapsed)} elapsed"
        share = min(self.completed / self.total, 1.0)
        rate = (self.completed - self.at_start) / elapsed if elapsed > 0 else 0.0
        left = f"~{duration((self.total - self.completed) / rate)} left" if rate > 0 else "time left: estimating"
        return (f"{self.description}: {self.completed:g}/{self.total:g} ({share:.0%}), "
                f"{duration(elapsed)} elapsed, {left}")


class PlainProgress:
    """Plain progress lines for a file or pipe. ``clock`` and ``heartbeat=False`` are for tests: they call
    ``tick()`` themselves."""

    def __init__(self, stream: TextIO | None = None, every: float = EVERY_S,
                 clock: Callable[[], float] = time.monotonic, heartbeat: bool = True):
        self.stream = stream
        self.every = every
        self.clock = clock
        self.heartbeat = heartbeat
        self._work: dict[int, _Work] = {}
        self._next_id = 0
        self._last_line = clock()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- rich.progress.Progress's subset ---------------------------------------------------------

    def add_task(self, description: str, total: float | None = None, completed: float = 0, **_) -> int:
        with self._lock:
            task_id, self._next_id = self._next_id, self._next_id + 1
            self._work[task_id] = _Work(description, total, self.clock(), completed, completed)
            self._print(self._work[task_id].line(self.clock()))
            return task_id

    def advance(self, task_id: int, advance: float = 1) -> None:
        with self._lock:
            self._work[task_id].completed += advance
        self.tick()

    def update(self, task_id: int, *, completed: float | None = None, total: float | None = None,
               description: str | None = None, advance: float | None = None, **_) -> None:
        with self._lock:
            work = self._work[task_id]
            if completed is not None:
                work.completed = completed
            if advance is not None:
                work.completed += advance
            if total is not None:
                work.total = total
            if description is not None:
                work.description = description
        self.tick()

    def remove_task(self, task_id: int) -> None:
        with self._lock:
            work = self._work.pop(task_id, None)
            if work is not None:
                self._print(f"{work.description}: done, {work.completed:g}"
                            + (f"/{work.total:g}" if work.total else "") + f" in {duration(self.clock() - work.started)}")

    def __enter__(self):
        if self.heartbeat:
            self._thread = threading.Thread(target=self._beat, name="bench-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        return False

    # --- the lines ------------------------------------------------------------------------------

    def tick(self) -> None:
        """Print every running piece of work's line if ``every`` seconds passed since the last line."""
        with self._lock:
            now = self.clock()
            if now - self._last_line < self.every or not self._work:
                return
            for work in self._work.values():
                self._print(work.line(now))

    def _beat(self) -> None:
        while not self._stop.wait(min(self.every / 30, 1.0)):
            self.tick()

    def _print(self, text: str) -> None:
        stream = self.stream or sys.stderr
        stream.write(f"[{time.strftime('%H:%M:%S')}] {text}\n")
        stream.flush()
        self._last_line = self.clock()


def live_progress(console):
    """A live rich bar with done/total, elapsed and time left, on ``console``."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("left"), TimeRemainingColumn(), console=console, transient=True)


def progress(stream: TextIO | None = None):
    """The progress for a command: a live bar when ``stream`` (default stderr) is a terminal, else plain lines."""
    stream = stream or sys.stderr
    if stream.isatty():
        from rich.console import Console

        return live_progress(Console(file=stream))
    return PlainProgress(stream)


class _Lines:
    """A stream that hands each line written to it to a function (a caller's ``log``)."""

    def __init__(self, emit: Callable[[str], object]):
        self.emit = emit

    def write(self, text: str) -> None:
        for line in text.splitlines():
            if line.strip():
                self.emit(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def progress_to(log: Callable[[str], object] | None = None, stream: TextIO | None = None):
    """Progress lines handed to ``log`` (a function of one string, e.g. ``bench.evaluate(log=...)``), or, without
    one, ``progress(stream)``: a live bar on a terminal, plain lines elsewhere."""
    return PlainProgress(_Lines(log)) if log is not None else progress(stream)


def track(owner, iterable, total: float | None, description: str):
    """Iterate ``iterable`` with a progress task on ``owner`` (a progress from above, or None: quiet)."""
    if owner is None:
        yield from iterable
        return
    task_id = owner.add_task(description, total=total)
    try:
        for item in iterable:
            yield item
            owner.advance(task_id)
    finally:
        owner.remove_task(task_id)

"""Errors a user can fix. The CLI turns them into exit code 2 with the message."""

from __future__ import annotations

import difflib


class BenchError(Exception):
    """Bad usage or bad input: the message says what to do about it (exit 2)."""


class BenchWarning(UserWarning):
    """Something the user should know that does not stop the work (e.g. a skipped unreadable result cell).
    The CLI prints it as ``bench: warning: ...``."""


class UnknownName(BenchError):
    def __init__(self, kind: str, name: str, known: list[str]):
        close = difflib.get_close_matches(name, known, n=5, cutoff=0.4)
        if not close:  # nothing similar: still show the nearest few, by similarity
            close = sorted(known, key=lambda k: -difflib.SequenceMatcher(None, name, k).ratio())[:3]
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        super().__init__(
            f"Unknown {kind} '{name}'.{hint} See `bench ls {kind}s` for all {len(known)} names."
        )
        self.close = close


def lookup(kind: str, table: dict, name: str):
    """table[name], or an UnknownName error listing the closest names."""
    try:
        return table[name]
    except KeyError:
        raise UnknownName(kind, name, sorted(table)) from None

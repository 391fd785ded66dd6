"""Which tasks an average row is over, so that only averages over the same tasks are ranked together.

A suite's average row names its tasks under ``average_of`` in its configuration (``suites.base.Suite.
summarize``; the row's own configuration, not the cell's, so no cell key moves). A row written before rows
named them is read from its cell's ``summary_of`` (the tasks the run asked for) and the average the protocols
declare under the row's aggregation name (``bench/protocols.toml``).
"""

from __future__ import annotations

import json

AVERAGE_OF = "average_of"  # in an average row's configuration: the tasks it is over, sorted


def row_config(row: dict) -> dict:
    """A row's configuration: parsed by the reports already (``_config``), else from its ``config`` text."""
    config = row.get("_config")
    if config is None:
        try:
            config = json.loads(row.get("config") or "{}")
        except (TypeError, ValueError):
            config = {}
    return config if isinstance(config, dict) else {}


def declared_average(suite: str, aggregation: str) -> tuple[str, ...] | None:
    """The tasks (sorted) of the average the protocols name ``aggregation`` in ``suite`` (a default protocol's
    first), or None when none does."""
    from bench.protocols import PROTOCOLS

    protocols = sorted(PROTOCOLS.values(), key=lambda p: not p.default)
    return next((tuple(sorted(a.tasks)) for p in protocols if p.suite == suite for a in p.averages
                 if a.aggregation == aggregation), None)


def average_of(row: dict) -> tuple[str, ...] | None:
    """The tasks (sorted) an average row is over; None for a row that is no average. For a row from before
    rows named them: the tasks its run asked for among those its average declares (named with a count when
    the row averaged fewer, e.g. a task without a value)."""
    config = row_config(row)
    if AVERAGE_OF in config:
        return tuple(sorted(config[AVERAGE_OF]))
    if "summary_of" not in config:
        return None
    declared = declared_average(row.get("suite") or "", row.get("aggregation") or "")
    asked = set(config["summary_of"])
    tasks = tuple(sorted(asked & set(declared) if declared is not None else asked))
    n = row.get("n")
    return tasks if n is None or int(n) == len(tasks) else (f"{n} of {', '.join(tasks)}",)


def describe(tasks: tuple[str, ...] | None) -> str:
    """How a reader is told which tasks an average is over: "stsb only", "6 tasks: cr, mpqa, ..."."""
    if not tasks:
        return ""
    return f"{tasks[0]} only" if len(tasks) == 1 else f"{len(tasks)} tasks: {', '.join(tasks)}"


def off_declared(row: dict) -> str:
    """Which tasks an average row is over (``describe``) when they are not those its average declares; ""
    for a row that is no average, or is over the declared tasks (or whose average no protocol declares)."""
    over = average_of(row)
    if over is None:
        return ""
    declared = declared_average(row.get("suite") or "", row.get("aggregation") or "")
    return "" if declared is None or over == declared else describe(over)

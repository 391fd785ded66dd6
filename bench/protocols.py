"""Named protocols: which tasks, recipes, splits and average one benchmark uses, declared once as data.

A protocol ("robustembed-table1", "robustembed-table3", ...) is read from ``protocols.toml`` beside this
module. Suites take their default task list, their averages and their default recipes from a protocol, and
the report tables their columns, so nothing defaults to "everything registered": registering a new task,
recipe or method changes no default, no average and no cell key. ``PROTOCOLS`` is a
``bench.plugins.Registry`` (did-you-mean on a typo); ``PROTOCOLS.load(name)`` gives a :class:`Protocol`.
Importing this module reads one small TOML file and imports nothing heavy.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

from bench.plugins import Registry

PROTOCOLS_FILE = Path(__file__).with_name("protocols.toml")


@dataclass(frozen=True, kw_only=True)
class Protocol:
    """One benchmark's tasks (in its column order), recipes, splits, headline row, average and profile."""

    name: str
    suite: str
    title: str
    tasks: tuple[str, ...]
    splits: tuple[str, ...] = ()
    metric: str = ""
    aggregation: str = ""
    average: tuple[str, ...] = ()  # the tasks its average is over; () = all its tasks
    average_aggregation: str = ""
    recipes: tuple[str, ...] = ()
    profile: str = ""

    @property
    def averaged(self) -> tuple[str, ...]:
        return self.average or self.tasks


def parse(data: dict) -> dict[str, Protocol]:
    """name -> Protocol from the TOML tables; ``recipes = "<protocol>"`` takes that protocol's recipes."""
    known = {f.name for f in fields(Protocol)} - {"name"}
    out: dict[str, Protocol] = {}
    for name, table in data.items():
        unknown = set(table) - known
        if unknown:
            raise ValueError(f"protocol '{name}': unknown field(s) {', '.join(sorted(unknown))} "
                             f"(known: {', '.join(sorted(known))})")
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in table.items()}
        if isinstance(values.get("recipes"), str):
            source = values["recipes"]
            if source not in out:
                raise ValueError(f"protocol '{name}': recipes = '{source}' names no protocol declared above it")
            values["recipes"] = out[source].recipes
        stray = set(values.get("average", ())) - set(values.get("tasks", ()))
        if stray:
            raise ValueError(f"protocol '{name}': its average names tasks it does not have: {', '.join(sorted(stray))}")
        out[name] = Protocol(name=name, **values)
    return out


def _read(path: Path = PROTOCOLS_FILE) -> dict[str, Protocol]:
    with open(path, "rb") as handle:
        return parse(tomllib.load(handle))


_DECLARED = _read()
PROTOCOLS = Registry("protocol", _DECLARED, helps={name: p.title for name, p in _DECLARED.items()})


def protocol(name: str) -> Protocol:
    """The protocol called ``name`` (``UnknownName`` with the closest names on a typo)."""
    return PROTOCOLS.load(name)

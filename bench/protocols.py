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

from bench.errors import BenchError
from bench.plugins import PROFILES, Registry

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


class ProtocolError(BenchError, ValueError):
    """protocols.toml (or a table given to ``parse``) is not a valid protocol file: exit 2, naming the file."""


LISTS = {"tasks", "splits", "average"}  # lists of names; "recipes" is a list or a protocol's name


def parse(data: dict, source: str = "protocols.toml") -> dict[str, Protocol]:
    """name -> Protocol from the TOML tables; ``recipes = "<protocol>"`` takes that protocol's recipes. A
    ProtocolError (a BenchError naming ``source``, the protocol and the fix) for anything else."""
    out: dict[str, Protocol] = {}
    for name, table in data.items():
        problem = _problem(name, table, out)
        if problem:
            raise ProtocolError(f"{source}: protocol '{name}': {problem}. Fix: correct it there (its fields are "
                                f"described at the top of the file, and in docs/extending.md, \"A protocol\").")
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in table.items()}
        if isinstance(values.get("recipes"), str):
            values["recipes"] = out[values["recipes"]].recipes
        out[name] = Protocol(name=name, **values)
    return out


def _problem(name: str, table, declared: dict) -> str:
    """What is wrong with one protocol's table ("" when nothing)."""
    known = {f.name for f in fields(Protocol)} - {"name"}
    if not isinstance(table, dict):
        return f"is a {type(table).__name__}, not a table ([{name}] followed by its fields)"
    unknown, missing = set(table) - known, {"suite", "title", "tasks"} - set(table)
    if unknown or missing:
        return (f"unknown field(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(known))})" if unknown
                else f"lacks the field(s) {', '.join(sorted(missing))}")
    for key, value in table.items():
        names = key in LISTS or key == "recipes" and not isinstance(value, str)
        if names and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            return f"{key} must be a list of names, got {value!r}"
        if not names and not isinstance(value, str):
            return f"{key} must be a text, got {value!r}"
    if isinstance(table.get("recipes"), str) and table["recipes"] not in declared:
        return f"recipes = '{table['recipes']}' names no protocol declared above it"
    stray = set(table.get("average", ())) - set(table["tasks"])
    if stray:
        return f"its average names tasks it does not have: {', '.join(sorted(stray))}"
    if table.get("profile") and table["profile"] not in PROFILES:
        return f"profile '{table['profile']}' is none of {', '.join(PROFILES)}"
    return ""


def _read(path: Path = PROTOCOLS_FILE) -> dict[str, Protocol]:
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ProtocolError(f"{path} cannot be read ({exc.strerror or exc}). Fix: reinstall bench, or restore the "
                            f"file (git checkout bench/protocols.toml).") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"{path} is not valid TOML ({exc}). Fix: correct it there, or restore it (git checkout "
                            f"bench/protocols.toml).") from None
    return parse(data, str(path))


_DECLARED = _read()
PROTOCOLS = Registry("protocol", _DECLARED, helps={name: p.title for name, p in _DECLARED.items()})


def protocol(name: str) -> Protocol:
    """The protocol called ``name`` (``UnknownName`` with the closest names on a typo)."""
    return PROTOCOLS.load(name)

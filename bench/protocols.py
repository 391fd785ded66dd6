"""Named protocols: a benchmark you run. Which suite, tasks, splits, headline rows, averages, recipes and
profile one benchmark uses, declared once as data in ``protocols.toml`` beside this module.

`bench run --protocol NAME`, `bench grid --protocol NAME` and ``bench.evaluate(model, protocol=NAME)`` run
one. A run without one follows its suite's default protocol for the run's profile (the protocol whose
``default`` names that profile; every task of the suite when none does), on the tasks asked for. The
suites take their tasks, splits, averages, headline metrics and recipes from the run's protocol
(``bench.runner.RunContext.protocol``), the report tables their columns, so nothing defaults to
"everything registered": registering a task, recipe or method changes no default, no average and no cell
key, and a protocol added to the file runs without a code change. ``PROTOCOLS`` is a
``bench.plugins.Registry`` (did-you-mean on a typo); ``protocol(name)`` gives a :class:`Protocol`.
Importing this module reads one small TOML file and imports nothing heavy.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path

from bench.errors import BenchError, lookup
from bench.plugins import PROFILES, Registry

PROTOCOLS_FILE = Path(__file__).with_name("protocols.toml")


@dataclass(frozen=True)
class Average:
    """One average a protocol's runs write: the aggregation name of its row and the tasks it is over."""

    aggregation: str
    tasks: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class Protocol:
    """One benchmark: its suite, tasks (in its column order), the split each is scored on, the headline rows
    (metrics, aggregation), its averages, recipes, profile, and the profiles it is its suite's default on."""

    name: str
    suite: str
    title: str
    tasks: tuple[str, ...]
    splits: tuple[str, ...] = ()  # one split for every task, or one per task; () = each task's own
    metric: tuple[str, ...] = ()  # each task's headline metrics, the first the tables'; () = each task's own
    aggregation: str = ""  # the aggregation of each task's headline rows; "" = each task's own
    average: tuple[str, ...] = ()  # the tasks its average is over; () = all its tasks
    average_aggregation: str = ""  # the aggregation name of its average's row; "" = it has no average
    also_averages: tuple[Average, ...] = ()  # the averages of other protocols its runs write too
    recipes: tuple[str, ...] = ()
    profile: str = ""  # the run profile that reproduces the paper's settings
    default: tuple[str, ...] = ()  # the profiles on which its suite runs it when no protocol is named

    @property
    def averaged(self) -> tuple[str, ...]:
        return self.average or self.tasks

    @property
    def headline_metric(self) -> str:
        return self.metric[0] if self.metric else ""

    @property
    def averages(self) -> tuple[Average, ...]:
        own = (Average(self.average_aggregation, self.averaged),) if self.average_aggregation else ()
        return own + self.also_averages

    def split_of(self, task: str, own: str) -> str:
        """The split ``task`` is scored on under this protocol (``own``: the task's own split)."""
        if len(self.splits) == 1:
            return self.splits[0]
        if self.splits and task in self.tasks:
            return self.splits[self.tasks.index(task)] or own
        return own

    def with_tasks(self, names) -> Protocol:
        """This protocol on ``names`` (any tasks of its suite, in that order), its averages as declared: an
        average then covers those of its tasks that ran, and its rows say which (``average_of``)."""
        names = tuple(dict.fromkeys(names))
        splits = self.splits if len(self.splits) <= 1 else tuple(self.split_of(n, "") for n in names)
        return replace(self, tasks=names, splits=splits, average=self.averaged)

    def restricted(self, names) -> Protocol:
        """This protocol on those of its own tasks that ``names`` names (UnknownName, with the closest of its
        tasks, for another)."""
        own = {name: name for name in self.tasks}
        return self.with_tasks([lookup(f"task of protocol '{self.name}'", own, name) for name in names])


class ProtocolError(BenchError, ValueError):
    """protocols.toml (or a table given to ``parse``) is not a valid protocol file: exit 2, naming the file."""


NAMES = {"tasks", "splits", "average", "also_averages"}  # lists of names
NAME_OR_NAMES = {"metric", "recipes"}  # a name, or a list of names ("recipes": a protocol's name)
REQUIRED = {"suite", "title", "tasks"}


def parse(data: dict, source: str = "protocols.toml") -> dict[str, Protocol]:
    """name -> Protocol from the TOML tables; ``recipes = "<protocol>"`` takes that protocol's recipes and
    ``also_averages`` those protocols' averages (both declared above). A ProtocolError (a BenchError naming
    ``source``, the protocol and the fix) for anything else."""
    out: dict[str, Protocol] = {}
    for name, table in data.items():
        problem = _shape_problem(name, table) or _meaning_problem(table, out)
        if problem:
            raise _error(source, name, problem)
        out[name] = Protocol(name=name, **_values(table, out))
    clash = _default_clash(out)
    if clash:
        raise _error(source, *clash)
    return out


def _error(source: str, name: str, problem: str) -> ProtocolError:
    return ProtocolError(f"{source}: protocol '{name}': {problem}. Fix: correct it there (its fields are described "
                         f"at the top of the file, and in docs/extending.md, \"A protocol\").")


def _values(table: dict, declared: dict[str, Protocol]) -> dict:
    """The Protocol fields of a checked table: lists as tuples, references resolved, ``default`` as profiles."""
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in table.items()}
    if isinstance(values.get("metric"), str):
        values["metric"] = (values["metric"],)
    if isinstance(values.get("recipes"), str):
        values["recipes"] = declared[values["recipes"]].recipes
    values["also_averages"] = tuple(declared[n].averages[0] for n in values.get("also_averages", ()))
    if values.get("default") is True:
        values["default"] = PROFILES
    elif values.get("default") is False:
        values["default"] = ()
    return values


def _shape_problem(name: str, table) -> str:
    """What is wrong with the form of one protocol's table ("" when nothing): a field unknown, missing or
    of the wrong type."""
    known = {f.name for f in fields(Protocol)} - {"name"}
    if not isinstance(table, dict):
        return f"is a {type(table).__name__}, not a table ([{name}] followed by its fields)"
    unknown, missing = set(table) - known, REQUIRED - set(table)
    if unknown or missing:
        return (f"unknown field(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(known))})" if unknown
                else f"lacks the field(s) {', '.join(sorted(missing))}")
    for key, value in table.items():
        names = isinstance(value, list) and all(isinstance(v, str) for v in value)
        if key == "default":
            if not (isinstance(value, bool) or names):
                return f"default must be true, false or a list of profiles, got {value!r}"
        elif key in NAMES and not names:
            return f"{key} must be a list of names, got {value!r}"
        elif key in NAME_OR_NAMES and not (names or isinstance(value, str)):
            return f"{key} must be a name or a list of names, got {value!r}"
        elif key not in NAMES | NAME_OR_NAMES and not isinstance(value, str):
            return f"{key} must be a text, got {value!r}"
    return ""


def _meaning_problem(table: dict, declared: dict[str, Protocol]) -> str:
    """What is wrong with what a well-formed table says ("" when nothing)."""
    tasks = table["tasks"]
    if isinstance(table.get("recipes"), str) and table["recipes"] not in declared:
        return f"recipes = '{table['recipes']}' names no protocol declared above it"
    stray = set(table.get("average", ())) - set(tasks)
    if stray:
        return f"its average names tasks it does not have: {', '.join(sorted(stray))}"
    if len(table.get("splits", ())) not in (0, 1, len(tasks)):
        return f"splits names {len(table['splits'])} splits for {len(tasks)} tasks (give one, or one per task)"
    if table.get("profile") and table["profile"] not in PROFILES:
        return f"profile '{table['profile']}' is none of {', '.join(PROFILES)}"
    if isinstance(table.get("default"), list) and set(table["default"]) - set(PROFILES):
        return f"default names profiles that are none of {', '.join(PROFILES)}: {table['default']}"
    return _also_problem(table, declared)


def _also_problem(table: dict, declared: dict[str, Protocol]) -> str:
    """What is wrong with ``also_averages``: each a protocol declared above, of the same suite, with an
    average over tasks this one has, under a name no other average of this one has."""
    names = [table.get("average_aggregation", "")]
    for other in table.get("also_averages", ()):
        p = declared.get(other)
        if p is None or p.suite != table["suite"] or not p.average_aggregation:
            return f"also_averages names '{other}', which is no protocol of suite '{table['suite']}' with an " \
                   f"average declared above it"
        if set(p.averaged) - set(table["tasks"]):
            return f"also_averages names '{other}', whose average is over tasks it does not have"
        if p.average_aggregation in names:
            return f"two of its averages are named '{p.average_aggregation}'"
        names.append(p.average_aggregation)
    return ""


def _default_clash(declared: dict[str, Protocol]) -> tuple[str, str] | None:
    """(protocol, problem) when two protocols are one suite's default on one profile; else None."""
    seen: dict[tuple[str, str], str] = {}
    for name, p in declared.items():
        for profile in p.default:
            first = seen.setdefault((p.suite, profile), name)
            if first != name:
                return name, f"it and '{first}' are both suite '{p.suite}''s default on the {profile} profile"
    return None


def read(path: Path = PROTOCOLS_FILE) -> dict[str, Protocol]:
    """The protocols of a protocols file (ProtocolError naming the file when it cannot be read or is wrong)."""
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


_DECLARED = read()
PROTOCOLS = Registry("protocol", _DECLARED, helps={name: p.title for name, p in _DECLARED.items()})


def protocol(name: str) -> Protocol:
    """The protocol called ``name`` (``UnknownName`` with the closest names on a typo)."""
    return PROTOCOLS.load(name)


def default_for(suite: str, profile: str) -> Protocol | None:
    """The protocol ``suite`` runs on ``profile`` when none is named, if protocols.toml names one."""
    return next((p for p in PROTOCOLS.values() if p.suite == suite and profile in p.default), None)


def run_profile(given: str | None, chosen: Protocol | None, fallback: str) -> str:
    """The profile a run uses: the one given, else the named protocol's, else the command's own default."""
    return given or (chosen.profile if chosen is not None else "") or fallback

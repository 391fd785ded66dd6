"""Self-describing plug-ins: the typed options a suite declares once, and the one registry helper
(``Registry``: lazy ``module:attr`` entries, labels, did-you-mean) that models, suites, methods,
recipes and commands are looked up through.

``bench run`` and ``bench grid`` build their suite flags from these records (same names in both),
the base suite puts the number-changing ones into the cell's configuration (and so its key), and
the run exports them beside the results. Importing this module imports nothing heavy.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Callable

# The run profiles every command accepts (bench run, bench grid, bench train), in order of cost.
# smoke: an offline check of the whole path on CPU; study: a real study sized for 2 CPU cores;
# paper: the papers' settings. A suite or method with per-profile settings declares one per name.
PROFILES = ("smoke", "study", "paper")
PROFILE_HELP = ("smoke: offline CPU check of the whole path; study: real evidence sized for 2 CPU cores; "
                "paper: the papers' settings")


@dataclass(frozen=True, kw_only=True)
class Option:
    """One suite option. ``name`` is the key in ``RunContext.options``; the flag is ``--name`` with dashes
    (or ``flag``). ``repeatable`` options collect a list (``--recipe a --recipe b``)."""

    name: str
    type: Callable[[str], Any] = str
    default: Any = None
    choices: tuple = ()
    help: str = ""
    changes_numbers: bool = True  # part of the cell configuration (and key) when True
    # A treatment makes a cell another condition of its model (a hardened victim): set, it enters the cell's
    # configuration and its "treatments" list; tables and leaderboards leave such cells out, a claim asks
    # for them by name. Unset, the configuration (and so every older cell's key) is as without the option.
    treatment: bool = False
    repeatable: bool = False
    flag: str = ""
    minimum: float | None = None  # numeric options: smallest accepted value

    @property
    def flag_name(self) -> str:
        return "--" + (self.flag or self.name).replace("_", "-")

    def parse(self, text: str):
        try:
            value = self.type(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"{self.flag_name} expects {getattr(self.type, '__name__', 'a value')}, "
                                             f"got {text!r}") from None
        if self.minimum is not None and value < self.minimum:
            raise argparse.ArgumentTypeError(f"{self.flag_name} must be at least {self.minimum:g}, got {text}")
        return value

    def describe(self) -> dict:
        return {"name": self.name, "flag": self.flag_name, "type": getattr(self.type, "__name__", str(self.type)),
                "default": self.default, "choices": list(self.choices), "help": self.help,
                "changes_numbers": self.changes_numbers, "repeatable": self.repeatable, "treatment": self.treatment}


def merged_options(suites) -> dict[str, tuple[Option, list[str]]]:
    """name -> (option, names of the suites declaring it). Two suites may share an option only if they
    declare it alike (type, choices, repeatable), so one flag means one thing everywhere."""
    merged: dict[str, tuple[Option, list[str]]] = {}
    for suite in suites:
        for opt in suite.options:
            if opt.name in merged:
                first, users = merged[opt.name]
                if (first.type, first.choices, first.repeatable, first.flag) != (opt.type, opt.choices, opt.repeatable,
                                                                                 opt.flag):
                    raise ValueError(f"suite option '{opt.name}' is declared differently by {users[0]} and {suite.name}")
                users.append(suite.name)
            else:
                merged[opt.name] = (opt, [suite.name])
    return merged


def add_option_flags(parser, suites) -> None:
    """One flag per suite option, in an argument group; values default to None (the suite's default applies)."""
    group = parser.add_argument_group("suite options (used by the suites named in each help)")
    for name, (opt, users) in merged_options(suites).items():
        kwargs: dict[str, Any] = {"dest": f"opt_{name}", "default": None, "type": opt.parse,
                                  "help": f"{', '.join(users)}: {opt.help}"
                                          + (f" (default {opt.default})" if opt.default not in (None, ()) else "")}
        if opt.choices:
            kwargs["choices"] = list(opt.choices)
        kwargs["metavar"] = (opt.flag or name).upper()
        if opt.choices:
            del kwargs["metavar"]
        if opt.repeatable:
            kwargs["action"] = "append"
        group.add_argument(opt.flag_name, **kwargs)


def options_from_args(args, suites) -> dict:
    """The suite options given on the command line, as {name: value} (omitted ones are left out)."""
    values = {name: getattr(args, f"opt_{name}", None) for name in merged_options(suites)}
    return {k: v for k, v in values.items() if v is not None}


# --- one registry helper for every kind of plug-in ---------------------------------------------

def import_target(target: str):
    """``"module:attr"`` -> that attribute (``attr`` may be dotted); ``"module"`` -> the module. Imported on call."""
    import importlib

    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


class Registry(dict):
    """name -> entry, for one kind of plug-in (model, suite, method, recipe, command).

    An entry is the object itself or a lazy ``"module:attr"`` string, imported by :meth:`load` on first
    use (so listing names imports nothing heavy). ``load`` of an unknown name raises
    ``bench.errors.UnknownName`` with the closest names. Each entry may carry a display ``label`` and a
    one-line ``help``. It is a dict, so tests can ``monkeypatch.setitem`` an entry.
    """

    def __init__(self, kind: str, entries: dict | None = None, *, labels: dict | None = None,
                 helps: dict | None = None):
        super().__init__(entries or {})
        self.kind = kind
        self.labels: dict[str, str] = dict(labels or {})
        self.helps: dict[str, str] = dict(helps or {})
        self._loaded: dict[str, Any] = {}

    def register(self, name: str, entry, *, label: str = "", help: str = "", replace: bool = False):
        if name in self and not replace:
            raise ValueError(f"{self.kind} '{name}' is registered twice")
        self[name] = entry
        self._loaded.pop(name, None)
        if label:
            self.labels[name] = label
        if help:
            self.helps[name] = help
        return entry

    def load(self, name: str):
        """The entry for ``name`` (imported if it is a ``module:attr`` string); did-you-mean on a typo."""
        from bench.errors import lookup

        entry = lookup(self.kind, self, name)
        if not isinstance(entry, str):
            return entry
        if self._loaded.get(name, (None,))[0] != entry:
            self._loaded[name] = (entry, import_target(entry))
        return self._loaded[name][1]

    def label(self, name: str) -> str:
        return self.labels.get(name) or name

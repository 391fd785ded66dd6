"""User plug-ins: ``$BENCH_HOME/plugins.toml`` (or ``bench --plugins FILE``) names suites, tasks, datasets, recipes
and methods as ``"module:attr"``, registered into the registries the built-in ones live in, with no source edit.

    [methods]
    mycse = "my_method:METHOD"                          # a bench.methods.base.Method subclass
    [recipes]
    swap = { target = "my_recipes:swap", label = "Swap" }   # a recipe builder (attacks/recipes.py's form)
    [suites]
    toy = "my_suite:SUITE"                              # a suites.base.Suite instance
    [tasks]
    my-sts = "my_tasks:TASK"                            # a suites.base.Task; its ``suite`` names a registered suite
    [datasets]
    my-pairs = "my_tasks:DATASET"                       # a bench.data.datasets.DatasetSpec

A module is found on ``sys.path`` first, then in the plug-in file's directory (appended to ``sys.path``).
Suites, methods, recipes and tasks are imported when used (a task with its suite); datasets when the file is
read (a DatasetSpec is a record). Their data files' sizes and sha256 are read from ``data_files.tsv`` beside
the plug-in file (``bench data add``). The app does the registration: the kernel never imports suites or attacks.
"""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

from bench.errors import BenchError

PLUGINS_FILE = "plugins.toml"  # under $BENCH_HOME
DATA_FILES = "data_files.tsv"  # beside it: plug-in datasets' files (bench data add)
LOADED: list[Path] = []  # the plug-in file this process read
KINDS = ("suites", "tasks", "datasets", "recipes", "methods")
ENTRY_FIELDS = {"target", "label", "help"}


def plugins_path(given: str | None) -> Path | None:
    """``--plugins FILE`` (which must exist), else ``$BENCH_HOME/plugins.toml`` when there is one."""
    from bench.paths import Paths

    if given:
        path = Path(given).expanduser()
        if not path.is_file():
            raise BenchError(f"--plugins {path}: no such file. Fix: give the path of a plug-in file (docs/extending.md).")
        return path.resolve()
    path = Paths.from_env().home / PLUGINS_FILE
    return path if path.is_file() else None


def read_plugins(path: Path) -> dict[str, dict[str, dict]]:
    """kind -> name -> {"target", "label", "help"}; a BenchError naming the entry and the fix on a bad one."""
    try:
        tables = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeError, tomllib.TOMLDecodeError) as exc:
        raise BenchError(f"{path}: not a readable TOML file ({exc}). Fix: correct it (docs/extending.md).") from None
    unknown = sorted(set(tables) - set(KINDS))
    if unknown:
        raise BenchError(f"{path}: unknown table [{unknown[0]}]. Fix: use only [{'], ['.join(KINDS)}].")
    return {kind: {name: _entry(path, kind, name, value) for name, value in tables.get(kind, {}).items()}
            for kind in KINDS}


def _entry(path: Path, kind: str, name: str, value) -> dict:
    where = f"{path}: [{kind}] {name}"
    entry = {"target": value} if isinstance(value, str) else value
    if not isinstance(entry, dict) or set(entry) - ENTRY_FIELDS or not isinstance(entry.get("target"), str):
        raise BenchError(f"{where}: expected \"module:attr\" or {{ target = \"module:attr\", label = \"...\" }}. "
                         f"Fix: write it in one of those forms.")
    module, colon, attr = entry["target"].partition(":")
    if not (module and colon and attr):
        raise BenchError(f"{where} = {entry['target']!r}: not \"module:attr\". Fix: name the module, a colon and "
                         f"the attribute, e.g. \"my_{kind[:-1]}:{kind[:-1].upper()}\".")
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise BenchError(f"{where}: no module '{module}' on sys.path or in {path.parent}. Fix: put {module}.py "
                         f"beside {path.name}, or install it.")
    return {"label": "", "help": "", **entry, "where": where}


def plugins_table() -> Path:
    """The user's data-files table (``bench data add``): beside the plug-in file in use, else in $BENCH_HOME."""
    from bench.paths import Paths

    return (LOADED[-1].parent if LOADED else Paths.from_env().home) / DATA_FILES


def load_plugins(given: str | None = None) -> Path | None:
    """Read the plug-in file (if any) and register every entry; the file read, or None."""
    path = plugins_path(given)
    LOADED[:] = [path] if path else []
    if path is None:
        return None
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))  # after the installed packages: a plug-in never shadows them
    entries = read_plugins(path)
    for kind in KINDS:
        for name, entry in entries[kind].items():
            REGISTER[kind](name, entry, path)
    return path


def _lazy(registry):
    def register(name: str, entry: dict, path: Path) -> None:
        if registry.get(name) == entry["target"]:
            return  # read again in this process (tests, bench.evaluate after the CLI)
        if name in registry:
            raise BenchError(f"{entry['where']}: a {registry.kind} '{name}' is already registered "
                             f"({registry[name]!r}). Fix: give your {registry.kind} another name.")
        registry.register(name, entry["target"], label=entry["label"], help=entry["help"])
        ORIGINS[(registry.kind, name)] = str(path)
    return register


def _suite_registry():
    from bench.runner import SUITES

    return SUITES


def _register_task(name: str, entry: dict, path: Path) -> None:
    from bench.runner import add_plugin_task

    add_plugin_task(name, entry["target"], entry["where"])
    ORIGINS[("task", name)] = str(path)


def _register_dataset(name: str, entry: dict, path: Path) -> None:
    from bench.data.datasets import register_dataset
    from bench.plugins import import_target

    try:
        spec = import_target(entry["target"])
    except (ImportError, AttributeError) as exc:
        raise BenchError(f"{entry['where']}: {exc}. Fix: point it at a DatasetSpec.") from None
    register_dataset(name, spec, path.parent / DATA_FILES, where=entry["where"])
    ORIGINS[("dataset", name)] = str(path)


def _register_recipe(name: str, entry: dict, path: Path) -> None:
    from attacks.recipes import RECIPES

    _lazy(RECIPES)(name, entry, path)


def _register_method(name: str, entry: dict, path: Path) -> None:
    from bench.methods import METHODS

    _lazy(METHODS)(name, entry, path)


# (kind, name) -> the plug-in file that registered it (`bench ls` prints it as the origin)
ORIGINS: dict[tuple[str, str], str] = {}
REGISTER = {
    "suites": lambda name, entry, path: _lazy(_suite_registry())(name, entry, path),
    "tasks": _register_task,
    "datasets": _register_dataset,
    "recipes": _register_recipe,
    "methods": _register_method,
}


def origin(kind: str, name: str) -> str:
    """Where a plug-in comes from: its plug-in file, or "built-in"."""
    return ORIGINS.get((kind, name), "built-in")

"""``bench.evaluate``: the Python entry point. Any encoder, from a notebook, through the run path of `bench run`
(``bench.runner.run_plan``): the same cells, keys, provenance and evidence.

    import bench
    result = bench.evaluate(SentenceTransformer(path), name="st-minilm", suites=["sts"])
    result = bench.evaluate(SentenceTransformer(path), name="st-minilm", protocol="mteb-sts")
    result.to_pandas()

It sits on top of the kernel, over the runner (which reaches the suites through its registry); ``bench/__init__.py``
re-exports it lazily, so ``import bench`` stays light. docs/python.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from bench.errors import BenchError

DEFAULT_BATCH_SIZE = 64  # as `bench run --batch-size`
ROW_COLUMNS = ("model", "suite", "task", "split", "metric", "aggregation", "attack", "value", "ci_low", "ci_high",
               "n", "seed", "profile", "weights_sha256", "model_source")


@dataclass
class Evaluation:
    """What ``evaluate`` did: per suite, its task and summary outcomes (``bench.runner.TaskOutcome``)."""

    model: str
    results_dir: Path
    outcomes: list[tuple[str, object]] = field(default_factory=list)  # (suite name, TaskOutcome)

    @property
    def cells(self) -> list[Path]:
        """The result cell files written or reused, in run order."""
        return [outcome.path for _, outcome in self.outcomes]

    @property
    def rows(self) -> list[dict]:
        """Every result row (as stored in its cell), with ``cached`` and ``cell`` (its file) added."""
        return [{**r, "cached": o.cached, "cell": str(o.path)} for _, o in self.outcomes for r in o.rows]

    def to_pandas(self):
        """One row per result row: model, suite, task, split, metric, aggregation, attack, value, ci_low,
        ci_high, n, seed, profile, weights_sha256, model_source, cached, cell, then the other stored fields."""
        import pandas as pd

        rows = self.rows
        first = [*ROW_COLUMNS, "cached", "cell"]
        rest = [k for k in dict.fromkeys(k for r in rows for k in r) if k not in first]
        return pd.DataFrame(rows, columns=first + rest)

    def __repr__(self) -> str:
        return f"Evaluation(model={self.model!r}, cells={len(self.outcomes)}, results_dir='{self.results_dir}')"


DEFAULT_PROFILE = "study"


def evaluate(model, *, name: str | None = None, suites=None, protocol: str | None = None, tasks=None,
             profile: str | None = None,
             results_dir: str | Path | None = None, seed: int = 0, batch_size: int | None = None,
             limit: int | None = None, device: str = "auto", dtype: str = "auto", overwrite: str = "only-missing",
             allow_unverified_data: bool = False, models_file: str | Path | None = None, log=None,
             **suite_options) -> Evaluation:
    """Evaluate ``model`` on ``suites`` (each its default protocol for the profile) or on the named ``protocol``
    (bench/protocols.toml: its suite, tasks, splits, averages, recipes and, unless ``profile`` is given, its
    profile), and write the result cells `bench run` writes.

    ``model``: a SentenceTransformer, a torch module or any object with ``encode(list[str]) -> (n, d) array``,
    a function of that shape, or a string ``--model`` accepts (then ``name`` may be omitted). ``name`` names
    the rows of an object; the cell key adds its identity (weights sha256 for a torch module, else the sha256 of
    its embeddings of fixed probe sentences). ``tasks``: task names (each suite runs those it has, its
    protocol's tasks when it has none of them; with ``protocol``, some of its tasks) or ``{suite: [tasks]}``.
    ``profile``: the protocol's, else "study". ``suite_options`` are the suites' options by name
    (``victim="frozen"``, ``recipes=["textfooler"]``, ...), as `bench run` flags. Returns an ``Evaluation``
    (``.to_pandas()``, ``.cells``). A BenchError (the CLI's exit 2) names the fix for bad input.
    """
    from bench.paths import Paths
    from bench.runner import RunContext, check_data, check_fits, run_plan, suites_of
    from bench.results.store import ResultStore

    profile = _profile(profile, protocol)
    batch_size = checked_settings(profile=profile, seed=seed, batch_size=batch_size, limit=limit, overwrite=overwrite)
    told, log = log, log or _console_log()  # progress goes to the caller's log when given, else to the console
    paths = Paths.from_env().with_results(results_dir)
    plan = evaluation_plan(suites, protocol, tasks, profile)
    options = checked_options(suite_options, [suite for _, suite in suites_of(plan)])
    ResultStore(paths.results).check_writable()
    ctx = RunContext(paths=paths, seed=int(seed), device=device, batch_size=batch_size,
                     limit=limit, profile=profile, overwrite=overwrite, options=options, log=log,
                     allow_unverified_data=allow_unverified_data)
    named = isinstance(model, (str, os.PathLike))
    if not named:  # an object opens in a moment: refuse what it cannot run before checking any data
        spec, encoder = open_model(model, name, paths, ctx, dtype, models_file)
        check_fits(plan, encoder, ctx)
    check_data(plan, ctx, log)
    if named:  # stored work needs nothing; else a name may need training first: only after every check
        stored = stored_evaluation(str(model), paths, ctx, dtype, models_file, plan)
        if stored is not None:
            return stored
        spec, encoder = open_model(model, name, paths, ctx, dtype, models_file)
    from dataclasses import replace

    from bench.progress import progress_to

    with progress_to(told) as progress:  # done/total and the time left at least every 30 s, as `bench run`
        done = run_plan(spec, plan, replace(ctx, progress=progress), encoder)
    return Evaluation(spec.name, paths.results, [(suite.name, o) for suite, outcomes in done for o in outcomes])


OVERWRITE = ("never", "only-missing", "always")  # as `bench run --overwrite`


def checked_settings(*, profile, seed, batch_size, limit, overwrite) -> int:
    """Refuse, before any work, what `bench run`'s flags refuse (BenchError, exit 2, naming the accepted values);
    returns the batch size to use."""
    from numbers import Integral

    from bench.plugins import PROFILES

    def whole(key: str, value, least: int) -> None:
        if isinstance(value, bool) or not isinstance(value, Integral) or value < least:
            raise BenchError(f"bench.evaluate: {key}={value!r}: give a whole number of at least {least} (as "
                             f"`bench run --{key.replace('_', '-')}`).")

    if profile not in PROFILES:
        raise BenchError(f"bench.evaluate: profile={profile!r}: choose one of {', '.join(PROFILES)}.")
    if overwrite not in OVERWRITE:
        raise BenchError(f"bench.evaluate: overwrite={overwrite!r}: choose one of {', '.join(OVERWRITE)}.")
    whole("seed", seed, 0)
    for key, value in (("batch_size", batch_size), ("limit", limit)):
        if value is not None:  # None: the default batch size, or the whole test set
            whole(key, value, 1)
    return DEFAULT_BATCH_SIZE if batch_size is None else int(batch_size)


def stored_evaluation(text: str, paths, ctx, dtype: str, models_file, plan) -> Evaluation | None:
    """The plan's cells as stored, for a model whose weights are not at hand (it would be trained, built or
    downloaded first) when every cell is stored under one set of weights (``bench.runner.stored_plan``)."""
    from dataclasses import replace

    from bench.models.encoder import dtype_name, pick_device, resolve_dtype
    from bench.models.registry import known_models, resolve_model
    from bench.runner import stored_plan, weights_at_hand

    spec = resolve_model(text, paths, models_file=models_file)
    if weights_at_hand(spec, paths, known_models(paths, models_file)):
        return None
    found = stored_plan(spec, plan, replace(ctx, dtype=dtype_name(resolve_dtype(pick_device(ctx.device), dtype))))
    if found is None:
        return None
    outcomes = [(suite.name, o) for suite, done in found for o in done]
    ctx.log(f"All {len(outcomes)} cell(s) of '{spec.name}' are stored: reused; the model is not at hand here and "
            "nothing needed it (overwrite='always' recomputes, after making it).")
    return Evaluation(spec.name, paths.results, outcomes)


def _console_log():
    """A rich console's print; when stdout is not a terminal, wide enough to keep table values whole."""
    import sys

    from rich.console import Console

    return (Console() if sys.stdout.isatty() else Console(width=100_000)).print


def _profile(profile: str | None, protocol: str | None) -> str:
    """The profile a call uses: ``profile``, else the named protocol's, else ``DEFAULT_PROFILE``."""
    from bench.protocols import protocol as named, run_profile

    if protocol is not None and not isinstance(protocol, str):
        raise BenchError(f"bench.evaluate: protocol={protocol!r}: give one protocol's name (`bench ls protocols`).")
    return run_profile(profile, named(protocol) if protocol else None, DEFAULT_PROFILE)


def evaluation_plan(suites, protocol: str | None, tasks, profile: str) -> list:
    """The plan a call runs (``bench.runner.suites_of``): the named protocol (on some of its tasks), or each
    suite's default protocol for ``profile`` (on the tasks ``tasks`` gives it) paired with the suite. ``suites``
    and ``tasks`` take names or objects (a Suite; a Task, whose suite runs it when ``suites`` is not given);
    BenchError for neither or both of suites and protocol."""
    from bench.runner import plan_protocol

    if suites is None and protocol is None and tasks is not None and any(_is_task(t) for t in _items(tasks)):
        suites = list(dict.fromkeys(t.suite for t in _items(tasks) if _is_task(t)))  # the Task objects' suites
    if (suites is None) == (protocol is None):
        raise BenchError("bench.evaluate: give suites=['sts', ...] (`bench ls suites`) or protocol='NAME' (`bench ls "
                         "protocols`), not both.")
    if protocol is not None:
        own = tasks.get(protocol_suite(protocol)) if isinstance(tasks, dict) else tasks
        return [plan_protocol(protocol=protocol, tasks=_names(own) if own else None, profile=profile)]
    chosen = [_suite(s) for s in _items(suites)]
    if not chosen:
        raise BenchError("bench.evaluate: give at least one suite, e.g. suites=['sts'] (`bench ls suites`).")
    chosen = [_with_task_objects(suite, tasks) for suite in chosen]
    return [(_default_protocol(suite, names, profile), suite) for suite, names in task_plan(chosen, tasks)]


def _items(value) -> list:
    return [value] if isinstance(value, str) or not hasattr(value, "__iter__") else list(value)


def _is_task(value) -> bool:
    return not isinstance(value, str) and hasattr(value, "suite") and hasattr(value, "dataset")


def _suite(value):
    """A suite given by name (the registered one) or as an object (a Suite, registered or not)."""
    from bench.runner import get_suite

    return get_suite(value) if isinstance(value, str) else value


def _default_protocol(suite, names: list[str] | None, profile: str):
    protocol = suite.default_protocol(profile)
    return protocol.with_tasks(names) if names else protocol


def _with_task_objects(suite, tasks):
    """``suite``, or a copy of it that also holds the Task objects of ``tasks`` that are its own (a task record
    replacing the declared one of the same name, or a new task its ``run_task`` can score)."""
    import copy

    given = {t.name: t for t in _items(tasks.get(suite.name, ()) if isinstance(tasks, dict) else tasks or ())
             if _is_task(t) and t.suite == suite.name}
    declared = {t.name: t for t in suite.tasks}
    if all(declared.get(name) == t for name, t in given.items()):
        return suite
    clone = copy.copy(suite)
    clone.tasks = tuple(given.get(name, t) for name, t in declared.items()) + tuple(
        t for name, t in given.items() if name not in declared)
    return clone


def protocol_suite(name: str) -> str:
    from bench.protocols import protocol

    return protocol(name).suite


def task_plan(suites, tasks) -> list[tuple[object, list[str] | None]]:
    """(suite, task names or None for all) per suite; unknown names fail with the closest ones."""
    if tasks is None:
        return [(s, None) for s in suites]
    if isinstance(tasks, dict):
        unknown = sorted(set(tasks) - {s.name for s in suites})
        if unknown:
            raise BenchError(f"bench.evaluate: tasks names suites {unknown} that are not in suites "
                             f"{[s.name for s in suites]}.")
        return [(s, [s.task(n).name for n in _names(tasks[s.name])] if s.name in tasks else None) for s in suites]
    names = _names(tasks)
    known = {t.name for s in suites for t in s.tasks}
    for n in names:
        if n not in known:
            from bench.errors import UnknownName

            raise UnknownName("task", n, sorted(known))
    return [(s, [n for n in names if n in {t.name for t in s.tasks}] or None) for s in suites]


def _names(value) -> list[str]:
    """Task names, from names or Task objects."""
    return [t.name if _is_task(t) else t for t in _items(value)]


def checked_options(given: dict, suites) -> dict:
    """The suite options as ``bench run`` would pass them: known names, values of the declared type and
    choices (a string is parsed as the flag would be), lists for repeatable options."""
    import argparse

    from bench.plugins import merged_options

    merged = merged_options(suites)
    out = {}
    for key, value in given.items():
        if key not in merged:
            raise BenchError(f"bench.evaluate: '{key}' is no option of the suites {[s.name for s in suites]} "
                             f"(their options: {', '.join(sorted(merged)) or 'none'}).")
        if value is None:
            continue
        opt = merged[key][0]
        values = list(value) if opt.repeatable and not isinstance(value, str) else [value]
        try:
            parsed = [opt.parse(v) if isinstance(v, str) else v for v in values]
        except argparse.ArgumentTypeError as exc:
            raise BenchError(f"bench.evaluate: {key}: {exc}") from None
        for v in parsed:
            if opt.choices and v not in opt.choices:
                raise BenchError(f"bench.evaluate: {key}={v!r}: choose one of {', '.join(map(str, opt.choices))}.")
            if opt.minimum is not None and isinstance(v, (int, float)) and v < opt.minimum:
                raise BenchError(f"bench.evaluate: {key} must be at least {opt.minimum:g}, got {v}.")
        out[key] = parsed if opt.repeatable else parsed[0]
    return out


def open_model(model, name: str | None, paths, ctx, dtype: str, models_file):
    """(ModelSpec, encoder) for a ``--model`` string (as `bench run` opens it, training a registered model whose
    checkpoint is missing first) or a Python object, through ``bench.runner.open_model``."""
    from bench.runner import open_model as open_for_run

    if isinstance(model, (str, os.PathLike)):
        spec = named_spec(str(model), name, paths, models_file)
        prepare_named(spec, paths, ctx, dtype, models_file)
        return open_for_run(spec, paths, device=ctx.device, dtype=dtype, batch_size=ctx.batch_size,
                            models_file=models_file)
    return open_for_run(model, paths, device=ctx.device, dtype=dtype, batch_size=ctx.batch_size,
                        name=checked_object_name(name, paths, models_file))


def named_spec(text: str, name: str | None, paths, models_file):
    """The ModelSpec of a ``--model`` string; BenchError when ``name`` would file its weights under another name."""
    from bench.models.registry import resolve_model

    spec = resolve_model(text, paths, models_file=models_file)
    if name is not None and name != spec.name:
        raise BenchError(f"bench.evaluate: model '{text}' is named '{spec.name}' in its cells; name='{name}' would "
                         f"file the same weights under another name. Drop name=, or declare the model under that "
                         f"name in $BENCH_HOME/models.toml (docs/models.md).")
    return spec


def prepare_named(spec, paths, ctx, dtype: str, models_file) -> None:
    """What `bench run` does before opening a named model: refuse what cannot run (offline, fp16 off CUDA), then
    train a registered model whose checkpoint is missing (documented: it is trained first)."""
    from bench.models import hub
    from bench.models.encoder import pick_device, resolve_dtype
    from bench.models.registry import known_models
    from bench.train import train_if_missing
    from bench.train_cost import announce_training

    hub.require_model(spec, paths.models, known_models(paths, models_file))
    device = pick_device(ctx.device)
    resolve_dtype(device, dtype)  # fp16 off CUDA fails here, before any work
    announce_training(spec, paths, device, False, ctx.log)
    train_if_missing(spec, paths, device=ctx.device, seed=ctx.seed, dtype=dtype, log=ctx.log,
                     allow_unverified_data=ctx.allow_unverified_data)


def checked_object_name(name: str | None, paths, models_file) -> str:
    """``name`` for a model object's rows and cells; BenchError when missing, malformed or a registered model's."""
    import re

    from bench.models.models_file import NAME_PATTERN
    from bench.models.registry import known_models

    if not name:
        raise BenchError("bench.evaluate: a model object needs name='...' (how its rows and cells are named).")
    if not re.fullmatch(NAME_PATTERN, name):
        raise BenchError(f"bench.evaluate: name={name!r}: start with a letter or digit, then letters, digits, "
                         f"'.', '_', '+' or '-' (pattern {NAME_PATTERN.pattern}).")
    if name in known_models(paths, models_file):
        raise BenchError(f"bench.evaluate: name={name!r} is a registered model with its own weights; choose "
                         f"another name for this object (e.g. 'my-{name}').")
    return name

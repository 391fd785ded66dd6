"""The cell schema: every committed cell passes it, and no mutated cell or argument string gets a number
published from an invalid cell, a traceback, or a file written outside the roots (Hypothesis, bounded)."""

from __future__ import annotations

import copy
import json
import math
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.results.cell_schema import METRICS, CellError, validate_cell
from bench.results.store import CellKey, Result, ResultStore
from tests.conftest import committed_cells

BOUNDED = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.skipif(not committed_cells(), reason="no committed result cells in this checkout")
def test_every_committed_cell_validates():
    for path in committed_cells():
        validate_cell(json.loads(path.read_text(encoding="utf-8")))


KEY = CellKey("m", "ab" * 32, "sts", "stsb", 0, "c" * 16)


def _valid_cell(tmp_path: Path) -> dict:
    store = ResultStore(tmp_path / "seed")
    row = Result(model="m", suite="sts", task="stsb", split="test", metric="spearman", aggregation="all",
                 value=80.0, n=3, seed=0, ci_low=70.0, ci_high=90.0)
    return json.loads(store.write(KEY, [row], {"a": 1}).read_text())


JUNK = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                 st.text(max_size=5), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3),
                                                                                           st.integers(), max_size=2))
ROW_FIELDS = ("value", "n", "ci_low", "ci_high", "metric", "model", "task", "std", "seed", "aggregation")
EXTREME = st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, -5, "twenty", "80.0", None, True])
LOG_RECORDS = st.one_of(JUNK, st.lists(st.fixed_dictionaries(
    {"path": st.one_of(st.text(max_size=8), JUNK), "bytes": st.one_of(st.integers(-5, 10**6), JUNK),
     "sha256": st.one_of(st.just("a" * 64), st.text(max_size=64), JUNK)}), max_size=2))


def _shaped(row: dict, how: str) -> None:
    """Mutations of a row that keep each field's type but break what it says."""
    value = row.get("value") if isinstance(row.get("value"), (int, float)) else 80.0
    if how == "invert-ci":
        row["ci_low"], row["ci_high"] = value + 10.0, value - 10.0
    elif how == "outside-ci":
        row["ci_low"], row["ci_high"] = value + 1.0, value + 2.0
    elif how == "negative-n":
        row["n"] = -5


@st.composite
def mutated_cells(draw, base: dict):
    cell = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(["row", "row-drop", "top", "top-drop", "key", "extreme", "shape", "logs",
                                      "empty"]))
        results = cell.get("results")
        row = results[0] if isinstance(results, list) and results and isinstance(results[0], dict) else None
        if where == "row" and row is not None:
            row[draw(st.sampled_from(ROW_FIELDS))] = draw(JUNK)
        elif where == "extreme" and row is not None:
            row[draw(st.sampled_from(["value", "ci_low", "ci_high", "std", "n"]))] = draw(EXTREME)
        elif where == "shape" and row is not None:
            _shaped(row, draw(st.sampled_from(["invert-ci", "outside-ci", "negative-n"])))
        elif where == "logs":
            cell["attack_logs"] = draw(LOG_RECORDS)
        elif where == "empty":
            cell["results"] = []
        elif where == "row-drop" and row is not None:
            row.pop(draw(st.sampled_from(ROW_FIELDS)), None)
        elif where == "top":
            cell[draw(st.sampled_from(["results", "config", "cell", "written_at"]))] = draw(JUNK)
        elif where == "top-drop":
            cell.pop(draw(st.sampled_from(["results", "config", "cell"])), None)
        elif isinstance(cell.get("cell"), dict):
            cell["cell"][draw(st.sampled_from(list(KEY.__dataclass_fields__)))] = draw(JUNK)
    return cell


def _publishable(row: dict) -> bool:
    value = row.get("value")
    return (row.get("metric") in METRICS and (value is None or isinstance(value, (int, float))
                                              and not isinstance(value, bool) and math.isfinite(value)
                                              and abs(value) <= 1e9))


def test_mutated_cells_never_publish_a_number(tmp_path):
    """Hypothesis: a cell mutated in 1-3 places is either still valid or left out by every reader, with a
    warning naming it and no exception."""
    base = _valid_cell(tmp_path)

    @BOUNDED
    @given(cell=mutated_cells(base))
    def check(cell):
        root = tmp_path / "store"
        target = root / KEY.relpath()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(cell))
        try:
            validate_cell(cell)
            valid = True
        except CellError:
            valid = False
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            rows = ResultStore(root).rows()
        if not valid:
            assert rows == []
        assert all(_publishable(r) for r in rows)

    check()


NAMES = st.sampled_from(["tiny", "../x", "/abs/A", "a/b", "..", "x" * 300, "org/enc", "é·", "minilm/../../cells/m",
                         "", "--metric", "nosuch"])
COMMANDS = st.sampled_from([("compare",), ("report", "--card"), ("divergence",), ("publish", "--dry-run", "--model"),
                            ("ls",), ("compare", "--metric", "nosuch")])


def test_argument_strings_give_documented_exits(tmp_path, monkeypatch, capsys):
    """Hypothesis: cheap commands with hostile names exit 0, 1 or 2 with no traceback and write nothing outside
    BENCH_HOME and the results dir."""
    from app.cli import main

    home, results = tmp_path / "home", tmp_path / "results"
    home.mkdir()
    monkeypatch.setenv("BENCH_HOME", str(home))
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(results))
    monkeypatch.chdir(tmp_path)
    store = ResultStore(results)
    row = Result(model="tiny", suite="sts", task="stsb", split="test", metric="spearman", aggregation="all",
                 value=80.0, n=3, seed=0)
    store.write(CellKey("tiny", "ab" * 32, "sts", "stsb", 0, "c" * 16), [row], {})
    before = {p for p in tmp_path.rglob("*") if not p.is_relative_to(home) and not p.is_relative_to(results)}

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(command=COMMANDS, names=st.lists(NAMES, min_size=0, max_size=3))
    def check(command, names):
        capsys.readouterr()
        try:
            code = main([*command, *names, "--out", str(tmp_path / "out")] if command[0] == "report"
                        else [*command, *names])
        except SystemExit as exc:
            code = exc.code
        _, err = capsys.readouterr()
        assert code in (0, 1, 2) and "Traceback" not in err, (command, names, err)
        after = {p for p in tmp_path.rglob("*") if not p.is_relative_to(home) and not p.is_relative_to(results)
                 and not p.is_relative_to(tmp_path / "out")}
        assert after <= before, after - before

    check()


PLUGIN_JUNK = st.one_of(JUNK, st.dictionaries(st.text(max_size=4), st.one_of(JUNK, st.dictionaries(
    st.text(max_size=4), JUNK, max_size=2)), max_size=3))


def test_mutated_plugins_json_never_crashes_or_loses_an_entry(tmp_path):
    """Hypothesis: a plugins.json with any of its tables replaced by junk, or cut short, is read as valid or as
    empty with a warning (never an exception), and an update keeps every entry a valid file held."""
    import warnings

    from bench.results import metadata

    base = {"bench_version": "1", "package_versions": {"torch": "2"}, "suites": {"sts": {"label": "STS"}},
            "models": {"m": {"backbone": "x"}, "n": {"backbone": "y"}}}

    @settings(max_examples=40, deadline=None)
    @given(key=st.sampled_from(["suites", "models", "package_versions", "bench_version", "extra"]),
           junk=PLUGIN_JUNK, cut=st.one_of(st.none(), st.integers(0, 200)))
    def check(key, junk, cut):
        root = tmp_path / "results"
        root.mkdir(exist_ok=True)
        text = json.dumps({**base, key: junk})
        (root / metadata.FILE).write_text(text if cut is None else text[:cut])
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            before = metadata.read(root)
            after_path = metadata.update(root, lambda data: data.setdefault("models", {}).update({"new": {}}))
        after = json.loads(after_path.read_text())
        assert metadata._load(root)[1] is None and "new" in after["models"]
        for table in ("suites", "models"):
            assert set(before.get(table) or {}) <= set(after[table])

    check()

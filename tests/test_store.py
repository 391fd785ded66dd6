import csv
import json
import re
from pathlib import Path

import pytest

from bench.results.store import CellKey, Result, ResultStore


def _row(value):
    return Result(model="m", suite="sts", task="stsb", split="test", metric="spearman", aggregation="all",
                  value=value, n=3, seed=0)


KEY = CellKey("m", "ab" * 32, "sts", "stsb", 0, "c" * 16)


def test_exception_mid_write_keeps_previous_file(tmp_path, monkeypatch):
    store = ResultStore(tmp_path)
    path = store.write(KEY, [_row(80.0)], {"a": 1})
    before = path.read_text()

    def die(fd):
        raise KeyboardInterrupt  # Ctrl-C after the bytes are written, before the rename

    monkeypatch.setattr("bench.io.os.fsync", die)
    with pytest.raises(KeyboardInterrupt):
        store.write(KEY, [_row(10.0)], {"a": 1})
    assert path.read_text() == before
    assert json.loads(before)["results"][0]["value"] == 80.0
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left behind


def test_nan_is_stored_as_empty_field(tmp_path):
    store = ResultStore(tmp_path)
    store.write(KEY, [_row(float("nan"))], {})
    board = store.write_leaderboard()
    rows = list(csv.DictReader(board.open()))
    assert rows[0]["value"] == ""
    assert "nan" not in board.read_text().lower()


def test_leaderboard_is_derived_from_cells(tmp_path):
    store = ResultStore(tmp_path)
    store.write(KEY, [_row(81.5)], {})
    rows = list(csv.DictReader(store.write_leaderboard().open()))
    assert float(rows[0]["value"]) == 81.5 and rows[0]["model"] == "m"


def test_leaderboard_rows_are_slim_and_name_their_cell(tmp_path):
    """A row carries its sorting fields and short provenance; the configuration and resources stay in the cell
    file the row names (relative to the results directory), which holds the full commit and wall time."""
    from bench.results.store import COMMIT_DIGITS, FLOAT_DIGITS, LEADERBOARD_COLUMNS, SHA_DIGITS

    store = ResultStore(tmp_path)
    config = json.dumps({"attack": "x" * 500})
    commit = "0123456789abcdef" * 2 + "01234567-dirty"
    row = Result(**{**_row(81.5).__dict__, "value": 2 / 3, "config": config, "resources": config, "package_versions": config,
                    "git_commit": commit, "wall_s": 12.3456789, "config_hash": KEY.config_hash,
                    "weights_sha256": KEY.weights_sha256})
    store.write(KEY, [row], {})
    board = store.write_leaderboard()
    (shown,) = csv.DictReader(board.open())
    assert tuple(shown) == LEADERBOARD_COLUMNS and "x" * 500 not in board.read_text()
    stored = json.loads((tmp_path / shown["cell"]).read_text())["results"][0]
    assert stored["config"] == config and stored["git_commit"] == commit and stored["wall_s"] == row.wall_s
    assert shown["git_commit"] == commit[:COMMIT_DIGITS] + "-dirty" and float(shown["wall_s"]) == round(row.wall_s, 2)
    assert shown["weights_sha256"] == KEY.weights_sha256[:SHA_DIGITS] and shown["config_hash"] == KEY.config_hash
    assert stored["weights_sha256"] == KEY.weights_sha256 and stored["value"] == 2 / 3  # the cell keeps them whole
    assert shown["value"] == f"{2 / 3:.{FLOAT_DIGITS}g}"


def test_leaderboard_order_does_not_depend_on_the_order_cells_are_read(tmp_path):
    from bench.results.store import leaderboard_text

    store = ResultStore(tmp_path)
    for seed in (2, 0, 1):
        store.write(CellKey("m", "ab" * 32, "sts", "stsb", seed, "c" * 16), [Result(**{**_row(80.0 + seed).__dict__,
                                                                                     "seed": seed})], {})
    rows = store.leaderboard_rows()
    assert leaderboard_text(rows) == leaderboard_text(rows[::-1])
    assert [r["seed"] for r in csv.DictReader(store.write_leaderboard().open())] == ["0", "1", "2"]


def test_an_evidence_file_changed_after_a_read_is_read_again(tmp_path):
    """read_evidence keeps what it decoded for a report's other readers, but a sidecar rewritten after the
    first read (same process, same store) is checked again, and an altered one is refused, never served
    from memory."""
    import gzip

    import numpy as np

    from bench.scoring.stats import Evidence, Sample
    from bench.results.store import EvidenceWarning
    from bench.results.uncertainty import apply_uncertainty

    store = ResultStore(tmp_path)
    sample = Sample(["a", "b", "c"], {"pred": np.array([0.1, 0.5, 0.9]), "gold": np.array([1.0, 2.0, 3.0])})
    row = _row(100.0)
    row.evidence = Evidence("spearman", sample, ("pred", "gold"))
    path = store.write(KEY, [row], {}, evidence=apply_uncertainty([row]))
    first = store.read_evidence(path)
    assert first is not None and store.read_evidence(path) is first
    side = store.evidence_path(path)
    payload = json.loads(gzip.decompress(side.read_bytes()))
    next(iter(payload["samples"].values()))["columns"]["pred"][0] = 0.7
    side.write_bytes(gzip.compress(json.dumps(payload).encode()))
    with pytest.warns(EvidenceWarning, match="was altered"):
        assert store.read_evidence(path) is None


def test_the_results_page_lists_the_leaderboard_columns():
    from bench.results.store import LEADERBOARD_COLUMNS

    page = (Path(__file__).resolve().parents[1] / "docs" / "results.md").read_text(encoding="utf-8")
    spans = {re.sub(r"\s+", " ", span) for span in re.findall(r"`([^`]+)`", page)}
    assert ", ".join(LEADERBOARD_COLUMNS) in spans, "docs/results.md: list the leaderboard's columns"

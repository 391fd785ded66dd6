import csv
import http.server
import io
import json
import tarfile
import threading
from functools import partial

import pytest

from app.cli import main
from tests.conftest import stored_row


def _run(*args):
    return main(["run", "--device", "cpu", *args])


def _cells(paths, suite="sts"):
    return sorted((paths.results / "cells" / "tiny" / suite).rglob("*.json"))


def test_sts_end_to_end_then_cached_then_overwrite(bench_env, tiny_model, capsys):
    assert _run("--suite", "sts", "--model", "tiny") == 0
    out = capsys.readouterr().out
    assert "avg" in out and "Wall time" in out and str(bench_env.results) in out.replace("\n", "")
    cells = _cells(bench_env)
    assert len(cells) == 8  # seven tasks + the average
    rows = list(csv.DictReader((bench_env.results / "leaderboard.csv").open()))
    assert {r["task"] for r in rows} == {"sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "avg"}
    for r in rows:
        stored = stored_row(bench_env.results, r)  # the leaderboard names the cell holding the full provenance
        assert stored["weights_sha256"].startswith(r["weights_sha256"]) and r["git_commit"] is not None
        assert stored["package_versions"] and "package_versions" not in r
        assert stored["pooler"] == "avg" and stored["dtype"] == "float32" and stored["device"] == "cpu"
        assert float(r["value"]) == pytest.approx(stored["value"], rel=1e-9)  # the cell keeps all 17 digits
    stamps = {c: c.stat().st_mtime_ns for c in cells}

    assert _run("--suite", "sts", "--model", "tiny") == 0
    assert "Reused 8 finished cell(s)" in capsys.readouterr().out
    assert {c: c.stat().st_mtime_ns for c in _cells(bench_env)} == stamps

    assert _run("--suite", "sts", "--model", "tiny", "--task", "stsb", "--overwrite", "always") == 0
    assert "Reused" not in capsys.readouterr().out
    assert any(c.stat().st_mtime_ns != stamps[c] for c in cells if "stsb" in str(c))


def test_limit_is_part_of_the_cell_configuration(bench_env, tiny_model, capsys):
    assert _run("--suite", "sts", "--model", "tiny", "--task", "stsb") == 0
    assert _run("--suite", "sts", "--model", "tiny", "--task", "stsb", "--limit", "4") == 0
    stsb = [c for c in _cells(bench_env) if "/stsb/" in str(c)]
    assert len(stsb) == 2
    ns = sorted(json.loads(c.read_text())["results"][0]["n"] for c in stsb)
    assert ns == [4, 8]
    # 'never' keeps whatever exists for the cell, whatever its configuration
    capsys.readouterr()
    assert _run("--suite", "sts", "--model", "tiny", "--task", "stsb", "--limit", "3", "--overwrite", "never") == 0
    assert "Reused 1" in capsys.readouterr().out


def test_a_protocol_runs_by_name_on_some_of_its_tasks(bench_env, tiny_model, capsys):
    """`bench run --protocol`: the protocol's suite, its profile, its average (its metrics only) over the tasks
    asked for, which the average row names; a task it lacks is refused before any work."""
    assert _run("--protocol", "mteb-sts", "--model", "tiny", "--task", "stsb", "--task", "sickr") == 0
    assert "protocol mteb-sts" in capsys.readouterr().out.replace("\n", " ")
    rows = {(r["task"], r["metric"]): r for r in csv.DictReader((bench_env.results / "leaderboard.csv").open())}
    average = rows[("avg", "spearman")]
    assert ("avg", "pearson") not in rows and average["aggregation"] == "mean-of-tasks" and average["n"] == "2"
    stored = stored_row(bench_env.results, average)
    assert average["profile"] == "paper" and json.loads(stored["config"])["average_of"] == ["sickr", "stsb"]
    # its task cells are those of the suite's default protocol: a default run reuses them
    assert _run("--suite", "sts", "--model", "tiny", "--task", "stsb", "--profile", "paper") == 0
    assert "Reused 1 finished cell(s)" in capsys.readouterr().out
    assert _run("--protocol", "mteb-sts", "--model", "tiny", "--task", "cola") == 2
    assert "task of protocol 'mteb-sts'" in capsys.readouterr().err
    assert _run("--protocol", "mteb-sts", "--suite", "sts", "--model", "tiny") == 2  # one of the two
    assert "not allowed with argument --protocol" in capsys.readouterr().err


def test_alignment_suite(bench_env, tiny_model):
    assert _run("--suite", "alignment", "--model", "tiny") == 0
    (cell,) = _cells(bench_env, "alignment")
    rows = {r["metric"]: r for r in json.loads(cell.read_text())["results"]}
    assert rows["align"]["n"] == 4  # gold >= 4.0 in the fixture: 4.8, 4.2, 4.6, 4.0
    assert 0.0 <= rows["align"]["value"] <= 4.0 and rows["uniform"]["value"] <= 0.0
    for metric in ("align", "uniform"):  # every row carries its interval
        assert rows[metric]["ci_low"] <= rows[metric]["value"] <= rows[metric]["ci_high"], metric


def test_unknown_model_exits_2_with_suggestions(capsys):
    assert _run("--suite", "sts", "--model", "simcse-bertt") == 2
    assert "Did you mean: simcse-bert" in capsys.readouterr().err


def test_unknown_task_exits_2(capsys):
    assert _run("--suite", "sts", "--model", "minilm", "--task", "sts17") == 2
    assert "sts12" in capsys.readouterr().err


def test_truncated_data_file_exits_2_naming_the_file(bench_env, tiny_model, capsys):
    gold = bench_env.data / "senteval/downstream/STS/STSBenchmark/sts-test.csv"
    gold.write_text(gold.read_text()[:-20])
    assert _run("--suite", "sts", "--model", "tiny", "--task", "stsb") == 2
    err = capsys.readouterr().err
    assert "sts-test.csv" in err and "bench data fetch stsb" in err


def test_data_verify_flags_corruption(bench_env, capsys):
    assert main(["data", "verify", "sick"]) == 0
    f = bench_env.data / "senteval/downstream/SICK/SICK_trial.txt"
    text = f.read_text()
    f.write_text(text.replace("a man", "a men", 1))  # same size, different bytes
    assert main(["data", "verify", "sick"]) == 2
    assert "SICK_trial.txt" in capsys.readouterr().err


def test_data_fetch_from_loopback_server(tmp_path, monkeypatch):
    """A SentEval-style tar served over HTTP on 127.0.0.1 is fetched, unpacked and verified."""
    from bench.data import datasets as data
    from tests.conftest import register_fixture_dataset

    served = tmp_path / "served"
    served.mkdir()
    payload = {"downstream/MR/rt-polarity.pos": b"good movie\n", "downstream/MR/rt-polarity.neg": b"bad film\n"}
    with tarfile.open(served / "senteval.tar", "w") as tf:
        for name, blob in payload.items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tf.addfile(info, io.BytesIO(blob))
    # The reference hashes are the fixture's own, registered from a copy laid out as the tar would be.
    ref_root = tmp_path / "ref"
    for name, blob in payload.items():
        (ref_root / "senteval" / name).parent.mkdir(parents=True, exist_ok=True)
        (ref_root / "senteval" / name).write_bytes(blob)
    register_fixture_dataset(monkeypatch, ref_root, "mr", "senteval/downstream/MR")

    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/senteval.tar"
        spec = data.DATASETS["mr"]
        monkeypatch.setitem(data.DATASETS, "mr", data.DatasetSpec(
            **{**spec.__dict__, "sources": (data.Source(url, into="senteval"),)}))
        monkeypatch.setenv("BENCH_DATA_DIR", str(tmp_path / "fresh"))
        monkeypatch.setenv("BENCH_HOME", str(tmp_path / "home"))
        assert main(["data", "fetch", "mr"]) == 0
    finally:
        server.shutdown()
    assert (tmp_path / "fresh/senteval/downstream/MR/rt-polarity.pos").read_bytes() == b"good movie\n"


@pytest.mark.slow
def test_minilm_sts_on_real_data(tmp_path, monkeypatch, capsys):
    """The offline default on the real STS-B test set lands where all-MiniLM-L6-v2 is known to be."""
    import os

    if not os.environ.get("BENCH_DATA_DIR"):
        pytest.skip("BENCH_DATA_DIR is not set")
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(tmp_path))
    assert _run("--suite", "sts", "--model", "minilm", "--task", "stsb") == 0
    (cell,) = (tmp_path / "cells/minilm/sts/stsb").glob("*.json")
    rows = {(r["metric"], r["aggregation"]): r for r in json.loads(cell.read_text())["results"]}
    assert rows[("spearman", "all")]["n"] == 1379
    assert 75.0 < rows[("spearman", "all")]["value"] < 90.0


def test_profiles_come_from_one_place():
    """run, grid and train offer the same profiles, and the trainer, the suites' per-profile tables and the
    attack suites' default protocols have an entry for each (or, like anli, refuse the missing one with a
    message)."""
    import argparse

    from app.commands import grid, run, train
    from bench.plugins import PROFILES
    from bench.train import PROFILES as TRAIN_PROFILES
    from suites.adversarial import VICTIM_SETTINGS
    from bench.protocols import default_for

    assert PROFILES == ("smoke", "study", "paper")
    for command in (run, grid, train):
        parser = argparse.ArgumentParser()
        command.add_arguments(parser)
        (action,) = [a for a in parser._actions if a.dest == "profile"]
        assert tuple(action.choices) == PROFILES, command.__name__
    assert set(TRAIN_PROFILES) == set(PROFILES)
    assert all(set(settings) == set(PROFILES) for settings in VICTIM_SETTINGS.values())
    assert all(default_for(suite, profile).recipes for suite in ("adversarial", "advsts") for profile in PROFILES)

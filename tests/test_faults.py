"""Fault suite: bad inputs and faults as a new user or an unlucky operator meets them.

Each test asserts the exit code, that the message names the fix, and that no finished result
changed (the cells written before the fault keep their bytes and modification times).
Every test's docstring starts with the case and ``exit N``; ``python tests/test_faults.py --table``
prints the table of docs/reliability.md from them (a test below checks that page holds it).
Directory faults use a tiny tmpfs (we mount one where we may; else the test is skipped with the reason).
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO)) if __name__ == "__main__" else None  # `python tests/test_faults.py --table`

from app.cli import main  # noqa: E402


# --- helpers ---------------------------------------------------------------------------------

def bench(*args: str, capsys) -> tuple[int, str, str]:
    """Run the CLI in-process: (exit code, stdout, stderr). argparse's own exit counts as the exit code."""
    capsys.readouterr()
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, " ".join(err.split())  # messages are wrapped by no one, but be safe


def cells(results: Path) -> dict[str, tuple[bytes, int]]:
    """Every finished cell: relative path -> (bytes, mtime_ns)."""
    return {p.relative_to(results).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted((results / "cells").rglob("*.json"))}


def assert_unchanged(before: dict, results: Path) -> None:
    after = cells(results)
    for rel, (blob, mtime) in before.items():
        assert rel in after, f"finished cell {rel} disappeared"
        assert after[rel] == (blob, mtime), f"finished cell {rel} changed"


def stsb_value(results: Path, model: str = "tiny") -> dict[str, float]:
    """config_hash -> the STS-B Spearman ('all') of each stored stsb cell."""
    out = {}
    for path in (results / "cells" / model / "sts" / "stsb").glob("*.json"):
        for r in json.loads(path.read_text())["results"]:
            if (r["metric"], r["aggregation"]) == ("spearman", "all"):
                out[r["config_hash"]] = r["value"]
    return out


RUN = ("run", "--device", "cpu", "--suite", "sts", "--model", "tiny")
STSB_TEST = "senteval/downstream/STS/STSBenchmark/sts-test.csv"


@pytest.fixture
def finished(bench_env, tiny_model, monkeypatch, capsys):
    """The tiny model's STS-B cell (and the STS average over it) finished on the fixture data, with gold
    scores written as in the real file ("2.500"); returns the results dir's cells before the fault."""
    from tests.conftest import STS_PAIRS, register_fixture_dataset

    stsb = bench_env.data / "senteval/downstream/STS/STSBenchmark"
    pairs = [(a, b, 2.5 if (a, b) == ("a child is happy", "a child is sad") else g) for a, b, g in STS_PAIRS]
    for split in ("train", "dev", "test"):
        (stsb / f"sts-{split}.csv").write_text("".join(
            f"main-captions\tMSRvid\t2012test\t{i:04d}\t{g:.3f}\t{a}\t{b}\n" for i, (a, b, g) in enumerate(pairs)))
    register_fixture_dataset(monkeypatch, bench_env.data, "stsb", "senteval/downstream/STS/STSBenchmark")
    code, out, err = bench(*RUN, "--task", "stsb", capsys=capsys)
    assert code == 0, err
    return cells(bench_env.results)


@contextlib.contextmanager
def tmpfs(path: Path, size: str):
    """A tiny tmpfs at ``path`` for the test's duration, or a skip naming why it cannot be mounted."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (run the fault suite as root, or in a container, to cover it)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}): no CAP_SYS_ADMIN?")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


# --- unknown names ---------------------------------------------------------------------------

def test_unknown_model(capsys):
    """Unknown model name: exit 2; the message suggests close names and `bench ls models`."""
    code, _, err = bench(*RUN[:5], "--model", "simcse-bertt", capsys=capsys)
    assert code == 2 and "Did you mean: simcse-bert" in err and "bench ls models" in err


def test_unknown_suite(capsys):
    """Unknown suite name: exit 2; the message suggests close names and `bench ls suites`."""
    code, _, err = bench("run", "--suite", "stss", "--model", "minilm", capsys=capsys)
    assert code == 2 and "sts" in err and "bench ls suites" in err


def test_unknown_task(finished, bench_env, capsys):
    """Unknown task name: exit 2; before any model loads, the message lists close names and `bench ls tasks`."""
    code, _, err = bench(*RUN, "--task", "sts17", capsys=capsys)
    assert code == 2 and "sts12" in err and "bench ls tasks" in err
    assert_unchanged(finished, bench_env.results)


def test_unknown_method_points_to_bench_ls_methods(tmp_path, capsys):
    """Unknown training method: exit 2; the message names `bench ls methods`, which exists and lists them."""
    code, _, err = bench("train", "--method", "simcsee", "--backbone", "minilm", capsys=capsys)
    assert code == 2 and "Did you mean: simcse" in err and "bench ls methods" in err
    code, out, _ = bench("ls", "methods", capsys=capsys)
    assert code == 0 and "\nsimcse\t" in out


# --- bad values ------------------------------------------------------------------------------

def test_bad_overwrite_value(finished, bench_env, capsys):
    """`--overwrite sometimes`: exit 2; the message lists the accepted values."""
    code, _, err = bench(*RUN, "--overwrite", "sometimes", capsys=capsys)
    assert code == 2 and "never" in err and "only-missing" in err and "always" in err
    assert_unchanged(finished, bench_env.results)


@pytest.mark.parametrize("value", ["0", "-3", "ten"])
def test_bad_limit(finished, bench_env, capsys, value):
    """`--limit 0`, `-3` or `ten`: exit 2; at parse time, the message names the flag and the accepted range."""
    code, _, err = bench(*RUN, "--limit", value, capsys=capsys)
    assert code == 2 and "--limit" in err and ("integer >= 1" in err or "expected an integer" in err)
    assert_unchanged(finished, bench_env.results)


@pytest.mark.parametrize("command", ["run", "train"])
def test_bad_batch_size(finished, bench_env, tiny_bert_dir, capsys, command):
    """`--batch-size 0` or `-3` for run and train: exit 2; at parse time, naming the flag and the range (was a
    traceback)."""
    for value in ("0", "-3"):
        args = (*RUN, "--batch-size", value) if command == "run" else (
            "train", "--method", "simcse", "--backbone", str(tiny_bert_dir), "--batch-size", value)
        code, _, err = bench(*args, capsys=capsys)
        assert code == 2 and "--batch-size" in err and "integer >= 1" in err
    assert_unchanged(finished, bench_env.results)
    assert not (bench_env.home / "train").exists()  # nothing started


@pytest.mark.parametrize("value", ["-5", "0"])
def test_bad_train_steps(bench_env, tiny_bert_dir, capsys, value):
    """`bench train --steps -5` or `0`: exit 2; at parse time, naming the flag and the range (it used to train
    a whole epoch)."""
    code, _, err = bench("train", "--method", "simcse", "--backbone", str(tiny_bert_dir), "--steps", value,
                         capsys=capsys)
    assert code == 2 and "--steps" in err and "integer >= 1" in err
    assert not (bench_env.home / "train").exists()


# --- data ------------------------------------------------------------------------------------

def test_missing_data_file(finished, bench_env, capsys):
    """A missing data file: exit 2; the message names the file and `bench data fetch`."""
    (bench_env.data / STSB_TEST).unlink()
    code, _, err = bench(*RUN, "--task", "stsb", "--overwrite", "always", capsys=capsys)
    assert code == 2 and "sts-test.csv" in err and "missing" in err and "bench data fetch stsb" in err
    assert_unchanged(finished, bench_env.results)


def test_truncated_data_file(finished, bench_env, capsys):
    """A truncated data file: exit 2; the message names the file, the sizes and `bench data fetch`."""
    path = bench_env.data / STSB_TEST
    path.write_bytes(path.read_bytes()[:-20])
    code, _, err = bench(*RUN, "--task", "stsb", "--overwrite", "always", capsys=capsys)
    assert code == 2 and "sts-test.csv" in err and "bytes" in err and "bench data fetch stsb" in err
    assert_unchanged(finished, bench_env.results)


def test_same_size_corruption_is_refused_and_never_reuses_a_cell(finished, bench_env, capsys):
    """One-byte same-size corruption (STS-B gold 2.500 -> 0.500): exit 2; the message names the file, the
    restore and --allow-unverified-data; with that flag a separate cell (recorded as unverified), never the clean one."""
    path = bench_env.data / STSB_TEST
    clean_text = path.read_text()
    assert clean_text.count("\t2.500\t") == 1
    path.write_text(clean_text.replace("\t2.500\t", "\t0.500\t"))
    assert len(path.read_bytes()) == len(clean_text.encode())  # same size: a size check cannot see it
    for overwrite in ("only-missing", "always"):
        code, _, err = bench(*RUN, "--task", "stsb", "--overwrite", overwrite, capsys=capsys)
        assert code == 2 and str(path) in err and "bench data fetch stsb" in err
        assert "--allow-unverified-data" in err and "sha256" in err
    assert_unchanged(finished, bench_env.results)

    (clean_hash, clean_value), = stsb_value(bench_env.results).items()
    code, out, err = bench(*RUN, "--task", "stsb", "--allow-unverified-data", capsys=capsys)
    assert code == 0 and "Reused" not in out and "sts-test.csv" in out  # the unverified file is named
    values = stsb_value(bench_env.results)
    assert len(values) == 2  # a new cell beside the clean one
    (dirty_hash, dirty_value), = ((h, v) for h, v in values.items() if h != clean_hash)
    assert dirty_value != clean_value
    dirty_cell = next((bench_env.results / "cells/tiny/sts/stsb").glob(f"*-{dirty_hash[:8]}.json"))
    row_config = json.loads(json.loads(dirty_cell.read_text())["results"][0]["config"])
    assert any("sts-test.csv" in item for item in row_config["data_unverified"])
    assert_unchanged(finished, bench_env.results)

    path.write_text(clean_text)  # restored: the clean cell is reused, the unverified one never is
    code, out, _ = bench(*RUN, "--task", "stsb", capsys=capsys)
    assert code == 0 and "Reused 2 finished cell(s)" in out
    assert_unchanged(finished, bench_env.results)


def test_cell_computed_on_other_data_is_not_reused(finished, bench_env, monkeypatch, capsys):
    """Data replaced by a new reference release (hashes updated): exit 0; the cell is recomputed, because
    the data's fingerprint is part of the cell key; the old cell stays."""
    from tests.conftest import register_fixture_dataset

    path = bench_env.data / STSB_TEST
    path.write_text(path.read_text().replace("\t2.500\t", "\t0.500\t"))
    register_fixture_dataset(monkeypatch, bench_env.data, "stsb", "senteval/downstream/STS/STSBenchmark")
    code, out, err = bench(*RUN, "--task", "stsb", capsys=capsys)
    assert code == 0 and "Reused" not in out, err
    assert len(set(stsb_value(bench_env.results).values())) == 2
    assert_unchanged(finished, bench_env.results)


def test_data_hashes_are_cached_by_file_identity(finished, bench_env, monkeypatch, capsys):
    """Re-runs on unchanged data: exit 0; no data file is hashed again (cache keyed by path, size, mtime and
    ctime under $BENCH_HOME), in this process or a fresh one; a touched file is hashed once more."""
    from bench.data import datasets as data

    hashed = []
    original = data._sha256_file
    monkeypatch.setattr(data, "_sha256_file", lambda p: hashed.append(p) or original(p))
    assert bench(*RUN, "--task", "stsb", capsys=capsys)[0] == 0
    assert hashed == []
    data._HASH_CACHES.clear()  # as a new process: only the cache file remains
    assert bench(*RUN, "--task", "stsb", capsys=capsys)[0] == 0
    assert hashed == [] and (bench_env.cache / data.HASH_CACHE).exists()
    path = bench_env.data / STSB_TEST
    path.write_text(path.read_text())  # same bytes, new mtime: hashed once more, then reused
    assert bench(*RUN, "--task", "stsb", capsys=capsys)[0] == 0
    assert [p.name for p in hashed] == ["sts-test.csv"]
    assert_unchanged(finished, bench_env.results)


def test_malformed_sts_line_names_file_and_line(finished, bench_env, capsys):
    """A malformed same-size STS-B line: exit 2; the content check names the file; with
    --allow-unverified-data the reader names the file, the line number and the fix (exit 2 too)."""
    path = bench_env.data / STSB_TEST
    lines = path.read_text().splitlines(keepends=True)
    lines[3] = lines[3].replace("\t", " ", 1)  # one field fewer, same size
    path.write_text("".join(lines))
    code, _, err = bench(*RUN, "--task", "stsb", "--overwrite", "always", capsys=capsys)
    assert code == 2 and "sts-test.csv" in err and "bench data fetch stsb" in err
    code, _, err = bench(*RUN, "--task", "stsb", "--allow-unverified-data", capsys=capsys)
    assert code == 2 and f"{path}:4: malformed line" in err and "bench data verify" in err
    assert_unchanged(finished, bench_env.results)


# --- models ----------------------------------------------------------------------------------

def test_missing_backbone_offline(finished, bench_env, monkeypatch, capsys):
    """A backbone that is neither local nor cached, offline: exit 2; the message names it and the fixes."""
    import huggingface_hub.constants
    import transformers.utils.hub

    from bench.models import registry

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(transformers.utils.hub, "_is_offline_mode", True)
    monkeypatch.setitem(registry.MODELS, "gone", registry.ModelSpec(
        name="gone", backbone="no-such-org/no-such-model", pooler="avg", max_len=64))
    code, _, err = bench(*RUN[:6], "gone", "--task", "stsb", capsys=capsys)
    assert code == 2 and "no-such-org/no-such-model" in err and "internet access" in err and "minilm" in err
    assert_unchanged(finished, bench_env.results)


def test_refused_pickle_weights_say_so(finished, bench_env, tiny_bert_dir, tmp_path, monkeypatch, capsys):
    """A `pytorch_model.bin` whose pickle references code: exit 2; the message says the safe loader refused
    a pickle and names safetensors (not "neither a local directory nor reachable on the Hub")."""
    import shutil

    import torch

    from bench.models import registry

    model_dir = tmp_path / "pickled"
    shutil.copytree(tiny_bert_dir, model_dir)
    (model_dir / "model.safetensors").unlink()
    torch.save({"embeddings.word_embeddings.weight": torch.zeros(2), "code": print}, model_dir / "pytorch_model.bin")
    monkeypatch.setitem(registry.MODELS, "pickled", registry.ModelSpec(
        name="pickled", backbone=str(model_dir), pooler="avg", max_len=64))
    code, _, err = bench(*RUN[:6], "pickled", "--task", "stsb", capsys=capsys)
    assert code == 2 and "pickle" in err and "refused" in err and "model.safetensors" in err
    assert "neither a local directory" not in err
    assert_unchanged(finished, bench_env.results)


def test_truncated_safetensors_weights(finished, bench_env, tiny_bert_dir, tmp_path, monkeypatch, capsys):
    """A truncated `model.safetensors`: exit 2; the message names the file as damaged or truncated and how to get
    it again (was a SafetensorError traceback); no cell is written for the model."""
    import shutil

    from bench.models import registry

    model_dir = tmp_path / "torn"
    shutil.copytree(tiny_bert_dir, model_dir)
    weights = model_dir / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    monkeypatch.setitem(registry.MODELS, "torn", registry.ModelSpec(
        name="torn", backbone=str(model_dir), pooler="avg", max_len=64))
    code, _, err = bench(*RUN[:6], "torn", "--task", "stsb", capsys=capsys)
    assert code == 2 and "model.safetensors is damaged or truncated" in err and "Fix: copy or download" in err
    assert "Traceback" not in err and not (bench_env.results / "cells" / "torn").exists()
    assert_unchanged(finished, bench_env.results)


@pytest.mark.parametrize("where", ["{tmp}/nonexistent/dir", "./no-such-dir", "~/no-such-bench-dir"])
def test_model_directory_that_does_not_exist(bench_env, tmp_path, capsys, where):
    """`--model /nonexistent/dir` (or `./x`, `~/x`): exit 2; the message says the directory does not exist (it
    used to suggest `hf:/nonexistent/dir`); a file says it is a file; `org/name` still suggests `hf:org/name`."""
    text = where.format(tmp=tmp_path)
    code, _, err = bench(*RUN[:5], "--model", text, capsys=capsys)
    assert code == 2 and "does not exist" in err and "Fix: check the path" in err and "hf:" not in err
    (tmp_path / "weights.bin").write_bytes(b"")
    code, _, err = bench(*RUN[:5], "--model", str(tmp_path / "weights.bin"), capsys=capsys)
    assert code == 2 and "is a file, not a model directory" in err and "Fix:" in err
    code, _, err = bench(*RUN[:5], "--model", "no-such-org/no-such-model", capsys=capsys)
    assert code == 2 and "hf:no-such-org/no-such-model" in err
    assert "Traceback" not in err and not (bench_env.results / "cells").exists()


@pytest.mark.parametrize("card", [b"{", b'{"name": "x"}', b"[]", b"\xff\xfe"])
def test_bad_bench_card(bench_env, tiny_bert_dir, tmp_path, capsys, card):
    """A checkpoint directory whose `bench_card.json` is not JSON, not UTF-8 or lacks its fields: exit 2; the
    message names the file, what is wrong and the fixes (re-train, or delete the card) (was garbled)."""
    import shutil

    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(tiny_bert_dir, checkpoint)
    (checkpoint / "bench_card.json").write_bytes(card)
    code, _, err = bench(*RUN[:5], "--model", str(checkpoint), capsys=capsys)
    assert code == 2 and f"The bench card {checkpoint / 'bench_card.json'}" in err
    assert re.search(r"is not valid JSON \(line 1 column \d+|lacks the text field\(s\) |is not UTF-8", err)
    assert "Fix: re-train the model" in err and "delete bench_card.json" in err
    assert "Traceback" not in err and not (bench_env.results / "cells").exists()


def test_damaged_card_of_a_trained_model_is_retrained(bench_env, tiny_bert_dir, corpus, capsys):
    """`bench train` again when the trained model's `bench_card.json` is damaged: exit 0; it says the card does not
    parse and trains the model again, replacing it with a readable card (it used to end in a JSON traceback)."""
    args = _train(tiny_bert_dir, corpus, "--name", "carded", "--eval-every", "0", steps="2")
    assert bench(*args, capsys=capsys)[0] == 0
    card = bench_env.home / "models" / "carded" / "bench_card.json"
    card.write_text('{"name": ')
    code, out, err = bench(*args, capsys=capsys)
    assert code == 0 and f"{card} does not parse" in " ".join(out.split()) and "Traceback" not in err, err
    assert json.loads(card.read_text())["name"] == "carded"


# --- help and devices ------------------------------------------------------------------------

def command_paths() -> list[tuple[str, ...]]:
    """Every command path the CLI offers, from its own registry and parsers: (), ("run",), ... and any
    subcommand a command adds with add_subparsers."""
    import argparse

    from app.cli import COMMANDS, build_parser

    def children(parser, prefix):
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    found += [(*prefix, name), *children(child, (*prefix, name))]
        return found

    paths = [()]
    for name in COMMANDS:  # each command's arguments are added only when it is the one named
        paths += [p for p in children(build_parser([name]), ()) if p[0] == name]
    return list(dict.fromkeys(paths))


def test_help_of_every_command(capsys):
    """`bench --help` and `bench COMMAND --help` for every registered command: exit 0; each prints its usage
    (`bench --help` used to crash on the "%" of "95% CI")."""
    from app.cli import COMMANDS

    paths = command_paths()
    assert {p[0] for p in paths if p} == set(COMMANDS)
    for path in paths:
        code, out, err = bench(*path, "--help", capsys=capsys)
        assert code == 0 and out.startswith(" ".join(("usage: bench", *path))), (path, err)
        assert "Traceback" not in err


@pytest.fixture
def no_accelerator(monkeypatch):
    """A machine without CUDA or MPS, whatever machine runs the test."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


@pytest.mark.parametrize("command, device, shown", [
    ("run", "bogus", "is not a device. Fix: choose one of auto, cpu, cuda, cuda:N, mps"),
    ("run", "mps", "no Apple MPS device on this machine. Fix: --device cpu"),
    ("run", "cuda:1", "no CUDA device is visible. Fix: --device cpu"),
    ("train", "bogus", "is not a device. Fix: choose one of auto, cpu, cuda, cuda:N, mps"),
    ("train", "mps", "no Apple MPS device on this machine. Fix: --device cpu"),
    ("train", "cuda", "no CUDA device is visible. Fix: --device cpu"),
    ("grid", "gpu", "is not a device. Fix: choose one of auto, cpu, cuda, cuda:N, mps"),
])
def test_device_is_checked_when_parsed(finished, bench_env, tiny_bert_dir, no_accelerator, monkeypatch, capsys,
                                       command, device, shown):
    """`--device bogus`, or `mps`/`cuda` on a machine without one, for run, train (and grid's syntax): exit 2; when
    the flag is parsed, before any model loads, naming the choices and the fix (train used to run on the CPU)."""
    from bench.models import encoder

    monkeypatch.setattr(encoder.Encoder, "from_spec", lambda *a, **k: pytest.fail("a model was loaded"))
    args = {"run": (*RUN[:1], *RUN[3:], "--task", "stsb"),
            "train": ("train", "--method", "simcse", "--backbone", str(tiny_bert_dir), "--steps", "2"),
            "grid": ("grid", "--models", "tiny", "--suites", "sts", "--dry-run")}[command]
    code, _, err = bench(*args, "--device", device, capsys=capsys)
    assert code == 2 and f"argument --device: " in err and shown in err and "Traceback" not in err
    assert not (bench_env.home / "train").exists() and not (bench_env.home / "models").exists()
    assert_unchanged(finished, bench_env.results)


# --- --set -----------------------------------------------------------------------------------

def _train(tiny_bert_dir, corpus, *extra, steps: str | None = "6"):
    sized = ("--batch-size", "4", "--steps", steps) if steps else ()
    return ("train", "--method", "simcse", "--backbone", str(tiny_bert_dir), "--data", str(corpus),
            "--device", "cpu", *sized, *extra)


@pytest.fixture
def corpus(tmp_path):
    from tests.test_train import write_corpus

    return write_corpus(tmp_path / "corpus.txt", 48)


def test_set_unknown_key(bench_env, tiny_bert_dir, corpus, capsys):
    """`--set temprature=0.1` (a typo): exit 2; the message lists the trainer settings and the hyper-parameters."""
    code, _, err = bench(*_train(tiny_bert_dir, corpus, "--set", "temprature=0.1"), capsys=capsys)
    assert code == 2 and "temprature" in err and "temperature" in err and "max_steps" in err
    assert not (bench_env.home / "train").exists()


def test_set_bad_type(bench_env, tiny_bert_dir, corpus, capsys):
    """`--set temperature=cold`: exit 2; the message names the key and the expected type."""
    code, _, err = bench(*_train(tiny_bert_dir, corpus, "--set", "temperature=cold"), capsys=capsys)
    assert code == 2 and "temperature" in err and "expected a float" in err
    assert not (bench_env.home / "train").exists()


@pytest.mark.parametrize("setting, shown", [("temperature=0", "must be > 0"), ("lr=-1", "must be > 0"),
                                            ("max_steps=-5", "must be >= 0"), ("batch_size=0", "must be >= 1")])
def test_set_bad_value(bench_env, tiny_bert_dir, corpus, capsys, setting, shown):
    """`--set temperature=0`, `lr=-1`, `max_steps=-5`, `batch_size=0`: exit 2; before training, the message
    names the accepted range and how to set it."""
    code, _, err = bench(*_train(tiny_bert_dir, corpus, "--set", setting, steps=None), capsys=capsys)
    assert code == 2 and shown in err and f"--set {setting.split('=')[0]}=N" in err
    assert not (bench_env.home / "train").exists()


def test_method_probability_out_of_range(bench_env, tiny_bert_dir, corpus, capsys):
    """A method probability out of [0, 1] (`--method adcse --set adversary_momentum=1.5`): exit 2; the message
    names the range and the flag."""
    args = list(_train(tiny_bert_dir, corpus, "--set", "adversary_momentum=1.5"))
    args[args.index("simcse")] = "adcse"
    code, _, err = bench(*args, capsys=capsys)
    assert code == 2 and "adversary_momentum=1.5" in err and "in [0, 1]" in err
    assert "--set adversary_momentum=N" in err
    assert not (bench_env.home / "train").exists()


# --- NaN -------------------------------------------------------------------------------------

def _last_state(home: Path, name: str):
    from safetensors.torch import load_file

    last = home / "train" / name / "last"
    if not (last / "trainer_state.json").exists():
        return None, None
    return json.loads((last / "trainer_state.json").read_text())["step"], load_file(str(last / "modules.safetensors"))


def test_nan_from_huge_lr_keeps_the_last_finite_state(bench_env, tiny_bert_dir, corpus, capsys):
    """`--set lr=1e9`: exit 2; the message names lr as the likely cause and its fix; the kept "last" state is
    the one before the explosion (finite, small weights), not the state after the bad update."""
    from safetensors.torch import load_file

    # warm-up: update 1 has lr 0 (a good state to keep), update 2 explodes, step 3's loss is NaN.
    code, _, err = bench(*_train(tiny_bert_dir, corpus, "--set", "lr=1e9", "--set", "warmup_steps=3",
                                 "--eval-every", "1", "--name", "hot"), capsys=capsys)
    assert code == 2 and "non-finite at step 3" in err and "lr=1e+09" in err and "Fix: --lr 3e-05" in err
    step, weights = _last_state(bench_env.home, "hot")
    assert step == 1 and "last finite state (step 1)" in err
    initial = load_file(str(tiny_bert_dir / "model.safetensors"))
    embedding = weights["encoder.embeddings.word_embeddings.weight"]
    assert bool(embedding.isfinite().all()) and float(embedding.abs().max()) < 10
    assert float((embedding - initial["embeddings.word_embeddings.weight"]).abs().max()) == 0.0  # lr 0 at update 1
    assert not (bench_env.home / "models" / "hot").exists()


def test_nan_from_temperature_near_zero_names_temperature(bench_env, tiny_bert_dir, corpus, capsys):
    """`--set temperature=1e-40` (near 0): exit 2; the message blames the temperature (not the learning
    rate) and gives the method's default as the fix; no exploded state is kept."""
    code, _, err = bench(*_train(tiny_bert_dir, corpus, "--set", "temperature=1e-40", "--name", "cold"),
                         capsys=capsys)
    assert code == 2 and "temperature=1e-40 is near 0" in err and "--set temperature=0.05" in err
    assert "lr=" not in err
    assert _last_state(bench_env.home, "cold") == (None, None)


# --- the results directory -------------------------------------------------------------------

def test_read_only_results_dir(finished, bench_env, tmp_path, monkeypatch, capsys):
    """A read-only results directory (a tmpfs remounted ro): exit 2; before any work, the message names the
    directory and BENCH_RESULTS_DIR; the finished cells are untouched."""
    import shutil

    with tmpfs(tmp_path / "ro", "32m") as mount:
        shutil.copytree(bench_env.results, mount / "results", copy_function=shutil.copy2)
        monkeypatch.setenv("BENCH_RESULTS_DIR", str(mount / "results"))
        before = cells(mount / "results")
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        code, out, err = bench(*RUN, "--task", "sts12", capsys=capsys)
        assert code == 2 and "cannot be written" in err and "BENCH_RESULTS_DIR" in err
        assert "Nothing was computed" in err and "sts12" not in out
        assert_unchanged(before, mount / "results")


def test_full_results_dir(finished, bench_env, tmp_path, monkeypatch, capsys):
    """A full results directory (a 20 MiB tmpfs filled up): exit 2; before any work, the message names the
    lack of space and the fixes; the finished cells are untouched."""
    import shutil

    with tmpfs(tmp_path / "full", "20m") as mount:
        shutil.copytree(bench_env.results, mount / "results", copy_function=shutil.copy2)
        monkeypatch.setenv("BENCH_RESULTS_DIR", str(mount / "results"))
        before = cells(mount / "results")
        with open(mount / "ballast", "wb") as fh, contextlib.suppress(OSError):
            while True:
                fh.write(b"\0" * (1 << 20))
                fh.flush()
        code, _, err = bench(*RUN, "--task", "sts12", capsys=capsys)
        assert code == 2 and "results directory" in err and "free space" in err and "BENCH_RESULTS_DIR" in err
        assert_unchanged(before, mount / "results")


def test_corrupt_cell_is_quarantined_and_recomputed(finished, bench_env, capsys):
    """A truncated cell JSON: exit 0; a warning names it, it moves to quarantine/ and is recomputed; other
    tasks and the leaderboard work meanwhile (they used to fail with a bare JSONDecodeError)."""
    stsb = next(rel for rel in finished if "/stsb/" in rel)
    path = bench_env.results / stsb
    torn = path.read_bytes()[:-40]
    path.write_bytes(torn)
    code, _, err = bench(*RUN, "--task", "sts12", capsys=capsys)  # another task: the leaderboard skips it
    assert code == 0 and f"Skipped unreadable result cell {path}" in err and "Re-run" in err
    code, out, err = bench(*RUN, "--task", "stsb", capsys=capsys)  # its own task: quarantined, recomputed
    assert code == 0 and f"Result cell {path} was unreadable" in err and "recomputed" in err
    (quarantined,) = (bench_env.results / "quarantine").rglob("*.json.[0-9]*")
    assert quarantined.read_bytes() == torn
    fresh = json.loads(path.read_text())["results"]
    old = json.loads(finished[stsb][0])["results"]
    assert [r["value"] for r in fresh] == [r["value"] for r in old]  # recomputed to the same numbers
    # the STS average over it is rewritten (its task was recomputed) with the same numbers
    for rel, (blob, _) in finished.items():
        assert [r["value"] for r in json.loads((bench_env.results / rel).read_text())["results"]] == \
            [r["value"] for r in json.loads(blob)["results"]]


def test_report_skips_a_corrupt_cell_and_says_so(finished, bench_env, tmp_path, capsys):
    """`bench report` with an unreadable cell: exit 0; it skips the cell, names it, and moves nothing."""
    avg = next(rel for rel in finished if "/avg/" in rel)
    path = bench_env.results / avg
    path.write_text("{")
    code, out, err = bench("report", "--out", str(tmp_path / "reports"), capsys=capsys)
    assert code == 0, err
    assert str(path) in err and "1 unreadable result cell(s) skipped" in out
    assert path.read_text() == "{"
    assert_unchanged({k: v for k, v in finished.items() if k != avg}, bench_env.results)


@pytest.mark.parametrize("inside", [False, True])
def test_results_path_is_a_file(finished, bench_env, tmp_path, monkeypatch, capsys, inside):
    """A results path that is a file (or lies under one): exit 2; before any work, the message says which path
    is a file and names the fix (it used to say "File exists ... make it writable or free space")."""
    blocker = tmp_path / "results-file"
    blocker.write_text("not a directory\n")
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(blocker / "results" if inside else blocker))
    code, out, err = bench(*RUN, "--task", "sts12", capsys=capsys)
    assert code == 2 and f"{blocker} is a file, not a directory" in err and "Fix: move that file away" in err
    assert "BENCH_RESULTS_DIR" in err and "free space" not in err and "Traceback" not in err
    assert blocker.read_text() == "not a directory\n"
    assert_unchanged(finished, bench_env.results)


@pytest.mark.parametrize("value", ['"abc"', "NaN", "Infinity", "true"])
def test_non_numeric_cell_value_is_quarantined(finished, bench_env, tmp_path, capsys, value):
    """A cell whose value is not a finite number (text, NaN, Infinity, true): exit 0; like a truncated cell, a
    warning names it, `bench report` leaves its rows out, `bench run` moves it to quarantine/ and recomputes it
    (both used to crash)."""
    stsb = next(rel for rel in finished if "/stsb/" in rel)
    path = bench_env.results / stsb
    text = path.read_text()
    payload = json.loads(text)
    original = payload["results"][0]["value"]
    bad = text.replace(f'"value": {json.dumps(original)}', f'"value": {value}', 1)
    assert bad != text
    path.write_text(bad)
    code, out, err = bench("report", "--out", str(tmp_path / "reports"), capsys=capsys)
    assert code == 0 and str(path) in err and "not a finite number" in err and "Traceback" not in err
    assert "1 unreadable result cell(s) skipped" in out
    board = (bench_env.results / "leaderboard.csv").read_text()
    assert ",stsb," not in board  # the bad cell's rows are not scored
    code, out, err = bench(*RUN, "--task", "stsb", capsys=capsys)
    assert code == 0 and f"Result cell {path} was unreadable" in err and "Traceback" not in err
    (quarantined,) = (bench_env.results / "quarantine").rglob("*.json.[0-9]*")
    assert quarantined.read_text() == bad
    assert json.loads(path.read_text())["results"][0]["value"] == original  # recomputed to the same number


def test_checkpoint_files_get_the_results_permissions(bench_env, tiny_bert_dir, corpus, tmp_path, capsys):
    """A trained checkpoint under umask 022: exit 0; its files (weights included) and resume state get 0644 like
    result files, and its directories 0755 (safetensors wrote the weights 0600)."""
    from bench.io import atomic_write_text

    old = os.umask(0o022)
    try:
        code, _, err = bench(*_train(tiny_bert_dir, corpus, "--name", "perms", "--eval-every", "0", steps="2"),
                             capsys=capsys)
        atomic_write_text(tmp_path / "cell.json", "{}")  # how result files are written
    finally:
        os.umask(old)
    assert code == 0, err
    result_mode = (tmp_path / "cell.json").stat().st_mode & 0o777
    written = [p for root in (bench_env.home / "models" / "perms", bench_env.home / "train" / "perms")
               for p in root.rglob("*")]
    assert any(p.name == "model.safetensors" for p in written)
    modes = {p.relative_to(bench_env.home).as_posix(): p.stat().st_mode & 0o777 for p in written}
    assert {k: m for k, m in modes.items() if m != (0o755 if (bench_env.home / k).is_dir() else result_mode)} == {}


def test_result_files_respect_the_umask(finished, bench_env, capsys):
    """Umask 002: exit 0; result files and the leaderboard get 0664 (the umask's), not a forced 0600."""
    old = os.umask(0o002)
    try:
        assert bench(*RUN, "--task", "sts12", capsys=capsys)[0] == 0
    finally:
        os.umask(old)
    cell = next((bench_env.results / "cells/tiny/sts/sts12").glob("*.json"))
    assert (cell.stat().st_mode & 0o777) == 0o664
    assert ((bench_env.results / "leaderboard.csv").stat().st_mode & 0o777) == 0o664
    assert_unchanged(finished, bench_env.results)


# --- evidence --------------------------------------------------------------------------------

@pytest.fixture
def tiny_stsb_cell(finished, bench_env, tiny_bert_dir, monkeypatch, capsys):
    """tiny's STS-B cell, and a second model ('twin': tiny's weights under another name) with its own, so
    `bench compare tiny twin` has a shared cell; returns tiny's cell path."""
    from bench.models import registry

    monkeypatch.setitem(registry.MODELS, "twin", registry.ModelSpec(
        name="twin", backbone=str(tiny_bert_dir), pooler="avg", max_len=64))
    code, _, err = bench(*RUN[:6], "twin", "--task", "stsb", capsys=capsys)
    assert code == 0, err
    return bench_env.results / next(rel for rel in finished if "/stsb/" in rel)


def _sidecar(cell: Path) -> Path:
    from bench.results.store import ResultStore

    return ResultStore.evidence_path(cell)


def _alter_evidence(side: Path) -> None:
    """Rewrite the sidecar as valid evidence with one prediction changed (parses; its sha256 differs)."""
    import gzip

    payload = json.loads(gzip.decompress(side.read_bytes()))
    sample = next(iter(payload["samples"].values()))
    column = sample["columns"]["pred"] if isinstance(sample["columns"], dict) else sample["columns"][0]
    column[0] = -column[0] if column[0] else 1.0
    side.write_bytes(gzip.compress(json.dumps(payload).encode()))


EVIDENCE_FAULTS = {"missing": (lambda side: side.unlink(), "is missing"),
                   "truncated": (lambda side: side.write_bytes(side.read_bytes()[:-30]), "was altered or truncated"),
                   "altered": (_alter_evidence, "was altered")}


@pytest.mark.parametrize("fault", list(EVIDENCE_FAULTS))
def test_bad_evidence_is_reported_and_recomputed(tiny_stsb_cell, bench_env, tmp_path, capsys, fault):
    """A cell's evidence file missing, truncated or altered (sha256 differs from the one the cell records): exit 2
    from `bench compare`, naming the cell and the `bench run` that redoes it (it printed an empty table, exit 0);
    `bench report` names it (exit 0); `bench run` moves the cell and its evidence to quarantine/ and recomputes
    them instead of reusing them."""
    from bench.results.store import EVIDENCE_HASH

    side = _sidecar(tiny_stsb_cell)
    damage, shown = EVIDENCE_FAULTS[fault]
    damage(side)
    code, out, err = bench("compare", "tiny", "twin", "--suite", "sts", "--task", "stsb", capsys=capsys)
    assert code == 2 and f"{tiny_stsb_cell}: its evidence file {side.name} {shown}" in err and "Traceback" not in err
    assert "bench run --suite sts --model tiny --task stsb --seed 0" in err and "Fix: re-run" in err
    code, out, err = bench("report", "--out", str(tmp_path / "reports"), capsys=capsys)
    assert code == 0 and f"Result cell {tiny_stsb_cell}: its evidence file {side.name} {shown}" in err
    assert "1 result cell(s) with missing or corrupt evidence" in out and "Traceback" not in err
    code, out, err = bench(*RUN, "--task", "stsb", capsys=capsys)
    assert code == 0 and f"Result cell {tiny_stsb_cell} had bad evidence" in err and "Reused" not in out
    quarantined = sorted(p.name for p in (bench_env.results / "quarantine").rglob("*"))
    assert any(n.startswith(tiny_stsb_cell.name + ".") for n in quarantined)
    assert any(n.startswith(side.name + ".") for n in quarantined) == (fault != "missing")
    import hashlib

    assert json.loads(tiny_stsb_cell.read_text())[EVIDENCE_HASH] == hashlib.sha256(side.read_bytes()).hexdigest()
    code, out, err = bench("compare", "tiny", "twin", "--suite", "sts", "--task", "stsb", capsys=capsys)
    assert code == 0 and "stsb" in out and "bootstrap" in out, err


def test_cells_without_a_recorded_evidence_hash(tiny_stsb_cell, bench_env, capsys):
    """Cells written before cells recorded their evidence sha256: exit 0; their evidence is used once it parses
    (an unparsable file is named, exit 2 from compare); `python -m bench.results.store backfill-evidence-hashes DIR`
    records the sha256 of each sidecar that parses (exit 0), after which an altered file is caught."""
    from bench.results.store import EVIDENCE_HASH

    side = _sidecar(tiny_stsb_cell)
    good = side.read_bytes()
    payload = json.loads(tiny_stsb_cell.read_text())
    del payload[EVIDENCE_HASH]
    tiny_stsb_cell.write_text(json.dumps(payload, indent=1) + "\n")
    code, out, err = bench("compare", "tiny", "twin", "--suite", "sts", "--task", "stsb", capsys=capsys)
    assert code == 0 and "bootstrap" in out and "evidence" not in err, err
    side.write_bytes(good[:-30])
    code, _, err = bench("compare", "tiny", "twin", "--suite", "sts", "--task", "stsb", capsys=capsys)
    assert code == 2 and f"{tiny_stsb_cell}: its evidence file {side.name} does not parse" in err

    backfill = [sys.executable, "-m", "bench.results.store", "backfill-evidence-hashes", str(bench_env.results)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(backfill, capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert done.returncode == 2 and f"not recorded: Result cell {tiny_stsb_cell}: its evidence file" in done.stderr
    assert EVIDENCE_HASH not in json.loads(tiny_stsb_cell.read_text())  # an unparsable file is never vouched for
    side.write_bytes(good)
    done = subprocess.run(backfill, capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert done.returncode == 0 and "1 cell(s) now record their evidence sha256" in done.stdout, done.stderr
    import hashlib

    assert json.loads(tiny_stsb_cell.read_text())[EVIDENCE_HASH] == hashlib.sha256(good).hexdigest()
    assert json.loads(tiny_stsb_cell.read_text())["results"] == payload["results"]
    _alter_evidence(side)
    code, _, err = bench("compare", "tiny", "twin", "--suite", "sts", "--task", "stsb", capsys=capsys)
    assert code == 2 and f"{tiny_stsb_cell}: its evidence file {side.name} was altered" in err


def test_publish_refuses_bad_evidence(tiny_stsb_cell, bench_env, tmp_path, capsys):
    """`bench publish` of a cell whose evidence file was altered: exit 2 before anything is copied, naming the
    cell and the `bench run` that recomputes it."""
    _alter_evidence(_sidecar(tiny_stsb_cell))
    dest = tmp_path / "published"
    code, _, err = bench("publish", "--model", "tiny", "--to", str(dest), capsys=capsys)
    assert code == 2 and f"Result cell {tiny_stsb_cell}: its evidence file" in err and "was altered" in err
    assert "Fix: re-run the `bench run`" in err and "Traceback" not in err and not (dest / "cells").exists()


def _writer(root: str, writer: int, count: int) -> None:
    from bench.results.store import CellKey, Result, ResultStore

    store = ResultStore(Path(root))
    for i in range(count):
        key = CellKey(f"m{writer}", "ab" * 32, "sts", f"t{i}", 0, "c" * 16)
        store.write(key, [Result(model=f"m{writer}", suite="sts", task=f"t{i}", split="test", metric="spearman",
                                 aggregation="all", value=float(i), n=1, seed=0)], {})
        store.write_leaderboard()


def test_two_concurrent_writers_lose_no_cell(tmp_path):
    """Two processes writing cells and rebuilding the leaderboard at once: exit 0; both finish and the last
    leaderboard holds every cell (rebuilt under an exclusive flock, which a rebuild waits for)."""
    import csv
    import multiprocessing

    from bench.results.store import ResultStore

    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, 25)) for w in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    rows = list(csv.DictReader((tmp_path / "leaderboard.csv").open()))
    assert len(rows) == 50 and {r["model"] for r in rows} == {"m1", "m2"}

    board = tmp_path / "leaderboard.csv"
    board.unlink()
    store = ResultStore(tmp_path)
    with store._leaderboard_lock():  # a rebuild waits while another holds the lock
        waiting = ctx.Process(target=_writer, args=(str(tmp_path), 3, 1))
        waiting.start()
        time.sleep(3)
        assert waiting.is_alive() and not board.exists()
    waiting.join(60)
    assert waiting.exitcode == 0 and len(list(csv.DictReader(board.open()))) == 51


# --- kill -9 ---------------------------------------------------------------------------------

DRIVER = r'''
"""Run the CLI with the test's tiny model and fixture data registered; optionally stall (for kill -9)."""
import json, os, sys, time
from pathlib import Path

from bench.data import datasets as data
from bench.models import registry
from app.cli import main
from tests.conftest import register_fixture_dataset

setup = json.loads(os.environ["FAULT_SETUP"])
registry.MODELS["tiny"] = registry.ModelSpec(name="tiny", backbone=setup["backbone"], pooler="avg", max_len=64)


class Patch:
    def setitem(self, table, key, value):
        table[key] = value


for name, root in setup["datasets"].items():
    register_fixture_dataset(Patch(), Path(setup["data"]), name, root)


def stall(marker):
    Path(marker).write_text("stalled")
    while True:
        time.sleep(60)


if os.environ.get("FAULT_STALL_AFTER_WRITES"):  # after N cells are written (bench run)
    from bench.results.store import ResultStore

    original, done = ResultStore.write, []

    def write(self, *args, **kwargs):
        path = original(self, *args, **kwargs)
        done.append(path)
        if len(done) >= int(os.environ["FAULT_STALL_AFTER_WRITES"]):
            stall(os.environ["FAULT_MARKER"])
        return path

    ResultStore.write = write
if os.environ.get("FAULT_STALL_AT_STEP"):  # inside optimiser step N, after a resume point was saved
    from bench.methods.base import Method

    original_after = Method.after_step

    def after_step(self, step):
        original_after(self, step)
        if step + 1 >= int(os.environ["FAULT_STALL_AT_STEP"]):
            stall(os.environ["FAULT_MARKER"])

    Method.after_step = after_step
sys.exit(main(sys.argv[1:]))
'''


def _driver(tmp_path: Path, bench_env, tiny_bert_dir):
    from bench.data import datasets as data

    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    roots = {name: data.DATASETS[name].root for name in ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sick")}
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "FAULT_SETUP": json.dumps({"backbone": str(tiny_bert_dir), "data": str(bench_env.data), "datasets": roots}),
           "FAULT_MARKER": str(tmp_path / "stalled"), "BENCH_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    return script, env


def _run_until_stalled_then_kill(script, env, args, marker: Path, timeout: float = 600) -> None:
    proc = subprocess.Popen([sys.executable, str(script), *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} before the stall point: {proc.stderr.read()[-2000:]}")
        assert time.monotonic() < deadline, "never reached the stall point"
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL


def test_kill_9_during_a_run_then_resume(bench_env, tiny_model, tmp_path, capsys):
    """kill -9 in the middle of `bench run` (after its first cell), then the same command: exit 0; it reuses
    that cell byte for byte, computes only the rest, and ends with the numbers of an uninterrupted run."""
    script, env = _driver(tmp_path, bench_env, tiny_model.backbone)
    run = (*RUN, "--task", "sts12", "--task", "stsb")  # two task cells and their average
    env["FAULT_STALL_AFTER_WRITES"] = "1"
    _run_until_stalled_then_kill(script, env, run, tmp_path / "stalled")
    first = cells(bench_env.results)
    assert len(first) == 1 and not list((bench_env.results / "cells").rglob(".*.tmp"))
    del env["FAULT_STALL_AFTER_WRITES"]
    done = subprocess.run([sys.executable, str(script), *run], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Reused 1 finished cell(s)" in done.stdout.replace("\n", " ")
    assert_unchanged(first, bench_env.results)
    resumed = {rel: [r["value"] for r in json.loads(blob)["results"]] for rel, (blob, _) in cells(bench_env.results).items()}
    assert len(resumed) == 3

    straight = tmp_path / "straight"
    env["BENCH_RESULTS_DIR"] = str(straight)
    assert subprocess.run([sys.executable, str(script), *run], env=env, capture_output=True, timeout=600).returncode == 0
    assert {rel: [r["value"] for r in json.loads(blob)["results"]] for rel, (blob, _) in cells(straight).items()} == resumed


def test_kill_9_during_training_then_resume(bench_env, tiny_bert_dir, corpus, tmp_path):
    """kill -9 during `bench train` (inside step 5), then the same command: exit 0; it resumes at step 4
    (the last resume point) and its losses equal an uninterrupted run's to the last bit."""
    script, env = _driver(tmp_path, bench_env, tiny_bert_dir)
    args = [*_train(tiny_bert_dir, corpus, "--eval-every", "2", "--set", "log_every=1", "--set", "eval_limit=8",
                    steps="8")]
    env["FAULT_STALL_AT_STEP"] = "5"
    _run_until_stalled_then_kill(script, env, [*args, "--name", "killed"], tmp_path / "stalled")
    state = json.loads((bench_env.home / "train/killed/last/trainer_state.json").read_text())
    assert state["step"] == 4
    del env["FAULT_STALL_AT_STEP"]
    done = subprocess.run([sys.executable, str(script), *args, "--name", "killed"], env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Resuming 'killed' at step 4/8" in done.stdout
    straight = subprocess.run([sys.executable, str(script), *args, "--name", "straight"], env=env,
                              capture_output=True, text=True, timeout=900)
    assert straight.returncode == 0, straight.stderr[-2000:]
    losses = {n: json.loads((bench_env.home / "train" / n / "losses.json").read_text()) for n in ("killed", "straight")}
    assert len(losses["killed"]) == 8 and losses["killed"] == losses["straight"]


# --- output ----------------------------------------------------------------------------------

def test_piped_tables_keep_whole_values(finished, bench_env, capsys):
    """Piped output (not a terminal): exit 0; `bench ls models` prints tab-separated whole values, `--json`
    parses, and the results table of `bench run` cuts no cell to '…'."""
    from bench.models.registry import MODELS

    code, out, _ = bench("ls", "models", capsys=capsys)
    assert code == 0 and "…" not in out
    lines = out.splitlines()
    assert lines[0].split("\t")[:3] == ["name", "backbone", "pooler"]
    assert {line.split("\t")[0] for line in lines[1:]} == set(MODELS)
    assert any(spec.description and spec.description in out for spec in MODELS.values())
    code, out, _ = bench("ls", "recipes", "--json", capsys=capsys)
    assert code == 0 and {r["name"] for r in json.loads(out)} >= {"textfooler", "pwws", "bert-attack"}
    code, out, _ = bench(*RUN, capsys=capsys)
    assert code == 0 and "…" not in out
    for line in ("sts12", "sickr", "avg"):
        assert re.search(rf"\b{line}\b", out)
    assert_unchanged(finished, bench_env.results)


# --- a store that trusts nothing it reads ------------------------------------------------------------------

def _st_model(root: Path, tiny_bert_dir: Path, mode: str = "pooling_mode_mean_tokens", max_len: int = 64) -> Path:
    """A sentence-transformers directory around the tiny BERT: modules.json, 1_Pooling, max_seq_length."""
    import shutil

    model = root / "st-tiny"
    if not model.exists():
        shutil.copytree(tiny_bert_dir, model)
    (model / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (model / "1_Pooling").mkdir(exist_ok=True)
    (model / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 32, "pooling_mode_cls_token": mode == "pooling_mode_cls_token",
         "pooling_mode_mean_tokens": mode == "pooling_mode_mean_tokens"}))
    (model / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_len}))
    return model


def test_pooler_is_in_the_cell_key(finished, bench_env, tiny_bert_dir, capsys):
    """A local model run with --pooler avg, then --pooler cls: exit 0; the second run computes its own cell
    (it used to reuse the mean-pooled number and print it under "(cls)")."""
    run = ("run", "--device", "cpu", "--suite", "sts", "--task", "stsb", "--model", str(tiny_bert_dir))
    name = tiny_bert_dir.name
    assert bench(*run, "--pooler", "avg", capsys=capsys)[0] == 0
    code, out, err = bench(*run, "--pooler", "cls", capsys=capsys)
    assert code == 0 and "Reused" not in out, out
    values = stsb_value(bench_env.results, name)
    assert len(values) == 2 and len(set(values.values())) == 2


@pytest.mark.parametrize("edit", ["pooling", "max_seq_length"])
def test_pooling_config_and_max_length_are_in_the_cell_key(finished, bench_env, tiny_bert_dir, tmp_path, capsys,
                                                           edit):
    """A directory's 1_Pooling config or max_seq_length edited between two runs: exit 0; the second run
    computes a new cell (it used to reuse the old number)."""
    model = _st_model(tmp_path, tiny_bert_dir)
    run = ("run", "--device", "cpu", "--suite", "sts", "--task", "stsb", "--model", str(model))
    assert bench(*run, capsys=capsys)[0] == 0
    _st_model(tmp_path, tiny_bert_dir, **({"mode": "pooling_mode_cls_token"} if edit == "pooling" else {"max_len": 4}))
    code, out, err = bench(*run, capsys=capsys)
    assert code == 0 and "Reused" not in out, out
    values = stsb_value(bench_env.results, model.name)
    assert len(values) == 2 and len(set(values.values())) == 2


def _stsb_cell(finished, bench_env) -> Path:
    return bench_env.results / next(rel for rel in finished if "/stsb/" in rel)


def _mutate(path: Path, change) -> str:
    payload = json.loads(path.read_text())
    change(payload)
    text = json.dumps(payload, indent=1)
    path.write_text(text)
    return text


INVALID_CELLS = {
    "empty results": (lambda c: c["results"].clear(), "'results' list is empty"),
    "no metric": (lambda c: c["results"][0].pop("metric"), "metric is missing"),
    "value 1e308": (lambda c: c["results"][0].update(value=1e308), "beyond any real score"),
    "inverted CI": (lambda c: c["results"][0].update(ci_low=90.0, ci_high=10.0), "inverted"),
    "value outside its CI": (lambda c: c["results"][0].update(value=c["results"][0]["ci_high"] + 5),
                             "outside its interval"),
    "n = -5": (lambda c: c["results"][0].update(n=-5), "negative"),
    "n = 'twenty'": (lambda c: c["results"][0].update(n="twenty"), "valid integer"),
    "int-typed key": (lambda c: c.update(cell=5), "cell is 5"),
}


@pytest.mark.parametrize("fault", list(INVALID_CELLS))
def test_invalid_cell_is_quarantined_and_never_published(finished, bench_env, tmp_path, capsys, fault):
    """A cell that parses but breaks the cell schema (empty results, a row without metric, 1e308, an inverted CI,
    a value outside its CI, n = -5 or "twenty", an int-typed key): exit 0; `bench report` and `bench compare`
    name it and publish none of its numbers, `bench run` quarantines and recomputes it (they used to reuse,
    publish or crash on it)."""
    change, said = INVALID_CELLS[fault]
    path = _stsb_cell(finished, bench_env)
    original = stsb_value(bench_env.results)
    bad = _mutate(path, change)
    code, out, err = bench("report", "--out", str(tmp_path / "reports"), capsys=capsys)
    assert code == 0 and str(path) in err and said in err and "Traceback" not in err
    assert ",stsb," not in (bench_env.results / "leaderboard.csv").read_text()
    code, out, err = bench(*RUN, "--task", "stsb", capsys=capsys)
    assert code == 0 and f"Result cell {path} was unreadable" in err and "Reused" not in out
    (quarantined,) = (bench_env.results / "quarantine").rglob("*.json.[0-9]*")
    assert quarantined.read_text() == bad
    assert stsb_value(bench_env.results) == original  # recomputed to the same number


@pytest.mark.parametrize("kind", ["directory", "dangling link", "deeply nested", "not UTF-8"])
def test_cell_path_that_is_not_a_cell_file(finished, bench_env, tmp_path, capsys, kind):
    """A cell path that is a directory or a dangling link, a deeply nested JSON, non-UTF-8 bytes: exit 0; named
    and skipped by `bench report` (each used to end in a traceback)."""
    path = bench_env.results / "cells" / "tiny" / "sts" / "stsb" / "seed9-000000000000-00000000.json"
    if kind == "directory":
        path.mkdir()
    elif kind == "dangling link":
        path.symlink_to(tmp_path / "nowhere.json")
    else:
        path.write_bytes(b"[" * 100_000 if kind == "deeply nested" else b'{"cell": "\xff\xfe"}')
    code, out, err = bench("report", "--out", str(tmp_path / "reports"), capsys=capsys)
    assert code == 0 and str(path) in err and "Traceback" not in err, err
    assert "1 unreadable result cell(s) skipped" in out


def test_two_cells_for_one_key_keep_one_and_say_so(finished, bench_env, tmp_path, capsys):
    """A copy of a cell under another file name with another value (50): exit 0; the leaderboard, compare and
    run read one of them by the written rule (evidence intact, then the newest) and name the other; `bench run`
    quarantines it (the leaderboard used to show both rows, the card 50.00 and run 92.98)."""
    path = _stsb_cell(finished, bench_env)
    copy = path.with_name("copy-" + path.name)
    copy.write_text(path.read_text())
    original = stsb_value(bench_env.results)
    _mutate(copy, lambda c: c["results"][0].update(value=50.0, ci_low=40.0, ci_high=60.0))
    import os as _os

    _os.utime(copy, (1, 1))  # the copy is older and its evidence matches: the original is kept
    code, out, err = bench("report", "--out", str(tmp_path / "reports"), capsys=capsys)
    assert code == 0 and f"Skipped duplicate result cell {copy}" in err and str(path) in err
    board = (bench_env.results / "leaderboard.csv").read_text()
    assert board.count(",stsb,") == len(json.loads(path.read_text())["results"])
    assert ",50.0," not in board
    code, out, err = bench(*RUN, "--task", "stsb", capsys=capsys)
    assert code == 0 and "Reused" in out and f"Result cell {copy} duplicated another" in err
    assert not copy.exists() and stsb_value(bench_env.results) == original


def test_card_name_cannot_escape_the_reports_dir(finished, bench_env, tmp_path, capsys):
    """`bench report --card minilm/../../cells/minilm`: exit 2, no such model; nothing written outside the
    reports dir (it used to write into the results' cells/ tree)."""
    before = sorted(p for p in tmp_path.rglob("*"))
    code, out, err = bench("report", "--out", str(tmp_path / "reports"), "--card", "tiny/../../cells/tiny",
                           capsys=capsys)
    assert code == 2 and "No stored results" in err and "Traceback" not in err
    assert sorted(p for p in tmp_path.rglob("*")) == before


def test_divergence_names_stay_inside_the_results_dir(finished, bench_env, tmp_path, capsys):
    """`bench divergence /abs/A B` with nothing comparable: exit 2 saying why; nothing is written, and never
    outside the results dir (it used to write /abs/A__B.json and create directories there)."""
    outside = tmp_path / "abs"
    code, out, err = bench("divergence", str(outside / "A"), "tiny", "--base", "tiny", capsys=capsys)
    assert code == 2 and "Traceback" not in err and "Fix:" in err
    assert not outside.exists() and not (bench_env.results / "divergence").exists()


def test_divergence_of_a_model_without_a_base(finished, bench_env, capsys):
    """`bench divergence` of a model without a registered base: exit 2 naming --base (it used to crash)."""
    code, out, err = bench("divergence", "tiny", "minilm", capsys=capsys)
    assert code == 2 and "--base" in err and "Traceback" not in err


def test_model_name_with_a_slash_round_trips(finished, bench_env, tiny_bert_dir, tmp_path, capsys):
    """A local directory whose name maps to org/enc: exit 0; its cells go under org--enc and `bench report`,
    `--card org/enc` and `bench compare` find them by the name org/enc (report used to exit 2)."""
    import shutil

    model = tmp_path / "models--org--enc"
    shutil.copytree(tiny_bert_dir, model)
    assert bench("run", "--device", "cpu", "--suite", "sts", "--task", "stsb", "--model", str(model),
                 "--pooler", "avg", capsys=capsys)[0] == 0
    assert (bench_env.results / "cells" / "org--enc").is_dir()
    code, out, err = bench("report", "--out", str(tmp_path / "reports"), "--card", "org/enc", capsys=capsys)
    assert code == 0, err
    assert (tmp_path / "reports" / "card-org--enc.md").is_file()
    code, out, err = bench("compare", "tiny", "org/enc", capsys=capsys)
    assert code == 0 and "Traceback" not in err, err


def test_unknown_metric_lists_the_available_ones(finished, bench_env, tiny_bert_dir, capsys):
    """`bench compare A B --metric nosuch`: exit 2 listing the metrics the cells hold (it printed an empty
    table)."""
    assert bench("run", "--device", "cpu", "--suite", "sts", "--task", "stsb", "--model", str(tiny_bert_dir),
                 "--pooler", "cls", capsys=capsys)[0] == 0
    code, out, err = bench("compare", "tiny", tiny_bert_dir.name, "--metric", "nosuch", capsys=capsys)
    assert code == 2 and "nosuch" in err and "spearman" in err and "pearson" in err


@pytest.mark.parametrize("debug", [False, True])
def test_unexpected_error_is_one_line_unless_debug(finished, bench_env, monkeypatch, capsys, debug):
    """An unexpected error during work (here a full disk at the leaderboard): exit 1, one line naming what failed
    and the fix, no traceback; with --debug the stack too (it used to be a bare traceback)."""
    import errno as _errno

    from bench.results.store import ResultStore

    def full(*a, **k):
        raise OSError(_errno.ENOSPC, "No space left on device", str(bench_env.results / "leaderboard.csv"))

    monkeypatch.setattr(ResultStore, "write_leaderboard", full)
    code, out, err = bench(*RUN, "--task", "stsb", *(["--debug"] if debug else []), capsys=capsys)
    assert code == 1 and "the disk is full" in err and "leaderboard.csv" in err and "Fix: free space" in err
    assert ("Traceback" in err) == debug


def test_ascii_only_stdout(finished, bench_env, tiny_bert_dir, tmp_path):
    """`bench run` with PYTHONIOENCODING=ascii (an ASCII-only stdout): exit 0; the table prints, the '·' of its
    title escaped (it used to crash with UnicodeEncodeError)."""
    import io

    from app.cli import main

    out, err = io.BytesIO(), io.BytesIO()
    stdout, stderr = io.TextIOWrapper(out, encoding="ascii"), io.TextIOWrapper(err, encoding="ascii")
    with pytest.MonkeyPatch.context() as mp:  # in this process, so the fixture data set stays registered
        mp.setattr(sys, "stdout", stdout)
        mp.setattr(sys, "stderr", stderr)
        code = main(["run", "--device", "cpu", "--suite", "sts", "--task", "stsb", "--model", str(tiny_bert_dir),
                     "--pooler", "avg"])
        stdout.flush()
        stderr.flush()
    assert code == 0, err.getvalue().decode()
    assert b"stsb" in out.getvalue() and b"Traceback" not in err.getvalue()


def test_publish_to_a_file(finished, bench_env, tmp_path, capsys):
    """`bench publish --to` a file: exit 2 naming it and the fix, nothing copied (it used to crash)."""
    target = tmp_path / "target-file"
    target.write_text("mine\n")
    code, out, err = bench("publish", "--model", "tiny", "--to", str(target), capsys=capsys)
    assert code == 2 and "is a file, not a directory" in err and "Traceback" not in err
    assert target.read_text() == "mine\n"


def test_report_out_removes_only_what_it_wrote(finished, bench_env, tmp_path, capsys):
    """`bench report --out DIR` into a user's directory holding card-notes.md, leaderboard-mine.html and index.md:
    exit 0; the index it would overwrite is moved aside first and named, and the user's other files survive
    this and the next report (they used to be deleted as stale, and the index overwritten)."""
    out = tmp_path / "reports"
    out.mkdir()
    mine = {"card-notes.md": "my notes\n", "leaderboard-mine.html": "<p>mine</p>\n", "index.md": "my index\n"}
    for name, text in mine.items():
        (out / name).write_text(text)
    code, _, err = bench("report", "--out", str(out), capsys=capsys)
    assert code == 0, err
    assert (out / "index.md.user-1").read_text() == mine["index.md"] and "index.md.user-1" in err
    assert bench("report", "--out", str(out), capsys=capsys)[0] == 0
    assert (out / "card-notes.md").read_text() == mine["card-notes.md"]
    assert (out / "leaderboard-mine.html").read_text() == mine["leaderboard-mine.html"]


def test_divergence_of_two_architectures_says_why(bench_env, tmp_path, monkeypatch, capsys):
    """`bench divergence` of two models of different architectures (hidden size 16 and 32: no tensor shared):
    exit 2 saying that no tensor matches because the architectures differ, and that no attack logs pair up;
    nothing is written (it used to report a ratio of 0)."""
    from bench.models import registry
    from tests.conftest import write_tiny_bert

    for name, hidden in (("narrow", 16), ("wide", 32)):
        spec = registry.ModelSpec(name=name, backbone=str(write_tiny_bert(tmp_path / name, hidden=hidden)),
                                  pooler="avg", max_len=64)
        monkeypatch.setitem(registry.MODELS, name, spec)
    code, _, err = bench("divergence", "narrow", "wide", "--base", "narrow", capsys=capsys)
    assert code == 2 and "differ in architecture" in err and "no attack setting" in err and "Fix:" in err, err
    assert not (bench_env.results / "divergence").exists()


# --- files the tool reads: models, claims, plugins.json ------------------------------------------------

MODELS_FILE_FAULTS = {
    "unknown key": ('[a]\nbackbone = "x/y"\npooler = "avg"\npoolr = "cls"\n', "unknown field 'poolr'"),
    "wrong type": ('[a]\nbackbone = "x/y"\npooler = "avg"\nmax_len = "long"\n', "max_len is 'long', not a whole number"),
    "recipe not a table": ('[a]\nmethod = "simcse"\nbase = "minilm"\nrecipe = 3\n', "recipe is 3, not a table"),
    "missing backbone dir": ('[a]\nbackbone = "/no/such/encoder"\npooler = "avg"\n', "no such directory"),
    "missing provider attribute": ('[a]\nbackbone = "bench.models.registry:no_such_function"\npooler = "avg"\n',
                                   "has no attribute 'no_such_function'"),
}


@pytest.mark.parametrize("fault", list(MODELS_FILE_FAULTS))
def test_invalid_models_file_names_the_key_and_the_fix(bench_env, capsys, fault):
    """A models.toml entry with an unknown key, a wrong type, a recipe that is not a table, a missing backbone
    directory or a `module:attr` provider without that attribute: exit 2; the message names the file, the entry,
    the key and the fix, with no traceback; the built-in bench/models/models.toml passes the same schema unchanged."""
    from bench.models.models_file import read_models_file
    from bench.models.registry import BUILTIN_MODELS_FILE, MODELS

    text, shown = MODELS_FILE_FAULTS[fault]
    path = bench_env.home / "models.toml"
    path.write_text(text)
    code, _, err = bench("run", "--suite", "sts", "--model", "a", capsys=capsys)
    assert code == 2 and f"{path}: [a]:" in err and shown in err and "Traceback" not in err, err
    assert "Fix:" in err or "Did you mean" in err
    assert set(read_models_file(BUILTIN_MODELS_FILE, required=True)) <= set(MODELS)


CLAIMS_FILE_FAULTS = {
    "unknown table": (lambda t: t.replace("\n[models]\n", "\n[modles]\n", 1), "[modles]: unknown key"),
    "wrong type": (lambda t: t.replace("\n[[claim]]\n", '\n[[claim]]\nfigure_only = "yes"\n', 1),
                   "figure_only is 'yes', not true or false"),
    "a margin that is text": (lambda t: t.replace("\n[[claim]]\n", '\n[[claim]]\nmargin = "big"\n', 1),
                              "margin is 'big', not a number"),
    "a variant that is not a table": (lambda t: t.replace("\n[[claim]]\n", '\n[[claim]]\nvariants = ["frozen"]\n', 1),
                                      "variants a list of tables"),
    "seed suffixes not a list": (lambda t: re.sub(r'suffixes = \[[^\]]*\]', 'suffixes = "-seed1"', t, count=1),
                                 "[seeds]: suffixes is '-seed1', not a list"),
}


@pytest.mark.parametrize("fault", list(CLAIMS_FILE_FAULTS))
def test_invalid_claims_file_names_the_key_and_the_fix(tmp_path, fault):
    """A claims.toml with an unknown table, a wrong type, a text margin, a variant that is not a table or seed
    suffixes that are not a list: exit 2; the message (a BenchError) names the file, the key and the fix; the
    committed reports/claims.toml loads unchanged."""
    from bench.errors import BenchError
    from reports import claims

    change, shown = CLAIMS_FILE_FAULTS[fault]
    path = tmp_path / "claims.toml"
    path.write_text(change(claims.CLAIMS_FILE.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(BenchError) as err:
        claims.load(path)
    assert str(err.value).startswith(f"{path}: ") and shown in str(err.value) and "Fix:" in str(err.value)
    assert len(claims.load().claims) >= 15


def test_damaged_plugins_json_is_named_quarantined_and_never_loses_entries(finished, bench_env, tmp_path, capsys):
    """A truncated or schema-breaking plugins.json: exit 0; `bench report` names it and the fix, `bench run`
    moves it to quarantine/ and says that the new file starts afresh (it used to be replaced silently); a run
    that knows fewer models than the file merges into it, so no model's entry is lost."""
    from bench.results import metadata

    path = bench_env.results / "plugins.json"
    good = json.loads(path.read_text())
    for damage in (path.read_text()[:40], json.dumps({**good, "models": {"tiny": "not a table"}})):
        path.write_text(damage)
        code, _, err = bench("report", "--out", str(tmp_path / "reports"), capsys=capsys)
        assert code == 0 and str(path) in err and "Fix: restore it" in err, err
        code, _, err = bench(*RUN, "--task", "stsb", capsys=capsys)
        assert code == 0 and "moved it to" in err and "holds only this run's" in err, err
        kept = sorted((bench_env.results / "quarantine").glob("plugins.json.*"))
        assert kept and kept[-1].read_text() == damage
        assert metadata._load(bench_env.results)[1] is None  # the new file is valid
    other = {"backbone": "x", "pooler": "avg", "builtin": False}
    metadata.update(bench_env.results, lambda data: data["models"].update({"other": other}))
    assert bench(*RUN, "--task", "stsb", capsys=capsys)[0] == 0  # knows only tiny
    models = json.loads(path.read_text())["models"]
    assert models["other"] == other and "tiny" in models
    assert not list(bench_env.results.glob(".plugins.json.*.tmp"))


# --- attack logs ---------------------------------------------------------------------------------

def _cell_with_log(results: Path, records: int = 3):
    """A cell of model 'a' computed from an attack log of ``records`` records: (store, key, cell, log)."""
    from bench.results.store import CellKey, Result, ResultStore

    log = results / "attack_logs" / "a" / "mr" / "pwws" / "seed0-run0-victimabc-12345678.jsonl"
    log.parent.mkdir(parents=True)
    header = {"header": {"model": "a", "task": "mr", "recipe": "pwws", "run_seed": 0, "victim": "frozen",
                         "victim_sha256": "v" * 12}}
    log.write_text("".join(json.dumps(x) + "\n" for x in [header] + [
        {"index": i, "result_type": "failed", "original": {"text": f"s{i}"}} for i in range(records)]))
    store = ResultStore(results)
    key = CellKey("a", "ab" * 32, "adversarial", "mr", 0, "c" * 16)
    row = Result(model="a", suite="adversarial", task="mr", split="test", metric="attack_success_rate",
                 aggregation="mean-of-runs", value=0.0, n=records, attack="pwws", logs=[log])
    return store, key, store.write(key, [row], {}), log


def test_hand_edited_attack_log_is_detected(bench_env, capsys):
    """An attack log edited by hand after its cell was computed (one outcome flipped): exit 2 from `bench run`'s
    reuse and from `bench divergence`, naming the log, the cell and the fix (restore it, or --overwrite always);
    a log that only grew (a later run appended records) and a cell from before cells recorded logs are accepted."""
    from bench.results.store import LOGS, BadLog

    store, key, cell, log = _cell_with_log(bench_env.results)
    record = json.loads(cell.read_text())[LOGS][0]
    assert record["path"] == log.relative_to(bench_env.results).as_posix() and record["bytes"] == log.stat().st_size
    with log.open("a") as fh:  # a later run with a larger --limit appends: still the bytes the cell saw
        fh.write(json.dumps({"index": 3, "result_type": "successful", "original": {"text": "s3"}}) + "\n")
    assert store.existing(key) == cell
    log.write_text(log.read_text().replace('"failed"', '"successful"', 1))
    with pytest.raises(BadLog) as err:
        store.existing(key)
    assert str(log) in str(err.value) and str(cell) in str(err.value) and "--overwrite always" in str(err.value)
    other = bench_env.results / "attack_logs" / "b" / "mr" / "pwws" / log.name
    other.parent.mkdir(parents=True)
    other.write_text(log.read_text().replace('"model": "a"', '"model": "b"'))
    code, _, err = bench("divergence", "a", "b", "--base", "a", capsys=capsys)  # no checkpoints: logs only
    assert code == 2 and f"Attack log {log} was edited" in err and "Traceback" not in err, err
    payload = json.loads(cell.read_text())
    del payload[LOGS]  # as written before cells recorded their logs: not checked
    cell.write_text(json.dumps(payload))
    assert store.existing(key) == cell


def test_perturbation_set_refuses_an_edited_log(bench_env, tmp_path, capsys):
    """An attack log edited after its cell was computed, read by the perturbation-set builder: exit 2; the log and
    the cell are named before the log is parsed, while a log no cell records yet (an attack still running) is read."""
    from attacks.perturbation_set import main

    _, _, cell, log = _cell_with_log(bench_env.results)
    running = bench_env.results / "attack_logs" / "a" / "mr" / "bae" / log.name
    running.parent.mkdir(parents=True)
    running.write_text(log.read_text())
    out = tmp_path / "set.jsonl"
    args = ["--logs", str(bench_env.results / "attack_logs"), "--results-dir", str(bench_env.results), "--out", str(out)]
    assert main(args) == 0 and out.exists()
    log.write_text(log.read_text().replace('"failed"', '"successful"', 1))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"Attack log {log} was edited" in err and str(cell) in err


def test_attack_log_records_are_one_per_example(bench_env, recwarn):
    """An attack log holding two records for one example (a concatenated or hand-edited log), or a line that is
    not a record: exit 0 for the first, resumed with the first written record of each example and the repeat
    named in a warning; exit 2 for the second, naming the file and line and the fix (it was a traceback)."""
    from attacks.log import AttackLog, read_log
    from bench.errors import BenchError

    log = bench_env.results / "attack_logs" / "x.jsonl"
    header = {"model": "a"}
    first, again = ({"index": 1, "result_type": r, "original": {"text": "s"}} for r in ("failed", "successful"))
    log.parent.mkdir(parents=True)
    log.write_text("".join(json.dumps(x) + "\n" for x in [{"header": header}, first, again]))
    with AttackLog(log, header) as resumed:
        assert resumed.records == {1: first}
    assert read_log(log)[1] == [first]
    assert any("more than one record for example(s) 1" in str(w.message) for w in recwarn)
    log.write_text(log.read_text() + "{not json\n" + json.dumps({"index": 2, "result_type": "failed"}) + "\n")
    for read in (lambda: AttackLog(log, header).close(), lambda: read_log(log)):
        with pytest.raises(BenchError, match=f"{re.escape(str(log))}:4: not an attack record.*Fix:"):
            read()


# --- store files: evidence bytes, temporary files -------------------------------------------------------

def test_evidence_is_hashed_before_it_is_decompressed(tiny_stsb_cell, bench_env, monkeypatch, capsys):
    """An evidence file replaced by a small gzip that would inflate to 64 MiB (a gzip bomb): exit 2 from
    `bench compare`, refused on its sha256 before any decompression; without a recorded sha256, decompression
    stops at the limit (EVIDENCE_LIMIT) instead of inflating it whole."""
    import gzip
    import zlib

    from bench.results import store
    from bench.results.store import EVIDENCE_HASH

    side = _sidecar(tiny_stsb_cell)
    side.write_bytes(gzip.compress(b"\0" * (64 << 20), compresslevel=9))
    assert side.stat().st_size < 200_000

    bomb, decoded, real_decode = side.read_bytes(), [], store._decode_evidence
    with monkeypatch.context() as m:
        m.setattr(store, "_decode_evidence", lambda blob, limit=None: decoded.append(blob) or real_decode(blob, limit))
        code, _, err = bench("compare", "tiny", "twin", "--suite", "sts", "--task", "stsb", capsys=capsys)
    assert code == 2 and f"its evidence file {side.name} was altered" in err and "Traceback" not in err, err
    assert bomb not in decoded  # refused on its stored bytes' sha256, never inflated
    payload = json.loads(tiny_stsb_cell.read_text())
    del payload[EVIDENCE_HASH]  # a cell from before cells recorded the sha256: decoded, but bounded
    tiny_stsb_cell.write_text(json.dumps(payload))
    inflated = []
    real = zlib.decompressobj

    class Counting:
        def __init__(self, *a, **k):
            self.inner = real(*a, **k)
            self.eof = False

        def decompress(self, blob, max_length=0):
            out = self.inner.decompress(blob, max_length)
            inflated.append(len(out))
            self.eof = self.inner.eof
            return out

    monkeypatch.setattr(store, "EVIDENCE_LIMIT", 1 << 20)
    monkeypatch.setattr(store.zlib, "decompressobj", Counting)
    code, _, err = bench("compare", "tiny", "twin", "--suite", "sts", "--task", "stsb", capsys=capsys)
    assert code == 2 and "decompresses to more than 1 MiB" in err and max(inflated) <= (1 << 20) + 1, err


def test_stale_temporary_files_are_swept_at_the_next_write(finished, bench_env, monkeypatch, capsys):
    """Temporary files a kill left beside the cells (`.NAME.XXXXXXXX.tmp`, `.write-check-XXXXXXXX`): exit 0; the
    next write to that directory removes those older than STALE_AFTER_S, and leaves younger ones (a write in
    flight) and other files (a user's `notes.tmp`) alone."""
    import bench.io as bench_io

    cell_dir = next((bench_env.results / "cells").rglob("stsb"))
    old = time.time() - 3600
    stale = [cell_dir / ".seed0-abc.json.k3j_x9q2.tmp", bench_env.results / ".write-check-a1b2c3d4"]
    fresh, mine = cell_dir / ".seed0-abc.json.zz99yy88.tmp", cell_dir / "notes.tmp"
    for path in (*stale, fresh, mine):
        path.write_text("x")
    for path in (*stale, mine):
        os.utime(path, (old, old))
    monkeypatch.setattr(bench_io, "_SWEPT", set())  # as in a new process
    code, _, err = bench(*RUN, "--task", "stsb", "--overwrite", "always", capsys=capsys)
    assert code == 0, err
    assert not any(p.exists() for p in stale) and fresh.exists() and mine.exists()


# --- training, comparisons, grids ------------------------------------------------------------------------

def test_free_space_check_counts_the_resume_point(bench_env, tiny_bert_dir, tmp_path, monkeypatch, capsys):
    """`bench train` where $BENCH_HOME has less room than a resume point needs: exit 2 before the first step,
    naming the space, the parameter count and the resume point's size (weights + AdamW state, 12 bytes a
    parameter: about 270 MB for MiniLM's 22.7M), and the fix; with room enough it trains."""
    from collections import namedtuple

    from bench import train
    from tests.conftest import make_method
    from tests.test_train import write_corpus

    method, _ = make_method(tiny_bert_dir, "simcse", ["a man"])  # the encoder and SimCSE's own head
    parameters = sum(p.numel() for p in [*method.model.parameters(), *method.modules.parameters()])
    space = train.training_space(parameters, resuming=False)
    assert space["resume"] == 12 * parameters and train.training_space(22_713_216, False)["resume"] // 10**6 == 272
    usage = namedtuple("usage", "total used free")
    free = {"bytes": space["needed"] - 1}  # above the 16 MiB every command checks for, below what training needs
    monkeypatch.setattr(train.shutil, "disk_usage", lambda p: usage(1 << 40, 0, free["bytes"]))
    args = ["train", "--method", "simcse", "--backbone", str(tiny_bert_dir), "--data",
            str(write_corpus(tmp_path / "c.txt")), "--steps", "2", "--batch-size", "4", "--eval-every", "0",
            "--name", "room"]
    code, _, err = bench(*args, capsys=capsys)
    assert code == 2 and f"{parameters:,} parameters" in err and "Fix: free space" in err and "Traceback" not in err
    assert f"each resume point {space['resume'] / 2**20:.0f} MiB" in err
    assert not (bench_env.home / "train" / "room" / "last").exists()
    free["bytes"] = space["needed"]
    assert bench(*args, capsys=capsys)[0] == 0


def test_grid_dry_run_is_linear_in_the_seeds_and_shows_progress(bench_env, tiny_model, monkeypatch, capsys):
    """`bench grid --seeds N --dry-run` with many seeds: exit 0; each task directory is listed once and each cell
    costs a constant number of steps (a plan of 10x the seeds does 10x the work: the seed list and the store's
    directory were rescanned per cell), one table row per model, suite and task above TABLE_ROWS cells, and
    progress lines on stderr."""
    from app.commands import grid, grid_runner

    listed, configs = [], []
    real_glob, real_config = Path.glob, grid_runner.Plan.config
    monkeypatch.setattr(Path, "glob", lambda self, *a, **k: listed.append(self) or real_glob(self, *a, **k))
    monkeypatch.setattr(grid_runner.Plan, "config", lambda self, cell: configs.append(cell) or real_config(self, cell))
    monkeypatch.setattr(grid, "TABLE_ROWS", 50)
    counts = {}
    for seeds in (40, 400):
        listed.clear(), configs.clear()
        code, out, err = bench("grid", "--models", "tiny", "--suites", "sts", "--tasks", "stsb", "--seeds", str(seeds),
                               "--dry-run", "--allow-unverified-data", capsys=capsys)
        assert code == 0, err
        counts[seeds] = (len(listed), len(configs))
        assert f"{2 * seeds} cell(s) without a stored result" in " ".join(out.split())
        assert "planning cells" in err and f"/{2 * seeds}" in err
        assert out.count("stsb") == 1  # one row for the task, its seeds summed
    assert counts[40][0] == counts[400][0]  # directory listings: as many for 400 seeds as for 40
    assert counts[400][1] <= 10 * counts[40][1]


def test_report_counts_as_skipped_only_the_cells_it_skipped(finished, bench_env, tmp_path, capsys):
    """Two weights identities under one model name, at `bench report`: exit 0; it warns that they share the
    name, skips no cell and says none was unreadable (every warning used to be counted as a skipped cell)."""
    from bench.results.store import CellKey, Result, ResultStore

    store = ResultStore(bench_env.results)
    for sha, value in (("ab" * 32, 10.0), ("cd" * 32, 20.0)):
        store.write(CellKey("twice", sha, "sts", "stsb", 0, "c" * 16), [Result(
            model="twice", suite="sts", task="stsb", split="test", metric="spearman", aggregation="all",
            value=value, n=8, seed=0, weights_sha256=sha, created_at="2026-01-01T00:00:00+00:00")], {})
    code, out, err = bench("report", "--format", "md", "--out", str(tmp_path / "reports"), capsys=capsys)
    assert code == 0, err
    assert "2 weights identities" in err and "unreadable" not in out


def test_reliability_page_table_is_current():
    """docs/reliability.md's table is this file's table (`python tests/test_faults.py --table`)."""
    page = (REPO / "docs" / "reliability.md").read_text(encoding="utf-8")
    assert reliability_table() in page, "regenerate it: python tests/test_faults.py --table"


# --- the reliability page's table ------------------------------------------------------------------------

def reliability_table() -> str:
    """Markdown table: one line per fault test of this file, from its docstring "<case>: exit N; <what happens>"."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    lines = ["| case | exit | what happens | test |", "| --- | --- | --- | --- |"]
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and node.name != "test_reliability_page_table_is_current":
            doc = " ".join((ast.get_docstring(node) or "").split())
            found = re.fullmatch(r"(.+?): exit (\d+)[;,]? ?(.*)", doc)
            if found is None:
                raise ValueError(f"{node.name}: docstring must read '<case>: exit N; <what happens>'")
            case, code, rest = found.groups()
            lines.append(f"| {case} | {code} | {rest[:1].upper() + rest[1:]} | `{node.name}` |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--table"]:
        print(reliability_table(), end="")
    else:
        sys.exit("usage: python tests/test_faults.py --table   (run the tests with pytest)")


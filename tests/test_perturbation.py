"""The perturbation suite: the frozen set (build, hash check), the displacement statistic by hand, pairing."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bench.errors import BenchError

HEADER = {"builds": {}, "model": "m", "recipe": "pwws", "task": "mr", "victim": "frozen"}


def write_log(path: Path, recipe: str, records: list[tuple]) -> Path:
    """A tiny attack log: (index, result_type, original, perturbed, words_changed) per record."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [{"header": {**HEADER, "recipe": recipe}}]
    for index, kind, original, perturbed, changed in records:
        lines.append({"index": index, "result_type": kind, "original": {"text": original},
                      "perturbed": {"text": perturbed}, "words_changed": changed})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def fixture_logs(root: Path) -> list[Path]:
    return [write_log(root / "a" / "pwws.jsonl", "pwws", [
                (0, "successful", "the movie was great", "the film was great", 1),
                (1, "failed", "a dog is running", "a dog is running", 0),
                (2, "successful", "a man is playing guitar", "a woman is eating guitar", 2)]),
            write_log(root / "b" / "textfooler.jsonl", "textfooler", [
                (0, "successful", "the movie was great", "the film was great", 1),  # a duplicate of a's
                (2, "successful", "a man is playing guitar", "a child is playing guitar", 1),
                (3, "skipped", "what is the answer", "what is the answer", 0)])]


def test_build_dedups_orders_and_controls(tmp_path):
    from attacks.perturbation_set import build_lines, serialise

    logs = fixture_logs(tmp_path)
    lines = build_lines(logs, version=1)
    header, body = lines[0]["header"], lines[1:]
    assert (header["originals"], header["pairs"]) == (2, 3)  # the shared pair is counted once
    assert [o["id"] for o in body] == sorted(o["id"] for o in body)
    movie = next(o for o in body if o["original"] == "the movie was great")
    assert len(movie["perturbations"]) == 1 and movie["perturbations"][0]["recipes"] == ["pwws", "textfooler"]
    pool = {w for o in body for w in o["original"].split()}
    for o in body:
        assert [p["id"] for p in o["perturbations"]] == sorted(p["id"] for p in o["perturbations"])
        for p in o["perturbations"]:
            changed = [(a, b) for a, b in zip(o["original"].split(), p["control"].split()) if a != b]
            assert len(changed) == p["edits"] and all(b in pool for _, b in changed)
    # The same logs in another order give the same bytes (the header lists the logs sorted).
    assert serialise(build_lines(list(reversed(logs)), version=1)) == serialise(lines)


def control_of(original: str) -> str:
    return " ".join(["sad", *original.split()[1:]])


def frozen_set(tmp_path: Path, originals: list[tuple[str, list[str]]]) -> tuple[Path, str]:
    """A frozen set file of (original, [perturbations]), each control the original with its first word 'sad'."""
    lines = [{"header": {"format": "bench-perturbations/1", "version": 1}}]
    for k, (original, perts) in enumerate(originals):
        lines.append({"id": f"o{k}", "original": original, "perturbations": [
            {"id": f"p{k}{j}", "text": p, "edits": 1, "recipes": ["pwws"], "control": control_of(original)}
            for j, p in enumerate(perts)]})
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def test_tampered_set_is_refused(tmp_path):
    from suites.perturbation import load_set

    path, digest = frozen_set(tmp_path, [("a man is playing", ["a woman is playing"])])
    header, originals = load_set(path, digest)
    assert header["version"] == 1 and originals[0]["original"] == "a man is playing"
    path.write_text(path.read_text().replace("woman", "child"))
    with pytest.raises(BenchError, match="sha256.*git checkout -- suites/data/set.jsonl"):
        load_set(path, digest)
    with pytest.raises(BenchError, match="cannot be read"):
        load_set(tmp_path / "absent.jsonl", digest)


def test_committed_set_matches_its_declared_hash():
    from suites.perturbation import DATA_DIR, SUITE, load_set

    for task in SUITE.tasks:
        header, originals = load_set(DATA_DIR / task.file, task.sha256)
        assert header["originals"] == len(originals) and sum(len(o["perturbations"]) for o in originals) == header["pairs"]


def test_displacement_against_hand_computation(tmp_path, tiny_bert_dir):
    from bench.models.encoder import Encoder
    from bench.paths import Paths
    from bench.models.registry import ModelSpec
    from suites.base import RunContext
    from suites.perturbation import SUITE

    originals = [("a man is playing guitar", ["a woman is playing guitar", "a man is eating guitar"]),
                 ("the movie was great", ["the film was great"]),
                 ("a dog is running in the park", ["a cat is running in the park"])]
    path, digest = frozen_set(tmp_path, originals)
    task = replace(SUITE.tasks[0], file=str(path), sha256=digest, per_original=2, partners=5)
    encoder = Encoder.from_spec(ModelSpec(name="tiny", backbone=str(tiny_bert_dir), pooler="avg", max_len=64),
                                device="cpu")
    ctx = RunContext(paths=Paths(tmp_path, tmp_path, tmp_path), log=lambda *_: None)
    rows = {r.metric: r for r in SUITE.run_task(task, encoder, ctx)}

    def f(text):  # one sentence at a time: no batching shared with the suite's call
        v = encoder.encode([text])[0]
        return v / np.linalg.norm(v)

    def dist(a, b):
        return 1.0 - float(f(a) @ f(b))

    texts = [o for o, _ in originals]
    d_pert = [np.mean([dist(o, p) for p in ps]) for o, ps in originals]  # both of the first's perturbations
    d_ctrl = [dist(o, control_of(o)) for o in texts]
    d_rand = [np.mean([dist(a, b) for b in texts if b != a]) for a in texts]  # partners: all others (k = n - 1)
    assert rows["displacement"].value == pytest.approx(np.mean(d_pert) / np.mean(d_rand), rel=1e-4)
    assert rows["control_displacement"].value == pytest.approx(np.mean(d_ctrl) / np.mean(d_rand), rel=1e-4)
    assert rows["vs_control"].value == pytest.approx(np.mean(d_pert) / np.mean(d_ctrl), rel=1e-4)
    assert rows["cos_perturbed"].value == pytest.approx(1.0 - np.mean(d_pert), rel=1e-4)
    assert rows["cos_unrelated"].value == pytest.approx(1.0 - np.mean(d_rand), rel=1e-4)
    assert rows["displacement"].n == 3 and rows["displacement"].evidence.sample.ids == ["o0", "o1", "o2"]
    one = {r.metric: r for r in SUITE.run_task(replace(task, per_original=1), encoder, ctx)}
    assert one["cos_perturbed"].value == pytest.approx(1.0 - np.mean([dist(o, ps[0]) for o, ps in originals]), rel=1e-4)


def test_partners_never_the_original():
    from suites.perturbation import partner_indices

    picks = partner_indices(50, 8, seed=0)
    assert picks.shape == (50, 8) and not (picks == np.arange(50)[:, None]).any()
    assert all(len(set(r)) == 8 for r in picks.tolist()) and picks.max() < 50
    assert (picks == partner_indices(50, 8, seed=0)).all()


def test_run_and_compare_are_paired(bench_env, tiny_model, tmp_path_factory, monkeypatch, capsys):
    from bench.models import registry
    from app.cli import main
    from tests.conftest import write_tiny_bert

    other = write_tiny_bert(tmp_path_factory.mktemp("tiny-bert-2"), seed=1)
    monkeypatch.setitem(registry.MODELS, "tiny2", registry.ModelSpec(name="tiny2", backbone=str(other), pooler="avg",
                                                                     max_len=64))
    for model in ("tiny", "tiny2"):
        assert main(["run", "--suite", "perturbation", "--task", "mr-attacks", "--model", model, "--limit", "30"]) == 0
    capsys.readouterr()
    assert main(["compare", "tiny", "tiny2", "--suite", "perturbation", "--task", "mr-attacks", "--json"]) == 0
    rows = {r["metric"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    d = rows["displacement"]
    assert d["pairs"] == 30 and d["method"].startswith("paired-bootstrap")
    assert d["difference"] == pytest.approx(d["b"] - d["a"], abs=1e-3) and d["ci_low"] <= d["difference"] <= d["ci_high"]


def test_tampered_committed_set_exits_2(bench_env, tiny_model, monkeypatch, tmp_path, capsys):
    import suites.perturbation as perturbation
    from app.cli import main

    copy = tmp_path / "perturbations-v1.jsonl"
    copy.write_bytes((perturbation.DATA_DIR / "perturbations-v1.jsonl").read_bytes() + b"\n")
    monkeypatch.setattr(perturbation, "DATA_DIR", tmp_path)
    assert main(["run", "--suite", "perturbation", "--model", "tiny", "--limit", "5"]) == 2
    assert "git checkout -- suites/data/perturbations-v1.jsonl" in capsys.readouterr().err


def test_check_names_the_missing_logs_and_how_to_restore_them(tmp_path, capsys):
    from attacks.perturbation_set import build_lines, main, serialise

    logs = fixture_logs(tmp_path)
    frozen = tmp_path / "set.jsonl"
    frozen.write_bytes(serialise(build_lines(logs, version=1)))
    results = ["--results-dir", str(tmp_path / "results")]
    assert main(["--from", str(frozen), "--check", *results]) == 0
    capsys.readouterr()
    logs[1].unlink()
    assert main(["--from", str(frozen), "--missing", *results]) == 0
    assert capsys.readouterr().out.strip() == str(logs[1])
    assert main(["--from", str(frozen), "--check", *results]) == 2
    assert "1 named but missing" in capsys.readouterr().err

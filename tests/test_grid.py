"""bench grid on a local Ray instance, with a tiny random BERT and tiny STS-B / SICK fixtures.

Ray workers are separate processes, so a monkeypatched dataset registry would not reach them:
the fixtures are written at the reference byte sizes of bench/data/data_files.tsv instead (the last
column is padded with spaces, which the readers collapse), and every command runs with
--allow-unverified-data, since their bytes (so their sha256) are not the reference data's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from bench.data.datasets import get_dataset
from bench.errors import BenchError
from bench.results.store import ResultStore
from tests.conftest import STS_PAIRS


def write_sized(path: Path, lines: list[str], size: int) -> None:
    """``lines`` as a file of exactly ``size`` bytes: the last line is padded with trailing spaces."""
    body = "".join(line + "\n" for line in lines[:-1])
    last = lines[-1] if lines else ""
    pad = size - len((body + last + "\n").encode())
    assert pad >= 0, f"fixture for {path.name} is larger than the reference file"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body + last + " " * pad + "\n", encoding="utf-8")


def stsb_lines(pairs) -> list[str]:
    return [f"main-captions\tMSRvid\t2012test\t{i:04d}\t{g}\t{a}\t{b}" for i, (a, b, g) in enumerate(pairs)]


def sick_lines(pairs, bad_score: bool = False) -> list[str]:
    rows = [f"{i}\t{a}\t{b}\t{g}\tNEUTRAL" for i, (a, b, g) in enumerate(pairs)]
    if bad_score:  # a corrupt row the size check cannot see: the cell fails while reading it
        rows[2] = "2\ta man is running\ta woman is eating\tnot-a-score\tNEUTRAL"
    return ["pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment", *rows]


def write_fixtures(data_root: Path, corrupt_sick: bool = False) -> None:
    for name, lines_for in (("stsb", {"sts-train.csv": stsb_lines(STS_PAIRS), "sts-dev.csv": stsb_lines(STS_PAIRS),
                                       "sts-test.csv": stsb_lines(STS_PAIRS)}),
                            ("sick", {f: sick_lines(STS_PAIRS, corrupt_sick and f == "SICK_test_annotated.txt")
                                      for f in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt")})):
        for ref in get_dataset(name).files:
            path = data_root / ref.path
            write_sized(path, lines_for.get(path.name, ["(not read by the suites)"]), ref.bytes)


def _cpu_without_amx():
    """Ray's workers see the CPU the in-process tests see (conftest's _cpu_without_amx): `--dtype auto`
    means fp32 in both, so a grid cell and a `bench run` cell agree on an AMX host too."""
    import torch

    torch.cpu._is_amx_tile_supported = lambda: False


@pytest.fixture(scope="module")
def ray_session():
    ray = pytest.importorskip("ray")
    import sys

    from ray import cloudpickle  # the hook travels by value: the workers cannot import this test module

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=100 * 1024**2, runtime_env={"worker_process_setup_hook": _cpu_without_amx})
    yield ray
    ray.shutdown()
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.fixture
def grid_env(tmp_path, monkeypatch):
    from bench.paths import Paths

    for var, sub in (("BENCH_HOME", "home"), ("BENCH_DATA_DIR", "data"), ("BENCH_RESULTS_DIR", "results")):
        (tmp_path / sub).mkdir()
        monkeypatch.setenv(var, str(tmp_path / sub))
    write_fixtures(tmp_path / "data")
    return Paths.from_env()


def grid_args(*extra: str) -> list[str]:
    return ["grid", "--models", "tiny", "--suites", "sts,alignment", "--tasks", "stsb", "--seeds", "2",
            "--allow-unverified-data", *extra]


def plan_for(argv: list[str]):
    from app.commands.grid import add_arguments, build_plan
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return build_plan(parser.parse_args(argv[1:]))


def cell_rows(results: Path) -> dict:
    """(suite, task, seed, metric, aggregation) -> row, over all cells in a results directory."""
    return {(r["suite"], r["task"], r["seed"], r["metric"], r["aggregation"]): r for r in ResultStore(results).rows()}


def mtimes(results: Path) -> dict:
    return {p: p.stat().st_mtime_ns for p in ResultStore(results).cells()}


def test_grid_writes_what_bench_run_writes_and_reruns_nothing(ray_session, grid_env, tiny_model, tmp_path,
                                                               monkeypatch, capsys):
    from app.commands.grid_runner import run_grid

    assert main(grid_args()) == 0
    grid = cell_rows(grid_env.results)
    # 2 seeds x (sts/stsb + sts/avg + alignment/stsb), each cell with its metrics
    assert {(s, t, seed) for s, t, seed, _, _ in grid} == {
        (s, t, seed) for seed in (0, 1) for s, t in (("sts", "stsb"), ("sts", "avg"), ("alignment", "stsb"))}
    assert (grid_env.results / "leaderboard.csv").read_text().count("\ntiny,") == len(grid)

    monkeypatch.setenv("BENCH_RESULTS_DIR", str(tmp_path / "run-results"))
    for suite in ("sts", "alignment"):
        for seed in ("0", "1"):
            assert main(["run", "--suite", suite, "--model", "tiny", "--task", "stsb", "--seed", seed,
                         "--device", "cpu", "--allow-unverified-data"]) == 0
    ran = cell_rows(tmp_path / "run-results")
    assert ran.keys() == grid.keys()
    for key, row in ran.items():
        for field in ("weights_sha256", "config_hash", "n", "split", "dtype", "device", "batch_size"):
            assert grid[key][field] == row[field], (key, field)
        assert grid[key]["value"] == pytest.approx(row["value"], abs=1e-4), key

    # a second invocation finds every cell in the store and runs none
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(grid_env.results))
    before = mtimes(grid_env.results)
    again = run_grid(plan_for(grid_args()))
    assert again.exit_code == 0 and again.ran == [] and again.count("stored") == len(again.states) == 6
    assert mtimes(grid_env.results) == before

    capsys.readouterr()
    assert main(grid_args("--dry-run")) == 0
    assert "0 cell(s) without a stored result" in capsys.readouterr().out


def test_interrupted_grid_reruns_only_missing_cells(ray_session, grid_env, tiny_model):
    from app.commands.grid_runner import run_grid

    plan = plan_for(grid_args())
    assert run_grid(plan).exit_code == 0
    cells = ResultStore(grid_env.results).cells()
    lost = [p for p in cells if "/alignment/stsb/seed0-" in str(p) or "/sts/stsb/seed1-" in str(p)]
    assert len(lost) == 2
    for path in lost:  # as if the grid had been killed before these cells were written
        path.unlink()
    kept = mtimes(grid_env.results)

    again = run_grid(plan)
    assert again.exit_code == 0
    # the two lost cells, plus seed 1's STS average (one of its tasks was recomputed, as `bench run` does)
    assert sorted(st.cell.label for st in again.ran) == [
        "tiny alignment/stsb seed 0", "tiny sts/avg seed 1", "tiny sts/stsb seed 1"]
    after = mtimes(grid_env.results)
    assert all(p.exists() for p in lost)
    assert {p: after[p] for p in kept if "/sts/avg/seed1-" not in str(p)} == {
        p: t for p, t in kept.items() if "/sts/avg/seed1-" not in str(p)}


def test_failing_cell_is_isolated_retried_and_reported(ray_session, grid_env, tiny_model, capsys):
    write_fixtures(grid_env.data, corrupt_sick=True)
    argv = ["grid", "--models", "tiny", "--suites", "sts,alignment", "--tasks", "sts/stsb,sts/sickr,alignment/stsb",
            "--retries", "1", "--allow-unverified-data"]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "tiny sts/sickr seed 0 (failed 2 attempt(s))" in out  # 1 try + 1 retry
    # the remote traceback, from the worker's frame down to the reader that failed
    assert 'in run_grid_cell' in out and 'in read_sick' in out
    assert "SICK_test_annotated.txt:4: malformed line" in out and "not-a-score" in out
    assert "tiny sts/avg seed 0: not run: task cell(s) sickr failed" in out
    done = {(r["suite"], r["task"]) for r in ResultStore(grid_env.results).rows()}
    assert done == {("sts", "stsb"), ("alignment", "stsb")}

    write_fixtures(grid_env.data)  # data fixed: the re-run computes only the failed cell and the average
    assert main(argv) == 0
    assert "Ran 2 cell(s), reused 2 from the store" in " ".join(capsys.readouterr().out.split())


def test_without_ray_grid_exits_2_with_the_install_command(grid_env, tiny_model, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    assert main(grid_args()) == 2
    assert 'pip install -e ".[grid]"' in capsys.readouterr().err


def test_task_selection_by_name_or_suite_slash_task():
    from app.commands.grid_runner import select_tasks

    assert select_tasks(["sts", "alignment"], ["stsb"]) == {"sts": ["stsb"], "alignment": ["stsb"]}
    assert select_tasks(["sts", "alignment"], ["sts/sts12", "alignment/stsb"]) == {
        "sts": ["sts12"], "alignment": ["stsb"]}
    with pytest.raises(BenchError, match="no task of suite"):
        select_tasks(["sts", "alignment"], ["sickr"])
    with pytest.raises(BenchError, match="not in --suites"):
        select_tasks(["alignment"], ["sts/stsb"])
    with pytest.raises(BenchError, match="Unknown suite"):
        select_tasks(["stss"], [])


def test_a_grid_runs_a_protocol_by_name(grid_env, tiny_model):
    """`bench grid --protocol`: its suite and profile, some of its tasks, and its average's own summary cell."""
    from app.commands.grid_runner import Cell

    plan = plan_for(["grid", "--models", "tiny", "--protocol", "mteb-sts", "--tasks", "stsb,sickr",
                     "--allow-unverified-data"])
    assert list(plan.protocols) == ["sts"] and plan.protocols["sts"].name == "mteb-sts"
    assert plan.tasks == {"sts": ["stsb", "sickr"]} and plan.settings.profile == "paper"
    assert [c.task for c in plan.cells()] == ["stsb", "sickr", "avg"]
    summary = plan.config(Cell("tiny", "sts", "avg", 0, summary=True))
    assert summary["summary_of"] == ["sickr", "stsb"] and summary["averaging"]["metrics"] == ["spearman"]
    default = plan_for(["grid", "--models", "tiny", "--suites", "sts", "--tasks", "stsb,sickr", "--profile", "paper",
                        "--allow-unverified-data"])
    assert "averaging" not in default.config(Cell("tiny", "sts", "avg", 0, summary=True))
    assert default.config(Cell("tiny", "sts", "stsb", 0)) == plan.config(Cell("tiny", "sts", "stsb", 0))
    with pytest.raises(BenchError, match="--tasks cola: no task of that name"):
        plan_for(["grid", "--models", "tiny", "--protocol", "mteb-sts", "--tasks", "cola", "--allow-unverified-data"])


def test_grid_modules_import_neither_torch_nor_ray():
    code = ("import sys, app.cli, app.commands.grid, app.commands.grid_runner; "
            "print(sorted(m for m in ('torch', 'ray', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_dry_run_lists_stored_cells_training_and_costs_from_earlier_runs(grid_env, tiny_model, monkeypatch, capsys):
    from bench.models import registry
    from app.commands.grid_runner import Cell, estimate, past_timings

    trained = registry.ModelSpec(name="tiny-simcse", backbone=tiny_model.backbone, pooler="avg", max_len=64,
                                 method="simcse", base="tiny", profile="smoke")
    monkeypatch.setitem(registry.MODELS, "tiny-simcse", trained)
    assert main(["run", "--suite", "alignment", "--model", "tiny", "--task", "stsb", "--seed", "0",
                 "--allow-unverified-data"]) == 0
    stored = ResultStore(grid_env.results).read(ResultStore(grid_env.results).cells()[0])
    wall = stored["results"][0]["wall_s"]

    capsys.readouterr()
    assert main(["grid", "--models", "tiny,tiny-simcse", "--suites", "alignment", "--seeds", "2", "--dry-run",
                 "--allow-unverified-data"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "train first" in out
    assert stored["cell"]["weights_sha256"][:8] in out  # the stored cell, with the weights it was computed with
    assert "3 cell(s) without a stored result" in out  # tiny seed 1, tiny-simcse seeds 0 and 1
    # seed 1 and the other model have no timing of their own: the stored cell's wall time stands in
    timings = past_timings(grid_env.results)
    assert estimate(timings, Cell("tiny", "alignment", "stsb", 1)) == pytest.approx(wall)
    assert estimate(timings, Cell("tiny-simcse", "alignment", "stsb", 0)) == pytest.approx(wall)
    assert estimate(timings, Cell("tiny", "sts", "stsb", 0)) is None
    assert not (grid_env.results / "cells" / "tiny-simcse").exists()  # nothing ran
    # Under other settings (--limit) the stored cell is not this plan's, and the dry run says where it is.
    assert main(["grid", "--models", "tiny", "--suites", "alignment", "--seeds", "2", "--limit", "3", "--dry-run",
                 "--allow-unverified-data"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "2 cell(s) without a stored result" in out and "no (1 under other settings)" in out
    assert "Of the cells to run, 1 are stored under other settings" in out


def test_train_launcher_accelerate_runs_two_cpu_processes(tiny_bert_dir, tmp_path):
    """`bench train --launcher accelerate --num-processes 2`: DDP over gloo on CPU, world size 2 in the card."""
    import json
    import os
    import random

    from safetensors.torch import load_file

    from tests.conftest import WORDS

    rng = random.Random(0)
    text = tmp_path / "sentences.txt"
    text.write_text("".join(" ".join(rng.choice(WORDS) for _ in range(6)) + "\n" for _ in range(64)))
    env = {**os.environ, "BENCH_HOME": str(tmp_path / "home"), "BENCH_DATA_DIR": str(tmp_path / "data"),
           "BENCH_RESULTS_DIR": str(tmp_path / "results")}
    env.pop("BENCH_LAUNCHED", None)
    cmd = [sys.executable, "-m", "app.cli", "train", "--method", "simcse", "--backbone", str(tiny_bert_dir),
           "--data", str(text), "--steps", "2", "--eval-every", "0", "--batch-size", "8", "--name", "ddp-tiny",
           "--launcher", "accelerate", "--num-processes", "2"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    out_dir = tmp_path / "home" / "models" / "ddp-tiny"
    card = json.loads((out_dir / "bench_card.json").read_text())
    assert (card["world_size"], card["steps"]) == (2, 2)
    before, after = load_file(tiny_bert_dir / "model.safetensors"), load_file(out_dir / "model.safetensors")
    changed = [k for k in before if k in after and not (before[k] == after[k]).all()]
    assert changed, "two DDP steps left every weight unchanged"


def test_cost_estimate_scales_by_examples_runs_and_recipes():
    from app.commands.grid_runner import scaled_cost

    earlier = {"limit": 50, "runs": 1, "recipes": ["textfooler", "pwws"], "profile": "smoke"}
    planned = {"limit": 200, "runs": 2, "recipes": ["textfooler"], "profile": "smoke"}
    assert scaled_cost(earlier, 100.0, planned) == pytest.approx(100.0 * 4 * 2 / 2)
    # A cell under another profile or victim mode says nothing about this one's cost.
    assert scaled_cost(earlier, 100.0, {**planned, "profile": "study"}) is None
    assert scaled_cost({**earlier, "victim": "frozen"}, 100.0, {**planned, "victim": "finetune"}) is None
    # A whole-task plan is estimated only from whole-task cells.
    assert scaled_cost(earlier, 100.0, {**planned, "limit": None}) is None
    whole = {**earlier, "limit": 1379, "whole_task": True}
    assert scaled_cost(whole, 30.0, {**planned, "limit": None}) == pytest.approx(30.0 * 2 / 2)


def test_rough_estimate_borrows_from_other_victim_and_constraint_settings_only():
    from app.commands.grid_runner import Cell, estimate

    unified = {"limit": 200, "runs": 2, "recipes": ["textfooler"], "profile": "study", "victim": "frozen",
               "constraints": "unified"}
    timings = {("a", "adversarial", "mr"): [(unified, 600.0)]}
    cell = Cell("b", "adversarial", "mr", 0)
    paper = {**unified, "constraints": "paper", "victim": "finetune"}
    assert estimate(timings, cell, paper) is None  # never run under this setting
    assert estimate(timings, cell, paper, rough=True) == pytest.approx(600.0)
    # the constraints are relaxed before the victim mode
    timings[("a", "adversarial", "mr")].append(({**unified, "victim": "finetune"}, 1800.0))
    assert estimate(timings, cell, paper, rough=True) == pytest.approx(1800.0)
    assert estimate(timings, cell, {**paper, "profile": "smoke"}, rough=True) is None  # the profile still binds


def test_training_estimate_reads_cards_of_the_same_method_and_profile(tmp_path, monkeypatch):
    import json

    from bench.models import registry
    from app.commands.grid_runner import training_estimate

    base = registry.ModelSpec(name="b", backbone="x")
    done = registry.ModelSpec(name="m1", backbone="x", method="simcse", base="b", profile="study")
    todo = registry.ModelSpec(name="m2", backbone="y", method="simcse", base="b", profile="study")
    other = registry.ModelSpec(name="m3", backbone="x", method="robustembed", base="b", profile="study")
    monkeypatch.setattr(registry, "MODELS", {s.name: s for s in (base, done, todo, other)})
    for spec, wall in ((done, 600.0), (other, 3600.0)):
        (tmp_path / spec.name).mkdir()
        (tmp_path / spec.name / "bench_card.json").write_text(json.dumps({"wall_s": wall}))
    assert training_estimate(todo, tmp_path) == 600.0
    assert training_estimate(registry.ModelSpec(name="z", backbone="x", method="dcl", profile="study"),
                             tmp_path) is None

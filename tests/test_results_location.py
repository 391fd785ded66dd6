"""Where results go: $BENCH_HOME/results by default, the checkout's results/ only when asked
(--results-dir results, bench publish); a run from a checkout leaves `git status` clean."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main as cli
from bench.paths import PUBLISHED_RESULTS, REPO_ROOT, Paths

IN_GIT = (REPO_ROOT / ".git").exists() and shutil.which("git") is not None


def test_results_default_to_bench_home(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_HOME", str(tmp_path))
    monkeypatch.delenv("BENCH_RESULTS_DIR", raising=False)
    paths = Paths.from_env()
    assert paths.results == tmp_path.resolve() / "results"
    assert paths.with_results("results").results == (Path.cwd() / "results").resolve()


def _status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--ignored=no"], cwd=REPO_ROOT,
                          capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(not IN_GIT, reason="not a git checkout")
def test_a_run_from_the_checkout_leaves_git_status_clean(tmp_path, tiny_bert_dir):
    """`bench run` and `bench report` from the checkout's root, with only BENCH_HOME and the data set, as
    the README's first command: nothing in the checkout changes."""
    from tests.conftest import write_sts_fixtures

    before = _status()
    env = {k: v for k, v in os.environ.items() if k not in ("BENCH_RESULTS_DIR",)}
    env.update(BENCH_HOME=str(tmp_path / "home"), PYTHONPATH=str(REPO_ROOT))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "models.toml").write_text(f'[tiny]\nbackbone = "{tiny_bert_dir}"\npooler = "avg"\n'
                                                   f'max_len = 64\n')
    # fixtures are registered by monkeypatching bench.data.datasets in-process, so the run happens in a child
    # that applies the same patch
    code = f"""
import sys
import pytest
from pathlib import Path
from tests.conftest import write_sts_fixtures
mp = pytest.MonkeyPatch()
write_sts_fixtures(mp, Path({str(tmp_path / 'data')!r}))
from app.cli import main
rc = main(["run", "--device", "cpu", "--suite", "sts", "--model", "tiny", "--task", "stsb"])
rc = rc or main(["report", "--suite", "sts"])
sys.exit(rc)
"""
    env["BENCH_DATA_DIR"] = str(tmp_path / "data")
    (tmp_path / "data").mkdir()
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "home" / "results" / "leaderboard.csv").exists()
    assert (tmp_path / "home" / "reports" / "robustembed-table1.md").exists()
    assert (tmp_path / "home" / "results" / "plugins.json").exists()
    assert _status() == before


def test_publish_copies_chosen_cells_and_their_metadata(bench_env, tiny_model, tmp_path, capsys):
    assert cli(["run", "--device", "cpu", "--suite", "sts", "--model", "tiny", "--task", "stsb"]) == 0
    assert cli(["run", "--device", "cpu", "--suite", "alignment", "--model", "tiny"]) == 0
    published = tmp_path / "published"
    assert cli(["publish", "--model", "tiny", "--suite", "sts", "--to", str(published)]) == 0
    cells = sorted(p.relative_to(published) for p in (published / "cells").rglob("*.json"))
    assert cells and all(p.parts[:3] == ("cells", "tiny", "sts") for p in cells)
    sidecars = sorted(p.relative_to(published) for p in (published / "cells").rglob("*.evidence.json.gz"))
    assert len(sidecars) == len(cells)  # each cell's evidence (CIs, paired tests) travels with it
    rows = list(csv.DictReader((published / "leaderboard.csv").open()))
    assert {r["suite"] for r in rows} == {"sts"} and {r["model"] for r in rows} == {"tiny"}
    meta = json.loads((published / "plugins.json").read_text())
    assert set(meta["models"]) == {"tiny"} and set(meta["suites"]) == {"sts"}
    assert meta["suites"]["sts"]["tasks"]["stsb"]["label"] == "STS-B"
    assert cli(["publish", "--model", "nobody", "--to", str(published)]) == 2
    assert PUBLISHED_RESULTS == REPO_ROOT / "results"

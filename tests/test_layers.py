"""The layers hold: the kernel imports no CLI, suites, attacks or reports; the application modules keep
to their side; attacks/ has no import cycle; reports/ imports no registry, suites, attacks or torch.

Imports are read with ``ast`` from the source, function-level (lazy) imports included, so a lazy
import cannot hide a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The kernel (docs/ARCHITECTURE.md): plain library code that any layer may use.
KERNEL = ("errors", "paths", "registry", "plugins", "data", "store", "encoder", "metrics", "stats", "uncertainty",
          "poolers", "senteval_adapter", "models_file", "metadata", "papers")
FORBIDDEN_FOR_KERNEL = ("bench.cli", "bench.commands", "bench.grid", "bench.train", "bench.methods",
                        "bench.finetune", "suites", "attacks", "reports")


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, at any depth of the file (module level, functions, classes)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}  # `from attacks import mlm`
    return found


def _hits(modules: set[str], prefixes) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes))


def kernel_files() -> list[Path]:
    return [REPO / "bench" / f"{name}.py" for name in KERNEL if (REPO / "bench" / f"{name}.py").exists()]


def test_imports_are_read_from_function_bodies_too(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import os\n\ndef f():\n    from suites.sts import X\n    import attacks.resources\n")
    assert {"os", "suites.sts", "attacks.resources"} <= imports_of(src)
    assert _hits(imports_of(src), ("suites", "attacks")) == ["attacks.resources", "suites.sts", "suites.sts.X"]


@pytest.mark.parametrize("path", kernel_files(), ids=lambda p: p.stem)
def test_kernel_imports_no_cli_suites_attacks_or_reports(path):
    bad = _hits(imports_of(path), FORBIDDEN_FOR_KERNEL)
    assert not bad, f"kernel module bench/{path.name} imports {bad}"


def test_kernel_imports_only_kernel_modules_of_bench():
    kernel = {f"bench.{name}" for name in KERNEL} | {"bench"}
    for path in kernel_files():
        own = {m for m in imports_of(path) if m == "bench" or m.startswith("bench.")}
        # `from bench import __version__` reads as bench.__version__; `from bench.x import y` as bench.x.y
        outside = sorted(m for m in own if m not in kernel and m.rsplit(".", 1)[0] not in kernel)
        assert not outside, f"bench/{path.name} imports non-kernel {outside}"


def test_grid_does_not_import_the_cli_and_train_does_not_import_suites():
    assert not _hits(imports_of(REPO / "bench" / "grid.py"), ("bench.commands", "bench.cli"))
    assert not _hits(imports_of(REPO / "bench" / "train.py"), ("suites", "attacks", "bench.commands", "bench.cli"))


def test_attacks_have_no_import_cycle():
    modules = {p.stem: p for p in (REPO / "attacks").glob("*.py") if p.stem != "__init__"}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for m in imports_of(path):
            parts = m.split(".")
            if parts[0] == "attacks" and len(parts) > 1 and parts[1] in modules:
                deps.add(parts[1])
        graph[name] = deps - {name}

    def cycle_from(node, stack, seen):
        for dep in sorted(graph[node]):
            if dep in stack:
                return stack[stack.index(dep):] + [dep]
            if dep not in seen:
                seen.add(dep)
                found = cycle_from(dep, stack + [dep], seen)
                if found:
                    return found
        return None

    for start in sorted(graph):
        cycle = cycle_from(start, [start], {start})
        assert cycle is None, "attacks/ import cycle: " + " -> ".join(cycle)


def test_reports_import_no_registry_suites_attacks_or_torch():
    for path in sorted((REPO / "reports").glob("*.py")):
        bad = _hits(imports_of(path), ("bench.registry", "suites", "attacks", "torch", "transformers",
                                       "bench.commands", "bench.cli"))
        assert not bad, f"reports/{path.name} imports {bad}"

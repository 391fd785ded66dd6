"""The pinned built-in model specs, ``tests/builtin_models.json``: every spec ``bench/models/models.toml`` makes,
field by field, in display order (tests/test_registry.py compares the registry with it).

    python -m tests.builtin_models --write    # after a change to a built-in model you mean to make
    python -m tests.builtin_models            # exit 1 and name the first model that differs
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

PINNED = Path(__file__).with_name("builtin_models.json")
REGENERATE = "python -m tests.builtin_models --write"


def current_specs() -> dict[str, dict]:
    """name -> the spec's fields as the registry makes them (``keyed`` is set per run, so left out)."""
    from bench.models.registry import MODELS

    return {name: {k: v for k, v in asdict(spec).items() if k != "keyed"} for name, spec in MODELS.items()}


def pinned_specs() -> dict[str, dict]:
    return json.loads(PINNED.read_text())


def first_difference(pinned: dict, current: dict) -> str:
    """"" when every pinned model comes first in the registry, in order, with the same fields; else what differs.
    Built-in models added after the pinned ones differ from nothing (they are pinned at the next --write)."""
    if list(current)[:len(pinned)] != list(pinned):
        return f"the built-in models' order or names changed (pinned: {', '.join(list(pinned)[:5])}, ...)"
    changed = next((name for name in pinned if current[name] != pinned[name]), None)
    return f"built-in model '{changed}' changed" if changed else ""


def main(argv: list[str]) -> int:
    if "--write" in argv:
        PINNED.write_text(json.dumps(current_specs(), indent=1) + "\n")
        print(f"wrote {PINNED}")
        return 0
    problem = first_difference(pinned_specs(), current_specs())
    print(problem or "the pinned built-in models match", file=sys.stderr if problem else sys.stdout)
    return 1 if problem else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Per-example agreement of two victims' attack outcomes, from their attack logs (attacks/log.py).

Two logs pair up when their headers agree on everything but the model and its victim's weights
(task, recipe, run seed, victim mode, constraints, resources served and built), so each pair is
one attack setting run against two encoders. Examples match by index, and must hold the same
original text. The table and its tests are ``bench.scoring.stats.outcome_agreement``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from attacks.log import read_log
from bench.results.store import ResultStore, model_dir
from bench.errors import BenchError
from bench.scoring.stats import outcome_agreement

OWN_KEYS = ("model", "victim_sha256", "victim_base_sha256")  # what differs between two models' logs of one setting
OUTCOME = {"successful": 1.0, "failed": 0.0, "skipped": math.nan}


def setting(header: dict) -> dict:
    return {k: v for k, v in header.items() if k not in OWN_KEYS}


def setting_label(header: dict) -> str:
    """A short name for the setting: task, recipe, victim, constraints and run, e.g. 'mr textfooler frozen unified run0'."""
    constraints = header.get("constraints") or {}
    return " ".join(str(x) for x in (header.get("task"), header.get("recipe"), header.get("victim"),
                                     constraints.get("mode", ""), f"run{header.get('run_seed')}") if x != "")


def model_logs(logs_root: Path, model: str) -> dict[str, tuple[dict, Path]]:
    """The model's logs under ``logs_root/<model>/``, by their setting (as canonical JSON). A log a result cell
    of the results directory above ``logs_root`` records is checked against its sha256 first (BadLog)."""
    out = {}
    recorded = ResultStore(Path(logs_root).parent).recorded_logs(model)
    for path in sorted((Path(logs_root) / model_dir(model)).rglob("*.jsonl")):
        header, _ = read_log(path, recorded.get(str(path.resolve())))
        key = json.dumps(setting(header), sort_keys=True)
        if key in out:
            raise BenchError(f"Two attack logs of {model} share one setting: {out[key][1]} and {path}. "
                             f"Move the stale one out of {logs_root}.")
        out[key] = (header, path)
    return out


def log_agreement(path_a: Path, path_b: Path) -> dict:
    """The outcome table of two logs of one setting (examples matched by index)."""
    (_, recs_a), (_, recs_b) = read_log(path_a), read_log(path_b)
    by_b = {r["index"]: r for r in recs_b}
    shared = [r for r in recs_a if r["index"] in by_b]
    differing = [r["index"] for r in shared if r["original"] != by_b[r["index"]]["original"]]
    if differing:
        raise BenchError(f"{path_a} and {path_b} attack different sentences at index {differing[0]}: they are "
                         f"not one attack set. Re-run the attacks on the same data.")
    table = outcome_agreement([OUTCOME[r["result_type"]] for r in shared],
                              [OUTCOME[by_b[r["index"]]["result_type"]] for r in shared],
                              ids=[r["index"] for r in shared])
    return {**table, "examples": len(shared), "only_in_a": len(recs_a) - len(shared),
            "only_in_b": len(recs_b) - len(shared)}


def agreement(logs_root: Path, model_a: str, model_b: str) -> list[dict]:
    """One table per attack setting both models' logs hold, ordered by setting label."""
    a, b = model_logs(logs_root, model_a), model_logs(logs_root, model_b)
    out = []
    for key in sorted(set(a) & set(b), key=lambda k: setting_label(a[k][0])):
        (header, path_a), (_, path_b) = a[key], b[key]
        out.append({"setting": setting_label(header), "task": header.get("task"), "recipe": header.get("recipe"),
                    "victim": header.get("victim"), "constraints": (header.get("constraints") or {}).get("mode"),
                    "run_seed": header.get("run_seed"), "log_a": path_a.name, "log_b": path_b.name,
                    **log_agreement(path_a, path_b)})
    return out

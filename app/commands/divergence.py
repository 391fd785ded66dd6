"""bench divergence A B [--base M] [--results-dir D] [--json]: how far apart two models trained from one base are.

- weights: ||theta_B - theta_A|| / ||theta_A - theta_0|| per layer and overall (bench/models/weights.py), theta_0
  the base both were trained from (the registry's base of A unless --base);
- attack outcomes: per attack setting both models' logs hold (<results>/attack_logs/<model>/...), the
  paired table (both succeed, both fail, only A, only B) with McNemar's test and the paired difference
  in success rate (attacks/agreement.py).

Written to <results>/divergence/<A>__<B>.json, which `bench report` reads (reports never load a model).
"""

from __future__ import annotations

import json
from pathlib import Path

FORMAT = "bench-divergence/1"


def add_arguments(parser):
    parser.add_argument("model_a", metavar="A", help="the reference model (e.g. the SimCSE checkpoint)")
    parser.add_argument("model_b", metavar="B", help="the model compared with A (e.g. the RobustEmbed checkpoint)")
    parser.add_argument("--base", help="the model both were trained from (default: A's registered base)")
    parser.add_argument("--json", action="store_true", help="print the written JSON")
    parser.add_argument("--results-dir", type=Path,
                        help="results directory (default: $BENCH_RESULTS_DIR, else $BENCH_HOME/results): its "
                             "attack_logs/ are read and divergence/ written; `--results-dir results`: the checkout's")


def output_path(results: Path, model_a: str, model_b: str) -> Path:
    """<results>/divergence/<A>__<B>.json, the names mapped by ``bench.paths.file_name`` (never outside)."""
    from bench.paths import file_name, inside

    return inside(Path(results) / "divergence", f"{file_name(model_a, 'model name')}__{file_name(model_b, 'model name')}.json",
                  what="divergence file")


def _weights_dir(name: str, paths) -> Path:
    from bench.models.encoder import resolve_backbone
    from bench.errors import BenchError
    from bench.models.registry import resolve_model

    spec = resolve_model(name, paths)
    where = Path(resolve_backbone(spec, paths.models))
    if not where.is_dir():
        raise BenchError(f"Model '{name}' has no local weights ({where}); weight distances need checkpoints on disk.")
    return where


def weights_section(args, paths) -> dict:
    from bench.errors import BenchError
    from bench.io import file_sha256
    from bench.models.registry import resolve_model
    from bench.models.weights import weight_distances

    base = args.base or resolve_model(args.model_a, paths).base
    if not base:
        raise BenchError(f"Model '{args.model_a}' has no registered base to measure from. Fix: name it with "
                         f"--base MODEL (the model both were trained from).")
    try:
        dirs = {role: _weights_dir(name, paths) for role, name in (("a", args.model_a), ("b", args.model_b),
                                                                   ("base", base))}
    except BenchError as exc:  # a checkpoint not trained or built yet: the outcome tables are still written
        return {"base": base, "missing": str(exc)}
    distances = weight_distances(dirs["a"], dirs["b"], dirs["base"])
    if not distances["overall"]["tensors"]:  # other architectures: a 0.0 here would read as "identical"
        return {"base": base, "missing": f"no tensor of the same name and shape in A, B and the base "
                                         f"({len(distances['left_out'])} left out): the models differ in architecture"}
    return {"base": base, **distances,
            "sha256": {role: file_sha256(d / "model.safetensors") for role, d in dirs.items()}}


def _print(report: dict) -> None:
    from rich.table import Table

    from app.commands import output_console
    from bench.scoring.stats import format_number, format_p

    console = output_console()
    w = report["weights"]
    if "missing" in w:
        console.print(f"weights: not measured ({w['missing']})")
    else:
        table = Table(title=f"||θ_B − θ_A|| / ||θ_A − θ_0||: A {report['a']}, B {report['b']}, θ_0 {w['base']}")
        for col in ("group", "‖θ_B − θ_A‖", "‖θ_A − θ_0‖", "‖θ_B − θ_0‖", "ratio"):
            table.add_column(col, justify="left" if col == "group" else "right")
        for name, d in [*w["groups"].items(), ("overall", w["overall"])]:
            table.add_row(name, *(format_number(d[k], 4) for k in ("between", "a_moved", "b_moved", "ratio")))
        console.print(table)
    table = Table(title="attack outcomes, examples both victims attacked (A = first model)")
    for col in ("setting", "n", "both succeed", "both fail", "only A", "only B", "agree", "ASR B − A [95% CI]",
                "McNemar p (exact)"):
        table.add_column(col, justify="left" if col == "setting" else "right")
    for t in report["outcomes"]:
        ci = f"[{format_number(t.get('asr_ci_low'), 2, True)}, {format_number(t.get('asr_ci_high'), 2, True)}]"
        table.add_row(t["setting"], str(t["attacked_by_both"]), str(t["both_succeed"]), str(t["both_fail"]),
                      str(t["a_only"]), str(t["b_only"]), format_number(t["agreement"], 3),
                      f"{format_number(t.get('asr_difference'), 2, True)} {ci}", format_p(t["mcnemar_p_exact"]))
    console.print(table if report["outcomes"] else "attack outcomes: no attack setting both models' logs hold")


def stored_weights(path: Path) -> dict | None:
    """The weights section an earlier run measured and wrote to ``path``, if any (None: none, or not measured)."""
    try:
        weights = json.loads(path.read_text(encoding="utf-8")).get("weights")
    except (OSError, ValueError, AttributeError):
        return None
    return weights if isinstance(weights, dict) and "missing" not in weights and weights.get("overall") else None


def main(args) -> int:
    from attacks.agreement import agreement
    from bench.io import atomic_write_text
    from bench.errors import BenchError
    from bench.paths import Paths

    if args.model_a == args.model_b:
        raise BenchError("divergence needs two different models (A and B).")
    paths = Paths.from_env().with_results(args.results_dir)
    path = output_path(paths.results, args.model_a, args.model_b)  # a name that escapes fails before any work
    report = {"format": FORMAT, "a": args.model_a, "b": args.model_b, "weights": weights_section(args, paths),
              "outcomes": agreement(paths.results / "attack_logs", args.model_a, args.model_b)}
    kept = stored_weights(path) if "missing" in report["weights"] else None
    if kept is not None:  # stored work needs nothing: the checkpoints are not here, their measure is
        print(f"weights: not here ({report['weights']['missing']}); the measure stored in {path} is kept.")
        report["weights"] = kept
    if "missing" in report["weights"] and not report["outcomes"]:
        raise BenchError(f"Nothing to compare between {args.model_a} and {args.model_b}: weights not measured "
                         f"({report['weights']['missing']}), and no attack setting both models' logs hold under "
                         f"{paths.results / 'attack_logs'}. Fix: train or build both checkpoints from one base, or "
                         f"run the adversarial suite for both with the same options. Nothing was written.")
    atomic_write_text(path, json.dumps(report, indent=1, sort_keys=True, default=float) + "\n")
    if args.json:
        print(json.dumps(report, indent=1, sort_keys=True, default=float))
    else:
        _print(report)
        print(f"Written: {path}")
    return 0

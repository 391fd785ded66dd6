"""bench compare A B [--suite S] [--task T] [--metric M]... [--per-run] [--json] [--results-dir DIR]

Paired differences B - A over every result cell the two models share (same suite, task, seed and
configuration; only the model differs), from the stored results and their evidence sidecars alone
(no model is loaded). Per row: both values, B - A, its 95% CI and a p-value:

- STS and other correlations: paired bootstrap over the same pairs (1,000 resamples, seeded);
- attack rates (success rate, accuracy under attack, ...) and accuracies: paired bootstrap over the
  same examples for the CI, McNemar's mid-p for the p-value. The success rate counts only the examples
  a victim attacked (those it classified correctly), so A, B, B - A, its CI and McNemar's test all rest
  on the examples both victims attacked, as in the claims ledger; the examples attacked by one victim
  only are counted and reported, and `--json` keeps each cell's own rate (stored_a, stored_b);
- continuous per-example measures (queries, % words perturbed): paired bootstrap of the mean difference;
- averages (STS avg, transfer avg) and means over runs: the parts pair up (task with task, run with
  run) and the difference of the averages is bootstrapped from each part's paired resamples; runs pool
  McNemar's counts for the p-value, an (unweighted) average of tasks takes the bootstrap's. Two averages
  over different tasks are not compared: their row is marked ≠ and a note says which tasks each is over.

A difference whose CI excludes 0 and whose p is below 0.05 is flagged (*). Rows without stored evidence show the difference of
the values only.
"""

from __future__ import annotations

import difflib
import json
import re
import warnings
from pathlib import Path

PER_RUN = re.compile(r"^run\d+$")


def add_arguments(parser):
    parser.add_argument("model_a", metavar="A", help="baseline model (its cells must be in the result store)")
    parser.add_argument("model_b", metavar="B", help="model compared with A: differences are B - A")
    parser.add_argument("--suite", help="only this suite's cells")
    parser.add_argument("--task", help="only this task's cells")
    parser.add_argument("--metric", action="append", dest="metrics", metavar="M",
                        help="repeatable; only these metrics (default: every metric with a stored interval)")
    parser.add_argument("--per-run", action="store_true",
                        help="also list each replication's rows (run0, run1, ...), not just their mean")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--results-dir", type=Path,
                        help="results directory (default: $BENCH_RESULTS_DIR, else $BENCH_HOME/results); "
                             "`--results-dir results` compares the checkout's published leaderboard")


def _models_with_cells(store) -> list[str]:
    """The model names the stored cells hold (a Hub id's slash included, as ``bench run`` named it)."""
    return sorted({cell["cell"]["model"] for _, cell in store.readable_cells()})


def _short_method(method: str) -> str:
    return ("McNemar" if "McNemar" in method else "bootstrap") if method else "values only"


def main(args) -> int:
    from bench.paths import Paths
    from bench.results.store import ResultStore

    store = ResultStore(Paths.from_env().with_results(args.results_dir).results)
    check_models(store, args.model_a, args.model_b)
    check_metrics(store, args)
    diffs, counts = paired_rows(store, args)
    if args.json:
        print(json.dumps({"a": args.model_a, "b": args.model_b, "difference": "B - A", **counts,
                          "rows": [d.as_dict() for d in diffs],
                          "bad_evidence": {path: exc.reason for path, exc in store.bad_evidence.items()}}, indent=1))
        return refuse_bad_evidence(store)
    if not diffs and store.bad_evidence:  # nothing left to show: no empty table
        return refuse_bad_evidence(store)
    from app.commands import output_console

    console = output_console()
    if not counts["shared_cells"]:
        for line in counts["other_task_averages"]:
            console.print(f"Not compared, averages over different tasks: {line}.")
        console.print(f"{args.model_a} and {args.model_b} share no result cell"
                      f"{' in suite ' + args.suite if args.suite else ''}{' for task ' + args.task if args.task else ''} "
                      f"(same suite, task, seed and configuration). Cells only {args.model_a}: {counts['only_a']}, "
                      f"only {args.model_b}: {counts['only_b']}. Run the missing cells with the same options.")
        return 0
    console.print(difference_table(args.model_a, args.model_b, diffs))
    for note in footnotes(args.model_a, args.model_b, diffs, counts):
        console.print(note)
    return refuse_bad_evidence(store)


def check_models(store, model_a: str, model_b: str) -> None:
    """Both models have stored cells and differ; else a BenchError that names the fix."""
    from bench.errors import BenchError

    known = _models_with_cells(store)
    for name in (model_a, model_b):
        if name not in known:
            if not known:
                raise BenchError(f"No result cells under {store.root / 'cells'}. Run `bench run` for both models "
                                 f"first, or name a results directory with --results-dir (`--results-dir results`: the "
                                 f"checkout's published leaderboard).")
            close = difflib.get_close_matches(name, known, n=5, cutoff=0.4)
            raise BenchError(f"No stored results for model '{name}' under {store.root / 'cells'}."
                             + (f" Did you mean: {', '.join(close)}?" if close else "")
                             + f" Models with results: {', '.join(known)}. Run `bench run --model {name} ...` first.")
    if model_a == model_b:
        raise BenchError("compare needs two different models (A and B).")


def check_metrics(store, args) -> None:
    """Every --metric is one the two models' cells hold; else a BenchError listing those they hold."""
    from bench.errors import BenchError

    if not args.metrics:
        return
    held = sorted({row["metric"] for model in (args.model_a, args.model_b)
                   for _, cell in store.cells_of(model, args.suite, args.task) for row in cell["results"]})
    unknown = [m for m in args.metrics if m not in held]
    if unknown:
        raise BenchError(f"--metric {', '.join(unknown)}: no such metric in the cells of {args.model_a} and "
                         f"{args.model_b}. Fix: choose from {', '.join(held) or 'none (no cells)'}.")


def paired_rows(store, args) -> tuple[list, dict]:
    """The paired differences B − A the flags ask for, and the shared/one-sided cell counts."""
    from bench.results.store import EvidenceWarning
    from bench.results.uncertainty import compare_models

    def include(key: dict) -> bool:
        if args.metrics and key["metric"] not in args.metrics:
            return False
        return args.per_run or not PER_RUN.match(key["aggregation"] or "")

    with warnings.catch_warnings():  # bad evidence is reported once, as the error
        warnings.simplefilter("ignore", EvidenceWarning)
        diffs, counts = compare_models(store, args.model_a, args.model_b, args.suite, args.task, include)
    if not args.metrics:  # by default, the rows a paired test exists for, and averages left uncompared
        diffs = [d for d in diffs if d.diff is not None or d.other_tasks]
    return diffs, counts


def difference_table(model_a: str, model_b: str, diffs: list):
    from rich.table import Table

    from bench.scoring.stats import display_decimals, format_number, format_p
    from bench.results.uncertainty import UNVERIFIED

    table = Table(title=f"{model_b} − {model_a} (paired, 95% CI)")
    with_settings = any(d.setting for d in diffs)  # a task stored under several settings: say which row is which
    for col, justify in (("suite", "left"), ("task", "left"), *((("setting", "left"),) if with_settings else ()),
                         ("attack", "left"), ("metric", "left"),
                         ("agg.", "left"), ("seed", "right"), ("A", "right"), ("B", "right"), ("B − A", "right"),
                         ("95% CI", "right"), ("p", "right"), ("test", "left"), ("pairs", "right")):
        table.add_column(col, justify=justify)
    for d in diffs:
        x = d.diff
        k = display_decimals(x.low, x.high) if x is not None else 2  # the CI's width to 2 significant digits
        ci = (f"[{format_number(x.low, k, signed=True)}, {format_number(x.high, k, signed=True)}]"
              if x is not None and x.low is not None else "–")
        flag = " *" if d.significant else ""
        table.add_row(d.suite, d.task, *((d.setting,) if with_settings else ()), d.key["attack"], d.key["metric"],
                      d.key["aggregation"], str(d.seed),
                      format_number(d.a, k) + (UNVERIFIED if d.unverified_a else ""),
                      format_number(d.b, k) + (UNVERIFIED if d.unverified_b else ""),
                      "≠" if d.other_tasks else format_number(d.estimate, k, signed=True) + flag,
                      ci, format_p(x.p if x else None),
                      _short_method(x.method if x else ""), str(x.n) if x else "–")
    return table


def footnotes(model_a: str, model_b: str, diffs: list, counts: dict) -> list[str]:
    """What the table's marks and intervals mean, and what it leaves out."""
    from bench.results.uncertainty import UNVERIFIED

    notes = [f"{counts['shared_cells']} shared cell(s); cells only {model_a}: {counts['only_a']}, only "
             f"{model_b}: {counts['only_b']}. *: the 95% CI of B − A excludes 0 and p < 0.05. CIs: paired bootstrap "
             f"(1,000 resamples, seed 0) over the examples both cells scored; p: McNemar mid-p for per-example "
             f"binary outcomes (on examples both counted), else the bootstrap's."]
    unmatched = sum(d.diff.extra.get("unmatched", 0) for d in diffs if d.diff)
    one_sided = sum(d.diff.extra.get("counted_by_one", 0) for d in diffs if d.diff and "mcnemar" in d.diff.extra)
    if one_sided or unmatched:
        notes.append(f"Examples counted by one model only (e.g. skipped by one victim): {one_sided}, left out: "
                     f"A, B, B − A, the CI and McNemar's test rest on the examples both counted (each cell's own "
                     f"rate: bench results, or --json's stored_a/stored_b); examples in one cell only: "
                     f"{unmatched}, left out.")
    notes += [f"Not compared, averages over different tasks (in cells the two do not share): {line}."
              for line in counts.get("other_task_averages", ())]
    unverified = sorted({f for d in diffs for f in d.unverified_a + d.unverified_b})
    if unverified:
        notes.append(f"{UNVERIFIED}: computed on data that failed its sha256 check (run with --allow-unverified-data): "
                     + ", ".join(unverified) + ".")
    notes += [f"≠ {d.suite}/{d.task} {d.key['metric']} ({d.key['aggregation']}): {d.other_tasks}; not compared."
              for d in diffs if d.other_tasks]
    missing = [d for d in diffs if d.diff is None and not d.other_tasks]
    if missing:
        notes.append(f"{len(missing)} row(s) without stored evidence show the difference of values only.")
    return notes


def refuse_bad_evidence(store) -> int:
    """0, or a BenchError naming each compared cell whose evidence is missing or corrupt and how to redo it."""
    from bench.errors import BenchError

    if not store.bad_evidence:
        return 0
    lines = []
    for path, exc in store.bad_evidence.items():
        cell = store.read(path).get("cell", {})
        lines.append(f"{path}: {exc.reason} (redo: bench run --suite {cell.get('suite')} --model {cell.get('model')} "
                     f"--task {cell.get('task')} --seed {cell.get('seed')}, with the options that made it)")
    raise BenchError(f"{len(lines)} compared cell(s) have missing or corrupt evidence, so their paired differences "
                     f"are left out: " + "; ".join(lines) + ". Fix: re-run those `bench run` commands; each moves "
                     f"the cell and its evidence to quarantine/ and recomputes them.")

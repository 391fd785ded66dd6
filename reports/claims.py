"""The claims ledger: each seed paper's headline claims (``reports/claims.toml``), tested under one protocol.

A claim names a paper's table, the metric and row it compares, our two models in that role (the
method and its baseline, both from one base under one profile), the rows of ``reports/paper_values.csv``
its paper Δ comes from, and the direction the paper asserts (or, for a claim of no difference, the margin
within which the difference must lie).

The unit of a claim about a training method is the training seed. ``ledger(results_dir)`` pairs the two
models' stored cells seed by seed (``-seedN`` models, ``[seeds]`` in the claims file), gives each seed its
paired difference over the examples, refuses a pair that breaks the matched-seed rule (``Matching``), pools
the matched seeds with one seed-level t test (``bench.scoring.seeds``: the seeds' spread and the shared
example noise, docs/statistics.md), controls each family of verdicts with Holm's procedure, and gives each
line a verdict by ``verdict`` below, the one place that rule is written. ``reports/claims_pages.py`` renders the ledger; reports read result files,
``plugins.json`` and the claims file only, never a model.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from bench.results import metadata
from bench.errors import BenchError
from bench.scoring.stats import (LEVEL, Difference, Pooled, holm, mcnemar_detectable_effect,
                                 minimum_detectable_effect, wilson)
from bench.results.store import ResultStore
from reports.claims_schema import claim_problem, file_problem
from reports.paper import PAPER_VALUES, PaperRef, PaperValues
from reports.paper import by_label as paper_by_label
from reports.results import base_build, row_resources

CLAIMS_FILE = Path(__file__).with_name("claims.toml")
DIRECTIONS = ("higher", "lower", "same")  # what the paper asserts of method − baseline on the metric
ALPHA = 1 - LEVEL  # the family-wise error rate Holm's procedure holds the primary lines to
MIN_SEEDS = 3  # matched training seeds a verdict needs (claims.toml [tests] and a claim's min_seeds say more)
EXCLUSION_SHARE = 0.5  # "excluded" tests that the effect is smaller than this share of the paper's Δ
POWER = 0.8  # the power at which the minimum detectable effect is given

# Verdicts, strongest first (the rule: ``verdict``).
REPLICATED = "replicated"
REVERSED = "reversed"
EXCLUDED = "paper's effect excluded"
FEW_SEEDS = "too few seeds"
INCONCLUSIVE = "inconclusive"
REFUSED = "refused: unmatched seeds"  # every pair breaks the matched-seed rule (each line says why)
NO_EVIDENCE = "no paired evidence"  # both cells stored, but a model's per-example evidence is not
NOT_RUN = "not run yet"
NOT_TESTABLE = "not testable here"
FLOOR = "not testable here (floor)"
CEILING = "not testable here (ceiling)"
INSENSITIVE = "not testable here (insensitive)"
VERDICTS = (REPLICATED, REVERSED, EXCLUDED, FEW_SEEDS, INCONCLUSIVE, REFUSED, NO_EVIDENCE, NOT_RUN, NOT_TESTABLE,
            FLOOR, CEILING, INSENSITIVE)
PLACEBO_REASON = ("both arms run one recipe, so a direction is a false positive of the test or a difference "
                  "between the arms' runs (docs/statistics.md, The placebo)")
PLACEBO_FAILED = "the placebo fails: " + PLACEBO_REASON
KINDS = ("paper", "control", "placebo")  # each kind is its own set of Holm families, never mixed
MEANINGS = {
    REPLICATED: "the paper's direction: the seed-level t test of no difference passes after Holm's correction "
                "over the direction family (noted when the effect is also smaller than the exclusion margin); "
                "for a claim of no difference, TOST shows the effect inside the stated margin after Holm's "
                "correction over the equivalence family",
    REVERSED: "the other direction, by the same standard (for a claim of no difference: a difference beyond "
              "the margin)",
    EXCLUDED: "no direction established, and the one-sided test that the effect is smaller than the stated "
              "share (by default half) of the paper's Δ passes after Holm's correction over the exclusion family",
    FEW_SEEDS: "fewer matched training seeds than the line needs (3, the headline lines 5): no verdict, "
               "whatever the interval says",
    INCONCLUSIVE: "neither a direction nor the exclusion is established: this run cannot tell them apart",
    REFUSED: "no pair of models passes the matched-seed rule (one base build, one weights hash per model)",
    NO_EVIDENCE: "both cells are stored, but one lacks its per-example evidence",
    NOT_RUN: "a cell is missing; its command and estimated CPU time are in the compute plan",
    NOT_TESTABLE: "cannot be tested offline here, with the measured reason (no data offline, or classifiers "
                  "that score at chance)",
    FLOOR: "the baseline sits nearer its lower bound than the paper's Δ (or no example differs), so a change "
           "of the paper's size cannot be measured",
    CEILING: "the baseline sits nearer its upper bound than the paper's Δ, so a change of the paper's size "
             "cannot be measured",
    INSENSITIVE: "the attack is shown not to read robustness on this task: a positive control moves another "
                 "attack there and no control moves this one (declared in claims.toml, with its measured reason; "
                 "the declaration lapses once a control moves it)",
}

REQUIRED = ("id", "paper", "table", "claim", "suite", "task", "metric", "aggregation", "method", "baseline",
            "paper_method", "paper_baseline", "direction", "differs")
OPTIONAL = {"attack": "", "split": "", "paper_task": "", "paper_attack": None, "paper_split": None,
            "run": {}, "variants": [{}], "not_testable": "", "tasks": [], "task_run": {}, "method_run": {}, "margin": None,
            "unit": "", "figure_only": False, "paper_metric": "", "chance": None, "kind": "paper",
            "expectation": "", "margin_reason": "", "min_seeds": None, "exclusion_share": None, "pairs": [],
            "series": "", "dose": None}


# ---------------------------------------------------------------- the verdict rule ----------------

@dataclass(frozen=True)
class Verdict:
    label: str
    note: str = ""  # e.g. a replicated effect whose CI excludes the paper's Δ


@dataclass(frozen=True)
class Tests:
    """A line's Holm-adjusted p in each family it belongs to (None: not in that family)."""

    direction: float | None = None  # two-sided: no difference
    exclusion: float | None = None  # one-sided: the effect is at least the exclusion margin, the paper's way
    equivalence: float | None = None  # TOST: the effect lies outside ±margin


def verdict(direction: str, paper_delta: float | None, estimate: float, adjusted: Tests, seeds: int,
            min_seeds: int, exclusion_margin: float | None = None, margin: float | None = None) -> Verdict:
    """The verdict of a pooled effect from its estimate, its number of matched training seeds and its
    Holm-adjusted p in each family (``Tests``). Fewer seeds than ``min_seeds``: no verdict. Else a direction
    stands when the direction test passes (replicated on the paper's side, reversed on the other); without
    one, the paper's effect is excluded when the one-sided test that the effect is smaller than
    ``exclusion_margin`` passes, else inconclusive. A claim of no difference is replicated when TOST against
    ±margin passes, reversed when a direction stands beyond the margin, else inconclusive."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")
    if seeds < min_seeds:
        return Verdict(FEW_SEEDS, f"{seeds} matched training seed{'s' * (seeds != 1)} of the {min_seeds} "
                                  "this line needs")
    passes = lambda p: p is not None and p < ALPHA  # noqa: E731
    if direction == "same":
        if passes(adjusted.equivalence):
            return Verdict(REPLICATED, f"TOST: inside the margin ±{margin:g}")
        if passes(adjusted.direction) and margin is not None and abs(estimate) > margin:
            return Verdict(REVERSED, f"a difference beyond the margin ±{margin:g}, where the paper reports none")
        return Verdict(INCONCLUSIVE, f"TOST does not show the effect inside ±{margin:g}" if margin else "")
    asserted = 1 if direction == "higher" else -1
    if passes(adjusted.direction):
        if (estimate > 0) != (asserted > 0):
            return Verdict(REVERSED)
        smaller = passes(adjusted.exclusion)
        return Verdict(REPLICATED, f"smaller than the exclusion margin ({exclusion_margin:+.3g})" if smaller else "")
    if paper_delta is None:  # a claim read off a figure: no printed Δ to exclude
        return Verdict(INCONCLUSIVE, "the paper prints no value to exclude (a figure)")
    if passes(adjusted.exclusion):
        return Verdict(EXCLUDED, f"smaller than {exclusion_margin:+.3g}, the stated share of the paper's Δ")
    return Verdict(INCONCLUSIVE)


def bound_verdict(paper_delta: float | None, baseline: float | None, bounds: tuple[float, float] | None,
                  no_example_differs: bool) -> Verdict | None:
    """FLOOR or CEILING when the baseline cannot move by the paper's Δ inside the metric's bounds, or when no
    example differs between the two sides on any seed; None otherwise."""
    if no_example_differs:
        return Verdict(FLOOR, "no example differs between the two models on any seed (no discordant pair)")
    if paper_delta is None or baseline is None or bounds is None:
        return None
    low, high = bounds
    if paper_delta < 0 and baseline - low < -paper_delta:
        return Verdict(FLOOR, f"the baseline's {baseline:.2f} lies {baseline - low:.2f} above the floor {low:g}, "
                              f"less than the paper's Δ {paper_delta:+.2f}")
    if paper_delta > 0 and high - baseline < paper_delta:
        return Verdict(CEILING, f"the baseline's {baseline:.2f} lies {high - baseline:.2f} below the ceiling "
                                f"{high:g}, less than the paper's Δ {paper_delta:+.2f}")
    return None


# ---------------------------------------------------------------- the claims file -----------------

@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    table: str
    claim: str
    suite: str
    task: str
    metric: str
    aggregation: str
    method: str
    baseline: str
    paper_method: str
    paper_baseline: str
    direction: str
    differs: str
    attack: str = ""
    split: str = ""
    paper_task: str = ""
    paper_attack: str | None = None
    paper_split: str | None = None
    run: dict = field(default_factory=dict)
    variants: tuple = ({},)
    not_testable: str = ""
    tasks: tuple = ()  # several tasks (datasets) averaged with equal weight, as a paper's "Avg" column
    task_run: dict = field(default_factory=dict)  # per task: further `bench run` options (e.g. a stand-in)
    method_run: dict = field(default_factory=dict)  # options the method's side alone runs (a hardened victim)
    margin: float | None = None  # a claim of no difference: the equivalence margin, in the metric's units
    unit: str = ""  # the forest plot's panel (default: from the metric)
    figure_only: bool = False  # the paper shows the claim in a figure and prints no values: direction only
    paper_metric: str = ""  # the metric's name in paper_values.csv where it differs from ours
    chance: float | None = None  # an accuracy a classifier that learned nothing scores (the claim's floor)
    kind: str = "paper"  # "paper", "control" (a positive control) or "placebo": each its own Holm families
    expectation: str = ""  # a control's expectation, stated before it ran
    margin_reason: str = ""  # why a claim of no difference takes its margin
    min_seeds: int | None = None  # matched training seeds the line needs (default: [tests] min_seeds)
    exclusion_share: float | None = None  # the exclusion margin as a share of the paper's Δ (default: [tests])
    pairs: tuple = ()  # explicit (baseline, method) per training seed, in place of the [seeds] suffixes
    series: str = ""  # a control's dose-response series (drawn as one figure)
    dose: float | None = None  # its level in that series
    paper_method_value: float | None = 0.0
    paper_baseline_value: float | None = 0.0

    @property
    def ref(self) -> PaperRef:
        return PaperRef(self.paper, self.table)

    @property
    def paper_delta(self) -> float | None:
        if self.paper_method_value is None or self.paper_baseline_value is None:
            return None
        return self.paper_method_value - self.paper_baseline_value

    @property
    def task_list(self) -> tuple[str, ...]:
        return tuple(self.tasks) or (self.task,)

    def paper_key(self, row: str) -> str:
        """How the claim cites a row of paper_values.csv."""
        return " / ".join(x for x in (self.paper, self.table, row, self.suite, self.paper_task or self.task,
                                      self.paper_metric or self.metric, self.paper_attack if self.paper_attack is not None
                                      else self.attack) if x)


@dataclass(frozen=True)
class Ledger:
    claims: tuple[Claim, ...]
    costs: dict
    models: dict  # registry model -> the method that trains it ("" for a base that needs none)
    seed_suffixes: tuple[str, ...]
    run_defaults: dict
    source: str
    tests: dict = field(default_factory=dict)  # [tests]: min_seeds, exclusion_share, bounds per metric
    insensitive: tuple = ()  # [[insensitive]]: attacks the controls show this instrument cannot read on a task

    def untrained(self, model: str) -> bool:
        """A base that needs no training (listed with no method): one model against every seed."""
        return self.models.get(model) == ""

    def min_seeds(self, claim: Claim) -> int:
        return claim.min_seeds or int(self.tests.get("min_seeds", MIN_SEEDS))

    def exclusion_margin(self, claim: Claim) -> float | None:
        """The one-sided exclusion test's bound: the stated share of the paper's Δ."""
        share = claim.exclusion_share or float(self.tests.get("exclusion_share", EXCLUSION_SHARE))
        return None if claim.paper_delta is None else share * claim.paper_delta

    def bounds(self, claim: Claim) -> tuple[float, float] | None:
        b = (self.tests.get("bounds") or {}).get(claim.metric)
        return None if not b else (float(b[0]), float(b[1]))


def _fail(path: Path, where: str, problem: str, fix: str) -> BenchError:
    return BenchError(f"{path}: {where}: {problem}. Fix: {fix}.")


def load(path: Path = CLAIMS_FILE, paper_values: PaperValues | None = None) -> Ledger:
    """The claims file, checked: every field known and typed, ids unique, every model listed under
    [models], every cited paper row present in paper_values.csv, and the paper's Δ on the asserted side."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BenchError(f"No claims file at {path}. Fix: restore reports/claims.toml from the repository.") from None
    except tomllib.TOMLDecodeError as exc:
        raise _fail(path, "not valid TOML", str(exc), "correct the syntax at the position named") from None
    problem = file_problem(data)  # the schema (reports/claims_schema.py): keys and types, before any meaning
    if problem:
        raise _fail(path, *problem)
    paper_values = paper_values or PaperValues.load(PAPER_VALUES)
    models = data.get("models") or {}
    if not isinstance(models, dict) or not all(isinstance(v, str) for v in models.values()):
        raise _fail(path, "[models]", "must map each model name to its training method (a string)",
                    'write e.g. "simcse-minilm-mlm-study" = "simcse"')
    entries = data.get("claim") or []
    if not entries or not isinstance(entries, list):
        raise _fail(path, "[[claim]]", "no claims", "add [[claim]] tables")
    claims, seen = [], set()
    for i, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            raise _fail(path, f"claim #{i}", "is not a table", "write each claim as a [[claim]] table")
        claim = _claim(path, i, entry, models, paper_values)
        if claim.id in seen:
            raise _fail(path, f"claim {claim.id}", "the id is used twice", "give each claim its own id")
        seen.add(claim.id)
        claims.append(claim)
    seeds = data.get("seeds") or {}
    return Ledger(tuple(claims), dict(data.get("costs") or {}), dict(models),
                  tuple(seeds.get("suffixes") or ()), dict(data.get("run_defaults") or {}), path.name,
                  dict(data.get("tests") or {}), _insensitive(path, data.get("insensitive") or [], claims))


@dataclass(frozen=True)
class Insensitive:
    """An attack the positive controls show this instrument cannot read on a task (an [[insensitive]] table)."""

    attack: str
    task: str
    reference: str  # a control claim on another attack of the same task that moves (its CI excludes 0)
    reason: str  # the measured explanation (docs/attacks.md), in words; the numbers come from the controls


def _insensitive(path: Path, entries: list, claims: list[Claim]) -> tuple[Insensitive, ...]:
    by_id = {c.id: c for c in claims}
    out = []
    for entry in entries:
        ref = by_id.get(entry["reference"])
        if ref is None or ref.kind != "control" or ref.task != entry["task"] or ref.attack == entry["attack"]:
            raise _fail(path, f"[[insensitive]] {entry['attack']} on {entry['task']}",
                        f"reference {entry['reference']!r} is not a control claim on another attack of that task",
                        "name the control claim that shows the instrument moving on this task")
        out.append(Insensitive(entry["attack"], entry["task"], entry["reference"], entry["reason"]))
    return tuple(out)


def _check_fields(path: Path, where: str, entry: dict, models: dict) -> None:
    missing = [k for k in REQUIRED if not isinstance(entry.get(k), str) or not entry.get(k).strip()]
    if missing:
        raise _fail(path, where, f"lacks {', '.join(missing)} (each a non-empty string)",
                    f"add the field(s); a claim has {', '.join(REQUIRED)}")
    unknown = sorted(set(entry) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise _fail(path, where, f"unknown field(s) {', '.join(unknown)}",
                    f"use only {', '.join(REQUIRED + tuple(OPTIONAL))}")
    if entry["direction"] not in DIRECTIONS:
        raise _fail(path, where, f"direction {entry['direction']!r}", f"write one of {', '.join(DIRECTIONS)}")
    for name in (entry["method"], entry["baseline"]):
        if name not in models:
            raise _fail(path, where, f"model {name!r} is not under [models]",
                        f'add "{name}" = "<its training method>" to [models]')
    variants = entry.get("variants", [{}])
    if (not isinstance(entry.get("run", {}), dict) or not isinstance(variants, list)
            or not all(isinstance(v, dict) for v in variants)
            or not all(isinstance(entry.get(k, {}), dict) for k in ("task_run", "method_run"))):
        raise _fail(path, where, "run, task_run and method_run must be tables and variants a list of tables",
                    'write run = { suite = "sts" } and variants = [{ victim = "frozen" }]')
    if not isinstance(entry.get("tasks", []), list) or not all(isinstance(t, str) for t in entry.get("tasks", [])):
        raise _fail(path, where, "tasks must be a list of task names", 'write tasks = ["mr", "sst2"]')
    margin = entry.get("margin")
    if entry["direction"] == "same" and (not isinstance(margin, (int, float)) or margin <= 0
                                         or not str(entry.get("margin_reason", "")).strip()):
        raise _fail(path, where, "a claim of no difference (direction \"same\") needs a margin above 0 and its reason",
                    "add margin = <the largest difference that still counts as none, in the metric's units> and "
                    "margin_reason = \"<why that size>\"")
    if entry.get("kind", "paper") not in KINDS:
        raise _fail(path, where, f"kind {entry.get('kind')!r}", f"write one of {', '.join(KINDS)}")
    if entry.get("kind") == "control" and not str(entry.get("expectation", "")).strip():
        raise _fail(path, where, "a control states its expectation before it runs",
                    "add expectation = \"<what the control should do, and by how much>\"")
    for pair in entry.get("pairs", []):
        if len(pair) != 2 or any(m not in models for m in pair):
            raise _fail(path, where, f"pairs entry {pair} is not two models listed under [models]",
                        'write pairs = [["<baseline>", "<method>"], ...] with models from [models]')


def _claim(path: Path, i: int, entry: dict, models: dict, paper_values: PaperValues) -> Claim:
    where = f"claim #{i} ({entry.get('id', 'no id')})"
    _check_fields(path, where, entry, models)
    problem = claim_problem(entry)
    if problem:
        raise _fail(path, where, *problem)
    fields = {**OPTIONAL, **entry}
    fields["variants"] = tuple(fields["variants"]) or ({},)
    fields["tasks"] = tuple(fields["tasks"])
    fields["pairs"] = tuple(tuple(p) for p in fields["pairs"])
    claim = Claim(**fields)
    values = {}
    if claim.kind != "paper":  # a control or a placebo: no paper row, its expectation or margin says it all
        return Claim(**{**fields, "paper_method_value": None, "paper_baseline_value": None})
    if claim.figure_only:
        if claim.direction == "same":
            raise _fail(path, where, "a claim read off a figure has no printed Δ to hold a margin against",
                        "give it a direction, or transcribe the values into reports/paper_values.csv")
        return Claim(**{**fields, "paper_method_value": None, "paper_baseline_value": None})
    for role in ("paper_method", "paper_baseline"):
        row = getattr(claim, role)
        value = paper_by_label(paper_values, claim.ref, row, claim.suite, claim.paper_task or claim.task,
                               claim.paper_metric or claim.metric, claim.attack if claim.paper_attack is None else claim.paper_attack,
                               claim.paper_split)
        if value is None:
            raise _fail(path, where, f"{role} cites {claim.paper_key(row)!r}, which reports/paper_values.csv "
                                     "does not hold", "transcribe that value from the paper into "
                                     "reports/paper_values.csv, or correct the row label, task or metric")
        values[f"{role}_value"] = value
    claim = Claim(**{**fields, **values})
    delta = claim.paper_delta
    if claim.direction == "same":
        if abs(delta) > claim.margin:
            raise _fail(path, where, f"the paper's Δ ({delta:+.2f}) lies outside the margin ±{claim.margin:g}",
                        "check the margin and the cited paper rows")
    elif delta == 0 or (delta > 0) != (claim.direction == "higher"):
        raise _fail(path, where, f"the paper's Δ ({delta:+.2f}) is not on the asserted side "
                                 f"({claim.direction})", "check the direction, or state a claim of no "
                                 "difference with direction = \"same\" and a margin")
    return claim


# ---------------------------------------------------------------- one seed's evidence -------------

@dataclass(frozen=True)
class Comparison:
    """One line of a claim: one training seed (model pair) under one variant of the cells' settings."""

    method: str
    baseline: str
    variant: dict
    seed: int = 0
    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    p: float | None = None
    pairs: int | None = None
    values: tuple = ()  # (baseline, method) over the examples compared
    missing: tuple = ()  # models without the cell
    command: str = ""  # what makes the missing cells
    cpu_minutes: float | None = None
    steps: tuple = ()  # the Steps behind command
    test: str = ""  # how the CI and p were made
    binary: bool = False  # per-example outcomes are 0/1, tested by McNemar's test
    checks: tuple = ()  # (baseline, method): each classifier's held-out check, for a claim with a chance level
    note: str = ""
    refused: str = ""  # why the pair breaks the matched-seed rule (then it is not pooled)

    @property
    def ran(self) -> bool:
        return self.estimate is not None and self.low is not None and not self.refused


def _matches(config: dict, wanted: dict, required: tuple = ()) -> bool:
    """Cell settings: a key the cell's config records must hold the wanted value; keys it does not
    record (bench run options spelled otherwise, e.g. recipe) do not filter, except the ``required`` ones
    (a claim's ``method_run``); a treatment the cell records (a hardened victim, bench.plugins.Option) must
    be wanted: a treated cell never stands in for an untreated one, nor the reverse."""
    if any(k not in wanted for k in config.get("treatments") or ()) or any(k not in config for k in required):
        return False
    return all(str(config[k]) == str(v) for k, v in wanted.items() if k in config)


def _settings(ledger: Ledger, claim: Claim, variant: dict, task: str | None = None) -> dict:
    task = task or claim.task
    extra = {"task": task} if claim.tasks else {}
    return {**ledger.run_defaults, **claim.run, **extra, **(claim.task_run.get(task) or {}), **variant}


def _row_key(claim: Claim):
    def include(key: dict) -> bool:
        return ((key["metric"], key["aggregation"], key["attack"]) == (claim.metric, claim.aggregation, claim.attack)
                and (not claim.split or key["split"] == claim.split))
    return include


def _matching_row(store: ResultStore, model: str, claim: Claim, task: str, wanted: dict, required: tuple = (),
                  weights: str | None = None):
    """(cell path, row) of the claim's row in the model's newest matching cell of ``task`` (of those ``weights``
    when given), or None; an average only over the tasks its protocol declares (one over fewer, say STS-B
    alone, never stands in for it)."""
    from bench.results.averages import off_declared
    from bench.results.uncertainty import model_cells, row_key

    include = _row_key(claim)
    cells = [p for p in model_cells(store, model, claim.suite, task, weights).values()
             if _matches(store.read(p).get("config", {}), wanted, required)]
    found = None
    for path in sorted(cells, key=lambda p: store.read(p).get("written_at") or ""):
        rows = [r for r in store.read(path)["results"] if include(row_key(r)) and not off_declared(r)]
        if rows:
            found = (path, rows[0])
    return found


def task_evidence(store: ResultStore, model: str, claim: Claim, task: str, wanted: dict, required: tuple = (),
                  weights: str | None = None):
    """(Evidence, stored value, row) of the claim's row in the model's newest matching cell of ``task``;
    None when no cell matches, (None, value, row) when the cell has no per-example evidence."""
    from bench.results.uncertainty import _key_tuple, row_key, stored_evidence

    hit = _matching_row(store, model, claim, task, wanted, required, weights)
    if hit is None:
        return None
    path, row = hit
    return stored_evidence(store, path).get(_key_tuple(row_key(row))), row.get("value"), row


def held_out_check(row: dict) -> str:
    """The accuracy a row's classifier scored on its held-out check, as its card records it ("" if none):
    whether the classifier learned its task at all."""
    card = row_resources(row).get("classifier") or {}
    accuracy, source = card.get("dev_accuracy"), (card.get("dev_data") or {}).get("source", "held-out")
    return "" if accuracy is None else f"{accuracy:.2f} on {source}"


def _found_tasks(store: ResultStore, ledger: Ledger, claim: Claim, model: str, variant: dict,
                 required: tuple = (), weights: str | None = None) -> dict:
    """task -> (evidence labelled with the task, or None; stored value; its classifier's held-out check, or
    "") for each of the claim's tasks the model has a matching cell of (of those ``weights``, when given)."""
    found = {}
    for task in claim.task_list:
        hit = task_evidence(store, model, claim, task, _settings(ledger, claim, variant, task), required, weights)
        if hit is not None:
            ev, value, row = hit
            found[task] = (None if ev is None else replace(ev, label=task, _memo={}), value, held_out_check(row))
    return found


def seed_evidence(claim: Claim, found: dict):
    """The model's evidence for the claim's row from its ``_found_tasks``: one task's, or, for a claim over
    several tasks, their equal-weight average (each task resampled within itself). Returns (evidence, value,
    missing tasks)."""
    from bench.scoring.stats import Evidence

    missing = tuple(t for t in claim.task_list if t not in found)
    if missing:
        return None, None, missing
    parts, values = [found[t][0] for t in claim.task_list], [found[t][1] for t in claim.task_list]
    if not claim.tasks:
        return parts[0], values[0], ()
    if any(p is None for p in parts):
        return None, sum(values) / len(values), ()
    return Evidence(parts=parts, combine="average"), sum(values) / len(values), ()


# ---------------------------------------------------------------- a claim's pooled effect ----------

@dataclass(frozen=True)
class Effect:
    """A claim under one variant: each training seed's line and the pooled effect over the seeds that ran."""

    claim: Claim
    variant: dict
    lines: tuple[Comparison, ...]
    pooled: Pooled | None = None
    verdict: Verdict = Verdict(NOT_RUN)
    primary: bool = False  # the claim's line in the Holm families
    p_adjusted: float | None = None  # the direction test's (Holm-adjusted for a primary line)
    adjusted: Tests = Tests()  # every family's p (Holm-adjusted for a primary line)

    @property
    def ran(self) -> tuple[Comparison, ...]:
        return tuple(ln for ln in self.lines if ln.ran)

    @property
    def values(self) -> tuple[float | None, float | None]:
        """(baseline, method) averaged over the seeds that ran, on the examples compared."""
        ran = [ln for ln in self.ran if len(ln.values) == 2 and None not in ln.values]
        if not ran:
            return None, None
        return (sum(ln.values[0] for ln in ran) / len(ran), sum(ln.values[1] for ln in ran) / len(ran))

    @property
    def mde(self) -> float | None:
        se = self.pooled.se if self.pooled else None
        ran = self.ran
        if se == 0 and ran and all(ln.binary and ln.pairs for ln in ran):
            # no example differs in outcome on any seed: size the test by its examples, not its zero SE
            return mcnemar_detectable_effect(sum(ln.pairs for ln in ran), LEVEL, POWER)
        return minimum_detectable_effect(se, LEVEL, POWER, self.pooled.df if self.pooled else None)

    @property
    def in_family(self) -> bool:
        """A primary line the claim can test: it belongs to the declared Holm family, run or not."""
        return self.primary and not self.at_chance

    @property
    def at_chance(self) -> str:
        """Why the line cannot test its claim when every seed's two classifiers score within their binomial
        95% interval of the claim's chance level ("" otherwise): a difference between two classifiers at
        chance on the claim's data says nothing of the encoders beneath them, whatever their held-out checks
        show they learned of their training task."""
        chance, ran = self.claim.chance if self.claim else None, self.ran
        if chance is None or not ran or any(len(ln.values) != 2 or None in ln.values or not ln.pairs
                                           for ln in ran):
            return ""
        intervals = [wilson(round(v * ln.pairs / 100), ln.pairs) for ln in ran for v in ln.values]
        if not all(i.low <= chance <= i.high for i in intervals):
            return ""
        scores = "; ".join(f"seed {ln.seed}: {ln.values[0]:.2f} and {ln.values[1]:.2f} on {ln.pairs} examples"
                           + (f", held-out checks {' and '.join(ln.checks)}" if all(ln.checks or [""]) else "")
                           for ln in ran)
        return (f"both classifiers score at chance ({chance:.2f}) on the claim's data, within their binomial 95% "
                f"intervals ({scores}): a difference between them says nothing of the encoders beneath them")

    @property
    def relative(self) -> float | None:
        """Our pooled Δ as a percentage of the baseline's value."""
        base = self.values[0]
        if not self.pooled or self.pooled.estimate is None or not base:
            return None
        return 100.0 * self.pooled.estimate / base


@dataclass(frozen=True)
class Row:
    claim: Claim
    effects: tuple[Effect, ...]

    @property
    def verdict(self) -> Verdict:
        if self.claim.not_testable:
            return Verdict(NOT_TESTABLE, self.claim.not_testable)
        return self.effects[0].verdict if self.effects else Verdict(NOT_RUN)

    @property
    def primary(self) -> Effect | None:
        return self.effects[0] if self.effects else None

    @property
    def lines(self) -> tuple[Comparison, ...]:
        return tuple(ln for e in self.effects for ln in e.lines)


def is_rate(claim: Claim) -> bool:
    """Attack success rates: each seed's difference is taken over the examples both victims attacked."""
    return claim.metric == "attack_success_rate"


def _seed_number(ledger: Ledger, suffix: str) -> int:
    """The training seed a suffix names ("-seed13" is 13), else its place in [seeds] suffixes (from 1)."""
    if not suffix:
        return 0
    return _training_seed(suffix) or ledger.seed_suffixes.index(suffix) + 1


def _training_seed(model: str) -> int:
    """The training seed a model's name carries (``…-seed4`` is 4; no suffix is the claim's own seed, 0)."""
    found = re.search(r"-seed(\d+)$", model)
    return int(found[1]) if found else 0


def _pairs(ledger: Ledger, claim: Claim) -> list[tuple[int, str, str]]:
    """(seed, baseline, method): a claim's explicit pairs, each numbered by its baseline's training seed; else
    the claim's own (seed 0), then each further training seed whose two models are both listed under [models]
    (e.g. simcse-…-seed1 and robustembed-…-seed1; a baseline that is an untrained base is the same model for
    every seed)."""
    if claim.pairs:
        numbers = [_training_seed(baseline) for baseline, _ in claim.pairs]
        if len(set(numbers)) < len(numbers):  # one baseline in two pairs: number the pairs instead
            numbers = list(range(len(claim.pairs)))
        return [(n, baseline, method) for n, (baseline, method) in zip(numbers, claim.pairs)]
    out = [(0, claim.baseline, claim.method)]
    untrained = ledger.untrained(claim.baseline)
    for suffix in ledger.seed_suffixes:
        seeded = claim.baseline + suffix
        pair = (claim.baseline if untrained and seeded not in ledger.models else seeded, claim.method + suffix)
        if all(m in ledger.models for m in pair):
            out.append((_seed_number(ledger, suffix), *pair))
    return out


class Matching:
    """The matched-seed rule: within a pair, both models trained from one build of their base, and each model
    name stands for one set of weights across all its cells (a model retrained on another machine is another
    model: its older cells must go). One exception: a baseline that is the untrained base itself, built anew on
    each machine, keeps cells of several builds, and a pair uses those of the build its method's card names
    (``build``). Reads the cells' weights hashes and the cards in plugins.json, once."""

    def __init__(self, store: ResultStore, catalog: dict):
        self.store, self.catalog, self._weights = store, catalog, {}

    def weights(self, model: str) -> set[str]:
        if model not in self._weights:
            self._weights[model] = {c["cell"]["weights_sha256"] for _, c in self.store.cells_of(model)}
        return self._weights[model]

    def build(self, ledger: Ledger, baseline: str, method: str) -> str | None:
        """The weights of the base build ``method`` started from, when ``baseline`` is that untrained base
        and the method's card names them (cards record them since the ledger pairs bases by build)."""
        if not ledger.untrained(baseline):
            return None
        return base_build(self.catalog.get(method), self.catalog)

    def refusal(self, baseline: str, method: str, build: str | None = None) -> str:
        """Why the pair may not be pooled ("" when it may); a baseline read at one ``build`` may have others."""
        reasons = [f"{m} has cells from {len(w)} sets of weights ({', '.join(sorted(x[:12] for x in w))})"
                   for m in dict.fromkeys((baseline, method))
                   if not (build and m == baseline) and len(w := self.weights(m)) > 1]
        trainings = [(self.catalog.get(m) or {}).get("training") or {} for m in (baseline, method)]
        if all(trainings):
            reasons += [f.replace("its models were", "the two models were") for f in _base_builds_flag(trainings)]
        return "; ".join(reasons)


def effect(store: ResultStore, ledger: Ledger, claim: Claim, variant: dict, cache,
           matching: Matching | None = None) -> Effect:
    """Every seed's line under ``variant`` and the pooled effect of those that ran (verdict pending Holm);
    a pair that breaks the matched-seed rule (``Matching``) is shown with its reason and not pooled."""
    lines, pairs, ran_at = [], [], []
    matching = matching or Matching(store, {})
    for seed, baseline, method in _pairs(ledger, claim):
        build = matching.build(ledger, baseline, method)
        sides = ((baseline, variant, ()), (method, {**variant, **claim.method_run}, tuple(claim.method_run)))
        found = [_found_tasks(store, ledger, claim, *side, weights=w) for side, w in zip(sides, (build, None))]
        a, b = (seed_evidence(claim, f) for f in found)
        gone = tuple(side for side, (_, _, absent) in zip(sides, (a, b)) if absent)
        missing = tuple(m for m, _, _ in gone)
        refused = "" if missing else matching.refusal(baseline, method, build)
        if refused:
            lines.append(Comparison(method, baseline, variant, seed, estimate=_minus(b[1], a[1]),
                                    values=(a[1], b[1]), refused=refused, note=f"not pooled: {refused}"))
        elif missing:
            todo = steps(ledger, claim, gone, store)
            note = (partial_average(claim, *found, cache) if claim.tasks
                    else one_side(claim, ((baseline, a, found[0]), (method, b, found[1]))))
            if build and baseline in missing and matching.weights(baseline):
                note = "; ".join(filter(None, (
                    note, f"{baseline} has cells of other builds only, not of the one {method} started from "
                          f"({build[:12]}): run it on the machine that trained {method}")))
            lines.append(Comparison(method, baseline, variant, seed, missing=missing, steps=todo,
                                    command=" && ".join(s.command for s in todo),
                                    cpu_minutes=sum(s.run_minutes + s.train_minutes for s in todo), note=note))
        elif a[0] is None or b[0] is None:
            lines.append(Comparison(method, baseline, variant, seed, estimate=_minus(b[1], a[1]),
                                    values=(a[1], b[1]), note=NO_EVIDENCE))
        else:
            checks = tuple(f[claim.task][2] for f in found) if claim.chance is not None else ()
            lines.append(Comparison(method, baseline, variant, seed, checks=checks))
            pairs.append((a[0], b[0]))
            ran_at.append(len(lines) - 1)
    if not pairs:
        return Effect(claim, variant, tuple(lines))
    try:
        diffs, pooled = cache.pooled(pairs, common=is_rate(claim))
    except ValueError as exc:
        for i in ran_at:
            lines[i] = replace(lines[i], note=f"not comparable: {exc}")
        return Effect(claim, variant, tuple(lines))
    for i, d in zip(ran_at, diffs):
        lines[i] = _with_difference(lines[i], d)
    return Effect(claim, variant, tuple(lines), pooled)


def placebo_seeds(results_dir: Path, book: Ledger, claim: Claim, store: ResultStore | None = None):
    """(points (m,), bootstraps (m, B) on shared draws) of every model in the placebos that share ``claim``'s
    row, for the placebo battery (reports/placebo_battery.py); None unless all m are scored on the same
    examples and every one of them pairs with the first under the matched-seed rule."""
    from bench.scoring.stats import BOOTSTRAP_SEED, RESAMPLES

    same = [c for c in book.claims if c.kind == "placebo" and placebo_row(c) == placebo_row(claim)]
    models = list(dict.fromkeys(m for c in same for pair in c.pairs for m in pair))
    store = store if store is not None else ResultStore(Path(results_dir))
    matching = Matching(store, catalog_models(Path(results_dir)))
    evidence = [seed_evidence(claim, _found_tasks(store, book, claim, m, {}))[0] for m in models]
    if (len(models) < 2 or any(ev is None for ev in evidence) or any(matching.refusal(models[0], m) for m in models)
            or len({_sample_ids(ev) for ev in evidence}) != 1):
        return None
    import numpy as np

    points = np.asarray([ev.point() for ev in evidence], dtype=np.float64)
    return points, np.stack([ev.bootstrap(RESAMPLES, BOOTSTRAP_SEED) for ev in evidence])


def placebo_row(claim: Claim) -> tuple:
    """What the placebos that pool their seeds in the battery share: suite, tasks, metric and aggregation."""
    return claim.suite, claim.task_list, claim.metric, claim.aggregation


def _sample_ids(ev) -> tuple:
    """The examples an evidence is scored on, part by part (its bootstraps share draws with another's only
    when these agree)."""
    return tuple((p.label, _sample_ids(p)) for p in ev.parts) if ev.combine else tuple(ev.sample.ids)


def one_side(claim: Claim, sides) -> str:
    """For a one-task claim whose line waits on one model: the other model's stored value (and, for a claim
    with a chance level, its classifier's held-out check), as a progress note that decides nothing. ``sides``:
    (model, its ``seed_evidence``, its ``_found_tasks``) for the baseline and the method."""
    stored = [(model, value, found) for model, (_, value, gone), found in sides if not gone and value is not None]
    if len(stored) != 1:
        return ""
    model, value, found = stored[0]
    check = found[claim.task][2] if claim.chance is not None else ""
    return (f"stored so far: {model} {value:.2f}" + (f" (held-out check {check})" if check else "")
            + "; no verdict until both are run")


def partial_average(claim: Claim, a: dict, b: dict, cache) -> str:
    """For a claim over several datasets that one seed has not finished: the difference over the datasets both
    models have (``a``, ``b``: the baseline's and the method's ``_found_tasks``), as a progress note that
    decides nothing ("" when there is none to show)."""
    from bench.scoring.stats import Evidence

    if not claim.tasks:
        return ""
    shared = [t for t in claim.task_list if t in a and t in b and a[t][0] is not None and b[t][0] is not None]
    if not shared:
        return ""
    pair = tuple(Evidence(parts=[m[t][0] for t in shared], combine="average") for m in (a, b))
    try:
        (d,), _ = cache.pooled([pair], common=is_rate(claim))
    except ValueError:
        return ""
    if d.estimate is None or d.low is None:
        return ""
    return (f"partial: {len(shared)} of {len(claim.task_list)} datasets run for both ({', '.join(shared)}), "
            f"Δ {d.estimate:+.2f} [{d.low:+.2f}, {d.high:+.2f}]; no verdict until every dataset is run")


def _minus(b, a):
    return None if a is None or b is None else b - a


def _with_difference(line: Comparison, d: Difference) -> Comparison:
    values = (d.extra.get("a"), d.extra.get("b"))
    return replace(line, estimate=d.estimate, low=d.low, high=d.high, p=d.p, pairs=d.n, values=values,
                   test=d.method, binary="mcnemar" in d.extra)


FAMILIES = ("direction", "exclusion", "equivalence")


def raw_tests(e: Effect, book: Ledger) -> Tests:
    """A judged line's unadjusted p in each family it belongs to: the seed-level t test of no difference, the
    one-sided test that the effect is smaller than the exclusion margin (a claim with a paper's Δ), TOST
    against ±margin (a claim of no difference)."""
    pooled, claim = e.pooled, e.claim
    if pooled is None or pooled.estimate is None:
        return Tests()
    bound = book.exclusion_margin(claim)
    exclusion = (pooled.one_sided_p(bound, above=bound < 0)
                 if claim.direction != "same" and bound is not None else None)
    equivalence = pooled.equivalence_p(claim.margin) if claim.direction == "same" and claim.margin else None
    return Tests(pooled.p, exclusion, equivalence)


def _bounds_verdict(e: Effect, book: Ledger) -> Verdict | None:
    ran = e.ran
    no_difference = bool(e.pooled and e.pooled.se == 0 and ran and all(ln.binary and ln.pairs for ln in ran))
    return bound_verdict(e.claim.paper_delta, e.values[0], book.bounds(e.claim), no_difference)


def decidable(e: Effect, book: Ledger, insensitive: dict | None = None) -> bool:
    """A line the rule judges: pooled, neither at chance, at a bound nor on an attack the controls show to be
    insensitive, with the matched seeds it needs."""
    return (e.pooled is not None and e.pooled.estimate is not None and not e.at_chance
            and _bounds_verdict(e, book) is None and e.claim.id not in (insensitive or {})
            and len(e.ran) >= book.min_seeds(e.claim))


def _moves(e: Effect | None) -> bool | None:
    """Whether a line's pooled CI excludes 0 (None: not measured)."""
    p = e.pooled if e is not None else None
    if p is None or p.estimate is None or p.low is None or p.high is None:
        return None
    return p.low > 0 or p.high < 0


def _delta_ci(e: Effect) -> str:
    p = e.pooled
    return f"Δ {p.estimate:+.2f} [{p.low:+.2f}, {p.high:+.2f}]"


def insensitive_notes(book: Ledger, effects: list[list[Effect]]) -> dict[str, str]:
    """Paper claim id -> its "insensitive" note, for each [[insensitive]] declaration whose evidence holds on
    the stored cells: its reference control moves (CI excludes 0), and every measured control on the declared
    attack and task does not. The numbers come from those control lines; a declaration lapses by itself once
    a control moves the attack."""
    primary = {c.id: group[0] for c, group in zip(book.claims, effects) if group}
    notes = {}
    for d in book.insensitive:
        ref = primary.get(d.reference)
        same = [(c.id, primary[c.id]) for c in book.claims if c.kind == "control" and c.attack == d.attack
                and c.task == d.task and _moves(primary.get(c.id)) is not None]
        if not _moves(ref) or not same or any(_moves(e) for _, e in same):
            continue
        note = (f"{d.reason}. {d.reference} moves {ref.claim.attack} by {_delta_ci(ref)}; the controls on "
                f"{d.attack} do not: " + "; ".join(f"{cid} {_delta_ci(e)}" for cid, e in same))
        notes.update({c.id: note for c in book.claims
                      if c.kind == "paper" and c.attack == d.attack and c.task == d.task})
    return notes


def family_adjusted(primaries: list[Effect], book: Ledger, insensitive: dict | None = None) -> dict[int, Tests]:
    """Holm-adjusted p of every primary line, within each (kind, family): the declared family holds every
    testable primary line of its kind that the family's test applies to; a line not decidable yet is counted
    at p = 1, so a verdict reached now is never undone by the runs still to come. Only decidable lines get
    an adjusted p."""
    raw = {id(e): raw_tests(e, book) for e in primaries}
    out = {id(e): {} for e in primaries}
    for family in FAMILIES:
        for members in _families(primaries, family, book):
            ps = [getattr(raw[id(e)], family) if decidable(e, book, insensitive) else None for e in members]
            for e, q, p in zip(members, holm([1.0 if p is None else p for p in ps]), ps):
                out[id(e)][family] = q if p is not None else None
    return {key: Tests(**fams) for key, fams in out.items()}


def _families(primaries: list[Effect], family: str, book: Ledger) -> list[list[Effect]]:
    """The lines Holm adjusts together: those of one kind, except that each placebo stands alone, at the
    nominal level (adjusting over placebos would make each easier to pass)."""
    groups = []
    for kind in KINDS:
        members = [e for e in primaries if e.claim.kind == kind and e.in_family and _applies(e.claim, family, book)]
        groups += [[e] for e in members] if kind == "placebo" else [members]
    return groups


def _applies(claim: Claim, family: str, book: Ledger) -> bool:
    if family == "equivalence":
        return claim.direction == "same"
    if family == "exclusion":
        return claim.direction != "same" and book.exclusion_margin(claim) is not None
    return True


def judge(effect: Effect, adjusted: Tests | None, book: Ledger, insensitive: str = "") -> Effect:
    """The effect with its verdict: its bounds, the attack's sensitivity (``insensitive``: the note of a
    declaration that holds), its matched seeds and its (Holm-adjusted, for a primary line) p in each family."""
    claim, pooled = effect.claim, effect.pooled
    tests = adjusted if effect.primary and adjusted is not None else raw_tests(effect, book)
    done = replace(effect, adjusted=tests, p_adjusted=tests.direction if effect.primary else None)
    if pooled is None or pooled.estimate is None:
        refused = [ln for ln in effect.lines if ln.refused]
        label = (REFUSED if refused and not effect.ran else
                 NO_EVIDENCE if any(ln.note == NO_EVIDENCE for ln in effect.lines) else NOT_RUN)
        return replace(done, verdict=Verdict(label, "; ".join(dict.fromkeys(ln.refused for ln in refused))))
    if effect.at_chance:
        return replace(done, verdict=Verdict(NOT_TESTABLE, effect.at_chance))
    at_bound = _bounds_verdict(effect, book)
    if at_bound is not None:
        return replace(done, verdict=at_bound)
    if insensitive:
        return replace(done, verdict=Verdict(INSENSITIVE, insensitive))
    v = verdict(claim.direction, claim.paper_delta, pooled.estimate, tests, len(effect.ran),
                book.min_seeds(claim), book.exclusion_margin(claim), claim.margin)
    if claim.kind == "placebo" and v.label in (REPLICATED, REVERSED):
        v = Verdict(v.label, "; ".join(x for x in (v.note, PLACEBO_FAILED) if x))
    elif claim.kind != "paper" and v.label == INCONCLUSIVE and claim.direction != "same":  # no paper Δ to exclude
        v = Verdict(INCONCLUSIVE, f"no direction after Holm's correction over the {claim.kind} lines")
    return replace(done, verdict=v)


def ledger(results_dir: Path, path: Path = CLAIMS_FILE, paper_values: PaperValues | None = None,
           cache=None, store: ResultStore | None = None) -> tuple[Ledger, list[Row]]:
    """The claims and their effects, judged; bootstraps from ``cache`` (bench.results.stats_cache.StatsCache,
    default: the one beside the results), as `bench report` shares one for every table, card and claim.

    The families (``family_adjusted``): per kind of claim, the first variant of every testable claim is its
    primary line; Holm's procedure holds the chance of any false verdict among the primary lines of each
    family to ALPHA. Further variants (another victim mode) are shown beside, judged at their own p."""
    from bench.results.stats_cache import StatsCache

    book = load(path, paper_values)
    store = store if store is not None else ResultStore(Path(results_dir))
    cache = cache if cache is not None else StatsCache.load(store.root)
    matching = Matching(store, catalog_models(Path(results_dir)))
    effects = []
    for claim in book.claims:
        variants = () if claim.not_testable else claim.variants
        effects.append([replace(effect(store, book, claim, v, cache, matching), primary=(i == 0))
                        for i, v in enumerate(variants)])
    insensitive = insensitive_notes(book, effects)
    primaries = [e for group in effects for e in group if e.primary]
    adjusted = family_adjusted(primaries, book, insensitive)
    rows = [Row(claim, tuple(judge(e, adjusted.get(id(e)), book, insensitive.get(claim.id, "")) for e in group))
            for claim, group in zip(book.claims, effects)]
    return book, rows


# ---------------------------------------------------------------- what a missing line costs --------

@dataclass(frozen=True)
class Step:
    """One `bench run` that makes a missing cell, with its estimated CPU minutes: the run itself, and the
    model's training where it has no stored cell at all (so is likely not trained yet)."""

    model: str
    command: str
    run_minutes: float
    train_minutes: float


def steps(ledger: Ledger, claim: Claim, missing: tuple, store: ResultStore) -> tuple[Step, ...]:
    """The `bench run` commands that make the ``missing`` sides' cells: (model, the variant it runs under,
    the settings its cells must record)."""
    out = []
    for model, variant, required in missing:
        trained = (store.root / "cells" / model).is_dir()
        for task in claim.task_list:
            if task_evidence(store, model, claim, task, _settings(ledger, claim, variant, task), required) is not None:
                continue
            options = _settings(ledger, claim, variant, task)
            words = ["bench", "run", "--model", model]
            for key, value in options.items():
                for v in value if isinstance(value, list) else [value]:
                    words += [f"--{key.replace('_', '-')}", str(v)]
            out.append(Step(model, shlex.join(words), run_minutes(ledger.costs, options),
                            0.0 if trained else train_minutes(ledger.costs, ledger.models.get(model, ""))))
            trained = True  # the model's training is counted with its first command
    return tuple(out)


def plan(ledger: Ledger, claim: Claim, variant: dict, missing: tuple, store: ResultStore) -> tuple[str, float]:
    """The commands that make the missing models' cells under ``variant``, joined, and their estimated CPU
    minutes (from [costs])."""
    todo = steps(ledger, claim, tuple((m, variant, ()) for m in missing), store)
    return " && ".join(s.command for s in todo), sum(s.run_minutes + s.train_minutes for s in todo)


def compute_plan(rows: list[Row]) -> tuple[list[Step], float]:
    """Every distinct command the "not run yet" lines name, once, and their total CPU minutes with each
    model's training counted once."""
    unique = list({s.command: s for r in rows for ln in r.lines for s in ln.steps}.values())
    trained: set[str] = set()
    total = 0.0
    for s in unique:
        total += s.run_minutes + (s.train_minutes if s.model not in trained else 0.0)
        trained.add(s.model)
    return unique, total


def run_minutes(costs: dict, options: dict) -> float:
    """CPU minutes of one `bench run`: a suite's fixed cost, or for an attack suite examples × runs ×
    recipes × seconds per example and recipe (× the task's length factor), plus the victims' training."""
    fixed = (costs.get("suite_minutes") or {}).get(options.get("suite"))
    if fixed is not None:
        return float(fixed)
    recipes = options.get("recipe") or []
    runs = int(options.get("runs") or 1)
    examples = int(options.get("limit") or costs.get("attack_default_limit", 1000))
    default, measured = float(costs.get("attack_seconds_per_example_recipe", 2)), costs.get("attack_seconds") or {}
    length = float((costs.get("task_length_factor") or {}).get(options.get("task"), 1))
    seconds = examples * runs * length * sum(float(measured.get(r, default))
                                             for r in (recipes if isinstance(recipes, list) else [recipes]))
    hardening = options.get("adversarial_training")  # each run's victim first attacks its training sentences
    if hardening:
        sentences = int(options.get("adversarial_training_examples")
                        or costs.get("adversarial_training_default_examples", 1000))
        seconds += sentences * runs * length * float(measured.get(hardening, default))
    return seconds / 60 + victim_minutes(costs, options) * runs * (2 if hardening else 1)


def victim_minutes(costs: dict, options: dict) -> float:
    """One victim's training minutes: the task's measured figure (scaled to the share of its training set a
    --victim-examples sample keeps, where the size it was measured on is known), else the protocol's."""
    protocol, task = options.get("victim"), options.get("task")
    by_task = ((costs.get("task_victim_minutes") or {}).get(protocol) or {}).get(task)
    if by_task is None:
        return float((costs.get("victim_minutes") or {}).get(protocol, 0))
    measured_on = ((costs.get("task_victim_examples") or {}).get(protocol) or {}).get(task)
    sample = options.get("victim_examples")
    share = min(1.0, int(sample) / int(measured_on)) if sample and measured_on else 1.0
    return float(by_task) * share


def train_minutes(costs: dict, method: str) -> float:
    if not method:
        return 0.0
    per_step = (costs.get("train_seconds_per_step") or {}).get(method)
    if per_step is None:
        return 0.0
    return float(per_step) * int(costs.get("train_steps", 250)) / 60 + float(costs.get("train_overhead_minutes", 0))


# ---------------------------------------------------------------- settings from the record ---------

KEPT_EARLY = 0.2  # a kept step below this share of the steps run is flagged


def model_setting(facts: dict) -> tuple[str, tuple[str, ...]]:
    """What a trained model's card records (``plugins.json``: base, steps run, the step kept with its STS-B
    dev score against the base's, the method's recorded settings), and the flags a reader should see: a
    kept step below 20% of the steps run, or a dev score below the base's."""
    training = facts.get("training") or {}
    if not training:
        return "no training card recorded", ()
    steps_run = training.get("steps")
    best = training.get("best") or {}
    kept, dev, before = best.get("step"), best.get("stsb_dev_spearman"), training.get("stsb_dev_before")
    parts = [f"{facts.get('method') or training.get('method')} from {facts.get('base') or '?'}",
             f"{steps_run} steps of {training.get('batch_size')}"]
    if kept is not None:
        parts.append(f"kept step {kept}" + (f" (STS-B dev {dev:.2f}; base {before:.2f})"
                                            if dev is not None and before is not None else ""))
    config = training.get("method_config")
    if isinstance(config, dict):  # where a resource sat on the training machine is no setting
        parts.append(", ".join(f"{k}={_short(v)}" for k, v in sorted(config.items()) if not _machine_path(k, v)))
    flags = []
    if kept is not None and steps_run and kept < KEPT_EARLY * steps_run:
        flags.append(f"kept step {kept} is below {KEPT_EARLY:.0%} of the {steps_run} steps run")
    if dev is not None and before is not None and dev < before:
        flags.append(f"its STS-B dev ({dev:.2f}) is below its base's ({before:.2f})")
    return "; ".join(parts), tuple(flags)


def _machine_path(key: str, value) -> bool:
    return key.endswith(("_dir", "_path", "_file")) or (isinstance(value, str) and value.startswith(("/", "~")))


def _short(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def setting_text(catalog_models: dict, claim: Claim, suffixes: tuple[str, ...] = (),
                 pair: tuple[str, str] | None = None) -> tuple[str, tuple[str, ...]]:
    """The generated setting of a claim: the method model's and the baseline's card facts, and the flags of
    every seed's models. ``pair`` (method, baseline) names one training seed's models: then the text and the
    flags are theirs alone (a per-seed line); without it, the claim's seed-0 models speak for the text."""
    method, baseline = pair or (claim.method, claim.baseline)
    names = [method, baseline] if pair else [m + x for m in (claim.method, claim.baseline) for x in ("", *suffixes)]
    # a base that is not trained has no card facts to show
    trained = {n: model_setting(catalog_models[n]) for n in names if (catalog_models.get(n) or {}).get("method")}
    texts = [f"{role} {name}: {trained[name][0]}" for role, name in (("method", method), ("baseline", baseline))
             if name in trained]
    flags = [f"{name}: {f}" for name in names if name in trained for f in trained[name][1]]
    trainings = [(catalog_models.get(n) or {}).get("training", {}) for n in names]
    flags += _base_builds_flag(trainings) + _precisions_flag(trainings)
    return " | ".join(texts), tuple(dict.fromkeys(flags))


BUILD_DEV_TOLERANCE = 0.05  # STS-B dev points: one build re-scored on another CPU moves far less than this


def _base_builds_flag(trainings: list[dict]) -> list[str]:
    """A flag when the models were trained from different builds of their base: told by the base's weights
    hash, or, on cards that predate it, by the base's STS-B dev score before training."""
    hashes = sorted({t["base_weights_sha256"][:12] for t in trainings if t.get("base_weights_sha256")})
    devs = sorted({round(float(t["stsb_dev_before"]), 2) for t in trainings if t.get("stsb_dev_before") is not None})
    spread = len(devs) > 1 and devs[-1] - devs[0] > BUILD_DEV_TOLERANCE
    if len(hashes) < 2 and not spread:
        return []
    told = ([f"sha256 {', '.join(hashes)}"] if len(hashes) > 1 else []) + \
           ([f"base STS-B dev {', '.join(f'{d:.2f}' for d in devs)}"] if spread else [])
    return [f"its models were trained from different builds of the base ({'; '.join(told)})"]


def _precisions_flag(trainings: list[dict]) -> list[str]:
    """A flag when the models trained at different precisions: `--dtype auto` autocasts to bf16 on CPUs
    with AMX and on CUDA, and runs fp32 elsewhere, so one command can train differently on two machines."""
    precisions = sorted({t.get("amp") or "fp32" for t in trainings if "amp" in t})
    if len(precisions) < 2:
        return []
    return [f"its models were trained at different precisions ({', '.join(precisions)})"]


def catalog_models(results_dir: Path) -> dict:
    return dict(metadata.read(results_dir).get("models") or {})


# ---------------------------------------------------------------- what the instrument has been shown to see

def protocol_of(claim: Claim, variant: dict) -> tuple:
    """The measurement a line's number comes from: suite, task, metric, attack and the settings it runs under."""
    return (claim.suite, "+".join(claim.task_list), claim.metric, claim.attack,
            tuple(sorted((k, str(v)) for k, v in {**claim.run, **variant}.items() if k != "recipe")))


def control_reach(row: Row, rows: list[Row]) -> str:
    """For a paper's line on an attack metric: the largest effect a positive control produced under the same
    protocol, with its CI (or that none was measured), so the reader can see whether the instrument can show
    a change of the size the paper claims, and read an "excluded" against it; "" for any other line."""
    e = row.primary
    if row.claim.kind != "paper" or e is None or not is_rate(row.claim) or row.claim.not_testable:
        return ""
    mine = protocol_of(row.claim, e.variant)
    measured = [c.primary for c in rows if c.claim.kind == "control" and c.primary is not None
                and c.primary.pooled is not None and c.primary.pooled.estimate is not None
                and protocol_of(c.claim, c.primary.variant) == mine]
    if not measured:
        return "no control measured under this protocol"
    top = max(measured, key=lambda x: abs(x.pooled.estimate))
    return f"the largest control effect under this protocol: {top.claim.id}, {_delta_ci(top)}"

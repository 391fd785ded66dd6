"""The claims ledger: each seed paper's headline claims (``reports/claims.toml``), tested under one protocol.

A claim names a paper's table, the metric and row it compares, our two models in that role (the
method and its baseline, both from one base under one profile), the rows of ``reports/paper_values.csv``
its paper Δ comes from, and the direction the paper asserts. ``ledger(results_dir)`` pairs the two
models' stored cells with the same paired comparison `bench compare` runs (bench/uncertainty.py) and
gives each comparison a verdict by ``verdict`` below, the one place that rule is written.
``to_markdown``/``to_html`` render one row per claim: reports read result files and the claims file
only, never a model.
"""

from __future__ import annotations

import html
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from bench.errors import BenchError
from bench.stats import LEVEL, display_decimals, format_number, format_p
from bench.store import ResultStore
from reports.paper import PAPER_VALUES, PaperRef, PaperValues
from reports.paper import by_label as paper_by_label
from reports.site import page

CLAIMS_FILE = Path(__file__).with_name("claims.toml")
DIRECTIONS = ("higher", "lower")  # what the paper asserts of method − baseline on the metric

# Verdicts (the rule: ``verdict``).
REPLICATED = "replicated"
INCONCLUSIVE = "inconclusive"
NOT_DETECTED = "not detected"
REVERSED = "reversed"
NOT_TESTABLE = "not testable here"
NOT_RUN = "not run yet"
NO_EVIDENCE = "no paired evidence"  # both cells stored, but a model's per-example evidence is not
VERDICTS = (REPLICATED, INCONCLUSIVE, NOT_DETECTED, REVERSED, NOT_TESTABLE, NOT_RUN, NO_EVIDENCE)

REQUIRED = ("id", "paper", "table", "claim", "suite", "task", "metric", "aggregation", "method", "baseline",
            "paper_method", "paper_baseline", "direction", "differs")
OPTIONAL = {"attack": "", "split": "", "paper_task": "", "paper_attack": None, "paper_split": None,
            "run": {}, "variants": [{}], "not_testable": ""}


# ---------------------------------------------------------------- the verdict rule ----------------

@dataclass(frozen=True)
class Verdict:
    label: str
    note: str = ""  # e.g. a replicated effect whose CI excludes the paper's Δ


def verdict(direction: str, paper_delta: float, low: float, high: float, p: float | None = None) -> Verdict:
    """The verdict of our 95% CI [low, high] of method − baseline against the paper's Δ.

    The CI is closed: an end exactly at 0 (or at the paper's Δ) counts as including it.
    - replicated: the CI excludes 0 on the side the paper asserts. When it also excludes the
      paper's Δ the effect is still replicated in sign, and the note says whether ours is smaller or
      larger than the paper's (a smaller effect is the common case at our scale);
    - reversed: the CI excludes 0 on the other side;
    - inconclusive: the CI includes both 0 and the paper's Δ (this run cannot tell them apart);
    - not detected: the CI includes 0 but excludes the paper's Δ (an effect the paper's size is ruled out).

    A direction also needs the paired test, where there is one (``p``), to reject at 1 − LEVEL: when only a
    handful of examples differ between the two models, every resample keeps their imbalance and the
    percentile bootstrap's CI excludes 0 where McNemar's test cannot (4 of 200 examples, all one way:
    CI [+0.5, +4.0], mid-p 0.06). Such a line is judged as if its CI included 0, and the note says so.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")
    if low > high:
        raise ValueError(f"the CI's low end {low} is above its high end {high}")
    asserted = 1 if direction == "higher" else -1
    excludes_zero = low > 0 or high < 0
    if excludes_zero and p is not None and p >= 1 - LEVEL:
        widened = (min(0.0, low), max(0.0, high))  # the CI as if it reached 0
        label = INCONCLUSIVE if widened[0] <= paper_delta <= widened[1] else NOT_DETECTED
        return Verdict(label, f"the CI excludes 0 but the paired test does not (p {format_p(p)}): too few "
                              "examples differ to call a direction")
    if excludes_zero:
        ours = 1 if low > 0 else -1
        if ours != asserted:
            return Verdict(REVERSED)
        if low <= paper_delta <= high:
            return Verdict(REPLICATED)
        smaller = abs(high if asserted > 0 else low) < abs(paper_delta)
        return Verdict(REPLICATED, "smaller effect than the paper's (CI excludes its Δ)" if smaller
                       else "larger effect than the paper's (CI excludes its Δ)")
    return Verdict(INCONCLUSIVE if low <= paper_delta <= high else NOT_DETECTED)


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
    paper_method_value: float = 0.0
    paper_baseline_value: float = 0.0

    @property
    def ref(self) -> PaperRef:
        return PaperRef(self.paper, self.table)

    @property
    def paper_delta(self) -> float:
        return self.paper_method_value - self.paper_baseline_value

    def paper_key(self, row: str) -> str:
        """How the claim cites a row of paper_values.csv."""
        return " / ".join(x for x in (self.paper, self.table, row, self.suite, self.paper_task or self.task,
                                      self.metric, self.paper_attack if self.paper_attack is not None
                                      else self.attack) if x)


@dataclass(frozen=True)
class Ledger:
    claims: tuple[Claim, ...]
    costs: dict
    models: dict  # registry model -> the method that trains it ("" for a base that needs none)
    seed_suffixes: tuple[str, ...]
    run_defaults: dict
    source: str


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
    paper_values = paper_values or PaperValues.load(PAPER_VALUES)
    models = data.get("models") or {}
    if not isinstance(models, dict) or not all(isinstance(v, str) for v in models.values()):
        raise _fail(path, "[models]", "must map each model name to its training method (a string)",
                    'write e.g. "simcse-minilm-mlm-study" = "simcse"')
    entries = data.get("claim") or []
    if not entries:
        raise _fail(path, "[[claim]]", "no claims", "add [[claim]] tables")
    claims, seen = [], set()
    for i, entry in enumerate(entries, 1):
        claim = _claim(path, i, entry, models, paper_values)
        if claim.id in seen:
            raise _fail(path, f"claim {claim.id}", "the id is used twice", "give each claim its own id")
        seen.add(claim.id)
        claims.append(claim)
    seeds = data.get("seeds") or {}
    return Ledger(tuple(claims), dict(data.get("costs") or {}), dict(models),
                  tuple(seeds.get("suffixes") or ()), dict(data.get("run_defaults") or {}), path.name)


def _claim(path: Path, i: int, entry: dict, models: dict, paper_values: PaperValues) -> Claim:
    where = f"claim #{i} ({entry.get('id', 'no id')})"
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
    if not isinstance(entry.get("run", {}), dict) or not isinstance(entry.get("variants", [{}]), list):
        raise _fail(path, where, "run must be a table and variants a list of tables",
                    'write run = { suite = "sts" } and variants = [{ victim = "frozen" }]')
    fields = {**OPTIONAL, **entry}
    fields["variants"] = tuple(fields["variants"]) or ({},)
    claim = Claim(**fields)
    values = {}
    for role in ("paper_method", "paper_baseline"):
        row = getattr(claim, role)
        value = paper_by_label(paper_values, claim.ref, row, claim.suite, claim.paper_task or claim.task,
                               claim.metric, claim.attack if claim.paper_attack is None else claim.paper_attack,
                               claim.paper_split)
        if value is None:
            raise _fail(path, where, f"{role} cites {claim.paper_key(row)!r}, which reports/paper_values.csv "
                                     "does not hold", "transcribe that value from the paper into "
                                     "reports/paper_values.csv, or correct the row label, task or metric")
        values[f"{role}_value"] = value
    claim = Claim(**{**fields, **values})
    if claim.paper_delta == 0 or (claim.paper_delta > 0) != (claim.direction == "higher"):
        raise _fail(path, where, f"the paper's Δ ({claim.paper_delta:+.2f}) is not on the asserted side "
                                 f"({claim.direction})", "check the direction and the cited paper rows")
    return claim


# ---------------------------------------------------------------- pairing the stored cells ---------

@dataclass(frozen=True)
class Comparison:
    """One line of a claim: one training seed (model pair) under one variant of the cells' settings."""

    method: str
    baseline: str
    variant: dict
    verdict: Verdict
    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    p: float | None = None
    pairs: int | None = None
    values: tuple = ()  # (baseline, method) as stored
    missing: tuple = ()  # models without the cell
    command: str = ""  # what makes the missing cells
    cpu_minutes: float | None = None
    steps: tuple = ()  # the Steps behind command


@dataclass(frozen=True)
class Row:
    claim: Claim
    lines: tuple[Comparison, ...]

    @property
    def verdict(self) -> Verdict:
        return self.lines[0].verdict if self.lines else Verdict(NOT_TESTABLE)


def _matches(config: dict, wanted: dict) -> bool:
    """Cell settings: a key the cell's config records must hold the wanted value; keys it does not
    record (bench run options spelled otherwise, e.g. recipe) do not filter."""
    return all(str(config[k]) == str(v) for k, v in wanted.items() if k in config)


def _settings(ledger: Ledger, claim: Claim, variant: dict) -> dict:
    return {**ledger.run_defaults, **claim.run, **variant}


def _cells(store: ResultStore, model: str, claim: Claim, wanted: dict) -> dict[tuple, Path]:
    from bench.uncertainty import model_cells

    return {k: p for k, p in model_cells(store, model, claim.suite, claim.task).items()
            if _matches(store.read(p).get("config", {}), wanted)}


def _row_key(claim: Claim):
    def include(key: dict) -> bool:
        return ((key["metric"], key["aggregation"], key["attack"]) == (claim.metric, claim.aggregation, claim.attack)
                and (not claim.split or key["split"] == claim.split))
    return include


def compare_pair(store: ResultStore, ledger: Ledger, claim: Claim, baseline: str, method: str,
                 variant: dict, cache=None) -> Comparison:
    """The paired difference method − baseline on the claim's row, over the cells both models stored
    under the variant's settings (the newest such pair), with its verdict."""
    from bench.uncertainty import compare_cells

    wanted = _settings(ledger, claim, variant)
    a, b = _cells(store, baseline, claim, wanted), _cells(store, method, claim, wanted)
    shared = sorted(set(a) & set(b), key=lambda k: tuple(str(x) for x in k))
    diffs = [d for k in shared for d in compare_cells(store, a[k], b[k], _row_key(claim), cache=cache)]
    if not diffs:
        missing = tuple(m for m, cells in ((baseline, a), (method, b)) if not cells) or (baseline, method)
        todo = steps(ledger, claim, variant, missing, store)
        return Comparison(method, baseline, variant, Verdict(NOT_RUN), missing=missing, steps=todo,
                          command=" && ".join(s.command for s in todo),
                          cpu_minutes=sum(s.run_minutes + s.train_minutes for s in todo))
    d = diffs[-1]
    x = d.diff
    if x is None or x.low is None or x.high is None:
        return Comparison(method, baseline, variant, Verdict(NO_EVIDENCE, d.note), estimate=d.estimate,
                          values=(d.a, d.b))
    return Comparison(method, baseline, variant, verdict(claim.direction, claim.paper_delta, x.low, x.high, x.p),
                      estimate=d.estimate, low=x.low, high=x.high, p=x.p, pairs=x.n, values=(d.a, d.b))


@dataclass(frozen=True)
class Step:
    """One `bench run` that makes a missing cell, with its estimated CPU minutes: the run itself, and the
    model's training where it has no stored cell at all (so is likely not trained yet)."""

    model: str
    command: str
    run_minutes: float
    train_minutes: float


def steps(ledger: Ledger, claim: Claim, variant: dict, missing: tuple, store: ResultStore) -> tuple[Step, ...]:
    options = _settings(ledger, claim, variant)
    out = []
    for model in missing:
        words = ["bench", "run", "--model", model]
        for key, value in options.items():
            for v in value if isinstance(value, list) else [value]:
                words += [f"--{key.replace('_', '-')}", str(v)]
        trained = (store.root / "cells" / model).is_dir()
        out.append(Step(model, shlex.join(words), run_minutes(ledger.costs, options),
                        0.0 if trained else train_minutes(ledger.costs, ledger.models.get(model, ""))))
    return tuple(out)


def plan(ledger: Ledger, claim: Claim, variant: dict, missing: tuple, store: ResultStore) -> tuple[str, float]:
    """The commands that make the missing cells, joined, and their estimated CPU minutes (from [costs])."""
    todo = steps(ledger, claim, variant, missing, store)
    return " && ".join(s.command for s in todo), sum(s.run_minutes + s.train_minutes for s in todo)


def compute_plan(rows: list["Row"]) -> tuple[list[Step], float]:
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
    recipes × seconds per example and recipe, plus the victims' training."""
    fixed = (costs.get("suite_minutes") or {}).get(options.get("suite"))
    if fixed is not None:
        return float(fixed)
    recipes = options.get("recipe") or []
    runs = int(options.get("runs") or 1)
    examples = int(options.get("limit") or costs.get("attack_default_limit", 1000))
    default, measured = float(costs.get("attack_seconds_per_example_recipe", 2)), costs.get("attack_seconds") or {}
    seconds = examples * runs * sum(float(measured.get(r, default))
                                    for r in (recipes if isinstance(recipes, list) else [recipes]))
    victim = float((costs.get("victim_minutes") or {}).get(options.get("victim"), 0)) * runs
    return seconds / 60 + victim


def train_minutes(costs: dict, method: str) -> float:
    if not method:
        return 0.0
    per_step = (costs.get("train_seconds_per_step") or {}).get(method)
    if per_step is None:
        return 0.0
    return float(per_step) * int(costs.get("train_steps", 250)) / 60 + float(costs.get("train_overhead_minutes", 0))


def _pairs(ledger: Ledger, claim: Claim) -> list[tuple[str, str]]:
    """(baseline, method): the claim's own, then each further training seed whose two models are both
    listed under [models] (e.g. simcse-…-seed1 and robustembed-…-seed1)."""
    out = [(claim.baseline, claim.method)]
    for suffix in ledger.seed_suffixes:
        pair = (claim.baseline + suffix, claim.method + suffix)
        if all(m in ledger.models for m in pair):
            out.append(pair)
    return out


def ledger(results_dir: Path, path: Path = CLAIMS_FILE, paper_values: PaperValues | None = None,
           cache=None) -> tuple[Ledger, list[Row]]:
    """The claims and their comparisons; bootstraps from ``cache`` (bench.stats_cache.StatsCache, default:
    the one beside the results), as `bench report` shares one for every table, card and claim."""
    from bench.stats_cache import StatsCache

    book = load(path, paper_values)
    store = ResultStore(Path(results_dir))
    cache = cache if cache is not None else StatsCache.load(store.root)
    rows = []
    for claim in book.claims:
        if claim.not_testable:
            rows.append(Row(claim, ()))
            continue
        lines = tuple(compare_pair(store, book, claim, base, method, variant, cache)
                      for base, method in _pairs(book, claim) for variant in claim.variants)
        rows.append(Row(claim, lines))
    return book, rows


# ---------------------------------------------------------------- rendering -----------------------

def _variant_text(variant: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in variant.items())


def _seed_label(line: Comparison, claim: Claim) -> str:
    suffix = line.method[len(claim.method):]
    return f"training seed {suffix[len('-seed'):]}" if suffix.startswith("-seed") else "training seed 0"


def line_text(line: Comparison, claim: Claim, plan: dict[str, int] | None = None) -> str:
    """One line of a claim; a "not run yet" line names its commands by their number in ``plan`` (the compute
    plan under the table, so the table stays readable), else in full."""
    where = "; ".join(x for x in (_seed_label(line, claim), _variant_text(line.variant)) if x)
    if line.verdict.label == NOT_RUN:
        cost = f"about {_duration(line.cpu_minutes)} CPU" if line.cpu_minutes else ""
        if plan is not None and all(s.command in plan for s in line.steps):
            numbers = sorted({plan[s.command] for s in line.steps})
            todo = ("plan step " if len(numbers) == 1 else "plan steps ") + ", ".join(map(str, numbers))
            return f"{where}: {NOT_RUN} (no cell for {', '.join(line.missing)}): {todo}" + (f", {cost}" if cost else "")
        return (f"{where}: {NOT_RUN}: no cell for {', '.join(line.missing)}; `{line.command}`"
                + (f" ({cost})" if cost else ""))
    if line.low is None:
        return f"{where}: Δ {format_number(line.estimate, 2, signed=True)} ({line.verdict.note or NO_EVIDENCE})"
    k = display_decimals(line.low, line.high)
    base, method = (format_number(v, k) for v in line.values)
    text = (f"{where}: {base} → {method}, Δ {format_number(line.estimate, k, signed=True)} "
            f"[{format_number(line.low, k, signed=True)}, "
            f"{format_number(line.high, k, signed=True)}], p {format_p(line.p)}: {line.verdict.label}")
    return text + (f", {line.verdict.note}" if line.verdict.note else "")


def _duration(minutes: float | None) -> str:
    if minutes is None:
        return "unknown"
    return f"{minutes / 60:.1f} h" if minutes >= 90 else f"{minutes:.0f} min"


def seeds_text(row: Row) -> str:
    """Whether the training seeds agree, per variant, where a claim has more than one."""
    out = []
    for variant in row.claim.variants:
        ran = [ln for ln in row.lines if ln.variant == variant and ln.verdict.label not in (NOT_RUN, NO_EVIDENCE)]
        if len(ran) < 2:
            continue
        labels = {ln.verdict.label for ln in ran}
        where = f" ({_variant_text(variant)})" if _variant_text(variant) else ""
        out.append(f"seeds agree{where}: {ran[0].verdict.label}" if len(labels) == 1
                   else f"seeds disagree{where}: " + ", ".join(f"{_seed_label(ln, row.claim)} {ln.verdict.label}"
                                                              for ln in ran))
    return "; ".join(out)


def headline(row: Row) -> str:
    if row.claim.not_testable:
        return f"{NOT_TESTABLE}: {row.claim.not_testable}"
    extra = seeds_text(row)
    return row.verdict.label + (f" ({extra})" if extra else "")


def _paper_text(claim: Claim) -> str:
    return (f"{format_number(claim.paper_delta, 2, signed=True)} ({claim.paper_method} "
            f"{format_number(claim.paper_method_value, 2)} vs {claim.paper_baseline} "
            f"{format_number(claim.paper_baseline_value, 2)}; {claim.table})")


def _claim_text(claim: Claim) -> str:
    what = " ".join(x for x in (claim.metric, claim.attack, f"{claim.suite}/{claim.task}", claim.aggregation) if x)
    return (f"**{claim.id}** ({claim.paper} {claim.table}): {claim.claim}. Row: {what}; "
            f"{claim.method} vs {claim.baseline}")


COLUMN_WIDTHS = (22, 11, 36, 9, 22)  # the HTML table's columns, % of its width: our lines need the room
HEADERS = ("Claim", "Paper's Δ (method − baseline)", "Ours: baseline → method, Δ [95% CI], p (paired)", "Verdict",
           "What differs from the paper")


def summary(rows: list[Row]) -> str:
    counts = {v: 0 for v in VERDICTS}
    for r in rows:
        counts[NOT_TESTABLE if r.claim.not_testable else r.verdict.label] += 1
    return ", ".join(f"{v}: {n}" for v, n in counts.items() if n)


RULE = ("Verdicts (reports/claims.py `verdict`, on the 95% CI of method − baseline, closed at its ends): "
        "replicated = the paper's sign and the CI excludes 0 (noted when the CI also excludes the paper's Δ, "
        "i.e. a smaller or larger effect); inconclusive = the CI includes both 0 and the paper's Δ; not detected = "
        "the CI includes 0 and excludes the paper's Δ; reversed = the other sign, CI excludes 0; not testable here "
        "(with why); not run yet (with its estimated CPU time and the numbered commands of the compute plan "
        "below); no paired evidence (both cells stored, but one lacks its per-example evidence). A claim's "
        "verdict is its first "
        "line's (training seed 0, first setting); further training seeds are listed and said to agree or not. "
        "CIs and p: the paired comparison of `bench compare` (paired bootstrap, 1,000 resamples, over the examples "
        "both cells scored; McNemar mid-p for per-example binary outcomes). A direction (replicated, reversed) "
        "also needs p < 0.05: where the CI excludes 0 but the paired test does not (a few discordant examples, all "
        "one way, keep every bootstrap resample off 0), the line is judged as if the CI included 0, and says so.")


def to_markdown(book: Ledger, rows: list[Row]) -> str:
    out = ["# Claims ledger", "",
           f"Generated by `bench report` from the result files and reports/{book.source}; do not edit. "
           "Each seed paper's headline claims, tested as method − baseline under one protocol.", "",
           f"Verdicts: {summary(rows)}.", "", "| " + " | ".join(HEADERS) + " |", "|" + " --- |" * len(HEADERS)]
    plan = plan_numbers(rows)
    for r in rows:
        ours = "<br>".join(_md(line_text(ln, r.claim, plan)) for ln in r.lines) or "–"
        out.append("| " + " | ".join((_md(_claim_text(r.claim)), _md(_paper_text(r.claim)), ours,
                                      _md(headline(r)), _md(r.claim.differs))) + " |")
    out += ["", RULE, ""] + _plan_markdown(rows)
    return "\n".join(out)


def plan_numbers(rows: list[Row]) -> dict[str, int]:
    """Each command of the compute plan and its number there (1-based), as the plan lists them."""
    todo, _ = compute_plan(rows)
    return {s.command: i for i, s in enumerate(todo, 1)}


def _plan_text(rows: list[Row]) -> tuple[str, list[tuple[str, str]]]:
    """The compute plan under the table: a sentence, and (command, its CPU estimate) per distinct command."""
    todo, total = compute_plan(rows)
    if not todo:
        return "", []
    head = (f"To fill every \"not run yet\" line: {len(todo)} distinct `bench run` commands, about "
            f"{_duration(total)} of CPU time in all (training counted once per model; estimates from "
            "reports/claims.toml [costs]):")
    items, trained = [], set()
    for s in todo:  # a model's training goes with its first command (bench run trains a missing model first)
        train = s.train_minutes if s.model not in trained else 0.0
        trained.add(s.model)
        items.append((s.command, _duration(s.run_minutes) + (f" + training {_duration(train)}" if train else "")))
    return head, items


def _plan_markdown(rows: list[Row]) -> list[str]:
    head, items = _plan_text(rows)
    if not head:
        return []
    return [head, ""] + [f"{i}. `{command}` (about {cost})" for i, (command, cost) in enumerate(items, 1)] + [""]


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_html(book: Ledger, rows: list[Row]) -> str:
    def esc(text: str) -> str:
        return html.escape(text).replace("**", "")

    out = ["<h1>Claims ledger</h1>",
           f"<p>Generated by <code>bench report</code> from the result files and reports/{html.escape(book.source)}; "
           "do not edit.</p>", f"<p>Verdicts: {html.escape(summary(rows))}.</p>", "<table class=\"claims\">",
           "<colgroup>" + "".join(f"<col style=\"width:{w}%\">" for w in COLUMN_WIDTHS) + "</colgroup>",
           "<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in HEADERS) + "</tr></thead><tbody>"]
    plan = plan_numbers(rows)
    for r in rows:
        # one block per line (training seed, victim protocol), so a claim's settings read apart
        ours = "".join(f"<div class=\"line\">{esc(line_text(ln, r.claim, plan))}</div>" for ln in r.lines) or "–"
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in (esc(_claim_text(r.claim)), esc(_paper_text(r.claim)),
                                                               ours, f"<b>{esc(headline(r))}</b>",
                                                               esc(r.claim.differs))) + "</tr>")
    out += ["</tbody></table>", f"<p class=\"note\">{html.escape(RULE)}</p>"]
    head, items = _plan_text(rows)
    if head:
        out += [f"<p>{html.escape(head)}</p>", "<ol>"] + [f"<li><code>{html.escape(command)}</code> (about {cost})</li>"
                                                            for command, cost in items] + ["</ol>"]
    return page("Claims ledger", out)  # the site's look, with the link back to the index


def render(results_dir: Path, path: Path = CLAIMS_FILE, paper_values: PaperValues | None = None,
           cache=None) -> dict[str, str]:
    """claims.md and claims.html for ``bench report``."""
    book, rows = ledger(results_dir, path, paper_values, cache)
    return {"claims.md": to_markdown(book, rows), "claims.html": to_html(book, rows)}


NAMES = ("claims.md", "claims.html")

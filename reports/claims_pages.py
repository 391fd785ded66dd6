"""The claims ledger as pages and data: claims.md, claims.html (with a forest plot), claims.csv and claims.json.

Everything here renders what ``reports/claims.py`` decided; no number is computed here but a display form.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path

from bench.results.store import records_csv
from bench.scoring.seeds import DF_GUARD, format_df
from bench.scoring.stats import display_decimals, format_number, format_p
from reports import claims as c
from reports.paper import PaperValues
from reports.site import page

DOSE = "claims-dose-response"
NAMES = ("claims.md", "claims.html", "claims.csv", "claims.json", "claims-forest.png", "null-simulation.csv",
         "placebo-battery.csv", f"{DOSE}.png", f"{DOSE}.csv")
FOREST = "claims-forest.png"
UNITS = {"spearman": "STS (Spearman × 100, points)", "acc": "Transfer accuracy (points)",
         "attack_success_rate": "Attack success rate (points)", "accuracy": "Accuracy (points)",
         "accuracy_under_attack": "Accuracy (points)", "clean_accuracy": "Accuracy (points)",
         "accuracy_reduction": "Accuracy (points)", "clean_mcc": "Matthews correlation × 100 (points)",
         "avg_queries": "Queries per attack"}


def unit(claim: c.Claim) -> str:
    return claim.unit or UNITS.get(claim.metric, "Other measures")


# ---------------------------------------------------------------- words for one line ---------------

def _variant_text(variant: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in variant.items())


def _n(x, k=2, signed=False) -> str:
    return format_number(x, k, signed=signed)


def seed_line(line: c.Comparison, plan: dict[str, int] | None = None) -> str:
    """One training seed's line: its two values, Δ [CI] and p over the examples compared, or what is missing."""
    where = f"seed {line.seed}"
    if line.missing:
        cost = f", about {_duration(line.cpu_minutes)} CPU" if line.cpu_minutes else ""
        if plan is not None and all(s.command in plan for s in line.steps):
            numbers = sorted({plan[s.command] for s in line.steps})
            todo = ("plan step " if len(numbers) == 1 else "plan steps ") + ", ".join(map(str, numbers))
            partial = f"; {line.note}" if line.note else ""
            return f"{where}: {c.NOT_RUN} (no cell for {', '.join(line.missing)}): {todo}{cost}{partial}"
        partial = f" ({line.note})" if line.note else ""
        return f"{where}: {c.NOT_RUN}: no cell for {', '.join(line.missing)}{partial}; `{line.command}`{cost}"
    if not line.ran:
        return f"{where}: Δ {_n(line.estimate, 2, True)} ({line.note or c.NO_EVIDENCE})"
    k = display_decimals(line.low, line.high)
    base, method = (_n(v, k) for v in line.values)
    return (f"{where}: {base} → {method}, Δ {_n(line.estimate, k, True)} [{_n(line.low, k, True)}, "
            f"{_n(line.high, k, True)}], p {format_p(line.p)}, n {line.pairs}")


def pooled_text(e: c.Effect) -> str:
    """The pooled effect of a claim under one variant, as the ledger's main cell shows it."""
    p = e.pooled
    if p is None or p.low is None:
        return "–"
    k = display_decimals(p.low, p.high)
    base, method = e.values
    rel = f" ({e.relative:+.1f}%)" if e.relative is not None else ""
    spread = f", seed SD {_n(p.spread, k)}" if p.spread is not None else ""
    adjusted = f", Holm {format_p(e.p_adjusted)}" if e.primary and e.p_adjusted is not None else ""
    others = "".join(f"; {name} p (Holm) {format_p(q)}" for name, q in
                     (("exclusion", e.adjusted.exclusion), ("equivalence", e.adjusted.equivalence)) if q is not None)
    return (f"{_n(base, k)} → {_n(method, k)}, Δ {_n(p.estimate, k, True)}{rel} [{_n(p.low, k, True)}, "
            f"{_n(p.high, k, True)}]; {_seeds(p.seeds)}{spread}; t on {df_text(p.df)} d.f., p {format_p(p.p)}"
            f"{adjusted}{others}; MDE {_n(e.mde, k)}")


def df_text(df: float | None) -> str:
    """A pooled line's d.f.: None stands for ∞ (the normal)."""
    return format_df(math.inf if df is None else df)


def _seeds(n: int) -> str:
    return f"{n} seed{'s' * (n != 1)}"


def verdict_text(e: c.Effect, reach: str = "") -> str:
    notes = "; ".join(x for x in (e.verdict.note, reach) if x)
    return e.verdict.label + (f" ({notes})" if notes else "")


def paper_text(claim: c.Claim) -> str:
    if claim.kind == "placebo":
        return f"0 (a placebo: {claim.paper_method} against {claim.paper_baseline}, one recipe in both arms)"
    if claim.kind != "paper":  # a control: no paper value; its expectation, stated before it ran, is in the claim
        return f"{claim.direction} ({claim.paper_method} vs {claim.paper_baseline}; expected before it ran: see the claim)"
    if claim.paper_delta is None:
        return f"{claim.direction} ({claim.paper_method} vs {claim.paper_baseline}; {claim.table}: a figure, no values printed)"
    rel = (f" ({100 * claim.paper_delta / claim.paper_baseline_value:+.1f}%)"
           if claim.paper_baseline_value else "")
    margin = f", margin ±{claim.margin:g}" if claim.margin is not None else ""
    return (f"{_n(claim.paper_delta, 2, True)}{rel}{margin} ({claim.paper_method} "
            f"{_n(claim.paper_method_value)} vs {claim.paper_baseline} {_n(claim.paper_baseline_value)}; "
            f"{claim.table})")


def claim_text(claim: c.Claim) -> str:
    tasks = "+".join(claim.task_list)
    what = " ".join(x for x in (claim.metric, claim.attack, f"{claim.suite}/{tasks}", claim.aggregation) if x)
    expected = f" Expected before it ran: {claim.expectation}" if claim.expectation else ""
    return (f"**{claim.id}** ({claim.paper} {claim.table}): {claim.claim}. Row: {what}; {claim.method} vs "
            f"{claim.baseline}.{expected}")


KIND_HEADINGS = {"paper": "The papers' claims", "control": "Positive controls: can the harness see robustness?",
                 "placebo": "Placebo: a method against itself"}


def differs_text(row: c.Row, models: dict, suffixes, pair: tuple[str, str] | None = None) -> str:
    setting, flags = c.setting_text(models, row.claim, suffixes, pair)
    out = [f"Setting (model cards): {setting}."] if setting else []
    out += [f"⚠ {f}." for f in flags]
    out.append(row.claim.differs)
    return " ".join(out)


def _duration(minutes: float | None) -> str:
    if minutes is None:
        return "unknown"
    return f"{minutes / 60:.1f} h" if minutes >= 90 else f"{minutes:.0f} min"


# ---------------------------------------------------------------- counts, rule, plan --------------

def counts(rows: list[c.Row], kind: str = "paper") -> dict[str, int]:
    out = {v: 0 for v in c.VERDICTS}
    for r in rows:
        if r.claim.kind == kind:
            out[r.verdict.label] += 1
    return {k: v for k, v in out.items() if v}


def summary(rows: list[c.Row]) -> str:
    return ", ".join(f"{v}: {n}" for v, n in counts(rows).items())


def family_text(rows: list[c.Row]) -> str:
    declared = [r.primary for r in rows if r.primary is not None and r.primary.in_family and r.claim.kind == "paper"]
    m, ran = len(declared), sum(1 for e in declared if e.p_adjusted is not None)
    return (f"The families: one primary line per testable paper claim (its first setting, pooled over its matched "
            f"training seeds), {m} declared, {ran} decidable so far. Three families, each under Holm's step-down "
            f"procedure at {c.ALPHA:.0%}: the direction tests (every primary line), the exclusion tests (every line "
            "with a paper's Δ) and the equivalence tests (every claim of no difference). A line not decidable yet "
            "(not run, too few seeds) counts as p = 1, so no verdict reached now is undone by the runs to come. "
            "Controls are a family of their own; each placebo is judged alone, unadjusted. Further settings of a "
            "claim (another victim protocol) are shown beside it at their own p and decide nothing.")


RULE = (
    "How a line is made. Each training seed: the paired difference method − baseline over the examples both "
    "cells scored (paired bootstrap, 1,000 resamples, each dataset and run on its own resample stream, the same "
    "for every model; for attack success rates only the examples both victims classified correctly, so both "
    "attacked, with McNemar's mid-p on the same examples). Pooled (docs/statistics.md): the mean of the "
    "per-seed differences over matched seeds (one base build, one weights hash per model), tested by one "
    "seed-level t: SE² = A/k + V − c/k, where A is the variance of the per-seed differences, V the bootstrap "
    "variance of their average with every seed resampled on the same draws of the shared examples, and c/k the "
    "part of A/k that is example noise; never below V nor A/k. Degrees of freedom: Satterthwaite's on the seed "
    f"part alone (taken at its upper {DF_GUARD:.0%} bound), ∞ where the seeds do not vary. The CI is Δ ± t·SE, so it excludes "
    "0 exactly when p < 0.05. Excluded: the one-sided p that the effect is smaller than the stated share of the "
    "paper's Δ; same: TOST against the stated margin. MDE: the smallest true difference a two-sided 5% test on "
    "that t detects with 80% power; for a rate on which the two models' victims never disagree, the share of the "
    "examples compared that McNemar's test would catch with 80% power. Relative Δ: the pooled Δ as a share of the "
    "baseline's value. The setting of each trained model is generated from its card; ⚠ flags a kept step below "
    "20% of the steps run, a dev score below the base's, models trained from different builds of the base, or "
    "at different precisions.")


def legend() -> list[tuple[str, str]]:
    return [(v, c.MEANINGS[v]) for v in c.VERDICTS]


def plan_numbers(rows: list[c.Row]) -> dict[str, int]:
    todo, _ = c.compute_plan(rows)
    return {s.command: i for i, s in enumerate(todo, 1)}


def plan_items(rows: list[c.Row]) -> tuple[str, list[tuple[str, str]]]:
    """The compute plan under the table: a sentence, and (command, its CPU estimate) per distinct command."""
    todo, total = c.compute_plan(rows)
    if not todo:
        return "", []
    head = (f"To fill every \"not run yet\" line: {len(todo)} distinct `bench run` commands, about "
            f"{_duration(total)} of CPU time in all (training counted once per model, for a model with no stored "
            "cell; a model with cells was trained where they ran, and `bench run` trains it again first where its "
            "checkpoint is not at hand; estimates from reports/claims.toml [costs]):")
    items, trained = [], set()
    for s in todo:
        train = s.train_minutes if s.model not in trained else 0.0
        trained.add(s.model)
        items.append((s.command, _duration(s.run_minutes) + (f" + training {_duration(train)}" if train else "")))
    return head, items


# ---------------------------------------------------------------- markdown and HTML ---------------

HEADERS = ("Claim", "Paper's Δ (relative)",
           "Ours, pooled over training seeds: baseline → method, Δ (relative) [95% CI]; seeds, seed SD; p, Holm; MDE",
           "Each training seed", "Verdict", "Setting and what differs from the paper")
COLUMN_WIDTHS = (17, 10, 22, 22, 9, 20)


def _cells(r: c.Row, models: dict, suffixes, plan, rows=()) -> tuple[str, str, list[str], list[str], str, str]:
    ours, seeds = [], []
    for e in r.effects:
        label = f"{_variant_text(e.variant)}: " if _variant_text(e.variant) else ""
        ours.append(label + pooled_text(e) + ("" if e.primary else " (outside the family)"))
        seeds += [label + seed_line(ln, plan) for ln in e.lines]
    reach = c.control_reach(r, list(rows))
    verdicts = "; ".join(f"{_variant_text(e.variant) + ': ' if len(r.effects) > 1 else ''}"
                         f"{verdict_text(e, reach if e.primary else '')}" for e in r.effects) or verdict_text_row(r)
    return claim_text(r.claim), paper_text(r.claim), ours or ["–"], seeds or ["–"], verdicts, \
        differs_text(r, models, suffixes)


def verdict_text_row(r: c.Row) -> str:
    return r.verdict.label + (f": {r.verdict.note}" if r.verdict.note else "")


def battery_text(battery: list[dict]) -> str:
    """The placebo battery (reports/placebo_battery.py) in words: each placebo's rate over every split of the
    seeds, beside the range a calibrated test gives on simulated seeds of the same noise (nine times in ten)."""
    real = {(r["claim"], r["k"]): r for r in battery if r["what"] == "real"}
    pairs = [(r, s) for s in battery if s["what"] == "simulated" and (r := real.get((s["claim"], s["k"])))]
    if not pairs:
        return ""
    rates = " and in ".join(f"{r['directional']:.1%} of the {r['arrangements']:,} splits into arms of {r['k']} (a "
                      f"calibrated test: {s['low']:.1%}–{s['high']:.1%})" for r, s in pairs)
    above = any(r["directional"] > s["high"] for r, s in pairs)
    below = any(r["directional"] < s["low"] for r, s in pairs)
    judged = ("more often than a calibrated test would" if above else "less often than a calibrated test would"
              if below else "as often as a calibrated test would, which fails one placebo in twenty by chance")
    return (f"Over every split of the placebos' {pairs[0][0]['models']} seeds into two arms of paired seeds "
            f"(placebo-battery.csv), the test calls a direction in {rates}: {judged}.")


def to_markdown(book: c.Ledger, rows: list[c.Row], models: dict, battery: list[dict] = ()) -> str:
    out = ["# Claims ledger", "",
           f"Generated by `bench report` from the result files, their `plugins.json` and reports/{book.source}; do "
           "not edit. Each seed paper's headline claims, tested as method − baseline under one protocol, with the "
           "training seed as the unit.", "", f"Verdicts: {summary(rows)}.", "", family_text(rows), "",
           f"![forest plot]({FOREST})"]
    plan = plan_numbers(rows)
    for kind, group in _by_kind(rows):
        out += ["", f"## {KIND_HEADINGS[kind]}", ""]
        if kind == "placebo" and (said := battery_text(battery)):
            out += [said, ""]
        out += ["| " + " | ".join(HEADERS) + " |", "|" + " --- |" * len(HEADERS)]
        for r in group:
            claim, paper, ours, seeds, verdicts, differs = _cells(r, models, book.seed_suffixes, plan, rows)
            out.append("| " + " | ".join(_md(x) for x in (claim, paper, "<br>".join(ours), "<br>".join(seeds),
                                                              verdicts, differs)) + " |")
    out += ["", "Verdicts, strongest first:", ""] + [f"- **{v}**: {m}" for v, m in legend()]
    out += ["", RULE, ""]
    head, items = plan_items(rows)
    if head:
        out += [head, ""] + [f"{i}. `{command}` (about {cost})" for i, (command, cost) in enumerate(items, 1)] + [""]
    return "\n".join(out)


def _by_kind(rows: list[c.Row]) -> list[tuple[str, list[c.Row]]]:
    """The rows grouped by kind of claim, in KINDS order, never mixed."""
    return [(k, [r for r in rows if r.claim.kind == k]) for k in c.KINDS if any(r.claim.kind == k for r in rows)]


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_html(book: c.Ledger, rows: list[c.Row], models: dict, forest: bool = True, dose: bool = False,
            battery: list[dict] = ()) -> str:
    def esc(text: str) -> str:
        return html.escape(text).replace("**", "")

    out = ["<h1>Claims ledger</h1>",
           f"<p>Generated by <code>bench report</code> from the result files and reports/{html.escape(book.source)}; "
           "do not edit. Data: <a href=\"claims.csv\">claims.csv</a>, <a href=\"claims.json\">claims.json</a>.</p>",
           f"<p><b>Verdicts:</b> {html.escape(summary(rows))}.</p>", f"<p class=\"note\">{html.escape(family_text(rows))}</p>"]
    if forest:
        out.append(f"<figure><img src=\"{FOREST}\" alt=\"forest plot of the claims\" style=\"width:100%;max-width:1100px\">"
                   "<figcaption>Each claim's primary line: our pooled Δ with its 95% CI (dot and bar; green replicated, "
                   "orange reversed), the paper's Δ (red diamond), a no-difference claim's margin shaded; one panel "
                   "per unit.</figcaption></figure>")
    plan = plan_numbers(rows)
    for kind, group in _by_kind(rows):
        out.append(f"<h2>{html.escape(KIND_HEADINGS[kind])}</h2>")
        if kind == "control" and dose:
            out.append(f"<figure><img src=\"{DOSE}.png\" alt=\"dose-response of the canonicalising control\" "
                       "style=\"width:100%;max-width:700px\"><figcaption>Dose-response: each level's attack "
                       f"success rate against the encoder without the wrapper, 95% CI (data: <a href=\"{DOSE}.csv\">"
                       f"{DOSE}.csv</a>). If the instrument sees robustness, the curve falls.</figcaption></figure>")
        if kind == "placebo" and (said := battery_text(battery)):
            out.append(f"<p class=\"note\">{html.escape(said)}</p>")
        out += ["<table class=\"claims\">",
                "<colgroup>" + "".join(f"<col style=\"width:{w}%\">" for w in COLUMN_WIDTHS) + "</colgroup>",
                "<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in HEADERS) + "</tr></thead><tbody>"]
        for r in group:
            claim, paper, ours, seeds, verdicts, differs = _cells(r, models, book.seed_suffixes, plan, rows)
            blocks = ["".join(f"<div class=\"line\">{esc(x)}</div>" for x in xs) for xs in (ours, seeds)]
            cells = (esc(claim), esc(paper), *blocks, f"<b>{esc(verdicts)}</b>", esc(differs))
            out.append(f"<tr id=\"{html.escape(r.claim.id)}\">" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>")
        out.append("</tbody></table>")
    out += ["<h2>Verdicts, strongest first</h2>", "<ul class=\"note\">"]
    out += [f"<li><b>{html.escape(v)}</b>: {html.escape(m)}</li>" for v, m in legend()] + ["</ul>"]
    out.append(f"<p class=\"note\">{html.escape(RULE)}</p>")
    head, items = plan_items(rows)
    if head:
        out += [f"<p>{html.escape(head)}</p>", "<ol>"] + [f"<li><code>{html.escape(cmd)}</code> (about {cost})</li>"
                                                            for cmd, cost in items] + ["</ol>"]
    return page("Claims ledger", out)


# ---------------------------------------------------------------- machine-readable ----------------

COLUMNS = ("claim_id", "kind", "paper", "table", "metric", "attack", "suite", "tasks", "baseline_model",
           "method_model", "seed", "setting", "primary", "paper_baseline_value", "paper_method_value", "paper_delta",
           "paper_relative_delta", "baseline_value", "method_value", "delta", "ci_low", "ci_high", "seed_part",
           "example_part", "se", "df", "p", "p_holm", "exclusion_margin", "p_exclusion", "p_exclusion_holm",
           "equivalence_margin", "p_equivalence", "p_equivalence_holm", "mde", "relative_delta", "seeds", "seed_sd",
           "n", "verdict", "verdict_note", "control_reach", "what_differs")


def records(book: c.Ledger, rows: list[c.Row], models: dict) -> list[dict]:
    """One record per line: each training seed's, then the pooled one (seed "pooled"), per setting."""
    out = []
    for r in rows:
        claim = r.claim
        base = {"claim_id": claim.id, "kind": claim.kind, "paper": claim.paper, "table": claim.table, "metric": claim.metric,
                "attack": claim.attack, "suite": claim.suite, "tasks": "+".join(claim.task_list),
                "paper_baseline_value": claim.paper_baseline_value, "paper_method_value": claim.paper_method_value,
                "paper_delta": claim.paper_delta,
                "paper_relative_delta": (100 * claim.paper_delta / claim.paper_baseline_value
                                         if claim.paper_delta is not None and claim.paper_baseline_value else None),
                "what_differs": differs_text(r, models, book.seed_suffixes)}
        if not r.effects:
            out.append({**base, "baseline_model": claim.baseline, "method_model": claim.method, "seed": "pooled",
                        "verdict": r.verdict.label, "verdict_note": r.verdict.note, "primary": True})
        for e in r.effects:
            setting = _variant_text(e.variant)
            for ln in e.lines:
                a, b = (ln.values + (None, None))[:2]
                out.append({**base, "baseline_model": ln.baseline, "method_model": ln.method, "seed": ln.seed,
                            "setting": setting, "primary": False, "baseline_value": a, "method_value": b,
                            "delta": ln.estimate, "ci_low": ln.low, "ci_high": ln.high, "p": ln.p, "n": ln.pairs,
                            "verdict": c.NOT_RUN if ln.missing else "", "verdict_note": ln.note,
                            "what_differs": differs_text(r, models, book.seed_suffixes, (ln.method, ln.baseline))})
            out.append({**base, **_pooled_record(book, e), "setting": setting,
                        "control_reach": c.control_reach(r, rows) if e.primary else None})
    return [{k: _clean(rec.get(k)) for k in COLUMNS} for rec in out]


def _pooled_record(book: c.Ledger, e: c.Effect) -> dict:
    """The pooled line's fields: its one test (Δ, CI, SE with its seed and example parts, d.f., p) and each
    family's p, raw and Holm-adjusted."""
    p, claim, raw = e.pooled, e.claim, c.raw_tests(e, book)
    a, b = e.values
    ran = p is not None and p.se is not None
    return {"baseline_model": claim.baseline, "method_model": claim.method, "seed": "pooled", "primary": e.primary,
            "baseline_value": a, "method_value": b, "delta": p.estimate if p else None,
            "ci_low": p.low if p else None, "ci_high": p.high if p else None,
            "seed_part": p.seed_part if p else None, "example_part": p.example_part if p else None,
            "se": p.se if p else None, "df": (p.df if p.df is not None else "inf") if ran else None,
            "p": p.p if p else None, "p_holm": e.p_adjusted,
            "exclusion_margin": book.exclusion_margin(claim) if claim.direction != "same" else None,
            "p_exclusion": raw.exclusion, "p_exclusion_holm": e.adjusted.exclusion if e.primary else None,
            "equivalence_margin": claim.margin, "p_equivalence": raw.equivalence,
            "p_equivalence_holm": e.adjusted.equivalence if e.primary else None,
            "mde": e.mde, "relative_delta": e.relative, "seeds": p.seeds if p else 0,
            "seed_sd": p.spread if p else None, "verdict": e.verdict.label, "verdict_note": e.verdict.note}


def _clean(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def to_csv(recs: list[dict]) -> str:
    return records_csv(COLUMNS, recs)


def to_json(book: c.Ledger, rows: list[c.Row], recs: list[dict], battery: list[dict] = ()) -> str:
    return json.dumps({"format": "bench-claims/1", "alpha": c.ALPHA, "correction": "holm",
                       "min_seeds": book.tests.get("min_seeds", c.MIN_SEEDS), "power": c.POWER,
                       "test": "seed-level t (bench/scoring/seeds.py)", "verdicts": dict(legend()),
                       "counts": counts(rows), "control_counts": counts(rows, "control"), "family": family_text(rows),
                       "placebo_battery": battery_text(battery),
                       "claims": [{"claim_id": r.claim.id, "title": r.claim.claim, "unit": unit(r.claim)} for r in rows],
                       "lines": recs},
                      indent=1, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------- the forest plot -----------------

# Directional verdicts stand out; a line that cannot be tested here is drawn, but greyed.
VERDICT_COLOURS = {c.REPLICATED: "#1a7f37", c.REVERSED: "#b35900", c.NOT_TESTABLE: "#9e9e9e"}


def forest_points(rows: list[c.Row]) -> dict[str, list[tuple]]:
    """unit -> (label, our Δ, low, high, the paper's Δ, verdict) of every primary line that ran."""
    out: dict[str, list[tuple]] = {}
    for r in rows:
        e = r.primary
        if e is None or e.pooled is None or e.pooled.low is None:
            continue
        label = f"{r.claim.id} ({_seeds(e.pooled.seeds)}): {e.verdict.label}"
        out.setdefault(unit(r.claim), []).append((label, e.pooled.estimate, e.pooled.low, e.pooled.high,
                                                  r.claim.paper_delta, e.verdict.label, r.claim.margin))
    return out


def forest_png(rows: list[c.Row]) -> bytes | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reports.figures import figure_bytes

    panels = forest_points(rows)
    if not panels:
        return None
    heights = [max(1.2, 0.32 * len(v) + 0.8) for v in panels.values()]
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, sum(heights) + 0.6),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, (name, pts) in zip(axes[:, 0], panels.items()):
        ys = list(range(len(pts)))[::-1]
        for y, (label, est, low, high, paper, verdict, margin) in zip(ys, pts):
            colour = VERDICT_COLOURS.get(verdict, "#1d4e89")
            if margin is not None:  # a claim of no difference: its equivalence margin, shaded
                ax.fill_betweenx([y - 0.3, y + 0.3], -margin, margin, color="#c62828", alpha=0.12, lw=0)
            ax.plot([low, high], [y, y], color=colour, lw=2)
            ax.plot(est, y, "o", color=colour, ms=5)
            if paper is not None:
                ax.plot(paper, y, "D", color="#c62828", ms=6, mfc="none", mew=1.6)
        ax.axvline(0, color="#888", lw=0.8, ls="--")
        ax.set_yticks(ys)
        ax.set_yticklabels([p[0] for p in pts], fontsize=8)
        ax.set_title(name, fontsize=10, loc="left")
        ax.tick_params(axis="x", labelsize=8)
    axes[-1, 0].set_xlabel("method − baseline. Dot and bar: ours, pooled, 95% CI\n(green replicated, orange "
                           "reversed, grey not testable here);\nred diamond: the paper's Δ; shaded: a no-difference "
                           "claim's margin",
                           fontsize=9)
    fig.tight_layout()
    blobs = figure_bytes(fig)
    plt.close(fig)
    return blobs["png"]


# ---------------------------------------------------------------- a control's dose-response -------

DOSE_COLUMNS = ("series", "attack", "dose", "claim_id", "baseline_model", "method_model", "baseline_value",
                "method_value", "delta", "ci_low", "ci_high", "p", "verdict")


def dose_points(rows: list[c.Row]) -> list[dict]:
    """Every control line with a dose that ran: its series, attack, dose and pooled Δ [CI]."""
    out = []
    for r in rows:
        e, claim = r.primary, r.claim
        if claim.dose is None or e is None or e.pooled is None or e.pooled.estimate is None:
            continue
        a, b = e.values
        out.append({"series": claim.series, "attack": claim.attack, "dose": claim.dose, "claim_id": claim.id,
                    "baseline_model": claim.baseline, "method_model": claim.method, "baseline_value": a,
                    "method_value": b, "delta": e.pooled.estimate, "ci_low": e.pooled.low, "ci_high": e.pooled.high,
                    "p": e.pooled.p, "verdict": e.verdict.label})
    return sorted(out, key=lambda d: (d["series"], d["attack"], -d["dose"]))


def dose_png(points: list[dict]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from reports.figures import figure_bytes

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for attack in sorted({p["attack"] for p in points}):
        pts = [p for p in points if p["attack"] == attack]
        xs = [1.0] + [p["dose"] for p in pts]  # cosine 1.0: no word merged, the encoder itself (Δ 0)
        ys = [0.0] + [p["delta"] for p in pts]
        line, = ax.plot(xs, ys, "o-", label=attack, ms=5)
        ax.errorbar([p["dose"] for p in pts], [p["delta"] for p in pts],
                    yerr=[[p["delta"] - p["ci_low"] for p in pts], [p["ci_high"] - p["delta"] for p in pts]],
                    fmt="none", color=line.get_color(), capsize=3)
    ax.axhline(0, color="#888", lw=0.8, ls="--")
    ax.invert_xaxis()
    ax.set_xlabel("neighbourhood: words merged at cosine ≥ x (1.0: the encoder itself; smaller x: larger groups)",
                  fontsize=9)
    ax.set_ylabel("attack success rate: wrapped − encoder\n(points, 95% CI)", fontsize=9)
    ax.set_title(f"{points[0]['series']}\n{points[0]['baseline_model']} with and without the wrapper, MR, frozen victims",
                 fontsize=9, loc="left")
    ax.legend(fontsize=8, title="recipe", title_fontsize=8)
    fig.tight_layout()
    return figure_bytes(fig)["png"]


def dose_files(rows: list[c.Row]) -> dict[str, str | bytes]:
    points = dose_points(rows)
    if not points:
        return {}
    return {f"{DOSE}.csv": records_csv(DOSE_COLUMNS, points), f"{DOSE}.png": dose_png(points)}


# ---------------------------------------------------------------- for bench report ----------------

def render(results_dir: Path, path: Path = c.CLAIMS_FILE, paper_values: PaperValues | None = None,
           cache=None, store=None) -> dict[str, str | bytes]:
    """claims.md, claims.html, claims.csv, claims.json and the forest plot for ``bench report``; ``store``: a
    ResultStore open on ``results_dir`` that the report's other pages share (each cell's evidence read once)."""
    book, rows = c.ledger(results_dir, path, paper_values, cache, store)
    models = c.catalog_models(results_dir)
    recs = records(book, rows, models)
    from reports import null_simulation, placebo_battery

    battery = placebo_battery.simulate(results_dir, book, rows, store)
    files: dict[str, str | bytes] = {"claims.md": to_markdown(book, rows, models, battery), "claims.csv": to_csv(recs),
                                     "claims.json": to_json(book, rows, recs, battery),
                                     null_simulation.NAME: null_simulation.to_csv(null_simulation.simulate(rows)),
                                     placebo_battery.NAME: placebo_battery.to_csv(battery)}
    png = forest_png(rows)
    if png is not None:
        files[FOREST] = png
    files.update(dose_files(rows))
    files["claims.html"] = to_html(book, rows, models, forest=png is not None, dose=f"{DOSE}.png" in files,
                                   battery=battery)
    return files

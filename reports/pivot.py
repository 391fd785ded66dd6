"""The leaderboard at a glance: one row per model, one column per headline measure, each with the
interval the paper tables use (a row's own bootstrap or Wilson interval; over attack runs the pooled
bootstrap of Table 3, never a t-interval over two or three run values), grouped by base model.

The index page opens with it; each suite's leaderboard page shows its own columns of it, the raw rows
behind a toggle. Metric names are said in words (``METRIC_WORDS``).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from bench.protocols import protocol
from bench.results.averages import average_of, describe
from bench.scoring.stats import display_decimals, format_number
from reports.site import card_href
from reports.results import EMPTY, Catalog, EvidenceIndex, Stat, mean_of, stat
from reports.tables import _over_runs_interval, _with_interval

STS, TRANSFER = protocol("robustembed-table1"), protocol("senteval-transfer-7")  # the averages shown
RECIPES = protocol("robustembed-table3").recipes
ADVSTS_RECIPES = protocol("robustembed-table4").recipes
PER_RUN = re.compile(r"^run\d+$")
ATTACK_SETTING = {"victim": "frozen", "constraints": "unified"}  # one setting for every model's attack cells

# How a reader says each metric (raw leaderboard rows and the pivot's headers).
METRIC_WORDS = {
    "spearman": "Spearman correlation ×100", "pearson": "Pearson correlation ×100", "acc": "accuracy %",
    "dev_acc": "dev accuracy %", "f1": "F1 ×100", "accuracy": "accuracy %",
    "attack_success_rate": "attack success rate %", "accuracy_reduction": "accuracy drop under attack (points)",
    "accuracy_under_attack": "accuracy under attack %", "original_accuracy": "accuracy before attack %",
    "clean_accuracy": "victim's clean accuracy %", "avg_queries": "model queries per attacked example",
    "examples_per_s": "examples attacked per second", "words_perturbed_pct": "words changed %",
    "mean_abs_error_adversarial": "mean |error| on attacked pairs", "mean_abs_error_clean": "mean |error| on clean pairs",
    "pearson_adversarial": "Pearson ×100 on attacked pairs", "pearson_clean": "Pearson ×100 on clean pairs",
    "spearman_adversarial": "Spearman ×100 on attacked pairs", "spearman_clean": "Spearman ×100 on clean pairs",
    "align": "alignment (lower: closer pairs)", "uniform": "uniformity (lower: more spread)",
    "displacement": "embedding displacement under attack edits", "control_displacement":
        "displacement under control edits", "vs_control": "displacement ÷ control displacement",
    "cos_control": "cosine to a control edit", "cos_perturbed": "cosine to the attack edit",
    "cos_unrelated": "cosine to an unrelated sentence",
}


def metric_words(metric: str) -> str:
    return METRIC_WORDS.get(metric, metric.replace("_", " "))


@dataclass(frozen=True)
class PivotColumn:
    label: str  # the header, in words
    suite: str
    where: dict  # row fields (task, metric, aggregation, attack)
    config: dict = field(default_factory=dict)  # configuration values the rows must have
    runs: bool = False  # the suite writes a row per run: the pooled bootstrap over the runs' examples
    average_over: tuple[dict, ...] = ()  # where-variants averaged into the column (e.g. over recipes)
    better: str = "higher"
    over: tuple[str, ...] = ()  # a column of average rows: the tasks (sorted) an average is over to be ranked


def _attack_columns() -> tuple[PivotColumn, ...]:
    return tuple(PivotColumn(f"{{{recipe}}} success % (MR, frozen victim)", "adversarial",
                             {"task": "mr", "metric": "attack_success_rate", "attack": recipe},
                             config=ATTACK_SETTING, runs=True, better="lower") for recipe in RECIPES)


COLUMNS: tuple[PivotColumn, ...] = (
    PivotColumn("STS avg. (Spearman ×100)", "sts",
                {"task": "avg", "metric": STS.headline_metric, "aggregation": STS.average_aggregation},
                over=tuple(sorted(STS.averaged))),
    PivotColumn(f"Transfer avg. (accuracy %, {len(TRANSFER.averaged)} tasks)", "transfer",
                {"task": "avg", "metric": TRANSFER.headline_metric, "aggregation": TRANSFER.average_aggregation},
                over=tuple(sorted(TRANSFER.averaged))),
    *_attack_columns(),
    PivotColumn("AdvSTS success % (STS-B, mean of recipes)", "advsts",
                {"task": "stsb", "metric": "attack_success_rate"}, better="lower",
                average_over=tuple({"attack": recipe} for recipe in ADVSTS_RECIPES)),
    PivotColumn("Displacement under attack edits (no attack run; MR)", "perturbation",
                {"task": "mr-attacks", "metric": "displacement"}, better="lower"),
)
NOTE = ("One row per model, grouped by the base model it was trained from; click a header to sort. Attack "
        "success on MR with frozen victims and the same (unified) constraints for every recipe; lower is more "
        "robust. Brackets: 95% CI (bootstrap over examples or pairs; over attack runs, a bootstrap of the "
        "pooled attacked examples, run by run, as in Table 3; never a t-interval over a few runs). "
        "–: not measured.")
UNRANKED = " †: an average over other tasks than the column's (named under it), shown but not ranked."


@dataclass
class PivotLine:
    model: str
    group: str
    cells: list[Stat]
    notes: list[str] = field(default_factory=list)  # per cell: "" (ranked), or which tasks its average is over


def rows_of(rows: list[dict], col: PivotColumn) -> list[dict]:
    """The rows of ``col``'s suite under its settings (one model's rows, as ``cell`` takes them)."""
    return [r for r in rows if r["suite"] == col.suite
            and all((r.get("_config") or {}).get(k) == v for k, v in col.config.items())]


def cell(rows: list[dict], col: PivotColumn, evidence: EvidenceIndex | None) -> Stat:
    """One model's value of ``col`` with its interval (over attack runs: the pooled run-by-run bootstrap)."""
    if col.average_over:
        parts = [cell(rows, PivotColumn(col.label, col.suite, {**col.where, **w}, col.config, col.runs), evidence)
                 for w in col.average_over]
        present = [p for p in parts if p.mean is not None]
        return _with_interval(mean_of(present), evidence) if present else EMPTY
    if col.runs:
        runs = [r for r in rows if PER_RUN.match(r.get("aggregation") or "")]
        s = stat(runs, col.where)
        if s.mean is not None:
            return _over_runs_interval(s, evidence, pooled=True)
    main = [r for r in rows if not PER_RUN.match(r.get("aggregation") or "")]
    return stat(main, col.where)


def ranked_cell(rows: list[dict], col: PivotColumn, evidence: EvidenceIndex | None) -> tuple[Stat, str]:
    """The column's cell and "" when its rows are over the column's tasks (or it is no column of averages);
    else the model's average over other tasks, and which tasks, so it is shown marked and never ranked."""
    if not col.over:
        return cell(rows, col, evidence), ""
    same = cell([r for r in rows if average_of(r) in (None, col.over)], col, evidence)
    if same.mean is not None:
        return same, ""
    other = cell(rows, col, evidence)
    return (other, describe(average_of(other.rows[0]))) if other.mean is not None else (EMPTY, "")


def build(rows: list[dict], catalog: Catalog, evidence: EvidenceIndex | None,
          columns: tuple[PivotColumn, ...] = COLUMNS) -> tuple[list[PivotColumn], list[PivotLine]]:
    """The columns that have any value, and one line per model (grouped by base, registry order within)."""
    models = catalog.order({r["model"] for r in rows})
    by_model: dict[str, list[dict]] = {}
    for r in rows:
        by_model.setdefault(r["model"], []).append(r)
    lines = []
    for m in models:
        ranked = [ranked_cell(rows_of(by_model[m], c), c, evidence) for c in columns]
        lines.append(PivotLine(m, catalog.group(m), [s for s, _ in ranked], [note for _, note in ranked]))
    kept = [i for i in range(len(columns)) if any(ln.cells[i].mean is not None for ln in lines)]
    lines = [PivotLine(ln.model, ln.group, [ln.cells[i] for i in kept], [ln.notes[i] for i in kept]) for ln in lines
             if any(ln.cells[i].mean is not None for i in kept)]
    groups = list(dict.fromkeys(ln.group for ln in lines))
    lines.sort(key=lambda ln: groups.index(ln.group))  # stable: registry order within a group
    return [columns[i] for i in kept], lines


def generic_columns(rows: list[dict], catalog: Catalog, limit: int = 8) -> tuple[PivotColumn, ...]:
    """For a suite without pivot columns of its own: each (task, metric, aggregation) it reports, but runs."""
    keys = sorted({(r["suite"], r["task"], r["metric"], r.get("aggregation") or "") for r in rows
                   if not PER_RUN.match(r.get("aggregation") or "") and r.get("value") is not None})
    return tuple(PivotColumn(f"{catalog.task_label(s, t)}: {metric_words(m)}" + (f" ({a})" if a not in ("all", "") else ""),
                             s, {"task": t, "metric": m, "aggregation": a}) for s, t, m, a in keys[:limit])


def column_label(col: PivotColumn, catalog: Catalog) -> str:
    """The column's header in words, its recipe named as the suite labels it."""
    return re.sub(r"\{([\w-]+)\}", lambda m: catalog.label("adversarial", "attack", m.group(1)), col.label)


def stat_text(s: Stat) -> str:
    """'64.59 [63.90, 65.21]' (the interval when there is one), '–' when not measured."""
    if s.mean is None:
        return "–"
    k = display_decimals(s.ci.low, s.ci.high) if s.ci.present else 2
    ci = f" [{format_number(s.ci.low, k)}, {format_number(s.ci.high, k)}]" if s.ci.present else ""
    return f"{format_number(s.mean, k)}{ci}"


def cell_html(s: Stat, note: str = "") -> str:
    """A value with its interval; an average over other tasks (``note``) marked †, named, and not sorted."""
    if s.mean is None:
        return "<td class=\"n\" data-v=\"\">–</td>"
    k = display_decimals(s.ci.low, s.ci.high) if s.ci.present else 2
    ci = (f"<br><small>[{format_number(s.ci.low, k)}, {format_number(s.ci.high, k)}]</small>"
          if s.ci.present else "")
    if note:
        over = html.escape(note)
        return (f"<td class=\"n\" data-v=\"\" title=\"an average over {over}: not ranked\">{format_number(s.mean, k)}†"
                f"{ci}<br><small>{over}</small></td>")
    return f"<td class=\"n\" data-v=\"{s.mean!r}\">{format_number(s.mean, k)}{ci}</td>"


def to_html(columns: list[PivotColumn], lines: list[PivotLine], catalog: Catalog, note: str = NOTE) -> str:
    """A note, then a sortable table: model (fixed when the table scrolls sideways), base, then one column
    per measure."""
    esc = html.escape
    if not lines:
        return ""

    def header(col: PivotColumn) -> str:
        text = column_label(col, catalog)
        arrow = "↓ better" if col.better == "lower" else "↑ better"
        return f"<th title=\"{esc(arrow)}\">{esc(text)}</th>"

    if note and any(n for ln in lines for n in ln.notes):
        note += UNRANKED
    out = [f"<p class=\"note\">{esc(note)}</p>" if note else "",
           "<table class=\"sortable pivot\"><thead><tr><th>model</th><th>base</th>"
           + "".join(header(c) for c in columns) + "</tr></thead><tbody>"]
    previous = None
    for ln in lines:
        first = " class=\"first\"" if ln.group != previous and previous is not None else ""
        previous = ln.group
        short = ln.group.split(" (")[0]  # the base's name; its description on hover
        out.append(f"<tr{first}><td class=\"l\"><a href=\"{esc(card_href(ln.model))}\">{esc(ln.model)}</a></td>"
                   f"<td class=\"base\" title=\"{esc(ln.group)}\">{esc(short)}</td>"
                   + "".join(cell_html(s, note) for s, note in zip(ln.cells, ln.notes or [""] * len(ln.cells)))
                   + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def finding(col: PivotColumn, cells: list[tuple[str, Stat]], catalog: Catalog,
            unranked: tuple[tuple[str, str], ...] = ()) -> str | None:
    """One sentence on a column: the best model and the runner-up, and whether their CIs overlap; the models
    whose average is over other tasks (``unranked``: (model, which tasks)) are named apart, never ranked."""
    apart = {m for m, _ in unranked}
    present = sorted(((m, s) for m, s in cells if s.mean is not None and m not in apart), key=lambda ms: ms[1].mean,
                     reverse=col.better == "higher")
    if len(present) < 2:
        return None
    (best, b), (second, r) = present[0], present[1]
    worst, w = present[-1]
    label = column_label(col, catalog)
    value = stat_text

    overlaps = (b.ci.present and r.ci.present and b.ci.low <= r.ci.high and r.ci.low <= b.ci.high)
    overlap = ("their 95% CIs overlap, so the order of the two is not established" if overlaps else
               "their 95% CIs do not overlap" if b.ci.present and r.ci.present else "without CIs for both")
    word = "lowest" if col.better == "lower" else "highest"
    others = "".join(f"; not ranked: {m} (an average over {note})" for m, note in unranked)
    return (f"{label}: {best} is {word} of {len(present)} models at {value(b)}, then {second} at {value(r)} "
            f"({overlap}); {worst} is last at {value(w)}{others}.")


FINDING_COLUMNS = ("sts", "adversarial", "perturbation")  # a sentence on the first column of each, where present


def findings(columns: list[PivotColumn], lines: list[PivotLine], catalog: Catalog) -> list[str]:
    """Up to three sentences generated from the pivot: STS, the first attack recipe, the displacement."""
    out = []
    for suite in FINDING_COLUMNS:
        i = next((i for i, c in enumerate(columns) if c.suite == suite), None)
        if i is not None:
            unranked = tuple((ln.model, ln.notes[i]) for ln in lines if ln.notes and ln.notes[i])
            sentence = finding(columns[i], [(ln.model, ln.cells[i]) for ln in lines], catalog, unranked)
            if sentence:
                out.append(sentence)
    return out

"""Series figures: a paired difference B − A between two methods' checkpoints, against training steps.

A ``SeriesSpec`` names the two models at each step (``{step}`` in their names) and the panels: paired
differences (``DiffPanel``: one row of one cell both models share, through bench compare's machinery)
and what ``bench divergence`` wrote (``<results>/divergence/<A>__<B>.json``: the weight distance ratio
and the attack outcome agreement). A point that has no data is drawn as missing and listed as such in
the CSV and the table; nothing is filled in. Reads result files only.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

from bench.scoring.stats import display_decimals, format_number, format_p
from bench.results.store import ResultStore
from bench.results.uncertainty import compare_cells, model_cells
from reports.figures import figure_bytes


@dataclass(frozen=True)
class DiffPanel:
    """B − A of one row: suite, task, metric, aggregation, attack, and the cell settings it is read under
    (dotted config keys, e.g. {"victim": "frozen", "constraints": "unified"})."""

    label: str
    suite: str
    task: str
    metric: str
    aggregation: str
    attack: str = ""
    where: dict = field(default_factory=dict)


@dataclass(frozen=True)
class DivergencePanel:
    """A number from ``bench divergence``: ``weights`` (the overall distance ratio) or ``agreement`` (the
    share of examples both victims attacked on which the outcomes agree, pooled over runs, for each recipe)."""

    label: str
    measure: str  # "weights" | "agreement"
    recipes: tuple[str, ...] = ()
    where: dict = field(default_factory=dict)  # over the outcome tables' fields (victim, constraints)


@dataclass(frozen=True)
class SeriesSpec:
    name: str
    title: str
    a: str  # model name with "{step}"
    b: str
    steps: tuple[int, ...]
    panels: tuple = ()

    @property
    def suites(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.suite for p in self.panels if isinstance(p, DiffPanel)))

    def models(self, step: int) -> tuple[str, str]:
        return self.a.format(step=step), self.b.format(step=step)


@dataclass
class SeriesPoint:
    panel: str
    series: str  # a line within the panel ("" for the panel's only line; the recipe for agreement)
    step: int
    value: float | None = None
    low: float | None = None
    high: float | None = None
    p: float | None = None
    n: int | None = None
    note: str = ""


def _config_value(config: dict, dotted: str):
    value = config
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def diff_point(store: ResultStore, spec: SeriesSpec, panel: DiffPanel, step: int) -> SeriesPoint:
    a, b = spec.models(step)
    point = SeriesPoint(panel.label, "", step)
    cells_a, cells_b = model_cells(store, a, panel.suite, panel.task), model_cells(store, b, panel.suite, panel.task)
    shared = sorted((k for k in set(cells_a) & set(cells_b)
                     if all(_config_value(store.read(cells_a[k]).get("config", {}), key) == want
                            for key, want in panel.where.items())), key=lambda k: tuple(map(str, k)))
    if not shared:
        point.note = f"missing: no {panel.suite}/{panel.task} cell for both {a} and {b}" + (
            f" ({', '.join(f'{k}={v}' for k, v in panel.where.items())})" if panel.where else "")
        return point
    wanted = {"metric": panel.metric, "aggregation": panel.aggregation, "attack": panel.attack}

    def include(key: dict) -> bool:
        return all((key.get(k) or "") == v for k, v in wanted.items())

    found = [d for k in shared for d in compare_cells(store, cells_a[k], cells_b[k], include)]
    diff = next((d for d in found if d.diff is not None and d.diff.estimate is not None), None)
    if diff is None:
        point.note = "missing: " + (found[0].note if found else f"no {panel.metric} row in the shared cell")
        return point
    d = diff.diff
    point.value, point.low, point.high, point.p, point.n = d.estimate, d.low, d.high, d.p, d.n
    if len(shared) > 1:
        point.note = f"{len(shared)} shared cells; the first (seed {diff.seed}) is shown"
    return point


def divergence_points(results: Path, spec: SeriesSpec, panel: DivergencePanel, step: int) -> list[SeriesPoint]:
    a, b = spec.models(step)
    path = Path(results) / "divergence" / f"{a}__{b}.json"
    lines = panel.recipes if panel.measure == "agreement" else ("",)
    if not path.exists():
        return [SeriesPoint(panel.label, s, step, note=f"missing: run `bench divergence {a} {b}`") for s in lines]
    report = json.loads(path.read_text(encoding="utf-8"))
    if panel.measure == "weights":
        overall = (report.get("weights") or {}).get("overall")
        if not overall or overall.get("ratio") is None:
            return [SeriesPoint(panel.label, "", step, note="missing: weights not measured")]
        return [SeriesPoint(panel.label, "", step, value=overall["ratio"], n=overall.get("tensors"))]
    out = []
    for recipe in panel.recipes:
        tables = [t for t in report.get("outcomes", []) if t.get("recipe") == recipe
                  and all(t.get(k) == v for k, v in panel.where.items())]
        n = sum(t["attacked_by_both"] for t in tables)
        agree = sum(t["both_succeed"] + t["both_fail"] for t in tables)
        out.append(SeriesPoint(panel.label, recipe, step, value=agree / n if n else None, n=n or None,
                               note="" if n else "missing: no attack logs of this setting for both"))
    return out


def series_points(results: Path, spec: SeriesSpec) -> list[SeriesPoint]:
    store = ResultStore(results)
    out = []
    for panel in spec.panels:
        for step in spec.steps:
            if isinstance(panel, DiffPanel):
                out.append(diff_point(store, spec, panel, step))
            else:
                out += divergence_points(results, spec, panel, step)
    return out


# ---------------------------------------------------------------- output -------------------------

def to_csv(points: list[SeriesPoint]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["panel", "series", "step", "value", "ci_low", "ci_high", "p", "n", "note"])

    def num(v):
        return "" if v is None else repr(round(v, 6))

    for p in points:
        writer.writerow([p.panel, p.series, p.step, num(p.value), num(p.low), num(p.high), num(p.p),
                         "" if p.n is None else p.n, p.note])
    return buf.getvalue()


def to_markdown(spec: SeriesSpec, points: list[SeriesPoint]) -> str:
    lines = [f"# {spec.title}", "", f"B = {spec.b}, A = {spec.a}. Paired differences B − A with 95% CIs (bench "
             "compare's machinery); the weight distance ratio ‖θ_B − θ_A‖ / ‖θ_A − θ_0‖ and the share of attacked "
             "examples on which both victims' outcomes agree, from `bench divergence`. Generated by `bench report`; "
             "do not edit.", "", "| measure | step | value | 95% CI | p | n | note |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for p in points:
        k = display_decimals(p.low, p.high, minimum=3)
        ci = f"[{format_number(p.low, k, True)}, {format_number(p.high, k, True)}]" if p.low is not None else "–"
        label = f"{p.panel} ({p.series})" if p.series else p.panel
        lines.append(f"| {label} | {p.step} | {format_number(p.value, k)} | {ci} | "
                     f"{format_p(p.p) if p.p is not None else '–'} | {'' if p.n is None else p.n} | {p.note} |")
    return "\n".join(lines) + "\n"


def render(spec: SeriesSpec, points: list[SeriesPoint]) -> dict[str, bytes]:
    """One small panel per measure against the step; missing points are marked 'no data' at their step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    panels = list(dict.fromkeys(p.panel for p in points))
    cols = 3
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.0 * cols, 3.0 * rows), squeeze=False)
    for ax, panel in zip(axes.ravel(), panels):
        mine = [p for p in points if p.panel == panel]
        is_diff = any(p.low is not None for p in mine) or not any(p.series for p in mine)
        for i, series in enumerate(dict.fromkeys(p.series for p in mine)):
            line = [p for p in mine if p.series == series and p.value is not None]
            colour = plt.get_cmap("tab10")(i)
            ax.plot([p.step for p in line], [p.value for p in line], "o-", color=colour, label=series or None, ms=4)
            with_ci = [p for p in line if p.low is not None and p.high is not None]
            if with_ci:
                ax.errorbar([p.step for p in with_ci], [p.value for p in with_ci], capsize=3, fmt="none", ecolor=colour,
                            yerr=[[p.value - p.low for p in with_ci], [p.high - p.value for p in with_ci]])
        for p in mine:
            if p.value is None:
                ax.annotate("no data", (p.step, 0.5), xycoords=("data", "axes fraction"), ha="center", fontsize=7,
                            color="0.5", rotation=90)
        if is_diff and any(p.low is not None for p in mine):
            ax.axhline(0.0, color="0.5", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks(list(spec.steps))
        ax.set_xticklabels([str(s) for s in spec.steps])
        ax.set_xlim(min(spec.steps) / 1.4, max(spec.steps) * 1.4)
        ax.set_title(panel, fontsize=9)
        ax.set_xlabel("training steps", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
        if any(p.series for p in mine):
            ax.legend(fontsize=7)
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    fig.suptitle(spec.title, fontsize=10)
    fig.tight_layout()
    return figure_bytes(fig)


def generate(results: Path, spec: SeriesSpec) -> dict[str, str | bytes] | None:
    """{name.png, .pdf, .csv, .md}, or None when no point of the series has data yet."""
    points = series_points(results, spec)
    if all(p.value is None for p in points):
        return None
    return {f"{spec.name}.csv": to_csv(points), f"{spec.name}.md": to_markdown(spec, points),
            **{f"{spec.name}.{k}": v for k, v in render(spec, points).items()}}


def card_lines(results: Path, spec: SeriesSpec, model: str) -> tuple[str, list[list[str]]] | None:
    """For a model in the series: a sentence and the rows of its step (the card's series section)."""
    step = next((s for s in spec.steps if model in spec.models(s)), None)
    if step is None:
        return None
    a, b = spec.models(step)
    rows = []
    for p in series_points(results, SeriesSpec(spec.name, spec.title, spec.a, spec.b, (step,), spec.panels)):
        k = display_decimals(p.low, p.high, minimum=3)
        ci = f"[{format_number(p.low, k, True)}, {format_number(p.high, k, True)}]" if p.low is not None else "–"
        rows.append([f"{p.panel} ({p.series})" if p.series else p.panel, format_number(p.value, k), ci,
                     format_p(p.p) if p.p is not None else "–", p.note])
    text = (f"Step {step} of the series '{spec.title}': {b} − {a} (figure: {spec.name}.png, all steps: "
            f"{spec.name}.md).")
    return text, rows

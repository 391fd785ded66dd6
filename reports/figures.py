"""Scatter figures from result rows: one renderer, one FigureSpec per figure, PNG + PDF + the plotted data as CSV.

A point is one ``point`` key (e.g. model × attack); its coordinates are the spec's measures, each the
mean over the tasks (datasets) that every point sharing its ``connect`` key has, so the points a line
joins are measured on the same tasks. The data CSV is what `bench report --check` compares: images
depend on the matplotlib build, the plotted numbers do not.
"""

from __future__ import annotations

import io
import json
import textwrap
import statistics
from dataclasses import dataclass, field

from bench.results.store import records_csv
from reports.paper import PaperRef, PaperValues
from reports.results import EMPTY_CATALOG, Catalog, matches, resource_pairs, stat

# How a measure combines its metrics' values, by name.
COMBINE = {"first": lambda values: values[0], "difference": lambda values: values[0] - values[1]}


@dataclass(frozen=True)
class Measure:
    label: str
    metrics: tuple[str, ...]
    combine: str = "first"


@dataclass(frozen=True)
class FigureSpec:
    name: str
    title: str
    suite: str
    point: tuple[str, ...]  # row fields naming a point; "model" first
    x: Measure
    y: Measure
    connect: str | None = None  # a row field: points sharing it are joined by a line
    where: dict = field(default_factory=dict)  # further row filters, e.g. the aggregation plotted
    paper: PaperRef | None = None

    @property
    def suites(self) -> tuple[str, ...]:
        return (self.suite,)


@dataclass
class Point:
    key: dict
    tasks: tuple[str, ...]
    x: float
    y: float
    paper_x: float | None = None
    paper_y: float | None = None
    group: str = ""  # the base model the point's model starts from (a panel per base when crowded)
    method: str = ""  # the training method ("" for a pretrained model)


CROWDED = 6  # more models than this in one figure: no name beside each point, the legend outside the axes


def figure_bytes(fig) -> dict[str, bytes]:
    """{"png": ..., "pdf": ...} of a matplotlib figure, without the dates and versions that would make
    two renders of the same data differ; closes the figure."""
    import matplotlib.pyplot as plt

    out = {}
    for fmt, metadata in (("png", {"Software": None}), ("pdf", {"CreationDate": None, "Producer": None, "Creator": None})):
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=150, metadata=metadata)
        out[fmt] = buf.getvalue()
    plt.close(fig)
    return out


def _measure(rows, where: dict, measure: Measure) -> float | None:
    values = [stat(rows, {**where, "metric": m}).mean for m in measure.metrics]
    return None if any(v is None for v in values) else COMBINE[measure.combine](values)


def points(spec: FigureSpec, rows: list[dict], paper: PaperValues, catalog: Catalog = EMPTY_CATALOG) -> list[Point]:
    mine = [r for r in rows if matches(r, {"suite": spec.suite, **spec.where})]
    order = catalog.order({r["model"] for r in mine})
    by_point: dict[tuple, list[dict]] = {}  # the rows of each point and task, so a measure scans only those
    for r in mine:  # keyed as ``matches`` compares: None as "", the rest as text
        key = tuple("" if r.get(f) is None else str(r.get(f)) for f in (*spec.point, "task"))
        by_point.setdefault(key, []).append(r)

    def measure(where: dict, task, m: Measure) -> float | None:
        return _measure(by_point.get((*map(str, where.values()), str(task)), []), {**where, "task": task}, m)

    keys = sorted({tuple(r.get(f) or "" for f in spec.point) for r in mine}, key=lambda k: (order.index(k[0]), k[1:]))
    tasks_of = {}
    for key in keys:
        where = dict(zip(spec.point, key))
        tasks_of[key] = {t for t in {r["task"] for r in mine}
                         if measure(where, t, spec.x) is not None and measure(where, t, spec.y) is not None}
    out = []
    for key in keys:
        where = dict(zip(spec.point, key))
        mates = [k for k in keys if spec.connect is None or dict(zip(spec.point, k))[spec.connect] == where[spec.connect]]
        common = sorted(set.intersection(*(tasks_of[k] for k in mates))) if spec.connect else sorted(tasks_of[key])
        if not common:
            continue
        x = statistics.fmean(measure(where, t, spec.x) for t in common)
        y = statistics.fmean(measure(where, t, spec.y) for t in common)
        point = Point(where, tuple(common), x, y, group=catalog.group(where["model"]),
                      method=catalog.method(where["model"]))
        if spec.paper and len(common) == 1 and len(spec.x.metrics) == len(spec.y.metrics) == 1:
            attack = where.get("attack", "")
            point.paper_x = paper.get(spec.paper, where["model"], spec.suite, common[0], spec.x.metrics[0], attack)
            point.paper_y = paper.get(spec.paper, where["model"], spec.suite, common[0], spec.y.metrics[0], attack)
        out.append(point)
    return out


def settings(spec: FigureSpec, rows: list[dict], pts: list[Point]) -> str:
    """Profile, limit and attack resources of the rows behind the points, for the caption."""
    metrics = set(spec.x.metrics) | set(spec.y.metrics)
    used = [r for p in pts for r in rows if r["suite"] == spec.suite and r["metric"] in metrics
            and r["task"] in p.tasks and matches(r, {**p.key, **spec.where})]
    parts = []
    for key in ("profile", "limit"):
        values = sorted({json.dumps(r["_config"].get(key), default=str).strip('"') for r in used})
        parts.append(f"{key}: " + ", ".join("none" if v == "null" else v for v in values))
    pairs = sorted(resource_pairs(used, "served"))
    if pairs:
        parts.append("resources: " + ", ".join(pairs))
    return "; ".join(parts)


def to_csv(spec: FigureSpec, pts: list[Point], caption: str) -> str:
    """The figure's points, numbers to 6 places; text fields spreadsheet-safe."""
    fields = [*spec.point, "tasks", "x", "y", "paper_x", "paper_y", "settings"]
    return records_csv(fields, ({**p.key, "tasks": " ".join(p.tasks), "x": p.x, "y": p.y, "paper_x": p.paper_x,
                                 "paper_y": p.paper_y, "settings": caption} for p in pts), digits=6)


def render(spec: FigureSpec, pts: list[Point], caption: str = "") -> dict[str, bytes]:
    """{"png": ..., "pdf": ...}; byte-identical across runs for a given matplotlib build."""
    return figure_bytes(draw(spec, pts, caption))


# Crowded figures: one panel per base model, the method pair under test in colour and every other model grey.
HIGHLIGHT = {"robustembed": ("RobustEmbed", "tab:red"), "simcse": ("SimCSE", "tab:blue")}


def draw(spec: FigureSpec, pts: list[Point], caption: str = ""):
    """The matplotlib figure of ``render``: few models, one axes naming each; many, a panel per base."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(p.key["model"] for p in pts))
    crowded = len(models) > CROWDED
    groups = list(dict.fromkeys(p.group for p in pts)) if crowded else [None]
    fig, axes = plt.subplots(1, len(groups), figsize=(6.4 if not crowded else 5.2 * len(groups) + 1.0, 4.8),
                             squeeze=False)
    for ax, group in zip(axes[0], groups):
        mine = [p for p in pts if group is None or p.group == group]
        if crowded:
            _highlighted_panel(ax, spec, mine)
            ax.set_title(f"from {group.split(' (')[0]}", fontsize=9)
        else:
            _named_panel(ax, spec, mine)
        ax.set_xlabel(spec.x.label)
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel(spec.y.label)
    tasks = sorted({t for p in pts for t in p.tasks})
    fig.suptitle(f"{spec.title}\n(mean over tasks: {', '.join(tasks)})", fontsize=9, y=0.99)
    if crowded:  # one legend for every panel, under the title
        named = {}
        for ax in axes[0]:
            for handle, label in zip(*ax.get_legend_handles_labels()):
                named.setdefault(label, handle)
        fig.legend(list(named.values()), list(named), fontsize=8, loc="upper center", bbox_to_anchor=(0.5, 0.915),
                   ncol=len(named), frameon=False)
    fig.text(0.01, 0.005, textwrap.fill(caption, 130), fontsize=6, color="0.3", va="bottom")
    fig.tight_layout(rect=(0, 0.04 * (1 + len(caption) // 130), 1, 0.89 if crowded else 1))
    return fig


def _connect(ax, spec: FigureSpec, pts: list[Point]) -> None:
    if not spec.connect:
        return
    for group in dict.fromkeys(p.key[spec.connect] for p in pts):
        mates = [p for p in pts if p.key[spec.connect] == group]
        ax.plot([p.x for p in mates], [p.y for p in mates], "-", color="0.85", lw=0.8, zorder=1)
        last = mates[-1]
        ax.annotate(group, (last.x, last.y), textcoords="offset points", xytext=(6, 4), fontsize=8, color="0.3")


def _highlighted_panel(ax, spec: FigureSpec, pts: list[Point]) -> None:
    """The method pair in colour (paper values as hollow markers), the base black, the others grey."""
    _connect(ax, spec, pts)
    seen = set()
    for p in pts:
        name, colour = HIGHLIGHT.get(p.method, ("other methods", "0.7") if p.method else ("base model", "black"))
        ax.scatter([p.x], [p.y], color=colour, s=36 if p.method in HIGHLIGHT or not p.method else 18,
                   zorder=3 if p.method in HIGHLIGHT else 2, label=None if name in seen else name)
        seen.add(name)
        if p.method in HIGHLIGHT and p.paper_x is not None and p.paper_y is not None:
            ax.scatter([p.paper_x], [p.paper_y], facecolors="none", edgecolors=[colour], s=60, zorder=2,
                       label=None if "paper" in seen else f"paper value ({spec.paper})")
            seen.add("paper")


def _named_panel(ax, spec: FigureSpec, pts: list[Point]) -> None:
    """Few models: each its own colour and marker, named beside its points (or by the legend)."""
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(p.key["model"] for p in pts))
    colours = {m: plt.get_cmap("tab10")(i % 10) for i, m in enumerate(models)}
    markers = "osD^vP*Xh<>"
    _connect(ax, spec, pts)
    for i, model in enumerate(models):
        mine = [p for p in pts if p.key["model"] == model]
        ax.scatter([p.x for p in mine], [p.y for p in mine], color=colours[model], marker=markers[i % len(markers)],
                   s=40, label=model, zorder=3)
        for p in mine:
            if not spec.connect:
                ax.annotate(model, (p.x, p.y), textcoords="offset points", xytext=(6, 4), fontsize=8)
            if p.paper_x is not None and p.paper_y is not None:
                ax.scatter([p.paper_x], [p.paper_y], facecolors="none", edgecolors=[colours[model]],
                           marker=markers[i % len(markers)], s=60, zorder=2)
                ax.plot([p.x, p.paper_x], [p.y, p.paper_y], ":", color=colours[model], lw=1, zorder=1)
    if any(p.paper_x is not None for p in pts):
        ax.scatter([], [], facecolors="none", edgecolors="0.3", label=f"paper value ({spec.paper})")
    ax.legend(fontsize=8, loc="best")

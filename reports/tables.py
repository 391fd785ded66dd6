"""One table renderer for every table: a TableSpec says what to show, ``build`` fills it from result rows,
and one formatter per output format (md, tex, csv, html) writes it.

Rules every table follows:
- a cell is ours (mean ± sample std over seeds, with n when more than one seed ran) and its 95% CI in
  parentheses, with the paper's value and the difference (ours − paper) beside it wherever the row's
  model matches a paper row;
- a missing cell is "–"; an average over fewer cells than it names is marked "†" and never bold;
- bold is the best per column within a backbone group (and within a block, e.g. one attack), when
  the group has two or more results there and a paired test on the stored per-example evidence
  (bench/scoring/stats.py: the 95% CI of best − runner-up excludes 0, and p < 0.05) says it is better; a best value the
  test cannot separate from the runner-up is marked "n.s."; without stored evidence, neither;
- tables with ``paper_rows`` also list the paper's own rows as reference lines ("paper · <row>");
- each backbone group's header appears once (blocks, e.g. attacks, are a column within it), except in a
  ``block_major`` table, ordered block by block with the paper's rows closing each block;
- a cell whose run used a stand-in (``standin``: a substitute victim, say) is marked "§";
- a sentence under the table states the settings the rows were produced with.
"""

from __future__ import annotations

import fnmatch
import html
import json
from dataclasses import dataclass, field, replace

from bench.scoring.stats import NO_INTERVAL, Evidence, Interval, format_number
from bench.results.store import records_csv
from bench.results.uncertainty import UNVERIFIED
from reports.paper import PaperRef, PaperValues, reference_rows
from reports.site import page
from reports.paper import by_label as paper_by_label
from reports.results import (EMPTY, EMPTY_CATALOG, Catalog, EvidenceIndex, Stat, common_setting, matches, mean_of,
                             resource_pairs, setting_key, stat, unverified_files)

MISSING = "–"
PARTIAL = "†"
STANDIN = "§"  # the cell's run used a stand-in the spec's ``standin`` key names (e.g. a substitute victim)
PARAGRAPH = "\n\n"  # between the caption's paragraphs (settings, how to read a cell, marks)
SETTING = ";\n"  # between the settings the first paragraph lists (a list in HTML)
NOT_SIGNIFICANT = "n.s."
PAPER_GROUP = "paper"  # group of the paper's reference rows


@dataclass(frozen=True)
class Column:
    """``label`` may hold "{task}", filled with the task's label from the exported metadata (the default)."""

    where: dict  # row fields this column selects, e.g. {"task": "stsb"} or {"task": "r1", "split": "dev"}
    label: str = "{task}"
    paper_task: str | None = None  # the paper's task key, when it differs from where["task"]


@dataclass(frozen=True)
class Average:
    label: str
    of: tuple[str, ...]  # tasks of the columns averaged (where["task"])
    paper_task: str | None = None  # the paper's row key for this average ("avg"), if the paper prints it


@dataclass(frozen=True)
class Block:
    """A horizontal band of the table, e.g. one attack recipe in RobustEmbed Table 3. An empty label is
    the exported label of the attack it selects."""

    where: dict
    label: str = ""


@dataclass(frozen=True)
class Summary:
    """A column taken from another table's cell: that table's ``column`` for the same model."""

    label: str  # may hold "{block}": the block's label
    table: str
    column: str
    better: str
    block: str = ""  # the other table's block, by its attack name
    paper_key: tuple = ()  # (suite, task, metric, attack) of the paper's number


@dataclass(frozen=True)
class TableSpec:
    name: str  # output file stem
    title: str
    suite: str
    metric: str
    unit: str  # what the numbers are, for the settings sentence
    columns: tuple[Column, ...] = ()
    averages: tuple[Average, ...] = ()
    aggregation: str | None = None
    better: str = "higher"  # or "lower" (ASR, alignment, uniformity)
    blocks: tuple[Block, ...] = ()
    paper: PaperRef | None = None
    prefer: dict = field(default_factory=dict)  # config key -> preferred values, best first
    settings: tuple[str, ...] = ("profile", "limit")  # config keys the settings sentence reports
    decimals: int = 2
    summaries: tuple[Summary, ...] = ()  # for tables made of other tables' cells (ablations)
    method: str | None = None  # only models trained with this method (ablations)
    show_recipe: bool = False
    runs: str | None = None  # aggregation prefix of per-run rows (run0, run1, ...): cells average those
    resources_key: str | None = None  # key of the role -> resource map inside a row's resources JSON
    paper_rows: bool = False  # list the paper's own rows (its backbones) as reference lines
    config: dict = field(default_factory=dict)  # only cells run under these settings (e.g. one victim mode)
    standin: str = ""  # config key that names a stand-in a cell's run used (marked STANDIN in the cell)
    block_major: bool = False  # order block by block (each closed by the paper's rows), not group by group
    # (model glob, where those models are shown instead): kept out of this table, named under it
    elsewhere: tuple[tuple[str, str], ...] = ()

    @property
    def suites(self) -> tuple[str, ...]:
        return (self.suite,) if self.suite else ()


@dataclass
class Cell:
    stat: Stat
    paper: float | None = None
    partial: bool = False  # an average over fewer cells than it names
    bold: bool = False  # best in its group and column, significantly (paired test) better than the runner-up
    mark: str = ""  # NOT_SIGNIFICANT: best, but not separable from the runner-up
    reference: bool = False  # the paper's own number on a reference line (no result of ours)
    standin: str = ""  # the stand-in(s) its runs used (TableSpec.standin), e.g. "snli-dev"

    @property
    def unverified(self) -> bool:
        return bool(unverified_files(self.stat.rows))

    @property
    def delta(self) -> float | None:
        """ours − paper; none for a marked average, which is not over the paper's cells."""
        if self.stat.mean is None or self.paper is None or self.partial:
            return None
        return self.stat.mean - self.paper


@dataclass
class Line:
    block: str
    group: str
    model: str
    recipe: str
    cells: list[Cell]
    reference: bool = False  # a paper row shown for reference


@dataclass
class Table:
    spec: TableSpec
    headers: list[str]
    better: list[str]  # per header
    lines: list[Line]
    settings: str

    @property
    def empty(self) -> bool:
        return not self.lines


# ---------------------------------------------------------------- building ----------------------

def _by_model(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["model"], []).append(r)
    return out


def _cell_stat(spec: TableSpec, rows: list[dict], runs: list[dict], where: dict, setting: str | None = None) -> Stat:
    """Per-run rows when the suite wrote them (mean ± std over runs and seeds), else the main rows; only
    those of ``setting`` when given (the column's common setting), counting the others as passed over."""
    if setting is not None:
        others = {setting_key(r) for r in rows + runs if matches(r, where)} - {setting}
        s = _cell_stat(spec, [r for r in rows if setting_key(r) == setting],
                       [r for r in runs if setting_key(r) == setting], where)
        return replace(s, passed_over=len(others))
    s = stat(runs, where, spec.prefer) if runs else EMPTY
    return s if s.mean is not None else stat(rows, where, spec.prefer)


def labelled(spec: TableSpec, catalog: Catalog) -> TableSpec:
    """The spec with its labels filled from the exported metadata: column and block labels, averages
    and summaries pointing at those labels."""
    from dataclasses import replace

    def attack(suite, name):
        return catalog.label(suite, "attack", name)

    columns = tuple(replace(c, label=c.label.format(task=catalog.task_label(spec.suite, c.where.get("task", ""))))
                    for c in spec.columns)
    by_task = {c.where["task"]: c.label for c in columns if set(c.where) == {"task"}}
    averages = tuple(replace(a, of=tuple(by_task.get(t, t) for t in a.of)) for a in spec.averages)
    blocks = tuple(replace(b, label=b.label or attack(spec.suite, b.where.get("attack", ""))) for b in spec.blocks)
    return replace(spec, columns=columns, averages=averages, blocks=blocks)  # summaries: from the built tables


def build(spec: TableSpec, rows: list[dict], paper: PaperValues, built: dict[str, Table] | None = None,
          catalog: Catalog = EMPTY_CATALOG, evidence: EvidenceIndex | None = None) -> Table:
    """The filled table (``spec`` labelled, see ``labelled``). ``built`` holds already-built tables that
    Summary columns read from; ``catalog`` the exported model facts (groups, methods, recipes, order);
    ``evidence`` the cells' stored per-example evidence (intervals of averages, significance)."""
    if spec.summaries:
        return _build_summary(spec, paper, built or {}, catalog, evidence)
    ours = [r for r in rows if (r["suite"], r["metric"]) == (spec.suite, spec.metric)
            and all(r["_config"].get(k, v) == v for k, v in spec.config.items())]  # unrecorded: any
    mine = [r for r in ours if spec.aggregation is None or r["aggregation"] == spec.aggregation]
    runs = [r for r in ours if spec.runs and (r["aggregation"] or "").startswith(spec.runs)]
    mine_of, runs_of = _by_model(mine), _by_model(runs)
    models = catalog.order({r["model"] for r in mine if spec.method is None or catalog.method(r["model"]) == spec.method})
    models, moved = _shown_elsewhere(spec, models)
    headers = [c.label for c in spec.columns] + [a.label for a in spec.averages]
    setting = {(block.label, col.label): common_setting([mine_of.get(m, []) for m in models], {**block.where, **col.where},
                                                        spec.prefer)
               for block in spec.blocks or (Block({}),) for col in spec.columns}
    lines = []
    for block in spec.blocks or (Block({}),):
        for model in models:
            cells = [_column_cell(spec, block, col, model, mine_of, runs_of, setting, paper, evidence)
                     for col in spec.columns]
            cells += _average_cells(spec, block, model, dict(zip((c.label for c in spec.columns), cells)), paper,
                                    evidence)
            lines.append(Line(block.label, catalog.group(model), model, catalog.recipe(model), cells))
    # A block (e.g. an attack) nobody ran is left out whole, and named in the settings sentence.
    ran = {ln.block for ln in lines if any(c.stat.mean is not None for c in ln.cells)}
    absent = [b.label for b in spec.blocks if b.label not in ran]
    lines = [ln for ln in lines if ln.block in ran]
    if spec.paper_rows and lines:
        lines += _paper_lines(spec, paper, [b for b in spec.blocks if b.label in ran] or [Block({})])
    lines = _grouped(lines, spec.block_major)
    better = [spec.better] * len(headers)
    _mark_best(lines, better, spec.decimals, evidence)
    return Table(spec, headers, better, lines,
                 settings_sentence(spec, lines, [c.label for c in spec.columns], absent, moved))


def _column_cell(spec: TableSpec, block: Block, col, model: str, mine_of: dict, runs_of: dict, setting: dict,
                 paper: PaperValues, evidence: EvidenceIndex | None) -> Cell:
    """One model's cell in one column of one block, beside the paper's value."""
    where = {**block.where, **col.where}
    s = _over_runs_interval(_cell_stat(spec, mine_of.get(model, []), runs_of.get(model, []), where,
                                       setting[block.label, col.label]), evidence, pooled=bool(spec.runs))
    value = paper.get(spec.paper, model, spec.suite, col.paper_task or col.where.get("task", ""),
                      spec.metric, block.where.get("attack", ""), col.where.get("split"))
    return Cell(s, value, standin=standins_of(s.rows, spec.standin))


def _average_cells(spec: TableSpec, block: Block, model: str, by_label: dict[str, Cell], paper: PaperValues,
                   evidence: EvidenceIndex | None) -> list[Cell]:
    """The table's average columns for one model, each the mean of its columns' cells."""
    cells = []
    for average in spec.averages:
        parts = [by_label[label].stat for label in average.of]
        value = (paper.get(spec.paper, model, spec.suite, average.paper_task, spec.metric,
                           block.where.get("attack", "")) if average.paper_task else None)
        stat = mean_of(parts)
        if spec.runs:  # never a t-interval over a handful of runs: the runs' pooled evidence, or none
            stat = replace(stat, ci=NO_INTERVAL)
        cells.append(Cell(_with_interval(stat, evidence, pooled=bool(spec.runs)), value,
                          partial=0 < sum(p.mean is not None for p in parts) < len(parts)))
    return cells


def _shown_elsewhere(spec: TableSpec, models: list[str]) -> tuple[list[str], list[str]]:
    """The models this table shows, and a sentence per page named in ``spec.elsewhere`` that takes some."""
    kept, moved = [], {}
    for model in models:
        where = next((w for pattern, w in spec.elsewhere if fnmatch.fnmatchcase(model, pattern)), None)
        if where is None:
            kept.append(model)
        else:
            moved.setdefault(where, []).append(model)
    return kept, [f"{', '.join(out)}: shown in {where}, not here" for where, out in moved.items()]


def standins_of(rows, key: str) -> str:
    """The stand-ins (values of config ``key``) the rows' runs used, joined; "" for none or no key."""
    if not key:
        return ""
    return ", ".join(sorted({str(r["_config"][key]) for r in rows if r["_config"].get(key)}))


def _over_runs_interval(s: Stat, evidence: EvidenceIndex | None, pooled: bool = False) -> Stat:
    """Several runs or seeds: the kernel's interval over them from the stored evidence (a t-interval cut
    to a rate's 0-100, as the rows' own), where the evidence is stored; else the plain t-interval.

    ``pooled`` (replications that are attack samples on fixed victims): a bootstrap of the mean over
    runs with each run's attacked examples resampled within that run, over all the examples the runs
    attacked, never a t-interval over two or three run values (with 1 degree of freedom it spans
    0-100); without stored evidence, no interval."""
    if s.seeds < 2:
        return s
    ev = evidence.of_stat(s) if evidence is not None else None
    if not pooled:
        return replace(s, ci=evidence.cache.interval(ev)) if ev is not None else s
    if ev is None or not ev.parts:
        return replace(s, ci=NO_INTERVAL)
    iv = evidence.cache.interval(_runs_as_strata(Evidence(parts=ev.parts, combine="runs")))
    return replace(s, ci=Interval(iv.low, iv.high, iv.method.replace("by-part", "by-run")) if iv.present else iv)


def _runs_as_strata(ev: Evidence) -> Evidence:
    """The evidence with every mean over runs resampled run by run on independent draws (``strata``)."""
    if not ev.combine:
        return ev
    combine = "strata" if ev.combine == "runs" else ev.combine
    return Evidence(parts=[_runs_as_strata(p) for p in ev.parts], combine=combine, label=ev.label)


def _with_interval(s: Stat, evidence: EvidenceIndex | None, pooled: bool = False) -> Stat:
    """An average of single-seed cells gets the bootstrap interval of the average of the cells' own
    resamples (their stored evidence); with several seeds mean_of already gave a t-interval over seeds.
    ``pooled``: cells over runs are resampled run by run, as in ``_over_runs_interval``."""
    if s.mean is None or s.ci.present or evidence is None or not s.parts:
        return s
    ev = evidence.of_stat(s)
    if ev is None:
        return s
    return replace(s, ci=evidence.cache.interval(_runs_as_strata(ev) if pooled else ev))


def _paper_lines(spec: TableSpec, paper: PaperValues, blocks: list[Block]) -> list[Line]:
    """The paper's own rows, one reference line per (block, paper row), under the group 'paper'."""
    out = []
    for block in blocks:
        attack = block.where.get("attack", "")
        for label in reference_rows(paper, spec.paper):
            cells = [Cell(EMPTY, paper_by_label(paper, spec.paper, label, spec.suite, col.paper_task or col.where.get("task", ""),
                                                spec.metric, attack, col.where.get("split")), reference=True)
                     for col in spec.columns]
            cells += [Cell(EMPTY, paper_by_label(paper, spec.paper, label, spec.suite, avg.paper_task, spec.metric, attack)
                           if avg.paper_task else None, reference=True) for avg in spec.averages]
            if any(c.paper is not None for c in cells):
                out.append(Line(block.label, f"{PAPER_GROUP} ({spec.paper}, its backbones)", f"paper · {label}", "",
                                cells, reference=True))
    return out


def _build_summary(spec: TableSpec, paper: PaperValues, built: dict[str, Table], catalog: Catalog,
                   evidence: EvidenceIndex | None = None) -> Table:
    models: list[str] = []
    for s in spec.summaries:
        table = built.get(s.table)
        if table is not None:
            models += [ln.model for ln in table.lines if not ln.reference
                       and (spec.method is None or catalog.method(ln.model) == spec.method)]
    models, moved = _shown_elsewhere(spec, catalog.order(set(models)))

    def block_label(s: Summary) -> str:  # the referenced table's label for the block's attack
        table = built.get(s.table)
        blocks = table.spec.blocks if table is not None else ()
        return next((b.label for b in blocks if b.where.get("attack") == s.block), s.block) if s.block else ""

    lines = []
    for model in models:
        cells = []
        for s in spec.summaries:
            cell = Cell(EMPTY)
            table = built.get(s.table)
            if table is not None:
                idx = table.headers.index(s.column)
                for ln in table.lines:
                    if ln.model == model and ln.block == block_label(s) and not ln.reference:
                        cell = Cell(ln.cells[idx].stat, partial=ln.cells[idx].partial)
            if s.paper_key:
                suite, task, metric, attack = s.paper_key
                cell.paper = paper.get(spec.paper, model, suite, task, metric, attack)
            cells.append(cell)
        lines.append(Line("", catalog.group(model), model, catalog.recipe(model), cells))
    lines = _grouped(lines)
    better = [s.better for s in spec.summaries]
    _mark_best(lines, better, spec.decimals, evidence)
    headers = [s.label.format(block=block_label(s)) for s in spec.summaries]
    return Table(spec, headers, better, lines, settings_sentence(spec, lines, headers, moved=moved))


def _grouped(lines: list[Line], block_major: bool = False) -> list[Line]:
    """Lines of one backbone group together (its header shown once), then by block within the group;
    groups and blocks in order of first appearance, the paper's reference rows last. ``block_major``:
    block by block instead, the groups within each, so the paper's rows close each block."""
    blocks = list(dict.fromkeys(ln.block for ln in lines))
    groups = list(dict.fromkeys(ln.group for ln in lines if not ln.reference))
    groups += list(dict.fromkeys(ln.group for ln in lines if ln.group not in groups))
    if block_major:
        return sorted(lines, key=lambda ln: (blocks.index(ln.block), groups.index(ln.group)))
    return sorted(lines, key=lambda ln: (groups.index(ln.group), blocks.index(ln.block)))


def _mark_best(lines: list[Line], better: list[str], decimals: int, evidence: EvidenceIndex | None = None) -> None:
    """Bold the best of each (block, group, column) only when a paired test on the stored evidence
    separates it from the runner-up; "n.s." when the test cannot; neither without evidence."""
    for block, group in dict.fromkeys((ln.block, ln.group) for ln in lines if not ln.reference):
        mates = [ln for ln in lines if (ln.block, ln.group) == (block, group) and not ln.reference]
        for i, direction in enumerate(better):
            scored = [ln.cells[i] for ln in mates if ln.cells[i].stat.mean is not None and not ln.cells[i].partial]
            if len(scored) < 2:  # a lone value is best of nothing
                continue
            sign = 1 if direction == "higher" else -1
            ranked = sorted(scored, key=lambda c: -sign * round(c.stat.mean, decimals))
            best, runner_up = ranked[0], ranked[1]
            if round(best.stat.mean, decimals) == round(runner_up.stat.mean, decimals):
                verdict = False  # a tie is not a win
            else:
                verdict = _better(best, runner_up, sign, evidence)
            if verdict is None:
                continue
            best.bold, best.mark = verdict, "" if verdict else NOT_SIGNIFICANT


def _better(best: Cell, runner_up: Cell, sign: int, evidence: EvidenceIndex | None) -> bool | None:
    """Whether best − runner-up is significantly in the better direction (its paired 95% CI excludes 0 and
    the test rejects: ``Difference.significant``), rates over the examples both count, as `bench compare`;
    None when either has no stored evidence or they share no examples."""
    if evidence is None:
        return None
    ev_best, ev_runner = evidence.of_stat(best.stat), evidence.of_stat(runner_up.stat)
    if ev_best is None or ev_runner is None:
        return None
    try:
        d = evidence.cache.paired(ev_runner, ev_best, common=True)
    except ValueError:
        return None
    if d.low is None or d.high is None:
        return None
    return d.significant and ((d.low > 0) if sign > 0 else (d.high < 0))


def _setting_text(value) -> str:
    text = json.dumps(value, default=str)
    return "none" if text == "null" else text.strip('"')


def _where_text(models: dict[str, list[str]], every: dict[str, dict[str, list[str]]]) -> str:
    """'m1; m2: MR, CR': a model named alone used this value in all its cells."""
    def alone(model):
        return all(model not in other for other in every.values() if other is not models)
    return "; ".join(model if alone(model) else f"{model}: {', '.join(cols)}" for model, cols in models.items())


def settings_sentence(spec: TableSpec, lines: list[Line], headers: list[str], absent_blocks: list[str] = (),
                      moved: list[str] = ()) -> str:
    """What produced the numbers: metric and aggregation, then each reported config key's values
    (naming the columns of each value when they differ), stand-in resources, seeds, and how to read
    bold, † and the paper values."""
    own = [ln for ln in lines if not ln.reference]
    paragraphs = ["Settings: " + SETTING.join(_settings_parts(spec, own, headers)) + ".", _reading_cells(spec)]
    if any(ln.reference for ln in lines):
        paragraphs.append(f"Lines 'paper · <row>': the paper's own rows as printed in {spec.paper} (its backbones), "
                          "for reference.")
    paragraphs.append(
        f"Bold: best per column within a backbone group of two or more results ({'lower' if spec.better == 'lower' else 'higher'} "
        f"is better" + (", per column as the header says" if len(set(_betters(spec))) > 1 else "")
        + "), only when a paired test on the stored per-example evidence separates it from the runner-up "
          f"(the 95% CI of the difference excludes 0 and p < 0.05); {NOT_SIGNIFICANT}: best, but not separable from the "
          "runner-up; neither mark where no evidence is stored.")
    paragraphs.append(_marks_paragraph(spec, own, absent_blocks, moved))
    return PARAGRAPH.join(paragraphs)


def _settings_parts(spec: TableSpec, lines: list[Line], headers: list[str]) -> list[str]:
    """Metric and aggregation, each reported config key's values (naming the columns of each value when they
    differ), splits, stand-in resources and seeds."""
    rows = [r for ln in lines for c in ln.cells for r in c.stat.rows]
    parts = [spec.unit + (f", aggregation '{spec.aggregation}'" if spec.aggregation else "")
             + (f" (cells from its per-run rows '{spec.runs}<k>' where present)" if spec.runs else "")]
    for key in spec.settings:
        # value -> model -> the columns where that model's cells used the value
        where: dict[str, dict[str, list[str]]] = {}
        for ln in lines:
            for header, cell in zip(headers, ln.cells):
                for r in cell.stat.rows:
                    used = where.setdefault(_setting_text(r["_config"].get(key)), {}).setdefault(ln.model, [])
                    if header not in used:
                        used.append(header)
        if len(where) == 1:
            parts.append(f"{key}: {next(iter(where))}")
        elif where:
            parts.append(f"{key}: " + ", ".join(f"{v} ({_where_text(where[v], where)})" for v in sorted(where)))
    splits = sorted({r.get("split") or "" for r in rows} - {""})
    if splits:
        parts.append("split: " + ", ".join(splits))
    standins = sorted(resource_pairs(rows, spec.resources_key))
    parts.append("resources: " + (", ".join(standins) if standins else "none recorded"))
    seeds = sorted({c.stat.seeds for ln in lines for c in ln.cells if c.stat.seeds})
    parts.append(("runs" if spec.runs else "seeds") + " per cell: " + (", ".join(map(str, seeds)) if seeds else "none"))
    return parts


def _marks_paragraph(spec: TableSpec, lines: list[Line], absent_blocks, moved) -> str:
    """What the marks in the cells mean, only those that occur."""
    rows = [r for ln in lines for c in ln.cells for r in c.stat.rows]
    marks = f"{MISSING}: no result. {PARTIAL}: average over fewer results than the columns it names."
    unverified = unverified_files(rows)
    if unverified:
        marks += (f" {UNVERIFIED}: computed on data that failed its sha256 check (run with --allow-unverified-data): "
                  + ", ".join(unverified) + "; such a cell is shown only where no cell on verified data exists.")
    standins = {c.standin: None for ln in lines for c in ln.cells if c.standin}
    if standins:
        marks += (f" {STANDIN}: the dataset's training set is not offline, so the victim trained on a stand-in "
                  f"({spec.standin} {', '.join(standins)}; each cell records it).")
    if absent_blocks:
        marks += " No results at all for: " + ", ".join(absent_blocks) + "."
    if moved:
        marks += " " + "; ".join(moved) + "."
    passed_over = sum(c.stat.passed_over for ln in lines for c in ln.cells)
    if passed_over:
        marks += (f" {passed_over} cell(s) also have results under other settings, not shown here (chosen: verified "
                  "data first, then the setting most models have, then the table's preferred options"
                  f"{', ' + _prefer_text(spec) if spec.prefer else ''}, then no limit or the largest, then more seeds, "
                  "then the setting's key; all are in leaderboard.csv).")
    return marks


def _reading_cells(spec: TableSpec) -> str:
    paper = (f", with {spec.paper} and the difference (ours − paper) in brackets where the model matches a paper row"
             if spec.paper else "")
    if spec.runs:
        return ("Cells show our mean over runs (attack samples on the same victims) ± the sample std between runs, "
                "with n, the number of runs, when above 1: the spread between runs is that figure. In parentheses, "
                "a 95% CI over the pooled attacked examples: a bootstrap of the mean over runs in which each run's "
                "examples are resampled within that run (one run: its Wilson interval). It is conditional on the "
                "victims: it holds the victim classifiers (and the encoders' training seeds) fixed, and does not "
                "cover what a new victim or a new training run would give" + paper + ".")
    return ("Cells show our mean ± sample std over seeds (n, shown when above 1) and its 95% CI in parentheses "
            "(one result: the row's own, see its ci_method in leaderboard.csv; several seeds: a t-interval over "
            "them; an average of single results: a bootstrap of the average of their own resamples)" + paper + ".")


def _prefer_text(spec: TableSpec) -> str:
    return ", ".join(f"{key} " + " > ".join(map(str, values)) for key, values in spec.prefer.items())


def _betters(spec: TableSpec) -> list[str]:
    return [s.better for s in spec.summaries] or [spec.better]


def _empty(cell: Cell) -> bool:
    return cell.stat.mean is None and cell.paper is None


def without_empty(table: Table) -> Table:
    """The table as shown: our lines with no number at all left out (a model that has no result under
    a block, say an attack it was not run with), and columns where none of our lines has a result
    (an average counts only where it averages two or more results), each counted in the caption."""
    ours = [ln for ln in table.lines if not ln.reference]

    def has_result(i: int) -> bool:
        return any(ln.cells[i].stat.mean is not None and not _single_part(table, ln, i) for ln in ours)

    keep = [i for i in range(len(table.headers)) if has_result(i)]
    lines = [replace(ln, cells=[ln.cells[i] for i in keep]) for ln in table.lines]
    shown = [ln for ln in lines if ln.reference or not all(_empty(c) for c in ln.cells)]
    dropped_rows = len(lines) - len(shown)
    dropped_cols = [table.headers[i] for i in range(len(table.headers)) if i not in keep]
    if not dropped_rows and not dropped_cols:
        return table
    note = []
    if dropped_rows:
        note.append(f"{dropped_rows} row(s) with no result in this table's setting (a model not run under "
                    "that block)")
    if dropped_cols:
        note.append(f"{len(dropped_cols)} column(s) without a result of ours ({', '.join(dropped_cols)}"
                    + ("; the paper's values for them are in reports/paper_values.csv" if table.spec.paper else "")
                    + ")")
    settings = table.settings + PARAGRAPH + "Left out as empty: " + "; ".join(note) + "."
    return replace(table, headers=[table.headers[i] for i in keep], better=[table.better[i] for i in keep],
                   lines=shown, settings=settings)


def _single_part(table: Table, line: Line, i: int) -> bool:
    """An average column's cell that averages one result only (it repeats that column)."""
    n_columns = len(table.spec.columns)
    if table.spec.summaries or i < n_columns:
        return False
    of = table.spec.averages[i - n_columns].of
    labels = [c.label for c in table.spec.columns]
    return sum(line.cells[labels.index(label)].stat.mean is not None for label in of if label in labels) < 2


# ---------------------------------------------------------------- formatting --------------------

TEX_SPECIAL = {"&": "\\&", "%": "\\%", "#": "\\#", "_": "\\_", "$": "\\$", "{": "\\{", "}": "\\}",
               "~": "\\textasciitilde{}", "^": "\\textasciicircum{}", "\\": "\\textbackslash{}",
               "–": "--", "−": "$-$", "±": "$\\pm$", "†": "$^\\dagger$", "‡": "$^\\ddagger$", "§": "\\S{}", "Δ": "$\\Delta$", "×": "$\\times$",
               "ℓ": "$\\ell$", "↑": "$\\uparrow$", "↓": "$\\downarrow$",
               **{ch: f"$\\{name}$" for ch, name in zip("αβγδελστ", ("alpha", "beta", "gamma", "delta", "epsilon",
                                                                        "lambda", "sigma", "tau"))}}


def tex_escape(text: str) -> str:
    """Plain text (model names, settings) made safe for LaTeX, character by character."""
    return "".join(TEX_SPECIAL.get(ch, ch) for ch in text)


@dataclass(frozen=True)
class Style:
    """How one output format spells the pieces of a cell."""

    bold: str  # format string with {}
    ci: str  # format string with {low} and {high}
    pm: str
    n: str  # format string with {}
    partial: str
    unverified: str
    paper: str  # format string with {paper} and {delta}
    paper_only: str  # format string with {paper}
    missing: str
    escape: object = staticmethod(lambda s: s)
    join: str = "{ours}{paper}"  # how ours and the paper part share a cell
    standin: str = STANDIN


MD = Style(bold="**{}**", ci=" ({low}–{high})", pm=" ± ", n=" (n={})", partial=PARTIAL, unverified=UNVERIFIED, paper=" [paper {paper}, Δ {delta}]",
           paper_only=" [paper {paper}]", missing=MISSING, escape=lambda s: s.replace("|", "\\|"))
TEX = Style(bold="\\textbf{{{}}}", ci=" {{\\scriptsize ({low}--{high})}}", pm="$\\pm$", n="$_{{n={}}}$", partial="$^\\dagger$",
            unverified="$^\\ddagger$",
            paper=" {{\\scriptsize[{paper}, $\\Delta$ {delta}]}}", paper_only=" {{\\scriptsize[{paper}]}}",
            missing="--", escape=lambda s: tex_escape(s),
            # The paper part on a second line of the cell keeps wide tables on the page.
            standin="$^\\S$",
            join="\\begin{{tabular}}[t]{{@{{}}r@{{}}}}{ours}\\\\{paper}\\end{{tabular}}")
HTML = Style(bold="<b>{}</b>", ci="<br><small>({low}–{high})</small>", pm=" ± ", n=" (n={})", partial=PARTIAL,
             unverified=UNVERIFIED, paper="<br><small>[paper {paper}, Δ {delta}]</small>",
             paper_only="<br><small>[paper {paper}]</small>", missing=MISSING, escape=html.escape)


def cell_text(cell: Cell, style: Style, decimals: int) -> str:
    s = cell.stat
    if cell.reference:  # the paper's own number
        return style.missing if cell.paper is None else format_number(cell.paper, decimals)
    if s.mean is None:
        text = style.missing
    else:
        text = format_number(s.mean, decimals)
        if s.std is not None:
            text += style.pm + format_number(s.std, decimals)
        if s.seeds > 1:
            text += style.n.format(s.seeds)
        if cell.partial:
            text += style.partial
        if cell.unverified:
            text += style.unverified
        if cell.standin:
            text += style.standin
        if cell.bold:
            text = style.bold.format(text)
        if cell.mark:
            text += " " + cell.mark
        if s.ci.present:
            text += style.ci.format(low=format_number(s.ci.low, decimals), high=format_number(s.ci.high, decimals))
    if cell.paper is None:
        return text
    paper, delta = format_number(cell.paper, decimals), cell.delta
    part = (style.paper.format(paper=paper, delta=format_number(delta, decimals, signed=True)) if delta is not None
            else style.paper_only.format(paper=paper))
    return style.join.format(ours=text, paper=part)


def _label_columns(table: Table) -> list[str]:
    cols = ["Block"] if any(ln.block for ln in table.lines) else []
    return cols + ["Model"] + (["Recipe"] if table.spec.show_recipe else [])


def _label_cells(table: Table, line: Line) -> list[str]:
    cols = [line.block] if any(ln.block for ln in table.lines) else []
    return cols + [line.model] + ([line.recipe] if table.spec.show_recipe else [])


def _header(table: Table, label: str, i: int) -> str:
    arrow = {"higher": "↑", "lower": "↓"}[table.better[i]]
    return f"{label} {arrow}"


def to_markdown(table: Table) -> str:
    spec = table.spec
    labels = _label_columns(table)
    head = labels + [_header(table, h, i) for i, h in enumerate(table.headers)]
    out = [f"### {spec.title}", "", "| " + " | ".join(head) + " |",
           "|" + "|".join([" --- "] * len(labels) + [" ---: "] * len(table.headers)) + "|"]
    group = None
    for line in table.lines:
        if line.group != group:
            group = line.group
            out.append("| " + " | ".join([f"*{MD.escape(line.group)}*"] + [""] * (len(head) - 1)) + " |")
        out.append("| " + " | ".join([MD.escape(x) for x in _label_cells(table, line)]
                                     + [cell_text(c, MD, spec.decimals) for c in line.cells]) + " |")
    out += ["", table.settings, ""]
    return "\n".join(out)


def to_latex(table: Table) -> str:
    spec = table.spec
    labels = _label_columns(table)
    esc = TEX.escape
    arrows = {"higher": "$\\uparrow$", "lower": "$\\downarrow$"}
    head = [esc(x) for x in labels] + [f"{esc(h)} {arrows[table.better[i]]}" for i, h in enumerate(table.headers)]
    out = ["% Generated by `bench report` from result files; do not edit.", "\\begin{table*}[t]", "\\centering",
           "\\scriptsize", "\\begin{tabular}{" + "l" * len(labels) + "r" * len(table.headers) + "}", "\\hline",
           " & ".join(head) + " \\\\", "\\hline"]
    group = None
    for line in table.lines:
        if line.group != group:
            if group is not None:
                out.append("\\hline")
            group = line.group
            out.append(f"\\multicolumn{{{len(head)}}}{{l}}{{\\textit{{{esc(line.group)}}}}} \\\\")
        out.append(" & ".join([esc(x) for x in _label_cells(table, line)]
                              + [esc_cell(c, spec.decimals) for c in line.cells]) + " \\\\")
    caption = table.settings.replace(PARAGRAPH, " ").replace(SETTING, "; ")
    out += ["\\hline", "\\end{tabular}", f"\\caption{{{esc(spec.title)}. {esc(caption)}}}",
            f"\\label{{tab:{spec.name}}}", "\\end{table*}", ""]
    return "\n".join(out)


def esc_cell(cell: Cell, decimals: int) -> str:
    return cell_text(cell, TEX, decimals)


def to_html(table: Table) -> str:
    spec = table.spec
    labels = _label_columns(table)
    head = labels + [_header(table, h, i) for i, h in enumerate(table.headers)]
    body = [f"<h1>{html.escape(spec.title)}</h1>", "<table>",
            "<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr></thead><tbody>"]
    group = None
    for line in table.lines:
        if line.group != group:
            group = line.group
            body.append(f"<tr class=\"g\"><td colspan=\"{len(head)}\">{html.escape(line.group)}</td></tr>")
        body.append("<tr>" + "".join(f"<td class=\"l\">{html.escape(x)}</td>" for x in _label_cells(table, line))
                    + "".join(f"<td class=\"n\">{cell_text(c, HTML, spec.decimals)}</td>" for c in line.cells) + "</tr>")
    body.append("</tbody></table>")
    for paragraph in table.settings.split(PARAGRAPH):
        items = paragraph.split(SETTING)
        if len(items) == 1:
            body.append(f"<p class=\"note\">{html.escape(paragraph)}</p>")
        else:
            head, _, first = items[0].partition(": ")
            body.append(f"<p class=\"note\">{html.escape(head)}:</p><ul class=\"note\">"
                        + "".join(f"<li>{html.escape(item)}</li>" for item in [first] + items[1:]) + "</ul>")
    return page(spec.title, body)


CSV_FIELDS = ("table", "block", "backbone", "model", "column", "mean", "std", "ci_low", "ci_high", "ci_method",
              "seeds", "partial", "bold", "mark", "paper", "delta", "better", "reference", "unverified_data",
              "standin")


def to_csv(table: Table) -> str:
    """One row per (model, column), numbers to 6 places; text fields spreadsheet-safe (a model may be named by
    its user)."""
    records = ({"table": table.spec.name, "block": line.block, "backbone": line.group, "model": line.model,
                "column": header, "mean": cell.stat.mean, "std": cell.stat.std, "ci_low": cell.stat.ci.low,
                "ci_high": cell.stat.ci.high, "ci_method": cell.stat.ci.method, "seeds": cell.stat.seeds or "",
                "partial": int(cell.partial), "bold": int(cell.bold), "mark": cell.mark, "paper": cell.paper,
                "delta": cell.delta, "better": better, "reference": int(cell.reference),
                "unverified_data": int(cell.unverified), "standin": cell.standin}
               for line in table.lines for header, better, cell in zip(table.headers, table.better, line.cells))
    return records_csv(CSV_FIELDS, records, digits=6)


# format name -> (file suffix, formatter)
FORMATS = {"md": ("md", to_markdown), "tex": ("tex", to_latex), "csv": ("csv", to_csv), "html": ("html", to_html)}

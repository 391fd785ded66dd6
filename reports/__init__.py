"""Reports: the papers' tables and figures, generated from result files only.

``generate(results_dir)`` returns every artifact in memory (tables in md/tex/csv/html, figures as PNG,
PDF and the plotted data as CSV, an index), ``write`` puts them in a directory atomically and
``compare`` says how a directory differs from a regeneration (``bench report --check``).
Never imports torch, the registry, suites/ or attacks/: a report is a pure function of the result
files, the plug-in metadata exported beside them (``plugins.json``: labels, model families) and
reports/paper_values.csv.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench.errors import UnknownName
from bench.io import atomic_write_bytes, atomic_write_text
from bench.paths import inside
from bench.progress import track
from bench.results.stats_cache import CACHE_FILE, StatsCache
from bench.results.stats_cache import shared as shared_cache
from bench.results.store import leaderboard_text
from reports import figures as fig
from reports import pivot, robustness, scale, site
from reports.paper import PAPER_VALUES, PaperValues
from reports.results import Catalog, EvidenceIndex, is_treated, load_rows
from reports.specs import FIGURES, SERIES, TABLES
from reports.tables import FORMATS, build, labelled, without_empty

IMAGE_SUFFIXES = (".png", ".pdf")  # compared by presence only: their bytes depend on the matplotlib build


@dataclass
class Artifacts:
    reports: dict[str, str | bytes] = field(default_factory=dict)  # file name -> content, for the reports dir
    results: dict[str, str] = field(default_factory=dict)  # leaderboard CSVs, for the results dir


def _leaderboards(rows: list[dict], results_dir: Path, suites: set[str]) -> dict[str, str]:
    """leaderboard.csv and one leaderboard-<suite>.csv per suite of ``suites``, as the store writes them."""
    located = [{**r, "cell": Path(r["_cell"]).relative_to(results_dir).as_posix()} for r in rows]
    boards = {"leaderboard.csv": leaderboard_text(located)}
    for suite in sorted({r["suite"] for r in rows} & suites):
        boards[f"leaderboard-{suite}.csv"] = leaderboard_text([r for r in located if r["suite"] == suite])
    return boards


def generate(results_dir: Path, suites: list[str] | None = None, formats: list[str] | None = None,
             paper_values: Path = PAPER_VALUES, reports_dir: Path | None = None, progress=None) -> Artifacts:
    """Every report of ``results_dir``; with the html format also the site's index and leaderboard pages
    (``reports_dir``: where they will be written, so that a claims page already there is linked).
    ``progress``: a bench.progress owner, told each table, figure, series and card done."""
    with shared_cache(results_dir):  # every paired comparison below, whoever makes it, is kept in one cache
        return _generate(results_dir, suites, formats, paper_values, reports_dir, progress)


@dataclass
class _Render:
    """One render's inputs and what it has made so far (the steps of ``_generate`` share it)."""

    results_dir: Path
    every: list[dict]  # every cell, treated ones too (the leaderboard CSVs record them all)
    rows: list[dict]  # the cells the reports read: untreated ones
    catalog: Catalog  # labels and model facts the runs exported (bench/results/metadata.py)
    paper: PaperValues
    wanted: set[str]  # the suites asked for
    formats: list[str]
    cache: StatsCache  # bootstraps computed by earlier renders, by content
    evidence: EvidenceIndex
    progress: object = None
    out: Artifacts = field(default_factory=Artifacts)
    made: list = field(default_factory=list)  # (title, file names) of every report made
    skipped: list = field(default_factory=list)  # (title, why) of every report with nothing to show


def _generate(results_dir: Path, suites, formats, paper_values: Path, reports_dir: Path | None,
              progress=None) -> Artifacts:
    every = load_rows(results_dir, treated=True)
    rows = [r for r in every if not is_treated(r)]
    known = sorted({s for spec in TABLES + FIGURES for s in spec.suites} | {r["suite"] for r in rows})
    for name in suites or []:
        if name not in known:
            raise UnknownName("suite", name, known)
    cache = StatsCache.load(results_dir)
    render = _Render(results_dir, every, rows, Catalog.load(results_dir), PaperValues.load(paper_values),
                     set(suites or known), formats or list(FORMATS), cache, EvidenceIndex(results_dir, cache),
                     progress)
    render.out.results.update(_leaderboards(every, Path(results_dir), render.wanted))
    _tables(render)
    _figures(render)
    _series(render)
    if "adversarial" in render.wanted and (board := robustness.generate(rows, render.evidence)):
        _add(render, robustness.TITLE, board)
    if not suites:  # the claims ledger (reports/claims.toml) pairs cells of every suite
        _ledger(render)
        _cards(render)  # a robustness card per model, unless the render is for some suites only
    return _finish(render, reports_dir, complete=not suites and not formats)


def _add(render: _Render, title: str, files: dict) -> None:
    render.out.reports.update(files)
    render.made.append((title, sorted(files)))


def _tables(render: _Render) -> None:
    built = {}
    for spec in track(render.progress, TABLES, len(TABLES), "report: tables"):
        if spec.suites and not set(spec.suites) & render.wanted:
            continue
        table = build(labelled(spec, render.catalog), render.rows, render.paper, built, render.catalog,
                      render.evidence)
        built[spec.name] = table
        if table.empty:
            render.skipped.append((spec.title, f"no {spec.suite or 'source-table'} results for it"))
            continue
        shown = without_empty(table)  # for readers; the CSV keeps every column (and Summary tables read all)
        for fmt in render.formats:
            suffix, write = FORMATS[fmt]
            render.out.reports[f"{spec.name}.{suffix}"] = write(table if fmt == "csv" else shown)
        render.made.append((spec.title, [f"{spec.name}.{FORMATS[f][0]}" for f in render.formats]))


def _figures(render: _Render) -> None:
    for spec in track(render.progress, FIGURES, len(FIGURES), "report: figures"):
        if not set(spec.suites) & render.wanted:
            continue
        pts = fig.points(spec, render.rows, render.paper, render.catalog)
        if not pts:
            render.skipped.append((spec.title, f"no {spec.suite} results with the metrics it plots"))
            continue
        caption = fig.settings(spec, render.rows, pts)
        render.out.reports[f"{spec.name}.csv"] = fig.to_csv(spec, pts, caption)
        for suffix, blob in fig.render(spec, pts, caption).items():
            render.out.reports[f"{spec.name}.{suffix}"] = blob
        render.made.append((spec.title, [f"{spec.name}.{s}" for s in ("png", "pdf", "csv")]))


def _series(render: _Render) -> None:
    for spec in track(render.progress, SERIES, len(SERIES), "report: training-length series"):
        if not set(spec.suites) & render.wanted:
            continue
        files = scale.generate(render.results_dir, spec)
        if files is not None:  # None: none of its models has results yet, nothing to list
            _add(render, spec.title, files)


def _ledger(render: _Render) -> None:
    """The ledger's pages in the formats asked for; its data (CSV, JSON) and forest plot with any of them."""
    from reports import claims_pages

    pages = claims_pages.render(render.results_dir, cache=render.cache, store=render.evidence.store)
    ledger = {name: text for name, text in pages.items()
              if name.rsplit(".", 1)[1] in (*render.formats, "csv", "json", "png")}
    if set(ledger) - {"claims.csv", "claims.json", claims_pages.FOREST, "null-simulation.csv", "placebo-battery.csv"}:
        render.out.reports.update(ledger)
        render.made.append(("Claims ledger: each seed paper's headline claims, tested",
                            [n for n in claims_pages.NAMES if n in ledger]))


def _cards(render: _Render) -> None:
    from reports.card import card

    models = sorted({r["model"] for r in render.rows})
    for model in track(render.progress, models, len(models), "report: robustness cards"):
        files = card(render.results_dir, model, render.cache, rows=render.rows, evidence=render.evidence)
        _add(render, f"Robustness card: {model}", files)


def _finish(render: _Render, reports_dir: Path | None, complete: bool) -> Artifacts:
    """The index and, with html, the site pages; with ``complete`` (every report) the bootstrap cache too, so
    that the next render (or a clean clone) computes none."""
    out, rows = render.out, render.rows
    made = with_formats_present(render.made, reports_dir)
    out.reports["index.md"] = _index(rows, made, render.skipped)
    if "html" in render.formats:
        present = set(out.reports) | {name for _, names in made for name in names}
        out.reports.update(_site(rows, render.catalog, made, render.skipped, out.reports, reports_dir,
                                 render.evidence, present))
    if complete:
        out.results[CACHE_FILE] = render.cache.text()
    return out


def with_formats_present(made: list[tuple[str, list[str]]], reports_dir: Path | None) -> list[tuple[str, list[str]]]:
    """Each report's files, and its other table formats already in ``reports_dir`` (an earlier render with
    other ``--format`` values wrote them), so that an index never drops a link to a format this render
    did not make."""
    if reports_dir is None:
        return made
    from reports.claims_pages import NAMES as LEDGER

    suffixes = [suffix for suffix, _ in FORMATS.values()]

    def rank(name: str) -> tuple:  # the order a complete render lists them in
        stem, _, suffix = name.rpartition(".")
        return (LEDGER.index(name) if name in LEDGER else len(LEDGER), stem,
                suffixes.index(suffix) if suffix in suffixes else len(suffixes), suffix)

    out = []
    for title, names in made:
        stems = dict.fromkeys(name.rsplit(".", 1)[0] for name in names)
        there = [f"{stem}.{s}" for stem in stems for s in suffixes
                 if f"{stem}.{s}" not in names and (Path(reports_dir) / f"{stem}.{s}").is_file()]
        out.append((title, sorted(names + there, key=rank) if there else names))
    return out


def claims_summary_html(files: dict, catalog: Catalog | None = None) -> str:
    """The index's first lines: the claims ledger's finding in words, its verdicts' legend and each claim's
    primary line by kind of measure (reports/overview.py, from claims.json); empty when this render made no
    ledger."""
    from reports import overview

    return overview.summary_html(files, catalog or Catalog({}, {}))


def _site(rows: list[dict], catalog: Catalog, made, skipped, files: dict, reports_dir: Path | None,
          evidence: EvidenceIndex | None = None, present: set[str] | None = None) -> dict[str, str]:
    """The static site's own pages: a sortable leaderboard per suite and the index linking every page
    (``present``: every file name the index may link, this render's and those already in the directory)."""
    present = set(files) if present is None else present
    pages = {}
    suites = sorted({r["suite"] for r in rows})
    for suite in suites:
        mine = [r for r in rows if r["suite"] == suite]
        columns, lines = pivot.build(mine, catalog, evidence, tuple(c for c in pivot.COLUMNS if c.suite == suite))
        if not columns:  # a suite the pivot does not cover, or without its headline rows: each measure it has
            columns, lines = pivot.build(mine, catalog, evidence, pivot.generic_columns(mine, catalog))
        pages[site.leaderboard_name(suite)] = site.leaderboard_page(
            suite, mine, label=lambda task, s=suite: catalog.task_label(s, task),
            pivot_html=pivot.to_html(columns, lines, catalog), words=pivot.metric_words)
    tables = [(spec.title, spec.name, [s for s in ("md", "tex", "csv") if f"{spec.name}.{s}" in present])
              for spec in TABLES if f"{spec.name}.html" in present]
    figures = [(spec.title, spec.name) for spec in FIGURES + SERIES if f"{spec.name}.png" in present]
    cards = sorted(name[len("card-"):-len(".html")] for name in files
                   if name.startswith("card-") and name.endswith(".html"))
    claims = site.CLAIMS in files or (reports_dir is not None and (Path(reports_dir) / site.CLAIMS).is_file())
    columns, lines = pivot.build(rows, catalog, evidence)
    pages[site.INDEX] = site.index_page(rows, leaderboards=suites, tables=tables, figures=figures, cards=cards,
                                        claims=claims, skipped=skipped,
                                        claims_summary_html=claims_summary_html(files, catalog),
                                        findings=pivot.findings(columns, lines, catalog),
                                        pivot_html=pivot.to_html(columns, lines, catalog),
                                        robustness=(f"{robustness.NAME}.html" if f"{robustness.NAME}.html" in present
                                                    else ""))
    return pages


def _index(rows: list[dict], made, skipped) -> str:
    from urllib.parse import quote

    profiles = Counter(r.get("profile") or "unknown" for r in rows)
    devices = Counter(r.get("device") or "unknown" for r in rows)
    cells = len({(r["model"], r["suite"], r["task"], r.get("seed"), r.get("config_hash")) for r in rows})
    lines = ["# Reports", "", "Generated by `bench report` from the result files; do not edit. "
             "Regenerate with `bench report`; `bench report --check` fails when this directory is stale.", "",
             f"Source: {cells} result cells, {len(rows)} rows, models: "
             + ", ".join(sorted({r['model'] for r in rows})) + ".",
             "Profiles: " + ", ".join(f"{k} ({v} rows)" for k, v in sorted(profiles.items()))
             + "; devices: " + ", ".join(f"{k} ({v} rows)" for k, v in sorted(devices.items())) + ".", "",
             "| table or figure | files |", "| --- | --- |"]
    lines += ["| " + site.md_cell(title) + " | " + ", ".join(f"[{site.md_cell(f)}]({quote(f)})" for f in files)
              + " |" for title, files in made]
    if skipped:
        lines += ["", "Not generated yet:", ""] + [f"- {title}: {why}." for title, why in skipped]
    return "\n".join(lines) + "\n"


MANIFEST = ".bench-report-manifest.json"  # the names `bench report` wrote into a reports directory


def manifest(directory: Path) -> set[str] | None:
    """The names the manifest of ``directory`` lists, or None when it has none (or it does not parse)."""
    import json

    try:
        names = json.loads((Path(directory) / MANIFEST).read_text(encoding="utf-8"))["written"]
        return {n for n in names if isinstance(n, str)}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write(files: dict[str, str | bytes], directory: Path, record: bool = False) -> list[Path]:
    """Write ``files`` into ``directory`` (each name checked to stay inside it). With ``record``, the manifest
    of the directory lists them; a file there that the manifest does not list (a user's own) is moved
    aside to ``<name>.user-<n>`` before it would be overwritten."""
    import json
    import warnings

    from bench.errors import BenchWarning

    listed = manifest(directory) if record else None
    ours = listed if listed is not None else set(files) if _generated_here(directory) else set()
    paths = []
    for name, content in sorted(files.items()):
        target = Path(directory) / name
        if record and name not in ours and target.is_file():
            aside = next(target.with_name(f"{name}.user-{n}") for n in range(1, 10_000)
                         if not target.with_name(f"{name}.user-{n}").exists())
            os.replace(target, aside)
            warnings.warn(f"{target} was not written by `bench report`: kept as {aside}.", BenchWarning, stacklevel=2)
        path = inside(Path(directory), name, what="report file")
        if isinstance(content, bytes):
            atomic_write_bytes(path, content)
        else:
            atomic_write_text(path, content)
        paths.append(path)
    if record:
        names = sorted((listed or set()) | set(files))
        atomic_write_text(Path(directory) / MANIFEST, json.dumps({"written": names}, indent=0) + "\n")
    return paths


def _generated_here(directory: Path) -> bool:
    """A reports directory from before manifests: its index says `bench report` generated it."""
    for index in ("index.md", site.INDEX):
        try:
            if "Generated by `bench report`" in (Path(directory) / index).read_text(encoding="utf-8")[:2000]:
                return True
        except (OSError, UnicodeDecodeError):
            continue
    return False


def owned_names(directory: Path) -> set[str]:
    """The names in ``directory`` that a complete `bench report` may remove when it no longer makes them: those
    its manifest shows it wrote there; without a manifest, only the fixed table and figure names (never a
    card-* or leaderboard-* file it cannot prove it wrote)."""
    listed = manifest(directory)
    return listed if listed is not None else generated_names()


def generated_names() -> set[str]:
    """Every file name `bench report` can produce, for finding stale ones."""
    from reports.claims_pages import NAMES as CLAIMS

    names = {"index.md", site.INDEX, *CLAIMS}
    for spec in TABLES:
        names |= {f"{spec.name}.{suffix}" for suffix, _ in FORMATS.values()}
    for spec in FIGURES:
        names |= {f"{spec.name}.{s}" for s in ("png", "pdf", "csv")}
    for spec in SERIES:
        names |= {f"{spec.name}.{s}" for s in ("png", "pdf", "csv", "md")}
    return names


def compare(files: dict[str, str | bytes], directory: Path, prune: bool = True) -> list[str]:
    """How ``directory`` differs from ``files``: changed, missing and (with ``prune``) stale files."""
    problems = []
    for name, content in sorted(files.items()):
        path = Path(directory) / name
        if not path.exists():
            problems.append(f"missing: {path}")
        elif name.endswith(IMAGE_SUFFIXES):
            continue
        elif path.read_text(encoding="utf-8") != content:
            problems.append(f"differs: {path}")
    if prune:
        stale = sorted(n for n in owned_names(directory) - set(files) if (Path(directory) / n).exists())
        problems += [f"stale (no longer generated): {Path(directory) / n}" for n in stale]
        problems += [f"not made by `bench report` (remove it, or keep it outside this directory): {Path(directory) / n}"
                     for n in unlisted(files, directory)]
    return problems


def unlisted(files: dict, directory: Path) -> list[str]:
    """Files in a manifest-keeping reports directory that a regeneration does not make and the manifest does
    not list: left from a version of `bench report` that made them before manifests (a table since dropped),
    or put there by hand. A complete run never removes them, so ``--check`` names them."""
    listed = manifest(directory)
    if listed is None or not Path(directory).is_dir():
        return []
    return sorted(p.name for p in Path(directory).iterdir()
                  if p.is_file() and p.name not in files and p.name not in listed and p.name != MANIFEST)

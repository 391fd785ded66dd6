"""The site check (benchmarks/site_check.py) in headless Chromium at 1280×1400: pages built the way
`bench report` builds them pass; a page wider than the window, a broken link and an empty column are
each caught. Skipped where Chromium is not installed (`apt-get install -y chromium`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from reports import pivot, site
from reports.results import Catalog

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "site_check.py"
spec = importlib.util.spec_from_file_location("site_check", SCRIPT)
site_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(site_check)

needs_chromium = pytest.mark.skipif(site_check.chromium() is None, reason="Chromium is not installed")


def _rows():
    from tests.test_site_pages import rows

    return rows()


def test_links_are_checked_without_a_browser(tmp_path):
    (tmp_path / "a.html").write_text('<p id="x"></p><a href="b.html">b</a><a href="a.html#x">x</a>'
                                     '<a href="a.html#nowhere">n</a><img src="missing.png">', encoding="utf-8")
    (tmp_path / "b.html").write_text("<p></p>", encoding="utf-8")
    assert site_check.broken_links(tmp_path / "a.html") == ["a.html#nowhere", "missing.png"]


@needs_chromium
def test_pages_as_bench_report_builds_them_fit_1280_px(tmp_path):
    catalog = Catalog({}, {})
    columns, lines = pivot.build(_rows(), catalog, None)
    (tmp_path / "index.html").write_text(site.index_page(
        _rows(), leaderboards=["adversarial"], tables=[], figures=[], cards=["a", "b"], claims=False, skipped=[],
        findings=pivot.findings(columns, lines, catalog), pivot_html=pivot.to_html(columns, lines, catalog)),
        encoding="utf-8")
    mine = [r for r in _rows() if r["suite"] == "adversarial"]
    own = tuple(c for c in pivot.COLUMNS if c.suite == "adversarial")
    (tmp_path / "leaderboard-adversarial.html").write_text(site.leaderboard_page(
        "adversarial", mine, pivot_html=pivot.to_html(*pivot.build(mine, catalog, None, own), catalog),
        words=pivot.metric_words), encoding="utf-8")
    for model in ("a", "b"):
        (tmp_path / f"card-{model}.html").write_text(site.page(model, ["<p>card</p>"]), encoding="utf-8")
    pages = [tmp_path / "index.html", tmp_path / "leaderboard-adversarial.html"]
    assert site_check.check(pages) == []


@needs_chromium
def test_a_wide_page_and_an_empty_column_are_caught(tmp_path):
    wide = tmp_path / "wide.html"
    wide.write_text(site.page("wide", ["<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody>"
                                       f"<tr><td>{'x' * 400}</td><td></td></tr></tbody></table>"]), encoding="utf-8")
    (tmp_path / "index.html").write_text("<p></p>", encoding="utf-8")
    problems = site_check.check([wide])
    assert any("scrolls sideways" in p for p in problems), problems
    assert any("empty table 0 column 1 (b)" in p for p in problems), problems

"""The site check (benchmarks/site_check.py) in headless Chromium on a wide screen (1400×900) and a phone
(390×844): every kind of page `bench report` builds (index, claims ledger, card, leaderboard, Table 3)
fits both without sideways scrolling, and so does the committed site; a page wider than the window, a
broken link and an empty column are each caught, while a wide table scrolls inside its own box. The
committed screenshots show the committed ledger's counts. The Chromium tests are skipped where Chromium is
not installed (`apt-get install -y chromium`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reports import pivot, site
from reports.results import Catalog
from tests.conftest import benchmark_script

site_check = benchmark_script("site_check")

needs_chromium = pytest.mark.skipif(site_check.chromium() is None,
                                    reason="Chromium is not installed, so the pages' layout at 1400 and 390 px is not "
                                           "checked (apt-get install -y chromium)")


def _rows():
    from tests.test_site_pages import rows

    return rows()


def test_links_are_checked_without_a_browser(tmp_path):
    (tmp_path / "a.html").write_text('<p id="x"></p><a href="b.html">b</a><a href="a.html#x">x</a>'
                                     '<a href="a.html#nowhere">n</a><img src="missing.png">', encoding="utf-8")
    (tmp_path / "b.html").write_text("<p></p>", encoding="utf-8")
    assert site_check.broken_links(tmp_path / "a.html") == ["a.html#nowhere", "missing.png"]


REPO = Path(__file__).resolve().parents[1]
TITLE = "A method lowers a recipe's attack success rate against its baseline on a dataset with a long name " * 2
CLAIMS = {"verdicts": {"replicated": "...", "not testable here (floor)": "..."},
          "counts": {"replicated": 1, "not testable here (floor)": 1},
          "claims": [{"claim_id": "a-very-long-claim-identifier-that-does-not-break-anywhere-at-all", "title": TITLE,
                      "unit": "Attack success rate (points)"},
                     {"claim_id": "b", "title": "B holds", "unit": "Attack success rate (points)"}],
          "lines": [{"claim_id": "a-very-long-claim-identifier-that-does-not-break-anywhere-at-all", "seed": "pooled",
                     "primary": True, "verdict": "replicated", "delta": -3.1, "ci_low": -4.0, "ci_high": -2.2,
                     "paper_delta": -30.0, "seeds": 3, "paper": "P", "table": "Table 3"},
                    {"claim_id": "b", "seed": "pooled", "primary": True, "verdict": "not testable here (floor)",
                     "verdict_note": "x" * 300}]}


def _site(tmp_path) -> Path:
    """The reports of the tests' results fixture as `bench report` writes them, the index opening with a ledger
    that has drawn lines (the fixture's own claims are not run)."""
    import json

    from reports import generate, overview, write
    from tests.test_reports import write_fixture

    files = generate(write_fixture(tmp_path / "results")).reports
    out = tmp_path / "site"
    write(files, out)
    catalog = Catalog({}, {})
    columns, lines = pivot.build(_rows(), catalog, None)
    (out / "index-drawn.html").write_text(site.index_page(
        _rows(), leaderboards=["adversarial"], tables=[], figures=[], cards=[], claims=True, skipped=[],
        claims_summary_html=overview.summary_html({"claims.json": json.dumps(CLAIMS)}, catalog),
        findings=pivot.findings(columns, lines, catalog), pivot_html=pivot.to_html(columns, lines, catalog)),
        encoding="utf-8")
    return out


@needs_chromium
def test_every_kind_of_page_fits_a_wide_screen_and_a_phone(tmp_path):
    out = _site(tmp_path)
    pages = [out / n for n in ("index.html", "index-drawn.html", "claims.html", "card-robustembed-bert.html",
                               "leaderboard-adversarial.html", "robustembed-table3.html")]
    assert site_check.SIZES == ((1400, 900), (390, 844))
    problems = site_check.check(pages)  # the drawn index links claims and cards this site does not have
    assert [p for p in problems if not p.startswith("index-drawn.html: broken link")] == []


@needs_chromium
def test_the_committed_site_fits_a_wide_screen_and_a_phone():
    pages = site_check.default_pages(REPO / "reports" / "generated")
    assert len(pages) == 5
    assert site_check.check(pages) == []


@needs_chromium
def test_a_wide_page_and_an_empty_column_are_caught_and_a_wide_table_scrolls_in_its_box(tmp_path):
    wide = tmp_path / "wide.html"
    wide.write_text(site.page("wide", [f"<div style=\"width:900px\">{'x' * 10}</div>"]), encoding="utf-8")
    table = tmp_path / "table.html"
    table.write_text(site.page("table", ["<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody>"
                                         f"<tr><td>{'x' * 400}</td><td></td></tr></tbody></table>"]), encoding="utf-8")
    (tmp_path / "index.html").write_text("<p></p>", encoding="utf-8")
    problems = site_check.check([wide, table])
    assert [p for p in problems if "scrolls sideways" in p] == [
        "wide.html: scrolls sideways at 390×844 (910 px wide in a 390 px window)"], problems
    assert any("empty table 0 column 1 (b)" in p for p in problems), problems


@needs_chromium
def test_a_verdict_that_runs_over_the_next_column_is_caught_and_a_long_one_wraps(tmp_path):
    def row(style: str) -> str:
        return ("<div class=\"forest\"><div class=\"fr\"><a>a claim</a><span><span class=\"chip\" "
                f"style=\"{style}\">not testable here (a reason long enough to need two lines)</span></span>"
                "<small>ours +0.1 [-1.0, +1.2]</small><div class=\"plot\"></div></div></div>")

    (tmp_path / "index.html").write_text("<p></p>", encoding="utf-8")
    over = tmp_path / "over.html"
    over.write_text(site.page("over", [row("white-space:nowrap;max-width:none")]), encoding="utf-8")
    wraps = tmp_path / "wraps.html"
    wraps.write_text(site.page("wraps", [row("")]), encoding="utf-8")
    problems = site_check.check([over, wraps])
    assert any(p.startswith("over.html: 'not testable here") and "runs over the next column at 1400×900" in p
               for p in problems), problems
    assert not [p for p in problems if p.startswith("wraps.html")], problems


def test_the_committed_screenshots_show_the_committed_ledger():
    """docs/screenshots/ is made by `python benchmarks/site_check.py --screenshots docs/screenshots` from
    reports/generated/; its sidecar records the ledger's counts they show. Re-take them when this fails."""
    import json

    shots = REPO / "docs" / "screenshots"
    sidecar = json.loads((shots / site_check.SIDECAR).read_text(encoding="utf-8"))
    assert sidecar["claims_counts"] == site_check.ledger_counts(REPO / "reports" / "generated"), \
        "docs/screenshots/ are stale: run python benchmarks/site_check.py --screenshots docs/screenshots"
    for name in sidecar["pages"]:
        for size in map(tuple, sidecar["sizes"]):
            assert (shots / site_check.shot_name(Path(name), size)).is_file()

"""The static site `bench report --format html` writes: one look for every page, an index that links
them all, and a sortable leaderboard page per suite.

Every page is one self-contained HTML file (inline style, inline script, no network, no server), so the
reports directory opens from the file system and can be copied anywhere as it is.
"""

from __future__ import annotations

import html
import re
from collections import Counter

from bench.results.averages import off_declared
from bench.results.uncertainty import distinguishing_settings

STYLE = (
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;color:#1d1d1f;"
    "margin:20px auto;max-width:1500px;padding:0 20px;line-height:1.45;font-size:15px}"
    "h1{font-size:24px;margin:8px 0 12px}h2{font-size:19px;margin:26px 0 8px;border-bottom:1px solid #e3e3e3}"
    "h3{font-size:17px}nav{font-size:13px;margin-bottom:6px}a{color:#0b5cad}"
    "table{border-collapse:collapse;font-size:13.5px;margin:8px 0}"
    "th,td{padding:4px 9px;border-bottom:1px solid #e6e6e6;vertical-align:top;text-align:left}"
    "th{background:#f2f4f7;font-weight:600}"
    "td.n{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}td.l{white-space:nowrap}"
    "tr.g td{background:#f7f7f9;font-weight:600;font-style:italic}tr:hover td{background:#fbfbe8}"
    "small{color:#666}p.note,ul.note{font-size:13px;color:#444;max-width:1100px}ul.note li{margin:1px 0}"
    "table.sortable th{cursor:pointer}table.sortable th:after{content:' \\2195';color:#aaa;font-weight:400}"
    "figure{display:inline-block;margin:8px 16px 16px 0;vertical-align:top;max-width:100%}"
    "figure img{border:1px solid #ddd;width:520px;max-width:100%;height:auto}img{max-width:100%;height:auto}"
    "figcaption{font-size:13px;max-width:520px}ul{padding-left:20px}li{margin:3px 0}"
    "table.claims{table-layout:fixed;width:100%;min-width:1000px}div.line{margin:0 0 6px}"
    "div.line+div.line{border-top:1px dotted #ccc;padding-top:4px}"
    "table.pivot{font-size:12.5px}table.pivot th{font-size:12px;vertical-align:bottom;max-width:110px}"
    "table.pivot td.base{max-width:170px;font-size:12px;color:#444}tr.first td{border-top:2px solid #999}"
    "details{margin:10px 0}summary{cursor:pointer;font-weight:600}"
    "ul.findings{font-size:15px;max-width:1100px}ul.findings li{margin:4px 0}div.claims-summary{margin:6px 0 14px}"
    "table.raw td{overflow-wrap:anywhere}p,li{overflow-wrap:anywhere}code{overflow-wrap:anywhere}"
    "table.card{width:100%}table.card td.w{overflow-wrap:anywhere;min-width:80px}"
    # every table scrolls sideways inside its own box, its first column fixed, so no page is wider than a phone
    "div.scroll{overflow-x:auto;max-width:100%;margin:8px 0}div.scroll>table{margin:0}"
    "div.scroll td:first-child,div.scroll th:first-child{position:sticky;left:0;z-index:1;background:#fff;"
    "box-shadow:inset -1px 0 0 #e3e3e3}div.scroll th:first-child{background:#f2f4f7}"
    "div.scroll tr.g td:first-child{background:#f7f7f9}"
    # the index's answer: the finding in words, the verdicts' legend, one row per claim (reports/overview.py)
    "div.finding p{font-size:16px;max-width:1100px;margin:6px 0}div.finding p.note{font-size:13px}"
    "div.legend{font-size:13px;margin:8px 0 4px;display:flex;flex-wrap:wrap;gap:4px 12px;align-items:center}"
    "span.chip{display:inline-block;border-radius:3px;padding:0 6px;color:#fff;font-size:12px;white-space:nowrap}"
    "div.forest h3{font-size:14px;margin:10px 0 2px;color:#333}"
    "div.fr{display:grid;grid-template-columns:minmax(0,1fr) 210px 300px 190px;gap:2px 10px;align-items:center;"
    "padding:2px 0;border-bottom:1px solid #eee;font-size:13.5px}"
    "div.fr span.chip{white-space:normal;max-width:100%}"  # a long verdict wraps in its column, never over the next
    "div.fr a{color:#1d1d1f;text-decoration:none}div.fr a:hover{text-decoration:underline}"
    "div.fr small{font-variant-numeric:tabular-nums}"
    "div.plot{position:relative;height:14px;background:#fafafa;border-left:1px solid #ddd;border-right:1px solid #ddd}"
    "div.plot i{position:absolute;display:block}"
    "i.zero{top:0;bottom:0;border-left:1px dashed #999}i.bar{top:6px;height:2px}"
    "i.dot{top:3px;width:8px;height:8px;margin-left:-4px;border-radius:50%}"
    "i.paper{top:2px;width:7px;height:7px;margin-left:-5px;border:2px solid #c62828;transform:rotate(45deg)}"
    "@media (max-width:760px){body{padding:0 10px;margin:10px auto;font-size:14px}h1{font-size:21px}"
    "div.finding p{font-size:15px}"
    "div.fr{grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:2px 8px;padding:5px 0}"
    "div.fr a,div.fr div.plot{grid-column:1/-1}figure{margin:8px 0}table{font-size:12.5px}"
    "div.scroll td,div.scroll th{min-width:4.5em;overflow-wrap:break-word}div.scroll td.w{overflow-wrap:break-word}"
    "div.scroll td.l{white-space:normal}"
    "div.scroll tr:not(.g)>td:first-child,div.scroll th:first-child{min-width:6.5em}}"
)

# Click a header to sort by it (numbers as numbers; a cell's data-v, when set, is its sort value).
SORT_SCRIPT = (
    "document.querySelectorAll('table.sortable').forEach(function(t){"
    "t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){"
    "var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows),asc=th.getAttribute('data-asc')!=='1';"
    "t.querySelectorAll('th').forEach(function(h){h.removeAttribute('data-asc')});"
    "th.setAttribute('data-asc',asc?'1':'0');"
    "function key(r){var c=r.cells[i];return c.hasAttribute('data-v')?c.getAttribute('data-v'):c.textContent}"
    "rows.sort(function(x,y){var a=key(x),c=key(y),p=parseFloat(a),q=parseFloat(c);"
    "var d=(!isNaN(p)&&!isNaN(q))?p-q:a.localeCompare(c);return asc?d:-d});"
    "rows.forEach(function(r){b.appendChild(r)})})})});"
)

INDEX = "index.html"
CLAIMS = "claims.html"
PER_RUN = re.compile(r"^run\d+$")


def card_href(model: str) -> str:
    """The link to a model's card page: its file name (``bench.paths.file_name``), URL-encoded, so that a '#',
    '?' or '%' in a local directory's name still leads to the card."""
    from urllib.parse import quote

    from bench.paths import file_name

    return f"card-{quote(file_name(model, 'model name'), safe='')}.html"


def page(title: str, body: list[str], *, sortable: bool = False, back: bool = True) -> str:
    """A whole HTML page: the shared look, a link back to the index, and the sort script if asked."""
    out = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
           "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
           f"<title>{html.escape(title)}</title>", f"<style>{STYLE}</style></head><body>"]
    if back:
        out.append(f"<nav><a href=\"{INDEX}\">← all reports</a></nav>")
    out.append(scrolling("\n".join(body)))
    if sortable:
        out.append(f"<script>{SORT_SCRIPT}</script>")
    out += ["</body></html>", ""]
    return "\n".join(out)


def md_cell(text: str) -> str:
    """Text in a Markdown table cell: a '|' does not end the cell and no HTML tag starts (a model's name)."""
    return re.sub(r"<(?=[A-Za-z/!?])", "&lt;", text).replace("|", "\\|")


def scrolling(text: str) -> str:
    """Every table of ``text`` in a box of its own that scrolls sideways (its first column fixed), so that a
    wide table never widens the page."""
    return re.sub(r"<table\b", "<div class=\"scroll\"><table", text).replace("</table>", "</table></div>")


# ---------------------------------------------------------------- leaderboards ------------------

LEADERBOARD_COLUMNS = ("model", "task", "attack", "measure", "aggregation", "split", "seed", "value", "95% CI", "n",
                       "profile", "setting")
T_OVER_RUNS = re.compile(r"^t-over-")  # a t-interval over a handful of runs: never shown (docs/reports.md)


def leaderboard_name(suite: str) -> str:
    return f"leaderboard-{suite}.html"


def leaderboard_page(suite: str, rows: list[dict], label=lambda task: task, pivot_html: str = "",
                     words=lambda metric: metric) -> str:
    """The suite's measures one row per model (``pivot_html``), then every row but the per-run ones
    behind a toggle, sortable by any column; ``words`` says a metric's name in words."""
    shown = sorted((r for r in rows if not PER_RUN.match(r.get("aggregation") or "")),
                   key=lambda r: (r["model"], r["task"], r.get("attack") or "", r["metric"], r.get("aggregation") or "",
                                  r.get("split") or "", r.get("seed") or 0, r.get("config_hash") or ""))
    body = [f"<h1>Leaderboard: {html.escape(suite)}</h1>"]
    if pivot_html:
        body.append(pivot_html)
    body += [f"<details{'' if pivot_html else ' open'}><summary>All {len(shown)} result rows</summary>",
             f"<p class=\"note\">From the result files (per-run rows left out; every row is in "
             f"results/leaderboard-{html.escape(suite)}.csv). Values ×100 for correlations and rates; 95% CI as "
             "recorded in the row, except that a t-interval over a few attack runs is not shown (see the table "
             "above or Table 3 for the pooled one). ‡: computed on data that failed its sha256 check (run with "
             "--allow-unverified-data).</p>",
             ]
    configs = {(r["model"], r["task"], r.get("config_hash") or ""): _short(r.get("_config") or {}) for r in shown}
    setting = distinguishing_settings(configs)  # what tells apart one task's cells under several settings
    cells = [_leaderboard_row(r, label, setting[r["model"], r["task"], r.get("config_hash") or ""], words)
             for r in shown]
    kept = [i for i in range(len(LEADERBOARD_COLUMNS))  # no column that no row fills (e.g. attack in STS)
            if any(re.sub(r"<[^>]+>", "", row[i]).strip() for row in cells)]
    body.append("<table class=\"sortable raw\"><thead><tr>"
                + "".join(f"<th>{html.escape(LEADERBOARD_COLUMNS[i])}</th>" for i in kept) + "</tr></thead><tbody>")
    body += ["<tr>" + "".join(row[i] for i in kept) + "</tr>" for row in cells]
    body += ["</tbody></table>", "</details>"]
    return page(f"Leaderboard: {suite}", body, sortable=True)


def _short(config: dict) -> dict:
    """The options a reader can take in at a glance (an attack's whole description is in its cell file)."""
    return {k: v for k, v in config.items() if not isinstance(v, dict) and len(str(v)) <= 40}


def _number(x, decimals: int = 2) -> str:
    return "" if x is None else f"{float(x):.{decimals}f}"


def _leaderboard_row(r: dict, label, setting: str, words=lambda metric: metric) -> list[str]:
    value = r.get("value")
    unverified = "‡" if (r.get("_config") or {}).get("data_unverified") else ""
    shown_ci = (r.get("ci_low") is not None and r.get("ci_high") is not None
                and not T_OVER_RUNS.match(r.get("ci_method") or ""))
    ci = f"{_number(r.get('ci_low'))}–{_number(r.get('ci_high'))}" if shown_ci else ""
    cells = [f"<td>{html.escape(r['model'])}</td>", f"<td>{html.escape(label(r['task']))}</td>",
             f"<td>{html.escape(r.get('attack') or '')}</td>", f"<td>{html.escape(words(r['metric']))}</td>",
             f"<td>{html.escape(_aggregation(r))}</td>", f"<td>{html.escape(r.get('split') or '')}</td>",
             f"<td class=\"n\">{html.escape(str(r.get('seed') if r.get('seed') is not None else ''))}</td>",
             f"<td class=\"n\" data-v=\"{'' if value is None else repr(float(value))}\">{_number(value)}{unverified}</td>",
             f"<td class=\"n\" data-v=\"{repr(float(r['ci_low'])) if shown_ci else ''}\">{ci}</td>",
             f"<td class=\"n\">{html.escape(str(r.get('n') if r.get('n') is not None else ''))}</td>",
             f"<td>{html.escape(r.get('profile') or '')}</td>", f"<td>{html.escape(setting)}</td>"]
    return cells


def _aggregation(r: dict) -> str:
    """A row's aggregation; an average over other tasks than its protocol declares says which."""
    off = off_declared(r)
    return f"{r.get('aggregation') or ''} (over {off})" if off else r.get("aggregation") or ""


# ---------------------------------------------------------------- the index ---------------------

def index_page(rows: list[dict], *, leaderboards: list[str], tables: list[tuple[str, str, list[str]]],
               figures: list[tuple[str, str]], cards: list[str], claims: bool, skipped,
               claims_summary_html: str = "", findings: list[str] = (), pivot_html: str = "",
               robustness: str = "") -> str:
    """The answer first, then the links. ``claims_summary_html``: the claims' verdict counts and a small
    plot (made by reports/claims.py; empty: left out); ``findings``: sentences generated from the results;
    ``pivot_html``: one row per model. ``tables``: (title, file stem, its other formats' suffixes);
    ``figures``: (title, file stem); ``cards``: model names; ``claims``: link claims.html; ``robustness``: the
    robustness leaderboard's page (empty: none)."""
    esc = html.escape
    body = ["<h1>bench reports: what the results say</h1>"]
    if claims_summary_html.strip():
        body.append(f"<div class=\"claims-summary\">{claims_summary_html}</div>")
    if findings:
        body += ["<ul class=\"findings\">", *[f"<li>{esc(f)}</li>" for f in findings], "</ul>"]
    if pivot_html:
        body += ["<h2>Leaderboard: one row per model</h2>", pivot_html]
    body.append(_provenance_note(rows))
    body += ["<h2>Leaderboards</h2>", "<ul>"]
    if robustness:
        body.append(f"<li><a href=\"{robustness}\">robustness: which encoder is hardest to attack</a></li>")
    body += [f"<li><a href=\"{leaderboard_name(s)}\">{esc(s)}</a></li>" for s in leaderboards]
    body.append("</ul>")
    if claims:
        body += ["<h2>Claims</h2>", f"<p><a href=\"{CLAIMS}\">The papers' claims and what our results say about "
                                    "each</a></p>"]
    body += _tables_and_figures(tables, figures)
    if cards:
        body += ["<h2>Robustness cards</h2>", "<ul>"]
        body += [f"<li><a href=\"{card_href(m)}\">{esc(m)}</a></li>" for m in cards]
        body.append("</ul>")
    if skipped:
        body += ["<h2>Not generated yet</h2>", "<ul>"]
        body += [f"<li>{esc(title)}: {esc(why)}.</li>" for title, why in skipped]
        body.append("</ul>")
    return page("bench reports", body, back=False)


def _provenance_note(rows: list[dict]) -> str:
    cells = len({(r["model"], r["suite"], r["task"], r.get("seed"), r.get("config_hash")) for r in rows})
    profiles = Counter(r.get("profile") or "unknown" for r in rows)
    return (f"<p class=\"note\">Generated by <code>bench report</code> from {cells} result cells ({len(rows)} rows) "
            f"of {len({r['model'] for r in rows})} models; profiles: "
            + html.escape(", ".join(f"{k} ({v} rows)" for k, v in sorted(profiles.items())))
            + ". Every page here is a plain file: no server, no network. Do not edit; regenerate with "
              "<code>bench report</code>.</p>")


def _tables_and_figures(tables: list[tuple[str, str, list[str]]], figures: list[tuple[str, str]]) -> list[str]:
    esc = html.escape
    body = ["<h2>Paper tables</h2>", "<ul>"]
    for title, stem, others in tables:
        also = ", ".join(f"<a href=\"{stem}.{suffix}\">{suffix}</a>" for suffix in others)
        body.append(f"<li><a href=\"{stem}.html\">{esc(title)}</a>" + (f" <small>(also {also})</small>" if also else "")
                    + "</li>")
    body.append("</ul>")
    if figures:
        body.append("<h2>Figures</h2>")
        body += [f"<figure><a href=\"{stem}.png\"><img src=\"{stem}.png\" alt=\"{esc(title)}\"></a>"
                 f"<figcaption>{esc(title)} <small>(<a href=\"{stem}.pdf\">pdf</a>, plotted data "
                 f"<a href=\"{stem}.csv\">csv</a>)</small></figcaption></figure>" for title, stem in figures]
    return body

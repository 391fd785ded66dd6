"""The index's first screen: the claims ledger's answer in words, the legend of its verdicts, and every
primary line as a row a reader can take in (the claim's title, its verdict, our 95% CI against the
paper's Δ), grouped by kind of measure.

Read from claims.json only (its ``claims``, ``verdicts``, ``counts`` and pooled ``lines``), so any verdict
the ledger adds or renames shows here as it is named there, in the ledger's order, strongest first.
Plain HTML and CSS (no image): it scales from a phone to a wide screen.
"""

from __future__ import annotations

import html
import json
import re

from bench.scoring.stats import display_decimals, format_number
from reports.results import Catalog

CLAIMS_PAGE = "claims.html"
FOREST = "claims-forest.png"  # as reports/claims_pages.py names it
FEW = 3  # a verdict given to this many claims or fewer names them
# Verdict colours: those the forest plot draws (reports/claims_pages.py), then a palette in the ledger's order.
PALETTE = ("#1d4e89", "#6a3d9a", "#8c564b", "#00838f", "#5d4037", "#455a64")
PAPER_COLOUR = "#c62828"
OURS_COLOUR = "#1d4e89"


PAPER = "paper"  # the seed papers' own claims (a line's "kind"; a ledger without kinds has only these)


def primary_lines(data: dict, kind: str | None = PAPER) -> list[dict]:
    """Each claim's primary pooled line of ``kind`` (None: every kind: the papers' claims, controls, a
    placebo), with the claim's title and unit (the ledger's order)."""
    claims = {c["claim_id"]: c for c in data.get("claims") or []}
    lines = [ln for ln in data.get("lines") or [] if ln.get("seed") == "pooled" and ln.get("primary")
             and (kind is None or (ln.get("kind") or PAPER) == kind)]
    return [{**claims.get(ln["claim_id"], {}), **ln,
             "title": claims.get(ln["claim_id"], {}).get("title") or ln["claim_id"],
             "unit": claims.get(ln["claim_id"], {}).get("unit") or "Other measures"} for ln in lines]


def colours(data: dict) -> dict[str, str]:
    """verdict -> colour: the forest plot's for it, or for the verdict it refines ('not testable here (floor)'
    takes 'not testable here''s), else the palette in the ledger's order."""
    from reports.claims_pages import VERDICT_COLOURS

    rest, out = iter(PALETTE * 3), {}
    for verdict in data.get("verdicts") or {}:
        family = next((k for k in sorted(VERDICT_COLOURS, key=len, reverse=True) if verdict.startswith(k)), None)
        out[verdict] = VERDICT_COLOURS[family] if family else next(rest)
    return out


def _kind(unit: str) -> str:
    """'Attack success rate (points)' -> 'attack success rate'; 'STS (Spearman × 100, points)' -> 'STS'."""
    words = re.sub(r"\s*\(.*\)$", "", unit).split()
    return " ".join(w if any(c.isupper() for c in w[1:]) else w.lower() for w in words) or unit


def finding_sentences(data: dict, catalog: Catalog) -> list[str]:
    """The answer in two or three sentences: the papers' claims by verdict with their counts (naming the claims
    of a rare verdict), a kind of measure whose claims all share one verdict, the controls' and a placebo's
    verdicts apart (never counted as the papers' claims), and the scale."""
    lines, known = primary_lines(data), list(data.get("verdicts") or {})  # the ledger's order, strongest first
    out = []
    if lines:
        out.append(f"Of the {len(lines)} headline claims of the seed papers tested here: "
                   + _series(_verdict_parts(lines, known)) + ".")
        out += _uniform_kinds(lines, data.get("verdicts") or {})
    for kind, mine in _other_kinds(data):
        heading = kind_heading(kind)
        out.append(heading + (" " if heading.endswith(("?", ":", ".")) else ": ")
                   + _series(_verdict_parts(mine, known)) + "." + _placebo_failure(mine)
                   + (f" {data['placebo_battery']}" if kind == "placebo" and data.get("placebo_battery") else ""))
    scale = scale_text(lines or primary_lines(data, None), catalog)
    if scale:
        out.append(scale)
    return out


def _verdict_parts(lines: list[dict], known: list[str]) -> list[str]:
    """'2 replicated (title; title)', '28 paper's effect excluded', ... in the ledger's order of verdicts."""
    by_verdict: dict[str, list[dict]] = {}
    for ln in lines:
        by_verdict.setdefault(ln["verdict"], []).append(ln)
    order = [v for v in known if v in by_verdict] + sorted(set(by_verdict) - set(known))
    return [f"{len(by_verdict[v])} {v}" + (f" ({'; '.join(ln['title'] for ln in by_verdict[v])})"
                                           if len(by_verdict[v]) <= FEW else "") for v in order]


def _other_kinds(data: dict) -> list[tuple[str, list[dict]]]:
    """(kind, its primary lines) for each kind of claim but the papers' (controls, a placebo), in ledger order."""
    lines = primary_lines(data, None)
    kinds = [k for k in dict.fromkeys(ln.get("kind") or PAPER for ln in lines) if k != PAPER]
    return [(k, [ln for ln in lines if ln.get("kind") == k]) for k in kinds]


def _placebo_failure(lines: list[dict]) -> str:
    """' The placebo fails: ...' when a placebo's line says so (reports/claims.py), ' 1 of the 2 placebos
    fails: ...' when there are several, else ''."""
    from reports.claims import PLACEBO_FAILED, PLACEBO_REASON

    failed = sum(PLACEBO_FAILED in (ln.get("verdict_note") or "") for ln in lines)
    if not failed:
        return ""
    if len(lines) == 1:
        return f" {PLACEBO_FAILED[0].upper()}{PLACEBO_FAILED[1:]}."
    return f" {failed} of the {len(lines)} placebos fail{'s' * (failed == 1)}: {PLACEBO_REASON}."


def kind_heading(kind: str) -> str:
    """How the claims page heads a kind of claim (reports/claims_pages.py), else the kind itself."""
    from reports import claims_pages

    return getattr(claims_pages, "KIND_HEADINGS", {}).get(kind) or kind.capitalize()


def _series(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _uniform_kinds(lines: list[dict], meanings: dict[str, str]) -> list[str]:
    """'All 19 claims on attack success rate: paper's effect excluded (what that verdict means, in the ledger's
    words).', one sentence per verdict that every claim of a kind of measure (at least FEW) shares."""
    kinds: dict[str, list[str]] = {}
    for ln in lines:
        kinds.setdefault(ln["unit"], []).append(ln["verdict"])
    shared: dict[str, list[str]] = {}  # verdict -> 'all 19 claims on attack success rate', ...
    for unit, verdicts in kinds.items():
        if len(verdicts) >= FEW and len(set(verdicts)) == 1:
            shared.setdefault(verdicts[0], []).append(f"{len(verdicts)} claims on {_kind(unit)}")
    return [f"All {_series(where)}: {verdict}"
            + (f" ({meanings[verdict]})." if meanings.get(verdict, "").strip(". ") else ".")
            for verdict, where in shared.items()]


def scale_text(lines: list[dict], catalog: Catalog) -> str:
    """At what scale: the bases, training steps, profiles and devices of the claims' method models (their
    cards in plugins.json), and how many training seeds a claim has."""
    models = [catalog.models.get(ln.get("method_model") or "") or {} for ln in lines]
    trained = [m for m in models if m.get("training")]
    bases = sorted({m.get("base") for m in trained if m.get("base")})
    named = [catalog.group(b) if b in catalog.models else b for b in bases]
    steps = sorted({m["training"].get("steps") for m in trained if m["training"].get("steps")})
    profiles = sorted({m.get("profile") for m in trained if m.get("profile")})
    devices = sorted({str(m["training"].get("device")).upper() for m in trained if m["training"].get("device")})
    seeds = sorted({int(ln["seeds"]) for ln in lines if ln.get("seeds")})
    if not (named or seeds):
        return ""
    how = [f"the {'/'.join(profiles)} profile"] if profiles else []
    how += [f"on {'/'.join(devices)}"] if devices else []
    text = "At this scale: encoders trained " + (f"{'/'.join(map(str, steps))} steps " if steps else "")
    text += (f"({', '.join(how)}) " if how else "") + "from " + (", ".join(named) or "their bases")
    if seeds:
        text += f"; {seeds[0]}{'–' + str(seeds[-1]) if seeds[-1] != seeds[0] else ''} training seed" \
                f"{'s' if seeds[-1] != 1 else ''} per claim"
    return text + "."


# ---------------------------------------------------------------- HTML ------------------------------

def summary_html(files: dict, catalog: Catalog) -> str:
    """The index's opening: the finding in words, the legend, and the claims by kind of measure; empty
    when this render made no ledger."""
    if "claims.json" not in files:
        return ""
    data = json.loads(files["claims.json"])
    lines = primary_lines(data, None)
    if not lines:
        return ""
    esc = html.escape
    palette = colours(data)
    out = ["<div class=\"finding\">"] + [f"<p>{esc(s)}</p>" for s in finding_sentences(data, catalog)]
    out.append(f"<p class=\"note\">Each claim is tested as method − baseline with the training seed as the unit, "
               f"Holm's correction over one primary line per claim; the <a href=\"{CLAIMS_PAGE}\">claims ledger</a> "
               "gives every line, seed and setting"
               + (f" (and <a href=\"{FOREST}\">the forest plot as an image</a>)" if FOREST in files else "")
               + ".</p></div>")
    out.append(legend_html(data, palette))
    out.append(forest_html(lines, palette))
    return "\n".join(out)


def legend_html(data: dict, palette: dict[str, str]) -> str:
    esc = html.escape
    meanings = data.get("verdicts") or {}
    drawn = {ln["verdict"] for ln in primary_lines(data, None)}  # the verdicts of the rows below, in the ledger's order
    chips = [f"<span class=\"chip\" style=\"background:{palette.get(v, OURS_COLOUR)}\" "
             f"title=\"{esc(meanings.get(v, ''))}\">{esc(v)}</span>" for v in [*meanings, *sorted(drawn - set(meanings))]
             if v in drawn]
    return ("<div class=\"legend\"><span class=\"key\"><b>Legend</b>: bar and dot, ours (pooled Δ, 95% CI, in "
            "its verdict's colour);</span><span class=\"key\"><i style=\"display:inline-block;width:7px;height:7px;"
            f"border:2px solid {PAPER_COLOUR};transform:rotate(45deg);margin:0 3px\"></i> the paper's Δ;</span>"
            "<span class=\"key\">dashed: no difference.</span> Verdicts: " + " ".join(chips) + "</div>")


def forest_html(lines: list[dict], palette: dict[str, str]) -> str:
    """One block per kind of measure (its own scale), one row per claim: title (its id on hover, linking
    its line in the ledger), verdict, the numbers, and the interval drawn against the paper's Δ."""
    units: dict[tuple[bool, str], list[dict]] = {}  # the papers' claims first, then controls, a placebo
    for ln in lines:
        kind = ln.get("kind") or PAPER
        head = ln["unit"] if kind == PAPER else f"{kind_heading(kind)} · {ln['unit']}"
        units.setdefault((kind != PAPER, head), []).append(ln)
    out = ["<div class=\"forest\">"]
    for (_, unit), mine in sorted(units.items(), key=lambda item: item[0][0]):
        out.append(f"<h3>{html.escape(unit)}</h3>")
        scale = _scale(mine)
        out += [_row(ln, palette, scale) for ln in mine]
    out.append("</div>")
    return "\n".join(out)


def _scale(lines: list[dict]) -> tuple[float, float]:
    xs = [0.0] + [float(ln[k]) for ln in lines for k in ("ci_low", "ci_high", "paper_delta", "delta")
                  if ln.get(k) is not None]
    low, high = min(xs), max(xs)
    pad = (high - low) * 0.05 or 1.0
    return low - pad, high + pad


def _row(ln: dict, palette: dict[str, str], scale: tuple[float, float]) -> str:
    esc = html.escape
    colour = palette.get(ln["verdict"], OURS_COLOUR)
    note = f": {ln['verdict_note']}" if ln.get("verdict_note") else ""
    title = (f"<a href=\"{CLAIMS_PAGE}#{esc(ln['claim_id'])}\" title=\"{esc(ln['claim_id'])} "
             f"({esc(ln.get('paper') or '')} {esc(ln.get('table') or '')})\">{esc(ln['title'])}</a>")
    verdict = (f"<span><span class=\"chip\" style=\"background:{colour}\" title=\"{esc(ln['verdict'] + note)}\">"
               f"{esc(ln['verdict'])}</span></span>")
    return (f"<div class=\"fr\">{title}{verdict}<small>{esc(numbers_text(ln))}</small>"
            f"{_plot(ln, colour, scale)}</div>")


def numbers_text(ln: dict) -> str:
    """'ours +0.35 [−0.36, +1.16], 3 seeds; paper +1.45'."""
    parts = []
    if ln.get("delta") is not None and ln.get("ci_low") is not None:
        k = display_decimals(ln["ci_low"], ln["ci_high"])
        seeds = f", {ln['seeds']} seed{'s' * (ln['seeds'] != 1)}" if ln.get("seeds") else ""
        low, high = (format_number(ln[key], k, signed=True) for key in ("ci_low", "ci_high"))
        parts.append(f"ours {format_number(ln['delta'], k, signed=True)} [{low}, {high}]{seeds}")
    if ln.get("paper_delta") is not None:
        parts.append(f"paper {format_number(ln['paper_delta'], 2, signed=True)}")
    return "; ".join(parts) or "–"


def _plot(ln: dict, colour: str, scale: tuple[float, float]) -> str:
    low, high = scale

    def at(x) -> str:
        return f"{100 * (float(x) - low) / (high - low):.1f}%"

    marks = [f"<i class=\"zero\" style=\"left:{at(0)}\"></i>"]
    if ln.get("ci_low") is not None and ln.get("ci_high") is not None:
        width = f"{100 * (float(ln['ci_high']) - float(ln['ci_low'])) / (high - low):.1f}%"
        marks.append(f"<i class=\"bar\" style=\"left:{at(ln['ci_low'])};width:{width};background:{colour}\"></i>")
    if ln.get("delta") is not None:
        marks.append(f"<i class=\"dot\" style=\"left:{at(ln['delta'])};background:{colour}\"></i>")
    if ln.get("paper_delta") is not None:
        marks.append(f"<i class=\"paper\" style=\"left:{at(ln['paper_delta'])}\"></i>")
    return f"<div class=\"plot\" title=\"{html.escape(numbers_text(ln))}\">{''.join(marks)}</div>"

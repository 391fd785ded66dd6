"""Which encoder is hardest to attack? The robustness leaderboard: every model with MR attacks against
frozen victims under one setting, five recipes, each attack success rate with its 95% interval, beside the
victims' clean accuracy, the attack-free displacement (suites/perturbation.py) and STS.

One setting only (``SETTING``: the study's MR protocol), so every number in a row was measured the same way;
the intervals are the pivot's (reports/pivot.py): over the two attack runs, a bootstrap of the pooled attacked
examples run by run, never a t-interval over two values. A model is ranked by its mean attack success rate
over the recipes it has; a model missing some of them is ranked only among models with the same set and is
marked (a mean over fewer, easier or harder, attacks is not comparable). Reads result rows only; nothing is
filled in: a missing cell is an empty field.
"""

from __future__ import annotations

import csv
import html
import io
import statistics
from dataclasses import dataclass, replace

from bench.results.store import csv_safe
from reports import pivot, site
from reports.results import EvidenceIndex, Stat

NAME = "robustness-leaderboard"
TITLE = "Robustness leaderboard: which encoder is hardest to attack (MR, frozen victims)"
RECIPES = pivot.RECIPES
SETTING = {**pivot.ATTACK_SETTING, "limit": 200, "runs": 2}
COMMAND = ("bench run --model MODEL --suite adversarial --task mr --limit 200 --runs 2 --victim frozen "
           "--constraints unified --recipe textfooler --recipe textbugger --recipe pwws --recipe bae "
           "--recipe bert-attack --profile study --dtype fp32")
ATTACKS = tuple(pivot.PivotColumn(f"{recipe} ASR", "adversarial",
                                  {"task": "mr", "metric": "attack_success_rate", "attack": recipe},
                                  config=SETTING, runs=True, better="lower") for recipe in RECIPES)
BESIDE = (pivot.PivotColumn("clean accuracy", "adversarial", {"task": "mr", "metric": "clean_accuracy"},
                            config=SETTING, runs=True),
          pivot.PivotColumn("displacement", "perturbation", {"task": "mr-attacks", "metric": "displacement"},
                            better="lower"),
          replace(pivot.COLUMNS[0], label="STS avg"))  # the pivot's: an average over other tasks is marked


@dataclass
class Entry:
    model: str
    attacks: dict[str, Stat]  # recipe -> its attack success rate (only the recipes measured)
    beside: list[tuple[Stat, str]]  # BESIDE's columns, in order: the value, and which tasks an average over
    # other tasks than the column's is over ("" when it is the column's own)

    @property
    def recipes(self) -> tuple[str, ...]:
        return tuple(self.attacks)

    @property
    def mean_asr(self) -> float:
        return statistics.fmean(s.mean for s in self.attacks.values())


def entries(rows: list[dict], evidence: EvidenceIndex | None = None) -> list[Entry]:
    """One entry per model with at least one attack in the setting."""
    by_model: dict[str, list[dict]] = {}
    for r in rows:
        by_model.setdefault(r["model"], []).append(r)
    found = []
    for model, mine in sorted(by_model.items()):
        stats = [pivot.cell(pivot.rows_of(mine, col), col, evidence) for col in ATTACKS]
        attacks = {r: s for r, s in zip(RECIPES, stats) if s.mean is not None}
        if attacks:
            found.append(Entry(model, attacks, [pivot.ranked_cell(pivot.rows_of(mine, c), c, evidence) for c in BESIDE]))
    return found


def ranked(found: list[Entry]) -> list[tuple[str, Entry]]:
    """(rank label, entry): the models with all five recipes first, by mean attack success (lowest = hardest
    to attack); then each smaller recipe set, ranked within itself and marked."""
    groups: dict[tuple[str, ...], list[Entry]] = {}
    for e in found:
        groups.setdefault(e.recipes, []).append(e)
    out = []
    for recipes in sorted(groups, key=lambda rs: (-len(rs), rs)):
        mark = "" if recipes == RECIPES else f" ({len(recipes)} of {len(RECIPES)} recipes)"
        for i, e in enumerate(sorted(groups[recipes], key=lambda e: (e.mean_asr, e.model)), 1):
            out.append((f"{i}{mark}", e))
    return out


def _num(x) -> str:
    return "" if x is None else f"{x:.2f}"


def _beside_text(s: Stat, note: str) -> str:
    if s.mean is None:
        return ""
    return pivot.stat_text(s) + (f" † ({note})" if note else "")


def table(found: list[Entry]) -> tuple[list[str], list[list[str]]]:
    head = ["rank", "model", "mean ASR", *[f"{c.label} [95% CI]" for c in ATTACKS], *[c.label for c in BESIDE]]
    lines = [[rank, e.model, _num(e.mean_asr),
              *[pivot.stat_text(e.attacks[r]) if r in e.attacks else "" for r in RECIPES],
              *[_beside_text(s, note) for s, note in e.beside]]
             for rank, e in ranked(found)]
    return head, lines


def to_csv(found: list[Entry]) -> str:
    cols = ["rank", "model", "recipes", "mean_asr", *[f"{r}_{x}" for r in RECIPES for x in ("asr", "low", "high")],
            "clean_accuracy", "displacement", "sts_avg"]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(cols)
    for rank, e in ranked(found):
        parts = [x for r in RECIPES for x in _triple(e.attacks.get(r))]
        line = [rank, e.model, " ".join(e.recipes), e.mean_asr, *parts, *[s.mean for s, _ in e.beside]]
        writer.writerow([csv_safe(x) for x in line])
    return buf.getvalue()


def _triple(s: Stat | None) -> tuple:
    if s is None:
        return None, None, None
    return s.mean, s.ci.low if s.ci.present else None, s.ci.high if s.ci.present else None


INTRO = ("Lower attack success = harder to attack. Every number: MR's attack set, 2 runs of 200 examples, "
         "frozen victims (a logistic head on the encoder's embeddings), the unified constraints; 95% intervals "
         "by a bootstrap of the attacked examples run by run. Displacement: how far an attack's edit moves the "
         "embedding, in units of the distance between unrelated sentences (lower = moves less), measured "
         "without a victim. A model with fewer than five recipes is ranked only among models with the same "
         "recipes, and marked; an STS average over other tasks than the seven is marked † with its tasks. "
         "One command per encoder:")


def to_md(found: list[Entry]) -> str:
    head, lines = table(found)
    out = [f"# {TITLE}", "", "Generated by `bench report` from the result files; do not edit.", "", INTRO, "",
           f"    {COMMAND}", "", "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    out += ["| " + " | ".join(site.md_cell(c) for c in line) + " |" for line in lines]
    return "\n".join(out) + "\n"


def to_html_body(found: list[Entry]) -> list[str]:
    head, lines = table(found)
    numeric = ' class="n"'
    rows = ["<tr>" + "".join(f"<td{'' if i == 1 else numeric}>{html.escape(c)}</td>" for i, c in enumerate(line))
            + "</tr>" for line in lines]
    return [f"<h1>{html.escape(TITLE)}</h1>", f"<p class=\"note\">{html.escape(INTRO)}</p>",
            f"<p><code>{html.escape(COMMAND)}</code></p>",
            "<table class=\"sortable\"><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head)
            + "</tr></thead><tbody>", *rows, "</tbody></table>"]


def generate(rows: list[dict], evidence: EvidenceIndex | None = None) -> dict[str, str] | None:
    found = entries(rows, evidence)
    if not found:
        return None
    return {f"{NAME}.csv": to_csv(found), f"{NAME}.md": to_md(found),
            f"{NAME}.html": site.page(TITLE, to_html_body(found), sortable=True)}

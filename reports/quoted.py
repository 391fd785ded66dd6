"""Numbers the README and the manual quote from the results, tied to the generated files so they cannot drift.

A quoted number is written between two HTML comments (invisible when the Markdown is rendered):

    <!-- q: leaderboard-sts model=minilm-mlm task=avg metric=spearman aggregation=mean-of-tasks -->57.95 [56.85, 59.04]<!-- /q -->

The opening names a CSV beside the results (``leaderboard-sts`` is ``results/leaderboard-sts.csv``) or
a generated report (``reports/scale-robustembed-vs-simcse`` is ``reports/generated/….csv``) and the column
values that pick exactly one row of it (``key=value``; ``key~=text``: the value contains the text; %20
is a space). The quoted text is the row's ``value`` (a ledger row's ``delta``), or that
and its 95% CI (``V [L, H]``), each rounded to as many decimals as the text shows; with the key
``show=COLUMN`` it is that column alone (``show=p``: a ledger row's p; a column of words, such as
``show=verdict``, is quoted whole); with the key
``rows=count`` it is how many rows match (e.g. the ledger's primary lines with one verdict). ``check`` lists every
quote that differs from its row (tests/test_readme.py runs it on the README and docs/); ``fill``
rewrites the quotes from the rows, e.g. after a new render (``python -m reports.quoted --fill``).
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path
from urllib.parse import unquote

QUOTE = re.compile(r"<!-- q: (?P<file>[\w./-]+)(?P<keys>(?: [\w.]+~?=[^\s>]+)+) -->(?P<text>.*?)<!-- /q -->")
NUMBER = re.compile(r"[+\-−]?\d[\d,]*(?:\.\d+)?")


def _rows(results_dir: Path, name: str, cache: dict) -> list[dict]:
    if name not in cache:
        reports = name.startswith("reports/")
        path = (Path(results_dir).parent / "reports" / "generated" / f"{name[len('reports/'):]}.csv" if reports
                else Path(results_dir) / f"{name}.csv")
        with path.open(encoding="utf-8", newline="") as f:
            cache[name] = list(csv.DictReader(f))
    return cache[name]


def _decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def _number(text: str) -> float:
    return float(text.replace("−", "-").replace(",", ""))


def _formatted(value: float, like: str) -> str:
    """``value`` written as ``like`` is: its decimals, its thousands commas, its sign style."""
    k = _decimals(like)
    text = f"{abs(value):,.{k}f}" if "," in like else f"{abs(value):.{k}f}"
    sign = "−" if "−" in like else "-"
    if value < 0 and float(text.replace(",", "")) != 0:
        return sign + text
    return ("+" + text) if like.startswith("+") else text


def _actual(match: re.Match, results_dir: Path, cache: dict) -> tuple[list[float] | None, str]:
    """The row's numbers the quote names (value, then CI), or None and why not."""
    keys = dict(pair.split("=", 1) for pair in match.group("keys").split())
    count = keys.pop("rows", None) == "count"
    shown = keys.pop("show", None)

    def fits(row: dict) -> bool:
        return all(unquote(v) in (row.get(k[:-1]) or "") if k.endswith("~") else row.get(k) == unquote(v)
                   for k, v in keys.items())

    try:
        rows = [r for r in _rows(results_dir, match.group("file"), cache) if fits(r)]
    except OSError as exc:
        return None, f"cannot read {match.group('file')}.csv ({exc})"
    if count:
        return [float(len(rows))], ""
    if len(rows) != 1:
        return None, f"{len(rows)} rows of {match.group('file')}.csv match {keys}: name exactly one"
    row = rows[0]
    if shown:
        if row.get(shown) in (None, ""):
            return None, f"no {shown} in that row"
        try:
            return [float(row[shown])], ""
        except ValueError:  # a word (a verdict): quoted whole
            return [row[shown]], ""
    value = "value" if "value" in row else "delta"  # the claims ledger's rows quote their difference
    return [float(row[c]) for c in (value, "ci_low", "ci_high") if row.get(c) not in (None, "")], ""


def check(text: str, results_dir: Path, where: str = "") -> list[str]:
    """Every quote in ``text`` whose numbers differ from its row (at the quote's precision)."""
    problems, cache = [], {}
    for m in QUOTE.finditer(text):
        quoted = NUMBER.findall(m.group("text"))
        actual, why = _actual(m, results_dir, cache)
        if actual is None:
            problems.append(f"{where}: {m.group(0)[:120]}: {why}")
            continue
        if isinstance(actual[0], str):
            if m.group("text") != actual[0]:
                problems.append(f"{where}: quotes {m.group('text')!r}, the results say {actual[0]!r}")
            continue
        wanted = [_formatted(a, q) for a, q in zip(actual, quoted)]
        if not quoted or len(quoted) > len(actual) or [_number(w) for w in wanted] != [_number(q) for q in quoted]:
            problems.append(f"{where}: quotes {m.group('text')!r}, the results say {' / '.join(wanted) or actual}")
    return problems


def fill(text: str, results_dir: Path) -> str:
    """``text`` with every quote rewritten from its row (its shape and precision kept)."""
    cache = {}

    def one(m: re.Match) -> str:
        actual, _ = _actual(m, results_dir, cache)
        if actual is None:
            return m.group(0)
        if isinstance(actual[0], str):
            return m.group(0).replace(f"-->{m.group('text')}<!--", f"-->{actual[0]}<!--")
        numbers = iter(actual)
        new = NUMBER.sub(lambda n: _formatted(next(numbers, _number(n.group(0))), n.group(0)), m.group("text"))
        return m.group(0).replace(f"-->{m.group('text')}<!--", f"-->{new}<!--")

    return QUOTE.sub(one, text)


def pages(repo: Path) -> list[Path]:
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]


def main(argv: list[str]) -> int:
    repo = Path(__file__).resolve().parents[1]
    results = repo / "results"
    if "--fill" in argv:
        for page in pages(repo):
            page.write_text(fill(page.read_text(encoding="utf-8"), results), encoding="utf-8")
    problems = [p for page in pages(repo) for p in check(page.read_text(encoding="utf-8"), results, page.name)]
    print("\n".join(problems) or "every quoted number matches the results")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

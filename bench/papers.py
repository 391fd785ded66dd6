"""The papers' own numbers: ``reports/paper_values.csv``, the one place that holds them.

One row per printed number: paper, table, the paper's row label (``row_model``), the models that row
stands for (``model``: space-separated names, empty when we have no such model), suite, task, split,
metric, attack, value and a note. Where two papers print different numbers for one model (SimCSE's
own Table 5 vs RobustEmbed's reproduction in its Table 1), both rows are there, each with its source;
a result row shows one (``for_row``: the model's ``paper_ref`` first, else the first listed) and
names it in ``paper_source``. Reports read the same file through reports/paper.py.
"""

from __future__ import annotations

import csv
import importlib.util
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from bench.errors import BenchError

FIELDS = ("paper", "table", "row_model", "model", "suite", "task", "split", "metric", "attack", "value", "note")


def _csv_path() -> Path:
    # Beside the reports package (package data), found without importing it.
    spec = importlib.util.find_spec("reports")
    locations = list(spec.submodule_search_locations or []) if spec else []
    if locations:
        return Path(locations[0]) / "paper_values.csv"
    return Path(__file__).resolve().parents[1] / "reports" / "paper_values.csv"


PAPER_VALUES = _csv_path()


@dataclass(frozen=True)
class PaperRef:
    """Where a table's paper values come from, e.g. ("RobustEmbed", "Table 1")."""

    paper: str
    table: str

    def __str__(self) -> str:
        return f"{self.paper} {self.table}"

    @classmethod
    def parse(cls, text: str) -> "PaperRef | None":
        """"SimCSE Table 5" -> PaperRef("SimCSE", "Table 5"); "" -> None."""
        paper, sep, number = text.strip().rpartition(" Table ")
        if not sep:
            paper, sep, number = text.strip().rpartition(" Figure ")
            return cls(paper, f"Figure {number}") if sep else None
        return cls(paper, f"Table {number}")


class PaperValues:
    def __init__(self, rows: list[dict]):
        self.rows = rows
        self._index: dict[tuple, float] = {}
        self._by_model: dict[tuple, list[dict]] = {}
        for r in rows:
            for model in r["model"].split():
                key = (r["paper"], r["table"], model, r["suite"], r["task"], r["metric"], r["attack"])
                self._index[key + (r["split"],)] = float(r["value"])
                self._index.setdefault(key + (None,), float(r["value"]))
                self._by_model.setdefault((model, r["suite"], r["task"], r["metric"], r["attack"]), []).append(r)

    @classmethod
    def load(cls, path: Path = PAPER_VALUES) -> "PaperValues":
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        bad = [i for i, r in enumerate(rows, 2) if set(FIELDS) - set(r) or r["value"] in ("", None)]
        if bad:
            raise BenchError(f"{path}: line {bad[0]} lacks a field or a value; columns are {', '.join(FIELDS)}.")
        return cls(rows)

    def get(self, ref: PaperRef | None, model: str, suite: str, task: str, metric: str, attack: str = "",
            split: str | None = None) -> float | None:
        """The paper's value for this model and cell; ``split=None`` matches any split."""
        if ref is None:
            return None
        return self._index.get((ref.paper, ref.table, model, suite, task, metric, attack or "", split))

    def for_row(self, model: str, suite: str, task: str, metric: str, attack: str = "", split: str = "",
                prefer: str = "") -> tuple[float | None, str]:
        """(value, "Paper Table N") for a result row, or (None, ""). A CSV row with an empty split matches any
        split. Among several sources the ``prefer``red one (the model's ``paper_ref``) wins, else the first."""
        hits = [r for r in self._by_model.get((model, suite, task, metric, attack or ""), [])
                if not r["split"] or not split or r["split"] == split]
        if not hits:
            return None, ""
        chosen = next((r for r in hits if f"{r['paper']} {r['table']}" == prefer), hits[0])
        return float(chosen["value"]), f"{chosen['paper']} {chosen['table']}"


@lru_cache(maxsize=1)
def paper_values() -> PaperValues:
    return PaperValues.load()

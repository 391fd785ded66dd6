"""The papers' own numbers: ``reports/paper_values.csv``, transcribed from ../shared/papers/.

One row per printed number: paper, table, the paper's row label (``row_model``), the registry
models that row stands for (``model``: space-separated names, empty when we have no such model),
suite, task, split, metric, attack, value and a note. Nothing else in the project holds a paper
number for a report; a model that matches no row gets no paper value.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

PAPER_VALUES = Path(__file__).with_name("paper_values.csv")
FIELDS = ("paper", "table", "row_model", "model", "suite", "task", "split", "metric", "attack", "value", "note")


@dataclass(frozen=True)
class PaperRef:
    """Where a table's paper values come from, e.g. ("RobustEmbed", "Table 1")."""

    paper: str
    table: str

    def __str__(self) -> str:
        return f"{self.paper} {self.table}"


class PaperValues:
    def __init__(self, rows: list[dict]):
        self.rows = rows
        self._index: dict[tuple, float] = {}
        for r in rows:
            for model in r["model"].split():
                key = (r["paper"], r["table"], model, r["suite"], r["task"], r["metric"], r["attack"])
                self._index[key + (r["split"],)] = float(r["value"])
                self._index.setdefault(key + (None,), float(r["value"]))

    @classmethod
    def load(cls, path: Path = PAPER_VALUES) -> "PaperValues":
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        bad = [i for i, r in enumerate(rows, 2) if set(FIELDS) - set(r) or r["value"] in ("", None)]
        if bad:
            from bench.errors import BenchError

            raise BenchError(f"{path}: line {bad[0]} lacks a field or a value; columns are {', '.join(FIELDS)}.")
        return cls(rows)

    def reference_rows(self, ref: PaperRef | None) -> list[str]:
        """The paper's row labels in this table (e.g. "SimCSE-BERT_base"), in the paper's order."""
        if ref is None:
            return []
        return list(dict.fromkeys(r["row_model"] for r in self.rows if (r["paper"], r["table"]) == (ref.paper, ref.table)))

    def by_label(self, ref: PaperRef | None, row_model: str, suite: str, task: str, metric: str, attack: str = "",
                 split: str | None = None) -> float | None:
        """A paper value by the paper's own row label (for reference rows, whatever our registry holds)."""
        if ref is None:
            return None
        for r in self.rows:
            if ((r["paper"], r["table"], r["row_model"], r["suite"], r["task"], r["metric"], r["attack"])
                    == (ref.paper, ref.table, row_model, suite, task, metric, attack or "")
                    and (split is None or r["split"] in ("", split))):
                return float(r["value"])
        return None

    def get(self, ref: PaperRef | None, model: str, suite: str, task: str, metric: str, attack: str = "",
            split: str | None = None) -> float | None:
        """The paper's value for this model and cell; ``split=None`` matches any split."""
        if ref is None:
            return None
        return self._index.get((ref.paper, ref.table, model, suite, task, metric, attack or "", split))

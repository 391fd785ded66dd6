"""The papers' own numbers: ``reports/paper_values.csv``, transcribed from ../shared/papers/.

The reader lives in the kernel (``bench.papers``), so that result rows and reports take their paper
values from this one file; this module is its name inside reports/.
"""

from __future__ import annotations

from bench.papers import FIELDS, PAPER_VALUES, PaperRef, PaperValues  # noqa: F401

__all__ = ["FIELDS", "PAPER_VALUES", "PaperRef", "PaperValues", "reference_rows", "by_label"]


def reference_rows(values: PaperValues, ref: PaperRef | None) -> list[str]:
    """The paper's row labels in this table (e.g. "SimCSE-BERT_base"), in the paper's order."""
    if ref is None:
        return []
    return list(dict.fromkeys(r["row_model"] for r in values.rows if (r["paper"], r["table"]) == (ref.paper, ref.table)))


def by_label(values: PaperValues, ref: PaperRef | None, row_model: str, suite: str, task: str, metric: str,
             attack: str = "", split: str | None = None) -> float | None:
    """A paper value by the paper's own row label (reference rows), whatever our registry holds."""
    if ref is None:
        return None
    for r in values.rows:
        if ((r["paper"], r["table"], r["row_model"], r["suite"], r["task"], r["metric"], r["attack"])
                == (ref.paper, ref.table, row_model, suite, task, metric, attack or "")
                and (split is None or r["split"] in ("", split))):
            return float(r["value"])
    return None

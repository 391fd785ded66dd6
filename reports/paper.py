"""The papers' own numbers: ``reports/paper_values.csv``, transcribed from ../shared/papers/.

The reader lives in the kernel (``bench.papers``), so that result rows and reports take their paper
values from this one file; this module is its name inside reports/.
"""

from __future__ import annotations

from bench.papers import FIELDS, PAPER_VALUES, PaperRef, PaperValues  # noqa: F401

__all__ = ["FIELDS", "PAPER_VALUES", "PaperRef", "PaperValues"]

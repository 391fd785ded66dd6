"""The one schema of a result cell, checked on every read and every write (``bench.results.store``).

A cell is ``{"cell": key, "config": {...}, "written_at": ..., "results": [row, ...], "evidence_sha256": ...}``.
What is refused: missing or mistyped keys, an empty ``results``, an unknown metric, a number that is not finite
or is beyond any real score (|x| > 1e9), ``n`` that is not a non-negative integer, an interval whose ends are
inverted or that does not contain its value, a row that names another cell than its own, a ``weights_sha256``
that is not 64 hex digits. ``CellError`` says the
first few problems in words ("row 0: n -5 is negative"); ``bench.schema_words`` does the same for a user-edited
file (models.toml, claims.toml).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, ValidationError,
                      field_validator, model_validator)

# Every metric a built-in suite writes; a suite from a plug-in file adds its own (``declare_metrics``, when the
# runner loads it). The write of a cell with an unknown one fails, so a misspelt metric never reaches a table.
METRICS = frozenset({
    "spearman", "pearson", "acc", "dev_acc", "accuracy", "f1",
    "attack_success_rate", "avg_queries", "words_perturbed_pct", "examples_per_s", "original_accuracy",
    "accuracy_under_attack", "accuracy_reduction", "clean_accuracy", "clean_mcc",
    "align", "uniform", "displacement", "control_displacement", "vs_control", "cos_perturbed", "cos_control",
    "cos_unrelated",
    "pearson_clean", "pearson_adversarial", "spearman_clean", "spearman_adversarial", "mean_abs_error_clean",
    "mean_abs_error_adversarial",
})
DECLARED: set[str] = set()  # metrics declared by suites loaded in this process (``Suite.declared_metrics``)
LARGEST = 1e9  # no score, rate, count or throughput comes near this: beyond it a value is damage
CI_SLACK = 1e-9  # relative: an interval's end and its value may differ in the last bits of a float


def declare_metrics(names) -> None:
    """Accept ``names`` as metrics from now on in this process (a suite's declared metrics)."""
    DECLARED.update(n for n in names if n)


def _finite(value):
    if value is None:
        return None
    if not math.isfinite(value):
        raise ValueError(f"{value!r}, not a finite number")
    if abs(value) > LARGEST:
        raise ValueError(f"{value!r} is beyond any real score (|x| > {LARGEST:g})")
    return float(value)


Number = Annotated[StrictInt | StrictFloat | None, AfterValidator(_finite)]


class Key(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: StrictStr = Field(min_length=1)
    # A sha256 in hex: exports use it as a directory name (mteb's revision), so nothing else may pass.
    weights_sha256: StrictStr = Field(pattern=r"^[0-9a-f]{64}$")
    suite: StrictStr = Field(min_length=1)
    task: StrictStr = Field(min_length=1)
    seed: StrictInt = Field(ge=0)
    config_hash: StrictStr = Field(min_length=8)


class Row(BaseModel):
    model_config = ConfigDict(extra="allow")  # provenance fields are free-form text

    model: StrictStr
    suite: StrictStr
    task: StrictStr
    split: StrictStr
    metric: StrictStr
    aggregation: StrictStr
    value: Number
    n: StrictInt | None = None
    seed: StrictInt | None = None
    paper_value: Number = None
    std: Number = None
    ci_low: Number = None
    ci_high: Number = None
    wall_s: Number = None
    config_hash: StrictStr = ""
    config: StrictStr = ""

    @field_validator("metric")
    @classmethod
    def _known_metric(cls, metric: str) -> str:
        if metric not in METRICS and metric not in DECLARED:
            raise ValueError(f"unknown metric {metric!r} (known: {', '.join(sorted(METRICS | DECLARED))}; a suite "
                             f"declares its own as its tasks' main_metric or in its `metrics`)")
        return metric

    @field_validator("n")
    @classmethod
    def _count(cls, n):
        if n is not None and n < 0:
            raise ValueError(f"{n} is negative")
        return n

    @model_validator(mode="after")
    def _interval(self):
        low, high, value = self.ci_low, self.ci_high, self.value
        if (low is None) != (high is None):
            raise ValueError("has one end of its interval (ci_low and ci_high come together)")
        if low is None:
            return self
        slack = CI_SLACK * max(1.0, abs(low), abs(high))
        if low > high + slack:
            raise ValueError(f"interval [{low}, {high}] is inverted")
        if value is not None and not (low - slack <= value <= high + slack):
            raise ValueError(f"value {value} lies outside its interval [{low}, {high}]")
        return self


class LogRecord(BaseModel):
    """An attack log a cell was computed from: its path under the results, and the sha256 of its first bytes."""

    model_config = ConfigDict(extra="forbid")

    path: StrictStr = Field(min_length=1)
    bytes: StrictInt = Field(ge=0)
    sha256: StrictStr = Field(pattern=r"^[0-9a-f]{64}$")


class Cell(BaseModel):
    model_config = ConfigDict(extra="allow")

    cell: Key
    config: dict[str, Any]
    written_at: StrictStr = ""
    results: list[Row] = Field(min_length=1)
    evidence_sha256: StrictStr | None = ""
    attack_logs: list[LogRecord] | None = None  # absent in cells written before cells recorded their logs

    @model_validator(mode="after")
    def _rows_of_this_cell(self):
        for i, row in enumerate(self.results):
            for name in ("model", "suite", "task"):
                if getattr(row, name) != getattr(self.cell, name):
                    raise ValueError(f"row {i} has {name} {getattr(row, name)!r}, its cell "
                                     f"{getattr(self.cell, name)!r}")
        return self


class CellError(ValueError):
    """A payload that is not a valid cell; the message lists the first problems."""


NUMBERS = ("value", "paper_value", "std", "ci_low", "ci_high", "wall_s")


def _where(loc: tuple) -> str:
    parts = []
    for i, part in enumerate(loc):
        if loc[:1] == ("results",) and i == 1 and isinstance(part, int):
            parts[-1] = f"row {part}"
        elif i > 0 and loc[i - 1] in NUMBERS and part in ("int", "float"):
            continue  # pydantic's union branch names: not where the problem is
        else:
            parts.append(str(part))
    return " ".join(parts) or "the cell"


def _say(error: dict) -> str:
    message = error["msg"].removeprefix("Value error, ")
    loc = error["loc"]
    if error["type"] == "missing":
        return f"{_where(loc)} is missing"
    if error["type"] == "too_short" and loc == ("results",):
        return "its 'results' list is empty"
    if len(loc) > 1 and loc[-2] in NUMBERS and loc[-1] in ("int", "float"):
        return f"{_where(loc)} is {error['input']!r}, not a finite number"
    if error["type"].endswith("_type") or error["type"] == "int_from_float":
        return f"{_where(loc)} is {error['input']!r}: {message.lower()}"
    return f"{_where(loc)}: {message}"


def validate_cell(payload: object) -> None:
    """CellError naming the first problems when ``payload`` is not a valid cell."""
    if not isinstance(payload, dict):
        raise CellError(f"not a result cell: a JSON {type(payload).__name__}, not an object")
    try:
        Cell.model_validate(payload)
    except ValidationError as exc:
        said = list(dict.fromkeys(_say(e) for e in exc.errors(include_url=False)))
        raise CellError("; ".join(said[:3]) + (f"; and {len(said) - 3} more" if len(said) > 3 else "")) from None

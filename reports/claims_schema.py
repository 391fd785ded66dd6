"""The schema of ``reports/claims.toml``: every table and key it may hold, with its type. ``reports.claims.load``
checks the file against it before anything else, so a misspelt key, a wrong type or a variant that is not a
table is named with its key and the fix (exit 2) rather than ignored or met later as a traceback."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

from bench.schema_words import explain

Text = StrictStr
Name = Field(min_length=1)


class Claim(BaseModel):
    """One [[claim]] table (the meaning of each key: the comment atop claims.toml)."""

    model_config = ConfigDict(extra="forbid")

    id: Text = Name
    paper: Text = Name
    table: Text = Name
    claim: Text = Name
    suite: Text = Name
    task: Text = Name
    metric: Text = Name
    aggregation: Text = Name
    method: Text = Name
    baseline: Text = Name
    paper_method: Text = Name
    paper_baseline: Text = Name
    direction: Text = Name
    differs: Text = Name
    attack: Text = ""
    split: Text = ""
    paper_task: Text = ""
    paper_attack: Text | None = None
    paper_split: Text | None = None
    paper_metric: Text = ""
    run: dict[str, Any] = {}
    variants: list[dict[str, Any]] = [{}]
    tasks: list[Text] = []
    task_run: dict[str, Any] = {}
    method_run: dict[str, Any] = {}
    margin: StrictInt | StrictFloat | None = None
    unit: Text = ""
    figure_only: StrictBool = False
    not_testable: Text = ""
    chance: StrictInt | StrictFloat | None = None
    kind: Text = "paper"
    expectation: Text = ""
    margin_reason: Text = ""
    min_seeds: StrictInt | None = Field(None, ge=1)
    exclusion_share: StrictInt | StrictFloat | None = Field(None, gt=0, le=1)
    pairs: list[list[Text]] = []
    series: Text = ""
    dose: StrictInt | StrictFloat | None = None


class Seeds(BaseModel):
    model_config = ConfigDict(extra="forbid")

    suffixes: list[Text] = []


class Tests(BaseModel):
    """[tests]: the ledger's rules, stated before any line is judged."""

    model_config = ConfigDict(extra="forbid")

    min_seeds: StrictInt = Field(3, ge=1)
    exclusion_share: StrictInt | StrictFloat = Field(0.5, gt=0, le=1)
    bounds: dict[str, list[StrictInt | StrictFloat]] = {}


class Insensitive(BaseModel):
    """[[insensitive]]: an attack the positive controls show this instrument cannot read on a task."""

    model_config = ConfigDict(extra="forbid")

    attack: Text = Name
    task: Text = Name
    reference: Text = Name
    reason: Text = Name


class ClaimsFile(BaseModel):
    """The file's top level: [run_defaults], [seeds], [tests], [models], [costs], [[insensitive]] and the
    [[claim]] tables (each checked by ``Claim`` in ``claim_problem``, so its message names the claim)."""

    model_config = ConfigDict(extra="forbid")

    run_defaults: dict[str, Any] = {}
    seeds: Seeds = Seeds()
    tests: Tests = Tests()
    models: dict[str, Text] = {}
    costs: dict[str, Any] = {}
    insensitive: list[Insensitive] = []
    claim: list[dict[str, Any]] = []


def file_problem(data: dict) -> tuple[str, str, str] | None:
    """(where, problem, fix) of the first problem in the file's top level, or None."""
    try:
        ClaimsFile.model_validate(data)
    except ValidationError as exc:
        key, problem, fix = explain(exc.errors(include_url=False)[0], list(ClaimsFile.model_fields))
        if key.startswith("claim["):
            return f"claim #{int(key[6:key.index(']')]) + 1}", "is not a table", "write each claim as a [[claim]] table"
        table, _, inner = key.partition(".")
        return f"[{table}]", f"{inner} {problem}" if inner else problem, fix
    return None


def claim_problem(entry: dict) -> tuple[str, str] | None:
    """(problem, fix) of the first problem in one [[claim]] table, or None."""
    try:
        Claim.model_validate(entry)
    except ValidationError as exc:
        key, problem, fix = explain(exc.errors(include_url=False)[0], list(Claim.model_fields))
        return f"{key} {problem}", fix
    return None

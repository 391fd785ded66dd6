"""User models files: ``$BENCH_HOME/models.toml`` (and ``--models-file``) declare named models with
ModelSpec's fields, so evaluating an encoder or an ablation needs no source edit.

    [my-encoder]                      # bench run --model my-encoder
    backbone = "org/hf-model"         # a Hugging Face id, a local directory, or "module:attr"
    pooler = "avg"                    # cls | cls_before_pooler | avg | avg_first_last | avg_top2
    max_len = 256

    [my-ablation]                     # written by `bench train --name my-ablation --set ...`
    method = "simcse"
    base = "minilm"                   # a model name, a directory or a HF id
    profile = "smoke"
    recipe = { temperature = "0.1" }  # --set values, as typed

Every entry is checked when the file is read, against ``ModelEntry`` (pydantic): an unknown field, a
wrong type, an unknown pooler, a name taken by a built-in model, a local backbone directory that does not
exist or a ``module:attr`` provider without that attribute, or an entry with neither backbone, base nor
checkpoint is a ``BenchError`` (exit 2) naming the file, the entry, the key and the fix. ``write_entry`` adds or replaces one
table and leaves the rest of the file (comments included) as it was.

This module reads and writes the file; ``bench.models.registry`` (``known_models``) turns its entries into
ModelSpecs. It imports nothing of the registry.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

from bench.errors import BenchError

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")  # user model names (also a directory name)


class ModelEntry(BaseModel):
    """One table of a models file: ModelSpec's fields a user may set (``name`` is the table's key; provenance
    fields are set by the resolver)."""

    model_config = ConfigDict(extra="forbid")

    backbone: StrictStr | None = None  # a Hugging Face id, a local directory, or "module:attr"
    pooler: StrictStr | None = None
    max_len: StrictInt | None = Field(None, ge=1)
    method: StrictStr | None = None
    base: StrictStr | None = None
    profile: StrictStr | None = None
    recipe: dict[str, StrictStr | StrictInt | StrictFloat | StrictBool] | None = None  # --set values, as typed
    citation: StrictStr | None = None
    description: StrictStr | None = None
    paper_ref: StrictStr | None = None
    loader: StrictStr | None = None
    revision: StrictStr | None = None
    checkpoint: StrictStr | None = None
    snapshot_of: StrictStr | None = None


FIELDS = tuple(ModelEntry.model_fields)


def read_models_file(path: Path, reserved=(), required: bool = False) -> dict[str, dict]:
    """name -> the entry's fields, checked, for every entry of ``path`` (none when it is absent and not
    ``required``). ``reserved`` holds the built-in model names an entry may not take. The fields gain
    ``source`` (the entry's address) and a default ``description``; ``bench.models.registry`` makes the specs."""
    path = Path(path)
    if not path.is_file():
        if required:
            raise BenchError(f"--models-file {path}: no such file.")
        return {}
    try:
        tables = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BenchError(f"{path}: not valid TOML ({exc}). Fix the file (see `bench ls models --help`).") from exc
    out: dict = {}
    for name, entry in tables.items():
        where = entry_address(path, name)
        if not isinstance(entry, dict):
            raise BenchError(f"{path}: '{name}' must be a table of model fields, e.g. [{name}] then "
                             f"backbone = \"...\" and pooler = \"...\".")
        if not NAME_PATTERN.match(name):
            raise BenchError(f"{where}: a model name is letters, digits and . _ + - (no slashes or spaces).")
        if name in reserved:
            raise BenchError(f"{where}: '{name}' is a built-in model; give yours another name.")
        _check_fields(where, entry)
        if entry.get("backbone"):
            check_backbone(where, entry["backbone"])
        fields = {k: v for k, v in entry.items()}
        fields.setdefault("description", f"declared in {path}")
        fields["source"] = f"{path}#{name}"
        out[name] = fields
    return out


def entry_address(path: Path, name: str) -> str:
    """How messages name one entry of a models file."""
    return f"{path}: [{name}]"


def _check_fields(where: str, entry: dict) -> None:
    """A BenchError naming the entry, the key and the fix when ``entry`` breaks ``ModelEntry`` or names a
    pooler bench does not have."""
    from bench.errors import UnknownName
    from bench.models.poolers import POOLERS
    from bench.schema_words import explain

    try:
        ModelEntry.model_validate(entry)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        key, problem, fix = explain(error, FIELDS)
        if error["type"] == "extra_forbidden":
            close = UnknownName("field", key, sorted(FIELDS)).close
            raise BenchError(f"{where}: unknown field '{key}'. Did you mean: {', '.join(close)}? "
                             f"Fields: {', '.join(FIELDS)}.") from None
        if key == "max_len" and error["type"] == "greater_than_equal":
            problem, fix = f"is {error['input']!r}", "give a positive number of tokens"
        raise BenchError(f"{where}: {key} {problem}. Fix: {fix}.") from None
    if "pooler" in entry and entry["pooler"] not in POOLERS and not (entry["pooler"] == "external"
                                                                      and entry.get("loader")):
        raise BenchError(f"{where}: pooler '{entry['pooler']}' is not one of {', '.join(POOLERS)}.")


def check_backbone(where: str, backbone: str) -> None:
    """A BenchError when a local backbone is missing: a directory (an absolute, ``~``, ``./`` or ``../`` path)
    that does not exist, or a ``module:attr`` provider whose module is installed
    but has no such attribute. Hugging Face ids are checked when the model loads (they may be downloaded)."""
    import importlib
    import importlib.util

    module, sep, attr = backbone.partition(":")
    if sep and "/" not in module:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if found and not hasattr(importlib.import_module(module), attr):
            raise BenchError(f"{where}: backbone '{backbone}': module {module} has no attribute '{attr}'. Fix: "
                             f"name the function that returns the model directory, as module:function.")
        return
    if backbone.startswith(("/", "~", "./", "../")):
        path = Path(backbone).expanduser()
        if not path.is_dir():
            raise BenchError(f"{where}: backbone '{backbone}': no such directory ({path.resolve()}). Fix: give the "
                             f"directory that holds config.json and the weights, or a Hugging Face id.")


# --- writing -------------------------------------------------------------------------------------

def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)


def _value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return ("inf" if value > 0 else "-inf") if math.isinf(value) else "nan" if math.isnan(value) else repr(value)
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(str(k))} = {_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(str(value), ensure_ascii=False)  # a TOML basic string


def entry_text(name: str, fields: dict, comment: str = "") -> str:
    lines = [f"[{_key(name)}]" + (f"  # {comment}" if comment else "")]
    lines += [f"{_key(k)} = {_value(v)}" for k, v in fields.items() if v not in (None, "", {})]
    return "\n".join(lines) + "\n"


_HEADER = re.compile(r"^\s*\[(?!\[)\s*(\"(?:[^\"\\]|\\.)*\"|'[^']*'|[A-Za-z0-9_.+-]+)\s*\]", re.M)


def write_entry(path: Path, name: str, fields: dict, comment: str = "") -> Path:
    """Add or replace ``[name]`` in ``path`` (atomically), keeping every other line as it was."""
    from bench.io import atomic_write_text

    path = Path(path)
    text = path.read_text(encoding="utf-8") if path.is_file() else (
        "# Models for `bench run --model NAME` (fields of bench.models.registry.ModelSpec; see bench/models/models_file.py).\n")
    block = entry_text(name, fields, comment)
    headers = list(_HEADER.finditer(text))
    for i, match in enumerate(headers):
        key = match.group(1)
        key = json.loads(key) if key.startswith('"') else key.strip("'")
        if key == name:
            end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
            text = text[:match.start()] + block + ("\n" if end < len(text) else "") + text[end:]
            break
    else:
        text = text.rstrip("\n") + "\n\n" + block if text.strip() else block
    tomllib.loads(text)  # never write a file we cannot read back
    atomic_write_text(path, text)
    return path

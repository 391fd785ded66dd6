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

Every entry is checked when the file is read: an unknown field, a wrong type, an unknown pooler, a
name taken by a built-in model or an entry with neither backbone, base nor checkpoint is a
``BenchError`` (exit 2) naming the file, the entry and the fix. ``write_entry`` adds or replaces one
table and leaves the rest of the file (comments included) as it was.

This module reads and writes the file; ``bench.registry`` (``known_models``) turns its entries into
ModelSpecs. It imports nothing of the registry.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from pathlib import Path

from bench.errors import BenchError

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")  # user model names (also a directory name)
# field -> accepted types. ``name`` is the table's key; provenance fields are set by the resolver.
FIELD_TYPES = {"backbone": str, "pooler": str, "max_len": int, "method": str, "base": str, "profile": str,
               "recipe": dict, "citation": str, "description": str, "paper_ref": str, "loader": str,
               "revision": str, "checkpoint": str, "snapshot_of": str}


def read_models_file(path: Path, reserved=(), required: bool = False) -> dict[str, dict]:
    """name -> the entry's fields, checked, for every entry of ``path`` (none when it is absent and not
    ``required``). ``reserved`` holds the built-in model names an entry may not take. The fields gain
    ``source`` (the entry's address) and a default ``description``; ``bench.registry`` makes the specs."""
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
        fields = {k: v for k, v in entry.items()}
        fields.setdefault("description", f"declared in {path}")
        fields["source"] = f"{path}#{name}"
        out[name] = fields
    return out


def entry_address(path: Path, name: str) -> str:
    """How messages name one entry of a models file."""
    return f"{path}: [{name}]"


def _check_fields(where: str, entry: dict) -> None:
    from bench.errors import UnknownName
    from bench.models.poolers import POOLERS

    for key, value in entry.items():
        if key not in FIELD_TYPES:
            close = UnknownName("field", key, sorted(FIELD_TYPES)).close
            raise BenchError(f"{where}: unknown field '{key}'. Did you mean: {', '.join(close)}? "
                             f"Fields: {', '.join(FIELD_TYPES)}.")
        want = FIELD_TYPES[key]
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            raise BenchError(f"{where}: {key} must be {'a table' if want is dict else want.__name__}, "
                             f"got {value!r}.")
    if "pooler" in entry and entry["pooler"] not in POOLERS and not (entry["pooler"] == "external"
                                                                      and entry.get("loader")):
        raise BenchError(f"{where}: pooler '{entry['pooler']}' is not one of {', '.join(POOLERS)}.")
    if "max_len" in entry and entry["max_len"] < 1:
        raise BenchError(f"{where}: max_len must be a positive number of tokens.")
    for key, value in (entry.get("recipe") or {}).items():
        if not isinstance(value, (str, int, float, bool)):
            raise BenchError(f"{where}: recipe.{key} must be a string, number or boolean, got {value!r}.")


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
    from bench.data.datasets import atomic_write_text

    path = Path(path)
    text = path.read_text(encoding="utf-8") if path.is_file() else (
        "# Models for `bench run --model NAME` (fields of bench.registry.ModelSpec; see bench/models_file.py).\n")
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

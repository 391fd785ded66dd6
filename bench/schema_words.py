"""Plain words for a pydantic error in a user-edited file (models.toml, claims.toml): the key, what is wrong
with it and the fix. A base module, so the models file and the claims file each use it without reaching into
the store."""

EXPECTED = {  # pydantic error type -> what the value must be
    "string_type": "a string (in quotes)", "int_type": "a whole number", "float_type": "a number",
    "bool_type": "true or false", "dict_type": "a table ({ key = value } or a [section])",
    "model_type": "a table ({ key = value } or a [section])", "list_type": "a list ([...])",
    "int_from_float": "a whole number", "string_too_short": "a non-empty string",
    "greater_than_equal": "a larger number",
}


def key_of(loc: tuple) -> str:
    """A location as a dotted TOML key: ("recipe", "lr") -> recipe.lr, ("variants", 0) -> variants[0]; the
    names of a union's branches (``int``, ``float``, ``str``) are dropped."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("int", "float", "str", "bool", "dict[str,any]", "list[dict[str,any]]") and out:
            continue
        else:
            out += ("." if out else "") + str(part)
    return out or "the file"


def explain(error: dict, fields=()) -> tuple[str, str, str]:
    """(key, problem, fix) of one pydantic error; ``fields`` are the keys the table accepts (for an unknown key)."""
    key = key_of(error["loc"])
    kind = error["type"]
    if kind == "extra_forbidden":
        known = f"use one of {', '.join(fields)}" if fields else "remove it"
        return key, "unknown key", f"correct its spelling or remove it ({known})"
    if kind == "missing":
        return key, "is missing", f"add {key} = ..."
    given = error.get("input")
    if kind in EXPECTED:
        want = "a number" if error["loc"][-1:] in (("int",), ("float",)) else EXPECTED[kind]  # int | float
        return key, f"is {given!r}, not {want}", f"write {key} as {want}"
    message = error["msg"].removeprefix("Value error, ")
    return key, f"{message} (got {given!r})", f"correct {key}"

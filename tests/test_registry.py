import subprocess
import sys

import pytest

from bench.errors import UnknownName
from bench.models.registry import MODELS, get_model


def test_listing_models_does_not_import_torch():
    code = ("import sys; from app.cli import main; rc = main(['ls', 'models']); "
            "assert rc == 0; heavy = [m for m in ('torch', 'transformers', 'textattack') if m in sys.modules]; "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_unknown_model_suggests_close_names():
    with pytest.raises(UnknownName) as err:
        get_model("simcse")
    assert "simcse-bert" in err.value.close
    assert "Did you mean" in str(err.value)


def test_offline_default_and_released_checkpoints_are_registered():
    assert MODELS["minilm"].pooler == "avg"
    assert MODELS["simcse-bert"].pooler == "cls_before_pooler"
    assert MODELS["simcse-bert"].paper_ref == "SimCSE Table 5"  # its value: reports/paper_values.csv
    assert MODELS["sup-simcse-bert"].pooler == "cls"


def test_one_registry_helper_serves_every_kind():
    from attacks.recipes import RECIPES
    from app.cli import COMMANDS
    from bench.methods import METHODS
    from bench.plugins import Registry
    from suites import SUITES

    for registry in (MODELS, SUITES, METHODS, RECIPES, COMMANDS):
        assert isinstance(registry, Registry)
    assert SUITES.load("sts").name == "sts"  # lazy "module:attr", imported on first use
    assert RECIPES.label("bert-attack") == "BERTAttack"
    for registry, typo, meant in ((SUITES, "stss", "sts"), (METHODS, "simcsee", "simcse"),
                                  (RECIPES, "textfool", "textfooler"), (COMMANDS, "rnu", "run")):
        with pytest.raises(UnknownName) as err:
            registry.load(typo)
        assert meant in err.value.close


def test_builtin_models_file_gives_the_pinned_specs():
    """tests/builtin_models.json pins every built-in model's spec (first written from the Python declarations that
    bench/models/models.toml replaced), field by field and in display order; models added since come after them.
    A change you mean to make is pinned by `python -m tests.builtin_models --write`, never by hand."""
    from tests.builtin_models import REGENERATE, current_specs, first_difference, pinned_specs

    problem = first_difference(pinned_specs(), current_specs())
    assert not problem, f"{problem}. If you meant it, run `{REGENERATE}` and commit tests/builtin_models.json."


def test_builtin_models_check_names_a_changed_model():
    from tests.builtin_models import current_specs, first_difference

    current = current_specs()
    name = next(iter(current))
    assert first_difference({name: {**current[name], "pooler": "other"}}, current) == \
        f"built-in model '{name}' changed"
    assert "order" in first_difference({"no-such-model": {}}, current)


def test_builtin_models_file_reads_as_a_users_file():
    """The built-in file is a valid user models file: the same reader accepts it, and it declares no
    field the reader does not know."""
    from bench.models.models_file import read_models_file
    from bench.models.registry import BUILTIN_MODELS_FILE, MODELS

    entries = read_models_file(BUILTIN_MODELS_FILE, required=True)
    assert list(entries) == list(MODELS)

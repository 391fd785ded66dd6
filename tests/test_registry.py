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


def test_builtin_models_file_gives_the_specs_the_python_declarations_gave():
    """bench/models/models.toml replaced the Python declarations; tests/builtin_models.json holds every spec they
    made (written from them before the move), compared field by field and in display order. Models added to
    the file since come after them and need no edit here."""
    import json
    from dataclasses import asdict
    from pathlib import Path

    from bench.models.registry import MODELS

    pinned = json.loads((Path(__file__).with_name("builtin_models.json")).read_text())
    assert list(MODELS)[:len(pinned)] == list(pinned)
    for name, spec in ((n, MODELS[n]) for n in pinned):
        assert {k: v for k, v in asdict(spec).items() if k != "keyed"} == pinned[name], name  # keyed: set per run


def test_builtin_models_file_reads_as_a_users_file():
    """The built-in file is a valid user models file: the same reader accepts it, and it declares no
    field the reader does not know."""
    from bench.models.models_file import read_models_file
    from bench.models.registry import BUILTIN_MODELS_FILE, MODELS

    entries = read_models_file(BUILTIN_MODELS_FILE, required=True)
    assert list(entries) == list(MODELS)

import subprocess
import sys

import pytest

from bench.errors import UnknownName
from bench.registry import MODELS, get_model


def test_listing_models_does_not_import_torch():
    code = ("import sys; from bench.cli import main; rc = main(['ls', 'models']); "
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
    assert MODELS["simcse-bert"].paper["sts/avg"] == pytest.approx(76.25)
    assert MODELS["sup-simcse-bert"].pooler == "cls"

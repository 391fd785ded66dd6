"""The cell key is complete: every setting that can change a number changes the key, and the committed
cells keep the keys they were written under."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.models.registry import MODELS, ModelSpec, key_config
from bench.results.store import config_hash
from bench.runner import cell_config
from tests.conftest import committed_cells

BOUNDED = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def ctx(tmp_path, monkeypatch):
    """A RunContext whose data fingerprints are fixed (the options, not the data, are under test)."""
    import bench.runner
    from bench.paths import Paths
    from suites.base import RunContext

    monkeypatch.setattr(bench.runner, "data_config", lambda datasets, ctx: {})
    paths = Paths(home=tmp_path, data=tmp_path / "data", results=tmp_path / "results")
    return RunContext(paths=paths, profile="smoke")


def _registered_options():
    from suites import all_suites

    return [(suite, opt) for suite in all_suites() for opt in suite.options if opt.changes_numbers]


def _two_values(opt, draw):
    """Two different values of one option, as its flag would parse them."""
    from attacks.recipes import RECIPES

    if opt.repeatable:
        names = sorted(RECIPES)
        first = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
        second = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True).filter(
            lambda v: sorted(v) != sorted(first)))
        return first, second
    if len(opt.choices) == 1:  # the option given or not
        return None, opt.choices[0]
    if opt.choices:
        return tuple(draw(st.lists(st.sampled_from(list(opt.choices)), min_size=2, max_size=2, unique=True)))
    if opt.type is int:
        low = int(opt.minimum or 0)
        return tuple(draw(st.lists(st.integers(low, low + 10_000), min_size=2, max_size=2, unique=True)))
    return tuple(draw(st.lists(st.text(min_size=1, max_size=8), min_size=2, max_size=2, unique=True)))


@pytest.mark.parametrize("suite, opt", _registered_options(), ids=lambda x: getattr(x, "name", str(x)))
@BOUNDED
@given(data=st.data())
def test_every_number_changing_option_changes_the_key(ctx, suite, opt, data):
    """Two values of a registered option give two keys (with every recipe run, so every recipe
    parameter is used by the cell), in each task the option applies to (an option that keys no task at all
    fails: e.g. a substitute victim applies only to NLI tasks whose training set is absent)."""
    from dataclasses import replace

    from attacks.recipes import RECIPES

    a, b = _two_values(opt, data.draw)
    base = {"recipes": sorted(RECIPES)} if opt.name != "recipes" else {}
    differ = [task.name for task in suite.tasks
              if len({config_hash(cell_config(suite, task, replace(ctx, options={**base, opt.name: v}))) for v in (a, b)}) == 2]
    assert differ, f"{suite.name} --{opt.name} {a!r} and {b!r} share every task's key"


@BOUNDED
@given(pooler=st.lists(st.sampled_from(["cls", "cls_before_pooler", "avg", "avg_first_last", "avg_top2"]),
                       min_size=2, max_size=2, unique=True),
       max_len=st.lists(st.integers(1, 4096), min_size=2, max_size=2, unique=True))
def test_pooler_and_max_length_change_the_key(ctx, pooler, max_len):
    """A local model run with two poolers, or two max_seq_length values, gets two keys."""
    from suites import get_suite
    from bench.runner import cell_key

    sts = get_suite("sts")
    task = sts.task("stsb")
    keys = {cell_key(sts, ModelSpec(name="local", backbone="/x", pooler=p, max_len=m, keyed=True), "0" * 64, task, ctx)
            for p in pooler for m in max_len}
    assert len(keys) == 4


def test_a_registered_model_with_its_own_settings_adds_nothing():
    """Built-in models keep their keys: their own pooler and max length enter no configuration; another
    pooler or max length under their name does."""
    spec = MODELS["minilm"]
    assert key_config(spec) == {}
    from dataclasses import replace

    assert key_config(replace(spec, pooler="cls")) == {"pooler": "cls", "max_len": spec.max_len}
    assert key_config(replace(spec, max_len=4)) == {"pooler": spec.pooler, "max_len": 4}


@pytest.mark.skipif(not committed_cells(), reason="no committed result cells in this checkout")
def test_committed_cells_keep_their_keys():
    """Every committed cell's configuration, with what the model now adds to it, hashes to the key it is
    stored under (and names the file it is in)."""
    for path in committed_cells():
        payload = json.loads(path.read_text(encoding="utf-8"))
        cell = payload["cell"]
        spec = MODELS[cell["model"]]
        config = {**payload["config"], **key_config(spec)}
        assert config_hash(config) == cell["config_hash"], path
        assert path.name == f"seed{cell['seed']}-{cell['weights_sha256'][:12]}-{cell['config_hash'][:8]}.json"
        assert all(r["config_hash"] == cell["config_hash"] for r in payload["results"]), path

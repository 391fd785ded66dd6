"""plugins.json carries a trained model's training facts (budget, dev curve) from its card."""

import json

from bench.results import metadata
from bench.models.registry import ModelSpec


def test_export_adds_the_cards_training_facts_for_trained_models(tmp_path):
    models = tmp_path / "models"
    (models / "m").mkdir(parents=True)
    card = {"method": "simcse", "profile": "study", "steps": 250, "wall_s": 12.5, "stsb_dev_before": 80.0,
            "best": {"step": 25, "stsb_dev_spearman": 81.0}, "train_config": {"batch_size": 64},
            "dev_history": [{"step": 0, "stsb_dev_spearman": 80.0, "align": 0.2, "uniform": -3.8},
                            {"step": 25, "stsb_dev_spearman": 81.0, "align": 0.25, "uniform": -3.7}],
            "fingerprint": "not exported"}
    (models / "m" / "bench_card.json").write_text(json.dumps(card))
    trained = ModelSpec(name="m", backbone="x", method="simcse", base="b", profile="study")
    plain = ModelSpec(name="b", backbone="x")
    path = metadata.export(tmp_path / "results", models=[trained, plain], models_dir=models)
    data = json.loads(path.read_text())
    training = data["models"]["m"]["training"]
    assert training["dev_history"] == card["dev_history"] and training["batch_size"] == 64
    assert training["steps"] == 250 and "fingerprint" not in training
    assert "training" not in data["models"]["b"]


def test_refresh_order_gives_the_built_in_entries_the_registrys_order(tmp_path):
    """A run stamps the registry's order of its day; after a model is registered in between, the report puts
    every built-in entry back in today's order and leaves the others alone."""
    from bench.models.registry import MODELS, display_order, resolve_model
    from bench.paths import Paths

    names = list(MODELS)
    first, later = resolve_model(names[0], Paths.from_env()), resolve_model(names[5], Paths.from_env())
    own = ModelSpec(name="my-encoder", backbone="x")
    results = tmp_path / "results"
    metadata.refresh_order(results, {})  # no file yet: nothing to do, nothing written
    assert not (results / metadata.FILE).exists()
    path = metadata.export(results, models=[first, later, own])
    data = json.loads(path.read_text())
    data["models"][names[5]]["order"] = 999  # as stamped before models were registered ahead of it
    path.write_text(json.dumps(data))
    metadata.refresh_order(results, display_order())
    models = json.loads(path.read_text())["models"]
    assert (models[names[0]]["order"], models[names[5]]["order"]) == (0, 5)
    assert models["my-encoder"]["order"] == data["models"]["my-encoder"]["order"] and not models["my-encoder"]["builtin"]
    path.write_text("{not json")
    metadata.refresh_order(results, display_order())
    assert path.read_text() == "{not json"  # a damaged file is the run's to quarantine, not the report's

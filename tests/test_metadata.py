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

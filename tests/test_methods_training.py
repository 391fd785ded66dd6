"""Each of V-advCSE, AdCSE, DCL, L2P-CSR, ConSERT, USCAL and the oracle control trains through the shared trainer
(bench/train.py) on a tiny random BERT: checkpoint with its extra modules, resume, card with the
method's config and open choices."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from tests.test_methods_dcl import ADJECTIVES, NOUNS  # noqa: E402
from tests.test_methods_oraclecse import write_space  # noqa: E402

from bench.methods import METHODS as REGISTERED  # noqa: E402

# Every registered method trains, resumes and writes its card here, a new one too, except those whose own
# files run the same check with what they need: SimCSE and RobustEmbed (tests/test_train.py, with a short
# PGD) and supervised SimCSE (tests/test_methods_sup_simcse.py trains it on NLI triples, not sentences).
TESTED_ELSEWHERE = {"simcse", "robustembed", "sup-simcse"}
METHODS = sorted(set(REGISTERED) - TESTED_ELSEWHERE)
SENTENCES = ["a man is playing guitar", "the movie was great fun", "a dog is running in the park",
             "what is the answer", "a woman is eating food", "the plot was boring", "a child is happy",
             "the film was terrible"]


@pytest.mark.parametrize("method", METHODS)
def test_method_trains_resumes_and_writes_its_card(method, tiny_bert_dir, tmp_path):
    from bench.paths import Paths
    from bench.train import build_job, run_training

    (tmp_path / "wn").mkdir()
    (tmp_path / "wn" / "data.noun").write_text(NOUNS)
    (tmp_path / "wn" / "data.adj").write_text(ADJECTIVES)
    data = tmp_path / "sentences.txt"
    data.write_text("\n".join(SENTENCES * 2) + "\n")
    paths = Paths(home=tmp_path / "home", data=tmp_path, results=tmp_path / "results")
    space = write_space(tmp_path / "space")
    extra = {"dcl": {"wordnet_dir": str(tmp_path / "wn")}, "adcse": {"num_adversaries": 8},
             "oraclecse": {"space_dir": str(space)}}
    settings = {"max_steps": 3, "eval_every": 0, "batch_size": 4, "log_every": 0, **extra.get(method, {})}
    job = build_job(method, str(tiny_bert_dir), "smoke", paths, data=str(data), settings=settings,
                    name=f"{method}-tiny", device="cpu")
    logs = []
    stopped = run_training(job, paths.home, log=logs.append, stop_after=1)
    assert stopped == {"stopped_at": 1}
    card = run_training(job, paths.home, log=logs.append)
    assert any("Resuming" in line for line in logs)
    assert card["method"] == method and card["steps"] == 3
    assert card["open_choices"] and card["method_config"]
    saved = json.loads((paths.home / "models" / f"{method}-tiny" / "bench_card.json").read_text())
    assert saved["method_config"] == card["method_config"]
    assert (paths.home / "models" / f"{method}-tiny" / "model.safetensors").exists()

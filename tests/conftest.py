"""Shared fixtures: a tiny random BERT saved to disk, and tiny datasets in the SentEval layout."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

WORDS = ("a man woman child dog cat is are was playing eating running sitting on the in with guitar "
         "ball food street park red blue big small happy sad good bad not very movie film great "
         "terrible plot actor story boring fun question what who where when how why answer").split()


def write_tiny_bert(directory: Path, seed: int = 0, hidden: int = 32, layers: int = 2) -> Path:
    """A randomly initialised 2-layer BERT with a word-level vocabulary, saved as safetensors."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *[f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"],
             *"abcdefghijklmnopqrstuvwxyz", ".", ",", "?", "!", "'"]
    (directory / "vocab.txt").write_text("\n".join(dict.fromkeys(vocab)) + "\n")
    # model_max_length as a real checkpoint sets it (its position embeddings): TextAttack's stock wrapper pads to it
    BertTokenizerFast(vocab_file=str(directory / "vocab.txt"), do_lower_case=True,
                      model_max_length=128).save_pretrained(directory)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(dict.fromkeys(vocab)), hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=2, intermediate_size=2 * hidden, max_position_embeddings=128)
    BertModel(config).save_pretrained(directory, safe_serialization=True)
    return directory


def benchmark_script(name: str):
    """benchmarks/<name>.py loaded as a module (the scripts are not a package)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _cpu_without_amx(monkeypatch):
    """Tests expect `--dtype auto` to mean fp32 on the CPU whatever machine runs them: an AMX host would
    otherwise turn every in-process run into bf16 (tests/test_precision.py simulates each answer)."""
    import torch

    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> Path:
    return write_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


def register_fixture_dataset(monkeypatch, data_root: Path, name: str, root: str) -> None:
    """Point dataset `name` at fixture files under data_root/root, with their real sizes and hashes."""
    from bench.data import datasets as data

    files = []
    base = data_root / root
    for path in sorted(p for p in (base.rglob("*") if base.is_dir() else [base]) if p.is_file()):
        blob = path.read_bytes()
        files.append(data.FileSpec(str(path.relative_to(data_root)), len(blob), blob.count(b"\n"),
                                   hashlib.sha256(blob).hexdigest()))
    spec = data.DATASETS[name]
    monkeypatch.setitem(data.DATASETS, name, data.DatasetSpec(**{**spec.__dict__, "root": root,
                                                                "files": tuple(files)}))


STS_PAIRS = [
    ("a man is playing guitar", "a man is playing the guitar", 4.8),
    ("a woman is eating food", "a woman is eating", 4.2),
    ("a dog is running in the park", "a cat is sitting", 1.0),
    ("a child is happy", "a child is sad", 2.0),
    ("the movie was great", "the film was great", 4.6),
    ("the plot was boring", "the story was boring", 4.0),
    ("a man is running", "a woman is eating food", 0.4),
    ("what is the answer", "who is the actor", 0.8),
]


def write_sts_fixtures(monkeypatch, data_root: Path) -> None:
    """Tiny STS12-16, STS-B and SICK files in the SentEval layout, registered as the real datasets."""
    from suites.sts import TASKS

    sts = data_root / "senteval/downstream/STS"
    for task in TASKS:
        if not getattr(task, "subsets", None):
            continue
        d = sts / f"{task.name.upper()}-en-test"
        d.mkdir(parents=True, exist_ok=True)
        for i, subset in enumerate(task.subsets):
            pairs = STS_PAIRS[i % 3:] + STS_PAIRS[: i % 3]
            (d / f"STS.input.{subset}.txt").write_text("".join(f"{a}\t{b}\n" for a, b, _ in pairs) + "x\ty\n")
            (d / f"STS.gs.{subset}.txt").write_text("".join(f"{g}\n" for _, _, g in pairs) + "\n")
        register_fixture_dataset(monkeypatch, data_root, task.dataset, str(d.relative_to(data_root)))
    stsb = sts / "STSBenchmark"
    stsb.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev", "test"):
        (stsb / f"sts-{split}.csv").write_text(
            "".join(f"main-captions\tMSRvid\t2012test\t{i:04d}\t{g}\t{a}\t{b}\n" for i, (a, b, g) in enumerate(STS_PAIRS)))
    register_fixture_dataset(monkeypatch, data_root, "stsb", "senteval/downstream/STS/STSBenchmark")
    sick = data_root / "senteval/downstream/SICK"
    sick.mkdir(parents=True, exist_ok=True)
    header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
    for fname in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"):
        (sick / fname).write_text(header + "".join(f"{i}\t{a}\t{b}\t{g}\tNEUTRAL\n" for i, (a, b, g) in enumerate(STS_PAIRS)))
    register_fixture_dataset(monkeypatch, data_root, "sick", "senteval/downstream/SICK")


def committed_cells() -> list[Path]:
    """The result cells committed under the checkout's results/ (none when results/ is emptied): tests whose
    purpose is to check them skip without them; every other test writes its own results."""
    from bench.paths import PUBLISHED_RESULTS

    return sorted((PUBLISHED_RESULTS / "cells").glob("*/*/*/*.json"))


def stored_row(results: Path, board_row: dict) -> dict:
    """The cell row a leaderboard row stands for, read from the cell file it names (its full provenance)."""
    stored = json.loads((Path(results) / board_row["cell"]).read_text(encoding="utf-8"))["results"]
    key = ("metric", "aggregation", "attack", "split")
    (found,) = [r for r in stored if all((r.get(k) or "") == board_row[k] for k in key)]
    return found


@pytest.fixture
def bench_env(tmp_path, monkeypatch):
    """Isolated BENCH_HOME / BENCH_DATA_DIR / BENCH_RESULTS_DIR with tiny STS fixtures."""
    from bench.paths import Paths

    for var, sub in (("BENCH_HOME", "home"), ("BENCH_DATA_DIR", "data"), ("BENCH_RESULTS_DIR", "results")):
        (tmp_path / sub).mkdir()
        monkeypatch.setenv(var, str(tmp_path / sub))
    write_sts_fixtures(monkeypatch, tmp_path / "data")
    return Paths.from_env()


@pytest.fixture
def tiny_model(tiny_bert_dir, monkeypatch):
    """Register the tiny BERT as model 'tiny' (avg pooler) for the duration of a test."""
    from bench.models import registry

    spec = registry.ModelSpec(name="tiny", backbone=str(tiny_bert_dir), pooler="avg", max_len=64,
                              description="random 2-layer BERT for tests")
    monkeypatch.setitem(registry.MODELS, "tiny", spec)
    return spec


def make_method(backbone_dir: Path, name: str, sentences: list[str], **cfg):
    """A registered training method on a freshly loaded (seed 0) model, plus a tokenised batch."""
    import torch

    from bench.models.encoder import load_hf
    from bench.methods import get_method

    torch.manual_seed(0)
    model, tok = load_hf(str(backbone_dir))
    model.train()
    cls = get_method(name)
    return cls(cls.Config(**cfg), model, "avg"), tok(sentences, padding=True, return_tensors="pt")

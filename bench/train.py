"""The shared training loop. Methods (``bench/methods/<name>.py``) compute the loss; this owns the rest.

- data: what the method's ``training_data`` hook returns (bench/methods/base.py): by default unlabeled
  sentences, one per line: wiki1m when present under the data root, else the 11.9k-sentence wiki
  sample (or ``--data FILE``); blank lines skipped; a method with its own data (supervised SimCSE's
  NLI triples) builds it from the data root. Each epoch is a fresh permutation drawn from (seed,
  epoch); the last incomplete batch is dropped (in-batch negatives want full batches); the method's
  ``collate`` tokenises a batch (default: max length 32, SimCSE's). Methods get a ``TrainContext``
  (tokenizer, data root, home, resources such as WordNet through the attacks' resource layer);
- one AdamW over the method's parameter groups, linear decay to 0 (SimCSE's HF Trainer defaults:
  no warm-up, gradient clipping at 1.0, weight decay 0);
- STS-B dev Spearman (``bench.metrics.score_pairs`` through ``bench.encoder.Encoder``) before
  training and every ``eval_every`` steps; the best trained checkpoint is kept (the step-0 score is
  recorded as the "before" number, never selected);
- resume: the last state (weights of every module, method state, optimiser, schedule, RNG, step)
  is saved at every evaluation, at the end and on Ctrl-C; re-running the same command continues
  from it and the next step's loss is exactly what an uninterrupted run computes;
- devices: the loop always runs through ``accelerate`` (one CPU process here), so
  ``accelerate launch -m bench.cli train ...`` (or ``bench train --launcher accelerate``) runs it
  with DDP on several GPUs (per-process batch = ``batch_size``, in-batch negatives per process);
- precision: ``TrainJob.dtype`` (auto|fp32|bf16|fp16) through ``bench.encoder.resolve_dtype``, set as
  accelerate's ``mixed_precision``, so the loss and every extra pass of a method (RobustEmbed's
  gradient passes included) run under its autocast; weights and optimiser state stay float32.
  A float32 run's fingerprint is what it was before --dtype existed (checkpoints resume); any other
  precision enters the fingerprint, so runs in two precisions never resume each other.

Output: ``$BENCH_HOME/models/<name>/`` holds the best checkpoint as safetensors + tokenizer +
``bench_card.json`` (method, every hyper-parameter, open choices, data sha256, steps, dev scores,
git commit, wall time) and the sentence-transformers files (modules.json, 1_Pooling/), written
only when training completes (a directory rename, so a half-trained model is never picked up).
Work in progress lives in ``$BENCH_HOME/train/<name>/`` (``last/`` for resume, ``best/``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bench.data import atomic_write_text, umask_permissions
from bench.errors import BenchError

STATE_FILE = "trainer_state.json"
CARD_FILE = "bench_card.json"


@dataclass
class TrainConfig:
    batch_size: int = 64  # SimCSE / RobustEmbed App. A: 64
    max_len: int = 32  # SimCSE: max_seq_length 32
    lr: float = 3e-5  # SimCSE BERT-base (RoBERTa-base: 1e-5, set by the registry recipe)
    weight_decay: float = 0.0  # HF Trainer default, which SimCSE uses
    warmup_steps: int = 0  # HF Trainer default (linear decay from the first step)
    max_grad_norm: float = 1.0  # HF Trainer default
    epochs: int = 1
    max_steps: int = 0  # > 0: stop after this many optimiser steps (smoke)
    eval_every: int = 250  # STS-B dev every N steps (0: never; the final weights are kept)
    eval_limit: int = 0  # > 0: score only the first N STS-B dev pairs (smoke: evaluation is the slow part)
    log_every: int = 10  # progress line every N steps
    seed: int = 0
    # Comma-separated steps (e.g. "250,500,1000") at which the weights are also written as a model of their
    # own, ``<name>-step<N>``: one run gives the checkpoints of a training-length series.
    keep_steps: str = ""
    select: str = "best"  # which weights the model keeps: "best" STS-B dev step, or "last" (a length series)

    def kept_steps(self) -> list[int]:
        try:
            return sorted({int(part) for part in self.keep_steps.split(",") if part.strip()})
        except ValueError:
            raise BenchError(f"keep_steps={self.keep_steps!r}: give step numbers separated by commas, e.g. "
                             f"--set keep_steps=250,500") from None


# TrainConfig fields that enter the fingerprint only when set: runs from before they existed still resume.
OPTIONAL_TRAIN_FIELDS = {"keep_steps": "", "select": "best"}


# Choices the papers leave open at the trainer level (copied into every model card).
TRAINER_CHOICES = {
    "selection": "best STS-B dev Spearman ('all') among the trained evaluations (SimCSE's criterion; RobustEmbed "
                 "App. A says 'average STS' without naming the sets); the step-0 score is reported, never selected",
    "batches": "a fresh permutation per epoch from (seed, epoch); the last incomplete batch is dropped",
    "negatives": "in-batch, per process under DDP (no all-gather)",
    "eval_limit": "smoke scores the first 500 STS-B dev pairs to keep evaluation cheap on CPU",
}

# Profile -> TrainConfig overrides. Method.training[profile] and the registry recipe come on top.
PROFILES: dict[str, dict[str, Any]] = {
    # Offline CPU check that the whole path works (train, dev-select, save, evaluate): 10 steps of
    # batch 16 (160 wiki-sample sentences), STS-B dev (first 500 pairs) before, at 5 and at 10 steps.
    # Sized on the shared 2-core machine (load ~20 runnable processes): a MiniLM SimCSE step of batch
    # 16 took ~50 s wall and a RobustEmbed step ~8x that (benchmarks/train_step.py), so even 40 steps
    # would take hours. On an idle machine pass --steps 250 (or more) for a real CPU run.
    "smoke": {"batch_size": 16, "max_steps": 10, "eval_every": 5, "eval_limit": 500, "epochs": 1},
    # The papers' settings (batch 64, max_len 32, lr 3e-5, wiki1m); epochs and eval interval per method.
    "paper": {"batch_size": 64, "eval_every": 250, "epochs": 1},
    # Between the two, sized for 2 CPU cores: the papers' batch 64, max_len 32 and lr, for
    # 250 steps (16,000 sentences, 1.3 passes over the wiki sample). The step count is the budget's:
    # a MiniLM RobustEmbed step at batch 64 takes 15.0 s on this project's machine in fp32
    # (benchmarks/train_step.py), so 250 steps is about 62 minutes; every method trains as many steps.
    # The full STS-B dev set (1,500 pairs) plus alignment/uniformity every 25 steps draws the curve.
    "study": {"batch_size": 64, "max_steps": 250, "eval_every": 25, "eval_limit": 0, "epochs": 2},
}


@dataclass
class TrainJob:
    """Everything one training run needs; the fingerprint of the result-changing parts guards resume."""

    name: str
    method: str
    backbone: str  # local directory or HF id of the starting weights
    base: str  # registry name of the base model (or the backbone itself)
    pooler: str
    profile: str
    train: TrainConfig
    method_config: dict
    data_path: Path | None  # --data / wiki (None: a method with its own data uses its default)
    dev_dir: Path | None  # STS-B directory (None: no evaluation)
    eval_max_len: int = 512
    device: str = "auto"
    overrides: dict = field(default_factory=dict)  # what the command line / recipe changed
    dtype: str = "auto"  # requested precision (bench.encoder.resolve_dtype)
    data_root: Path | None = None  # BENCH_DATA_DIR, for methods that build their own data

    def fingerprint(self, data_sha: str, dtype: str = "float32", method_version: int = 1) -> str:
        """``dtype``: what runs (``dtype_name``). float32 adds nothing, so fp32 fingerprints never changed;
        nor does ``method_version`` 1, so a method's fingerprint changes only when its version is bumped."""
        train = {k: v for k, v in dataclasses.asdict(self.train).items()
                 if OPTIONAL_TRAIN_FIELDS.get(k, object()) != v}
        blob = {"method": self.method, "backbone": self.backbone, "pooler": self.pooler,
                "train": train, "method_config": self.method_config, "data": data_sha}
        if dtype != "float32":
            blob["dtype"] = dtype
        if method_version != 1:
            blob["method_version"] = method_version
        return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:16]


def split_overrides(method_cls, values: dict) -> tuple[dict, dict]:
    """Split {name: value} into (TrainConfig fields, method Config fields); unknown names raise."""
    train_fields = {f.name for f in dataclasses.fields(TrainConfig)}
    method_fields = {f.name for f in dataclasses.fields(method_cls.Config)}
    unknown = sorted(set(values) - train_fields - method_fields)
    if unknown:
        raise BenchError(f"Unknown setting(s) {', '.join(unknown)}. Trainer settings: {', '.join(sorted(train_fields))}. "
                         f"{method_cls.name} hyper-parameters: {', '.join(sorted(method_fields))}.")
    return ({k: v for k, v in values.items() if k in train_fields},
            {k: v for k, v in values.items() if k in method_fields})


# Accepted values of trainer settings and method hyper-parameters, by field name: a name means one
# thing in every method. (low, high, low_excluded); None = unbounded. A method's Config may add or
# override entries with a ``limits`` class attribute. Checked when a job is built (exit 2), so a bad
# value never starts a run.
PROBABILITY = (0.0, 1.0, False)
LIMITS: dict[str, tuple] = {
    # trainer (TrainConfig)
    "batch_size": (1, None, False), "max_len": (1, None, False), "lr": (0.0, None, True),
    "weight_decay": (0.0, None, False), "warmup_steps": (0, None, False), "max_grad_norm": (0.0, None, False),
    "epochs": (1, None, False), "max_steps": (0, None, False), "eval_every": (0, None, False),
    "eval_limit": (0, None, False), "log_every": (0, None, False), "seed": (0, None, False),
    # methods: shared names
    "temperature": (0.0, None, True),  # similarities are divided by it
    "momentum": PROBABILITY, "adversary_momentum": PROBABILITY, "ema": PROBABILITY, "powernorm_alpha": PROBABILITY,
    "mix": PROBABILITY, "synonym_prob": PROBABILITY, "mlm_probability": PROBABILITY, "cutoff_rate": PROBABILITY,
    "num_adversaries": (1, None, False), "adversary_lr": (0.0, None, True),
    "adversary_weight_decay": (0.0, None, False),
    "pgd_steps": (0, None, False), "fgsm_steps": (0, None, False), "steps": (0, None, False),
    "iterations": (0, None, False), "layers": (0, None, False),
    "pgd_step_size": (0.0, None, False), "fgsm_step_size": (0.0, None, False), "step_size": (0.0, None, False),
    "epsilon": (0.0, None, False), "init_std": (0.0, None, False), "threshold": PROBABILITY,
    "reg_weight": (0.0, None, False), "adv_weight": (0.0, None, False), "vadv_weight": (0.0, None, False),
    "mlm_weight": (0.0, None, False),
}
FLAGS = {"max_steps": "--steps", "batch_size": "--batch-size", "lr": "--lr", "eval_every": "--eval-every",
         "seed": "--seed"}  # settings that have their own flag


def _describe(low, high, low_excluded) -> str:
    if high is not None:
        return f"in [{low:g}, {high:g}]"
    return f"> {low:g}" if low_excluded else f">= {low:g}"


def check_values(values: dict, limits: dict | None = None) -> None:
    """BenchError (exit 2) naming the setting, its accepted range and how to set it, for the first value
    out of range or not finite. Names without a limit (strings, switches) are left to their owners."""
    import math

    limits = {**LIMITS, **(limits or {})}
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        how = f"{FLAGS[name]} N or --set {name}=N" if name in FLAGS else f"--set {name}=N"
        if not math.isfinite(value):
            raise BenchError(f"{name}={value} is not a finite number. Fix: give a finite value ({how}).")
        if name not in limits:
            continue
        low, high, low_excluded = limits[name]
        if (value <= low if low_excluded else value < low) or (high is not None and value > high):
            raise BenchError(f"{name}={value:g} is out of range: it must be {_describe(low, high, low_excluded)}. "
                             f"Fix: {how} with N {_describe(low, high, low_excluded)}.")


def make_train_config(method_cls, profile: str, overrides: dict) -> TrainConfig:
    if profile not in PROFILES:
        raise BenchError(f"Unknown profile '{profile}'. Choose one of: {', '.join(PROFILES)}")
    from bench.methods.base import _coerce

    values = {**PROFILES[profile], **method_cls.training.get(profile, {}), **overrides}
    defaults = TrainConfig()
    cfg = TrainConfig(**{k: _coerce(v, getattr(defaults, k), k) for k, v in values.items()})
    check_values(dataclasses.asdict(cfg))
    cfg.kept_steps()
    if cfg.select not in ("best", "last"):
        raise BenchError(f"select={cfg.select!r}: give --set select=best (the best STS-B dev step) or select=last.")
    return cfg


def training_data(data_root: Path, data: str | None) -> Path:
    """``--data``: a text file, or "wiki" / None = wiki1m when present, else the 11.9k wiki sample."""
    from bench.data import available, get_dataset, require

    if data in (None, "", "wiki"):
        if available(data_root, "wiki1m"):
            return require(data_root, "wiki1m")
        return require(data_root, "wiki-sample")
    path = Path(data).expanduser()
    if not path.is_file():
        raise BenchError(f"--data {data}: no such file. Give a text file with one sentence per line, or 'wiki' "
                         f"(wiki1m under the data root when present, else `{get_dataset('wiki-sample').root}`).")
    return path.resolve()


def read_sentences(path: Path) -> tuple[list[str], str]:
    blob = path.read_bytes()
    sentences = [line.strip() for line in blob.decode("utf-8").splitlines() if line.strip()]
    if not sentences:
        raise BenchError(f"{path} holds no sentences (one per line expected)")
    return sentences, hashlib.sha256(blob).hexdigest()


# --- checkpoint files ------------------------------------------------------------------------

ST_POOLING = {"cls_before_pooler": "cls", "avg": "mean"}  # our pooler -> sentence-transformers mode


def dev_alignment_uniformity(pairs, encode) -> tuple[float, float]:
    """Alignment (gold >= 4 pairs) and uniformity (all sentences) on the dev pairs, as the suite scores them."""
    from bench.metrics import alignment_uniformity

    align, uniform, _, _ = alignment_uniformity(pairs, encode)
    return round(align, 6), round(uniform, 6)


def write_sentence_transformers_files(directory: Path, pooler: str, hidden: int, max_len: int) -> bool:
    """modules.json + 1_Pooling/ so ``SentenceTransformer(directory)`` loads the model; False when the
    pooler has no sentence-transformers equivalent (``cls`` through the HF pooler, layer averages)."""
    mode = ST_POOLING.get(pooler)
    if mode is None:
        return False
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    atomic_write_text(directory / "modules.json", json.dumps(modules, indent=2))
    atomic_write_text(directory / "sentence_bert_config.json",
                      json.dumps({"max_seq_length": max_len, "do_lower_case": False}, indent=2))
    pooling = {"word_embedding_dimension": hidden, "pooling_mode_cls_token": mode == "cls",
               "pooling_mode_mean_tokens": mode == "mean", "pooling_mode_max_tokens": False,
               "pooling_mode_mean_sqrt_len_tokens": False, "include_prompt": True}
    atomic_write_text(directory / "1_Pooling" / "config.json", json.dumps(pooling, indent=2))
    return True


def _recover_dir(final: Path) -> None:
    """Undo a swap that a kill cut between its two renames: ``final`` is gone but its ``.old`` remains."""
    old = final.with_name(f".{final.name}.old")
    if not final.exists() and old.exists():
        old.rename(final)


def likely_nan_causes(cfg: TrainConfig, method_cfg, amp=None) -> list[str]:
    """What in the configuration most likely made the loss non-finite, each with its fix."""
    causes = []
    values = method_cfg.to_dict()
    method_defaults = type(method_cfg)().to_dict()
    for name, value in values.items():
        if "temperature" in name and isinstance(value, float) and 0 < value < 1e-3:
            causes.append(f"{name}={value:g} is near 0: similarities are divided by it, so logits overflow. "
                          f"Fix: --set {name}={method_defaults.get(name, 0.05):g} (the method's default).")
    rates = [("lr", cfg.lr, TrainConfig().lr, "--lr")] + [
        (n, v, method_defaults.get(n), f"--set {n}=") for n, v in values.items()
        if n.endswith("_lr") and isinstance(v, (int, float)) and not isinstance(v, bool)]
    for name, value, default, flag in rates:
        if default and value > 100 * default:
            causes.append(f"{name}={value:g} is over 100x its default {default:g}: the updates blew the weights up. "
                          f"Fix: {flag}{'' if flag.endswith('=') else ' '}{default:g} (the default).")
    if amp is not None and "float16" in str(amp) and "bfloat16" not in str(amp):
        causes.append("fp16 mixed precision overflowed. Fix: a GPU with bf16, or --device cpu.")
    return causes or ["no setting looks extreme. Fix: lower the learning rate (--lr) first."]


def _replace_dir(tmp: Path, final: Path) -> None:
    """Swap ``tmp`` in as ``final`` with renames (the old one is removed only after the swap)."""
    umask_permissions(tmp)  # as result files: safetensors writes 0600
    old = final.with_name(f".{final.name}.old")
    if old.exists():
        shutil.rmtree(old)
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    if old.exists():
        shutil.rmtree(old)


class _StopFlag:
    """First Ctrl-C: finish the current step, save, stop. Second: the default (immediate) behaviour."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self):
        try:
            self._previous = signal.signal(signal.SIGINT, self._handle)
        except ValueError:  # not the main thread
            self._previous = None
        return self

    def _handle(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


# --- the loop --------------------------------------------------------------------------------

def _reset_accelerate_precision(mixed_precision: str) -> None:
    """accelerate keeps one process-wide AcceleratorState and refuses a second Accelerator with another
    ``mixed_precision``; one process may train in two precisions (tests, a grid worker), so drop the
    precision part of that state (the process group, in PartialState, is kept)."""
    from accelerate.state import AcceleratorState

    shared = AcceleratorState._shared_state
    if shared and shared.get("_mixed_precision", mixed_precision) != mixed_precision:
        AcceleratorState._reset_state(reset_partial_state=False)


def run_training(job: TrainJob, home: Path, log: Callable[[str], None] = print, restart: bool = False,
                 stop_after: int | None = None) -> dict:
    """Train (or resume) ``job``; returns the model card. ``stop_after`` simulates an interruption
    after that many steps (tests): the state is saved and the function returns without finishing."""
    import torch
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs
    from safetensors.torch import load_file, load_model, save_file, save_model
    from transformers import get_linear_schedule_with_warmup

    from bench.encoder import Encoder, dtype_name, load_hf, pick_device, resolve_dtype, slow_dtype_note
    from bench.methods import get_method
    from bench.methods.base import TrainContext
    from bench.methods.resources import MethodResources
    from bench.store import git_commit, now_iso, package_versions

    started = time.perf_counter()
    method_cls = get_method(job.method)
    method_cfg = method_cls.Config.from_dict(job.method_config)
    cfg = job.train
    check_values(dataclasses.asdict(cfg))
    check_values(method_cfg.to_dict(), getattr(method_cls.Config, "limits", None))
    ctx = TrainContext(max_len=cfg.max_len, home=Path(home), data_root=job.data_root, data_path=job.data_path,
                       seed=cfg.seed, resources=MethodResources(home))
    data = method_cls.training_data(method_cfg, ctx)  # the method's data hook (default: --data's sentences)
    examples, data_sha = data.examples, data.sha256
    device = pick_device(job.device)
    amp = resolve_dtype(device, job.dtype)  # None: float32
    fingerprint = job.fingerprint(data_sha, dtype_name(amp), method_cls.version)
    work = Path(home) / "train" / job.name
    out_dir = Path(home) / "models" / job.name
    last_dir, best_dir = work / "last", work / "best"
    # A saved state becomes the resume point ("last") only once the next step's loss is finite: a state
    # the explosion already reached is never kept as the last good one. Until then it waits here.
    pending_dir = work / ".last.pending"
    for directory in (last_dir, best_dir):
        _recover_dir(directory)
    if (out_dir / CARD_FILE).exists() and not restart:
        done = json.loads((out_dir / CARD_FILE).read_text())
        if done.get("fingerprint") == fingerprint:
            log(f"'{job.name}' is already trained with this configuration ({out_dir}); --restart retrains it.")
            return done
        log(f"Note: {out_dir} holds '{job.name}' trained with another configuration; it is replaced when this "
            f"run completes.")

    mixed_precision = {None: "no", torch.bfloat16: "bf16", torch.float16: "fp16"}[amp]
    _reset_accelerate_precision(mixed_precision)
    accelerator = Accelerator(
        cpu=device == "cpu", mixed_precision=mixed_precision,
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)])
    main = accelerator.is_main_process
    if not main:  # one voice: the main process logs
        log = lambda message: None  # noqa: E731
    world, rank = accelerator.num_processes, accelerator.process_index

    state: dict[str, Any] = {"step": 0, "fingerprint": fingerprint, "best": None, "dev_history": [],
                             "losses": [], "wall_s": 0.0, "sessions": 0}
    resuming = (last_dir / STATE_FILE).exists() and not restart
    if resuming:
        saved = json.loads((last_dir / STATE_FILE).read_text())
        if saved["fingerprint"] != fingerprint:
            raise BenchError(f"{work} holds an unfinished run of '{job.name}' with a different configuration "
                             f"(data, hyper-parameters or backbone changed). Re-run with --restart to discard it, "
                             f"or --name to train under another name.")
        state = saved
    elif restart and work.exists() and main:
        shutil.rmtree(work)
    if main and pending_dir.exists():  # never validated (a kill came first): the last state is older
        shutil.rmtree(pending_dir)

    torch.manual_seed(cfg.seed)
    model, tokenizer = load_hf(job.backbone, job.name)
    model.train()
    ctx.tokenizer = tokenizer
    method = method_cls(method_cfg, model, job.pooler, ctx)
    eval_max_len = min(job.eval_max_len, int(getattr(model.config, "max_position_embeddings", 512)))

    class TrainModule(torch.nn.Module):
        """Encoder + extra modules as one module: one forward (the loss) per backward, as DDP wants."""

        def __init__(self):
            super().__init__()
            self.encoder, self.extra = model, method.modules

        def forward(self, batch, step):
            return method.loss(batch, step)

    module = TrainModule()
    optimizer = torch.optim.AdamW(method.param_groups(cfg.lr, cfg.weight_decay), lr=cfg.lr,
                                  weight_decay=cfg.weight_decay)
    per_epoch = len(examples) // (cfg.batch_size * world)
    if per_epoch == 0:
        raise BenchError(f"The training data ({data.summary}) is fewer than one batch of "
                         f"{cfg.batch_size} x {world} process(es). Use a smaller --batch-size or more data.")
    total = per_epoch * cfg.epochs
    if cfg.max_steps > 0:
        total = min(total, cfg.max_steps)
    scheduler = get_linear_schedule_with_warmup(optimizer, cfg.warmup_steps, total)

    if resuming:
        load_model(module, str(last_dir / "modules.safetensors"), device="cpu")
        extra = last_dir / "method_state.safetensors"
        method.load_state_dict(load_file(str(extra)) if extra.exists() else {})
        optimizer.load_state_dict(torch.load(last_dir / "optimizer.pt", weights_only=True))
        scheduler.load_state_dict(torch.load(last_dir / "scheduler.pt", weights_only=True))
    module, optimizer = accelerator.prepare(module, optimizer)
    device = str(accelerator.device)
    if resuming:
        rng = torch.load(last_dir / "rng.pt", weights_only=True)
        torch.set_rng_state(rng["cpu"])
        if torch.cuda.is_available() and "cuda" in rng:
            torch.cuda.set_rng_state_all(list(rng["cuda"]))
        log(f"Resuming '{job.name}' at step {state['step']}/{total} from {last_dir}.")

    dev_pairs = None
    if job.dev_dir is not None:
        from bench.data import read_stsb

        dev_pairs = read_stsb(job.dev_dir, "dev").limit(cfg.eval_limit or None)

    extra: dict[str, float] = {}  # alignment/uniformity of the last evaluation, for the dev curve

    def evaluate() -> float | None:
        if dev_pairs is None or not main:
            return None
        from bench.metrics import score_pairs

        encoder = Encoder(method.export_model(), tokenizer, pooler=job.pooler, max_len=eval_max_len,
                          device=device, batch_size=128, name=job.name, dtype=dtype_name(amp))
        score = score_pairs(dev_pairs, encoder.encode)[("spearman", "all")]
        extra["align"], extra["uniform"] = dev_alignment_uniformity(dev_pairs, encoder.encode)
        module.train()
        return float(score)

    def save_last(validated: bool = True) -> None:
        """Save the resume state; ``validated=False`` parks it until the next step's loss is finite."""
        if not main:
            return
        tmp = work / ".last.tmp"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        save_model(accelerator.unwrap_model(module), str(tmp / "modules.safetensors"))
        extra_state = {k: v.detach().cpu().contiguous() for k, v in method.state_dict().items()}
        if extra_state:
            save_file(extra_state, str(tmp / "method_state.safetensors"))
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
        rng = {"cpu": torch.get_rng_state()}
        if torch.cuda.is_available():
            rng["cuda"] = torch.stack(torch.cuda.get_rng_state_all())
        torch.save(rng, tmp / "rng.pt")
        state["wall_s"] = wall_before + time.perf_counter() - started
        atomic_write_text(tmp / STATE_FILE, json.dumps(state, indent=1))
        if validated:
            _replace_dir(tmp, last_dir)
            shutil.rmtree(pending_dir, ignore_errors=True)
        else:
            _replace_dir(tmp, pending_dir)

    def commit_pending() -> None:
        if main and pending_dir.exists():
            _replace_dir(pending_dir, last_dir)

    def non_finite(what: str, step: int) -> BenchError:
        shutil.rmtree(pending_dir, ignore_errors=True)  # saved after the bad update: not a good state
        kept = (json.loads((last_dir / STATE_FILE).read_text())["step"]
                if (last_dir / STATE_FILE).exists() else None)
        where = (f"The last finite state (step {kept}) is kept in {last_dir}." if kept is not None else
                 "No state was saved since the start that a finite step followed, so nothing is kept.")
        causes = likely_nan_causes(cfg, method_cfg, amp)
        return BenchError(f"{what} became non-finite at step {step}. Likely cause: {causes[0]}"
                          + "".join(f" Also: {c}" for c in causes[1:])
                          + f" {where} Re-run with the fix and --restart (a changed setting starts afresh).")

    def save_best(score: float | None) -> None:
        if not main:
            return
        tmp = work / ".best.tmp"
        if tmp.exists():
            shutil.rmtree(tmp)
        method.export_model().save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        atomic_write_text(tmp / "best.json", json.dumps({"step": state["step"], "stsb_dev_spearman": score}))
        _replace_dir(tmp, best_dir)

    def evaluate_and_keep() -> None:
        score = evaluate()
        if not main:
            return
        entry = {"step": state["step"], "stsb_dev_spearman": score, **extra}
        state["dev_history"].append(entry)
        best = state["best"]
        if dev_pairs is None or best is None or score > best["stsb_dev_spearman"]:
            state["best"] = dict(entry)
            save_best(score)
        best_score = state["best"]["stsb_dev_spearman"]
        log(f"  step {state['step']}/{total}: STS-B dev Spearman {'-' if score is None else f'{score:.2f}'} "
            f"(best {'-' if best_score is None else f'{best_score:.2f}'} at step {state['best']['step']})")

    def make_card() -> dict:
        """The model card of the weights as they are now."""
        state["wall_s"] = wall_before + time.perf_counter() - started
        return {
            "name": job.name, "method": job.method, "method_citation": method_cls.citation, "base": job.base,
            "backbone": job.backbone, "pooler": job.pooler, "max_len": job.eval_max_len, "profile": job.profile,
            "method_version": method_cls.version,
            "method_config": method_cfg.to_dict(), "open_choices": method_cls.open_choices, "trainer_choices": TRAINER_CHOICES,
            "train_config": dataclasses.asdict(cfg), "overrides": job.overrides,
            "data": data.card, "method_resources": ctx.resources.served(),
            "steps": state["step"], "epochs_seen": state["step"] / per_epoch, "world_size": world,
            "best": state["best"], "stsb_dev_before": state.get("dev_before"), "dev_history": state["dev_history"],
            "first_loss": state["losses"][0][1] if state["losses"] else None,
            "final_loss": state["losses"][-1][1] if state["losses"] else None,
            "device": device, "amp": str(amp).replace("torch.", "") if amp else None, "dtype": dtype_name(amp),
            "git_commit": git_commit(), "package_versions": json.loads(package_versions()),
            "wall_s": state["wall_s"], "sessions": state["sessions"], "fingerprint": fingerprint,
            "created_at": now_iso(),
            "kept": "best STS-B dev step" if cfg.select == "best" else f"weights at step {state['step']}",
        }

    def write_model_files(directory: Path, card: dict) -> None:
        card["sentence_transformers"] = write_sentence_transformers_files(
            directory, job.pooler, int(model.config.hidden_size), job.eval_max_len)
        atomic_write_text(directory / CARD_FILE, json.dumps(card, indent=2, default=str))

    def save_snapshot() -> None:
        """The weights at this step as a model of their own, ``<name>-step<N>`` (``keep_steps``)."""
        target = out_dir.with_name(f"{job.name}-step{state['step']}")
        if not main or ((target / CARD_FILE).exists()
                        and json.loads((target / CARD_FILE).read_text()).get("fingerprint") == fingerprint):
            return
        tmp = target.with_name(f".{target.name}.tmp")
        if tmp.exists():
            shutil.rmtree(tmp)
        method.export_model().save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        dev = next((h for h in state["dev_history"] if h["step"] == state["step"]), None)
        card = {**make_card(), "name": target.name, "snapshot_of": job.name, "kept": f"weights at step {state['step']}",
                "best": dev}
        write_model_files(tmp, card)
        _replace_dir(tmp, target)
        log(f"  kept the weights at step {state['step']} as '{target.name}' ({target})")

    wall_before = float(state.get("wall_s", 0.0))
    state["sessions"] = int(state.get("sessions", 0)) + 1
    if state["step"] == 0 and not state["dev_history"] and dev_pairs is not None and main:
        before = evaluate()
        state["dev_before"] = before
        state["dev_history"].append({"step": 0, "stsb_dev_spearman": before, **extra})
        log(f"  step 0: STS-B dev Spearman {before:.2f} (before training; not a candidate for 'best')")

    note = slow_dtype_note(device, amp)
    if note:
        log(note)
    log(f"Training '{job.name}': {job.method} from {job.base} ({job.profile} profile), {total} steps of "
        f"{cfg.batch_size} x {world} examples ({data.summary}), "
        f"device {device}{', AMP ' + str(amp).replace('torch.', '') if amp else ''}.")
    kept_steps = set(cfg.kept_steps())
    order_epoch, order = -1, None
    tick, tick_step = time.perf_counter(), state["step"]
    with _StopFlag() as stop:
        while state["step"] < total:
            step = state["step"]
            epoch, index = divmod(step, per_epoch)
            if epoch != order_epoch:
                order = torch.randperm(len(examples), generator=torch.Generator().manual_seed(cfg.seed * 1000 + epoch))
                order_epoch = epoch
            start = (index * world + rank) * cfg.batch_size
            batch = method.collate([examples[i] for i in order[start:start + cfg.batch_size].tolist()])
            batch = {k: v.to(accelerator.device) for k, v in batch.items()}
            with accelerator.autocast():
                loss, logs = module(batch, step)
            if not torch.isfinite(loss):
                raise non_finite(f"The loss ({float(loss.detach())})", step + 1)
            commit_pending()  # the state saved after the previous step gave a finite loss: keep it
            accelerator.backward(loss)
            if cfg.max_grad_norm > 0:
                grad_norm = accelerator.clip_grad_norm_(module.parameters(), cfg.max_grad_norm)
                if grad_norm is not None and not torch.isfinite(torch.as_tensor(grad_norm)):
                    raise non_finite(f"The gradient norm ({float(grad_norm)})", step + 1)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            method.after_step(step)
            state["step"] = step + 1
            state["losses"].append([step + 1, float(loss.detach())])
            if state["step"] == 1 and main:  # the loss of the base's own weights: how much is left to learn
                log(f"  step 1/{total}: loss {state['losses'][-1][1]:.4g} (computed with the base's weights)")
            if cfg.log_every and state["step"] % cfg.log_every == 0 and main:
                rate = (state["step"] - tick_step) / max(time.perf_counter() - tick, 1e-9)
                extras = " ".join(f"{k} {v:.4g}" for k, v in logs.items() if k != "loss")
                log(f"  step {state['step']}/{total} loss {state['losses'][-1][1]:.4g} {extras} "
                    f"({rate:.2f} steps/s, ETA {(total - state['step']) / max(rate, 1e-9) / 60:.1f} min)")
            evaluating = cfg.eval_every > 0 and (state["step"] % cfg.eval_every == 0 or state["step"] == total)
            if evaluating:
                evaluate_and_keep()
                save_last(validated=state["step"] == total)  # mid-run: kept once the next loss is finite
            if state["step"] in kept_steps:
                save_snapshot()
            if stop.requested or (stop_after is not None and state["step"] >= stop_after and state["step"] < total):
                if evaluating:
                    commit_pending()
                else:
                    save_last()
                if stop.requested:
                    raise KeyboardInterrupt
                return {"stopped_at": state["step"]}

    if cfg.eval_every == 0 or state["best"] is None:
        if not any(h["step"] == state["step"] for h in state["dev_history"][1:]):
            evaluate_and_keep()
        save_last()
    if cfg.select == "last" and main and state["best"]["step"] != state["step"]:
        state["best"] = dict(next(h for h in state["dev_history"] if h["step"] == state["step"]))
        save_best(state["best"]["stsb_dev_spearman"])
    accelerator.wait_for_everyone()
    card = make_card()
    if main:
        tmp = out_dir.with_name(f".{out_dir.name}.tmp")
        if tmp.exists():
            shutil.rmtree(tmp)
        shutil.copytree(best_dir, tmp)
        write_model_files(tmp, card)
        _replace_dir(tmp, out_dir)
        atomic_write_text(work / CARD_FILE, json.dumps(card, indent=2, default=str))
        atomic_write_text(work / "losses.json", json.dumps(state["losses"]))
        for done in (last_dir, best_dir, pending_dir):  # resume state is spent (optimiser state is 2x the model)
            shutil.rmtree(done, ignore_errors=True)
        log(f"Saved '{job.name}' to {out_dir} (best step {state['best']['step']}, STS-B dev "
            f"{state['best']['stsb_dev_spearman']}); wall time {state['wall_s'] / 60:.1f} min.")
    return card


# --- entry points ----------------------------------------------------------------------------

def build_job(method: str, backbone: str, profile: str, paths, *, data: str | None = None,
              settings: dict | None = None, name: str | None = None, device: str = "auto",
              allow_unverified_data: bool = False, dtype: str = "auto") -> TrainJob:
    """A TrainJob from command-line terms. ``backbone`` is a registry model name, a directory or a
    HF id; a registered trained model with the same (method, base, profile) lends its name,
    pooler and recipe."""
    from bench.data import available, require
    from bench.encoder import resolve_backbone
    from bench.methods import get_method
    from bench.registry import known_models

    method_cls = get_method(method)
    settings = dict(settings or {})
    pooler_override = settings.pop("pooler", None)
    models = known_models(paths)  # built-in, then $BENCH_HOME/models.toml
    registered = next((s for s in models.values() if s.method == method and s.base == backbone
                       and s.profile == profile), None)
    base_spec = models.get(backbone)
    if base_spec is not None and base_spec.is_trained:
        raise BenchError(f"--backbone {backbone} is itself a trained model; start from its base '{base_spec.base}'.")
    recipe = dict(registered.recipe) if registered else {}
    train_values, method_values = split_overrides(method_cls, {**recipe, **settings})
    train_cfg = make_train_config(method_cls, profile, train_values)
    method_cfg = method_cls.Config.from_dict(method_values)  # fail early on bad types ...
    check_values(method_cfg.to_dict(), getattr(method_cls.Config, "limits", None))  # ... and values
    if registered is not None:
        pooler, eval_max_len = registered.pooler, registered.max_len
    elif base_spec is not None:
        pooler = "cls_before_pooler" if base_spec.pooler == "cls" else base_spec.pooler
        eval_max_len = base_spec.max_len
    else:
        pooler, eval_max_len = "cls_before_pooler", 512
    pooler = pooler_override or pooler
    if name is None:
        slug = backbone.rstrip("/").split("/")[-1].lower()
        name = registered.name if registered else f"{method}-{slug}-{profile}"
    backbone_path = resolve_backbone(base_spec) if base_spec is not None else backbone
    dev_dir = require(paths.data, "stsb") if train_cfg.eval_every > 0 else None
    default_data = data in (None, "", "wiki")
    # a method with its own data (its training_data hook) builds it from the data root unless --data names a file
    data_path = None if default_data and not method_cls.unlabeled_sentences else training_data(paths.data, data)
    # Content check (sha256, cached) of the benchmark data the run reads: a corrupt dev set would pick
    # the wrong checkpoint, corrupt training text would train on it. Own --data files are the user's.
    from bench.data import check_content

    read = (_benchmark_training_data(paths.data, data_path) if data_path is not None
            else method_cls.training_datasets(method_cfg))
    for dataset in (["stsb"] if dev_dir is not None else []) + read:
        check_content(paths.data, dataset, paths.cache, allow_unverified_data)
    if method_cls.unlabeled_sentences and profile == "paper" and default_data and not available(paths.data, "wiki1m"):
        print("Note: wiki1m is not under the data root; the paper profile falls back to the 11.9k wiki sample "
              "(`bench data fetch wiki1m` gets the full set).")
    return TrainJob(name=name, method=method, backbone=backbone_path, base=backbone, pooler=pooler,
                    profile=profile, train=train_cfg, method_config=method_values,
                    data_path=data_path, dev_dir=dev_dir, eval_max_len=eval_max_len,
                    device=device, overrides=settings, dtype=dtype, data_root=paths.data)


def _benchmark_training_data(data_root: Path, data_path: Path) -> list[str]:
    """The registered dataset(s) whose file is ``data_path`` (none for the user's own --data file)."""
    from bench.data import DATASETS

    return [d.name for d in DATASETS.values() if (data_root / d.root).resolve() == Path(data_path).resolve()]


def train_registered(spec, paths, device: str = "auto", seed: int = 0, log: Callable[[str], None] = print,
                     allow_unverified_data: bool = False, dtype: str = "auto") -> dict:
    """Train a registered method model (``bench run`` calls this when its checkpoint is missing); a
    snapshot (``snapshot_of``) is written by training the run it belongs to."""
    if spec.snapshot_of:
        from bench.registry import resolve_model

        run = resolve_model(spec.snapshot_of, paths)
        card = train_registered(run, paths, device, seed, log, allow_unverified_data, dtype)
        if not (Path(paths.models) / spec.name / CARD_FILE).exists():
            raise BenchError(f"Training '{run.name}' wrote no snapshot '{spec.name}': its keep_steps "
                             f"({run.recipe.get('keep_steps', '')}) must name the step in the snapshot's name.")
        return card
    # The model's own recipe (a models.toml entry written by `bench train --name`) and pooler come along.
    settings = {**spec.recipe, "seed": spec.recipe.get("seed", seed), "pooler": spec.pooler}
    job = build_job(spec.method, spec.base, spec.profile or "smoke", paths, settings=settings,
                    name=spec.name, device=device, allow_unverified_data=allow_unverified_data,
                    dtype=dtype)
    return run_training(job, paths.home, log=log)

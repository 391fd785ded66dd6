"""The shared training loop. Methods (``bench/methods/<name>.py``) compute the loss; this owns the rest.

- data: what the method's ``training_data`` hook returns (bench/methods/base.py): by default unlabeled
  sentences, one per line: wiki1m when present under the data root, else the 11.9k-sentence wiki
  sample (or ``--data FILE``); blank lines skipped; a method with its own data (supervised SimCSE's
  NLI triples) builds it from the data root. Each epoch is a fresh permutation drawn from (seed,
  epoch); the last incomplete batch is dropped (in-batch negatives want full batches); the method's
  ``collate`` tokenises a batch (default: max length 32, SimCSE's). Methods get a ``TrainContext``
  (tokenizer, data root, home, resources such as WordNet, found by ``bench.methods.resources``);
- one AdamW over the method's parameter groups, linear decay to 0 (SimCSE's HF Trainer defaults:
  no warm-up, gradient clipping at 1.0, weight decay 0);
- STS-B dev Spearman (``bench.scoring.metrics.score_pairs`` through ``bench.models.encoder.Encoder``) before
  training and every ``eval_every`` steps; the best trained checkpoint is kept (the step-0 score is
  recorded as the "before" number, never selected);
- resume: the last state (weights of every module, method state, optimiser, schedule, RNG, step)
  is saved at every evaluation, at the end and on Ctrl-C; re-running the same command continues
  from it and the next step's loss is exactly what an uninterrupted run computes;
- devices: the loop always runs through ``accelerate`` (one CPU process here), so
  ``accelerate launch -m app.cli train ...`` (or ``bench train --launcher accelerate``) runs it
  with DDP on several GPUs (per-process batch = ``batch_size``, in-batch negatives per process);
- precision: ``TrainJob.dtype`` (auto|fp32|bf16|fp16) through ``bench.models.encoder.resolve_dtype``, set as
  accelerate's ``mixed_precision``, so the loss and every extra pass of a method (RobustEmbed's
  gradient passes included) run under its autocast; weights and optimiser state stay float32.
  A float32 run's fingerprint is what it was before --dtype existed (checkpoints resume); any other
  precision enters the fingerprint, so runs in two precisions never resume each other.

``run_training`` runs five named phases over three records: ``prepare`` (configuration, data, device and
precision, fingerprint, directories; then ``open_attempt``: the accelerator and the resume state) makes
the ``Run``; ``build`` (model, method, optimiser, schedule, restored when resuming) makes the ``Parts``;
``train_steps`` (the step loop) calls ``evaluate_and_keep`` (evaluate, keep the best) and ``save_last``;
``save_and_commit`` writes the model. ``Run`` and ``Parts`` stay as made; the one state the loop changes
is ``Progress``, which every resume point saves as ``trainer_state.json``.

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

from bench.errors import BenchError
from bench.io import atomic_write_text, file_sha256, umask_permissions

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
    "seed": "the trainer's seed draws the data order (the per-epoch permutations), the dropout masks and every "
            "module the method initialises afresh (heads, adversaries, masks: torch.manual_seed before the model "
            "is built); the base's weights and the data are the same for every seed",
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
    dtype: str = "auto"  # requested precision (bench.models.encoder.resolve_dtype)
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
    from bench.data.datasets import available, get_dataset, require

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
    from bench.scoring.metrics import alignment_uniformity

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


# --- the run's records -----------------------------------------------------------------------

@dataclass
class Progress:
    """The state the phases share and every resume point saves (``trainer_state.json``, the same keys as
    always, so a run saved by an earlier version resumes)."""

    step: int = 0
    fingerprint: str = ""
    best: dict | None = None  # the kept evaluation: step, stsb_dev_spearman, align, uniform
    dev_history: list = field(default_factory=list)
    losses: list = field(default_factory=list)  # [step, loss] after each step
    wall_s: float = 0.0  # over every attempt (process) of the run
    sessions: int = 0  # attempts (processes) that ran the run; the stored key keeps its name
    dev_before: float | None = None  # STS-B dev before training: reported, never selected

    @classmethod
    def read(cls, path: Path) -> Progress:
        saved = json.loads(path.read_text())
        return cls(**{f.name: saved[f.name] for f in dataclasses.fields(cls) if f.name in saved})

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)


@dataclass(frozen=True)
class RunDirs:
    """Work in progress under ``$BENCH_HOME/train/<name>``, the finished model in ``$BENCH_HOME/models/<name>``."""

    work: Path
    out: Path

    @classmethod
    def of(cls, home: Path, name: str) -> RunDirs:
        return cls(Path(home) / "train" / name, Path(home) / "models" / name)

    @property
    def last(self) -> Path:  # the resume point
        return self.work / "last"

    @property
    def best(self) -> Path:  # the weights the model keeps
        return self.work / "best"

    @property
    def pending(self) -> Path:
        """A saved state becomes the resume point ("last") only once the next step's loss is finite: a state
        the explosion already reached is never kept as the last good one. Until then it waits here."""
        return self.work / ".last.pending"


@dataclass
class Run:
    """What ``prepare`` fixes for the whole run (configuration, data, precision, fingerprint, directories)
    and the attempt (process) it runs in (accelerator, device, log, clock)."""

    job: TrainJob
    method_cls: Any
    method_cfg: Any
    ctx: Any  # the methods' TrainContext
    data: Any  # the methods' TrainingData
    amp: Any  # autocast dtype; None: float32
    fingerprint: str
    dirs: RunDirs
    dev_pairs: Any  # STS-B dev pairs, None: no evaluation
    log: Callable[[str], None]
    device: str
    accelerator: Any = None
    started: float = 0.0  # perf_counter when this attempt (process) started
    wall_before: float = 0.0  # wall seconds of the earlier attempts

    @property
    def cfg(self) -> TrainConfig:
        return self.job.train

    @property
    def main(self) -> bool:
        return self.accelerator.is_main_process

    @property
    def world(self) -> int:
        return self.accelerator.num_processes

    @property
    def rank(self) -> int:
        return self.accelerator.process_index

    def wall_s(self) -> float:
        return self.wall_before + time.perf_counter() - self.started


@dataclass
class Parts:
    """What ``build`` makes: the network, the method around it, the optimiser and the schedule."""

    model: Any
    tokenizer: Any
    method: Any
    module: Any  # encoder + the method's extra modules, as the accelerator wraps them
    optimizer: Any
    scheduler: Any
    per_epoch: int
    total: int
    eval_max_len: int
    # the base's weights hash as ``bench run --model <base>`` stamps it on the base's own cells: a base built on
    # each machine (the masked-LM MiniLM) has cells of several builds, and the ledger pairs by build
    base_encoder_sha256: str = ""


# --- the loop --------------------------------------------------------------------------------

def run_training(job: TrainJob, home: Path, log: Callable[[str], None] = print, restart: bool = False,
                 stop_after: int | None = None) -> dict:
    """Train (or resume) ``job``; returns the model card. ``stop_after`` simulates an interruption
    after that many steps (tests): the state is saved and the function returns without finishing.

    The phases: prepare (configuration, data, device, resume state), build (model, method, optimiser,
    schedule), the step loop (evaluating and keeping the best as it goes), then save and commit."""
    started = time.perf_counter()
    run = prepare(job, home, log)
    done = already_trained(run, restart)
    if done is not None:
        return done
    progress, resuming = open_attempt(run, restart, started)
    parts = build(run, progress, resuming)
    if not train_steps(run, parts, progress, stop_after):
        return {"stopped_at": progress.step}
    return save_and_commit(run, parts, progress)


# --- phase 1: prepare ------------------------------------------------------------------------

def prepare(job: TrainJob, home: Path, log: Callable[[str], None]) -> Run:
    """The configuration, checked; the method's training data; the device and precision; the fingerprint
    that guards resume; the run's directories (a swap cut by a kill is undone first)."""
    from bench.models.encoder import dtype_name, pick_device, resolve_dtype
    from bench.methods import get_method
    from bench.methods.base import TrainContext
    from bench.methods.resources import MethodResources

    method_cls = get_method(job.method)
    method_cfg = method_cls.Config.from_dict(job.method_config)
    cfg = job.train
    check_values(dataclasses.asdict(cfg))
    check_values(method_cfg.to_dict(), getattr(method_cls.Config, "limits", None))
    ctx = TrainContext(max_len=cfg.max_len, home=Path(home), data_root=job.data_root, data_path=job.data_path,
                       seed=cfg.seed, resources=MethodResources(home))
    data = method_cls.training_data(method_cfg, ctx)  # the method's data hook (default: --data's sentences)
    device = pick_device(job.device)
    amp = resolve_dtype(device, job.dtype)  # None: float32
    dirs = RunDirs.of(home, job.name)
    for directory in (dirs.last, dirs.best):
        _recover_dir(directory)
    dev_pairs = None
    if job.dev_dir is not None:
        from bench.data.datasets import read_stsb

        dev_pairs = read_stsb(job.dev_dir, "dev").limit(cfg.eval_limit or None)
    return Run(job=job, method_cls=method_cls, method_cfg=method_cfg, ctx=ctx, data=data, amp=amp,
               fingerprint=job.fingerprint(data.sha256, dtype_name(amp), method_cls.version), dirs=dirs,
               dev_pairs=dev_pairs, log=log, device=device)


def already_trained(run: Run, restart: bool) -> dict | None:
    """The card of a finished model with this fingerprint (nothing to do), unless ``restart``."""
    card_path = run.dirs.out / CARD_FILE
    if not card_path.exists() or restart:
        return None
    try:
        done = json.loads(card_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        done = None
    if not isinstance(done, dict):  # a damaged card vouches for nothing: train again
        run.log(f"Note: {card_path} does not parse; '{run.job.name}' is trained again and replaces it.")
        return None
    if done.get("fingerprint") == run.fingerprint:
        run.log(f"'{run.job.name}' is already trained with this configuration ({run.dirs.out}); --restart retrains it.")
        return done
    run.log(f"Note: {run.dirs.out} holds '{run.job.name}' trained with another configuration; it is replaced when "
            f"this run completes.")
    return None


def open_attempt(run: Run, restart: bool, started: float) -> tuple[Progress, bool]:
    """The accelerator on the chosen device and precision, then the resume state: (progress, resuming)."""
    import torch
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs

    mixed_precision = {None: "no", torch.bfloat16: "bf16", torch.float16: "fp16"}[run.amp]
    _reset_accelerate_precision(mixed_precision)
    run.accelerator = Accelerator(
        cpu=run.device == "cpu", mixed_precision=mixed_precision,
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)])
    run.device = str(run.accelerator.device)
    if not run.main:  # one voice: the main process logs
        run.log = lambda message: None
    progress, resuming = resume_state(run, restart)
    run.started, run.wall_before = started, float(progress.wall_s)
    progress.sessions = int(progress.sessions) + 1
    return progress, resuming


def resume_state(run: Run, restart: bool) -> tuple[Progress, bool]:
    """The saved progress of an unfinished run with the same fingerprint, else a fresh one (``restart``
    discards the old work)."""
    dirs = run.dirs
    resuming = (dirs.last / STATE_FILE).exists() and not restart
    progress = Progress(fingerprint=run.fingerprint)
    if resuming:
        progress = Progress.read(dirs.last / STATE_FILE)
        if progress.fingerprint != run.fingerprint:
            raise BenchError(f"{dirs.work} holds an unfinished run of '{run.job.name}' with a different configuration "
                             f"(data, hyper-parameters or backbone changed). Re-run with --restart to discard it, "
                             f"or --name to train under another name.")
    elif restart and dirs.work.exists() and run.main:
        shutil.rmtree(dirs.work)
    if run.main and dirs.pending.exists():  # never validated (a kill came first): the last state is older
        shutil.rmtree(dirs.pending)
    return progress, resuming


def _reset_accelerate_precision(mixed_precision: str) -> None:
    """accelerate keeps one process-wide AcceleratorState and refuses a second Accelerator with another
    ``mixed_precision``; one process may train in two precisions (tests, a grid worker), so drop the
    precision part of that state (the process group, in PartialState, is kept)."""
    from accelerate.state import AcceleratorState

    shared = AcceleratorState._shared_state
    if shared and shared.get("_mixed_precision", mixed_precision) != mixed_precision:
        AcceleratorState._reset_state(reset_partial_state=False)


# --- phase 2: build --------------------------------------------------------------------------

def build(run: Run, progress: Progress, resuming: bool) -> Parts:
    """The base's weights, the method around them, AdamW and the linear schedule; a resumed run gets back
    every module's weights, the method's state, the optimiser, the schedule and the RNG."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    from bench.models.encoder import load_hf, state_dict_sha256

    cfg = run.cfg
    torch.manual_seed(cfg.seed)
    model, tokenizer = load_hf(run.job.backbone, run.job.name)
    base_encoder_sha256 = state_dict_sha256(model)  # before any step or resume point touches the weights
    model.train()
    run.ctx.tokenizer = tokenizer
    method = run.method_cls(run.method_cfg, model, run.job.pooler, run.ctx)
    eval_max_len = min(run.job.eval_max_len, int(getattr(model.config, "max_position_embeddings", 512)))
    module = _train_module(model, method)
    check_training_space(run, sum(p.numel() for p in module.parameters()), resuming)
    optimizer = torch.optim.AdamW(method.param_groups(cfg.lr, cfg.weight_decay), lr=cfg.lr,
                                  weight_decay=cfg.weight_decay)
    per_epoch = len(run.data.examples) // (cfg.batch_size * run.world)
    if per_epoch == 0:
        raise BenchError(f"The training data ({run.data.summary}) is fewer than one batch of "
                         f"{cfg.batch_size} x {run.world} process(es). Use a smaller --batch-size or more data.")
    total = per_epoch * cfg.epochs
    if cfg.max_steps > 0:
        total = min(total, cfg.max_steps)
    scheduler = get_linear_schedule_with_warmup(optimizer, cfg.warmup_steps, total)
    if resuming:
        _load_resume_point(run.dirs.last, module, method, optimizer, scheduler)
    module, optimizer = run.accelerator.prepare(module, optimizer)
    if resuming:
        _restore_rng(run.dirs.last)
        run.log(f"Resuming '{run.job.name}' at step {progress.step}/{total} from {run.dirs.last}.")
    return Parts(model=model, tokenizer=tokenizer, method=method, module=module, optimizer=optimizer,
                 scheduler=scheduler, per_epoch=per_epoch, total=total, eval_max_len=eval_max_len,
                 base_encoder_sha256=base_encoder_sha256)


# Bytes per trained parameter: float32 weights, and AdamW's two float32 moments in the resume point.
WEIGHT_BYTES, ADAMW_BYTES = 4, 8


def training_space(parameters: int, resuming: bool) -> dict[str, int]:
    """What a run of ``parameters`` trained parameters writes under $BENCH_HOME, in bytes: a resume point
    (weights + optimiser state) is written beside the last one before replacing it (two at a time, one more
    when resuming beside the kept one), the best weights are swapped in the same way and the final model is
    one more copy. "needed" adds the margin every write keeps (``bench.results.store.MIN_FREE_BYTES``)."""
    from bench.results.store import MIN_FREE_BYTES

    weights = WEIGHT_BYTES * parameters
    resume = weights + ADAMW_BYTES * parameters
    return {"weights": weights, "resume": resume,
            "needed": (1 if resuming else 2) * resume + 3 * weights + MIN_FREE_BYTES}


def check_training_space(run: Run, parameters: int, resuming: bool) -> None:
    """Before the first step: a BenchError (exit 2) when $BENCH_HOME lacks the room ``training_space`` counts,
    so a full disk never costs a training at its first resume point."""
    if not run.main:
        return
    space = training_space(parameters, resuming)
    run.dirs.work.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(run.dirs.work).free
    if free < space["needed"]:
        mib = 1 << 20
        raise BenchError(f"{run.dirs.work} has {free / mib:.0f} MiB free; training '{run.job.name}' needs about "
                         f"{space['needed'] / mib:.0f} MiB ({parameters:,} parameters: each resume point "
                         f"{space['resume'] / mib:.0f} MiB of weights and AdamW state, the weights "
                         f"{space['weights'] / mib:.0f} MiB for the best and the final model). Fix: free space "
                         f"there, or point BENCH_HOME at a larger disk. Nothing was trained.")


def _train_module(model, method):
    """Encoder + the method's extra modules as one module: one forward (the loss) per backward, as DDP wants.
    Its parameter names (``encoder.*``, ``extra.*``) are the keys of the saved ``modules.safetensors``."""
    import torch

    class TrainModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder, self.extra = model, method.modules

        def forward(self, batch, step):
            return method.loss(batch, step)

    return TrainModule()


def _load_resume_point(last_dir: Path, module, method, optimizer, scheduler) -> None:
    import torch
    from safetensors.torch import load_file, load_model

    load_model(module, str(last_dir / "modules.safetensors"), device="cpu")
    extra = last_dir / "method_state.safetensors"
    method.load_state_dict(load_file(str(extra)) if extra.exists() else {})
    optimizer.load_state_dict(torch.load(last_dir / "optimizer.pt", weights_only=True))
    scheduler.load_state_dict(torch.load(last_dir / "scheduler.pt", weights_only=True))


def _restore_rng(last_dir: Path) -> None:
    import torch

    rng = torch.load(last_dir / "rng.pt", weights_only=True)
    torch.set_rng_state(rng["cpu"])
    if torch.cuda.is_available() and "cuda" in rng:
        torch.cuda.set_rng_state_all(list(rng["cuda"]))


# --- phase 3: the step loop ------------------------------------------------------------------

def train_steps(run: Run, parts: Parts, progress: Progress, stop_after: int | None) -> bool:
    """The score before training, then steps to the end of the schedule; every ``eval_every`` steps an
    evaluation (keeping the best) and a resume point. False when stopped early (Ctrl-C, ``stop_after``):
    the state is saved first."""
    cfg = run.cfg
    evaluate_before(run, parts, progress)
    announce(run, parts)
    kept_steps = set(cfg.kept_steps())
    orders: dict = {}  # epoch -> its permutation (the current epoch only)
    tick = [time.perf_counter(), progress.step, time.perf_counter()]  # rate's start; the last line's time
    with _StopFlag() as stop:
        while progress.step < parts.total:
            logs = take_step(run, parts, progress, orders)
            log_step(run, parts, progress, logs, tick)
            evaluating = cfg.eval_every > 0 and (progress.step % cfg.eval_every == 0 or progress.step == parts.total)
            if evaluating:
                evaluate_and_keep(run, parts, progress)
                # mid-run, the state is kept once the next loss is finite
                save_last(run, parts, progress, validated=progress.step == parts.total)
            if progress.step in kept_steps:
                save_snapshot(run, parts, progress)
            if stop.requested or (stop_after is not None and stop_after <= progress.step < parts.total):
                if evaluating:
                    commit_pending(run)
                else:
                    save_last(run, parts, progress)
                if stop.requested:
                    raise KeyboardInterrupt
                return False
    return True


def announce(run: Run, parts: Parts) -> None:
    from bench.models.encoder import slow_dtype_note

    note = slow_dtype_note(run.device, run.amp)
    if note:
        run.log(note)
    job, cfg, amp = run.job, run.cfg, run.amp
    run.log(f"Training '{job.name}': {job.method} from {job.base} ({job.profile} profile), {parts.total} steps of "
            f"{cfg.batch_size} x {run.world} examples ({run.data.summary}), "
            f"device {run.device}{', AMP ' + str(amp).replace('torch.', '') if amp else ''}.")


def next_batch(run: Run, parts: Parts, step: int, orders: dict) -> dict:
    """The batch of ``step``: this process's slice of its epoch's permutation, drawn from (seed, epoch)."""
    import torch

    cfg, examples = run.cfg, run.data.examples
    epoch, index = divmod(step, parts.per_epoch)
    if epoch not in orders:
        orders.clear()
        orders[epoch] = torch.randperm(len(examples), generator=torch.Generator().manual_seed(cfg.seed * 1000 + epoch))
    start = (index * run.world + run.rank) * cfg.batch_size
    batch = parts.method.collate([examples[i] for i in orders[epoch][start:start + cfg.batch_size].tolist()])
    return {k: v.to(run.accelerator.device) for k, v in batch.items()}


def take_step(run: Run, parts: Parts, progress: Progress, orders: dict) -> dict:
    """One optimiser step on the next batch; its logs. A non-finite loss or gradient norm stops the run."""
    import torch

    step, accelerator = progress.step, run.accelerator
    batch = next_batch(run, parts, step, orders)
    with accelerator.autocast():
        loss, logs = parts.module(batch, step)
    if not torch.isfinite(loss):
        raise non_finite(run, f"The loss ({float(loss.detach())})", step + 1)
    commit_pending(run)  # the state saved after the previous step gave a finite loss: keep it
    accelerator.backward(loss)
    if run.cfg.max_grad_norm > 0:
        grad_norm = accelerator.clip_grad_norm_(parts.module.parameters(), run.cfg.max_grad_norm)
        if grad_norm is not None and not torch.isfinite(torch.as_tensor(grad_norm)):
            raise non_finite(run, f"The gradient norm ({float(grad_norm)})", step + 1)
    parts.optimizer.step()
    parts.scheduler.step()
    parts.optimizer.zero_grad(set_to_none=True)
    parts.method.after_step(step)
    progress.step = step + 1
    progress.losses.append([step + 1, float(loss.detach())])
    return logs


def log_step(run: Run, parts: Parts, progress: Progress, logs: dict, tick: list) -> None:
    """Step 1's loss (the base's own weights: how much is left to learn), then every ``log_every`` steps
    and at least every 30 s (bench.progress.EVERY_S), with the time left."""
    from bench.progress import EVERY_S, duration

    if not run.main:
        return
    step, total, loss = progress.step, parts.total, progress.losses[-1][1]
    if step == 1:
        run.log(f"  step 1/{total}: loss {loss:.4g} (computed with the base's weights)")
    now = time.perf_counter()
    if (run.cfg.log_every and step % run.cfg.log_every == 0) or now - tick[2] >= EVERY_S or step == total:
        rate = (step - tick[1]) / max(now - tick[0], 1e-9)
        extras = " ".join(f"{k} {v:.4g}" for k, v in logs.items() if k != "loss")
        run.log(f"  step {step}/{total} loss {loss:.4g} {extras} "
                f"({rate:.2f} steps/s, ~{duration((total - step) / max(rate, 1e-9))} left)")
        tick[2] = now


def non_finite(run: Run, what: str, step: int) -> BenchError:
    """The error that stops a run whose loss or gradient became non-finite: the likely cause and what is kept."""
    last_dir = run.dirs.last
    shutil.rmtree(run.dirs.pending, ignore_errors=True)  # saved after the bad update: not a good state
    kept = (json.loads((last_dir / STATE_FILE).read_text())["step"]
            if (last_dir / STATE_FILE).exists() else None)
    where = (f"The last finite state (step {kept}) is kept in {last_dir}." if kept is not None else
             "No state was saved since the start that a finite step followed, so nothing is kept.")
    causes = likely_nan_causes(run.cfg, run.method_cfg, run.amp)
    return BenchError(f"{what} became non-finite at step {step}. Likely cause: {causes[0]}"
                      + "".join(f" Also: {c}" for c in causes[1:])
                      + f" {where} Re-run with the fix and --restart (a changed setting starts afresh).")


# --- phase 4: evaluate and keep the best -----------------------------------------------------

def evaluate(run: Run, parts: Parts) -> tuple[float | None, dict]:
    """STS-B dev Spearman of the weights as they are, with alignment and uniformity (the dev curve's
    extras); (None, {}) without dev data or off the main process."""
    if run.dev_pairs is None or not run.main:
        return None, {}
    from bench.models.encoder import Encoder, dtype_name
    from bench.scoring.metrics import score_pairs

    encoder = Encoder(parts.method.export_model(), parts.tokenizer, pooler=run.job.pooler, max_len=parts.eval_max_len,
                      device=run.device, batch_size=128, name=run.job.name, dtype=dtype_name(run.amp))
    score = score_pairs(run.dev_pairs, encoder.encode)[("spearman", "all")]
    align, uniform = dev_alignment_uniformity(run.dev_pairs, encoder.encode)
    parts.module.train()
    return float(score), {"align": align, "uniform": uniform}


def evaluate_before(run: Run, parts: Parts, progress: Progress) -> None:
    """The step-0 score of a fresh run: recorded as the "before" number, never a candidate for the best."""
    if progress.step != 0 or progress.dev_history or run.dev_pairs is None or not run.main:
        return
    before, extra = evaluate(run, parts)
    progress.dev_before = before
    progress.dev_history.append({"step": 0, "stsb_dev_spearman": before, **extra})
    run.log(f"  step 0: STS-B dev Spearman {before:.2f} (before training; not a candidate for 'best')")


def evaluate_and_keep(run: Run, parts: Parts, progress: Progress) -> None:
    """Score this step; it becomes the best (its weights saved) when it beats the best so far."""
    score, extra = evaluate(run, parts)
    if not run.main:
        return
    entry = {"step": progress.step, "stsb_dev_spearman": score, **extra}
    progress.dev_history.append(entry)
    best = progress.best
    if run.dev_pairs is None or best is None or score > best["stsb_dev_spearman"]:
        progress.best = dict(entry)
        save_best(run, parts, progress.step, score)
    best_score = progress.best["stsb_dev_spearman"]
    run.log(f"  step {progress.step}/{parts.total}: STS-B dev Spearman {'-' if score is None else f'{score:.2f}'} "
            f"(best {'-' if best_score is None else f'{best_score:.2f}'} at step {progress.best['step']})")


def save_best(run: Run, parts: Parts, step: int, score: float | None) -> None:
    if not run.main:
        return
    tmp = run.dirs.work / ".best.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    parts.method.export_model().save_pretrained(tmp, safe_serialization=True)
    parts.tokenizer.save_pretrained(tmp)
    atomic_write_text(tmp / "best.json", json.dumps({"step": step, "stsb_dev_spearman": score}))
    _replace_dir(tmp, run.dirs.best)


# --- phase 5: save and commit ----------------------------------------------------------------

def save_last(run: Run, parts: Parts, progress: Progress, validated: bool = True) -> None:
    """Save the resume state; ``validated=False`` parks it until the next step's loss is finite."""
    if not run.main:
        return
    import torch
    from safetensors.torch import save_file, save_model

    tmp = run.dirs.work / ".last.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    save_model(run.accelerator.unwrap_model(parts.module), str(tmp / "modules.safetensors"))
    extra_state = {k: v.detach().cpu().contiguous() for k, v in parts.method.state_dict().items()}
    if extra_state:
        save_file(extra_state, str(tmp / "method_state.safetensors"))
    torch.save(parts.optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(parts.scheduler.state_dict(), tmp / "scheduler.pt")
    rng = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.stack(torch.cuda.get_rng_state_all())
    torch.save(rng, tmp / "rng.pt")
    progress.wall_s = run.wall_s()
    atomic_write_text(tmp / STATE_FILE, progress.to_json())
    if validated:
        _replace_dir(tmp, run.dirs.last)
        shutil.rmtree(run.dirs.pending, ignore_errors=True)
    else:
        _replace_dir(tmp, run.dirs.pending)


def commit_pending(run: Run) -> None:
    """The parked state becomes the resume point."""
    if run.main and run.dirs.pending.exists():
        _replace_dir(run.dirs.pending, run.dirs.last)


def make_card(run: Run, parts: Parts, progress: Progress) -> dict:
    """The model card of the weights as they are now."""
    import torch

    from bench.models.encoder import dtype_name
    from bench.results.store import cpu_model, git_commit, now_iso, package_versions

    job, method_cls, cfg, amp = run.job, run.method_cls, run.cfg, run.amp
    progress.wall_s = run.wall_s()
    return {
        "name": job.name, "method": job.method, "method_citation": method_cls.citation, "base": job.base,
        "backbone": job.backbone, "pooler": job.pooler, "max_len": job.eval_max_len, "profile": job.profile,
        "method_version": method_cls.version,
        "method_config": run.method_cfg.to_dict(), "open_choices": method_cls.open_choices,
        "trainer_choices": TRAINER_CHOICES,
        "train_config": dataclasses.asdict(cfg), "overrides": job.overrides,
        "data": run.data.card, "method_resources": run.ctx.resources.served(),
        "steps": progress.step, "epochs_seen": progress.step / parts.per_epoch, "world_size": run.world,
        "best": progress.best, "stsb_dev_before": progress.dev_before, "dev_history": progress.dev_history,
        "first_loss": progress.losses[0][1] if progress.losses else None,
        "final_loss": progress.losses[-1][1] if progress.losses else None,
        "base_weights_sha256": _base_weights_sha256(job.backbone),
        "base_encoder_sha256": parts.base_encoder_sha256,
        "device": run.device, "cpu": cpu_model(), "threads": torch.get_num_threads(),
        "amp": str(amp).replace("torch.", "") if amp else None, "dtype": dtype_name(amp),
        "git_commit": git_commit(), "package_versions": json.loads(package_versions()),
        "wall_s": progress.wall_s, "sessions": progress.sessions, "fingerprint": run.fingerprint,
        "created_at": now_iso(),
        "kept": "best STS-B dev step" if cfg.select == "best" else f"weights at step {progress.step}",
    }


def _base_weights_sha256(backbone: str) -> str | None:
    """sha256 of the base's safetensors when it is a local directory: two builds of one base that differ in
    their last bits (another CPU) are told apart, so seeds are compared only within one build."""
    path = Path(backbone) / "model.safetensors"
    return file_sha256(path) if path.is_file() else None


def write_model_files(run: Run, parts: Parts, directory: Path, card: dict) -> None:
    """The card and the sentence-transformers files beside the weights in ``directory``."""
    card["sentence_transformers"] = write_sentence_transformers_files(
        directory, run.job.pooler, int(parts.model.config.hidden_size), run.job.eval_max_len)
    atomic_write_text(directory / CARD_FILE, json.dumps(card, indent=2, default=str))


def save_snapshot(run: Run, parts: Parts, progress: Progress) -> None:
    """The weights at this step as a model of their own, ``<name>-step<N>`` (``keep_steps``)."""
    step = progress.step
    target = run.dirs.out.with_name(f"{run.job.name}-step{step}")
    if not run.main or ((target / CARD_FILE).exists()
                        and json.loads((target / CARD_FILE).read_text()).get("fingerprint") == run.fingerprint):
        return
    tmp = target.with_name(f".{target.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    parts.method.export_model().save_pretrained(tmp, safe_serialization=True)
    parts.tokenizer.save_pretrained(tmp)
    dev = next((h for h in progress.dev_history if h["step"] == step), None)
    card = {**make_card(run, parts, progress), "name": target.name, "snapshot_of": run.job.name,
            "kept": f"weights at step {step}", "best": dev}
    write_model_files(run, parts, tmp, card)
    _replace_dir(tmp, target)
    run.log(f"  kept the weights at step {step} as '{target.name}' ({target})")


def save_and_commit(run: Run, parts: Parts, progress: Progress) -> dict:
    """The last evaluation (when the loop made none at the end), the weights ``select`` keeps, then the
    model directory swapped in whole, with its card; the spent resume state is removed. Returns the card."""
    cfg, dirs = run.cfg, run.dirs
    if cfg.eval_every == 0 or progress.best is None:
        if not any(h["step"] == progress.step for h in progress.dev_history[1:]):
            evaluate_and_keep(run, parts, progress)
        save_last(run, parts, progress)
    if cfg.select == "last" and run.main and progress.best["step"] != progress.step:
        progress.best = dict(next(h for h in progress.dev_history if h["step"] == progress.step))
        save_best(run, parts, progress.step, progress.best["stsb_dev_spearman"])
    run.accelerator.wait_for_everyone()
    card = make_card(run, parts, progress)
    if not run.main:
        return card
    tmp = dirs.out.with_name(f".{dirs.out.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(dirs.best, tmp)
    write_model_files(run, parts, tmp, card)
    _replace_dir(tmp, dirs.out)
    atomic_write_text(dirs.work / CARD_FILE, json.dumps(card, indent=2, default=str))
    atomic_write_text(dirs.work / "losses.json", json.dumps(progress.losses))
    for done in (dirs.last, dirs.best, dirs.pending):  # resume state is spent (optimiser state is 2x the model)
        shutil.rmtree(done, ignore_errors=True)
    run.log(f"Saved '{run.job.name}' to {dirs.out} (best step {progress.best['step']}, STS-B dev "
            f"{progress.best['stsb_dev_spearman']}); wall time {progress.wall_s / 60:.1f} min.")
    return card


# --- entry points ----------------------------------------------------------------------------

def build_job(method: str, backbone: str, profile: str, paths, *, data: str | None = None,
              settings: dict | None = None, name: str | None = None, device: str = "auto",
              allow_unverified_data: bool = False, dtype: str = "auto") -> TrainJob:
    """A TrainJob from command-line terms. ``backbone`` is a registry model name, a directory or a
    HF id; a registered trained model with the same (method, base, profile) lends its name,
    pooler and recipe."""
    from bench.data.datasets import available, require
    from bench.models.encoder import resolve_backbone
    from bench.methods import get_method
    from bench.models.registry import known_models

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
    pooler, eval_max_len = _pooler_and_max_len(registered, base_spec)
    pooler = pooler_override or pooler
    if name is None:
        slug = backbone.rstrip("/").split("/")[-1].lower()
        name = registered.name if registered else f"{method}-{slug}-{profile}"
    backbone_path = resolve_backbone(base_spec) if base_spec is not None else backbone
    dev_dir = require(paths.data, "stsb") if train_cfg.eval_every > 0 else None
    default_data = data in (None, "", "wiki")
    # a method with its own data (its training_data hook) builds it from the data root unless --data names a file
    data_path = None if default_data and not method_cls.unlabeled_sentences else training_data(paths.data, data)
    read = (_benchmark_training_data(paths.data, data_path) if data_path is not None
            else method_cls.training_datasets(method_cfg))
    _check_read_data(paths, (["stsb"] if dev_dir is not None else []) + read, allow_unverified_data)
    if method_cls.unlabeled_sentences and profile == "paper" and default_data and not available(paths.data, "wiki1m"):
        print("Note: wiki1m is not under the data root; the paper profile falls back to the 11.9k wiki sample "
              "(`bench data fetch wiki1m` gets the full set).")
    return TrainJob(name=name, method=method, backbone=backbone_path, base=backbone, pooler=pooler,
                    profile=profile, train=train_cfg, method_config=method_values,
                    data_path=data_path, dev_dir=dev_dir, eval_max_len=eval_max_len,
                    device=device, overrides=settings, dtype=dtype, data_root=paths.data)


def _pooler_and_max_len(registered, base_spec) -> tuple[str, int]:
    """The trained model's pooler and evaluation length: a registered recipe's, else the base's (a [CLS]
    base read before its pooler layer, as SimCSE evaluates its unsupervised models), else BERT's."""
    if registered is not None:
        return registered.pooler, registered.max_len
    if base_spec is not None:
        return ("cls_before_pooler" if base_spec.pooler == "cls" else base_spec.pooler), base_spec.max_len
    return "cls_before_pooler", 512


def _check_read_data(paths, datasets: list[str], allow_unverified: bool) -> None:
    """Content check (sha256, cached) of the benchmark data a run reads: a corrupt dev set would pick
    the wrong checkpoint, corrupt training text would train on it. Own --data files are the user's."""
    from bench.data.datasets import check_content

    for dataset in datasets:
        check_content(paths.data, dataset, paths.cache, allow_unverified)


def _benchmark_training_data(data_root: Path, data_path: Path) -> list[str]:
    """The registered dataset(s) whose file is ``data_path`` (none for the user's own --data file)."""
    from bench.data.datasets import DATASETS

    return [d.name for d in DATASETS.values() if (data_root / d.root).resolve() == Path(data_path).resolve()]


def train_if_missing(spec, paths, *, device: str, seed: int, dtype: str, log: Callable[[str], None] = print,
                     allow_unverified_data: bool = False) -> bool:
    """Train a registered method model whose checkpoint is not on disk yet (what `bench run`, ``bench.evaluate``
    and a grid worker do before opening it: opening never trains); True when it trained."""
    if not spec.is_trained or (spec.checkpoint_dir(paths.models) / "config.json").exists():
        return False
    log(f"Model '{spec.name}' has no checkpoint yet: training it now "
        f"({spec.method} from {spec.base}, {spec.profile} profile).")
    train_registered(spec, paths, device=device, seed=seed, allow_unverified_data=allow_unverified_data, dtype=dtype)
    return True


def train_registered(spec, paths, device: str = "auto", seed: int = 0, log: Callable[[str], None] = print,
                     allow_unverified_data: bool = False, dtype: str = "auto") -> dict:
    """Train a registered method model (``bench run`` calls this when its checkpoint is missing); a
    snapshot (``snapshot_of``) is written by training the run it belongs to."""
    if spec.snapshot_of:
        from bench.models.registry import resolve_model

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

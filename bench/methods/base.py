"""The training-method plug-in: one file per method, the trainer (``bench/train.py``) owns the loop.

A method module defines ``METHOD``, a :class:`Method` subclass with a ``Config`` dataclass (paper
defaults, each field with its equation/table reference). The trainer:

1. builds ``Method(config, model, pooler)``; ``build()`` returns the extra modules (MLP pooler,
   momentum encoders, adversaries, ...), which are trained, checkpointed and resumed with the encoder;
2. makes one AdamW optimiser from ``param_groups(lr, weight_decay)`` (a group may set its own
   ``lr``, and ``maximize=True`` for gradient ASCENT, e.g. AdCSE's adversaries) and one linear
   schedule over all groups;
3. each step calls ``loss(batch, step) -> (loss, logs)`` (batch: tokenised tensors on the device:
   ``input_ids``, ``attention_mask`` [, ``token_type_ids``]), back-propagates, clips, steps, then
   ``after_step(step)`` (EMA / momentum updates, queue pushes, ...);

The data hook: the classmethod ``training_data(cfg, ctx) -> TrainingData`` says what the
trainer batches (default: the unlabeled sentences of ``--data``, one per line), and ``collate(examples)``
turns one batch of those examples into tensors (default: the tokenizer over the sentences, padded,
max length ``ctx.max_len``). A method with its own data (supervised SimCSE's NLI triples) overrides
both. ``self.ctx`` is the :class:`TrainContext` the trainer passes: the tokenizer, data root, home,
``--data`` file, and ``resources`` (WordNet and the like, resolved by the application layer), so a
method never re-loads the tokenizer or hard-codes a system path.
4. saves ``export_model()`` (the HF module that is evaluated; a momentum method may return its
   momentum encoder) and, for resume, the state of every module plus ``state_dict()`` (extra tensors
   such as queues: plain tensors only, they go to safetensors).

``Method.training`` maps a profile (``smoke``/``paper``) to trainer settings the method's paper fixes
(epochs, lr, eval interval); the registry recipe and the command line override those.

A complete method file, for example::

    from dataclasses import dataclass
    from bench.methods.base import Method, MethodConfig, info_nce

    @dataclass
    class Config(MethodConfig):
        temperature: float = 0.05  # Eq. 1: τ

    class Mine(Method):
        name = "mine"
        Config = Config
        citation = "Me et al. 2024"

        def loss(self, batch, step):
            z1, z2 = self.embed(batch, views=2)           # two dropout views, one forward pass
            loss = info_nce(self.project(z1), [self.project(z2)], self.cfg.temperature)
            return loss, {"loss": loss.item()}

    METHOD = Mine

and one line in ``bench/methods/__init__.py``: ``"mine": "bench.methods.mine:METHOD"`` (module, then the
attribute that holds the class; docs/extending.md, "A method").
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from bench.errors import BenchError
from bench.models.poolers import NEEDS_HIDDEN_STATES, POOLERS


@dataclass
class MethodConfig:
    """Fields every contrastive method shares. Subclasses add theirs, each with its paper reference."""

    temperature: float = 0.05  # SimCSE Eq. 1: τ = 0.05
    mlp: bool = True  # SimCSE: MLP over the pooled vector in training only ("mlp_only_train")

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "MethodConfig":
        """A config from overrides; strings (from ``--set k=v``) are converted to the field's type."""
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise BenchError(f"Unknown hyper-parameter(s) {', '.join(unknown)} for this method. "
                             f"Known: {', '.join(sorted(known))}.")
        defaults = cls()
        return cls(**{k: _coerce(v, getattr(defaults, k), k) for k, v in values.items()})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _coerce(value, default, name):
    if not isinstance(value, str) or isinstance(default, str) or default is None:
        return value
    try:
        if isinstance(default, bool):
            if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(value)
            return value.lower() in ("true", "1", "yes")
        if isinstance(default, int):
            return int(value)
        if isinstance(default, float):
            return float(value.split("/")[0]) / float(value.split("/")[1]) if "/" in value else float(value)
    except ValueError:
        raise BenchError(f"Hyper-parameter {name}={value!r}: expected a {type(default).__name__}") from None
    return value


class MLPPooler(nn.Module):
    """SimCSE's training-time MLP (dense + tanh) over the pooled sentence vector."""

    def __init__(self, hidden: int):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.activation = nn.Tanh()

    def forward(self, x):
        return self.activation(self.dense(x))


def info_nce(anchor, positives: list, temperature: float, negatives: list = ()):
    """Eq. 2 of RobustEmbed / SimCSE's InfoNCE, with one or more positives per anchor.

    For anchor i the positives are ``p[i]`` of every tensor in ``positives``; every other row of
    ``positives`` and every row of ``negatives`` is a negative. Loss = mean over i of
    ``-log(sum_pos exp(sim/τ) / sum_all exp(sim/τ))``; with one positive tensor this is exactly
    SimCSE's cross-entropy over the in-batch similarity matrix.
    """
    n = anchor.shape[0]
    candidates = torch.cat([*positives, *negatives], dim=0)
    logits = nn.functional.normalize(anchor.float(), dim=-1) @ nn.functional.normalize(candidates.float(), dim=-1).T
    logits = logits / temperature
    if len(positives) == 1:
        return nn.functional.cross_entropy(logits, torch.arange(n, device=anchor.device))
    pos_index = torch.arange(n, device=anchor.device)[:, None] + n * torch.arange(len(positives), device=anchor.device)
    pos_logits = logits.gather(1, pos_index)
    return (torch.logsumexp(logits, 1) - torch.logsumexp(pos_logits, 1)).mean()


def embedding_module(model) -> nn.Module:
    """The module whose output is the token-embedding sequence (word + position + type, LayerNorm, dropout)."""
    module = getattr(model, "embeddings", None)
    if module is None:
        raise BenchError(f"{type(model).__name__} has no `embeddings` module; embedding-space methods need a "
                         f"BERT-style encoder (BERT, RoBERTa, MiniLM, ...).")
    return module


@dataclass
class TrainContext:
    """What the trainer hands a method (``Method.ctx``): no method re-loads or hard-codes any of it.

    ``resources`` is an application-level object (bench/train.py ``MethodResources``) with, e.g.,
    ``wordnet_dir() -> Path`` and ``served() -> dict``; methods call it, they never import ``attacks``.
    """

    tokenizer: Any = None  # the backbone's tokenizer, loaded once by the trainer
    max_len: int = 32  # training max length (TrainConfig.max_len)
    home: Path | None = None  # BENCH_HOME (trained models, resources/)
    data_root: Path | None = None  # BENCH_DATA_DIR (SentEval layout, anli/, ...)
    data_path: Path | None = None  # --data: the sentence file, or a method's own data file (None: its default)
    seed: int = 0
    resources: Any = None

    @property
    def resources_dir(self) -> Path | None:
        return self.home / "resources" if self.home is not None else None


@dataclass
class TrainingData:
    """The examples the trainer shuffles and batches, with what the model card records about them."""

    examples: list
    sha256: str  # enters the training fingerprint: other data, other model
    card: dict  # the card's "data" entry (sources, counts, ...)
    summary: str  # one phrase for the log, e.g. "11914 sentences from wiki1m_for_simcse.head11914.txt"
    extra: dict = field(default_factory=dict)


def sentence_data(path: Path) -> TrainingData:
    """Unlabeled sentences, one per line (blank lines skipped): every unsupervised method's data."""
    blob = Path(path).read_bytes()
    sentences = [line.strip() for line in blob.decode("utf-8").splitlines() if line.strip()]
    if not sentences:
        raise BenchError(f"{path} holds no sentences (one per line expected)")
    sha = hashlib.sha256(blob).hexdigest()
    return TrainingData(sentences, sha, {"path": str(path), "sha256": sha, "sentences": len(sentences)},
                        f"{len(sentences)} sentences from {Path(path).name}")


class Method:
    """Base class. Subclasses set ``name``, ``Config``, ``citation`` and implement ``loss``."""

    name: ClassVar[str] = ""
    # bumped when a fix changes what a method computes (enters the training fingerprint and card from 2 on,
    # so version-1 methods keep their fingerprints and a stale run is never resumed under new code)
    version: ClassVar[int] = 1
    Config: ClassVar[type[MethodConfig]] = MethodConfig
    citation: ClassVar[str] = ""
    # profile -> trainer settings fixed by the method's paper (e.g. {"paper": {"epochs": 2}})
    training: ClassVar[dict[str, dict[str, Any]]] = {}
    # time of one training step / SimCSE's at the same batch and backbone (benchmarks/train_step.py): what
    # `bench run` multiplies a measured SimCSE step by to estimate a training run before it starts
    step_cost: ClassVar[float] = 1.0
    # open choices made where the paper is silent: name -> reason (copied into the model card)
    open_choices: ClassVar[dict[str, str]] = {}
    # True: trains on the trainer's unlabeled sentences (--data / wiki); False: ``training_data`` builds its own
    unlabeled_sentences: ClassVar[bool] = True

    def __init__(self, cfg: MethodConfig, model, pooler: str = "cls_before_pooler", ctx: TrainContext | None = None):
        if pooler not in POOLERS:
            raise BenchError(f"Unknown pooler '{pooler}'. Choose one of: {', '.join(POOLERS)}")
        self.cfg, self.model, self.pooler = cfg, model, pooler
        self.ctx = ctx if ctx is not None else TrainContext()
        self.hidden_size = int(model.config.hidden_size)
        self._pool = POOLERS[pooler]
        self._needs_hidden = pooler in NEEDS_HIDDEN_STATES
        self.modules = nn.ModuleDict(self.build())

    # --- what subclasses override ------------------------------------------------------------
    @classmethod
    def training_data(cls, cfg: MethodConfig, ctx: TrainContext) -> TrainingData:
        """What the trainer batches (called before the model loads). Default: ``ctx.data_path``'s sentences."""
        if ctx.data_path is None:
            raise BenchError(f"{cls.name} trains on unlabeled sentences: give --data FILE (one per line) or 'wiki'.")
        return sentence_data(ctx.data_path)

    @classmethod
    def training_datasets(cls, cfg: MethodConfig) -> list[str]:
        """Registered datasets (bench/data/datasets.py) that ``training_data`` reads without ``--data``: the trainer
        checks their content (sha256) before a run. Unlabeled-sentence methods read ``--data``'s file."""
        return []

    def collate(self, examples: list) -> dict:
        """One batch of ``training_data`` examples as tensors (the trainer moves them to the device)."""
        return self.ctx.tokenizer(examples, padding=True, truncation=True, max_length=self.ctx.max_len,
                                  return_tensors="pt")

    def build(self) -> dict[str, nn.Module]:
        """Extra trainable modules, by name (saved and resumed with the encoder)."""
        return {"mlp": MLPPooler(self.hidden_size)} if self.cfg.mlp else {}

    def loss(self, batch: dict, step: int):
        """(scalar loss tensor, {name: float} to log) for one batch."""
        raise NotImplementedError

    def after_step(self, step: int) -> None:
        """Called after each optimiser step (momentum/EMA updates and the like)."""

    def param_groups(self, lr: float, weight_decay: float) -> list[dict]:
        """Optimiser groups. Keys beyond ``params`` are AdamW options (``lr``, ``maximize``, ...)."""
        params = [p for p in (*self.model.parameters(), *self.modules.parameters()) if p.requires_grad]
        return [{"params": params, "lr": lr, "weight_decay": weight_decay}]

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Extra state that is not in a module (queues, counters as tensors), for resume."""
        return {}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        if state:
            raise ValueError(f"method {self.name} has no extra state but got {sorted(state)}")

    def export_model(self):
        """The Hugging Face module that is saved and evaluated."""
        return self.model

    # --- helpers for subclasses ----------------------------------------------------------------
    def embed(self, batch: dict, views: int = 1, model=None):
        """Pooled sentence vectors of ``views`` dropout views of the batch, from ONE forward pass over
        the batch repeated ``views`` times (as SimCSE does); returns a tuple of ``views`` [B, H] tensors."""
        model = model or self.model
        n = batch["input_ids"].shape[0]
        inputs = {k: v.repeat(views, *([1] * (v.dim() - 1))) for k, v in batch.items()} if views > 1 else batch
        out = model(**inputs, output_hidden_states=self._needs_hidden)
        return self._pool(out, inputs["attention_mask"]).split(n, dim=0)

    def project(self, z):
        """The training-time MLP when the method has one, else identity."""
        return self.modules["mlp"](z) if "mlp" in self.modules else z

"""Classifiers on a registered encoder: attack victims (adversarial suite) and the ANLI classifier.

Two victim modes (``VICTIM_MODES``), both "this encoder plus a linear layer", never another architecture:

- ``finetune``: the encoder and a linear head on its own pooler (``bench/models/poolers.py``), trained end
  to end (``finetune``). Pairs use the tokenizer's pair encoding, so a pair is read as one sequence.
- ``frozen``: the encoder frozen, a linear head (multinomial logistic regression) on its sentence
  embedding, ``Encoder.encode`` (``train_frozen_head``). It isolates the robustness of the
  embedding itself (end-to-end fine-tuning may wash out what pre-training did) and is cheap on
  CPU: the training set is encoded once, then only the head trains. Pairs are represented as
  ``[u, v, |u-v|, u*v]`` of the two sentence embeddings (InferSent's / SentEval's NLI features);
  an attack queries the victim through ``Encoder.encode`` and the head.

A trained classifier is cached under
``$BENCH_HOME/victims/<model>/<task>/<mode>-seed<seed>-<key>/`` as ``model.safetensors``
plus ``card.json`` (mode, base model and its weights sha256, task, seed, training data with
counts and sha256, hyper-parameters, clean dev accuracy). ``<key>`` hashes everything that
changes the classifier (the card's request), so victims of other settings, modes or data sit
beside each other instead of overwriting one another; the card is checked again on load.
Classifiers train and answer queries in the encoder's precision (``Encoder.amp_dtype``); a
precision other than float32 enters the request (so the key) and the card.

End-to-end training saves its state every ``CHECKPOINT_EVERY_S`` seconds to ``<key>.partial.pt`` beside
the classifier's directory (weights, optimiser, schedule, random state, step; one file, written
atomically, read with ``weights_only=True``), so an interrupted run (Ctrl-C, a killed job) continues
from its last save instead of from step 0; the file is removed once the classifier is saved.

Usage::

    victim = load_or_finetune(encoder, paths, task="mr", num_labels=2,
                              train=[Labelled(texts, labels, "mr:train")],
                              dev=Labelled(dev_texts, dev_labels, "mr:dev"),
                              config=FinetuneConfig(seed=0, max_examples=2000))
    logits = victim.predict_logits(texts)  # np.ndarray (n, num_labels)
    frozen = load_or_train_frozen(encoder, paths, "mr", 2, [...], FrozenHeadConfig(seed=0), dev=...)
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence, Union

import numpy as np
import torch
from torch import nn

from bench.models.encoder import autocast, dtype_name
from bench.errors import BenchError
from bench.io import atomic_write_bytes, atomic_write_text, file_sha256, read_json, umask_permissions
from bench.models.poolers import NEEDS_HIDDEN_STATES, POOLERS

Text = Union[str, tuple[str, str]]
CARD = "card.json"
WEIGHTS = "model.safetensors"


@dataclass(frozen=True)
class FinetuneConfig:
    """Hyper-parameters; every field enters the card, so a changed field retrains."""

    seed: int = 0
    lr: float = 2e-5  # BERT fine-tuning default (Devlin et al. 2019 grid: 2e-5..5e-5)
    head_lr: float = 1e-3  # the fresh linear head learns faster than the pretrained body
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    batch_size: int = 32
    epochs: int = 1
    max_len: int = 128
    max_examples: int | None = None  # CPU smoke cap on training examples (after mixing), recorded
    dropout: float = 0.1
    grad_clip: float = 1.0


@dataclass
class Labelled:
    """Inputs (texts or (a, b) pairs) with integer labels, and where they came from."""

    inputs: list
    labels: list[int]
    source: str = ""

    def __post_init__(self):
        if len(self.inputs) != len(self.labels):
            raise BenchError(f"{self.source or 'training data'}: {len(self.inputs)} inputs but "
                             f"{len(self.labels)} labels; the data are corrupt.")


class Classifier(nn.Module):
    """backbone -> pooler -> dropout -> linear(num_labels)."""

    def __init__(self, backbone, pooler: str, num_labels: int, dropout: float = 0.1):
        super().__init__()
        if pooler not in POOLERS:
            raise BenchError(f"Unknown pooler '{pooler}'. Choose one of: {', '.join(POOLERS)}")
        self.backbone = backbone
        self.pooler = pooler
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(int(backbone.config.hidden_size), num_labels)

    def forward(self, **batch):
        out = self.backbone(**batch, output_hidden_states=self.pooler in NEEDS_HIDDEN_STATES)
        return self.head(self.dropout(POOLERS[self.pooler](out, batch["attention_mask"])))


def _is_pair(x) -> bool:
    return isinstance(x, (tuple, list)) and len(x) == 2


def tokenize(tokenizer, inputs: Sequence[Text], max_len: int) -> list[dict]:
    """Per-example token dicts (unpadded). Pairs use the tokenizer's pair encoding."""
    if not inputs:
        return []
    if _is_pair(inputs[0]):
        enc = tokenizer([a for a, _ in inputs], [b for _, b in inputs], truncation=True, max_length=max_len)
    else:
        enc = tokenizer(list(inputs), truncation=True, max_length=max_len)
    keys = list(enc.keys())
    return [{k: enc[k][i] for k in keys} for i in range(len(inputs))]


class _Classifier:
    """What both victim modes share on top of their own ``predict_logits``."""

    def predict(self, inputs: Sequence[Text], batch_size: int | None = None) -> np.ndarray:
        return self.predict_logits(inputs, batch_size).argmax(1)

    def accuracy(self, data: Labelled) -> float:
        """x100, as everywhere in the project."""
        if not data.inputs:
            return float("nan")
        return 100.0 * float((self.predict(data.inputs) == np.asarray(data.labels)).mean())


class FinetunedClassifier(_Classifier):
    """A trained ``Classifier`` with its tokenizer; ``predict_logits`` is the victim's interface."""

    def __init__(self, model: Classifier, tokenizer, max_len: int, device: str = "cpu",
                 batch_size: int = 64, card: dict | None = None, amp_dtype=None):
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.max_len, self.device, self.batch_size = max_len, device, batch_size
        self.card = card or {}
        self.amp_dtype = amp_dtype  # autocast dtype (bench.models.encoder.resolve_dtype); None: float32
        self.queries = 0  # examples scored; attacks report it

    @property
    def num_labels(self) -> int:
        return self.model.head.out_features

    def _batches(self, feats: list[dict], batch_size: int):
        order = sorted(range(len(feats)), key=lambda i: len(feats[i]["input_ids"]))
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            batch = self.tokenizer.pad([feats[i] for i in chunk], return_tensors="pt")
            yield chunk, {k: v.to(self.device) for k, v in batch.items()}

    def predict_logits(self, inputs: Sequence[Text], batch_size: int | None = None) -> np.ndarray:
        """(n, num_labels) float32 logits; batched, length-sorted, under inference mode."""
        inputs = list(inputs)
        out = np.zeros((len(inputs), self.num_labels), dtype=np.float32)
        if not inputs:
            return out
        self.model.eval()
        feats = tokenize(self.tokenizer, inputs, self.max_len)
        with torch.inference_mode(), autocast(self.device, self.amp_dtype):
            for chunk, batch in self._batches(feats, batch_size or self.batch_size):
                out[chunk] = self.model(**batch).float().cpu().numpy()
        self.queries += len(inputs)
        return out


    # --- persistence -------------------------------------------------------------------------
    def save(self, directory: Path) -> Path:
        from safetensors.torch import save_model

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{WEIGHTS}.tmp"
        save_model(self.model, str(tmp))  # handles tied weights; no pickle
        umask_permissions(tmp)  # as result files: safetensors writes 0600
        tmp.replace(directory / WEIGHTS)
        card = {**self.card, "weights_sha256": file_sha256(directory / WEIGHTS)}
        atomic_write_text(directory / CARD, json.dumps(card, indent=1, sort_keys=True) + "\n")
        self.card = card
        return directory

    @classmethod
    def load(cls, directory: Path, backbone, tokenizer, device: str = "cpu",
             batch_size: int = 64, amp_dtype=None) -> "FinetunedClassifier":
        """Rebuild from ``backbone`` (same architecture as the base model) and the saved weights."""
        from safetensors.torch import load_model

        directory = Path(directory)
        card = read_victim_card(directory)
        if file_sha256(directory / WEIGHTS) != card.get("weights_sha256"):
            raise BenchError(f"{directory / WEIGHTS} does not match the sha256 in its card (corrupt or "
                             f"half-written). Delete {directory} and re-run to retrain it.")
        model = Classifier(copy.deepcopy(backbone), card["pooler"], card["num_labels"],
                           card["hyperparameters"]["dropout"])
        load_model(model, str(directory / WEIGHTS), device="cpu")
        return cls(model, tokenizer, card["hyperparameters"]["max_len"], device, batch_size, card, amp_dtype)


def mix(parts: Sequence[Labelled], cap: int | None, seed: int) -> tuple[Labelled, list[dict]]:
    """Concatenate, shuffle (seeded) and cap the training parts; per-source counts for the card.

    Each source's entry carries the sha256 of what was used from it, so changed data never reuse a
    cached classifier trained on the old."""
    inputs = [x for p in parts for x in p.inputs]
    labels = [y for p in parts for y in p.labels]
    sources = [p.source for p in parts for _ in p.inputs]
    order = list(range(len(inputs)))
    random.Random(seed).shuffle(order)
    order = order[:cap] if cap else order
    counts: dict[str, int] = {}
    digests: dict[str, "hashlib._Hash"] = {p.source: hashlib.sha256() for p in parts}
    for i in order:
        counts[sources[i]] = counts.get(sources[i], 0) + 1
        digests[sources[i]].update(json.dumps([inputs[i], labels[i]]).encode("utf-8"))
    data = [{"source": p.source, "available": len(p.inputs), "used": counts.get(p.source, 0),
             "sha256": digests[p.source].hexdigest()} for p in parts]
    return Labelled([inputs[i] for i in order], [labels[i] for i in order], "+".join(p.source for p in parts)), data


def finetune(backbone, tokenizer, pooler: str, num_labels: int, train: Labelled, config: FinetuneConfig,
             device: str = "cpu", log: Callable[[str], None] | None = None,
             amp_dtype=None, checkpoint: Path | None = None,
             checkpoint_every_s: float | None = None) -> tuple[FinetunedClassifier, dict]:
    """Train a ``Classifier`` on ``train`` (already mixed and capped). Returns it and training stats.

    ``backbone`` is deep-copied: the caller's encoder keeps its weights. ``amp_dtype`` (from
    ``bench.models.encoder.resolve_dtype``; None = float32) is the autocast of training and of the returned
    classifier's queries; weights and optimiser state stay float32. With ``checkpoint`` (a file path), the
    state is saved there every ``checkpoint_every_s`` seconds (default ``CHECKPOINT_EVERY_S``) and a run
    resumes from it: the data order is the seed's, replayed, and the random state is restored, so a
    resumed run takes the steps an uninterrupted one would.
    """
    from transformers import get_linear_schedule_with_warmup

    _check_training_data(train, num_labels)
    torch.manual_seed(config.seed)
    model = Classifier(copy.deepcopy(backbone), pooler, num_labels, config.dropout).to(device).train()
    feats = tokenize(tokenizer, train.inputs, config.max_len)
    optimizer = _optimizer(model, config)
    steps_per_epoch = math.ceil(len(feats) / config.batch_size)
    total = steps_per_epoch * config.epochs
    schedule = get_linear_schedule_with_warmup(optimizer, int(config.warmup_ratio * total), total)
    amp = amp_dtype
    scaler = torch.amp.GradScaler("cuda", enabled=amp == torch.float16)
    labels = torch.tensor(train.labels)
    parts = {"model": model, "optimizer": optimizer, "schedule": schedule, "scaler": scaler}
    every = CHECKPOINT_EVERY_S if checkpoint_every_s is None else checkpoint_every_s
    resumed = _resume(checkpoint, config, total, parts, device, log) if checkpoint else None
    losses, before = (resumed["losses"], resumed["elapsed"]) if resumed else ([], 0.0)
    start = time.perf_counter()

    def save() -> None:  # the time of this run and of the runs it resumed
        try:
            _save_checkpoint(checkpoint, config, total, parts, losses, before + time.perf_counter() - start, device)
        except OSError as exc:  # a full disk costs the resume point, never the training
            if log:
                log(f"  could not save the training checkpoint {checkpoint} ({exc}); training goes on")

    _train_epochs(parts, feats, labels, tokenizer, config, device, amp, losses, log, save if checkpoint else None,
                  every)
    stats = {"steps": total, "first_loss": losses[0], "last_loss": float(np.mean(losses[-10:])),
             "train_seconds": round(before + time.perf_counter() - start, 1), "device": device,
             "amp": str(amp).replace("torch.", "") if amp else None,
             **({"resumed_at_step": resumed["step"]} if resumed else {})}
    return FinetunedClassifier(model, tokenizer, config.max_len, device, amp_dtype=amp), stats


def _check_training_data(train: Labelled, num_labels: int) -> None:
    if not train.inputs:
        raise BenchError("No training examples: check the dataset (`bench data status`) and the caps.")
    bad = sorted({y for y in train.labels if not 0 <= y < num_labels})
    if bad:
        raise BenchError(f"Labels {bad[:5]} are outside 0..{num_labels - 1}; check the label mapping.")


def _optimizer(model, config: FinetuneConfig):
    """AdamW with weight decay on the backbone's weights only (not biases or norms), the head at its own rate."""
    head = [p for n, p in model.named_parameters() if n.startswith("head.")]
    body_decay = [p for n, p in model.backbone.named_parameters() if not _no_decay(n)]
    body_plain = [p for n, p in model.backbone.named_parameters() if _no_decay(n)]
    return torch.optim.AdamW([
        {"params": body_decay, "weight_decay": config.weight_decay, "lr": config.lr},
        {"params": body_plain, "weight_decay": 0.0, "lr": config.lr},
        {"params": head, "weight_decay": 0.0, "lr": config.head_lr},
    ])


def _step(parts: dict, batch: dict, labels, grad_clip: float, device: str, amp) -> float:
    """One optimiser step on one batch (``parts``: model, optimizer, schedule, scaler); returns its loss."""
    model, optimizer, scaler = parts["model"], parts["optimizer"], parts["scaler"]
    with autocast(device, amp):
        loss = nn.functional.cross_entropy(model(**batch).float(), labels)
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    parts["schedule"].step()
    return float(loss.detach())


CHECKPOINT_EVERY_S = 300.0  # a save costs about a second for MiniLM; a killed job loses at most this much
CHECKPOINT_FORMAT = 1


def _save_checkpoint(path: Path, config, total: int, parts: dict, losses: list, elapsed: float, device: str) -> None:
    """Everything a resumed run needs, as one file written atomically (tensors and plain values only)."""
    state = {"format": CHECKPOINT_FORMAT, "config": json.dumps(asdict(config), sort_keys=True), "total": total,
             "step": len(losses), "losses": list(losses), "elapsed": elapsed,
             "torch_rng": torch.get_rng_state(),
             **({"cuda_rng": torch.cuda.get_rng_state(device)} if str(device).startswith("cuda") else {}),
             **{name: part.state_dict() for name, part in parts.items()}}
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write_bytes(path, buffer.getvalue())


def _train_epochs(parts: dict, feats, labels, tokenizer, config: FinetuneConfig, device: str, amp, losses: list,
                  log, save, every_s: float) -> None:
    """The epochs' steps, appending each loss to ``losses``; the steps already in ``losses`` (a resumed run's)
    are skipped. ``save`` (or None) writes the checkpoint every ``every_s`` seconds."""
    steps_per_epoch = math.ceil(len(feats) / config.batch_size)
    total = steps_per_epoch * config.epochs
    rng = random.Random(config.seed)
    last_save = time.perf_counter()
    for epoch in range(config.epochs):
        order = list(range(len(feats)))
        rng.shuffle(order)  # every epoch's order is drawn, also those a resumed run skips, so the seed's order holds
        for step in range(steps_per_epoch):
            if epoch * steps_per_epoch + step < len(losses):
                continue
            chunk = order[step * config.batch_size:(step + 1) * config.batch_size]
            batch = tokenizer.pad([feats[i] for i in chunk], return_tensors="pt")
            losses.append(_step(parts, {k: v.to(device) for k, v in batch.items()}, labels[chunk].to(device),
                                config.grad_clip, device, amp))
            if log and (len(losses) % 50 == 0 or len(losses) == total):
                log(f"  finetune step {len(losses)}/{total} loss {np.mean(losses[-50:]):.4f}")
            if save and len(losses) < total and time.perf_counter() - last_save >= every_s:
                save()
                last_save = time.perf_counter()


def _resume(path: Path, config, total: int, parts: dict, device: str, log) -> dict | None:
    """Load the checkpoint at ``path`` into ``parts`` and the random state; None (logged) when there is
    none, or it is unreadable or from other settings, and training starts at step 0."""
    if not Path(path).is_file():
        return None
    say = log or (lambda _: None)
    try:
        state = torch.load(path, map_location=device, weights_only=True)
        fits = (isinstance(state, dict) and state.get("format") == CHECKPOINT_FORMAT and state.get("total") == total
                and state.get("config") == json.dumps(asdict(config), sort_keys=True)
                and 0 < state.get("step", 0) == len(state.get("losses", ())) < total)
        if fits:
            for name, part in parts.items():
                part.load_state_dict(state[name])
            torch.set_rng_state(state["torch_rng"].cpu())
            if "cuda_rng" in state and str(device).startswith("cuda"):
                torch.cuda.set_rng_state(state["cuda_rng"].cpu(), device)
    except Exception as exc:  # a torn or foreign file costs the steps it held, never a wrong classifier
        say(f"  the training checkpoint {path} is unreadable ({type(exc).__name__}); starting at step 0")
        return None
    if not fits:
        say(f"  the training checkpoint {path} is from other settings; starting at step 0")
        return None
    say(f"  resuming from the checkpoint at step {state['step']}/{total}")
    return state


def _no_decay(name: str) -> bool:
    return name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name


def victim_dir(home: Path, model: str, task: str, mode: str, seed: int, request: dict) -> Path:
    """The cache directory of one classifier: keyed by everything in its request, not only (model, task, seed)."""
    key = hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return Path(home) / "victims" / model / task / f"{mode}-seed{seed}-{key}"


def _request(encoder, mode: str, task: str, num_labels: int, config, data: list[dict],
             dev: Labelled | None, label_names: Sequence[str] | None) -> dict:
    """The part of the card that must match for a cached classifier to be reused (and that names its directory).
    The mode is stored under the card's key "protocol", as every stored victim's card has it (and its
    directory's hash covers it)."""
    request = {"protocol": mode, "base_model": encoder.name, "base_weights_sha256": encoder.weights_sha256,
               "pooler": encoder.pooler, "task": task, "seed": config.seed, "num_labels": num_labels,
               "label_names": list(label_names) if label_names else None,
               "hyperparameters": asdict(config), "training_data": data,
               "dev_data": {"source": dev.source, "n": len(dev.inputs)} if dev else None}
    dtype = dtype_name(getattr(encoder, "amp_dtype", None))
    if dtype != "float32":  # float32 requests (and so their directories) are as before --dtype existed
        request["dtype"] = dtype
    if mode == FROZEN:  # the embedding depends on the encoder's own truncation
        request["encoder_max_len"] = getattr(encoder, "max_len", None)
    return json.loads(json.dumps(request))


def read_victim_card(directory: Path) -> dict:
    """A saved classifier's card; a BenchError naming the file, what is wrong and the fix otherwise."""
    card, problem = read_json(directory / CARD)
    if problem is None and not isinstance(card, dict):
        problem = "is not a JSON object"
    if problem is not None:
        raise BenchError(f"The classifier card {directory / CARD} {problem} (corrupt or half-written). "
                         f"Delete {directory} and re-run to retrain it.")
    return card


def _readable_card(directory: Path, log: Callable[[str], None]) -> dict | None:
    """The cached classifier's card, or None (logged) when it is corrupt: a cache entry, so it is retrained."""
    try:
        return read_victim_card(directory)
    except BenchError:
        log(f"The classifier card at {directory} is corrupt; retraining it.")
        return None


def _load_or_train(encoder, paths, mode: str, task: str, num_labels: int, train: Sequence[Labelled], config,
                   dev: Labelled | None, label_names, log: Callable[[str], None], train_fn, load_fn):
    data_mix, data = mix(train, getattr(config, "max_examples", None), config.seed)
    request = _request(encoder, mode, task, num_labels, config, data, dev, label_names)
    directory = victim_dir(paths.home, encoder.name, task, mode, config.seed, request)
    if (directory / CARD).exists() and (directory / WEIGHTS).exists():
        card = _readable_card(directory, log)
        if card is not None and {k: card.get(k) for k in request} == request:
            log(f"Reusing the {mode} classifier at {directory}")
            return load_fn(directory)
        if card is not None:
            log(f"The classifier at {directory} does not match its request (edited card?); retraining it.")
    counts = ", ".join(f"{d['used']} of {d['source']}" for d in data)  # no "a:b: n": rich reads ":b:" as an emoji
    log(f"Training a {mode} classifier on {encoder.name} for '{task}' (seed {config.seed}) on "
        f"{len(data_mix.inputs)} examples ({counts}) on {encoder.device}")
    partial = partial_path(directory)
    clf, stats = train_fn(data_mix, partial)
    clf.card = {**request, "training": stats, "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "dev_accuracy": clf.accuracy(dev) if dev and dev.inputs else None}
    clf.queries = 0
    clf.save(directory)
    partial.unlink(missing_ok=True)  # only once the classifier is saved
    return clf


def partial_path(directory: Path) -> Path:
    """Where an interrupted training of the classifier at ``directory`` keeps its state."""
    return Path(directory).with_name(Path(directory).name + ".partial.pt")


def load_or_finetune(encoder, paths, task: str, num_labels: int, train: Sequence[Labelled],
                     config: FinetuneConfig = FinetuneConfig(), dev: Labelled | None = None,
                     label_names: Sequence[str] | None = None, batch_size: int = 64,
                     log: Callable[[str], None] = print) -> FinetunedClassifier:
    """The cached end-to-end classifier for this request if there is one, else train and cache it.

    ``encoder`` is a ``bench.models.encoder.Encoder``; its module is copied, never modified.
    ``train`` parts are mixed, shuffled and capped at ``config.max_examples`` (recorded per source).
    """
    def train_fn(data_mix, partial):
        clf, stats = finetune(encoder.model, encoder.tokenizer, encoder.pooler, num_labels, data_mix, config,
                              encoder.device, log, amp_dtype=encoder.amp_dtype, checkpoint=partial)
        clf.batch_size = batch_size
        return clf, stats

    return _load_or_train(encoder, paths, FINETUNE, task, num_labels, train, config, dev, label_names, log, train_fn,
                          lambda d: FinetunedClassifier.load(d, encoder.model, encoder.tokenizer, encoder.device,
                                                             batch_size, encoder.amp_dtype))


# --- the frozen mode: encoder frozen, linear head on its sentence embedding ----------------------

@dataclass(frozen=True)
class FrozenHeadConfig:
    """The head's training (full-batch features, minibatch Adam); every field enters the card."""

    seed: int = 0
    lr: float = 1e-3
    weight_decay: float = 0.0
    batch_size: int = 64
    epochs: int = 30
    max_examples: int | None = None  # cap on training examples (after mixing), recorded


def embedding_features(encoder, inputs: Sequence[Text]) -> np.ndarray:
    """Sentence embeddings; for pairs ``[u, v, |u-v|, u*v]`` (InferSent / SentEval NLI features)."""
    inputs = list(inputs)
    if inputs and _is_pair(inputs[0]):
        u = encoder.encode([a for a, _ in inputs])
        v = encoder.encode([b for _, b in inputs])
        return np.concatenate([u, v, np.abs(u - v), u * v], axis=1).astype(np.float32)
    return np.asarray(encoder.encode([str(x) for x in inputs]), dtype=np.float32)


class FrozenHeadClassifier(_Classifier):
    """The encoder (never modified) plus a linear head on its embedding. Also a TextAttack model wrapper:
    ``__call__`` maps a list of texts (or column tuples) to logits, and ``model`` is the encoder's module."""

    def __init__(self, encoder, head: nn.Linear, card: dict | None = None):
        self.encoder, self.head = encoder, head.eval()
        self.model = getattr(encoder, "model", None)  # TextAttack reads model_wrapper.model
        self.card = card or {}
        self.queries = 0

    @property
    def num_labels(self) -> int:
        return self.head.out_features

    def predict_logits(self, inputs: Sequence[Text], batch_size: int | None = None) -> np.ndarray:
        inputs = [tuple(x) if isinstance(x, list) else x for x in inputs]
        if not inputs:
            return np.zeros((0, self.num_labels), dtype=np.float32)
        feats = torch.from_numpy(embedding_features(self.encoder, inputs))
        with torch.inference_mode():
            out = self.head(feats.to(self.head.weight.device)).float().cpu().numpy()
        self.queries += len(inputs)
        return out

    __call__ = predict_logits

    def after_example(self) -> None:
        """Drop the embeddings of an attacked example's candidates: memory stays flat on long runs."""
        forget = getattr(self.encoder, "forget", None)
        if forget:
            forget()


    def save(self, directory: Path) -> Path:
        from safetensors.torch import save_model

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{WEIGHTS}.tmp"
        save_model(self.head, str(tmp))
        umask_permissions(tmp)  # as result files: safetensors writes 0600
        tmp.replace(directory / WEIGHTS)
        self.card = {**self.card, "weights_sha256": file_sha256(directory / WEIGHTS)}
        atomic_write_text(directory / CARD, json.dumps(self.card, indent=1, sort_keys=True) + "\n")
        return directory

    @classmethod
    def load(cls, directory: Path, encoder) -> "FrozenHeadClassifier":
        from safetensors.torch import load_model

        directory = Path(directory)
        card = read_victim_card(directory)
        if file_sha256(directory / WEIGHTS) != card.get("weights_sha256"):
            raise BenchError(f"{directory / WEIGHTS} does not match the sha256 in its card (corrupt or "
                             f"half-written). Delete {directory} and re-run to retrain it.")
        head = nn.Linear(card["training"]["features"], card["num_labels"])
        load_model(head, str(directory / WEIGHTS), device="cpu")
        return cls(encoder, head, card)


def train_frozen_head(encoder, num_labels: int, train: Labelled, config: FrozenHeadConfig,
                      log: Callable[[str], None] | None = None) -> tuple[FrozenHeadClassifier, dict]:
    """Encode ``train`` once with the frozen encoder, then fit a linear head (cross-entropy, Adam)."""
    if not train.inputs:
        raise BenchError("No training examples: check the dataset (`bench data status`) and the caps.")
    bad = sorted({y for y in train.labels if not 0 <= y < num_labels})
    if bad:
        raise BenchError(f"Labels {bad[:5]} are outside 0..{num_labels - 1}; check the label mapping.")
    start = time.perf_counter()
    feats = torch.from_numpy(embedding_features(encoder, train.inputs))
    encode_s = time.perf_counter() - start
    encoder_forget = getattr(encoder, "forget", None)
    if encoder_forget:  # the training set's embeddings are not needed again; attacks start from an empty cache
        encoder_forget()
    labels = torch.tensor(train.labels)
    torch.manual_seed(config.seed)
    head = nn.Linear(feats.shape[1], num_labels)
    optimizer = torch.optim.Adam(head.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    generator = torch.Generator().manual_seed(config.seed)
    losses = []
    for epoch in range(config.epochs):
        order = torch.randperm(len(labels), generator=generator)
        epoch_loss = 0.0
        for s in range(0, len(order), config.batch_size):
            idx = order[s:s + config.batch_size]
            loss = nn.functional.cross_entropy(head(feats[idx]), labels[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            epoch_loss += float(loss.detach()) * len(idx)
        losses.append(epoch_loss / len(labels))
        if log and (epoch + 1) % 10 == 0:
            log(f"  frozen head epoch {epoch + 1}/{config.epochs} loss {losses[-1]:.4f}")
    with torch.inference_mode():
        train_acc = 100.0 * float((head(feats).argmax(1) == labels).float().mean())
    stats = {"epochs": config.epochs, "first_loss": losses[0], "last_loss": losses[-1], "train_accuracy": train_acc,
             "features": int(feats.shape[1]), "encode_seconds": round(encode_s, 1),
             "train_seconds": round(time.perf_counter() - start, 1),
             "pair_features": "[u, v, |u-v|, u*v]" if _is_pair(train.inputs[0]) else None}
    return FrozenHeadClassifier(encoder, head), stats


def load_or_train_frozen(encoder, paths, task: str, num_labels: int, train: Sequence[Labelled],
                         config: FrozenHeadConfig = FrozenHeadConfig(), dev: Labelled | None = None,
                         label_names: Sequence[str] | None = None, batch_size: int = 64,
                         log: Callable[[str], None] = print) -> FrozenHeadClassifier:
    """The cached frozen-encoder classifier for this request if there is one, else train and cache it."""
    return _load_or_train(encoder, paths, FROZEN, task, num_labels, train, config, dev, label_names, log,
                          lambda data_mix, _partial: train_frozen_head(encoder, num_labels, data_mix, config, log),
                          lambda d: FrozenHeadClassifier.load(d, encoder))


FINETUNE, FROZEN = "finetune", "frozen"
# victim mode -> (config class, load-or-train function): how a suite builds a classifier of each kind.
VICTIM_MODES = {FINETUNE: (FinetuneConfig, load_or_finetune), FROZEN: (FrozenHeadConfig, load_or_train_frozen)}

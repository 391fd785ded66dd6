"""Time of one training step of each method / time of one SimCSE step, same batch, same run.

    python benchmarks/train_step.py [--method robustembed]... [--backbone minilm|DIR] [--batch-size 64]
                                    [--repeats 3] [--set METHOD:K=V ...] [--json FILE]
    python benchmarks/train_step.py --dtype bf16 [...]   # each step in fp32 and under bf16 autocast

Every method (default: RobustEmbed; SimCSE is always run, as the reference) gets its own copy of the
encoder, built as the trainer builds it (``bench/train.py``: the method's config, its extra modules, its
``collate`` over the same sentences, its AdamW parameter groups), and one step is timed as the trainer
runs it: the loss (with every extra pass the method makes), backward, AdamW, then ``after_step``. Steps
are timed ``--repeats`` times after one warm-up, alternating the methods so that load changes on a shared
machine hit all alike; the medians are compared. ``--json FILE`` writes the figures (with the machine,
threads and batch), which the model cards cite.

With ``--dtype bf16`` (or fp16 on CUDA) each method also runs its step under that autocast
(``bench.models.encoder.autocast``, as ``bench train --dtype`` does) and the fp32/bf16 ratio is printed.

What to expect for RobustEmbed (Algorithm 1), in units F = one forward pass over the B sentences, a full
backward costing 2F and a backward to δ only (no weight-gradient matmuls) about 1F:
- SimCSE: forward over 2B (two dropout views) 2F + backward 4F = 6F;
- RobustEmbed: the same two views 2F, K + T gradient passes over B of (F + 1F) each, one more
  forward over B for the adversarial view (F), and a backward over 3B (6F): 9F + 2F(K+T).
With K = T = 5 that is 29F / 6F ≈ 4.8x. The δ-only backward still pays for attention, softmax, GELU and
LayerNorm backwards, so on a small model with short sequences it costs more than 1F and the ratio rises.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path


def parse_settings(items: list[str]) -> dict[str, dict[str, str]]:
    """``METHOD:K=V`` (or ``K=V`` for every method) -> {method: {K: V}}; "*" holds the shared ones."""
    out: dict[str, dict[str, str]] = {}
    for item in items:
        method, _, pair = item.rpartition(":") if ":" in item.split("=", 1)[0] else ("*", "", item)
        key, _, value = pair.partition("=")
        out.setdefault(method, {})[key] = value
    return out


def build(name: str, path: str, pooler: str, settings: dict, home: Path, amp=None):
    """One method on its own copy of the encoder, as the trainer builds it: (method, optimiser, amp)."""
    import torch

    from bench.models.encoder import load_hf
    from bench.methods import get_method
    from bench.methods.base import TrainContext
    from bench.methods.resources import MethodResources

    torch.manual_seed(0)
    model, tokenizer = load_hf(path)
    model.train()
    method_cls = get_method(name)
    ctx = TrainContext(max_len=32, home=home, seed=0, resources=MethodResources(home))
    ctx.tokenizer = tokenizer
    method = method_cls(method_cls.Config.from_dict(settings), model, pooler, ctx)
    return method, torch.optim.AdamW(method.param_groups(3e-5, 0.0), lr=3e-5), amp


def time_step(run, examples: list, step_index: int) -> float:
    from bench.models.encoder import autocast

    method, optimizer, amp = run
    start = time.perf_counter()
    batch = method.collate(examples)
    with autocast("cpu", amp):
        loss, _ = method.loss(batch, step_index)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    method.after_step(step_index)
    return time.perf_counter() - start


def main() -> int:
    args = parse_args()
    import torch

    from bench.models.encoder import dtype_name, resolve_dtype
    from bench.paths import Paths
    from bench.train import read_sentences, training_data

    paths = Paths.from_env()
    sentences, _ = read_sentences(training_data(paths.data, args.data or None))
    examples = sentences[:args.batch_size]
    names = ["simcse", *dict.fromkeys(m for m in (args.method or ["robustembed"]) if m != "simcse")]
    amp = resolve_dtype("cpu", args.dtype)
    runs = build_runs(args.backbone, names, parse_settings(args.set), paths.home, amp)
    for name in runs:  # warm-up
        time_step(runs[name], examples, 0)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for repeat in range(args.repeats):
        for name in runs:
            times[name].append(time_step(runs[name], examples, repeat + 1))
    medians = {name: statistics.median(values) for name, values in times.items()}
    print_table(args, times, medians, torch.get_num_threads())
    if amp is not None:
        low = dtype_name(amp)
        print_precision(low, {name: medians[name] / medians[f"{name} {low}"] for name in names})
    if args.json:
        write_json(Path(args.json), args, times, medians, torch.get_num_threads())
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", action="append", default=[], help="a method to time against SimCSE "
                        "(repeatable; default robustembed; `bench ls methods` lists them)")
    parser.add_argument("--backbone", default="minilm", help="registry model name or local directory")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", default="", help="text file (default: the wiki sample under $BENCH_DATA_DIR)")
    parser.add_argument("--set", action="append", default=[], metavar="[METHOD:]K=V",
                        help="a hyper-parameter of one method (or of all, without METHOD:)")
    parser.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"],
                        help="bf16: also time each step under bf16 autocast (this benchmark runs on the CPU)")
    parser.add_argument("--json", default="", help="also write the figures to this JSON file")
    return parser.parse_args()


def build_runs(backbone: str, names: list[str], settings: dict, home, amp) -> dict:
    """One training run per method on ``backbone``; with ``amp``, the same methods again in their own
    models, stepped under autocast."""
    from bench.models.encoder import dtype_name, resolve_backbone
    from bench.models.registry import MODELS

    spec = MODELS.get(backbone)
    path = resolve_backbone(spec) if spec else backbone
    pooler = spec.pooler if spec else "cls_before_pooler"
    own = {name: {**settings.get("*", {}), **settings.get(name, {})} for name in names}
    runs = {name: build(name, path, pooler, own[name], home) for name in names}
    if amp is not None:
        runs.update({f"{name} {dtype_name(amp)}": build(name, path, pooler, own[name], home, amp) for name in names})
    return runs


def print_table(args, times: dict, medians: dict, threads: int) -> None:
    from bench.results.store import cpu_model

    reference = medians["simcse"]
    print(f"backbone {args.backbone}, batch {args.batch_size} x max_len 32, threads {threads}, "
          f"repeats {args.repeats}, {cpu_model()}")
    for name in times:
        print(f"{name:<18} median {medians[name] * 1000:9.1f} ms  x SimCSE {medians[name] / reference:5.2f}  "
              f"(all: {', '.join(f'{t * 1000:.0f}' for t in times[name])})")


def print_precision(low: str, ratios: dict[str, float]) -> None:
    import torch

    from bench.models.encoder import native_bf16

    print(f"precision: {low} autocast vs fp32 (native bf16 on this CPU: {native_bf16('cpu')}; "
          f"torch CPU capability {torch.backends.cpu.get_cpu_capability()})")
    for name, ratio in ratios.items():
        print(f"{name:<18} fp32 / {low} = {ratio:.2f}x")


def write_json(path: Path, args, times: dict, medians: dict, threads: int) -> None:
    import torch

    from bench.results.store import cpu_model

    reference = medians["simcse"]
    figures = {"backbone": args.backbone, "batch_size": args.batch_size, "max_len": 32,
               "threads": threads, "repeats": args.repeats,
               "cpu_capability": torch.backends.cpu.get_cpu_capability(), "cpu": cpu_model(),
               "date": time.strftime("%Y-%m-%d"), "load_average_1min_at_end": round(os.getloadavg()[0], 2),
               "methods": {name: {"median_s": round(medians[name], 4),
                                  "ratio_to_simcse": round(medians[name] / reference, 3),
                                  "all_s": [round(t, 4) for t in times[name]]} for name in times}}
    path.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    raise SystemExit(main())

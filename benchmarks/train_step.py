"""Time of one RobustEmbed training step / time of one SimCSE step, same batch, same run.

    python benchmarks/train_step.py [--backbone minilm|DIR] [--batch-size 32] [--repeats 5] [--set K=V ...]
    python benchmarks/train_step.py --dtype bf16 [...]   # each step in fp32 and under bf16 autocast

With ``--dtype bf16`` (or fp16 on CUDA) each method also runs its step under that autocast
(``bench.encoder.autocast``, as ``bench train --dtype`` does: the loss and the methods' extra passes
under autocast, backward and AdamW outside, weights and optimiser state fp32), and the fp32/bf16
ratio of each method is printed.

Both steps run the same encoder on the same tokenised batch (forward, backward, AdamW step);
each is timed ``--repeats`` times after one warm-up, alternating the two so load changes on a
shared machine hit both alike; the medians are compared.

What to expect (Algorithm 1), in units F = one forward pass over the B sentences, a full backward
costing 2F and a backward to δ only (no weight-gradient matmuls) about 1F:
- SimCSE: forward over 2B (two dropout views) 2F + backward 4F = 6F;
- RobustEmbed: the same two views 2F, K + T gradient passes over B of (F + 1F) each, one more
  forward over B for the adversarial view (F), and a backward over 3B (6F): 9F + 2F(K+T).
With K = T = 5 that is 29F / 6F ≈ 4.8x (1 + K + T = 11 extra encoder passes over B on top of
SimCSE's 2). The δ-only backward still pays for attention, softmax, GELU and LayerNorm
backwards, so on a small model with short sequences it costs more than 1F and the ratio rises.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="minilm", help="registry model name or local directory")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-len", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--data", default="", help="text file (default: the wiki sample under $BENCH_DATA_DIR)")
    parser.add_argument("--set", action="append", default=[], metavar="K=V", help="RobustEmbed hyper-parameters")
    parser.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"],
                        help="bf16: also time each step under bf16 autocast (this benchmark runs on the CPU)")
    args = parser.parse_args()

    import torch

    from bench.encoder import autocast, dtype_name, load_hf, native_bf16, resolve_backbone, resolve_dtype
    from bench.methods import get_method
    from bench.paths import Paths
    from bench.registry import MODELS
    from bench.train import read_sentences, training_data

    spec = MODELS.get(args.backbone)
    path = resolve_backbone(spec) if spec else args.backbone
    pooler = spec.pooler if spec else "cls_before_pooler"
    sentences, _ = read_sentences(training_data(Paths.from_env().data, args.data or None))
    overrides = dict(item.split("=", 1) for item in args.set)

    def make(name, overrides, amp=None):
        torch.manual_seed(0)
        model, tokenizer = load_hf(path)
        model.train()
        method_cls = get_method(name)
        method = method_cls(method_cls.Config.from_dict(overrides), model, pooler)
        params = [g for g in method.param_groups(3e-5, 0.0)]
        return method, torch.optim.AdamW(params, lr=3e-5), tokenizer, amp

    amp = resolve_dtype("cpu", args.dtype)
    runs = {"simcse": make("simcse", {}), "robustembed": make("robustembed", overrides)}  # name -> (method, opt, tok, amp)
    if amp is not None:  # the same methods again, in their own models, stepped under autocast
        runs.update({f"{name} {dtype_name(amp)}": make(name, o, amp)
                     for name, o in (("simcse", {}), ("robustembed", overrides))})
    tokenizer = runs["simcse"][2]
    batch = dict(tokenizer(sentences[:args.batch_size], padding=True, truncation=True, max_length=args.max_len,
                           return_tensors="pt"))

    def step(name):
        method, optimizer, _, step_amp = runs[name]
        start = time.perf_counter()
        with autocast("cpu", step_amp):
            loss, _ = method.loss(batch, 0)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    for name in runs:  # warm-up
        step(name)
    times = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name in runs:
            times[name].append(step(name))
    s, r = statistics.median(times["simcse"]), statistics.median(times["robustembed"])
    robust = runs["robustembed"][0]
    cfg = robust.cfg
    passes = cfg.pgd_steps + cfg.fgsm_steps if not cfg.shared_gradient else max(cfg.pgd_steps, cfg.fgsm_steps)
    print(f"backbone {args.backbone}, batch {args.batch_size} x max_len {args.max_len} (padded to "
          f"{batch['input_ids'].shape[1]}), threads {torch.get_num_threads()}, repeats {args.repeats}")
    print(f"SimCSE step      median {s * 1000:8.1f} ms  (all: {', '.join(f'{t * 1000:.0f}' for t in times['simcse'])})")
    print(f"RobustEmbed step median {r * 1000:8.1f} ms  (all: {', '.join(f'{t * 1000:.0f}' for t in times['robustembed'])})")
    print(f"ratio RobustEmbed / SimCSE = {r / s:.2f}  (K={cfg.pgd_steps}, T={cfg.fgsm_steps}, "
          f"{passes} gradient passes + 1 adversarial forward; the docstring's estimate is "
          f"{(9 + 2 * passes) / 6:.1f}x)")
    if amp is not None:
        low = dtype_name(amp)
        print(f"precision: {low} autocast vs fp32 (native bf16 on this CPU: {native_bf16('cpu')}; "
              f"torch CPU capability {torch.backends.cpu.get_cpu_capability()})")
        for name, label in (("simcse", "SimCSE"), ("robustembed", "RobustEmbed")):
            fast = statistics.median(times[f"{name} {low}"])
            full = statistics.median(times[name])
            print(f"{label + ' step':<17} fp32 {full * 1000:8.1f} ms, {low} {fast * 1000:8.1f} ms  "
                  f"(all: {', '.join(f'{t * 1000:.0f}' for t in times[f'{name} {low}'])}); "
                  f"fp32 / {low} = {full / fast:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

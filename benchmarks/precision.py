"""The fidelity budget of --dtype bf16: STS (all 7 tasks) in fp32 and in bf16 autocast, same model, same run.

    BENCH_DATA_DIR=../shared/data python benchmarks/precision.py [--model minilm] [--limit N] [--repeats 1]

For each task both precisions encode the same sentences through ``bench.models.encoder.Encoder`` (cache
cleared before each timing, the two precisions alternating so load changes on a shared machine hit
both alike) and score them as the STS suite does (``bench.scoring.metrics.score_pairs``: Spearman x100 over all
pairs, SimCSE's headline). It prints, per task, fp32, bf16 and their difference, the smallest cosine
between a sentence's two embeddings, and the encoding speed of each precision with their ratio.
The goal: every task within 0.1 points and a ratio of at least 1.8. A CPU without AMX falls
below 1: it emulates bf16, or (AVX-512-BF16 only) runs it slower than fp32 (docs/precision.md).
``--limit N`` scores the first N pairs of each task: a quick check, not the budget.

It also measures how the encoder responds to an embedding-space perturbation in each precision
(what RobustEmbed, V-advCSE and USCAL train against): for the first 32 STS-B dev sentences, the change
of the pooled vector when a sign vector of L-inf size ε is added to the token-embedding output, in fp32
and in bf16 (eval mode), and the cosine between the two changes, for ε = 1e-3, 5e-3, 1e-2 (RobustEmbed's
σ, T·β and ε). ``--delta-only`` runs just that (seconds).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

GOAL_POINTS, GOAL_RATIO = 0.1, 1.8  # what makes bf16 worth it: same scores, 1.8x the speed


def main() -> int:
    args = parse_args()
    import torch

    from bench.models.encoder import Encoder, dtype_name, native_bf16, resolve_dtype
    from bench.paths import Paths
    from bench.models.registry import get_model

    paths = Paths.from_env()
    spec = get_model(args.model)
    encoders = {name: Encoder.from_spec(spec, paths.models, device=args.device, batch_size=args.batch_size, dtype=name)
                for name in ("fp32", "bf16")}
    print(f"model {spec.name} ({spec.pooler}), device {args.device}, batch {args.batch_size}, torch threads "
          f"{torch.get_num_threads()}, torch CPU capability {torch.backends.cpu.get_cpu_capability()}, native bf16 "
          f"{native_bf16(args.device)} (so --dtype auto = {dtype_name(resolve_dtype(args.device, 'auto'))})"
          f"{f', limit {args.limit} pairs per task' if args.limit else ''}")
    delta_response(encoders, paths)
    if args.delta_only:
        return 0
    for encoder in encoders.values():  # warm-up (allocator, oneDNN kernels)
        encoder.encode(["a warm-up sentence", "and another one"])
    lines, seconds, encoded = time_tasks(encoders, paths, args.limit, args.repeats)
    print_summary(lines, seconds, encoded, args.repeats)
    return 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="minilm", help="registry model name")
    parser.add_argument("--limit", type=int, help="score only the first N pairs of each task (quick check)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1, help="encodings per task and precision; the best counts")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--delta-only", action="store_true", help="only the embedding-perturbation check")
    return parser.parse_args()


def time_tasks(encoders: dict, paths, limit: int | None, repeats: int) -> tuple[list[tuple], dict, int]:
    """Per STS task: pairs, each precision's Spearman and the smallest cosine between the two precisions'
    vectors; each precision's seconds (the best of ``repeats`` encodings per task) and the sentences encoded."""
    from bench.data.datasets import require
    from bench.scoring.metrics import score_pairs
    from suites.sts import TASKS

    seconds = {name: 0.0 for name in encoders}
    encoded = 0
    lines = []
    for task in TASKS:
        pairs = task.load(require(paths.data, task.dataset)).limit(limit)
        sentences = list(dict.fromkeys(s for s1, s2, _ in pairs.subsets.values() for s in s1 + s2))
        vectors, scores, best = {}, {}, {}
        for _ in range(repeats):
            for name, encoder in encoders.items():
                encoder.forget()
                start = time.perf_counter()
                vectors[name] = encoder.encode(sentences)
                best[name] = min(best.get(name, float("inf")), time.perf_counter() - start)
        for name, encoder in encoders.items():
            seconds[name] += best[name]
            scores[name] = score_pairs(pairs, encoder.encode)[("spearman", "all")]  # cached: no re-encoding
        a, b = vectors["fp32"], vectors["bf16"]
        cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        encoded += len(sentences)
        lines.append((task.name, len(pairs.all_pairs()[2]), scores["fp32"], scores["bf16"], float(cos.min())))
    return lines, seconds, encoded


def print_summary(lines: list[tuple], seconds: dict, encoded: int, repeats: int) -> None:
    print(f"{'task':>8} {'pairs':>6} {'fp32':>8} {'bf16':>8} {'bf16-fp32':>10} {'min cos':>9}")
    for name, n, fp32, bf16, cos in lines:
        print(f"{name:>8} {n:6d} {fp32:8.2f} {bf16:8.2f} {bf16 - fp32:+10.3f} {cos:9.6f}")
    avg32, avg16 = (float(np.mean([line[i] for line in lines])) for i in (2, 3))
    print(f"{'avg':>8} {'':6} {avg32:8.2f} {avg16:8.2f} {avg16 - avg32:+10.3f}")
    ratio = seconds["fp32"] / seconds["bf16"]
    for name in seconds:
        print(f"{name}: {encoded / seconds[name]:8.1f} sentences/s ({encoded} sentences in {seconds[name]:.1f} s, "
              f"best of {repeats} per task)")
    worst = max(abs(bf16 - fp32) for _, _, fp32, bf16, _ in lines)
    print(f"speed ratio bf16 / fp32 = {ratio:.2f}x (goal >= {GOAL_RATIO}: {'met' if ratio >= GOAL_RATIO else 'NOT met'}); "
          f"largest |difference| {worst:.3f} points (goal <= {GOAL_POINTS}: "
          f"{'met' if worst <= GOAL_POINTS else 'NOT met'})")


def delta_response(encoders: dict, paths, n: int = 32, epsilons=(1e-3, 5e-3, 1e-2)) -> None:
    """Cosine between fp32's and bf16's change of the pooled vector under X + ε·s (s a fixed sign vector)."""
    import torch

    from bench.data.datasets import read_stsb, require
    from bench.methods.perturb import replace_embedding_output

    s1, _, _ = read_stsb(require(paths.data, "stsb"), "dev").all_pairs()
    sentences = list(dict.fromkeys(s1))[:n]
    print(f"embedding-perturbation response ({len(sentences)} STS-B dev sentences, eval mode):")
    for eps in epsilons:
        change = {}
        for name, encoder in encoders.items():
            model = encoder.model
            batch = encoder.tokenizer(sentences, padding=True, truncation=True, max_length=encoder.max_len,
                                      return_tensors="pt").to(encoder.device)
            with torch.inference_mode():
                x = model.embeddings(input_ids=batch["input_ids"], token_type_ids=batch.get("token_type_ids"))
                sign = torch.randn(x.shape, generator=torch.Generator().manual_seed(0)).sign().to(x.device)
                sign = sign * batch["attention_mask"].unsqueeze(-1)
                pooled = []
                for shifted in (x, x + eps * sign):  # embed_batch pads the same way and runs in the encoder's dtype
                    with replace_embedding_output(model, shifted):
                        pooled.append(encoder.embed_batch(sentences).float())
            change[name] = pooled[1] - pooled[0]
        cos = torch.nn.functional.cosine_similarity(change["fp32"], change["bf16"], dim=1)
        size = change["bf16"].norm(dim=1) / change["fp32"].norm(dim=1)
        print(f"  eps {eps:g}: cosine(fp32 change, bf16 change) mean {cos.mean():.3f}, min {cos.min():.3f}; "
              f"|bf16 change| / |fp32 change| mean {size.mean():.2f}")


if __name__ == "__main__":
    raise SystemExit(main())

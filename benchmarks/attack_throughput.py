"""Attack throughput: TextAttack's stock HuggingFaceModelWrapper path vs our CachedModelWrapper,
same victim, same recipe, same examples, same per-example seeds, in the same run.

    BENCH_DATA_DIR=../shared/data python benchmarks/attack_throughput.py [--recipe pwws] [--n 3] [--model minilm]

The victim is the adversarial suite's cached MR victim for the model (smoke profile, seed 0;
trained first if missing). The stock path pads every query to the tokenizer's max length
(512 for MiniLM) and has no cross-example cache; ours pads per batch and caches outputs.
Both paths drive one Attack object (so lazily loaded constraint models are shared and warmed up
once, outside the timing); only the goal function's model wrapper is swapped. Prints examples/min
for each path and their ratio, and asserts that both paths give the same outcome (result type,
perturbed text, query count) on every example. The default is 3 examples: on CPU the stock path
costs about 13 GFLOP per query for MiniLM at 512 tokens.
"""

from __future__ import annotations

import argparse
import time
from collections import OrderedDict


def stock_victim(classifier):
    """The victim as a transformers PreTrainedModel returning ``.logits`` (what the stock wrapper needs)."""
    from transformers import PreTrainedModel
    from transformers.modeling_outputs import SequenceClassifierOutput

    class StockVictim(PreTrainedModel):
        config_class = type(classifier.backbone.config)
        _supports_sdpa = True  # attention runs inside the wrapped backbone, which has its own setting

        def __init__(self):
            super().__init__(classifier.backbone.config)
            self.classifier = classifier

        def forward(self, **batch):
            return SequenceClassifierOutput(logits=self.classifier(**batch))

    return StockVictim().eval()


def run(attack, examples, columns, seed_of) -> tuple[list[tuple], float]:
    from suites.adversarial import attack_one

    start = time.perf_counter()
    outcomes = []
    for i, ex in enumerate(examples):
        attack.clear_cache()  # skipped examples leave the goal function's cache filled
        rec = attack_one(attack, ex, i, columns, seed_of(i))
        outcomes.append((rec["result_type"], rec["perturbed"], rec["num_queries"]))
    return outcomes, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--recipe", default="pwws")
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    from attacks.recipes import build_attack
    from attacks.resources import Resources
    from attacks.wrapper import CachedModelWrapper
    from bench.encoder import Encoder
    from bench.paths import Paths
    from bench.registry import get_model
    from suites.adversarial import SUITE, example_seed
    from suites.base import RunContext

    paths = Paths.from_env()
    encoder = Encoder.from_spec(get_model(args.model), paths.models, device="cpu")
    ctx = RunContext(paths=paths, device="cpu", batch_size=args.batch_size, profile="smoke")
    task = SUITE.task("mr")
    examples = task.attack_set(paths.data)
    victim = SUITE.victim(task, examples, encoder, ctx)
    warmup, examples = examples[args.n:args.n + 1], examples[: args.n]  # warm-up outside the timed set
    resources = Resources(paths)
    resources.textattack()
    from textattack.models.wrappers import HuggingFaceModelWrapper

    wrappers = {"stock HuggingFaceModelWrapper": HuggingFaceModelWrapper(stock_victim(victim.model), victim.tokenizer),
                "ours CachedModelWrapper": CachedModelWrapper(victim.model, victim.tokenizer, victim.max_len,
                                                              args.batch_size)}
    # One Attack for both paths (lazy-loaded constraint models shared); only the goal function's model differs.
    attack = build_attack(args.recipe, resources, wrappers["ours CachedModelWrapper"], batch_size=args.batch_size)
    run(attack, warmup, task.columns, lambda i: example_seed(10 ** 6, i))  # lazy loads, not timed
    results = {}
    for name, wrapper in reversed(list(wrappers.items())):  # ours first, then stock
        attack.goal_function.model = wrapper
        results[name] = run(attack, examples, task.columns, lambda i: example_seed(0, i))
    results = {name: results[name] for name in wrappers}
    print(f"recipe {args.recipe}, {len(examples)} MR examples, victim {victim.card.get('weights_sha256', '')[:12]}")
    for name, (outcomes, seconds) in results.items():
        kinds = [o[0] for o in outcomes]
        print(f"  {name:32s} {60 * len(examples) / seconds:8.2f} examples/min  ({seconds:.1f}s; "
              f"{kinds.count('successful')} successful, {kinds.count('failed')} failed, {kinds.count('skipped')} skipped)")
    (stock_out, stock_s), (ours_out, ours_s) = results.values()
    print(f"ratio (ours / stock, examples/min): {stock_s / ours_s:.2f}x")
    ours_wrapper = wrappers["ours CachedModelWrapper"]
    print(f"  our wrapper (warm-up included): {ours_wrapper.stats}")
    diffs = [i for i, (a, b) in enumerate(zip(stock_out, ours_out)) if a != b]
    assert not diffs, f"outcomes differ on examples {diffs}: {[(stock_out[i], ours_out[i]) for i in diffs]}"
    print("identical outcomes on all examples (result type, perturbed text, queries)")


if __name__ == "__main__":
    main()

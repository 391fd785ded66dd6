"""Where attack time goes: per recipe, the share of wall time spent in the victim's forward passes,
the masked LM's forward passes, the sentence-encoder stand-in, word-embedding lookups, the POS
tagger, and everything else (TextAttack's search and bookkeeping, tokenising, WordNet, ...).

    BENCH_DATA_DIR=../shared/data python benchmarks/attack_profile.py [--recipe R]... [--n 10] [--model minilm]
        [--constraints paper|unified]

Every recipe attacks the same first ``--n`` MR examples of TextFooler's set, against the adversarial
suite's cached MR victim for the model (smoke profile, seed 0; trained first if missing), with the
suite's per-example seeds. One warm-up example (the one after the timed set) runs first, outside
the timing, so that one-off loads (the sentence encoder, WordNet, the masked LM) are not counted.

Each category is timed by wrapping the functions that do that work; time is exclusive (a timed call
inside another is subtracted from the outer one), so the shares add up to 100%:
- victim: the victim's ``forward`` (the model wrapper's tokenising and padding count as "other");
- masked LM: the masked LM's ``forward``;
- sentence encoder: ``encode`` of the sentence-encoder constraint;
- word embedding: every ``WordEmbedding`` method (lookups, cosine, neighbours);
- POS tagger: ``_get_pos`` of the part-of-speech constraint.
Timings on a shared machine are "under load" figures, not performance claims.
"""

from __future__ import annotations

import argparse
import functools
import time
from collections import defaultdict

CATEGORIES = ("victim", "masked_lm", "sentence_encoder", "word_embedding", "pos_tagger")


class Timer:
    """Exclusive time per category across nested timed calls."""

    def __init__(self):
        self.totals: dict[str, float] = defaultdict(float)
        self._stack: list[list] = []  # [category, start, time spent in timed children]

    def wrap(self, category: str, fn):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            self._stack.append([category, time.perf_counter(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                cat, start, children = self._stack.pop()
                elapsed = time.perf_counter() - start
                self.totals[cat] += elapsed - children
                if self._stack:
                    self._stack[-1][2] += elapsed

        timed.__wrapped_by_timer__ = True
        return timed

    def patch_method(self, owner, name: str, category: str, patches: list) -> None:
        """Wrap ``owner.name`` (a class or an instance) once; remember how to undo it."""
        fn = getattr(owner, name, None)
        if fn is None or getattr(fn, "__wrapped_by_timer__", False):
            return
        had_own = name in vars(owner) if isinstance(owner, type) else name in owner.__dict__
        original = vars(owner)[name] if isinstance(owner, type) and had_own else None
        setattr(owner, name, self.wrap(category, fn))
        patches.append((owner, name, had_own, original))

    def reset(self) -> None:
        self.totals.clear()


def undo(patches: list) -> None:
    for owner, name, had_own, original in reversed(patches):
        if isinstance(owner, type):
            if had_own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)
        else:
            owner.__dict__.pop(name, None)
    patches.clear()


def instrument(attack, victim_model, timer: Timer) -> list:
    """Wrap the timed functions of one Attack; returns the patches to undo."""
    from textattack.constraints.grammaticality import PartOfSpeech
    from textattack.constraints.semantics.sentence_encoders import SentenceEncoder
    from textattack.shared import WordEmbedding
    from textattack.transformations import CompositeTransformation, WordSwapMaskedLM

    patches: list = []
    timer.patch_method(victim_model, "forward", "victim", patches)
    transformations = [attack.transformation]
    if isinstance(attack.transformation, CompositeTransformation):
        transformations = list(attack.transformation.transformations)
    for t in transformations:
        if isinstance(t, WordSwapMaskedLM):
            timer.patch_method(t._language_model, "forward", "masked_lm", patches)
    for c in attack.constraints:
        if isinstance(c, SentenceEncoder):
            timer.patch_method(type(c), "encode", "sentence_encoder", patches)
        if isinstance(c, PartOfSpeech):
            timer.patch_method(type(c), "_get_pos", "pos_tagger", patches)
    for name, value in vars(WordEmbedding).items():
        if callable(value) and not name.startswith("__") and not isinstance(value, (staticmethod, classmethod)):
            timer.patch_method(WordEmbedding, name, "word_embedding", patches)
    timer.patch_method(WordEmbedding, "__getitem__", "word_embedding", patches)
    return patches


def mr_victim(paths, model: str, batch_size: int):
    """(task, attack examples, victim): the adversarial suite's MR victim for ``model`` on the smoke
    profile, run 0 (seed 0), fine-tuned end to end; loaded from its cache, trained first if missing."""
    from bench.models.encoder import Encoder
    from bench.models.registry import get_model
    from suites.adversarial import SUITE, _labelled, replications
    from suites.base import RunContext

    encoder = Encoder.from_spec(get_model(model), paths.models, device="cpu")
    ctx = RunContext(paths=paths, device="cpu", batch_size=batch_size, profile="smoke")
    task = SUITE.task("mr")
    examples = task.attack_set(paths.data)
    training, _ = SUITE.training_set(task, ctx)
    train = _labelled(training.load(paths.data, examples), training.source)
    seed = replications(len(examples), None, 1, ctx.seed)[0].victim_seed
    return task, examples, SUITE.victim(task, [train], examples, encoder, ctx, seed)


def profile_recipe(recipe: str, examples, warmup, columns, victim, resources_factory, batch_size: int,
                   constraints: str) -> dict:
    from attacks.recipes import build_attack
    from attacks.wrapper import CachedModelWrapper
    from suites.adversarial import attack_one, example_seed

    wrapper = CachedModelWrapper(victim.model, victim.tokenizer, victim.max_len, batch_size)
    attack = build_attack(recipe, resources_factory(), wrapper, batch_size=batch_size, constraints=constraints)
    for i, ex in enumerate(warmup):
        attack_one(attack, ex, i, columns, example_seed(10 ** 6, i))  # lazy loads, not timed
    timer = Timer()
    patches = instrument(attack, victim.model, timer)
    outcomes = []
    try:
        start = time.perf_counter()
        for i, ex in enumerate(examples):
            attack.clear_cache()
            rec = attack_one(attack, ex, i, columns, example_seed(0, i))
            outcomes.append(rec["result_type"])
        wall = time.perf_counter() - start
    finally:
        undo(patches)
    shares = {c: timer.totals.get(c, 0.0) for c in CATEGORIES}
    shares["other"] = max(wall - sum(shares.values()), 0.0)
    return {"recipe": recipe, "wall_s": wall, "seconds": shares, "outcomes": outcomes,
            "victim_queries": wrapper.stats["queries"], "victim_forward_examples": wrapper.stats["forward_examples"]}


def format_table(results: list[dict]) -> str:
    head = f"{'recipe':12s} {'wall s':>8s} " + " ".join(f"{c:>16s}" for c in (*CATEGORIES, "other")) + \
           f" {'neural %':>9s}"
    lines = [head]
    for r in results:
        wall = r["wall_s"] or 1e-9
        cells = " ".join(f"{100 * r['seconds'][c] / wall:15.1f}%" for c in (*CATEGORIES, "other"))
        neural = 100 * (r["seconds"]["victim"] + r["seconds"]["masked_lm"]) / wall
        lines.append(f"{r['recipe']:12s} {r['wall_s']:8.1f} {cells} {neural:8.1f}%")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--recipe", action="append", dest="recipes")
    parser.add_argument("--n", type=int, default=10)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--constraints", default="paper", choices=("paper", "unified"))
    args = parser.parse_args()

    from attacks.recipes import RECIPES
    from attacks.resources import Resources
    from bench.paths import Paths

    paths = Paths.from_env()
    task, examples, victim = mr_victim(paths, args.model, args.batch_size)
    warmup, examples = examples[args.n:args.n + 1], examples[:args.n]
    Resources(paths).textattack()
    results = []
    for recipe in args.recipes or list(RECIPES):
        result = profile_recipe(recipe, examples, warmup, task.columns, victim, lambda: Resources(paths),
                                args.batch_size, args.constraints)
        results.append(result)
        kinds = result["outcomes"]
        print(f"{recipe}: {result['wall_s']:.1f}s for {len(examples)} examples ({kinds.count('successful')} "
              f"successful, {kinds.count('failed')} failed, {kinds.count('skipped')} skipped); victim queries "
              f"{result['victim_queries']}, forwarded {result['victim_forward_examples']}", flush=True)
    print(f"\nShare of wall time per recipe ({len(examples)} MR examples, --constraints {args.constraints}, "
          f"model {args.model}):")
    print(format_table(results))


if __name__ == "__main__":
    main()

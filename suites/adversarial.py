"""Adversarial: the five TextAttack recipes against victims fine-tuned from the encoder (RobustEmbed Table 3).

Per task: fine-tune the encoder end to end with a linear head (``bench/finetune.py``, cached per
(model, task, seed)), record its clean accuracy on the whole attack set, then attack a sample of
the attack set with each recipe. Every attacked example is appended to a JSONL log as soon as it
is done; an interrupted run resumes at the next example and recomputes none.

Rows (``attack`` = recipe), TextAttack's definitions (``attacks/metrics.py``): attack success
rate (main), original accuracy, accuracy under attack, accuracy reduction, average queries,
% words perturbed, examples/s. With ``--runs K`` there are K runs: run 0 attacks the first N
examples (N = ``--limit``, default all), run k > 0 a seeded random sample of N; the headline is
the mean over runs with its std, and each run has its own row (aggregation ``run<k>``).
``avg_queries`` against ``accuracy_reduction`` per recipe is RobustEmbed Figure 2's data.

Victim training is capped on the CPU smoke profile (``VICTIM_PROFILES``); the caps enter the
configuration hash and every row. MNLI-mismatched is attacked with the SNLI victim.
"""

from __future__ import annotations

import json
import random
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from attacks import datasets as ds
from attacks.metrics import attack_evidence, attack_metrics, mean_std
from attacks.recipes import QUERY_BUDGET_OPTION, RECIPES, RECIPES_OPTION
from bench.errors import BenchError, lookup
from bench.plugins import Option
from suites.base import RunContext, Suite, Task, row

RATE_METRICS = ("attack_success_rate", "original_accuracy", "accuracy_under_attack", "accuracy_reduction",
                "avg_queries", "words_perturbed_pct", "examples_per_s")

# Victim fine-tuning per profile (bench.finetune.FinetuneConfig fields). Smoke: a CPU-sized cap.
VICTIM_PROFILES = {
    "smoke": {"max_examples": 2000, "epochs": 1, "max_len": 128, "lr": 5e-5},
    "paper": {"max_examples": None, "epochs": 3, "max_len": 256, "lr": 2e-5},
}

# TextAttack maps each result class to one of three kinds (MaximizedAttackResult counts as a success).
RESULT_KINDS = {"SuccessfulAttackResult": "successful", "MaximizedAttackResult": "successful",
                "FailedAttackResult": "failed", "SkippedAttackResult": "skipped"}


@dataclass(frozen=True)
class AdvTask(Task):
    columns: tuple[str, ...] = ("text",)
    labels: tuple[str, ...] = ("negative", "positive")
    attack_set: Callable | None = None  # data root -> [Example]
    train_set: Callable | None = None  # (data root, attack examples) -> [Example]
    victim_task: str = ""  # the task whose victim attacks this one ("" = itself)
    train_available: Callable = lambda root: True

    @property
    def victim(self) -> str:
        return self.victim_task or self.name


REF = "RobustEmbed Table 3"
SENT, NLI = ("text",), ("premise", "hypothesis")
ADV = dict(suite="adversarial", split="attack", main_metric="attack_success_rate", main_aggregation="mean-of-runs",
           paper_ref=REF)
TASKS = (
    AdvTask(**ADV, name="mr", label="MR", dataset="textfooler",
            description="MR: TextFooler's 1000 examples; victim on SentEval MR minus them",
            attack_set=ds.textfooler_classification("mr"), train_set=ds.mr_train),
    AdvTask(**ADV, name="sst2", label="SST2", dataset="sst2",
            description="SST-2: GLUE validation (872); victim on GLUE train",
            attack_set=ds.sst2_dev, train_set=ds.sst2_train),
    AdvTask(**ADV, name="imdb", label="IMDB", dataset="imdb",
            description=f"IMDB: TextFooler's 1000 examples; victim on aclImdb train cut at {ds.IMDB_MAX_WORDS} words",
            attack_set=ds.textfooler_classification("imdb"), train_set=ds.imdb_train),
    AdvTask(**ADV, name="yelp", label="YELP", dataset="textfooler",
            description=f"Yelp: TextFooler's 1000 examples; needs {ds.YELP_TRAIN} to train a victim",
            attack_set=ds.textfooler_classification("yelp"), train_set=ds.yelp_train,
            train_available=ds.yelp_train_present),
    AdvTask(**ADV, name="mrpc", label="MRPC", dataset="glue-mrpc",
            description="MRPC: GLUE dev (408); victim on GLUE train", columns=("sentence1", "sentence2"),
            labels=("not_equivalent", "equivalent"), attack_set=ds.mrpc_dev, train_set=ds.mrpc_train),
    AdvTask(**ADV, name="snli", label="SNLI", dataset="textfooler",
            description="SNLI: TextFooler's 1000 examples; victim on SNLI dev (train absent offline)",
            columns=NLI, labels=ds.NLI_LABELS, attack_set=ds.textfooler_nli("snli"),
            train_set=ds.snli_dev_train),
    AdvTask(**ADV, name="mnli_mm", label="MNLI-mm", dataset="textfooler",
            description="MNLI mismatched: TextFooler's 1000 examples, attacked with the SNLI victim",
            columns=NLI, labels=ds.NLI_LABELS, attack_set=ds.textfooler_nli("mnli_mismatched"),
            train_set=ds.snli_dev_train, victim_task="snli"),
)
TASKS_BY_NAME = {t.name: t for t in TASKS}


def sample_indices(total: int, n: int | None, run: int, seed: int) -> list[int]:
    """Run 0: the first n examples (as --limit says); run k > 0: a seeded random sample of n."""
    n = min(n or total, total)
    if run == 0:
        return list(range(n))
    return sorted(random.Random(f"{seed}:{run}").sample(range(total), n))


def example_seed(run_seed: int, index: int) -> int:
    """Seeds TextBugger's random character edits per example, so a resumed run repeats them exactly."""
    return (run_seed * 1_000_003 + index) % (2 ** 31)


def record_of(result, index: int, example, wall_s: float) -> dict:
    """One JSONL record from a TextAttack AttackResult."""
    original = result.original_result.attacked_text
    kind = RESULT_KINDS[type(result).__name__]
    perturbed = result.perturbed_result.attacked_text
    changed = sorted(original.all_words_diff(perturbed)) if kind != "skipped" else []
    return {
        "index": index, "label": example.label, "original": dict(original._text_input),
        "perturbed": dict(perturbed._text_input) if kind != "skipped" else None,
        "original_output": int(result.original_result.output),
        "perturbed_output": int(result.perturbed_result.output),
        "original_score": float(result.original_result.score),
        "perturbed_score": float(result.perturbed_result.score),
        "num_queries": int(result.perturbed_result.num_queries), "result_type": kind,
        "num_words": len(original.words), "words_changed": len(changed),
        "changed_words": [[i, original.words[i], perturbed.words[i]] for i in changed],
        "wall_s": round(wall_s, 4),
    }


class AdversarialSuite(Suite):
    name = "adversarial"

    def labels(self) -> dict:
        return {"attack": {name: RECIPES.label(name) for name in RECIPES}}
    description = "TextAttack recipes (TextFooler, TextBugger, PWWS, BAE, BERT-Attack) vs fine-tuned victims"
    tasks = TASKS
    options = (RECIPES_OPTION, QUERY_BUDGET_OPTION,
               Option(name="runs", type=int, default=1, minimum=1,
                      help="replications per cell: run 0 attacks the first N examples, later runs other samples"))

    def config(self, task: AdvTask, ctx: RunContext) -> dict:
        cfg = super().config(task, ctx)
        cfg.update(recipes=self.recipes(ctx), runs=int(ctx.options.get("runs") or 1),
                   victim_task=task.victim, victim_training=VICTIM_PROFILES[ctx.profile],
                   train_data_present=task.train_available(ctx.paths.data),
                   attack_resources=resource_status(ctx.paths))
        return cfg

    @staticmethod
    def recipes(ctx: RunContext) -> list[str]:
        names = ctx.options.get("recipes") or list(RECIPES)
        for name in names:
            lookup("recipe", RECIPES, name)  # unknown names fail with the closest ones
        return list(dict.fromkeys(names))

    def run_task(self, task: AdvTask, encoder, ctx: RunContext):
        root = ctx.paths.data
        recipes = self.recipes(ctx)
        if not task.train_available(root):
            ctx.log(f"[yellow]Skipping '{task.name}': no training data for its victim ({task.description}). "
                    f"Place the file under BENCH_DATA_DIR to attack it.[/yellow]")
            return [row(task, "attack_success_rate", None, 0, attack=r) for r in recipes]

        from attacks.resources import Resources  # lazily: torch, NLTK, textattack

        resources = Resources(ctx.paths)
        resources.textattack()  # NLTK data, TA_CACHE_DIR, then the import (HF_HOME restored)
        examples = task.attack_set(root)
        victim = self.victim(task, examples, encoder, ctx)
        clean = victim.accuracy(_labelled(examples, f"{task.name}:attack"))
        out = [row(task, "clean_accuracy", clean, len(examples), aggregation="all",
                   resources=json.dumps({"victim": _victim_summary(victim)}, sort_keys=True))]
        for recipe in recipes:
            # A fresh Resources per recipe, so its provenance names exactly the roles that recipe used.
            out += self.attack_rows(task, recipe, examples, victim, encoder, Resources(ctx.paths), ctx)
        return out

    def victim(self, task: AdvTask, examples, encoder, ctx: RunContext):
        from bench.finetune import FinetuneConfig, load_or_finetune

        victim_task = TASKS_BY_NAME[task.victim]
        victim_attack = examples if victim_task is task else victim_task.attack_set(ctx.paths.data)
        train = victim_task.train_set(ctx.paths.data, victim_attack)
        config = FinetuneConfig(seed=ctx.seed, **VICTIM_PROFILES[ctx.profile])
        return load_or_finetune(encoder, ctx.paths, victim_task.name, len(victim_task.labels),
                                [_labelled(train, f"{victim_task.name}:{victim_task.train_set.__name__}")],
                                config, dev=_labelled(victim_attack, f"{victim_task.name}:attack"),
                                label_names=victim_task.labels, batch_size=ctx.batch_size, log=ctx.log)

    def attack_rows(self, task, recipe, examples, victim, encoder, resources, ctx):
        from attacks.log import AttackLog
        from attacks.recipes import build_attack
        from attacks.wrapper import CachedModelWrapper
        from bench.store import config_hash

        wrapper = CachedModelWrapper(victim.model, victim.tokenizer, victim.max_len, ctx.batch_size)
        attack = build_attack(recipe, resources, wrapper, ctx.options.get("query_budget"), ctx.batch_size)
        victim_sha = victim.card.get("weights_sha256", "")
        builds = local_builds(ctx.paths, roles_used(resources))
        per_run, evidence = [], []
        for run in range(int(ctx.options.get("runs") or 1)):
            run_seed = ctx.seed * 1000 + run
            indices = sample_indices(len(examples), ctx.limit, run, run_seed)
            # What decides an example's outcome, and nothing else: a log serves any --limit or recipe list.
            identity = {"model": encoder.name, "task": task.name, "recipe": recipe, "victim_sha256": victim_sha,
                        "query_budget": ctx.options.get("query_budget"), "served": roles_used(resources),
                        "builds": builds, "run_seed": run_seed}
            path = (ctx.paths.results / "attack_logs" / encoder.name / task.name / recipe /
                    f"seed{ctx.seed}-run{run}-victim{victim_sha[:12]}-{config_hash(identity)[:8]}.jsonl")
            log = AttackLog(path, identity)
            if ctx.overwrite == "always":
                log.reset()
            todo = [i for i in indices if not log.done(i)]
            if len(todo) < len(indices):
                ctx.log(f"  {recipe} run {run}: resuming, {len(indices) - len(todo)} of {len(indices)} "
                        f"examples already in {path.name}")
            for i in ctx.track(todo, len(todo), f"{task.name} {recipe} run {run}"):
                log.add(attack_one(attack, examples[i], i, task.columns, example_seed(run_seed, i)))
            done = log.ordered(indices)
            stale = [r["index"] for r in done if tuple(r["original"].values()) != examples[r["index"]].inputs]
            if stale:
                raise BenchError(f"{path} holds examples {stale[:5]} with other texts than the attack set "
                                 f"(the data changed). Delete the log, or re-run with --overwrite always.")
            per_run.append(attack_metrics(done))
            evidence.append(attack_evidence(done))
        provenance = json.dumps({"served": roles_used(resources), "builds": builds, "attack": repr(attack),
                                 "victim": _victim_summary(victim),
                                 "logs": str(path.parent.relative_to(ctx.paths.results))}, sort_keys=True)
        return _metric_rows(task, recipe, per_run, len(indices), provenance, repr(attack), evidence)


def roles_used(resources) -> dict[str, str]:
    """role -> resource id, for the roles this Resources object resolved (``served()`` resolves all,
    and fails on roles a recipe never needs, e.g. the masked LM for PWWS)."""
    return {role: option.id for role, option in resources._served.items()}


def resource_status(paths) -> dict[str, dict]:
    """role -> what would serve it and its build report (``bench resources status``). Part of the
    configuration: numbers from real resources and from stand-ins, or from two builds of a
    stand-in, never share a cell or a log."""
    from attacks.resources import Resources

    return {r["role"]: {"served": r["served"], "report": r["report"]} for r in Resources(paths).status()}


def local_builds(paths, roles: dict[str, str]) -> dict[str, dict]:
    """The build report of each locally built stand-in a recipe used."""
    status = resource_status(paths)
    return {role: status[role]["report"] for role in roles if status.get(role, {}).get("report")}


def attack_one(attack, example, index: int, columns, seed: int) -> dict:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    start = time.perf_counter()
    result = attack.attack(OrderedDict(zip(columns, example.inputs)), example.label)
    return record_of(result, index, example, time.perf_counter() - start)


def _metric_rows(task, recipe, per_run: list[dict], n: int, provenance: str, attack_repr: str,
                 evidence: list[dict] | None = None):
    """Rows per metric: the mean over runs, then one per run. ``evidence`` (per run: metric -> per-example
    Evidence) is what the base suite turns into CIs: Wilson or a bootstrap per run, a t-interval over runs."""
    from bench.stats import Evidence

    rows = []
    config = json.dumps({"attack": attack_repr})  # the composed recipe, as TextAttack prints it
    for metric in RATE_METRICS:
        value, std = mean_std([m[metric] for m in per_run])
        runs = [e.get(metric) for e in evidence or []]
        combined = (Evidence(parts=[replace(e, label=f"run{k}") for k, e in enumerate(runs)], combine="runs")
                    if runs and all(runs) else None)
        rows.append(row(task, metric, value, n, aggregation="mean-of-runs", attack=recipe, std=std,
                        resources=provenance, config=config, evidence=combined))
        if len(per_run) > 1:
            rows += [row(task, metric, m[metric], n, aggregation=f"run{k}", attack=recipe, resources=provenance,
                         config=config, evidence=runs[k] if runs else None)
                     for k, m in enumerate(per_run)]
    return rows


def _labelled(examples, source: str):
    from bench.finetune import Labelled

    return Labelled([e.inputs[0] if len(e.inputs) == 1 else tuple(e.inputs) for e in examples],
                    [e.label for e in examples], source)


def _victim_summary(victim) -> dict:
    card = victim.card
    return {"task": card.get("task"), "weights_sha256": card.get("weights_sha256"),
            "dev_accuracy": card.get("dev_accuracy"), "training_data": card.get("training_data"),
            "hyperparameters": card.get("hyperparameters")}


SUITE = AdversarialSuite()

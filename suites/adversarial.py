"""Adversarial: the five TextAttack recipes against victims built on the encoder (RobustEmbed Table 3).

Per task: build a victim from the encoder (``--victim``, ``VICTIM_SETTINGS``, ``bench/finetune.py``):

- ``finetune`` (default): encoder + linear head on its pooler, trained end to end, as the papers do;
- ``frozen``: the encoder frozen, a linear head on its sentence embedding (pairs: ``[u, v, |u-v|, u*v]``).
  It isolates the robustness of the embedding itself, and is cheap on CPU.

The victim mode and its settings (per profile) enter the cell configuration and every row. Victims
are cached by everything that changes them (``bench.finetune.victim_dir``). Then record each
victim's clean accuracy on the whole attack set and attack a sample of the attack set with each
recipe. Every attacked example is appended to a JSONL log as soon as it is done; an interrupted
run resumes at the next example and recomputes none.

Training data (``attacks/datasets.py`` ``TrainingSet``): each task's own training split; SNLI is
attacked by an SNLI-train victim and MNLI-mismatched by an MNLI-train victim. Where a training
set is absent (offline: SNLI train, MNLI train, Yelp train), the task is skipped with a message
naming `bench data fetch ...`, and its rows have empty values. Only ``--substitute-victim`` trains a
stand-in victim instead: ``snli-dev`` trains the NLI victims on SNLI dev minus the attack pairs,
``yelp-split`` trains Yelp's on the odd positions of TextFooler's Yelp set and attacks the even ones;
recorded in the configuration (``substitute_victim``, ``victim_data``) and in every victim card.

A victim-level control (``--adversarial-training RECIPE``, ``hardened``): each victim is trained again with
the recipe's successful adversarial examples added to its training data, made against that victim from a
seeded sample of ``--adversarial-training-examples`` training sentences (1,000 by default), never from the
attack set, as A2T and TextAttack's attack-augmented training do; then the attack set is attacked as
always. Those training-set attacks are logged (and resume) like any other, under
``attack_logs/<model>/<task>/adversarial-training-<recipe>/``.

Replications (``--runs K``, ``replications``): run k attacks its own victim, fine-tuned (or its head
trained) with seed ``seed + 1000·k``, on its own sample: run 0 the first N examples (N = ``--limit``,
default all), run k the next N, disjoint while the pool lasts (MR's 1,000 TextFooler examples with
N = 200: 0-199, 200-399, ...); once the pool is exhausted a run draws a seeded random sample, which
overlaps the others. Each row's config says what varied (``replication``). RobustEmbed reports the
mean of five runs of 1,000 examples (Sec. 5.3) without saying what varied between them.

Rows (``attack`` = recipe), TextAttack's definitions (``attacks/metrics.py``): attack success
rate (main), original accuracy, accuracy under attack, accuracy reduction, average queries,
% words perturbed, examples/s, each as the mean over runs (``mean-of-runs``, with its std) and,
with K > 1, one row per run (aggregation ``run<k>``); plus the victims' ``clean_accuracy``.
``avg_queries`` against ``accuracy_reduction`` per recipe is RobustEmbed Figure 2's data.
"""

from __future__ import annotations

import json
import random
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Callable

from attacks import datasets as ds
from attacks.metrics import attack_evidence, attack_metrics, mean_std
from attacks.recipes import (BERT_ATTACK_CANDIDATES_OPTION, CONSTRAINTS_OPTION, QUERY_BUDGET_OPTION, RECIPES,
                             RECIPES_OPTION, RECIPE_PARAMETERS, RECIPE_SCOPED_CONFIG, constraints_config,
                             constraints_record, recipe_parameters, recipe_roles)
from bench.errors import BenchError, lookup
from bench.plugins import Option
from bench.results.store import model_dir
from suites.base import RunContext, Suite, Task, row

RATE_METRICS = ("attack_success_rate", "original_accuracy", "accuracy_under_attack", "accuracy_reduction",
                "avg_queries", "words_perturbed_pct", "examples_per_s")

# Victim training per victim mode and profile: bench.finetune.FinetuneConfig / FrozenHeadConfig fields.
# The same settings serve every encoder. smoke: a CPU-sized cap. study: the full MR and
# SST-2 training sets on 2 CPU cores, one epoch: a MiniLM step of batch 32 on MR took 2.2 CPU-seconds
# (one thread, under load), so an MR victim is about 11 CPU-minutes and an SST-2 one about 45 (docs/attacks.md,
# "Study victims"). paper: BERT fine-tuning defaults (Devlin et al. 2019: lr 2e-5, 3 epochs).
VICTIM_SETTINGS = {
    "finetune": {
        "smoke": {"max_examples": 2000, "epochs": 1, "max_len": 128, "lr": 5e-5},
        "study": {"max_examples": None, "epochs": 1, "max_len": 64, "lr": 5e-5, "batch_size": 32},
        "paper": {"max_examples": None, "epochs": 3, "max_len": 256, "lr": 2e-5},
    },
    "frozen": {  # logistic regression on the frozen embedding: cheap at every size
        "smoke": {"max_examples": 2000, "epochs": 30, "lr": 1e-3, "batch_size": 64},
        "study": {"max_examples": None, "epochs": 30, "lr": 1e-3, "batch_size": 64},
        "paper": {"max_examples": None, "epochs": 30, "lr": 1e-3, "batch_size": 64},
    },
}
VICTIM_MODES = tuple(VICTIM_SETTINGS)
# Substitute victims, only when asked for (--substitute-victim): name -> training set.
SUBSTITUTES = {"snli-dev": ds.SNLI_DEV_SUBSTITUTE, "yelp-split": ds.YELP_SPLIT_SUBSTITUTE}
ADVERSARIAL_TRAINING_EXAMPLES = 1000  # training sentences attacked per victim under --adversarial-training
RUN_SEED_STRIDE = 1000  # run k's victim seed is seed + 1000·k: no two (seed, run) share a victim while seed < 1000

# TextAttack maps each result class to one of three kinds (MaximizedAttackResult counts as a success).
RESULT_KINDS = {"SuccessfulAttackResult": "successful", "MaximizedAttackResult": "successful",
                "FailedAttackResult": "failed", "SkippedAttackResult": "skipped"}


@dataclass(frozen=True)
class AdvTask(Task):
    columns: tuple[str, ...] = ("text",)
    labels: tuple[str, ...] = ("negative", "positive")
    attack_set: Callable | None = None  # data root -> [Example]
    train: ds.TrainingSet | None = None  # the victim's training data
    substitutes: tuple[str, ...] = ()  # SUBSTITUTES this task accepts when its training set is absent
    clean_metrics: tuple[str, ...] = ("clean_accuracy",)  # CLEAN_METRICS scored on the unattacked set


REF = "RobustEmbed Table 3"
SENT, NLI = ("text",), ("premise", "hypothesis")
ADV = dict(suite="adversarial", split="attack", main_metric="attack_success_rate", main_aggregation="mean-of-runs",
           paper_ref=REF)
TASKS = (
    AdvTask(**ADV, name="mr", label="MR", dataset="textfooler",
            description="MR: TextFooler's 1000 examples; victim on SentEval MR minus them",
            attack_set=ds.textfooler_classification("mr"), train=ds.MR_TRAIN),
    AdvTask(**ADV, name="sst2", label="SST2", dataset="sst2",
            description="SST-2: GLUE validation (872); victim on GLUE train",
            attack_set=ds.sst2_dev, train=ds.SST2_TRAIN),
    AdvTask(**ADV, name="imdb", label="IMDB", dataset="imdb",
            description=f"IMDB: TextFooler's 1000 examples; victim on aclImdb train cut at {ds.IMDB_MAX_WORDS} words",
            attack_set=ds.textfooler_classification("imdb"), train=ds.IMDB_TRAIN),
    AdvTask(**ADV, name="yelp", label="YELP", dataset="textfooler",
            description=f"Yelp: TextFooler's 1000 examples; needs {ds.YELP_TRAIN} to train a victim",
            attack_set=ds.textfooler_classification("yelp"), train=ds.YELP_TRAIN_SET, substitutes=("yelp-split",)),
    AdvTask(**ADV, name="mrpc", label="MRPC", dataset="glue-mrpc",
            description="MRPC: GLUE dev (408); victim on GLUE train", columns=("sentence1", "sentence2"),
            labels=("not_equivalent", "equivalent"), attack_set=ds.mrpc_dev, train=ds.MRPC_TRAIN),
    AdvTask(**ADV, name="snli", label="SNLI", dataset="textfooler",
            description="SNLI: TextFooler's 1000 examples; victim on SNLI train",
            columns=NLI, labels=ds.NLI_LABELS, attack_set=ds.textfooler_nli("snli"),
            train=ds.SNLI_TRAIN_SET, substitutes=("snli-dev",)),
    AdvTask(**ADV, name="mnli_mm", label="MNLI-mm", dataset="textfooler",
            description="MNLI mismatched: TextFooler's 1000 examples; victim on MNLI train",
            columns=NLI, labels=ds.NLI_LABELS, attack_set=ds.textfooler_nli("mnli_mismatched"),
            train=ds.MNLI_TRAIN_SET, substitutes=("snli-dev",)),
    AdvTask(**{**ADV, "paper_ref": "DCL Table 3"}, name="cola", label="CoLA", dataset="cola",
            description="CoLA v1.0: GLUE's dev (in-domain 527 + out-of-domain 516); victim on its train (8,551)",
            labels=("unacceptable", "acceptable"), attack_set=ds.cola_dev, train=ds.COLA_TRAIN,
            clean_metrics=("clean_accuracy", "clean_mcc")),
)
TASKS_BY_NAME = {t.name: t for t in TASKS}


@dataclass(frozen=True)
class Replication:
    """One run of a cell: its victim's seed and the attack-set indices it attacks."""

    run: int
    victim_seed: int
    indices: tuple[int, ...]
    sample: str  # "block" (disjoint from the other blocks), "resample" (seeded, overlapping) or "whole pool"

    def describe(self) -> dict:
        return {"run": self.run, "victim_seed": self.victim_seed, "sample": self.sample, "n": len(self.indices),
                "first_index": self.indices[0] if self.indices else None,
                "last_index": self.indices[-1] if self.indices else None}


def replications(total: int, n: int | None, runs: int, seed: int) -> list[Replication]:
    """Run k: victim seed ``seed + 1000·k``; examples k·N..(k+1)·N-1 while the pool lasts, then a seeded
    random sample of N (overlapping earlier runs). N = ``n`` (all examples when None)."""
    n = min(n or total, total)
    out = []
    for k in range(runs):
        if n == total:
            indices, sample = tuple(range(total)), "whole pool"
        elif (k + 1) * n <= total:
            indices, sample = tuple(range(k * n, (k + 1) * n)), "block"
        else:
            indices, sample = tuple(sorted(random.Random(f"{seed}:{k}").sample(range(total), n))), "resample"
        out.append(Replication(k, seed + RUN_SEED_STRIDE * k, indices, sample))
    return out


def what_varied(plan: list[Replication]) -> dict:
    """Which replication factors varied across the runs (recorded in every row)."""
    if len(plan) < 2:
        return {"runs": len(plan), "victim_seed": False, "examples": "single run"}
    samples = {r.sample for r in plan}
    examples = ("same (the sample is the whole pool)" if samples == {"whole pool"} else
                "disjoint" if samples == {"block"} else "partly overlapping (pool exhausted)")
    return {"runs": len(plan), "victim_seed": len({r.victim_seed for r in plan}) == len(plan), "examples": examples,
            "victim_seeds": [r.victim_seed for r in plan]}


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
    description = "TextAttack recipes (TextFooler, TextBugger, PWWS, BAE, BERT-Attack) vs victims built on the encoder"
    # 2: per-run victims (seed + 1000·k) and disjoint samples; SNLI/MNLI-mm victims on their own train sets;
    #    victim modes; BERT-Attack's K an option.
    # 3: a mean-over-runs interval of a rate is cut to 0-100 (a 2-run t-interval reached past 100).
    # 4: the victims' clean accuracy carries per-example evidence (a Wilson interval, paired comparisons).
    version = 4

    def recipe_names(self) -> tuple[str, ...]:
        return tuple(RECIPES)

    def labels(self) -> dict:
        return {"attack": {name: RECIPES.label(name) for name in RECIPES}}

    def stored_config(self, cfg: dict, stored: dict) -> dict:
        return with_stored_builds(cfg, stored)
    tasks = TASKS  # by default its protocol's seven datasets and five recipes (CoLA when asked)
    row_scoped = RECIPE_SCOPED_CONFIG
    options = (RECIPES_OPTION, QUERY_BUDGET_OPTION, BERT_ATTACK_CANDIDATES_OPTION, CONSTRAINTS_OPTION,
               Option(name="runs", type=int, default=1, minimum=1,
                      help="replications per cell: run k attacks its own victim (seed + 1000·k) on its own "
                           "sample (the first N examples, the next N, ...)"),
               Option(name="victim", choices=VICTIM_MODES, default="finetune",
                      help="victim mode: finetune = encoder + linear head trained end to end; frozen = "
                           "encoder frozen, linear head on its sentence embedding"),
               # keyed by config() only when set (victim_training carries it), so older cells keep their keys
               Option(name="victim_examples", type=int, minimum=1, changes_numbers=False,
                      help="train each victim on a seeded sample of this many training examples instead of the "
                           "profile's (all, in study and paper): IMDB's 25,000 reviews take about an hour to "
                           "encode on one CPU thread; recorded in every row"),
               Option(name="substitute_victim", choices=tuple(SUBSTITUTES),
                      help="where a task's training set is absent, train its victim on this stand-in instead of "
                           "skipping the task (snli-dev, for SNLI and MNLI-mm: SNLI dev minus the attack pairs; "
                           "yelp-split, for Yelp: half of TextFooler's Yelp set trains the victim, the other half is "
                           "attacked); recorded in every row"),
               Option(name="adversarial_training", choices=tuple(RECIPES), changes_numbers=False, treatment=True,
                      help="a victim-level control: train each victim again with this recipe's successful "
                           "adversarial examples added, made against it from training sentences only (A2T's "
                           "attack-augmented training); recorded in every row"),
               # keyed by config() with --adversarial-training only, so other cells keep their keys
               Option(name="adversarial_training_examples", type=int, minimum=1, changes_numbers=False,
                      help=f"training sentences attacked per victim for --adversarial-training (default "
                           f"{ADVERSARIAL_TRAINING_EXAMPLES})"))

    @staticmethod
    def victim_mode(ctx: RunContext) -> str:
        return ctx.options.get("victim") or "finetune"

    def needs_network(self, ctx: RunContext) -> str:
        return ("fine-tunes each victim end to end (--victim finetune)" if self.victim_mode(ctx) == "finetune"
                else "")

    def embedding_only_hint(self) -> str:
        return "adversarial with frozen victims (--victim frozen; victim=\"frozen\" in bench.evaluate)"

    @staticmethod
    def victim_settings(ctx: RunContext) -> dict:
        mode = AdversarialSuite.victim_mode(ctx)
        by_profile = VICTIM_SETTINGS[mode]
        if ctx.profile not in by_profile:
            raise BenchError(f"The adversarial suite has no '{ctx.profile}' victim settings for --victim {mode} "
                             f"(it has: {', '.join(by_profile)}).")
        cap = ctx.options.get("victim_examples")
        return {**by_profile[ctx.profile], **({"max_examples": int(cap)} if cap else {})}

    @staticmethod
    def training_set(task: AdvTask, ctx: RunContext) -> tuple[ds.TrainingSet | None, str | None]:
        """The victim's training data and the substitute used (if any); (None, None) = skip the task."""
        if task.train.present(ctx.paths.data):
            return task.train, None
        substitute = ctx.options.get("substitute_victim")
        if substitute and substitute in task.substitutes:
            return SUBSTITUTES[substitute], substitute
        return None, None

    def config(self, task: AdvTask, ctx: RunContext) -> dict:
        cfg = super().config(task, ctx)
        recipes = self.recipes(ctx)
        training, substitute = self.training_set(task, ctx)
        parameters = recipe_parameters(recipes, ctx.options, ctx.profile)
        cfg.update(recipes=recipes, runs=self.runs(ctx), victim=self.victim_mode(ctx),
                   victim_training=self.victim_settings(ctx), victim_data=training.source if training else None,
                   substitute_victim=substitute, train_data_present=task.train.present(ctx.paths.data),
                   attack_resources=resource_identity(ctx.paths, recipe_roles(recipes, ctx.options.get("constraints"))),
                   **constraints_config(ctx.options))
        if ctx.options.get("victim_examples"):  # only when set: cells from before the option keep their keys
            cfg["victim_examples"] = int(ctx.options["victim_examples"])
        if ctx.options.get("adversarial_training"):  # a treatment (its recipe keyed by the base suite)
            cfg["adversarial_training_examples"] = int(ctx.options.get("adversarial_training_examples")
                                                       or ADVERSARIAL_TRAINING_EXAMPLES)
        # A recipe parameter enters the key only for cells that run that recipe.
        for name, keywords in RECIPE_PARAMETERS.items():
            for keyword, (option, _) in keywords.items():
                cfg[option] = parameters.get(name, {}).get(keyword)
        return cfg

    @staticmethod
    def runs(ctx: RunContext) -> int:
        return int(ctx.options.get("runs") or 1)

    def recipes(self, ctx: RunContext) -> list[str]:
        return chosen_recipes(self.run_protocol(ctx), ctx)

    def preflight(self, tasks, ctx: RunContext) -> None:
        """Every attack role resolvable, before the model loads (seconds, not the half minute it takes
        to load a model and reach the first task)."""
        from attacks.resources import Resources

        Resources(ctx.paths).require_built(recipe_roles(self.recipes(ctx), ctx.options.get("constraints"),
                                                        undeclared=()))

    def run_task(self, task: AdvTask, encoder, ctx: RunContext):
        root = ctx.paths.data
        recipes = self.recipes(ctx)
        training, substitute = self.training_set(task, ctx)
        if training is None:
            alternative = (f", or pass --substitute-victim {' | '.join(task.substitutes)} to train it on a substitute "
                           f"(recorded in every row)" if task.substitutes else "")
            ctx.log(f"[yellow]Skipping '{task.name}': its victim needs {task.train.needs}, which is not under "
                    f"BENCH_DATA_DIR ({root}). {task.train.how_to_get()} to attack it{alternative}.[/yellow]")
            return [row(task, "attack_success_rate", None, 0, attack=r) for r in recipes]
        if substitute:
            ctx.log(f"[yellow]'{task.name}': {task.train.needs} is absent; its victim trains on the substitute "
                    f"'{substitute}' ({training.source}), as --substitute-victim asks.[/yellow]")

        from attacks.resources import Resources  # lazily: torch, NLTK, textattack

        preflight = Resources(ctx.paths)
        # every declared role resolvable before any victim is trained (an undeclared plug-in: checked on use)
        preflight.require(recipe_roles(recipes, ctx.options.get("constraints"), undeclared=()))
        preflight.textattack()  # NLTK data, TA_CACHE_DIR, then the import (HF_HOME restored)
        examples = training.attacked(task.attack_set(root))  # a stand-in cut from the attack set keeps its half
        plan = replications(len(examples), ctx.limit, self.runs(ctx), ctx.seed)
        train_examples = training.load(root, examples)
        train = _labelled(train_examples, training.source)
        victims = [self.victim(task, [train], examples, encoder, ctx, rep.victim_seed) for rep in plan]
        if ctx.options.get("adversarial_training"):
            victims = [self.hardened(task, train, train_examples, examples, victim, encoder, ctx, rep)
                       for rep, victim in zip(plan, victims)]
        clean = [clean_scores(victim, examples, task) for victim in victims]
        summaries = [_victim_summary(v) for v in victims]
        out = []
        for metric in task.clean_metrics:
            out += _run_rows(task, metric, [{metric: run[metric][0]} for run in clean], plan,
                             json.dumps({"victims": summaries}, sort_keys=True), {}, attack="", n=len(examples),
                             evidence=[{metric: run[metric][1]} for run in clean])
        for recipe in recipes:
            # A fresh Resources per recipe, so its provenance names exactly the roles that recipe used.
            out += self.attack_rows(task, recipe, examples, plan, victims, encoder, Resources(ctx.paths), ctx)
        return out

    def victim(self, task: AdvTask, train: list, examples, encoder, ctx: RunContext, seed: int):
        """The victim trained on the ``train`` parts (cached by everything that changes it)."""
        from bench.finetune import VICTIM_MODES

        config_cls, load_or_train = VICTIM_MODES[self.victim_mode(ctx)]
        return load_or_train(encoder, ctx.paths, task.name, len(task.labels), train,
                             config_cls(seed=seed, **self.victim_settings(ctx)),
                             dev=_labelled(examples, f"{task.name}:attack"), label_names=task.labels,
                             batch_size=ctx.batch_size, log=ctx.log)

    def attack_on(self, recipe: str, victim, resources, ctx: RunContext, parameters: dict):
        """The recipe, composed against this victim under the run's constraints and query budget."""
        from attacks.recipes import build_attack

        return build_attack(recipe, resources, WRAPPERS[self.victim_mode(ctx)](victim, ctx.batch_size),
                            ctx.options.get("query_budget"), ctx.batch_size, parameters,
                            constraints=ctx.options.get("constraints") or "paper")

    def hardened(self, task: AdvTask, train, train_examples, examples, victim, encoder, ctx: RunContext,
                 rep: "Replication"):
        """Attack-augmented training (A2T's, TextAttack's ``--attack`` training): the victim trained again, its
        training data joined by the successful adversarial examples that ``--adversarial-training``'s recipe
        makes against it from a seeded sample of training sentences, never from the attack set."""
        from attacks.resources import Resources
        from bench.finetune import Labelled

        recipe = ctx.options["adversarial_training"]
        wanted = int(ctx.options.get("adversarial_training_examples") or ADVERSARIAL_TRAINING_EXAMPLES)
        chosen = sorted(random.Random(rep.victim_seed).sample(range(len(train_examples)),
                                                              min(wanted, len(train_examples))))
        resources = Resources(ctx.paths)
        parameters = recipe_parameters([recipe], ctx.options, ctx.profile).get(recipe, {})
        attack = self.attack_on(recipe, victim, resources, ctx, parameters)
        run_seed = ctx.seed * 1000 + rep.run
        identity = {**log_identity(encoder, task, recipe, victim, resources, ctx, run_seed, parameters),
                    "attacked": "training set"}
        path = log_path(ctx, encoder, task, f"adversarial-training-{recipe}", rep, victim, identity)
        what = f"{task.name} {recipe} on training sentences, run {rep.run}"
        done = attack_logged(ctx, path, identity, chosen, what,
                             lambda i: attack_one(attack, train_examples[i], i, task.columns,
                                                  example_seed(run_seed, i)),
                             after=getattr(victim, "after_example", None))
        refuse_stale_log(path, done, train_examples, "the training set")
        made = [r for r in done if r["result_type"] == "successful"]
        inputs = [tuple(r["perturbed"].values()) if len(r["perturbed"]) > 1 else next(iter(r["perturbed"].values()))
                  for r in made]
        ctx.log(f"  adversarial training, run {rep.run}: {len(made)} of {len(done)} training sentences attacked "
                f"successfully by {recipe}; the victim is trained again with them added")
        adversarial = Labelled(inputs, [r["label"] for r in made], f"{task.name}:train-adversarial-{recipe}")
        return self.victim(task, [train, adversarial], examples, encoder, ctx, rep.victim_seed)

    def attack_rows(self, task, recipe, examples, plan, victims, encoder, resources, ctx):
        parameters = recipe_parameters([recipe], ctx.options, ctx.profile).get(recipe, {})
        per_run, evidence, attack, logs = [], [], None, []
        for rep, victim in zip(plan, victims):
            attack = self.attack_on(recipe, victim, resources, ctx, parameters)
            run_seed = ctx.seed * 1000 + rep.run
            identity = log_identity(encoder, task, recipe, victim, resources, ctx, run_seed, parameters)
            path = log_path(ctx, encoder, task, recipe, rep, victim, identity)
            done = attack_logged(ctx, path, identity, rep.indices, f"{task.name} {recipe} run {rep.run}",
                                 lambda i: attack_one(attack, examples[i], i, task.columns, example_seed(run_seed, i)),
                                 after=getattr(victim, "after_example", None))
            refuse_stale_log(path, done, examples, "the attack set")
            per_run.append(attack_metrics(done))
            evidence.append(attack_evidence(done))
            logs.append(path)
        provenance = json.dumps({"served": roles_used(resources), "builds": local_builds(ctx.paths, roles_used(resources)),
                                 "attack": repr(attack), "victims": [_victim_summary(v) for v in victims],
                                 "logs": str(path.parent.relative_to(ctx.paths.results))}, sort_keys=True)
        # The composed recipe, as TextAttack prints it, and the recipe's parameters.
        config = {"attack": repr(attack), **({"recipe_parameters": parameters} if parameters else {})}
        # each row names the logs it was computed from: the cell records their sha256 (bench.results.store.LOGS)
        return [replace(r, logs=logs) for metric in RATE_METRICS
                for r in _run_rows(task, metric, per_run, plan, provenance, config, recipe, evidence=evidence)]


def refuse_stale_log(path, done: list[dict], examples, what: str) -> None:
    """A log's records name their examples by index; an index whose text changed (the data changed) is refused."""
    stale = [r["index"] for r in done if tuple(r["original"].values()) != examples[r["index"]].inputs]
    if stale:
        raise BenchError(f"{path} holds examples {stale[:5]} with other texts than {what} "
                         f"(the data changed). Delete the log, or re-run with --overwrite always.")


def log_identity(encoder, task, recipe: str, victim, resources, ctx: RunContext, run_seed: int,
                 parameters: dict) -> dict:
    """What decides an attacked example's outcome, and nothing else: a log serves any --limit or recipe list."""
    constraints = ctx.options.get("constraints") or "paper"
    builds = local_builds(ctx.paths, roles_used(resources))
    identity = {"model": encoder.name, "task": task.name, "recipe": recipe,
                "victim_sha256": victim.card.get("weights_sha256", ""),
                "query_budget": ctx.options.get("query_budget"), "served": roles_used(resources),
                "builds": {role: build_identity(b) for role, b in builds.items()},
                "run_seed": run_seed, "victim": AdversarialSuite.victim_mode(ctx),
                # a frozen victim's weights are its head's, which alone do not name the encoder under it
                "victim_base_sha256": victim.card.get("base_weights_sha256"),
                # fp32 and paper-constraint logs keep the key they had before these options existed
                **({"dtype": ctx.dtype} if ctx.dtype != "float32" else {}),
                **({"constraints": constraints_record(constraints)} if constraints != "paper" else {})}
    if parameters:
        identity["recipe_parameters"] = parameters
    return identity


def log_path(ctx: RunContext, encoder, task, folder: str, rep: "Replication", victim, identity: dict):
    from bench.results.store import config_hash

    victim_sha = victim.card.get("weights_sha256", "")
    return (ctx.paths.results / "attack_logs" / model_dir(encoder.name) / task.name / folder /
            f"seed{ctx.seed}-run{rep.run}-victim{victim_sha[:12]}-{config_hash(identity)[:8]}.jsonl")


def chosen_recipes(protocol, ctx: RunContext) -> list[str]:
    """The recipes a run of an attack suite runs: ``--recipe``'s, else its protocol's (unknown names fail with
    the closest ones; none at all is a BenchError naming the fix)."""
    names = ctx.options.get("recipes") or list(protocol.recipes)
    if not names:
        raise BenchError(f"Protocol '{protocol.name}' names no attack recipe. Fix: pass --recipe (`bench ls "
                         f"recipes`), or run a protocol that names recipes (`bench ls protocols`).")
    for name in names:
        lookup("recipe", RECIPES, name)
    return list(dict.fromkeys(names))


def _finetuned_wrapper(victim, batch_size: int):
    from attacks.wrapper import CachedModelWrapper

    return CachedModelWrapper(victim.model, victim.tokenizer, victim.max_len, batch_size,
                              amp_dtype=getattr(victim, "amp_dtype", None))


# victim mode -> its TextAttack model wrapper. A frozen-encoder victim is its own wrapper: it encodes
# through the Encoder (which caches embeddings) and applies the head.
WRAPPERS: dict[str, Callable] = {"finetune": _finetuned_wrapper, "frozen": lambda victim, batch_size: victim}


def attack_logged(ctx: RunContext, path, identity: dict, indices, description: str,
                  attack_index: Callable[[int], dict], after: Callable[[], None] | None = None) -> list[dict]:
    """The attack loop both attack suites share: the records of ``indices``, attacking (``attack_index``)
    only those not yet in the append-only log at ``path`` (``--overwrite always`` starts it afresh);
    ``after`` runs after each example (e.g. dropping cached embeddings)."""
    from attacks.log import AttackLog

    with AttackLog(path, identity) as log:
        if ctx.overwrite == "always":
            log.reset()
        indices = list(indices)
        todo = [i for i in indices if not log.done(i)]
        if len(todo) < len(indices):
            ctx.log(f"  {description}: resuming, {len(indices) - len(todo)} of {len(indices)} examples already in "
                    f"{path.name}")
        for i in ctx.track(todo, len(todo), description):
            log.add(attack_index(i))
            if after:
                after()
        return log.ordered(indices)


def roles_used(resources) -> dict[str, str]:
    """role -> resource id, for the roles this Resources object resolved (``served()`` resolves all,
    and fails on roles a recipe never needs, e.g. the masked LM for PWWS)."""
    return {role: option.id for role, option in resources._served.items()}


def resource_status(paths, roles=None) -> dict[str, dict]:
    """role -> what would serve it and its build report, for ``roles`` (default: every role). Part of the
    configuration: numbers from real resources and from stand-ins, or from two different builds of a
    stand-in, never share a cell or a log: keys take a report without its wall times (``build_identity``),
    so the same build made on another machine keys the same cells; rows keep it whole."""
    from attacks.resources import Resources

    return {r["role"]: {"served": r["served"], "report": r["report"]}
            for r in Resources(paths).status() if roles is None or r["role"] in roles}


def resource_identity(paths, roles) -> dict[str, dict]:
    """``resource_status`` of ``roles`` as cell keys take it: each report without its timings."""
    return {role: {**status, "report": build_identity(status["report"])}
            for role, status in resource_status(paths, roles).items()}


def with_stored_builds(cfg: dict, stored: dict) -> dict:
    """``cfg`` with the stored cell's record of each attack resource that nothing serves here (not built, so no
    build to tell apart from the one the cell used): reproducing stored cells needs no `bench resources build`.
    A resource that is served here must be the one the cell used."""
    mine, theirs = cfg.get("attack_resources") or {}, stored.get("attack_resources") or {}
    unbuilt = {role: theirs[role] for role, status in mine.items() if not status.get("served") and role in theirs}
    return {**cfg, "attack_resources": {**mine, **unbuilt}} if unbuilt else cfg


def build_identity(report: dict) -> dict:
    """A build report without its timings (``*_s`` seconds, ``s_per_step``): what the build is, not how
    long it took."""
    return {k: v for k, v in report.items() if not (k.endswith("_s") or k == "s_per_step")}


def local_builds(paths, roles: dict[str, str]) -> dict[str, dict]:
    """The build report of each locally built stand-in a recipe used."""
    status = resource_status(paths, roles)
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


def clean_scores(victim, examples, task: "AdvTask") -> dict:
    """metric -> (value x100 on every attack-set example, its per-example Evidence), for the task's clean
    metrics: accuracy (a Wilson interval per run, McNemar between two models' victims) and, where the task
    asks for it, the Matthews correlation (a bootstrap; GLUE's CoLA metric)."""
    import numpy as np

    from bench.scoring.stats import Evidence, Sample

    data = _labelled(examples, f"{task.name}:attack")
    pred, gold = np.asarray(victim.predict(data.inputs)), np.asarray(data.labels)
    correct = (pred == gold).astype(float)
    ids = list(range(len(correct)))
    scores = {"clean_accuracy": Evidence("proportion", Sample(ids, {"correct": correct}), ("correct",)),
              "clean_mcc": Evidence("mcc", Sample(ids, {"pred": pred, "gold": gold}), ("pred", "gold"))}
    return {metric: (scores[metric].point(), scores[metric]) for metric in task.clean_metrics}



def _run_rows(task, metric: str, per_run: list[dict], plan: list[Replication], provenance: str, config: dict,
              attack: str, n: int | None = None, evidence: list[dict] | None = None):
    """The mean over runs (with its std and what varied) and, with several runs, one row per run.
    ``n``: examples per run (default: the run's sample size). ``evidence`` (per run: metric -> per-example
    Evidence) is what the base suite turns into CIs: Wilson or a bootstrap per run, and for the mean over
    runs a bootstrap with each run's examples resampled within that run (as the reports' Table 3), never a
    t-interval over two or three run values (with 1 degree of freedom it spans most of 0-100)."""
    from bench.scoring.stats import Evidence

    value, std = mean_std([m[metric] for m in per_run])
    varied = what_varied(plan)
    runs = [e.get(metric) for e in evidence or []]
    combined = None
    if runs and all(runs):
        combined = (runs[0] if len(runs) == 1 else  # one run: its own interval (Wilson for a rate)
                    Evidence(parts=[replace(e, label=f"run{rep.run}") for rep, e in zip(plan, runs)], combine="strata"))
    rows = [row(task, metric, value, n or len(plan[0].indices), aggregation="mean-of-runs", attack=attack, std=std,
                resources=provenance, config=json.dumps({**config, "replication": varied}, sort_keys=True),
                evidence=combined)]
    if len(per_run) > 1:
        rows += [row(task, metric, m[metric], n or len(rep.indices), aggregation=f"run{rep.run}", attack=attack,
                     resources=provenance, config=json.dumps({**config, "replication": rep.describe()}, sort_keys=True),
                     evidence=runs[k] if runs else None)
                 for k, (rep, m) in enumerate(zip(plan, per_run))]
    return rows


def _labelled(examples, source: str):
    from bench.finetune import Labelled

    return Labelled([e.inputs[0] if len(e.inputs) == 1 else tuple(e.inputs) for e in examples],
                    [e.label for e in examples], source)


def _victim_summary(victim) -> dict:
    """What a row records of its victim; the mode under "protocol", the key every stored row has."""
    card = victim.card
    return {"protocol": card.get("protocol"), "task": card.get("task"), "seed": card.get("seed"),
            "weights_sha256": card.get("weights_sha256"), "dev_accuracy": card.get("dev_accuracy"),
            "training_data": card.get("training_data"), "hyperparameters": card.get("hyperparameters")}


SUITE = AdversarialSuite()

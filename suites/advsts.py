"""AdvSTS: the attack recipes turned on STS pairs (RobustEmbed Table 4), scored by cosine similarity.

For each (task, recipe) the attack perturbs ``sentence2`` of each test pair so that the encoder's
similarity, mapped to the task's gold scale (STS-B 0-5, SICK-R 1-5: ``pred = lo + (hi - lo) ·
clip(cos, 0, 1)``), moves away from the gold score; success is defined in ``attacks/regression.py``
(``SuccessRule``: the absolute error grows by at least ``margin``, a fifth of the gold range: 1.0 on
STS-B, 0.8 on SICK-R, i.e. the same cosine movement on both) and recorded with its parameters in
every row's config. The recipes and resources are the adversarial suite's (``attacks/recipes.py``,
``attacks/resources.py``), with a ``sentence1``-is-fixed constraint added.

**This success rule is ours.** RobustEmbed (Sec. 5.4, Table 4) perturbs "a pair of input sentences"
to push the predicted score away from the gold score and scores the adversarial set with Pearson's
correlation; Table 4 prints attack success rates without defining success for a regression target.
Our ASR (one sentence perturbed, a fixed error margin) is therefore not the paper's, and Table 4's
numbers are not comparable with it; ``ASR_DEFINITION`` says so in every row's config. The paper's own
measure, Pearson (and Spearman) on the adversarial pairs, is in every cell beside the clean ones.

Every attacked pair is appended to a JSONL log (``attacks/log.py``) as soon as it is done; a run
resumes at the next pair. From the log we write the adversarial set in the task's own STS format,
``$BENCH_RESULTS_DIR/advsts/<model>/<recipe>/<run>/AdvSTS-B/sts-test.csv`` (STS-B columns: genre
``AdvSTS-B``, file = recipe, year = result type, id = original index, gold, s1, s2) and
``AdvSICK-R/SICK_test_annotated.txt`` (SICK columns, the original entailment label kept), readable
by ``bench.data.datasets.read_stsb`` / ``read_sick`` and so by the STS suite. The adversarial pair of an
example is the attack's final text: the successful perturbation, or for a failed attack the most
damaging text the search reached (possibly the original).

Rows (``attack`` = recipe; correlations and rates x100): attack success rate (main, our rule),
Pearson/Spearman on the clean and on the adversarial pairs (``pearson_adversarial`` is the paper's
AdvSTS measure), mean |pred - gold| clean/adversarial (on the task's gold scale), average queries,
% words perturbed (of ``sentence2``, successful attacks), examples/s.
Without ``--recipe``: the run protocol's recipes (bench/protocols.toml: by default ``advsts-textfooler``,
TextFooler alone, on the smoke and study profiles, and ``robustembed-table4``, the paper's five, on the paper
profile).
"""

from __future__ import annotations

import json
import random
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from attacks.metrics import attack_evidence, attack_metrics
from attacks.recipes import (BERT_ATTACK_CANDIDATES_OPTION, CONSTRAINTS_OPTION, QUERY_BUDGET_OPTION, RECIPES,
                             RECIPES_OPTION, RECIPE_PARAMETERS, RECIPE_SCOPED_CONFIG, constraints_config,
                             recipe_parameters, recipe_roles)
from attacks.regression import COLUMNS, PERTURBED, SuccessRule
from bench.data.datasets import PairSet, _norm, read_sick, read_stsb, require
from bench.io import atomic_write_text
from suites.base import RunContext, Suite, Task, row

# Per gold scale: the margin is a fifth of the range, so both tasks ask for a cosine move of 0.2.
STSB_RULE = SuccessRule(margin=1.0, lo=0.0, hi=5.0)
SICK_RULE = SuccessRule(margin=0.8, lo=1.0, hi=5.0)
ASR_DEFINITION = ("ours, not RobustEmbed Table 4's (the paper defines none; it perturbs the pair and scores the "
                  "adversarial set by Pearson): success = |pred_adv - gold| >= |pred_clean - gold| + margin, "
                  "sentence2 perturbed only, pred = cosine mapped to the gold scale")
ADVERSARIAL_SET = "attack's final text per pair (successful perturbation, or the failed search's best)"


def write_stsb(directory: Path, records: list[dict], recipe: str) -> Path:
    """STS-B csv (tab separated): genre, file, year, id, score, s1, s2."""
    path = directory / "sts-test.csv"
    atomic_write_text(path, "".join(
        f"AdvSTS-B\t{recipe}\t{r['result_type']}\t{r['index']:04d}\t{r['gold']!r}\t"
        f"{_norm(r['adversarial'][0])}\t{_norm(r['adversarial'][1])}\n" for r in records))
    return path


def write_sick(directory: Path, records: list[dict], recipe: str) -> Path:
    """SICK with its header: pair_ID, sentence_A, sentence_B, relatedness_score, entailment_judgment."""
    path = directory / "SICK_test_annotated.txt"
    header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
    atomic_write_text(path, header + "".join(
        f"{r['index']}\t{_norm(r['adversarial'][0])}\t{_norm(r['adversarial'][1])}\t{r['gold']!r}\t"
        f"{r.get('extra') or 'NEUTRAL'}\n" for r in records))
    return path


def sick_entailment(root: Path) -> list[str]:
    """The entailment column of SICK test, kept in AdvSICK-R."""
    rows = (root / "SICK_test_annotated.txt").read_text(encoding="utf-8").splitlines()[1:]
    return [r.split("\t")[4] for r in rows if r.strip()]


@dataclass(frozen=True)
class AdvSTSTask(Task):
    out_name: str = ""  # AdvSTS-B | AdvSICK-R
    read: Callable[[Path, str], PairSet] | None = None
    write: Callable[[Path, list, str], Path] | None = None
    extra: Callable[[Path], list[str]] | None = None  # per-pair column carried into the file
    rule: SuccessRule = STSB_RULE  # the gold scale and the success margin


REF = "RobustEmbed Table 4 (AdvSTS)"
TASKS = (
    AdvSTSTask(suite="advsts", name="stsb", label="AdvSTS-B", dataset="stsb", split="test",
               main_metric="attack_success_rate", description="AdvSTS-B: attacked STS-B test", paper_ref=REF,
               out_name="AdvSTS-B", read=read_stsb, write=write_stsb),
    # 2: SICK's 1-5 gold scale (it was scored on 0-5).
    AdvSTSTask(suite="advsts", name="sickr", label="AdvSICK-R", dataset="sick", split="test",
               main_metric="attack_success_rate", description="AdvSICK-R: attacked SICK-R test", paper_ref=REF,
               out_name="AdvSICK-R", read=read_sick, write=write_sick, extra=sick_entailment, rule=SICK_RULE,
               version=2),
)


def correlations(pred, gold) -> dict[str, float | None]:
    from scipy.stats import pearsonr, spearmanr

    if len(gold) < 2 or len(set(pred)) < 2 or len(set(gold)) < 2:
        return {"pearson": None, "spearman": None}  # undefined: constant input
    return {"pearson": 100.0 * float(pearsonr(pred, gold)[0]), "spearman": 100.0 * float(spearmanr(pred, gold)[0])}


def pair_metrics(records: list[dict]) -> dict[str, float | None]:
    gold = [r["gold"] for r in records]
    out = {}
    for side, key in (("clean", "original_score"), ("adversarial", "perturbed_score")):
        pred = [r[key] for r in records]
        for metric, value in correlations(pred, gold).items():
            out[f"{metric}_{side}"] = value
        out[f"mean_abs_error_{side}"] = sum(abs(p - g) for p, g in zip(pred, gold)) / len(gold) if gold else None
    return out


def pair_evidence(records: list[dict]) -> dict:
    """metric -> per-pair Evidence (bench.scoring.stats) for the rows' CIs and paired tests: the attack rates as in
    the adversarial suite, the correlations and errors over the clean and adversarial pairs."""
    from bench.scoring.stats import Evidence, Sample

    gold = [r["gold"] for r in records]
    columns = {"gold": gold}
    for side, key in (("clean", "original_score"), ("adversarial", "perturbed_score")):
        columns[side] = [r[key] for r in records]
        columns[f"abs_error_{side}"] = [abs(r[key] - g) for r, g in zip(records, gold)]
    pairs = Sample([r["index"] for r in records], columns)
    out = dict(attack_evidence(records))
    for side in ("clean", "adversarial"):
        for metric in ("pearson", "spearman"):
            out[f"{metric}_{side}"] = Evidence(metric, pairs, (side, "gold"))
        out[f"mean_abs_error_{side}"] = Evidence("mean", pairs, (f"abs_error_{side}",), scale=1.0)
    return out


ROW_METRICS = ("attack_success_rate", "pearson_clean", "pearson_adversarial", "spearman_clean",
               "spearman_adversarial", "mean_abs_error_clean", "mean_abs_error_adversarial", "avg_queries",
               "words_perturbed_pct", "examples_per_s")


class AdvSTSSuite(Suite):
    name = "advsts"

    def recipe_names(self) -> tuple[str, ...]:
        return tuple(RECIPES)

    def labels(self) -> dict:
        return {"attack": {name: RECIPES.label(name) for name in RECIPES}}
    description = "AdvSTS: TextAttack recipes on STS-B / SICK-R pairs vs cosine similarity (ASR, Pearson)"
    version = 2  # 2: ASR definition recorded; BERT-Attack's K an option
    tasks = TASKS
    row_scoped = RECIPE_SCOPED_CONFIG
    options = (RECIPES_OPTION, QUERY_BUDGET_OPTION, BERT_ATTACK_CANDIDATES_OPTION, CONSTRAINTS_OPTION)

    def recipes(self, ctx: RunContext) -> list[str]:
        from suites.adversarial import chosen_recipes

        return chosen_recipes(self.run_protocol(ctx), ctx)

    def stored_config(self, cfg: dict, stored: dict) -> dict:
        from suites.adversarial import with_stored_builds

        return with_stored_builds(cfg, stored)

    def config(self, task: AdvSTSTask, ctx: RunContext) -> dict:
        from suites.adversarial import resource_identity

        cfg = super().config(task, ctx)
        recipes = self.recipes(ctx)
        parameters = recipe_parameters(recipes, ctx.options, ctx.profile)
        cfg.update(recipes=recipes, goal=task.rule.describe(), asr_definition=ASR_DEFINITION,
                   adversarial_set=ADVERSARIAL_SET, **constraints_config(ctx.options),
                   attack_resources=resource_identity(ctx.paths, recipe_roles(recipes, ctx.options.get("constraints"))))
        for name, keywords in RECIPE_PARAMETERS.items():  # enters the key only for cells that run the recipe
            for keyword, (option, _) in keywords.items():
                cfg[option] = parameters.get(name, {}).get(keyword)
        return cfg

    def run_task(self, task: AdvSTSTask, encoder, ctx: RunContext):
        from attacks.resources import Resources  # lazily: NLTK, textattack

        root = require(ctx.paths.data, task.dataset)
        s1, s2, gold = task.read(root, task.split).limit(ctx.limit).all_pairs()
        extra = task.extra(root)[:len(gold)] if task.extra else [None] * len(gold)
        resources = Resources(ctx.paths)
        resources.require(recipe_roles(self.recipes(ctx), ctx.options.get("constraints"), undeclared=()))
        resources.textattack()
        rows = []
        for recipe in self.recipes(ctx):
            records, provenance, out_dir = self.attack_recipe(task, recipe, (s1, s2, gold, extra), encoder,
                                                              resources, ctx)
            path = task.write(out_dir, records, recipe)
            values = {**attack_metrics(records), **pair_metrics(records)}
            provenance = json.dumps({**provenance, "adversarial_file": str(path.relative_to(ctx.paths.results))},
                                    sort_keys=True)
            evidence = pair_evidence(records)
            rows += [row(task, m, values[m], len(records), attack=recipe, resources=provenance,
                         evidence=evidence.get(m), logs=[ctx.paths.results / json.loads(provenance)["log"]])
                     for m in ROW_METRICS]
            ctx.log(f"  advsts {task.name} {recipe}: ASR {values['attack_success_rate']:.1f} (our rule), Pearson "
                    f"{_fmt(values['pearson_clean'])} -> {_fmt(values['pearson_adversarial'])}, Spearman "
                    f"{_fmt(values['spearman_clean'])} -> {_fmt(values['spearman_adversarial'])}, avg queries "
                    f"{_fmt(values['avg_queries'])}, words perturbed {_fmt(values['words_perturbed_pct'])}% "
                    f"(n={len(records)}); adversarial set: {path}")
        return rows

    def attack_recipe(self, task, recipe, data, encoder, resources, ctx):
        from attacks.regression import SimilarityWrapper, goal_function
        from bench.results.store import config_hash
        from bench.runner import cell_config
        from suites.adversarial import attack_logged

        s1, s2, gold, extra = data
        goal = goal_function(SimilarityWrapper(encoder, task.rule), task.rule, ctx.options.get("query_budget"),
                             ctx.batch_size)
        attack = build_attack(recipe, resources, goal, recipe_parameters([recipe], ctx.options, ctx.profile).get(recipe),
                              ctx.options.get("constraints"))
        cfg_hash = config_hash(cell_config(self, task, ctx))  # the cell's own hash
        run_dir = f"seed{ctx.seed}-{encoder.weights_sha256[:12]}-{cfg_hash[:8]}"
        path = ctx.paths.results / "attack_logs" / encoder.name / f"advsts-{task.name}" / recipe / f"{run_dir}.jsonl"
        identity = {"model": encoder.name, "suite": "advsts", "task": task.name, "recipe": recipe,
                    "weights_sha256": encoder.weights_sha256, "config_hash": cfg_hash, "n": len(gold)}
        records = attack_logged(
            ctx, path, identity, range(len(gold)), f"advsts {task.name} {recipe}",
            lambda i: attack_pair(attack, i, s1[i], s2[i], gold[i], extra[i], seed=ctx.seed * 1_000_003 + i),
            after=encoder.forget)  # embeddings of discarded candidates: keep memory flat on long runs
        provenance = {"served": {r["role"]: r["served"] or f"unavailable: {r['problem']}" for r in resources.status()},
                      "attack": repr(attack), "log": str(path.relative_to(ctx.paths.results))}
        out_dir = ctx.paths.results / "advsts" / encoder.name / recipe / run_dir / task.out_name
        return records, provenance, out_dir


def build_attack(recipe: str, resources, goal, parameters: dict | None = None, constraints: str | None = "paper"):
    """The adversarial suite's recipe with our goal, plus: only ``sentence2`` may change, and it may
    not copy words from ``sentence1`` (attacks/regression.py says why)."""
    from textattack.constraints.pre_transformation import InputColumnModification

    from attacks.recipes import recipe_attack
    from attacks.regression import no_copy_constraint

    attack = recipe_attack(recipe, resources, goal, constraints, parameters)
    # Attack reads these lists on every call, so constraints added after construction apply;
    # the cheap word check goes first, before the sentence-encoder checks.
    attack.pre_transformation_constraints.append(InputColumnModification(list(COLUMNS), {"sentence1"}))
    attack.constraints.insert(0, no_copy_constraint())
    return attack


def attack_pair(attack, index: int, s1: str, s2: str, gold: float, extra, seed: int) -> dict:
    """Attack one pair; the JSONL record (fields as attacks/log.py and attacks/metrics.py expect)."""
    import numpy as np
    import torch
    from textattack.shared.utils import words_from_text

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    start = time.perf_counter()
    result = attack.attack(OrderedDict(zip(COLUMNS, (s1, s2))), repr(float(gold)))
    kind = {"SuccessfulAttackResult": "successful", "FailedAttackResult": "failed"}[type(result).__name__]
    original, final = result.original_result.attacked_text, result.perturbed_result.attacked_text
    changed = sorted(original.all_words_diff(final))
    return {
        "index": index, "gold": float(gold), "extra": extra, "original": [s1, s2],
        "adversarial": [final._text_input[c] for c in COLUMNS], "perturbed_column": PERTURBED,
        "original_score": float(result.original_result.output), "perturbed_score": float(result.perturbed_result.output),
        "num_queries": int(result.perturbed_result.num_queries), "result_type": kind,
        "num_words": len(words_from_text(s2)), "words_changed": len(changed),
        "changed_words": [[i, original.words[i], final.words[i]] for i in changed],
        "wall_s": round(time.perf_counter() - start, 4),
    }


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.2f}"


SUITE = AdvSTSSuite()

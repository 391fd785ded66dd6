"""The tables and figures `bench report` makes. Adding one is one spec here; nothing else changes.

Row conventions are the suites' (bench/results/store.py Result): suite, task, split, metric, aggregation, attack.
Metric and task names of suites that are still moving (adversarial, advsts, anli) are spelled once,
in the constants below, so that a rename is a one-line change. Labels (STS-B, TextFooler, ...) are
the suites' own, read from the metadata the runs export (bench/results/metadata.py), never spelled here.
"""

from __future__ import annotations

from bench.protocols import protocol
from reports.figures import FigureSpec, Measure
from reports.paper import PaperRef
from reports.scale import DiffPanel, DivergencePanel, SeriesSpec
from reports.tables import Average, Block, Column, Summary, TableSpec

RE = "RobustEmbed"
# A paper table's columns, headline metric and aggregation, averages and recipes are its protocol's
# (bench/protocols.toml); their labels (STS-B, TextFooler, ...) come from the metadata the runs export.
STS, TRANSFER, TRANSFER_7 = protocol("robustembed-table1"), protocol("robustembed-table2"), protocol("senteval-transfer-7")
ATTACK, ADVSTS = protocol("robustembed-table3"), protocol("robustembed-table4")
STS_TASKS = STS.tasks
TRANSFER_TASKS = TRANSFER.tasks
TRANSFER_AVG_6 = TRANSFER.averaged  # the paper's average leaves TREC out
TRANSFER_AVG_7 = TRANSFER_7.averaged  # SimCSE's
ATTACK_DATASETS = ATTACK.tasks
RECIPES = ATTACK.recipes
ADVSTS_DATASETS = ADVSTS.tasks
# suites/adversarial.py and suites/advsts.py spell their metrics as attacks/metrics.py does.
ASR = "attack_success_rate"  # %, successes / (successes + failures), skipped excluded
ACC_REDUCTION, AVG_QUERIES = "accuracy_reduction", "avg_queries"
ATTACK_SETTINGS = ("profile", "limit", "runs", "query_budget", "victim", "constraints", "substitute_victim",
                   "victim_examples")
# Where a model has attack cells under several settings, Table 3 shows the paper's own first: fine-tuned
# victims, each recipe's own constraints; the caption says which setting its numbers come from.
ATTACK_PREFER = {"victim": ("finetune", "frozen"), "constraints": ("paper", "unified")}
SERVED = "served"  # where the attack suites record which resource served each role


def _columns(tasks) -> tuple[Column, ...]:
    return tuple(Column({"task": task}) for task in tasks)


def from_protocol(p, **rest) -> dict:
    """A table's suite, headline metric and aggregation, one column per task and its average, as protocol ``p``
    declares them; ``rest`` adds to or overrides them."""
    return {"suite": p.suite, "metric": p.headline_metric, "aggregation": p.aggregation or None,
            "columns": _columns(p.tasks), "averages": (Average("Avg.", p.averaged, paper_task="avg"),), **rest}


# The 1,000-step series checkpoints have MR cells only; they have their own figure against training steps.
SCALE_CHECKPOINTS = ("*-scale-step*", "the series scale-robustembed-vs-simcse (scale-robustembed-vs-simcse.md)")

ATTACK_BLOCKS = tuple(Block({"attack": recipe}) for recipe in RECIPES)
ADVSTS_TASKS = _columns(ADVSTS_DATASETS)

TABLES = (
    TableSpec(
        name="robustembed-table1", title="RobustEmbed Table 1: STS (Spearman ×100)",
        unit="Spearman correlation ×100 of cosine similarity", paper=PaperRef(RE, "Table 1"), paper_rows=True,
        **from_protocol(STS)),
    TableSpec(
        name="robustembed-table2", title="RobustEmbed Table 2: transfer tasks (accuracy)",
        unit="test accuracy ×100 of a classifier on frozen embeddings",
        # The paper's average leaves TREC out (6 tasks); the 7-task average is SimCSE's.
        paper=PaperRef(RE, "Table 2"), prefer={"mode": ("test", "fasttest")},
        settings=("profile", "limit", "mode"), paper_rows=True,
        **from_protocol(TRANSFER, averages=(Average("Avg. (6, no TREC)", TRANSFER_AVG_6, paper_task="avg"),
                                            Average("Avg. (7)", TRANSFER_AVG_7)))),
    # One victim mode per table, named in its title, so no column mixes two: frozen-encoder victims under
    # the unified constraints (the setting run on all seven datasets), then fine-tuned victims.
    TableSpec(
        name="robustembed-table3", title="RobustEmbed Table 3: attack success rate (%), frozen-encoder victims, "
                                         "unified constraints",
        unit="attack success rate % (successes / (successes + failures); skipped excluded) against a "
             "linear head on the frozen encoder",
        better="lower", blocks=ATTACK_BLOCKS, paper=PaperRef(RE, "Table 3"), settings=ATTACK_SETTINGS,
        prefer=ATTACK_PREFER, runs="run", resources_key=SERVED, paper_rows=True,
        config={"victim": "frozen", "constraints": "unified"}, standin="substitute_victim",
        block_major=True, elsewhere=(SCALE_CHECKPOINTS,), **from_protocol(ATTACK)),
    TableSpec(
        name="robustembed-table3-finetuned", title="RobustEmbed Table 3: attack success rate (%), fine-tuned victims",
        unit="attack success rate % (successes / (successes + failures); skipped excluded) against the "
             "encoder fine-tuned end to end with a linear head",
        better="lower", blocks=ATTACK_BLOCKS, paper=PaperRef(RE, "Table 3"), settings=ATTACK_SETTINGS,
        prefer=ATTACK_PREFER, runs="run", resources_key=SERVED, paper_rows=True,
        config={"victim": "finetune"}, standin="substitute_victim", block_major=True, **from_protocol(ATTACK)),
    TableSpec(
        name="robustembed-table4", title="RobustEmbed Table 4: AdvSTS attack success rate (%)",
        # suites/advsts.py ASR_DEFINITION: the paper defines no success rule for a regression target.
        unit="attack success rate % on STS pairs under our rule (|pred − gold| grows by a fifth of the "
             "gold range, sentence 2 perturbed only), not the paper's undefined one: compare with care",
        better="lower", blocks=ATTACK_BLOCKS, paper=PaperRef(RE, "Table 4"), settings=("profile", "limit", "query_budget"),
        resources_key=SERVED, paper_rows=True, block_major=True,
        **from_protocol(ADVSTS, aggregation=None)),  # every AdvSTS rate is one over all pairs: no filter
    TableSpec(
        name="robustembed-advsts-pearson", title="AdvSTS: Pearson ×100 on the adversarial pairs (RobustEmbed's "
                                                 "AdvSTS measure, Sec. 5.4; the paper prints no values)",
        suite="advsts", metric="pearson_adversarial",
        unit="Pearson correlation ×100 between cosine similarity and gold on the attacked pairs",
        columns=ADVSTS_TASKS, averages=(Average("Avg.", ADVSTS_DATASETS),), blocks=ATTACK_BLOCKS,
        settings=("profile", "limit", "query_budget"), resources_key=SERVED),
    TableSpec(
        name="vadvcse-table3", title="V-advCSE Table 3: ANLI accuracy", suite="anli", metric="accuracy",
        unit="accuracy ×100 of an NLI classifier fine-tuned on the encoder (three balanced classes: chance is 33.3)",
        # "All" is the unweighted mean of the rounds, as in the paper (the suite also writes a pooled row).
        columns=tuple(Column({"task": r, "split": split, **({"aggregation": "mean-of-rounds"} if r == "all" else {})},
                             label=f"{split} {{task}}")
                      for split in ("dev", "test") for r in ("r1", "r2", "r3", "all")),
        paper=PaperRef("V-advCSE", "Table 3"), decimals=1, paper_rows=True,
        settings=("profile", "limit", "eval_cap_per_round", "training_mix")),
)

# Ablations and the adversarial-training comparison: other tables' averages, one line per model.
STS_AVG = Summary("STS avg.", "robustembed-table1", "Avg.", "higher", paper_key=("sts", "avg", "spearman", ""))
TRANSFER_AVG = Summary("Transfer avg. (6)", "robustembed-table2", "Avg. (6, no TREC)", "higher",
                       paper_key=("transfer", "avg", "acc", ""))


def _asr_avg(recipe: str) -> Summary:
    return Summary("{block} ASR avg.", "robustembed-table3", "Avg.", "lower", block=recipe,
                   paper_key=("adversarial", "avg", ASR, recipe))


# One line per model: the averages of Tables 1-3 beside each other. It is not the paper's Table 7 (adversarially
# fine-tuned models) nor an ablation: the norm, λ and γ ablations of Tables 5, 6 and 8 are not run here, so no
# table is titled after them.
SUMMARY = dict(suite="", metric="", unit="averages of Tables 1-3 (see those tables for their settings)",
               show_recipe=True)
TABLES += (
    TableSpec(name="robustembed-averages", title="Averages of RobustEmbed's Tables 1-3 per model: STS, transfer and ASR",
              summaries=(STS_AVG, TRANSFER_AVG, _asr_avg("textfooler"), _asr_avg("textbugger"),
                         _asr_avg("bert-attack")), method=None, elsewhere=(SCALE_CHECKPOINTS,), **SUMMARY),
)

FIGURES = (
    FigureSpec(
        name="robustembed-figure2", title="RobustEmbed Figure 2: average queries vs accuracy reduction",
        suite="adversarial", point=("model", "attack"), connect="attack",
        x=Measure("accuracy reduction (points): original − under attack", (ACC_REDUCTION,)),
        y=Measure("average queries per attacked example", (AVG_QUERIES,)), where={"aggregation": "mean-of-runs"},
        paper=PaperRef(RE, "Figure 2")),
    FigureSpec(
        name="robustembed-figure3", title="RobustEmbed Figure 3: ℓ_align vs ℓ_uniform (STS-B)", suite="alignment",
        point=("model",), x=Measure("ℓ_uniform (lower is better)", ("uniform",)),
        y=Measure("ℓ_align (lower is better)", ("align",)), where={"aggregation": "mean"},
        paper=PaperRef(RE, "Figure 3")),
)

# The robustness card (reports/card.py): the headline rows per suite, (metric, aggregation, split), None = any.
# A suite not named here shows every row that has an interval.
CARD_HEADLINES = {
    "sts": ((STS.headline_metric, STS.aggregation, None), (STS.headline_metric, STS.average_aggregation, None)),
    "transfer": (("acc", None, "test"),),
    "alignment": (("align", "mean", None), ("uniform", "mean", None)),
    "adversarial": ((ASR, "mean-of-runs", None), ("accuracy_under_attack", "mean-of-runs", None),
                    (AVG_QUERIES, "mean-of-runs", None), ("words_perturbed_pct", "mean-of-runs", None),
                    ("clean_accuracy", "all", None)),
    "advsts": ((ASR, "all", None), ("pearson_adversarial", "all", None), ("spearman_adversarial", "all", None)),
    "anli": (("accuracy", "all", None),),
    "perturbation": (("displacement", "ratio-of-means", None), ("control_displacement", "ratio-of-means", None),
                     ("vs_control", "ratio-of-means", None)),
}
# Config keys the card prints beside each row (those present in the cell's configuration).
CARD_SETTINGS = ("profile", "limit", "scorer_version", "mode", "victim", "constraints", "recipes", "runs",
                 "query_budget", "bert_attack_candidates", "substitute_victim", "victim_examples", "victim_task",
                 "victim_training", "training_mix", "eval_cap_per_round")

# The other seed papers' tables, one record each: (file stem, paper, table, layout). A layout is what a
# kind of table shows (suite, metric, columns, averages, settings); the paper's own rows come from
# reports/paper_values.csv under (paper, table), listed as reference lines beside ours.
STS_LAYOUT = dict(
    title="STS (Spearman ×100)", suite="sts", metric="spearman", aggregation="all",
    unit="Spearman correlation ×100 of cosine similarity", columns=_columns(STS_TASKS),
    averages=(Average("Avg.", STS_TASKS, paper_task="avg"),))
TRANSFER7_LAYOUT = dict(
    title="transfer tasks (accuracy)", suite="transfer", metric="acc",
    unit="test accuracy ×100 of a classifier on frozen embeddings", columns=_columns(TRANSFER_TASKS),
    averages=(Average("Avg. (7)", TRANSFER_AVG_7, paper_task="avg"),), prefer={"mode": ("test", "fasttest")},
    settings=("profile", "limit", "mode"))
# DCL Table 3: NLI/CoLA victims fine-tuned on the encoder, clean and under PWWS (OpenAttack in the paper).
DCL_COLUMNS = (Column({"task": "cola"}, label="CoLA"), Column({"task": "snli"}, label="SNLI"))
DCL_SETTINGS = ATTACK_SETTINGS
DCL_ATTACKED_LAYOUT = dict(
    title="accuracy under PWWS (%)", suite="adversarial", metric="accuracy_under_attack", aggregation="mean-of-runs",
    unit="accuracy % of the fine-tuned victim under the PWWS attack (failed attacks / all examples)",
    columns=DCL_COLUMNS, blocks=(Block({"attack": "pwws"}),), runs="run",
    settings=DCL_SETTINGS, prefer=ATTACK_PREFER, resources_key=SERVED, decimals=1, standin="substitute_victim")
DCL_CLEAN_LAYOUT = dict(
    title="clean accuracy (%), the Normal rows", suite="adversarial", metric="clean_accuracy",
    aggregation="mean-of-runs", unit="accuracy % of the fine-tuned victim on the attack set, no attack",
    columns=DCL_COLUMNS, runs="run",
    settings=DCL_SETTINGS, prefer=ATTACK_PREFER, decimals=1, standin="substitute_victim")

PAPER_TABLES = (
    ("vadvcse-table1", "V-advCSE", "Table 1", STS_LAYOUT),
    ("vadvcse-table2", "V-advCSE", "Table 2", TRANSFER7_LAYOUT),
    ("adcse-table1", "AdCSE", "Table 1", STS_LAYOUT),
    ("l2pcsr-table1", "L2P-CSR", "Table 1", STS_LAYOUT),
    ("l2pcsr-table2", "L2P-CSR", "Table 2", TRANSFER7_LAYOUT),
    ("dcl-table3", "DCL", "Table 3", DCL_ATTACKED_LAYOUT),
    ("dcl-table3-normal", "DCL", "Table 3", DCL_CLEAN_LAYOUT),
)


def paper_table(name: str, paper: str, table: str, layout: dict) -> TableSpec:
    title, fields = layout["title"], {k: v for k, v in layout.items() if k != "title"}
    return TableSpec(name=name, title=f"{paper} {table}: {title}", paper=PaperRef(paper, table), paper_rows=True,
                     **fields)


TABLES += tuple(paper_table(*record) for record in PAPER_TABLES)

# Series against training steps (reports/scale.py): RobustEmbed − SimCSE at each kept step of the 1,000-step
# runs from minilm-mlm, on the settings the checkpoints are attacked under (MR, frozen victim, unified constraints).
SCALE_ATTACK = {"victim": "frozen", "constraints": "unified"}
SERIES = (
    SeriesSpec(
        name="scale-robustembed-vs-simcse", title="RobustEmbed − SimCSE from minilm-mlm against training steps",
        a="simcse-minilm-mlm-scale-step{step}", b="robustembed-minilm-mlm-scale-step{step}", steps=(250, 500, 1000),
        panels=(DiffPanel("ASR TextFooler, B − A (points)", "adversarial", "mr", ASR, "mean-of-runs", "textfooler",
                          SCALE_ATTACK),
                DiffPanel("ASR PWWS, B − A (points)", "adversarial", "mr", ASR, "mean-of-runs", "pwws", SCALE_ATTACK),
                DiffPanel("attack-free displacement, B − A", "perturbation", "mr-attacks", "displacement",
                          "ratio-of-means"),
                DiffPanel("STS avg. Spearman, B − A (points)", "sts", "avg", STS.headline_metric,
                          STS.average_aggregation),
                DivergencePanel("weight distance ratio ‖θ_B − θ_A‖ / ‖θ_A − θ_0‖", "weights"),
                DivergencePanel("outcome agreement (MR, frozen, unified)", "agreement", recipes=("textfooler", "pwws"),
                                where={"victim": "frozen", "constraints": "unified"}))),
)

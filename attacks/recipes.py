"""The five attack recipes of RobustEmbed Table 3, each a composition of goal, constraints,
transformation and search, with TextAttack 0.3.11's published parameters
(textattack/attack_recipes/*.py). RobustEmbed ran "the TextAttack framework" without naming a version,
so where versions differ (BERT-Attack's candidates) the choice is an option, recorded in every row.

Every resource-backed piece (word embedding, sentence encoder, POS tagger, masked LM, homoglyphs)
comes from a ``Resources`` object, which serves the real resource where it is reachable and an
offline stand-in otherwise and records which one it used (``Resources.served()``).
TextAttack is imported inside the builders, after ``Resources.textattack()`` has prepared it.

A builder takes (resources, goal_function) and returns a ``textattack.Attack``.
"""

from __future__ import annotations


from attacks.stopwords import TEXTFOOLER_STOPWORDS
from bench.plugins import Option, Registry

# NLI inputs: only the hypothesis is perturbed (TextFooler's InputColumnModification).
NLI_COLUMNS = (["premise", "hypothesis"], {"premise"})


def textfooler(res, goal):
    """Jin et al. 2020. Counter-fitted synonyms, POS and USE-window checks, deletion-ranked greedy."""
    from textattack import Attack
    from textattack.constraints.pre_transformation import (
        InputColumnModification, RepeatModification, StopwordModification)
    from textattack.search_methods import GreedyWordSwapWIR

    constraints = [
        RepeatModification(),
        StopwordModification(stopwords=set(TEXTFOOLER_STOPWORDS)),
        InputColumnModification(*NLI_COLUMNS),
        res.word_embedding_distance(min_cos_sim=0.5),  # the released code's 0.5, not the paper's 0.7
        res.part_of_speech(allow_verb_noun_swap=True),
        # 1 - 0.5/pi: TextFooler's code forgets to divide the angle by pi (TextAttack's note).
        res.use(threshold=0.840845057, metric="angular", window_size=15,
                compare_against_original=False, skip_text_shorter_than_window=True),
    ]
    return Attack(goal, constraints, res.word_swap_embedding(max_candidates=50),
                  GreedyWordSwapWIR(wir_method="delete"))


def textbugger(res, goal):
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
    constraints = [RepeatModification(), StopwordModification(),
                   res.use(threshold=0.8, metric="angular", window_size=None,
                           compare_against_original=True, skip_text_shorter_than_window=False)]
    return Attack(goal, constraints, transformation, GreedyWordSwapWIR(wir_method="delete"))


def pwws(res, goal):
    """Ren et al. 2019. WordNet synonyms ranked by probability-weighted word saliency."""
    from textattack import Attack
    from textattack.constraints.pre_transformation import RepeatModification, StopwordModification
    from textattack.search_methods import GreedyWordSwapWIR

    return Attack(goal, [RepeatModification(), StopwordModification()], res.word_swap_wordnet(),
                  GreedyWordSwapWIR(wir_method="weighted-saliency"))


def bae(res, goal):
    """Garg & Ramakrishnan 2020, BAE-R. Masked-LM replacements, POS and USE (cosine 0.936)."""
    from textattack import Attack
    from textattack.constraints.pre_transformation import RepeatModification, StopwordModification
    from textattack.search_methods import GreedyWordSwapWIR

    constraints = [
        RepeatModification(), StopwordModification(),
        res.part_of_speech(allow_verb_noun_swap=True),
        res.use(threshold=0.936338023, metric="cosine", window_size=15,
                compare_against_original=True, skip_text_shorter_than_window=True),
    ]
    return Attack(goal, constraints,
                  res.word_swap_masked_lm(method="bae", max_candidates=50, min_confidence=0.0),
                  GreedyWordSwapWIR(wir_method="delete"))


def bert_attack(res, goal, max_candidates: int = 8):
    """Li et al. 2020. Masked-LM subword candidates, <= 40% words. ``max_candidates`` is the paper's K:
    48 in the BERT-Attack paper and older TextAttack, 8 in TextAttack 0.3.11's recipe. RobustEmbed does
    not say which it ran; the option ``bert_attack_candidates`` sets it (48 on the paper profile)."""
    from textattack import Attack
    from textattack.constraints.overlap import MaxWordsPerturbed
    from textattack.constraints.pre_transformation import RepeatModification, StopwordModification
    from textattack.search_methods import GreedyWordSwapWIR

    constraints = [
        RepeatModification(), StopwordModification(),
        MaxWordsPerturbed(max_percent=0.4),
        res.use(threshold=0.2, metric="cosine", window_size=None,
                compare_against_original=True, skip_text_shorter_than_window=False),
    ]
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


def recipe_parameters(recipes, options: dict, profile: str) -> dict[str, dict]:
    """recipe -> {builder keyword: value} for the chosen recipes, the given options or the profile's defaults."""
    return {name: {kw: options.get(opt) or defaults[profile] for kw, (opt, defaults) in RECIPE_PARAMETERS[name].items()}
            for name in recipes if name in RECIPE_PARAMETERS}


def build_attack(name: str, res, model_wrapper, query_budget: int | None = None, batch_size: int = 32,
                 parameters: dict | None = None):
    """The named recipe against ``model_wrapper``, with an untargeted classification goal; ``parameters``
    are the recipe's keywords (``recipe_parameters``)."""
    res.textattack()  # prepares NLTK data and the cache dir, then imports textattack
    from textattack.goal_functions import UntargetedClassification

    recipe = RECIPES.load(name)
    goal = UntargetedClassification(model_wrapper, model_batch_size=batch_size,
                                    query_budget=float("inf") if query_budget is None else query_budget)
    return recipe(res, goal, **(parameters or {}))

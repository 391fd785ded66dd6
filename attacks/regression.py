"""A TextAttack goal function for regression over a sentence pair (AdvSTS, RobustEmbed Table 4).

The victim's prediction for a pair is the encoder's cosine similarity mapped to the gold scale:
``pred = lo + (hi - lo) * clip(cos, 0, 1)`` on the task's own gold scale (STS-B 0-5, SICK-R 1-5; the
suite gives each task its rule); negative cosines mean "unrelated", so they map to the bottom of the scale.

Success (``SuccessRule``): the attack succeeds when the absolute error grows by at least
``margin`` over the clean pair's error, ``|pred_adv - gold| >= |pred_clean - gold| + margin``.
The search maximises ``|pred - gold| - |pred_clean - gold|``; no example is skipped (a clean error
can always, in principle, grow). Only ``sentence2`` is perturbed (as TextFooler perturbs only the
NLI hypothesis), and a substitution may not bring in a word of ``sentence1`` that ``sentence2`` did
not have (``NoCopyFromSentence1``): copying words across makes the pair more similar for real, so the
gold score would no longer hold (seen on STS-B: "cutting tofu" -> "cutting onions"). The suite adds
both constraints to every recipe.

TextAttack is imported inside ``goal_function()``, after the caller prepared it (``Resources.textattack()``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

COLUMNS = ("sentence1", "sentence2")
PERTURBED = "sentence2"


@dataclass(frozen=True)
class SuccessRule:
    margin: float = 1.0  # on the 0-5 gold scale: a fifth of the range
    lo: float = 0.0
    hi: float = 5.0

    def to_scale(self, cosine) -> np.ndarray:
        return self.lo + (self.hi - self.lo) * np.clip(np.asarray(cosine, dtype=np.float64), 0.0, 1.0)

    def score(self, pred: float, gold: float, clean_pred: float) -> float:
        """How much the attack increased the error (the search maximises it)."""
        return abs(pred - gold) - abs(clean_pred - gold)

    def is_success(self, pred: float, gold: float, clean_pred: float) -> bool:
        return self.score(pred, gold, clean_pred) >= self.margin - 1e-9

    def describe(self) -> dict:
        return {"success": "|pred_adv - gold| >= |pred_clean - gold| + margin",
                "score_map": "pred = lo + (hi - lo) * clip(cosine, 0, 1)", "perturbed": PERTURBED,
                "skipped": "none", "no_copy_from_sentence1": True, **asdict(self)}


class SimilarityWrapper:
    """TextAttack model wrapper: (sentence1, sentence2) pairs -> predicted scores on the gold scale."""

    def __init__(self, encoder, rule: SuccessRule):
        self.encoder, self.rule = encoder, rule
        self.model = encoder.model  # TextAttack inspects model_wrapper.model

    def __call__(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        if not pairs:
            return np.zeros(0)
        a = self.encoder.encode([p[0] for p in pairs])
        b = self.encoder.encode([p[1] for p in pairs])
        cos = (a * b).sum(1) / np.clip(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12, None)
        return self.rule.to_scale(cos)


_CLASSES: dict = {}


def goal_function(model_wrapper, rule: SuccessRule, query_budget: int | None = None, batch_size: int = 32):
    """A ``RegressionGoal`` (TextAttack GoalFunction). Pass the gold score as a string to ``Attack.attack``
    (TextAttack 0.3.11 asserts int or str ground truth)."""
    if not _CLASSES:
        _define_classes()
    return _CLASSES["goal"](model_wrapper, rule, query_budget=float("inf") if query_budget is None else query_budget,
                            model_batch_size=batch_size)


def no_copy_constraint():
    """TextAttack constraint: the perturbed sentence2 gains no word of sentence1 it lacked."""
    if not _CLASSES:
        _define_classes()
    return _CLASSES["no_copy"]()


def copied_words(sentence1: str, original2: str, perturbed2: str) -> set[str]:
    """Words of sentence1 that the perturbation brought into sentence2 (lower-cased)."""
    from textattack.shared.utils import words_from_text

    def words(text):
        return {w.lower() for w in words_from_text(text)}

    return (words(perturbed2) - words(original2)) & (words(sentence1) - words(original2))


def _define_classes() -> None:
    """TextAttack's classes subclassed on first use, so importing this module does not import TextAttack."""
    result = _result_class()
    _CLASSES.update(goal=_goal_class(result), result=result, no_copy=_no_copy_class())


def _no_copy_class():
    from textattack.constraints import Constraint

    class NoCopyFromSentence1(Constraint):
        def __init__(self):
            super().__init__(compare_against_original=True)

        def _check_constraint(self, transformed_text, reference_text):
            original = reference_text._text_input
            return not copied_words(original[COLUMNS[0]], original[PERTURBED], transformed_text._text_input[PERTURBED])

    return NoCopyFromSentence1


def _result_class():
    from textattack.goal_function_results import GoalFunctionResult

    class RegressionResult(GoalFunctionResult):
        def __init__(self, *args):
            super().__init__(*args, goal_function_result_type="Regression")

        def get_text_color_input(self):
            return "red"

        def get_text_color_perturbed(self):
            return "blue"

        def get_colored_output(self, color_method=None):
            return f"{float(self.output):.2f}"

    return RegressionResult


def _goal_class(result_class):
    import torch
    from textattack.goal_functions import GoalFunction

    class RegressionGoal(GoalFunction):
        """Maximise the growth of |pred - gold|; complete once it reaches the rule's margin."""

        def __init__(self, model_wrapper, rule: SuccessRule, **kwargs):
            super().__init__(model_wrapper, allow_skip=False, **kwargs)
            self.rule = rule
            self.gold = self.clean_pred = None

        def init_attack_example(self, attacked_text, ground_truth_output):
            self.gold = float(ground_truth_output)
            self.clean_pred = float(self._call_model([attacked_text])[0])  # cached: no extra forward later
            return super().init_attack_example(attacked_text, ground_truth_output)

        def _process_model_outputs(self, inputs, outputs):
            values = outputs.reshape(-1).tolist() if isinstance(outputs, torch.Tensor) else list(np.ravel(outputs))
            if len(values) != len(inputs):
                raise ValueError(f"Model returned {len(values)} scores for {len(inputs)} inputs")
            return [float(v) for v in values]

        def _is_goal_complete(self, model_output, attacked_text):
            return self.rule.is_success(float(model_output), self.gold, self.clean_pred)

        def _get_score(self, model_output, attacked_text):
            return self.rule.score(float(model_output), self.gold, self.clean_pred)

        def _get_displayed_output(self, raw_output):
            return float(raw_output)

        def _goal_function_result_type(self):
            return result_class

        def extra_repr_keys(self):
            return super().extra_repr_keys() + ["rule"]

    return RegressionGoal

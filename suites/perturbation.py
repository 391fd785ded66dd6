"""How far a small edit of the input moves the embedding, without a victim classifier (docs/perturbation.md).

The sentences are a frozen set (suites/data/perturbations-v<N>.jsonl, checked against the sha256 its
task declares; built from the committed attack logs by ``python -m attacks.perturbation_set``): each
original x with the successful attack perturbations x' found for it, each with a control x~, the
original with the same number of words swapped for random words of the set's word pool.

Per original x (the unit every interval resamples and every paired comparison matches), over the
first ``per_original`` of its perturbations (the set orders them by a hash of their text):
- d(x, x')  = mean of 1 - cos(f(x), f(x')), and d(x, x~) the same for their controls;
- d(x, rand) = mean of 1 - cos(f(x), f(y)) over ``partners`` other originals y drawn with ``seed``.

Rows (lower displacement = the embedding moves less; values not x100):
- ``displacement`` (main) = mean d(x, x') / mean d(x, rand): the move an attack edit causes, in units of
  the encoder's distance between unrelated sentences of the pool, so an anisotropic encoder (every cosine
  near 1) is not rewarded for its small raw distances;
- ``control_displacement`` = the same for the random swaps; ``vs_control`` = mean d(x, x') / mean d(x, x~);
- ``cos_perturbed``, ``cos_control``, ``cos_unrelated``: the raw mean cosines.
Ratios take numerator and denominator over the same resampled originals (bench.scoring.stats.ratio_of_means).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.errors import BenchError
from bench.scoring.metrics import cosine
from bench.scoring.stats import Evidence, Sample
from suites.base import RunContext, Suite, Task, row

DATA_DIR = Path(__file__).resolve().parent / "data"
FORMAT = "bench-perturbations/1"


@dataclass(frozen=True, kw_only=True)
class PerturbationTask(Task):
    file: str  # under suites/data/
    sha256: str  # of the file's bytes: a changed set is a new file, a new hash and a new task version
    per_original: int = 1  # perturbations used per original (the set's first ones by hash): cost vs. noise
    partners: int = 8  # unrelated originals per original for the encoder's typical distance
    seed: int = 0  # draws the partners

    def settings(self) -> dict:
        return {"perturbation_set": {"file": self.file, "sha256": self.sha256}, "per_original": self.per_original,
                "partners": self.partners, "partner_seed": self.seed}


def load_set(path: Path, sha256: str) -> tuple[dict, list[dict]]:
    """The frozen set's header and originals, after checking the file's sha256."""
    fix = (f"Restore it with `git checkout -- suites/data/{path.name}`, or re-derive it with "
           f"`python -m attacks.perturbation_set --from suites/data/{path.name}` (a new set is a new "
           f"version: --version N, declared with its sha256 in suites/perturbation.py)")
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise BenchError(f"The frozen perturbation set {path} cannot be read ({exc.strerror}). {fix}") from None
    digest = hashlib.sha256(blob).hexdigest()
    if digest != sha256:
        raise BenchError(f"The frozen perturbation set {path} has sha256 {digest}, not the {sha256} its task "
                         f"declares: the file was changed. {fix}")
    lines = [json.loads(line) for line in blob.decode("utf-8").splitlines()]
    if not lines or lines[0].get("header", {}).get("format") != FORMAT:
        raise BenchError(f"{path} is not a {FORMAT} file. {fix}")
    return lines[0]["header"], lines[1:]


def partner_indices(n: int, partners: int, seed: int) -> np.ndarray:
    """(n, k) indices of other originals: row i never holds i (k = min(partners, n - 1))."""
    k = min(partners, n - 1)
    rng = np.random.default_rng(seed)
    picks = np.stack([rng.choice(n - 1, size=k, replace=False) for _ in range(n)]) if k > 0 else np.zeros((n, 0), int)
    return picks + (picks >= np.arange(n)[:, None])  # skip the original itself


def mean_distance(encode, left: list[str], right: list[str], groups: np.ndarray, n: int) -> np.ndarray:
    """Per original: the mean of 1 - cos over its (left, right) pairs; ``groups`` says whose pair each is."""
    dist = 1.0 - cosine(encode(left), encode(right)) if left else np.zeros(0)
    total = np.bincount(groups, weights=dist, minlength=n)
    count = np.bincount(groups, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def displacement_sample(originals: list[dict], encode, task: PerturbationTask) -> Sample:
    """Per original: d(x, x'), d(x, x~), d(x, rand) and the matching cosines."""
    n = len(originals)
    texts = [o["original"] for o in originals]
    chosen = [(i, p) for i, o in enumerate(originals) for p in o["perturbations"][: task.per_original]]
    groups = np.asarray([i for i, _ in chosen], dtype=np.int64)
    encode(list(dict.fromkeys(texts + [p["text"] for _, p in chosen] + [p["control"] for _, p in chosen])))
    d_pert = mean_distance(encode, [texts[i] for i, _ in chosen], [p["text"] for _, p in chosen], groups, n)
    d_ctrl = mean_distance(encode, [texts[i] for i, _ in chosen], [p["control"] for _, p in chosen], groups, n)
    partners = partner_indices(n, task.partners, task.seed)
    d_rand = mean_distance(encode, [texts[i] for i in np.repeat(np.arange(n), partners.shape[1])],
                           [texts[j] for j in partners.ravel()], np.repeat(np.arange(n), partners.shape[1]), n)
    return Sample([o["id"] for o in originals], {"d_pert": d_pert, "d_ctrl": d_ctrl, "d_rand": d_rand,
                                                 "cos_pert": 1.0 - d_pert, "cos_ctrl": 1.0 - d_ctrl,
                                                 "cos_rand": 1.0 - d_rand})


# metric -> (statistic, columns); every row is over the same originals
ROWS = {
    "displacement": ("ratio_of_means", ("d_pert", "d_rand")),
    "control_displacement": ("ratio_of_means", ("d_ctrl", "d_rand")),
    "vs_control": ("ratio_of_means", ("d_pert", "d_ctrl")),
    "cos_perturbed": ("mean", ("cos_pert",)),
    "cos_control": ("mean", ("cos_ctrl",)),
    "cos_unrelated": ("mean", ("cos_rand",)),
}


class PerturbationSuite(Suite):
    name = "perturbation"
    label = "Perturbation"
    description = ("Embedding displacement under the attacks' successful edits vs. random word swaps of equal "
                   "size, in units of the distance between unrelated sentences (no victim; lower moves less)")
    tasks = (PerturbationTask(suite="perturbation", name="mr-attacks", label="MR attack edits", dataset="",
                              split="v1", main_metric="displacement", main_aggregation="ratio-of-means",
                              description="successful perturbations in the attack logs on MR (any victim, any "
                                          "recipe), frozen as suites/data/perturbations-v1.jsonl",
                              file="perturbations-v1.jsonl",
                              sha256="1bde2ab6a8c7d1d2fb75a8b543fb3c7823b6c7af521e74ea6c2c48869bed37e6"),)

    def config(self, task, ctx: RunContext) -> dict:
        return {**super().config(task, ctx), **task.settings()}

    def run_task(self, task, encoder, ctx: RunContext):
        _, originals = load_set(DATA_DIR / task.file, task.sha256)
        originals = originals[: ctx.limit] if ctx.limit else originals
        if len(originals) < 2:
            raise BenchError(f"Task {task.name} needs at least 2 originals (it has {len(originals)}); raise --limit.")
        sample = displacement_sample(originals, encoder.encode, task)
        return [row(task, metric, Evidence(stat, sample, cols, scale=1.0).point(), len(sample),
                    aggregation="ratio-of-means" if stat == "ratio_of_means" else "mean",
                    evidence=Evidence(stat, sample, cols, scale=1.0))
                for metric, (stat, cols) in ROWS.items()]


SUITE = PerturbationSuite()

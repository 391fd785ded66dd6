"""SentEval's logistic-regression classifier on frozen embeddings, reimplemented.

Follows facebookresearch/SentEval ``senteval/tools/classifier.py`` (PyTorchClassifier, MLP with
nhid=0) and ``senteval/tools/validation.py`` (InnerKFoldClassifier, KFoldClassifier,
SplitClassifier), the code behind the transfer numbers of SimCSE, RobustEmbed and V-advCSE.

Why torch and not scikit-learn: those numbers come from SentEval's PyTorch classifier
(``usepytorch=True``): minibatch Adam/RMSprop with coupled L2 weight decay and early stopping on
a validation split. scikit-learn's LogisticRegression solves to the optimum on another grid and
gives other numbers (SentEval issue #69).

Details kept from SentEval:
- one linear layer, initialised by ``nn.Linear`` right after ``torch.manual_seed(seed)``;
- optimisers with torch defaults (adam lr 1e-3; rmsprop lr 1e-2, alpha 0.99), weight decay = the
  L2 penalty on weight and bias;
- training in rounds of ``epoch_size`` passes, each over a fresh permutation from
  ``np.random`` seeded with ``seed`` per classifier; after each round the validation accuracy
  decides: a strictly better round is kept, and the run stops once ``tenacity + 1`` rounds failed to
  improve (the counter never resets) or ``nepoch`` exceeds ``max_epoch`` (200);
- ``validation_split=0.05`` takes the first 5 % of a permutation drawn from that same stream;
- L2 grid ``10**t, t = -5..-2``; grid scores are rounded to 2 decimals and the first best wins;
  per-fold accuracies are rounded to 2 decimals before averaging.

Open choice, recorded: the loss is the *mean* cross-entropy over a batch. SentEval sets
``loss_fn.size_average = False`` after construction, which PyTorch >= 0.4.1 ignores, so the mean is
what produced the published (SimCSE-era) numbers.

Speed without changing the maths: the fits of one grid differ only in their weight decay (same
data, same initialisation, same permutations), so they are trained together as one
``(d, R, C)`` weight block; optimiser state is element-wise, so this equals R separate runs.
Gradients are the closed-form softmax-regression ones (checked against autograd in the tests).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

from bench.errors import BenchError

SENTEVAL_SEED = 1111  # params.seed default in SentEval; classifier seed = SENTEVAL_SEED + run seed
L2_GRID = tuple(10.0 ** t for t in range(-5, -1))  # validation.py, usepytorch=True
VALIDATION_SPLIT = 0.05  # KFold/InnerKFold final fit: classifier.fit(..., validation_split=0.05)


@dataclass(frozen=True)
class ClassifierConfig:
    """One of SentEval's published classifier configurations (SimCSE evaluation.py)."""

    kfold: int
    optim: str
    batch_size: int
    tenacity: int
    epoch_size: int
    max_epoch: int = 200
    nhid: int = 0  # 0 = logistic regression; the only setting the papers use

    def as_config(self) -> dict:
        return dict(self.__dict__)


MODES = {
    "test": ClassifierConfig(kfold=10, optim="adam", batch_size=64, tenacity=5, epoch_size=4),
    "fasttest": ClassifierConfig(kfold=5, optim="rmsprop", batch_size=128, tenacity=3, epoch_size=2),
}


def classifier_config(mode: str) -> ClassifierConfig:
    if mode not in MODES:
        raise BenchError(f"Unknown transfer mode '{mode}'. Use --mode {' or --mode '.join(MODES)}.")
    return MODES[mode]


# --- optimisers (torch.optim's update rules, element-wise so the grid can share tensors) ----------

class Adam:
    """torch.optim.Adam defaults (no amsgrad); weight decay added to the gradient, as torch does."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        import torch

        self.lr, self.betas, self.eps, self.t = lr, betas, eps, 0
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]

    def step(self, params, grads, weight_decay):
        self.t += 1
        b1, b2 = self.betas
        c1, c2 = 1 - b1 ** self.t, math.sqrt(1 - b2 ** self.t)
        for p, g, m, v in zip(params, grads, self.m, self.v):
            g = g.add(p * weight_decay)
            m.lerp_(g, 1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            p.addcdiv_(m, (v.sqrt() / c2).add_(self.eps), value=-self.lr / c1)

    def keep(self, index):
        self.m = [m[:, index].contiguous() for m in self.m]
        self.v = [v[:, index].contiguous() for v in self.v]


class RMSprop:
    """torch.optim.RMSprop defaults (alpha 0.99, no momentum, not centred)."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8):
        import torch

        self.lr, self.alpha, self.eps = lr, alpha, eps
        self.sq = [torch.zeros_like(p) for p in params]

    def step(self, params, grads, weight_decay):
        for p, g, sq in zip(params, grads, self.sq):
            g = g.add(p * weight_decay)
            sq.mul_(self.alpha).addcmul_(g, g, value=1 - self.alpha)
            p.addcdiv_(g, sq.sqrt().add_(self.eps), value=-self.lr)

    def keep(self, index):
        self.sq = [s[:, index].contiguous() for s in self.sq]


OPTIMISERS = {"adam": Adam, "rmsprop": RMSprop}


@contextmanager
def single_thread():
    """Tiny matrices: one thread is fastest, and the machine is shared."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# --- one (grid of) logistic regression(s) --------------------------------------------------------

@dataclass
class LinearModels:
    """R linear classifiers: weight (d, R, C), bias (1, R, C)."""

    weight: object
    bias: object

    def logits(self, X):
        import torch

        X = torch.as_tensor(X, dtype=torch.float32)
        d, r, c = self.weight.shape
        return (X @ self.weight.reshape(d, r * c)).view(len(X), r, c) + self.bias

    def predict(self, X) -> np.ndarray:
        """(n, R) predicted classes."""
        return self.logits(X).argmax(-1).numpy()

    def accuracy(self, X, y) -> np.ndarray:
        """(R,) fraction correct."""
        return (self.predict(X) == np.asarray(y)[:, None]).mean(0)


def fit(X: np.ndarray, y: np.ndarray, regs, config: ClassifierConfig, nclasses: int, seed: int,
        validation: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, LinearModels]:
    """SentEval's ``MLP(...).fit`` for each L2 penalty in ``regs``: (best validation accuracy, models)."""
    import torch

    if config.nhid != 0:
        raise BenchError("Only logistic regression (nhid 0) is implemented, as the papers use.")
    rng = np.random.RandomState(seed)  # SentEval: np.random.seed(seed) in the classifier's constructor
    X, y = np.asarray(X, dtype=np.float32), np.asarray(y, dtype=np.int64)
    if validation is None:
        perm = rng.permutation(len(X))
        cut = int(VALIDATION_SPLIT * len(X))
        if cut == 0:
            raise BenchError(f"{len(X)} training examples are too few for SentEval's 5% validation split; "
                             f"use a larger --limit (at least 20 per fit).")
        validation = (X[perm[:cut]], y[perm[:cut]])
        X, y = X[perm[cut:]], y[perm[cut:]]
    n, d = X.shape
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        init = torch.nn.Linear(d, nclasses)
    regs = list(regs)
    # Weight and bias as one (d + 1, R, C) block against inputs with a constant 1 appended: the same
    # model and the same decay on both (SentEval decays the bias too), with half the optimiser calls.
    theta = torch.cat([init.weight.detach().T, init.bias.detach().view(1, -1)]).unsqueeze(1)
    theta = theta.repeat(1, len(regs), 1).contiguous()
    decay = torch.tensor(regs, dtype=torch.float32).view(1, -1, 1)
    optimiser = OPTIMISERS[config.optim]([theta])
    Xt = torch.from_numpy(np.c_[X, np.ones(n, dtype=np.float32)])
    onehot = torch.nn.functional.one_hot(torch.from_numpy(y), nclasses).float().unsqueeze(1)

    best_acc, best = _train_columns(theta, decay, optimiser, (Xt, onehot), validation, config, rng, nclasses)
    return best_acc, LinearModels(best[:d], best[d:])


def _train_columns(theta, decay, optimiser, train, validation, config: ClassifierConfig, rng, nclasses: int):
    """Train every penalty's column of ``theta`` (d + 1, R, C) in step, each until ``config.tenacity``
    validations in a row bring no gain (SentEval's early stopping) or ``config.max_epoch``; returns (best
    validation accuracy per penalty, the (d + 1, R, C) block of each penalty's best weights)."""
    import torch

    Xt, onehot = train
    Xdev, ydev = validation
    n, d = Xt.shape[0], Xt.shape[1] - 1
    regs = theta.shape[1]
    active = np.arange(regs)  # original grid index of each trained column
    best_acc = np.full(regs, -1.0)
    best = theta.clone()
    fails = np.zeros(regs, dtype=int)
    nepoch = 0
    while active.size and nepoch <= config.max_epoch:
        for _ in range(config.epoch_size):
            perm = torch.from_numpy(rng.permutation(n))
            for start in range(0, n, config.batch_size):
                idx = perm[start:start + config.batch_size]
                xb = Xt[idx]
                logits = (xb @ theta.view(d + 1, -1)).view(len(idx), len(active), nclasses)
                grad = (torch.softmax(logits, -1) - onehot[idx]).div_(len(idx))
                optimiser.step([theta], [(xb.T @ grad.view(len(idx), -1)).view_as(theta)], decay)
        nepoch += config.epoch_size
        acc = LinearModels(theta[:d], theta[d:]).accuracy(Xdev, ydev)
        better = acc > best_acc[active]
        for col in np.flatnonzero(better):
            best_acc[active[col]] = acc[col]
            best[:, active[col]] = theta[:, col]
        worse = active[~better]
        stopped = worse[fails[worse] >= config.tenacity]
        fails[worse] += 1
        if stopped.size:
            keep = torch.from_numpy(np.flatnonzero(~np.isin(active, stopped)))
            theta, decay = theta[:, keep].contiguous(), decay[:, keep].contiguous()
            optimiser.keep(keep)
            active = active[keep.numpy()]
    return best_acc, best


# --- SentEval's three validation schemes -------------------------------------------------------

@dataclass
class Outcome:
    dev_acc: float  # x100, SentEval's "devacc"
    test_acc: float  # x100, SentEval's "acc"
    test_std: float | None = None  # over outer folds (k-fold evaluation), else None
    predictions: np.ndarray | None = None  # test predictions, per test example (outer folds: each example once)
    l2: list[float] | None = None  # chosen penalty per outer fold / once


Track = Callable[[Iterable, int, str], Iterable]


def _no_track(items, total, description):
    return items


def stratified_folds(y: np.ndarray, k: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """SentEval's StratifiedKFold(n_splits=k, shuffle=True, random_state=seed) splits."""
    from sklearn.model_selection import StratifiedKFold

    counts = np.bincount(np.asarray(y))
    if counts[counts > 0].max() < k:
        raise BenchError(f"Too few examples for {k}-fold cross-validation (largest class has {counts.max()}); "
                         f"use a larger --limit.")
    return list(StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(np.zeros(len(y)), y))


def _grid_scores(accs: list[np.ndarray]) -> np.ndarray:
    return np.round(100 * np.mean(accs, axis=0), 2)


def inner_kfold(X, y, nclasses: int, config: ClassifierConfig, seed: int, track: Track = _no_track,
                label: str = "") -> Outcome:
    """MR, CR, SUBJ, MPQA: outer k folds for test; inner k folds on each outer train for the L2 penalty."""
    X, y = np.asarray(X, dtype=np.float32), np.asarray(y)
    devs, tests, chosen = [], [], []
    predictions = np.empty(len(y), dtype=np.int64)  # each example is in exactly one outer test fold
    outer = stratified_folds(y, config.kfold, seed)
    for fold, (train, test) in enumerate(track(outer, len(outer), f"{label} outer folds")):
        Xtr, ytr = X[train], y[train]
        accs = [fit(Xtr[a], ytr[a], L2_GRID, config, nclasses, seed, validation=(Xtr[b], ytr[b]))[0]
                for a, b in stratified_folds(ytr, config.kfold, seed)]
        scores = _grid_scores(accs)
        reg = L2_GRID[int(np.argmax(scores))]
        devs.append(float(scores.max()))
        _, model = fit(Xtr, ytr, [reg], config, nclasses, seed)
        predictions[test] = model.predict(X[test])[:, 0]
        tests.append(round(100 * float((predictions[test] == y[test]).mean()), 2))
        chosen.append(reg)
    return Outcome(round(float(np.mean(devs)), 2), round(float(np.mean(tests)), 2),
                   float(np.std(tests)), predictions, chosen)


def kfold(Xtrain, ytrain, Xtest, ytest, nclasses: int, config: ClassifierConfig, seed: int,
          track: Track = _no_track, label: str = "") -> Outcome:
    """TREC, MRPC: k-fold CV on train picks the L2 penalty, then one fit on all train, scored on test."""
    X, y = np.asarray(Xtrain, dtype=np.float32), np.asarray(ytrain)
    folds = stratified_folds(y, config.kfold, seed)
    accs = [fit(X[a], y[a], L2_GRID, config, nclasses, seed, validation=(X[b], y[b]))[0]
            for a, b in track(folds, len(folds), f"{label} folds")]
    scores = _grid_scores(accs)
    reg = L2_GRID[int(np.argmax(scores))]
    _, model = fit(X, y, [reg], config, nclasses, seed)
    predictions = model.predict(np.asarray(Xtest, dtype=np.float32))[:, 0]
    test = round(100 * float((predictions == np.asarray(ytest)).mean()), 2)
    return Outcome(float(scores.max()), test, None, predictions, [reg])


def split(Xtrain, ytrain, Xdev, ydev, Xtest, ytest, nclasses: int, config: ClassifierConfig, seed: int) -> Outcome:
    """SST-2: the L2 penalty is chosen on dev; the chosen model is scored on test.

    SentEval refits the chosen penalty with the same seed and data, which reproduces the grid's model
    exactly, so that model is reused instead of trained twice.
    """
    acc, models = fit(Xtrain, ytrain, L2_GRID, config, nclasses, seed, validation=(Xdev, ydev))
    scores = np.round(100 * acc, 2)
    col = int(np.argmax(scores))
    chosen = LinearModels(models.weight[:, col:col + 1], models.bias[:, col:col + 1])
    predictions = chosen.predict(np.asarray(Xtest, dtype=np.float32))[:, 0]
    test = round(100 * float((predictions == np.asarray(ytest)).mean()), 2)
    return Outcome(float(scores.max()), test, None, predictions, [L2_GRID[col]])

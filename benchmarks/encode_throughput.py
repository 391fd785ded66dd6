"""Sentences/s of our Encoder (`bench run`'s encode path) vs sentence-transformers' encode and vs
`bench.evaluate`'s encode path for a SentenceTransformer (bench.models.model_objects: dedupe, cache, then the model's
own encode), same model, same sentences, same run.

    BENCH_DATA_DIR=../shared/data python benchmarks/encode_throughput.py [--n 2000] [--repeats 3]

Both sides get the same 2,000 unique STS-B sentences, batch size and thread count; each side is timed
`--repeats` times (alternating) and the best time counts. Our cache is cleared before every timing so
the ratio measures encoding, not cache hits (the cache only adds to our side in real runs); so is
`bench.evaluate`'s.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    from sentence_transformers import SentenceTransformer

    from bench.models.encoder import Encoder, resolve_backbone
    from bench.models.model_objects import wrap
    from bench.paths import Paths
    from bench.models.registry import get_model

    paths = Paths.from_env()
    sentences = stsb_sentences(paths, args.n)
    spec = get_model("minilm")
    ours = Encoder.from_spec(spec, paths.models, device="cpu", batch_size=args.batch_size)
    theirs = SentenceTransformer(resolve_backbone(spec), device="cpu")
    evaluate_path = wrap(theirs, name="st-minilm", batch_size=args.batch_size)  # what bench.evaluate encodes with
    encoders = {
        "ours": ours.encode,
        "sentence-transformers": lambda texts: theirs.encode(texts, batch_size=args.batch_size, convert_to_numpy=True),
        "bench.evaluate": evaluate_path.encode,
    }
    caches = {"ours": ours, "bench.evaluate": evaluate_path}  # forgotten before each timed call, untimed
    best, outputs = {name: float("inf") for name in encoders}, {}
    for _ in range(args.repeats):
        for name, encode in encoders.items():
            if name in caches:
                caches[name].forget()
            start = time.perf_counter()
            outputs[name] = encode(sentences)
            best[name] = min(best[name], time.perf_counter() - start)
    ours_out, st_out = outputs["ours"], outputs["sentence-transformers"]
    cos = (ours_out / np.linalg.norm(ours_out, axis=1, keepdims=True) * st_out).sum(1)
    print(f"sentences: {len(sentences)}, batch size {args.batch_size}, torch threads {torch.get_num_threads()}")
    for name, seconds in best.items():
        print(f"{name:>22}: {len(sentences) / seconds:8.1f} sentences/s (best of {args.repeats})")
    print(f"ratio ours / sentence-transformers: {best['sentence-transformers'] / best['ours']:.2f}")
    print(f"ratio bench.evaluate / bench run (sentences/s, same model): {best['ours'] / best['bench.evaluate']:.2f}")
    print(f"agreement: min cosine between the two embeddings of a sentence = {cos.min():.6f}")
    start = time.perf_counter()
    ours.encode(sentences)
    print(f"ours, second call (cache): {len(sentences) / (time.perf_counter() - start):.0f} sentences/s")


def stsb_sentences(paths, n: int) -> list[str]:
    """The first ``n`` distinct sentences of STS-B (test, then dev, then train)."""
    from bench.data.datasets import read_stsb, require

    root = require(paths.data, "stsb")
    sentences = []
    for split in ("test", "dev", "train"):
        s1, s2, _ = read_stsb(root, split).all_pairs()
        sentences = list(dict.fromkeys(sentences + s1 + s2))
    return sentences[:n]


if __name__ == "__main__":
    main()

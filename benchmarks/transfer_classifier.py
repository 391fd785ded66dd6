"""Our SentEval classifier fit (joint L2 grid, closed-form gradients) vs SentEval's way (one nn.Linear +
torch.optim per penalty), on the same random data in the same run. Prints seconds and the ratio.

    python benchmarks/transfer_classifier.py [--n 3000] [--dim 384] [--mode test]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# The reference is the test suite's SentEval-style fit, so the benchmark times exactly what the tests compare.
from tests.test_transfer import senteval_fit  # noqa: E402


def main():
    from suites import senteval_classifier as sc

    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--mode", choices=list(sc.MODES), default="test",
                        help="SentEval's classifier configuration (test: 10-fold, Adam; fasttest: 5-fold, RMSprop)")
    args = parser.parse_args()
    rng = np.random.RandomState(0)
    X = rng.randn(args.n, args.dim).astype(np.float32)
    y = (X[:, :8].sum(1) + 2 * rng.randn(args.n) > 0).astype(np.int64)
    Xdev, ydev = X[: args.n // 5], y[: args.n // 5]
    Xtr, ytr = X[args.n // 5:], y[args.n // 5:]
    proto = sc.classifier_config(args.mode)
    with sc.single_thread():
        start = time.perf_counter()
        ref = [senteval_fit(Xtr, ytr, Xdev, ydev, reg, proto, 2, 1111)[0] for reg in sc.L2_GRID]
        reference = time.perf_counter() - start
        start = time.perf_counter()
        ours_acc, _ = sc.fit(Xtr, ytr, sc.L2_GRID, proto, 2, 1111, validation=(Xdev, ydev))
        ours = time.perf_counter() - start
    print(f"validation accuracy per L2, SentEval-style: {np.round(ref, 4).tolist()}")
    print(f"validation accuracy per L2, ours:           {np.round(ours_acc, 4).tolist()}")
    print(f"SentEval-style (4 separate fits): {reference:.2f}s; ours (joint grid): {ours:.2f}s; "
          f"speed-up x{reference / ours:.2f}")


if __name__ == "__main__":
    main()

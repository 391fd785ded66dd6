"""bench: a robustness benchmarking harness for sentence encoders.

``bench.evaluate(model, name=..., suites=[...])`` evaluates any encoder from Python (docs/python.md); it is
imported on first use, so ``import bench`` imports nothing heavy.
"""

from bench.version import __version__
__all__ = ["evaluate", "Evaluation", "__version__"]


def __getattr__(name: str):
    if name in ("evaluate", "Evaluation"):
        from bench import api

        return getattr(api, name)
    raise AttributeError(f"module 'bench' has no attribute {name!r}")

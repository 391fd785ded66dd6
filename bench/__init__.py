"""bench: a robustness benchmarking harness for sentence encoders."""

__version__ = "0.1.0"

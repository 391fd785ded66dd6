"""The app layer: one module per CLI subcommand (``add_arguments(parser)`` and ``main(args) -> int``),
plus ``grid_runner`` (the Ray side of ``bench grid``). Only this package imports ``suites`` and ``reports``
(the import-linter contracts in pyproject.toml).

Shared here: argparse value types that reject bad numbers at parse time (exit 2 with the flag, the
bad value and the accepted range), the common ``--allow-unverified-data`` flag, and the console that
prints whole values when the output is not a terminal.
"""

from __future__ import annotations

import argparse
import math


def _number(kind, low=None, high=None, low_open=False, what=""):
    """An argparse type: ``kind`` (int or float) within [low, high] (``low_open``: > low)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}")
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        if low is not None and (value <= low if low_open else value < low) or high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
        return value

    parse.__name__ = what  # argparse names the type in its messages
    return parse


positive_int = _number(int, 1, what="an integer >= 1")
nonnegative_int = _number(int, 0, what="an integer >= 0")
positive_float = _number(float, 0, low_open=True, what="a number > 0")
nonnegative_float = _number(float, 0, what="a number >= 0")


def add_unverified_data_flag(parser) -> None:
    parser.add_argument("--allow-unverified-data", action="store_true",
                        help="use data files whose sha256 differs from bench/data_files.tsv (your own data); "
                             "rows record the differing files in their config and never share cells with "
                             "results on the reference data")


def output_console(**kwargs):
    """A rich Console; when stdout is not a terminal (a pipe, a log file) it is wide enough that tables
    keep every value whole instead of cutting columns to '…'."""
    import sys

    from rich.console import Console

    if sys.stdout.isatty():
        return Console(**kwargs)
    return Console(width=100_000, **kwargs)


def add_dtype_argument(parser) -> None:
    """--dtype, common to the commands that run the network (run, train, grid, resources build)."""
    from bench.encoder import DTYPES

    parser.add_argument("--dtype", choices=DTYPES, default="auto",
                        help="precision of every forward pass (weights stay fp32). auto: bf16 autocast where the "
                             "hardware runs bf16 fast (CUDA with bf16, CPUs with AMX), fp16 on "
                             "other CUDA devices, else fp32. fp16: CUDA only")

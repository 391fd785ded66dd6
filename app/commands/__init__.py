"""The app layer: one module per CLI subcommand (``add_arguments(parser)`` and ``main(args) -> int``),
plus ``grid_runner`` (the Ray side of ``bench grid``). Outside suites/ and reports/ themselves, only this
package imports them (the import-linter contracts in pyproject.toml).

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


DEVICE_KINDS = ("auto", "cpu", "cuda", "cuda:N", "mps")


def _device_syntax(text: str) -> str:
    kind, _, index = text.partition(":")
    if text in ("auto", "cpu", "cuda", "mps") or (kind == "cuda" and index.isdigit()):
        return text
    raise argparse.ArgumentTypeError(f"{text!r} is not a device. Fix: choose one of {', '.join(DEVICE_KINDS)}")


def device_name(text: str) -> str:
    """An argparse type for a device used elsewhere (grid cells on a cluster): the syntax only."""
    return _device_syntax(text.strip().lower())


def local_device(text: str) -> str:
    """An argparse type for a device of this machine: the syntax, then that torch sees it (so a bad
    --device fails before any model loads or training starts)."""
    device = _device_syntax(text.strip().lower())
    if device in ("auto", "cpu"):
        return device
    import torch

    kind, _, index = device.partition(":")
    if kind == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count <= int(index or 0):
            seen = f"{count} CUDA device(s) visible (cuda:0..cuda:{count - 1})" if count else "no CUDA device is visible"
            raise argparse.ArgumentTypeError(f"{text}: {seen}. Fix: --device cpu, or --device auto")
    elif not (getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()):
        raise argparse.ArgumentTypeError(f"{text}: no Apple MPS device on this machine. Fix: --device cpu, or "
                                         f"--device auto")
    return device


local_device.__name__ = device_name.__name__ = "device"


def add_unverified_data_flag(parser) -> None:
    parser.add_argument("--allow-unverified-data", action="store_true",
                        help="use data files whose sha256 differs from bench/data/data_files.tsv (your own data); "
                             "rows record the differing files in their config and never share cells with "
                             "results on the reference data")


def add_cpu_paper_profile_flag(parser) -> None:
    """--allow-cpu-paper-profile, for the commands that train a missing model on demand (run, grid)."""
    parser.add_argument("--allow-cpu-paper-profile", action="store_true",
                        help="train a missing paper-profile model without a GPU (days of CPU time); without this "
                             "flag the command refuses and prints the estimate and the `bench train` command")


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
    from bench.models.encoder import DTYPES

    parser.add_argument("--dtype", choices=DTYPES, default="auto",
                        help="precision of every forward pass (weights stay fp32). auto: bf16 autocast where the "
                             "hardware runs bf16 fast (CUDA with bf16, CPUs with AMX), fp16 on "
                             "other CUDA devices, else fp32. fp16: CUDA only")

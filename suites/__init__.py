"""Suites: plug-ins the kernel runs (``bench/runner.py``), looked up by name in ``bench.runner.SUITES``. Each
module defines ``SUITE`` (a ``suites.base.Suite``); modules import torch lazily."""

from __future__ import annotations

from bench.runner import SUITES, all_suites, get_suite  # noqa: F401 (the kernel's registry of suites)

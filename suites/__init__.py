"""Suites, looked up by name. Each module defines ``SUITE``; modules import torch lazily."""

from __future__ import annotations

import importlib

from bench.errors import lookup

# name -> module. Adding a suite is one module plus one line here.
SUITE_MODULES = {
    "sts": "suites.sts",
    "alignment": "suites.alignment",
    "adversarial": "suites.adversarial",
    "anli": "suites.anli",
    "advsts": "suites.advsts",
    "transfer": "suites.transfer",
}


def get_suite(name: str):
    return importlib.import_module(lookup("suite", SUITE_MODULES, name)).SUITE


def all_suites():
    return [get_suite(name) for name in SUITE_MODULES]

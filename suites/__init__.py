"""Suites, looked up by name. Each module defines ``SUITE``; modules import torch lazily."""

from __future__ import annotations

from bench.plugins import Registry

# name -> "module:SUITE". Adding a suite is one module plus one line here.
SUITES = Registry("suite", {
    "sts": "suites.sts:SUITE",
    "alignment": "suites.alignment:SUITE",
    "adversarial": "suites.adversarial:SUITE",
    "anli": "suites.anli:SUITE",
    "advsts": "suites.advsts:SUITE",
    "transfer": "suites.transfer:SUITE",
    "perturbation": "suites.perturbation:SUITE",
})


def get_suite(name: str):
    return SUITES.load(name)


def all_suites():
    return [get_suite(name) for name in SUITES]

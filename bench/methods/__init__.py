"""Training methods, looked up by name. Each module defines ``METHOD`` (a ``bench.methods.base.Method``
subclass); modules import torch, so they are imported only when a method is used.

Adding a method is one file in this package plus one line here.
"""

from __future__ import annotations

import importlib

from bench.errors import lookup

# name -> module
METHOD_MODULES = {
    "simcse": "bench.methods.simcse",
    "robustembed": "bench.methods.robustembed",
    "vadvcse": "bench.methods.vadvcse",
    "adcse": "bench.methods.adcse",
    "dcl": "bench.methods.dcl",
    "l2pcsr": "bench.methods.l2pcsr",
    "consert": "bench.methods.consert",
    "uscal": "bench.methods.uscal",
    "sup-simcse": "bench.methods.sup_simcse",
}


def get_method(name: str):
    """The Method subclass registered as ``name`` (did-you-mean on a typo)."""
    return importlib.import_module(lookup("method", METHOD_MODULES, name)).METHOD

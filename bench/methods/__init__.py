"""Training methods, looked up by name. Each module defines ``METHOD`` (a ``bench.methods.base.Method``
subclass); modules import torch, so they are imported only when a method is used.

Adding a method is one file in this package plus one line here.
"""

from __future__ import annotations

from bench.plugins import Registry

# name -> "module:METHOD"
METHODS = Registry("method", {
    "simcse": "bench.methods.simcse:METHOD",
    "robustembed": "bench.methods.robustembed:METHOD",
    "vadvcse": "bench.methods.vadvcse:METHOD",
    "adcse": "bench.methods.adcse:METHOD",
    "dcl": "bench.methods.dcl:METHOD",
    "l2pcsr": "bench.methods.l2pcsr:METHOD",
    "consert": "bench.methods.consert:METHOD",
    "uscal": "bench.methods.uscal:METHOD",
    "sup-simcse": "bench.methods.sup_simcse:METHOD",
    "oraclecse": "bench.methods.oraclecse:METHOD",
})


def get_method(name: str):
    """The Method subclass registered as ``name`` (did-you-mean on a typo)."""
    return METHODS.load(name)

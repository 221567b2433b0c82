"""train-ledger: parallel training as state placement.

The analytic core (this package minus ``toys`` and ``verify``) needs only the
standard library and never imports torch. The public names below load lazily, so
``python -m ledger.parallel`` and the CLI import only what they use.
"""
from importlib import import_module

__version__ = "0.1.0"

_HOME = {
    "coll_bytes": "collectives", "LedgerError": "errors", "StateBytes": "memory",
    "state_bytes": "memory", "ModelSpec": "model", "preset": "model", "Comm": "parallel",
    "MoESpec": "parallel", "ParallelConfig": "parallel", "Placement": "parallel",
    "activation_bytes_per_layer": "parallel", "per_gpu_state": "parallel", "place": "parallel",
    "pp_bubble_fraction": "parallel", "report": "render",
}
__all__ = sorted(_HOME)


def __getattr__(name: str):
    if name in _HOME:
        return getattr(import_module(f"ledger.{_HOME[name]}"), name)
    raise AttributeError(f"module 'ledger' has no attribute {name!r}")


def __dir__():
    return __all__

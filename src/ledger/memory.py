"""Bytes of training state: the resident three (params, grads, optimizer) and activations.

>>> from ledger.model import llama3_70b
>>> st = state_bytes(llama3_70b(), "bf16", "adam")
>>> (st.params_bytes, st.grads_bytes, st.optim_bytes) == (2 * 70553706496, 2 * 70553706496,
...                                                       12 * 70553706496)
True
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.errors import LedgerError


@dataclass(frozen=True)
class StateBytes:
    """Resident training state in bytes: parameters, gradients, optimizer state."""

    params_bytes: float
    grads_bytes: float
    optim_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.params_bytes + self.grads_bytes + self.optim_bytes

    def scaled(self, factor: float) -> StateBytes:
        return StateBytes(self.params_bytes * factor, self.grads_bytes * factor,
                          self.optim_bytes * factor)


@dataclass(frozen=True)
class Precision:
    """Bytes per parameter of each resident copy."""

    param: int  # the weights the GEMMs read
    grad: int  # the gradient buffer that is reduced
    master: int  # fp32 master weights kept by the optimizer (0 when params are fp32)
    moment: int  # each optimizer moment


PRECISIONS = {
    "bf16": Precision(param=2, grad=2, master=4, moment=4),  # mixed precision (ZeRO paper)
    "fp16": Precision(param=2, grad=2, master=4, moment=4),
    "bf16-fp32grad": Precision(param=2, grad=4, master=4, moment=4),  # Megatron main grads
    "fp32": Precision(param=4, grad=4, master=0, moment=4),
}
# "fp8" is not a state table: FP8 training keeps the framework's own state dtypes and adds
# what its recipe keeps (FP8 weight copies, scales, BF16 moments under DeepSeek-V3's) -
# ``ledger.frameworks.fp8``, applied by ``ledger.frameworks.Framework.with_precision``.
OPTIMIZER_MOMENTS = {"adam": 2, "adamw": 2, "sgd-momentum": 1, "sgd": 0}


def bytes_per_param(precision: str = "bf16", optimizer: str = "adam") -> StateBytes:
    """(params, grads, optimizer) bytes for one parameter.

    >>> bytes_per_param("bf16", "adam")
    StateBytes(params_bytes=2, grads_bytes=2, optim_bytes=12)
    >>> bytes_per_param("fp32", "sgd").total_bytes
    8
    """
    if precision not in PRECISIONS:
        raise LedgerError("precision", f"unknown precision {precision!r}; "
                                       f"known: {', '.join(PRECISIONS)}")
    if optimizer not in OPTIMIZER_MOMENTS:
        raise LedgerError("optimizer", f"unknown optimizer {optimizer!r}; "
                                       f"known: {', '.join(OPTIMIZER_MOMENTS)}")
    p = PRECISIONS[precision]
    return StateBytes(p.param, p.grad, p.master + OPTIMIZER_MOMENTS[optimizer] * p.moment)


def state_bytes(model, precision: str = "bf16", optimizer: str = "adam") -> StateBytes:
    """Whole-model resident state: bytes_per_param x the exact parameter count."""
    per = bytes_per_param(precision, optimizer)
    n = model.params
    return StateBytes(per.params_bytes * n, per.grads_bytes * n, per.optim_bytes * n)

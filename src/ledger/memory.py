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
    # master weights off: the optimizer updates the bf16 params themselves and torch.optim
    # keeps its moments in the param dtype (torch/optim/adamw.py: zeros_like(p)) -
    # torchtune's pure-bf16 recipes (dtype: bf16, no fp32 copy)
    "bf16-pure": Precision(param=2, grad=2, master=0, moment=2),
}
# "fp8" is not a state table: FP8 training keeps the framework's own state dtypes and adds
# what its recipe keeps (FP8 weight copies, scales, BF16 moments under DeepSeek-V3's) -
# ``ledger.frameworks.fp8``, applied by ``ledger.frameworks.Framework.with_precision``.


@dataclass(frozen=True)
class Optimizer:
    """What an optimizer keeps per parameter, beyond any master copy."""

    moments: int = 0  # full-size moments, in the framework's moment dtype
    fixed_bytes: float = 0.0  # state of a fixed size per parameter (8-bit block-wise)
    factored: bool = False  # second moment as row and column vectors (Adafactor)
    scalar_moments: int | None = None  # Muon: the moments of the parameters it does not
    #   orthogonalise (its scalar optimizer's; ``moments`` is then the matrices' one)
    source: str = ""


_BNB = "bitsandbytes 0.50.2 bitsandbytes/optim/optimizer.py"
OPTIMIZERS = {
    "adam": Optimizer(2, source="torch.optim.Adam: exp_avg, exp_avg_sq (Kingma & Ba 2015)"),
    "adamw": Optimizer(2, source="torch.optim.AdamW: exp_avg, exp_avg_sq"),
    "sgd-momentum": Optimizer(1, source="torch.optim.SGD momentum_buffer"),
    "sgd": Optimizer(0, source="torch.optim.SGD without momentum: no state"),
    "lion": Optimizer(1, source="Lion (Chen et al. 2023, alg. 1): one momentum; "
                                "bitsandbytes optim/lion.py Lion (L8)"),
    # Optimizer2State.init_state L492-533: two uint8 states + an fp32 absmax per 256-element
    # block each (blocksize 256, L524-529); tensors under min_8bit_size = 4096 elements
    # (L414, L502) keep fp32 states - not modelled (adapters and weights are larger)
    "adam8bit": Optimizer(fixed_bytes=2 + 2 * 4 / 256, source=f"{_BNB} L492-533 (AdamW8bit)"),
    # paged: states >= 1e5 elements in CUDA managed memory (L374-390, functional.py L91-99),
    # evicted to the host only under memory pressure: the same bytes on the GPU
    "paged-adam8bit": Optimizer(fixed_bytes=2 + 2 * 4 / 256,
                                source=f"{_BNB} L374-390, L492-533 (PagedAdamW8bit)"),
    # Optimizer1State.init_state L664-697: one uint8 state + an fp32 absmax per 256
    "lion8bit": Optimizer(fixed_bytes=1 + 4 / 256, source=f"{_BNB} L664-697 (Lion8bit)"),
    # transformers optimization.py L1185-1240: factored iff ndim >= 2, exp_avg_sq_row and
    # _col in fp32; no first moment (beta1 None, L1149); vectors keep a full fp32 exp_avg_sq
    "adafactor": Optimizer(factored=True, source="transformers 5.23.0 optimization.py "
                                                 "Adafactor L1149, L1185-1240"),
    # Muon: one momentum per orthogonalised matrix, Adam's two for the rest (the share is
    # the model's: ledger.optim.muon.managed_share); the forms differ in time, not bytes
    "muon": Optimizer(1, scalar_moments=2, source="Megatron-LM d98e8a64 megatron/core/"
                      "optimizer/emerging_optimizers.py L93-98, L140-147 (2-D weights but "
                      "embedding and output head: one momentum buffer; the rest: "
                      "--muon-scalar-optimizer adam); Moonlight arXiv:2502.16982 sec. 2"),
    "muon-moonlight": Optimizer(1, scalar_moments=2, source="Moonlight arXiv:2502.16982 "
                                "sec. 2.2-2.3 (Muon on matrices, AdamW on the rest; "
                                "Distributed Muon, Algorithm 1); Kimi K2 arXiv:2507.20534"),
}
OPTIMIZER_MOMENTS = {name: o.moments for name, o in OPTIMIZERS.items()}  # the seed's names
FACTORED_BYTES = 4  # Adafactor's row and column statistics are fp32


def factored_bytes(rows: int, cols: int) -> int:
    """Adafactor's second moment of one rows x cols matrix: a row and a column vector."""
    return FACTORED_BYTES * (rows + cols)


def optimizer(name: str) -> Optimizer:
    if name not in OPTIMIZERS:
        raise LedgerError("optimizer", f"unknown optimizer {name!r}; "
                                       f"known: {', '.join(OPTIMIZERS)}")
    return OPTIMIZERS[name]


def optimizer_state_per_param(name: str, master: float, moment: float,
                              factored_rate: float = 0.0, muon_share: float = 1.0) -> float:
    """Optimizer bytes of one parameter: the master copy, the moments in ``moment``
    bytes, any fixed-size state; ``factored_rate``: a factored optimizer's bytes per
    parameter over the matrices it holds (``factored_bytes`` summed / their size);
    ``muon_share``: the share of parameters Muon orthogonalises (one moment), the rest
    keeping its scalar optimizer's moments.

    >>> optimizer_state_per_param("muon", 4, 4, muon_share=0.75)  # 4 + 0.75 x 4 + 0.25 x 8
    9.0
    """
    o = optimizer(name)
    moments = o.moments if o.scalar_moments is None else \
        muon_share * o.moments + (1 - muon_share) * o.scalar_moments
    return master + moments * moment + o.fixed_bytes + (factored_rate if o.factored else 0.0)


def bytes_per_param(precision: str = "bf16", optimizer: str = "adam") -> StateBytes:
    """(params, grads, optimizer) bytes for one parameter.

    >>> bytes_per_param("bf16", "adam")
    StateBytes(params_bytes=2, grads_bytes=2, optim_bytes=12)
    >>> bytes_per_param("fp32", "sgd").total_bytes
    8
    >>> bytes_per_param("bf16-pure", "adam8bit").optim_bytes
    2.03125
    """
    if precision not in PRECISIONS:
        raise LedgerError("precision", f"unknown precision {precision!r}; "
                                       f"known: {', '.join(PRECISIONS)}")
    p = PRECISIONS[precision]
    optim = optimizer_state_per_param(optimizer, p.master, p.moment)
    return StateBytes(p.param, p.grad, int(optim) if optim == int(optim) else optim)


def state_bytes(model, precision: str = "bf16", optimizer: str = "adam") -> StateBytes:
    """Whole-model resident state: bytes_per_param x the exact parameter count."""
    per = bytes_per_param(precision, optimizer)
    n = model.params
    return StateBytes(per.params_bytes * n, per.grads_bytes * n, per.optim_bytes * n)

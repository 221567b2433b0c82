"""The state dtypes a launch sets beside its framework's: the gradient buffer, the main
(master) params and Adam's two moments (Megatron --grad-reduce-in-bf16,
--use-precision-aware-optimizer with --main-params-dtype / --exp-avg-dtype /
--exp-avg-sq-dtype), applied to a framework by ``with_dtypes`` (``conventions.of``)."""
from __future__ import annotations

from dataclasses import replace

# bytes of the dtypes a launch may keep a state in (Megatron --main-grads-dtype,
# --main-params-dtype, --exp-avg-dtype, --exp-avg-sq-dtype: arguments.py L3667-3684
# @d98e8a64; fp8 moments are uint8 with a per-tensor scale in TE's FusedAdam)
STATE_DTYPES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


def with_dtypes(fw, grad=None, master=None, exp_avg=None,
                exp_avg_sq=None):
    """The framework with a launch's state dtypes (None: as the framework keeps it): the
    gradient buffer (Megatron --grad-reduce-in-bf16: bf16 main grads, arguments.py
    L1209-1213), the main params and Adam's two moments (--use-precision-aware-optimizer;
    two moments of different dtypes are priced at their mean, per moment)."""
    if grad is None and master is None and exp_avg is None and exp_avg_sq is None:
        return fw
    b = STATE_DTYPES
    m1 = fw.moment_bytes if exp_avg is None else b[exp_avg]
    m2 = fw.moment_bytes if exp_avg_sq is None else b[exp_avg_sq]
    moment = (m1 + m2) / 2
    return replace(fw, grad_bytes=fw.grad_bytes if grad is None else b[grad],
                   master_bytes=fw.master_bytes if master is None or not fw.master_bytes
                   else b[master], moment_bytes=int(moment) if moment == int(moment) else moment)

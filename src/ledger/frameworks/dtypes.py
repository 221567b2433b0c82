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


# TE's FusedAdam keeping the master weights of bf16 params stores only each fp32 master's
# low 16 bits (int16 "remainders"; the high 16 are the bf16 param): Megatron's precision-
# aware optimizer hands it the master weights - master_weights, master_weight_dtype =
# main_params_dtype and store_param_remainders (OptimizerConfig's, True by default) - when
# its main params are not fp32 or no FP8 recipe (or delayed scaling) runs
# (optimizer/__init__.py L571-588, optimizer_config.py L192, L407-414 @d98e8a64; its own
# fp32 main params then none, distrib_optimizer.py L422-452), and TE stores remainders at
# an fp32 master dtype for a bf16 param (fused_adam.py L213-215, L414-415, L626 @TE
# d0067d0d). Priced without an FP8 recipe only (delayed scaling's FP8 params: not examined)
REMAINDER_BYTES = 2


def with_dtypes(fw, grad=None, master=None, exp_avg=None, exp_avg_sq=None,
                precision: str | None = None, offload: bool = False):
    """The framework with a launch's state dtypes (None: as the framework keeps it): the
    gradient buffer (Megatron --grad-reduce-in-bf16: bf16 main grads, arguments.py
    L1209-1213), the main params and Adam's two moments (--use-precision-aware-optimizer;
    two moments of different dtypes are priced at their mean, per moment) - and, any of
    those three given (fp32 too: the precision-aware optimizer) under Megatron with fp32
    main params, bf16 params (not ``precision`` fp16), no FP8 recipe and no optimizer CPU
    ``offload``, TE's 16-bit master remainders (``REMAINDER_BYTES``)."""
    if grad is None and master is None and exp_avg is None and exp_avg_sq is None:
        return fw
    b = STATE_DTYPES
    m1 = fw.moment_bytes if exp_avg is None else b[exp_avg]
    m2 = fw.moment_bytes if exp_avg_sq is None else b[exp_avg_sq]
    moment = (m1 + m2) / 2
    kept = fw.master_bytes if master is None or not fw.master_bytes else b[master]
    aware = master is not None or exp_avg is not None or exp_avg_sq is not None
    if aware and fw.family == "megatron" and kept == 4 and fw.fp8 is None and \
            fw.param_bytes == 2 and precision != "fp16" and not offload:
        kept = REMAINDER_BYTES
    return replace(fw, grad_bytes=fw.grad_bytes if grad is None else b[grad],
                   master_bytes=kept, moment_bytes=int(moment) if moment == int(moment) else moment)

"""The state dtypes a Megatron launch sets (gradient buffer, the precision-aware
optimizer's master weights and moments), under the CLI's names - read by
``ledger.io.megatron.flags`` into the run's ParallelConfig."""
from __future__ import annotations

from ledger.io.megatron import model as mm


def grads_dtype(ns: dict) -> str:
    """The gradient buffer's dtype the ledger prices for a launch (``state_dtypes``)."""
    return state_dtypes(ns).get("grad_dtype") or ("fp16" if ns["fp16"] else "fp32")


def state_dtypes(ns: dict) -> dict:
    """The state dtypes a launch sets, under the CLI's names: --accumulate-allreduce-grads-in-fp32
    under --fp16 an fp32 gradient buffer, --grad-reduce-in-bf16 keeps
    the gradient buffer in bf16 (arguments.py L1209-1213 @d98e8a64; Megatron-FSDP:
    --megatron-fsdp-main-grads-dtype bf16; the precision-aware optimizer's --main-grads-dtype
    bf16: ``mm.bf16_grads``), --use-precision-aware-optimizer its
    --main-params-dtype, --exp-avg-dtype and --exp-avg-sq-dtype (L3667-3684; without it
    they must stay fp32, optimizer_config.py L466-480) - each recorded, fp32 too: a dtype
    given is the precision-aware optimizer, whose gradient handling differs
    (ledger.placement.buffers.fp32_grad_copies)."""
    out = {}
    # --accumulate-allreduce-grads-in-fp32 is the DDP's grad_reduce_in_fp32 (training.py
    # L2635): an fp32 gradient buffer, else the param's dtype (param_and_grad_buffer.py
    # L924); --bf16 forces it already (arguments.py L1209-1217, the ledger's bf16-fp32grad),
    # so it moves the buffer only under --fp16 (fp16 grads without it)
    if ns["fp16"] and ns.get("accumulate_allreduce_grads_in_fp32"):
        out["grad_dtype"] = "fp32"
    if mm.bf16_grads(ns):
        out["grad_dtype"] = "bf16"
    if ns.get("use_precision_aware_optimizer"):
        for dest, key in (("main_params_dtype", "master_dtype"),
                          ("exp_avg_dtype", "exp_avg_dtype"),
                          ("exp_avg_sq_dtype", "exp_avg_sq_dtype")):
            out[key] = ns.get(dest) or "fp32"
    return out

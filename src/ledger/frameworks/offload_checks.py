"""The offloads Megatron-Core runs beside ZeRO-Offload and FSDP2's: the modules its
fine-grained activation offloading knows and how it checks them, and the optimizer CPU
offload's share (``ParallelConfig.offload_modules``, ``optimizer_offload_fraction``; the
bytes are ``ledger.placement.act_offload`` and ``optim_offload``'s)."""
from __future__ import annotations

import numpy as np

from ledger.errors import LedgerError

# Megatron's --offload-modules (docs/user-guide/features/fine_grained_activation_offloading.md
# @d98e8a64; transformer_config.py L2132-2142) and "all" (torchtitan graph_trainer's
# cpu_offload_all, experiments only at b5bcd76c)
OFFLOAD_MODULES = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm",
                   "expert_fc1", "moe_act", "fused_group_mlp", "all")


# whose activation offload --offload-modules names
WHOSE = {"megatron": "--fine-grained-activation-offloading",
         "torchtitan": "graph_trainer cpu_offload_all"}


def check_offloads(cfg, fw) -> None:
    """--offload-modules as Megatron checks them (transformer_config.py L2127-2175: attn_proj
    with core_attn, not with --cpu-offloading-num-layers; fused_group_mlp without
    expert_fc1 / moe_act, the docs) and the optimizer offload's share (in [0, 1], not with
    ZeRO-Offload)."""
    mods = tuple(cfg.offload_modules or ())
    object.__setattr__(cfg, "offload_modules", mods)
    bad = [m for m in mods if m not in OFFLOAD_MODULES] or (
        "attn_proj" in mods and "core_attn" not in mods) or (
        "fused_group_mlp" in mods and {"expert_fc1", "moe_act"} & set(mods)) or (
        mods and cfg.offload_activation_layers)
    f = cfg.activation_offload_fraction
    if bad or not 0.0 <= f <= 1.0:
        raise LedgerError("offload_modules", f"{', '.join(mods)} with fraction {f}: modules "
                          f"among {', '.join(OFFLOAD_MODULES)}, attn_proj with core_attn, "
                          f"fused_group_mlp without expert_fc1 / moe_act, not with "
                          f"--cpu-offloading-num-layers, a fraction in [0, 1]")
    family = fw.family
    runs = "torchtitan" if mods == ("all",) else "megatron"  # whose offload it is
    if mods and family != runs:
        raise LedgerError("offload_modules", f"{', '.join(mods)} is {runs}'s activation "
                          f"offload ({WHOSE[runs]}), not {family}'s")
    f = cfg.optimizer_offload_fraction
    if f and (family != "megatron" or not np.all(np.asarray(cfg.zero_stage) >= 1)):
        raise LedgerError("optimizer_offload_fraction", f"{f}: Megatron's optimizer CPU "
                          f"offload works on the distributed optimizer's shard (--zero 1 or "
                          f"more under --framework megatron), got framework {family}, zero "
                          f"{cfg.zero_stage}")
    if not 0.0 <= f <= 1.0 or (f and cfg.offload != "none"):
        raise LedgerError("optimizer_offload_fraction", f"a share in [0, 1] of the optimizer "
                          f"Megatron offloads, without --offload, got {f} with offload "
                          f"{cfg.offload!r}")

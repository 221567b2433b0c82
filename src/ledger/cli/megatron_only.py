"""Flags that name a Megatron-Core setting and mean nothing under another framework:
typed beside --framework torchtitan / deepspeed / ..., each is refused in one line (exit 2)
rather than priced (``check_megatron_only``; Megatron-FSDP's double buffers:
``fsdp_double_buffer``). A Megatron launch file's are Megatron's.

- --transformer-impl local: Megatron's own layers instead of TE's (TransformerConfig's
  ``transformer_impl``, transformer_config.py L1314 @d98e8a64, as
  ``ledger/io/data/megatron_arguments.json`` records it): unfused attention keeping its
  scores, no TE workspace (``ledger.placement.buffers``). Other frameworks have no such
  switch; priced there, it would only turn their flash attention off.
--dsa-indexer-loss (Megatron's fused CSA indexer loss) is refused off Megatron by the
config's own check (``ledger.frameworks.dsa_loss.check_indexer_loss``), for the Python API
and the CLI alike.
"""
from __future__ import annotations

import argparse

from ledger.errors import LedgerError


def check_megatron_only(a: argparse.Namespace) -> None:
    """Refuse --transformer-impl local off Megatron."""
    from ledger.frameworks import DEFAULT, get

    name = getattr(a, "framework", None) or DEFAULT
    if get(name).family == "megatron":
        return
    if getattr(a, "transformer_impl", None) == "local":
        raise LedgerError("transformer_impl", f"--transformer-impl local is a Megatron "
                                              f"setting; --framework {name} has none: drop it "
                                              f"or use --framework megatron")


def fsdp_double_buffer(a: argparse.Namespace) -> bool:
    """--fsdp-double-buffer: Megatron-FSDP's, refused under another framework, below
    ZeRO-3, and with --no-reshard (no buffers are priced then: placement.buffers)."""
    from ledger.frameworks import get

    on = bool(getattr(a, "fsdp_double_buffer", False))
    fw = get(a.framework)
    if on and not (fw.family == "megatron" and fw.fsdp_buffers):
        raise LedgerError("fsdp_double_buffer", f"Megatron-FSDP's double buffers need "
                                                f"--framework megatron, got {a.framework}")
    if on and getattr(a, "zero", None) not in (None, 3):  # plan: None, its ZeRO-3 rows
        raise LedgerError("fsdp_double_buffer", f"has no effect at --zero {a.zero}: "
                                                f"Megatron-FSDP double-buffers at ZeRO-3 "
                                                f"(optim_grads_params)")
    if on and getattr(a, "no_reshard", False):  # placement.buffers.fsdp_double_buffers: {}
        raise LedgerError("fsdp_double_buffer", "has no effect with --zero 3 --no-reshard: "
                                                "Megatron-FSDP's double buffers hold the params"
                                                " re-gathered after a reshard, and none is")
    return on

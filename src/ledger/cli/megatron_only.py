"""Flags that name a Megatron-Core setting and mean nothing under another framework:
typed beside --framework torchtitan / deepspeed / ..., each is refused in one line (exit 2)
rather than priced (``check_megatron_only``; Megatron-FSDP's double buffers:
``fsdp_double_buffer``). A Megatron launch file's are Megatron's.

- --transformer-impl local: Megatron's own layers instead of TE's (TransformerConfig's
  ``transformer_impl``, transformer_config.py L1314 @d98e8a64, as
  ``ledger/io/data/megatron_arguments.json`` records it): unfused attention keeping its
  scores, no TE workspace (``ledger.placement.buffers``). Other frameworks have no such
  switch; priced there, it would only turn their flash attention off.
- --dsa-indexer-loss: Megatron's fused CSA indexer loss and its eager backward
  (``ledger.frameworks.dsa_loss``, csa_kernels.py L1274-1371 @43e45e13).
"""
from __future__ import annotations

import argparse

from ledger.errors import LedgerError

def check_megatron_only(a: argparse.Namespace) -> None:
    """Refuse --transformer-impl local and --dsa-indexer-loss sparse|dense off Megatron."""
    from ledger.frameworks import DEFAULT, get

    name = getattr(a, "framework", None) or DEFAULT
    if get(name).family == "megatron":
        return
    given = [(field, flag) for field, flag, on in (
        ("transformer_impl", "--transformer-impl local",
         getattr(a, "transformer_impl", None) == "local"),
        ("indexer_loss", f"--dsa-indexer-loss {getattr(a, 'indexer_loss', None)}",
         (getattr(a, "indexer_loss", None) or "none") != "none")) if on]
    if given:
        field, flag = given[0]
        raise LedgerError(field, f"{flag} is a Megatron setting; --framework {name} has "
                                 f"none: drop it or use --framework megatron")


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

"""Optimizers beyond the per-parameter tables of ``ledger.memory``: Muon's matrices, its
Newton-Schulz FLOPs and the gathers its distributed forms add (``muon``).

May import: ``ledger.errors``, ``ledger.memory``, ``ledger.finetune`` (the model's weight
matrices).
"""
from ledger.optim.muon import (FORMS, NS_STEPS, OPTIMIZER_FORMS, form, gather_bytes,
                               managed_params, managed_share, matrices, ns_flops, step_flops)

__all__ = ["FORMS", "NS_STEPS", "OPTIMIZER_FORMS", "form", "gather_bytes", "managed_params",
           "managed_share", "matrices", "ns_flops", "step_flops"]

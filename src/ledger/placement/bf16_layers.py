"""The layers a low-precision recipe runs in BF16, as their saved tensors price them.

Megatron runs the first and last layers a recipe names in BF16 (``--first-last-layers-bf16``,
``--num-layers-at-start-in-bf16`` / ``--num-layers-at-end-in-bf16``: no FP8 / FP4 context
for those layers, megatron/core/fp8_utils.py L711-724, fp4_utils.py L247-262 @ d98e8a64)
and, under ``keep_mtp_spec_in_bf16``, the MTP block (Megatron-Bridge recipes/nemotronh/
nemotron_3_super.py L95 @ v0.4.1; Nemotron 3 Super's NVFP4 te_quant.cfg names it too,
matcher mtp_bf16: "mtp.*" -> bf16, scripts/performance/configs/nemotronh/te_quant.cfg
@ v0.4.1). Such a layer keeps
no low-precision weight copies (``ledger.frameworks.fp8.weight_bytes``' ``bf16_here``) and
its linear layers save their inputs in BF16, not in the recipe's format: per layer the
difference between its saved bytes under the framework's BF16 table and under the
recipe's (``ledger.placement.layers.layer_activation_bytes``), on the ranks that hold
it - the first layers on rank 0, the last ones and the MTP block on rank pp - 1, as
``bf16_layers_on`` places them - weighted as that rank's layers of the kind are in
flight at its peak (``inflight_kinds`` over ``layer_kinds``).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ledger.model import ModelSpec
from ledger.placement.layers import layer_activation_bytes, mtp_held
from ledger.placement.stages import each_layer_kind


def bf16_mtp_layers(model: ModelSpec, fw) -> int:
    """The MTP depths' layers the recipe keeps in BF16 (``Fp8Recipe.bf16_mtp``)."""
    rec = getattr(fw, "fp8", None)
    if rec is None or not rec.bf16_mtp or not model.mtp_layers:
        return 0
    return model.mtp_layers * len(model.mtp_kinds)


def bf16_kinds(model: ModelSpec, fw, rank: int, pp: int) -> dict:
    """The recipe's BF16 layers on PP rank ``rank``, by kind."""
    rec = getattr(fw, "fp8", None)
    if rec is None:
        return {}
    first, last = rec.bf16_layers
    each = each_layer_kind(model)
    held = list(each[:first]) * (rank == 0) + list(each[len(each) - last:] if last else []) \
        * (rank == pp - 1)
    out: dict = {}
    for kind in held:
        out[kind] = out.get(kind, 0) + 1
    if rank == pp - 1 and bf16_mtp_layers(model, fw):
        for kind, n in mtp_held(model).items():
            out[kind] = out.get(kind, 0) + n
    return out


def bf16_weights(model: ModelSpec, fw, pp: int, kinds, counts, alive) -> np.ndarray | None:
    """(PP ranks x ``kinds``) the recipe's BF16 layers each rank holds, weighted as its
    layers of the kind are in flight (``alive`` / ``counts``: ``inflight_kinds`` over
    ``layer_kinds``); None when the recipe keeps none in BF16."""
    out = np.zeros((pp, len(kinds)))
    for r in range(pp):
        for kind, n in bf16_kinds(model, fw, r, pp).items():
            if kind in kinds:
                i = list(kinds).index(kind)
                out[r, i] += n * (alive[r][i] / counts[r][i] if counts[r][i] else 1.0)
    return out if out.any() else None


def bf16_activation_bytes(model: ModelSpec, cfg, fw, rank: int, kinds, counts,
                          alive) -> float:
    """What one micro-batch of rank ``rank``'s stage activations adds when its BF16
    layers save BF16 inputs; ``kinds`` / ``counts`` / ``alive``: ``layer_kinds`` and
    ``inflight_kinds`` of the placement."""
    w = bf16_weights(model, fw, cfg.pp, kinds, counts, alive)
    if w is None:
        return 0.0
    plain = replace(cfg, precision=None)
    return float(sum(w[rank, i] * (layer_activation_bytes(model, plain, kind)
                                   - layer_activation_bytes(model, cfg, kind))
                     for i, kind in enumerate(kinds) if w[rank, i]))


__all__ = ["bf16_activation_bytes", "bf16_kinds", "bf16_mtp_layers", "bf16_weights"]

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
recipe's (``ledger.placement.layers.layer_activation_bytes``), on the ranks whose stages
hold it (the MTP block with the last stage), weighted as that rank's layers of the kind
are in flight at its peak (``inflight_kinds`` over ``layer_kinds``).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ledger.model import ModelSpec
from ledger.placement.layers import layer_activation_bytes, mtp_held
from ledger.placement.stages import each_layer_kind, rank_stages, split_layers, stage_starts


def bf16_mtp_layers(model: ModelSpec, fw) -> int:
    """The MTP depths' layers the recipe keeps in BF16 (``Fp8Recipe.bf16_mtp``)."""
    rec = getattr(fw, "fp8", None)
    if rec is None or not rec.bf16_mtp or not model.mtp_layers:
        return 0
    return model.mtp_layers * len(model.mtp_kinds)


def bf16_kinds(model: ModelSpec, fw, rank: int, pp: int, vp: int = 1,
               schedule: str | None = None, split=None, rule: str = "ends") -> dict:
    """The recipe's BF16 layers on PP rank ``rank``, by kind: the first and last layers
    where the stage split (``split_layers``: ``split`` as given, else ``rule``) puts them,
    the MTP block with the last stage."""
    rec = getattr(fw, "fp8", None)
    if rec is None:
        return {}
    first, last = rec.bf16_layers
    each = each_layer_kind(model)
    counts = split_layers(model.layers, pp, vp, schedule, rule, split)
    starts = stage_starts(counts)
    stages = rank_stages(pp, vp, schedule)[rank]
    out: dict = {}
    for st in stages:
        for i in range(starts[st], starts[st] + counts[st]):
            if i < first or i >= model.layers - last:
                out[each[i]] = out.get(each[i], 0) + 1
    if len(counts) - 1 in stages and bf16_mtp_layers(model, fw):
        for kind, n in mtp_held(model).items():
            out[kind] = out.get(kind, 0) + n
    return out


def bf16_weights(model: ModelSpec, fw, layout, kinds, counts, alive) -> np.ndarray | None:
    """(PP ranks x ``kinds``) the recipe's BF16 layers each rank holds, weighted as its
    layers of the kind are in flight (``alive`` / ``counts``: ``inflight_kinds`` over
    ``layer_kinds``); ``layout``: (pp, vp, schedule, split, rule) as ``bf16_kinds`` takes
    them. None when the recipe keeps none in BF16."""
    rec = getattr(fw, "fp8", None)
    if rec is None or not (any(rec.bf16_layers) or bf16_mtp_layers(model, fw)):
        return None
    out = np.zeros((layout[0], len(kinds)))
    for r in range(layout[0]):
        for kind, n in bf16_kinds(model, fw, r, *layout).items():
            if kind in kinds:
                i = list(kinds).index(kind)
                out[r, i] += n * (alive[r][i] / counts[r][i] if counts[r][i] else 1.0)
    return out if out.any() else None


def bf16_activation_bytes(model: ModelSpec, cfg, fw, rank: int, layout, kinds, counts,
                          alive) -> float:
    """What one micro-batch of rank ``rank``'s stage activations adds when its BF16
    layers save BF16 inputs; ``layout``, ``kinds`` / ``counts`` / ``alive``: as
    ``bf16_weights`` takes them."""
    w = bf16_weights(model, fw, layout, kinds, counts, alive)
    if w is None:
        return 0.0
    plain = replace(cfg, precision=None)
    return float(sum(w[rank, i] * (layer_activation_bytes(model, plain, kind)
                                   - layer_activation_bytes(model, cfg, kind))
                     for i, kind in enumerate(kinds) if w[rank, i]))


__all__ = ["bf16_activation_bytes", "bf16_kinds", "bf16_mtp_layers", "bf16_weights"]

"""A fine-tune's state, traffic and transient memory on each GPU.

``ledger.finetune.trainable`` says, layer by layer, which parameters train, which are
frozen (NF4 under QLoRA) and which adapters peft adds. Here they are priced:

  trained   the framework's full state per parameter (``Framework.state_per_param``)
  frozen    ``Framework.frozen_param_bytes`` (fp32 with peft's
            prepare_model_for_kbit_training, peft utils/other.py L204-209); no gradient,
            no optimizer state
  nf4       bitsandbytes' NF4 bytes (``ledger.finetune.nf4``); nothing else
  adapters  fp32 (peft's autocast_adapter_dtype upcasts bf16 adapters, peft_model.py
            L128, tuners_utils.py L2705-2745; torchtitan's fp32 model): 4 B of weight,
            4 of gradient, the optimizer's state over fp32 without a master copy

and placed as Megatron lays out the stages (``ledger.placement.stages``). Data
parallelism reduces only what trains; ZeRO-3 still gathers every parameter (FSDP2 shards
and all-gathers frozen parameters with their group, reduce-scatters only those with
gradients: torch _fsdp_param_group.py L615-640), ZeRO-1/2 gather back only what the
optimizer updated.
"""
from __future__ import annotations

from collections import Counter
from functools import lru_cache

from dataclasses import dataclass, replace

from ledger.config import expert_tp
from ledger.finetune import CLASSES, Counts, edge_state, layer_state, modules, resolve
from ledger.finetune import nf4 as nf4_bytes
from ledger.memory import StateBytes, factored_bytes, optimizer_state_per_param
from ledger.optim import muon
from ledger.placement.stages import config_split, rank_stages, split_layers, stage_starts

ADAPTER_BYTES = 4  # fp32 adapters (module docstring)


def factored_rate(model, adapters: bool = False, rank: int = 8) -> float:
    """Adafactor's row and column bytes per parameter of the model's matrices (or of its
    LoRA A and B, r x in and out x r), vectors kept whole in fp32."""
    mats = [(lin.in_features, lin.out_features, lin.experts)
            for kind in modules.kinds(model) for lin in modules.layer(model, kind)]
    if adapters:
        per = sum(e * (factored_bytes(rank, i) + factored_bytes(o, rank)) for i, o, e in mats)
        return per / sum(e * rank * (i + o) for i, o, e in mats)
    weights = sum(e * i * o for i, o, e in mats)
    per = sum(e * factored_bytes(i, o) for i, o, e in mats) / weights
    return per * weights / model.params + 4 * (1 - weights / model.params)


def class_bytes(model, cfg, fw, optimizer: str) -> dict[str, StateBytes]:
    """Bytes per parameter of each class (module docstring) under this framework."""
    ft = cfg.finetune
    frozen = 4 if (ft.kbit_upcast and ft.quantized) else fw.frozen_param_bytes
    rate = factored_rate(model) if optimizer == "adafactor" else 0.0
    a_rate = factored_rate(model, True, ft.lora_rank) if optimizer == "adafactor" else 0.0
    share = muon.managed_share(model) if muon.form(optimizer) else 1.0  # adapters: matrices
    return {"trained": fw.state_per_param(cfg.zero_stage, optimizer, rate, share),
            "frozen": StateBytes(frozen, 0, 0),
            "nf4": StateBytes(nf4_bytes.nf4_bytes_per_param(ft.quant_block, ft.double_quant),
                              0, 0),
            "adapters": StateBytes(ADAPTER_BYTES, ADAPTER_BYTES, optimizer_state_per_param(
                optimizer, 0, ADAPTER_BYTES, a_rate))}


def _price(counts: dict[str, float], per: dict[str, StateBytes]) -> StateBytes:
    return StateBytes(*(sum(counts[c] * getattr(per[c], f) for c in CLASSES)
                        for f in ("params_bytes", "grads_bytes", "optim_bytes")))


def stage_counts(model, cfg) -> list[tuple[dict, dict]]:
    """Per PP rank, (dense, expert) parameters per class on one of its GPUs, in
    Megatron's stage layout (embedding first, final norm and output last; a tied output
    copied there when pp > 1)."""
    return _counts(model, cfg.finetune, cfg.tp, expert_tp(cfg) * cfg.ep, cfg.pp, cfg.vp,
                   cfg.schedule, config_split(model, cfg))


@lru_cache(maxsize=8)
def _layer_states(model, ft) -> tuple[tuple, dict]:
    """Each layer's key (its kind, frozen or not) and each key's state by class: a layer's
    state depends on its index only through these two (``layer_state``); computed once
    per model and fine-tune rather than once per layer per stage per placement."""
    targets = resolve(model, ft) if ft.adapters else None
    keys = tuple((model.layer_kind(i), ft.frozen_layer(i)) for i in range(model.layers))
    first = {k: i for i, k in reversed(list(enumerate(keys)))}
    return keys, {k: layer_state(model, ft, i, targets) for k, i in first.items()}


def _counts(model, ft, tp, grid, pp, vp, schedule, counts) -> list[tuple[dict, dict]]:
    """``counts``: layers per model stage (``ledger.placement.stages``); kept per layout
    (the planner asks once per ZeRO stage and offload)."""
    try:
        kept = _layout_counts(model, ft, tp, grid, pp, vp, schedule, tuple(counts))
    except TypeError:  # a model or fine-tune with a field that does not hash
        kept = _layout_counts.__wrapped__(model, ft, tp, grid, pp, vp, schedule, counts)
    return [(dict(d), dict(e)) for d, e in kept]


@lru_cache(maxsize=1024)
def _layout_counts(model, ft, tp, grid, pp, vp, schedule, counts) -> list[tuple[dict, dict]]:
    stages = len(counts)
    targets = resolve(model, ft) if ft.adapters else None
    starts = stage_starts(counts)
    out = []
    keys, states = _layer_states(model, ft)

    def layers(lo: int, hi: int) -> list[dict]:
        """Layers lo..hi-1 by class, one entry per (kind, frozen): exact, the counts
        being whole numbers."""
        tally = Counter(keys[lo:hi])
        return [{c: states[k][c].scaled(n) for c in CLASSES} for k, n in tally.items()]

    for held in rank_stages(pp, vp, schedule):
        parts: dict[str, Counts] = dict.fromkeys(CLASSES, Counts())
        for s in held:
            pieces = layers(starts[s], starts[s] + counts[s])
            if s == 0:
                pieces += [edge_state(model, ft, k, targets) for k in ("embedding", "positions")]
            if s == stages - 1:
                pieces.append(edge_state(model, ft, "norms", targets))
                if model.breakdown["output"] or pp > 1:
                    pieces.append(edge_state(model, ft, "output", targets))
            for p in pieces:
                for c in CLASSES:
                    parts[c] = parts[c] + p[c]
        split = {c: parts[c].per_gpu(tp, grid) for c in CLASSES}
        out.append(({c: d for c, (d, _) in split.items()}, {c: e for c, (_, e) in split.items()}))
    return out


def stage_state(model, cfg, fw, optimizer: str) -> list[tuple[StateBytes, StateBytes]]:
    """Per PP rank, (dense, expert) state on one GPU before ZeRO divides it."""
    return tuned_stage_state(model, cfg, fw, optimizer, cfg.tp, expert_tp(cfg) * cfg.ep,
                             cfg.pp, cfg.vp, cfg.schedule, config_split(model, cfg))


def tuned_stage_state(model, cfg, fw, optimizer: str, tp, grid, pp, vp, schedule,
                      counts=None):
    """``stage_state`` for a layout given by its sizes (the planner's groups); ``cfg``
    supplies the fine-tune and the ZeRO stage; ``counts`` the layers per model stage
    (default: the framework's rule)."""
    per = class_bytes(model, cfg, fw, optimizer)
    counts = split_layers(model.layers, pp, vp, schedule, fw.split) if counts is None \
        else counts
    return [(_price(d, per), _price(e, per))
            for d, e in _counts(model, cfg.finetune, tp, grid, pp, vp, schedule, counts)]


@dataclass(frozen=True)
class Wire:
    """Whole-model bytes the data-parallel collectives move for a fine-tune: (dense,
    expert) parameters as gathered and gradients as reduced."""

    dense_params: float
    dense_grads: float
    expert_params: float
    expert_grads: float


def wire(model, cfg, fw) -> Wire:
    """ZeRO-3 gathers every parameter in its gathered dtype (NF4 storage as stored); ZeRO-1/2
    gather back what trains; only what trains is reduced (adapters' fp32 grads)."""
    ft = cfg.finetune
    (dense, expert), = _counts(model, ft, 1, 1, 1, 1, None, [model.layers])
    gathered = {"trained": fw.gathered_param_bytes, "adapters": fw.gathered_param_bytes,
                "frozen": fw.gathered_param_bytes,
                "nf4": nf4_bytes.nf4_bytes_per_param(ft.quant_block, ft.double_quant)}
    moves = CLASSES if cfg.zero_stage == 3 else ("trained", "adapters")
    grads = {"trained": fw.grad_bytes, "adapters": ADAPTER_BYTES}

    def total(counts, table, classes):
        return sum(counts[c] * table[c] for c in classes)
    return Wire(total(dense, gathered, moves), total(dense, grads, grads),
                total(expert, gathered, moves), total(expert, grads, grads))


def trainable_per_gpu(model, cfg) -> list[float]:
    """Per PP rank, the trainable parameters on one GPU (trained + adapters, before ZeRO):
    what the optimizer step reads and writes."""
    return tuned_trainable(model, cfg.finetune, cfg.tp, expert_tp(cfg) * cfg.ep, cfg.pp,
                           cfg.vp, cfg.schedule, config_split(model, cfg))


def tuned_trainable(model, ft, tp, grid, pp, vp, schedule, counts) -> list[float]:
    """``trainable_per_gpu`` for a layout given by its sizes (the planner's groups);
    ``counts``: layers per model stage."""
    return [d["trained"] + d["adapters"] + e["trained"] + e["adapters"]
            for d, e in _counts(model, ft, tp, grid, pp, vp, schedule, counts)]


def largest_quantised(model, cfg) -> float:
    """Elements of the largest NF4 weight one GPU dequantises at a time (its TP share)."""
    sizes = [lin.weights / (cfg.tp if lin.split != "none" else 1)
             for kind in modules.kinds(model) for lin in modules.layer(model, kind)
             if lin.quantised]
    return max(sizes, default=0.0)


def dequant_bytes(model, cfg) -> float:
    """QLoRA's transient: one linear's weight dequantised to the compute dtype while its
    GEMM runs (``ledger.finetune.nf4.dequantized_bytes``); 0 without quantisation."""
    ft = cfg.finetune
    if ft is None or not ft.quantized:
        return 0.0
    return nf4_bytes.dequantized_bytes(largest_quantised(model, cfg), ft.compute_bytes,
                                       ft.quant_block, ft.double_quant)


@dataclass(frozen=True)
class TunedLedger:
    """A fine-tune's own figures for one placement (the peak rank's GPU where per GPU)."""

    trainable_params: int  # what peft's get_nb_trainable_parameters counts
    trainable_breakdown: dict  # by ModelSpec.breakdown component
    classes: dict  # class -> parameters on the peak rank's GPU (before ZeRO)
    dequant_bytes: float  # QLoRA's transient dequantised weight (in buffers)
    adapter_activation_bytes: float  # per layer per micro-batch (in activations)


def buffer_framework(model, cfg, fw):
    """The framework as ZeRO-3's gathered-layer buffers see a fine-tune: NF4 weights
    gathered as stored, and no unsharded gradient buffer for a frozen base."""
    ft = cfg.finetune
    if ft is None:
        return fw
    gathered = nf4_bytes.nf4_bytes_per_param(ft.quant_block, ft.double_quant) \
        if ft.quantized else fw.gathered_param_bytes
    return replace(fw, gathered_param_bytes=gathered,
                   grad_bytes=0 if ft.adapters else fw.grad_bytes)


def tied_state(model, cfg, st: StateBytes) -> StateBytes:
    """The state whose embedding gradient a tied pipeline all-reduces: none when the
    embedding is frozen."""
    ft = cfg.finetune
    if ft is None:
        return st
    if ft.adapters or "embedding" in ft.freeze:
        return StateBytes(0, 0, 0)
    return st


def ledger(model, cfg, rank: int) -> TunedLedger:
    """The fine-tune's figures for the peak rank ``rank``."""
    from ledger.arch import adapter_activation_bytes
    from ledger.finetune import trainable

    ft = cfg.finetune
    parts = trainable(model, ft)
    dense, expert = stage_counts(model, cfg)[rank]
    acts = adapter_activation_bytes(model, ft, model.is_moe, cfg.micro_batch, cfg.tp, cfg.cp)
    return TunedLedger(sum(parts.values()), {k: v for k, v in parts.items() if v},
                       {c: dense[c] + expert[c] for c in CLASSES}, dequant_bytes(model, cfg),
                       acts)

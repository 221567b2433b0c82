"""One decoder layer as the config's framework keeps it, and the kinds of layer each
pipeline rank holds: saved bytes (``ledger.arch.activations`` under the framework's
table, dropout, adapters, full recompute of every n-th layer), the backward's working
set, and the largest unit ZeRO-3 gathers. No torch.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from ledger.anatomy.mixers import LayerKind
from ledger.arch import adapter_activation_bytes, layer_activations, recompute_working_bytes
from ledger.arch import table as saved_table
from ledger.config import ParallelConfig, dispatcher, expert_tp
from ledger.frameworks import mlp_width_bytes
from ledger.frameworks import of as framework_of
from ledger.frameworks.fp8_attention import saved_qkv_bytes
from ledger.frameworks.recompute_modules import pre_mlp_norm_recomputed
from ledger.frameworks.module_formats import saved_delta
from ledger.model import ModelSpec
from ledger.placement.act_offload import offloaded_bytes
from ledger.placement.ep_buffers import dispatch_handle_bytes, row_id_map_share
from ledger.placement.stages import (BIDIRECTIONAL, config_split, each_layer_kind, rank_stages,
                                     split_layers, stage_starts)


def _layer_kw(model: ModelSpec, cfg, kind=None, flash=None, recompute=None,
              dropout=None, fp8_qkv: bool = True) -> dict:
    """The arguments ``ledger.arch.activations`` prices one layer with, for this config:
    ``kind`` a ``LayerKind``, an (MoE?, window) pair naming an attention layer, or None
    (the model's typical layer). ``fp8_qkv``: FP8 attention's q, k, v kept in FP8
    (``ledger.frameworks.fp8_attention``); False, at the activation dtype."""
    if kind is not None and not isinstance(kind, LayerKind):
        kind = LayerKind("attention", "moe" if kind[0] else "dense", kind[1])
    fw = framework_of(cfg)
    if dropout is None:
        dropout = getattr(cfg, "dropout", None)  # the planner's namespaces: the default
    return dict(micro_batch=cfg.micro_batch, tp=cfg.tp, cp=cfg.cp,
                sequence_parallel=cfg.sequence_parallel,
                flash=cfg.flash_attention if flash is None else flash,
                recompute=cfg.recompute if recompute is None else recompute,
                act_bytes=cfg.act_bytes, capacity_factor=cfg.moe.load_factor,
                table=_table(model, fw, cfg, fp8_qkv), etp=expert_tp(cfg), kind=kind,
                dropout=fw.dropout if dropout is None else dropout,
                modules=getattr(cfg, "recompute_modules", None),
                moe_norm_recompute=pre_mlp_norm_recomputed(model, cfg, dispatcher(cfg)))


def _table(model, fw, cfg, fp8_qkv: bool):
    """The framework's saved-tensor table, with FP8 attention's q, k, v bytes where it runs
    and TE's row_id_map as the flex dispatcher builds it (``ep_buffers.row_id_map_share``)."""
    t = saved_table(fw.activations)
    qkv = saved_qkv_bytes(cfg) if fp8_qkv else 0.0
    t = replace(t, flash_qkv_bytes=qkv) if qkv else t
    share = row_id_map_share(model, cfg) if t.routing_map_bytes_per_expert else 1.0
    if np.ndim(share) or share != 1:
        t = replace(t, routing_map_bytes_per_expert=t.routing_map_bytes_per_expert * share)
    return t


def layer_activation_bytes(model: ModelSpec, cfg, kind=None, flash=None, recompute=None,
                           dropout=None, offload: bool = True, fp8_qkv: bool = True,
                           share=None):
    """One layer's saved bytes (``ledger.arch.activations``) as the config's framework keeps
    them: Korthikanti's GPT accounting under ``ideal`` (the seed's figure), the tensors
    its own modules save otherwise. ``kind``: the layer's ``LayerKind`` (or an (MoE?,
    window) pair), else the model's typical layer; a fine-tune's adapters add theirs. Full
    recompute of every n-th layer only (``recompute_every``) averages the recomputed and
    the untouched layers. ``offload``: CPU-offloaded layers' bytes live on the host (what
    the GPU holds); False - every layer's bytes, what its kernels write (the step's
    elementwise traffic: an offloaded layer writes them all the same); ``fp8_qkv``:
    ``_layer_kw``'s; ``share``: the recomputed share under full recompute (None:
    ``recomputed_share``; 1 a recomputed layer, 0 one run whole)."""
    kw = _layer_kw(model, cfg, kind, flash, recompute, dropout, fp8_qkv)
    adapters = _adapters(model, cfg, kw)
    acts = layer_activations(model, **kw)
    kept = acts.total_bytes - offload * offloaded_bytes(model, cfg, kind, kw["table"],
                                                        acts)  # act_offload; False: written
    if offload and getattr(cfg, "paged_stash", None) is not None:  # the experts' rows live
        kept = kept - acts.experts_bytes  # in the stash's kept buffer (placement.stash)
    kept = kept + _module_formats(model, cfg, kw)
    if kw["recompute"] != "full":  # CPU-offloaded layers' activations live on the host
        layers = min(getattr(cfg, "offload_activation_layers", 0), model.layers) if offload else 0
        # the dispatcher's routing metadata is no saved tensor: it stays on the GPU (what
        # its preprocessing writes is the dispatch's own time, not the layer's traffic)
        handle = offload * dispatch_handle_bytes(model, cfg, kind, kw["recompute"])
        return (adapters + kept) * (1 - layers / model.layers) + handle
    kept = kept / getattr(cfg, "recompute_group", 1)  # one input kept per group
    share = recomputed_share(model, cfg) if share is None else share
    if share == 1:
        return kept
    whole = adapters + layer_activations(model, **(kw | {"recompute": "none"})).total_bytes \
        + offload * dispatch_handle_bytes(model, cfg, kind, "none")
    return kept * share + whole * (1 - share)


def layer_stashed_bytes(model: ModelSpec, cfg, kind=None) -> float:
    """What one layer's routed experts save per micro-batch into the MoE paged stash
    (``ledger.placement.stash``): the experts' saved bytes at their average rows; 0
    without the stash."""
    if getattr(cfg, "paged_stash", None) is None:
        return 0.0
    return layer_activations(model, **_layer_kw(model, cfg, kind)).experts_bytes


def _module_formats(model: ModelSpec, cfg, kw) -> float:
    """What a quantization file's modules save beyond the recipe's table
    (``ledger.frameworks.module_formats.saved_delta``); nothing under full recompute."""
    rec = getattr(framework_of(cfg), "fp8", None)
    kind = kw["kind"]
    if rec is None or not rec.module_formats or kind is None or kw["recompute"] == "full":
        return 0.0
    sp_div = np.where(kw["sequence_parallel"], kw["tp"], 1)
    return saved_delta(rec, model, kind, tokens=model.seq_len * kw["micro_batch"] / kw["cp"],
                       tp=kw["tp"], sp_div=sp_div, e=kw["act_bytes"], flash=kw["flash"],
                       shard_input=kw["table"].sp_gemm_input_shard)


def layer_offloaded_bytes(model: ModelSpec, cfg, kind=None) -> float:
    """What fine-grained activation offloading moves to the host of one layer's saved
    bytes per micro-batch (``ledger.placement.act_offload``)."""
    kw = _layer_kw(model, cfg, kind, None, None, None)
    return offloaded_bytes(model, cfg, kind, kw["table"], layer_activations(model, **kw))


def recomputed_share(model: ModelSpec, cfg, whole: bool = False) -> float:
    """The share of a rank's layers full recompute runs again: every n-th
    (``recompute_every``, torchtitan's selective layer AC), or the first
    ``recompute_layers`` of each model chunk (Megatron --recompute-method block: each
    chunk's TransformerBlock checkpoints its layers below the count, recompute.py L167-180
    @d98e8a64, num_layers_per_pipeline_rank its own layers, transformer_block.py L334) on
    the rank that paces the pipeline - the most layers, then the most recomputed (the step
    time's; the memory prices each chunk's own, ``block_recomputed``) - or, ``whole``,
    over the whole model (the hardware FLOPs)."""
    share = 1 / getattr(cfg, "recompute_every", 1)
    n = getattr(cfg, "recompute_layers", None)
    if n is not None:
        split = config_split(model, cfg)
        held = [(sum(split[s] for s in st), sum(min(n, split[s]) for s in st))
                for st in ([range(len(split))] if whole else
                           rank_stages(cfg.pp, cfg.vp, cfg.schedule))]
        layers, again = max(held)
        share = share * (again / layers if layers else 1.0)
    return share


def block_recomputed(model: ModelSpec, cfg, split, kinds) -> np.ndarray | None:
    """Per model stage and kind, the layers --recompute-method block runs again: the first
    ``recompute_layers`` of the stage's own (``recomputed_share``), the MTP layers on the
    last stage none (multi_token_prediction.py L1630-1640 @d98e8a64: block is not
    supported there and they run whole); None without a block recompute."""
    n = getattr(cfg, "recompute_layers", None)
    if n is None or getattr(cfg, "recompute", None) != "full":
        return None
    each, starts = each_layer_kind(model), stage_starts(split)
    out = np.zeros((len(split), len(kinds)))
    for st, count in enumerate(split):
        for key in each[starts[st]:starts[st] + min(n, count)]:
            out[st, kinds.index(key)] += 1
    return out

def _adapters(model: ModelSpec, cfg, kw: dict):
    """What a fine-tune's LoRA adapters save in one layer (``ledger.arch.adapters``)."""
    kind = kw["kind"] if kw["kind"] is not None else model.is_moe
    return adapter_activation_bytes(model, getattr(cfg, "finetune", None), kind,
                                    cfg.micro_batch, cfg.tp, cfg.cp)


def layer_working_bytes(model: ModelSpec, cfg, kind=None, flash=None):
    """What one layer's backward holds beyond what the layer saved
    (``ledger.arch.activations.recompute_working_bytes``); under full recompute the
    adapters' tensors too, saved again by the recomputed forward."""
    kw = _layer_kw(model, cfg, kind, flash)
    again = _adapters(model, cfg, kw) if kw["recompute"] == "full" else 0.0
    group = getattr(cfg, "recompute_group", 1)  # --recompute-method uniform: the group's
    if kw["recompute"] == "full" and group > 1:  # other layers rebuilt before its backward
        again = again + (group - 1) * layer_activations(
            model, **(kw | {"recompute": "none"})).total_bytes
    acts = layer_activations(model, **kw)
    reloaded = offloaded_bytes(model, cfg, kind, kw["table"], acts)  # its inputs back
    stash = getattr(cfg, "paged_stash", None)  # (act_offload); the paged stash's reloaded
    padded = stash[1] * acts.experts_bytes if stash is not None else 0.0  # rows, padded
    return recompute_working_bytes(model, **kw) + again + reloaded + padded


def activation_bytes_per_layer(model: ModelSpec, cfg: ParallelConfig,
                               flash: bool | None = None, recompute: str | None = None,
                               dropout: float | None = None, offload: bool = True,
                               fp8_qkv: bool = True) -> float:
    """Bytes one layer saves for backward for this placement, averaged over the model's
    layers (dense and MoE, local and global ones differ); the config's attention kernel,
    recompute mode and dropout unless given (``offload``: ``layer_activation_bytes``; False also
    before fine-grained activation offload moves any; ``fp8_qkv``: ``_layer_kw``'s)."""
    kinds, counts = layer_kinds(model, 1)
    return sum(n * layer_activation_bytes(model, cfg, k, flash, recompute, dropout, offload,
                                          fp8_qkv)
               for k, n in zip(kinds, counts[0])) / model.layers


def routed_activation_bytes(model: ModelSpec, cfg) -> float:
    """The routed experts' activation tensors one layer keeps (fc1's output and fc2's input,
    ``ledger.arch.activations``' experts term without the permuted rows fc1 reads), averaged
    over the stack: what a fused grouped MLP's GEMM epilogues write in place of the
    activation's own kernel (``ledger.step.eager.fused_grouped_mlp``). 0 for a dense model."""
    if not getattr(model, "is_moe", False):
        return 0.0
    kw = _layer_kw(model, cfg)
    t, e = kw["table"], kw["act_bytes"]
    per_f = t.mlp_gated_f if model.gated_mlp else t.mlp_plain_f
    width = mlp_width_bytes(t, e, per_f, t.expert_swiglu_recompute) * model.moe_ffn_hidden
    tokens = model.seq_len * cfg.micro_batch / cfg.cp
    moe_share = model.mlp_share("moe")
    return moe_share * tokens * model.top_k * kw["capacity_factor"] * width / cfg.tp


def layer_kinds(model: ModelSpec, pp: int, vp: int = 1, schedule: str | None = None,
                counts=None, rule: str = "ends"):
    """The distinct kinds of layer (``ledger.anatomy.mixers.LayerKind``) and, per PP rank,
    how many of each it holds: a stage's activations are priced once per kind (numbers or
    arrays alike). ``counts``/``rule``: the split (``ledger.placement.stages.split_layers``);
    ``schedule``: which stages a rank holds (``rank_stages``)."""
    if counts is None:  # the split of a rule: the same for every config of this layout
        try:
            kinds, table = _layer_kinds(model, pp, vp, schedule, rule)
        except TypeError:  # a model with a field that does not hash
            kinds, table = _kinds_table(model, pp, vp, schedule, rule, None)
        return list(kinds), table.copy()
    return _kinds_table(model, pp, vp, schedule, rule, counts)


@lru_cache(maxsize=4096)
def _layer_kinds(model: ModelSpec, pp: int, vp: int, schedule, rule: str):
    return _kinds_table(model, pp, vp, schedule, rule, None)


def _kinds_table(model: ModelSpec, pp: int, vp: int, schedule, rule: str, counts):
    counts = split_layers(model.layers, pp, vp, schedule, rule, counts)
    starts = stage_starts(counts)
    each = each_layer_kind(model)
    per_stage = []
    for st in range(len(counts)):  # kind_counts over the stage's layers, in layer order
        held: dict = {}
        for key in each[starts[st]:starts[st] + counts[st]]:
            held[key] = held.get(key, 0) + 1
        per_stage.append(held)
    per_stage[-1] = _merged(per_stage[-1], mtp_held(model))
    kinds = sorted({k for c in per_stage for k in c}, key=LayerKind.order)
    table = np.zeros((pp, len(kinds)))
    for r, held in enumerate(rank_stages(pp, vp, schedule)):
        for st in held:
            for kind, n in per_stage[st].items():
                table[r, kinds.index(kind)] += n
    return kinds, table


def inflight_kinds(model: ModelSpec, pp: int, vp: int = 1, schedule: str | None = None,
                   counts=None, rule: str = "ends"):
    """``layer_kinds`` weighted as the rank's activations are in flight at its peak: per
    rank and kind, the layers of each stage it holds times that stage's share of the
    micro-batches alive, so that (micro-batches in flight, ``held_closed``'s chunks) x this
    row is what the rank keeps. Every stage alike but under DualPipe, whose rank r holds
    stage h = min(r, pp-1-r) of the direction entering on its side for pp - h micro-batches
    and stage pp-1-h for h + 1 at its peak (pp + 1 in all, DeepSeek-V3 report Table 2;
    dualpipe.py L346-384 @3da1bbea: steps 1-3 run 2(pp/2-h-1) + h + 1 forwards of the first
    chunk and hold one of the second until step 3's B1 W F1 ends; tests/test_dualpipe.py
    walks it): the first rank keeps 16 micro-batches of the embedding's stage and one of
    the output head's, not 8.5 of each."""
    kinds, table = layer_kinds(model, pp, vp, schedule, counts, rule)
    if schedule not in BIDIRECTIONAL or pp < 2:
        return kinds, table
    split = split_layers(model.layers, pp, vp, schedule, rule, counts)
    starts = stage_starts(split)
    each = each_layer_kind(model)
    out = np.zeros_like(table)
    for r in range(pp):
        h = min(r, pp - 1 - r)
        for stage, alive in ((h, pp - h), (pp - 1 - h, h + 1)):
            held = {}
            for key in each[starts[stage]:starts[stage] + split[stage]]:
                held[key] = held.get(key, 0) + 1
            if stage == pp - 1:
                held = _merged(held, mtp_held(model))
            for kind, n in held.items():
                out[r, kinds.index(kind)] += n * 2 * alive / (pp + 1)
    return kinds, out


def mtp_held(model: ModelSpec) -> dict:
    """The layers the MTP depths run beside the output head, on the last stage, by kind:
    each depth's block (``ModelSpec.mtp_kinds``: DeepSeek-V3's one layer, Nemotron 3's
    "*E"), every depth - also when the depths share one block's weights."""
    held: dict = {}
    for kind in model.mtp_kinds if model.mtp_layers else ():
        held[kind] = held.get(kind, 0) + model.mtp_layers
    return held


def _merged(a: dict, b: dict) -> dict:
    return {k: a.get(k, 0) + b.get(k, 0) for k in a | b}


def largest_layer_params(model: ModelSpec, cfg) -> float:
    """Parameters on one GPU of the largest layer ZeRO-3 gathers at once: its tp share,
    its experts' etp x ep share."""
    return max(split / cfg.tp + repl + routed / (expert_tp(cfg) * cfg.ep)
               for split, repl, routed in (model.layer_params(k) for k in model.kind_counts))


def largest_unit_params(model: ModelSpec, cfg: ParallelConfig) -> float:
    """Parameters on one GPU of the largest unit ZeRO-3 gathers at once: a layer
    (``largest_layer_params``) or the embedding / output matrix."""
    return max(largest_layer_params(model, cfg), model.vocab * model.hidden / cfg.tp)

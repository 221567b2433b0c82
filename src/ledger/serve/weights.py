"""Weights per GPU when vLLM serves a model: the ledger's own sharding of every parameter
(``ledger.placement.stages.stage_params``) over vLLM's pipeline split, with what vLLM does
differently - it replicates a KV head when tp exceeds the KV heads, splits the recurrent
mixers Megatron-Core keeps whole (``vllm_mixer_parts``), and loads no MTP module without
speculative decoding.

>>> from ledger.model import llama3_8b
>>> from ledger.serve.engine import ServeConfig
>>> round(weight_bytes_by_rank(llama3_8b(), ServeConfig(context=8192))[0] / 2**30, 2)
14.96
"""
from __future__ import annotations

from dataclasses import replace

from ledger.errors import LedgerError, require_divides
from ledger.placement import stage_params
from ledger.serve.cache import kv_heads_per_gpu
from ledger.serve.engine import VLLM_COMMIT, WEIGHT_BYTES
from ledger.serve.qbytes import edge_delta_bytes, layer_delta_bytes
from ledger.serve.state import RECURRENT, UNSERVED, has_state, mamba2_groups


def pipeline_split(layers: int, pp: int) -> list[int]:
    """Layers per pipeline stage as vLLM splits them: layers // pp each, the remainder one
    apiece to the stages before the last, from the second-last back (get_pp_indices,
    vllm/distributed/utils.py:124-129; VLLM_PP_LAYER_PARTITION overrides it).

    >>> pipeline_split(126, 4), pipeline_split(61, 2)
    ([31, 32, 32, 31], [31, 30])
    """
    if layers < pp:
        raise LedgerError("pp", f"pp({pp}) exceeds the model's layers({layers})")
    out = [layers // pp] * pp
    for i in range(2, layers % pp + 2):
        out[-i] += 1
    return out


def stage_ranges(layers: int, pp: int) -> list[range]:
    """The layer indices each pipeline stage holds."""
    out, start = [], 0
    for n in pipeline_split(layers, pp):
        out.append(range(start, start + n))
        start += n
    return out


def check(model, cfg) -> None:
    """What the layout needs of the model, as vLLM's layers divide it (the recurrent
    states' own splits: ``ledger.serve.state``)."""
    kinds = model.kind_counts
    if model.family in UNSERVED and has_state(model):
        raise LedgerError("model", f"vLLM serves no {model.family!r} model at "
                                   f"{VLLM_COMMIT[:10]} ({UNSERVED[model.family]} is not in "
                                   f"vllm/model_executor/models/registry.py)")
    if any(k.attention for k in kinds):
        require_divides("heads", model.heads, "tp", cfg.tp)
        kv_heads_per_gpu(model, cfg.tp)
    if any(k.mlp == "dense" for k in kinds):
        require_divides("ffn_hidden", model.ffn_hidden, "tp", cfg.tp)
    pipeline_split(model.layers, cfg.pp)
    if cfg.ep > 1 and not model.is_moe:
        raise LedgerError("ep", f"ep({cfg.ep}) > 1 but {model.name} has no experts")
    if model.is_moe:
        # vLLM gives a remainder of experts to the first ranks (determine_expert_map); the
        # ledger prices an even split only
        require_divides("num_experts", model.num_experts, "ep", cfg.ep)
        require_divides("moe_ffn_hidden", model.moe_ffn_hidden, "tp*dp/ep", cfg.etp)


def vllm_mixer_parts(model, mixer: str, tp: int) -> tuple[float, float]:
    """(split by TP, replicated) parameters of a recurrent mixer as vLLM builds it:
    - Mamba-1 (MambaMixer, vllm/model_executor/layers/mamba/mamba_mixer.py:91-189): every
      projection, the convolution, A and D split; the RMSNorms on dt, B and C whole;
    - Mamba-2 (MambaMixer2, mamba_mixer2.py:285-466): heads split, and with one group and
      tp > 1 its B and C projections and convolution channels whole on every rank
      (the groups replicated to accompany the heads, mamba_utils.py:200-210);
    - Gated DeltaNet (gdn_linear_attn.py:313-398): as the ledger splits it;
    - KDA (vllm/model_executor/layers/kda.py:137-245): all split but the low-rank gates'
      first projections (f_a_proj, g_a_proj: ReplicatedLinear) and o_norm;
    - lightning attention (layers/mamba/linear_attn.py:302-330, its norm split too) and
      LFM2's short convolution (layers/mamba/short_conv.py:53-76): all split."""
    h = model.hidden
    if mixer in ("mamba", "attention+mamba"):
        m = model.mamba
        if m.version == 1:
            norms = (m.dt_rank + 2 * m.state) * m.dt_norms
            return m.params(h) - norms, norms
        if mamba2_groups(m, tp) == m.groups:
            return m.params(h), 0
        bc = 2 * m.groups * m.state * (h + m.proj_bias + m.conv_kernel + m.conv_bias)
        return m.params(h) - bc, bc
    if mixer == "linear":
        la = model.linear
        if la.kind == "gdn":
            return la.parts(h)
        whole = 2 * h * la.value_dim + la.value_dim if la.kind == "kda" else 0
        return la.params(h) - whole, whole
    if mixer == "conv":
        return model.conv.params(h), 0
    return 0, 0


def _mixer_correction(model, tp: int, mixer: str) -> float:
    """Parameters one GPU holds beyond the ledger's sharding of a layer's mixer."""
    if mixer not in RECURRENT:
        return 0.0
    split, repl = vllm_mixer_parts(model, mixer, tp)
    record = model.conv if mixer == "conv" else \
        model.linear if mixer == "linear" else model.mamba
    mine_split, mine_repl = record.parts(model.hidden)
    return split / tp + repl - (mine_split / tp + mine_repl)


def _kv_replicas(model, cfg) -> float:
    """Parameters per layer one GPU holds beyond its tp share of K and V: with tp above the
    KV heads, vLLM's QKVParallelLinear keeps one whole head per GPU (num_kv_heads = 1,
    num_kv_head_replicas = tp / kv_heads; vllm/model_executor/layers/linear.py:1029-1034)."""
    if model.attention == "mla":
        return 0.0
    extra_heads = kv_heads_per_gpu(model, cfg.tp) - model.kv_heads / cfg.tp
    width = model.head_dim + model.v_head_dim
    return extra_heads * width * (model.hidden + model.qkv_bias)


def params_by_rank(model, cfg) -> list[tuple[float, float]]:
    """(dense, routed-expert) parameters on one GPU of each pipeline rank: attention and
    dense MLPs split by tp, routed experts by tp x dp (``ServeConfig.etp`` x ep), norms
    and the router replicated, the embedding on the first stage and the output head on
    the last; MTP modules left out (DeepseekV2ForCausalLM.load_weights skips them,
    vllm/model_executor/models/deepseek_v2.py:1382-1384)."""
    served = replace(model, mtp_layers=0)
    counts = pipeline_split(model.layers, cfg.pp)
    extra = _kv_replicas(model, cfg)
    mixers = {k.mixer: _mixer_correction(model, cfg.tp, k.mixer) for k in model.kind_counts}
    out = []
    for (dense, expert), held in zip(stage_params(served, cfg, counts),
                                     stage_ranges(model.layers, cfg.pp)):
        kinds = [model.layer_kind(i) for i in held]
        dense += sum(extra * k.attention + mixers[k.mixer] for k in kinds)
        out.append((dense, expert))
    return out


# fp32 tensors vLLM builds at a MoE layer's router beyond the ledger's bf16 parameters
# (v0.22.0 vllm/model_executor/models/): the router's e_score_correction_bias [E], fp32 -
# deepseek_v2.py:278-281 for topk_method noaux_tc (DeepSeek-V3 / R1 / V3.2, Kimi-K2, GLM-5's
# GlmMoeDsaForCausalLM, registry.py:99-124), glm4_moe.py:152-154 always, minimax_m2.py:92-101
# with use_routing_bias (MiniMax-M2's released config.json sets it) - which the training
# count leaves out (a buffer, ``ledger.io.hf.families._mla``) and the files keep in fp32 too
# (GLM-4.5-FP8's, Kimi-K2.5's tensor lists); and GLM-4.5's router weight itself, an fp32
# nn.Linear (glm4_moe.py:146-151), which its files keep in bf16
CORRECTION_BIAS = ("deepseek_v3", "deepseek_v32", "glm4_moe", "glm_moe_dsa", "minimax_m2")
FP32_ROUTER = ("glm4_moe",)


def router_fp32_bytes(model, kind, resident: bool = True) -> float:
    """Bytes one GPU holds for a layer of ``kind`` beyond its bf16 router: the fp32
    ``e_score_correction_bias`` of the families in ``CORRECTION_BIAS`` and, resident, the
    fp32 router of ``FP32_ROUTER`` (2 B more a weight). The router is replicated (built
    with quant_config=None and no split), so every GPU holds all of it."""
    if kind.mlp != "moe":
        return 0.0
    e = model.num_experts
    bias = 4 * e if model.family in CORRECTION_BIAS else 0
    router = 2 * model.hidden * e if resident and model.family in FP32_ROUTER else 0
    return float(bias + router)


def bytes_by_rank(model, cfg, backend: str = "triton") -> list[tuple[float, float]]:
    """(dense, routed-expert) bytes of weights on one GPU of each pipeline rank: the
    parameters of ``params_by_rank`` in bf16, and where ``cfg.quant`` stores them
    otherwise, each quantized matrix's own bytes (``ledger.serve.qbytes``; ``backend``:
    the MXFP4 MoE kernels', or ``checkpoint`` for the files' layout), and the routers'
    fp32 tensors (``router_fp32_bytes``)."""
    q, out = cfg.quant, []
    ranges = stage_ranges(model.layers, cfg.pp)
    for r, ((dense, expert), held) in enumerate(zip(params_by_rank(model, cfg), ranges)):
        dense_b, expert_b = dense * WEIGHT_BYTES, expert * WEIGHT_BYTES
        dense_b += sum(router_fp32_bytes(model, model.layer_kind(i), backend != "checkpoint")
                       for i in held)
        if q is not None:
            for i in held:
                d, e = layer_delta_bytes(model, cfg, q, i, backend)
                dense_b, expert_b = dense_b + d, expert_b + e
            dense_b += edge_delta_bytes(model, cfg, q, r == len(ranges) - 1)
        out.append((dense_b, expert_b))
    return out


def weight_bytes_by_rank(model, cfg, backend: str = "triton") -> list[float]:
    """Bytes of weights on one GPU of each pipeline rank (``bytes_by_rank``)."""
    return [dense + expert for dense, expert in bytes_by_rank(model, cfg, backend)]


def lookup_params(model, cfg, rank: int) -> float:
    """Parameters of ``rank`` a decode step only indexes: the embedding table (its tp
    share) and learned positions, on the first stage - a step reads the rows of its tokens,
    not the table; unless the output head is that same table (tied, one stage)."""
    if rank != 0:
        return 0.0
    b = model.breakdown
    table = 0.0 if model.tied_embeddings and cfg.pp == 1 else b["embedding"] / cfg.tp
    return table + b["positions"]

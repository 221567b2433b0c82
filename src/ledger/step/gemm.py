"""GEMM seconds: one GEMM at its own efficiency, and the forward GEMMs of one layer as
the frameworks shape them under TP, ETP and EP (ledger.step sums them into step time).
Under an FP8 recipe each linear layer's GEMMs run at the GPU's FP8 peak where
``ledger.frameworks.fp8.gemm_precision`` says so (the same in fprop, dgrad and wgrad: every pass of
a linear layer), at the same sustained share of that peak (no separate FP8 figure is
published or fitted); the attention core, the router and the output head stay BF16 (the head in MXFP8 under
Megatron's fp8_output_proj: ``head_peak``, ``ledger.frameworks.fp8_head``)."""
from __future__ import annotations

import numpy as np

from ledger.anatomy import compressed
from ledger.arch.recurrent import projection_weights
from ledger.config import expert_tp
from ledger.finetune import modules
from ledger.frameworks import of as framework_of
from ledger.frameworks import peak_flops
from ledger.model import ModelSpec
from ledger.system.gemm_rates import kernel_share, relative_share
from ledger.placement import moe_tokens


def gemm_s(m, n, k, gpu, cal, count=1.0, peak=None):
    """Seconds of ``count`` (m x k) @ (k x n) GEMMs: 2mnk FLOPs at the GPU's sustained
    share of peak, lowered by each dimension d as d / (d + d_half) - small tiles fill few
    SMs and reuse little data (NVIDIA, Matrix Multiplication Background guide: tile and
    wave quantisation, arithmetic intensity). A thin dimension turns a GEMM bandwidth-
    bound once its arithmetic intensity (~ d FLOP per byte) falls below the GPU's machine
    balance, so d_half = gemm_half_balance x peak FLOP/s / HBM bytes/s (roofline), in
    BF16 terms: at the FP8 rate (``peak``) both the FLOP/s and the FLOP per byte of an
    element double, so d_half in elements stays."""
    half = cal.gemm_half_balance * gpu.bf16_flops / gpu.hbm_bytes_per_s
    eff = gpu.gemm_efficiency * (m / (m + half)) * (n / (n + half)) * (k / (k + half))
    return count * 2.0 * m * n * k / ((gpu.bf16_flops if peak is None else peak) * eff)


# the peak a module runs at where a recipe's quantization file sets its format apart
# (ledger.frameworks.module_formats: Transformer Engine runs the matched module's GEMMs in
# that format - BF16, or MXFP8 at the FP8 peak - in every pass)
FORMAT_PEAK = {"bf16": "bf16_flops", "mxfp8": "fp8_flops"}


def _peaks(cfg, gpu) -> dict:
    """GEMM name (ledger.frameworks.fp8.GEMMS) -> the peak its FLOPs run at under the config;
    and the modules a quantization file can set apart (``module_formats``): a Mamba mixer's
    in_proj / out_proj (``mamba_in`` / ``mamba_out``, else qkv's / attn_out's peak) and
    LatentMoE's projections (``latent``, else the dense MLP's), attention's ``qkv`` /
    ``attn_out`` - each at its own format's peak where the file names it. A low-precision
    GEMM's datasheet peak is taken times the share its kernels sustain against BF16's where
    Transformer Engine measured it (``ledger.system.gemm_rates``: the recipe's kernel, or
    MXFP8's for a module the file sets to MXFP8)."""
    fw = framework_of(cfg)
    rec = fw.fp8
    low = relative_share(gpu.name, rec)  # the recipe's low-precision kernels' measured share
    out = {}
    for g in ("qkv", "attn_out", "mla_down", "mla_up", "mlp_up", "mlp_down", "experts_up",
              "experts_down", "shared_up", "shared_down"):
        peak = peak_flops(gpu, fw, g)
        out[g] = peak if peak == gpu.bf16_flops else peak * low
    out |= {"mamba_in": out["qkv"], "mamba_out": out["attn_out"], "latent": out["mlp_up"]}
    for module, fmt in (rec.module_formats if rec is not None else ()):
        out[module] = getattr(gpu, FORMAT_PEAK[fmt]) * kernel_share(gpu.name, fmt)
    return out


def head_peak(cfg, gpu):
    """The peak the LM head's GEMMs run at: MXFP8's (the FP8 peak times its kernels' measured
    share, as a quantization file's MXFP8 module) under ``fp8_output_proj``
    (``ledger.frameworks.fp8_head``), else None (BF16, ``gemm_s``'s default)."""
    from ledger.frameworks.fp8_head import fp8_head

    if not fp8_head(cfg) or not getattr(gpu, "fp8_flops", 0.0) > 0:
        return None
    return gpu.fp8_flops * kernel_share(gpu.name, "mxfp8")


def _csa_gemms(model: ModelSpec, tokens, tp, gpu, cal, pk, ratio: int):
    """Forward seconds of one DeepSeek-V4 attention block's projections
    (``ledger.anatomy.compressed``), split as its parameters are: q_a and kv_proj whole at
    the MLA down projections' precision, q_b split at the up projections', the grouped o_a
    (o_groups GEMMs of heads x d / g -> o_lora) and o_b at the output projection's; the
    compressor's and indexer's projections stay BF16, as the release ships them
    (modeling_deepseek_v4.py L1255-1265)."""
    h, r_q, d, c = model.hidden, model.q_lora_rank, model.head_dim, model.compressed
    down, up, out = pk["mla_down"], pk["mla_up"], pk["attn_out"]
    group_in = model.heads * d / c.o_groups
    t = gemm_s(tokens, r_q, h, gpu, cal, peak=down) + gemm_s(tokens, d, h, gpu, cal, peak=down) \
        + gemm_s(tokens, model.heads * d / tp, r_q, gpu, cal, peak=up) \
        + gemm_s(tokens, c.o_lora_rank, group_in, gpu, cal, c.o_groups / tp, peak=out) \
        + gemm_s(tokens, h, c.o_groups * c.o_lora_rank / tp, gpu, cal, peak=out)
    if ratio:
        t = t + gemm_s(tokens, (2 if ratio == compressed.INDEXED_RATIO else 1) * 2 * d, h,
                       gpu, cal)
    if ratio == compressed.INDEXED_RATIO:
        ih, ihd = model.index_heads, model.index_head_dim
        t = t + gemm_s(tokens, 4 * ihd + ih, h, gpu, cal) + gemm_s(tokens, ih * ihd, r_q,
                                                                   gpu, cal)
    return t


def hc_gemms_s(model: ModelSpec, tokens, gpu, cal):
    """Forward seconds of one layer's two mHC projections, n h -> (2 + n) n, whole on
    every rank in BF16 (hyper_connection.py L182-193 @ d98e8a64: a plain nn.Linear)."""
    n = model.hc_mult
    return 2 * gemm_s(tokens, (2 + n) * n, n * model.hidden, gpu, cal) if n else 0.0


def indexer_core_s(model: ModelSpec, cfg, tokens, gpu, cal):
    """Forward seconds of DeepSeek-V4's indexer scores, averaged over the stack: per CSA
    layer and indexer head, the queries against the causal half of the compressed keys
    (s / 4 entries at d_I), its heads split by TP as the attention's are."""
    if model.attention != "csa" or not model.index_heads:
        return 0.0
    ratio = compressed.INDEXED_RATIO
    share = model.compressed.ratios.count(ratio) / model.layers
    entries = model.seq_len / ratio
    return share * model.index_heads / cfg.tp * 0.5 * gemm_s(tokens, entries,
                                                             model.index_head_dim, gpu, cal)


def _attention_gemms(model: ModelSpec, tokens, tp, gpu, cal, pk, ratio: int = 0):
    """Forward seconds of one layer's attention projections (flops.attention_matmul_params'
    weights). MLA: the down projections whole on every TP rank, the up projections and o
    split (Megatron-Core, megatron/core/models/gpt/gpt_layer_specs.py:105-128 at
    d98e8a64dd); DeepSeek-V4's by its compress ``ratio`` (``_csa_gemms``); otherwise QKV
    column- and o row-parallel."""
    if model.attention == "csa":
        return _csa_gemms(model, tokens, tp, gpu, cal, pk, ratio)
    h, v_width = model.hidden, model.heads * model.v_head_dim
    o = gemm_s(tokens, h, v_width / tp, gpu, cal, peak=pk["attn_out"])
    if model.attention != "mla":
        kv = model.kv_dim + model.kv_heads * model.v_head_dim
        return gemm_s(tokens, (model.q_dim + kv) / tp, h, gpu, cal,
                      peak=pk["qkv"]) + o
    r_q, r_kv, rope = model.q_lora_rank, model.kv_lora_rank, model.qk_rope_head_dim
    down, up = pk["mla_down"], pk["mla_up"]
    kv = gemm_s(tokens, r_kv + rope, h, gpu, cal, peak=down) + gemm_s(
        tokens, model.heads * (model.qk_nope_head_dim + model.v_head_dim) / tp, r_kv, gpu, cal,
        peak=up)
    q = gemm_s(tokens, model.q_dim / tp, h, gpu, cal, peak=pk["qkv"]) if r_q is None else \
        gemm_s(tokens, r_q, h, gpu, cal, peak=down) \
        + gemm_s(tokens, model.q_dim / tp, r_q, gpu, cal, peak=up)
    return q + kv + o


def _mlp_gemms(width, tokens, model: ModelSpec, tp, gpu, cal, pk, kind="mlp", h=None):
    """Forward seconds of one MLP of ``width`` on ``h``-wide rows (default hidden): up (and
    gate) column-, down row-parallel; ``kind``: mlp | experts | shared, for its GEMMs'
    precision."""
    h = model.hidden if h is None else h
    up = (2 if model.gated_mlp else 1) * width / tp
    return gemm_s(tokens, up, h, gpu, cal, peak=pk[kind + "_up"]) \
        + gemm_s(tokens, h, width / tp, gpu, cal, peak=pk[kind + "_down"])


def _mixer_gemms(model: ModelSpec, mixer: str, tokens, tp, gpu, cal, pk, ratio=0) -> dict:
    """Forward seconds of one layer's sequence-mixer projections, by component (attention,
    and ssm / linear_attention / conv): attention's, or a recurrent mixer's in_proj
    (column-parallel) and out_proj (row-parallel) as Megatron-Core lays them
    (megatron/core/models/hybrid/hybrid_layer_specs.py:110-131 at d98e8a64; the mixers
    without a TP form run at tp = 1, ``ledger.placement`` refuses more); Mamba-1's x_proj
    and dt_proj, KDA's low-rank gates beside them."""
    h, out = model.hidden, {}
    if mixer in ("attention", "attention+mamba"):
        out["attention"] = _attention_gemms(model, tokens, tp, gpu, cal, pk, ratio)
    if model.hc_mult:
        out["hyper_connections"] = hc_gemms_s(model, tokens, gpu, cal)
    if "mamba" in mixer:
        mb = model.mamba
        t = gemm_s(tokens, mb.in_width / tp, h, gpu, cal, peak=pk["mamba_in"]) \
            + gemm_s(tokens, h, mb.inner / tp, gpu, cal, peak=pk["mamba_out"])
        if mb.version == 1:
            r, n = mb.dt_rank, mb.state
            t = t + gemm_s(tokens, r + 2 * n, mb.inner, gpu, cal) \
                + gemm_s(tokens, mb.inner, r, gpu, cal)
        out["ssm"] = t
    elif mixer == "linear":
        la = model.linear
        width = projection_weights(model, mixer) / h - la.value_width  # all but out_proj
        out["linear_attention"] = gemm_s(tokens, width / tp, h, gpu, cal, peak=pk["qkv"]) \
            + gemm_s(tokens, h, la.value_width / tp, gpu, cal, peak=pk["attn_out"])
    elif mixer == "conv":
        out["conv"] = gemm_s(tokens, 3 * h, h, gpu, cal, peak=pk["qkv"]) \
            + gemm_s(tokens, h, h, gpu, cal, peak=pk["attn_out"])
    return out


def kind_gemms_s(model: ModelSpec, kind, cfg, tokens, gpu, cal, pk=None) -> dict:
    """Forward GEMM seconds of one layer of ``kind`` by component (``ModelSpec.breakdown``'s
    names): its mixer and its MLP block - the dense MLP, or the router, the routed experts
    a GPU holds and the shared expert."""
    pk = _peaks(cfg, gpu) if pk is None else pk
    tp, h = cfg.tp, model.hidden
    out = _mixer_gemms(model.attention_of(kind), kind.mixer, tokens, tp, gpu, cal, pk,
                       kind.compress)
    if kind.mlp == "dense":
        return out | {"mlp": _mlp_gemms(model.ffn_hidden, tokens, model, tp, gpu, cal, pk)}
    if kind.mlp == "none":
        return out
    etp = expert_tp(cfg)
    # rows each local expert sees: the dispatcher's tokens (comms_ep.moe_tokens: the SP
    # shard under Megatron) x top_k over the EP group's experts, gathered over ETP
    per_expert = moe_tokens(cfg, tokens) * model.top_k * cfg.ep * etp / model.num_experts
    # ... at the grouped GEMMs' fitted share of the dense rate where the framework runs
    # them as the rows it was fitted on (Framework.grouped_gemm_fitted)
    grouped = getattr(cal, "grouped_gemm_share", 1.0) \
        if framework_of(cfg).grouped_gemm_fitted else 1.0
    routed = model.num_experts / cfg.ep * _mlp_gemms(model.moe_ffn_hidden, per_expert, model,
                                                     etp, gpu, cal, pk, "experts",
                                                     model.expert_hidden) / grouped
    shared = _mlp_gemms(model.shared_ffn, tokens, model, tp, gpu, cal, pk, "shared") \
        if model.shared_experts else 0.0
    out = out | {"experts": routed, "shared_experts": shared,
                 "router": gemm_s(tokens, model.num_experts, h, gpu, cal)}
    if model.moe_latent:  # LatentMoE's projections, whole on each GPU, on the tokens it
        # dispatches (moe_layer.py:488-492, :591-592 at d98e8a64dd), at the dense MLP's
        # precision or the quantization file's (``_peaks``)
        lat, rows = model.moe_latent, moe_tokens(cfg, tokens)
        out["latent_proj"] = gemm_s(rows, lat, h, gpu, cal, peak=pk["latent"]) \
            + gemm_s(rows, h, lat, gpu, cal, peak=pk["latent"])
    return out


# NVFP4's weight-gradient path (TE recipe/__init__.py L593-608: RHT on the column-wise
# input and gradient, stochastic rounding on the gradient): the 16 x 16 Hadamard runs as
# BF16 tensor-core MMAs, 16 multiply-adds per element (TE common/hadamard_transform/
# hadamard_transform.cu L43-62, mma_m16_n16_k16 on bf16); stochastic rounding is the cast's
# own instruction (cvt.rs.satfinite.e2m1x4.f32, hadamard_transform_cast_fusion.cu): no FLOPs.
RHT_FLOPS_PER_ELEMENT = 2 * 16


def rht_s(model: ModelSpec, cfg, tokens, gpu, cal) -> float:
    """Backward seconds of one layer (averaged over the stack) for the random Hadamard
    transform of both weight-gradient operands of every GEMM the recipe runs in FP4: the
    input (rows x in) and the output gradient (rows x out), as this rank holds them under
    TP (ETP and EP for the routed experts), at the sustained BF16 rate; 0 for a recipe
    without it. The router stays BF16 and is left out."""
    rec = framework_of(cfg).fp8
    if rec is None or not rec.wgrad_rht:
        return 0.0
    etp, total = expert_tp(cfg), 0.0
    expert_rows = moe_tokens(cfg, tokens) * model.top_k * etp if model.is_moe else 0.0
    apart = dict(rec.module_formats)  # a quantization file's BF16 / MXFP8 modules: no RHT
    for kind, n in model.kind_counts.items():
        for lin in modules.layer(model, kind):
            if lin.kind == "router" or module_of(lin) in apart:
                continue
            split = etp if lin.experts > 1 else cfg.tp
            i, o = lin.in_features, lin.out_features
            width = i / split + o if lin.split == "row" else i + o / split \
                if lin.split == "col" else i + o
            # routed experts: the rows of the rank's E / ep experts sum to its routed
            # tokens x top_k, gathered over ETP; any other matrix sees this rank's tokens
            rows = expert_rows if lin.experts > 1 else tokens
            total = total + n * rows * width
    flops = RHT_FLOPS_PER_ELEMENT * total / model.layers * (1 - bf16_share(model, rec))
    return flops / (gpu.bf16_flops * gpu.gemm_efficiency)


def module_of(lin) -> str | None:
    """The ``ledger.frameworks.module_formats`` module a layer's weight matrix belongs to:
    attention's column-parallel projections ``qkv`` and its row-parallel ``attn_out``, a
    Mamba mixer's ``mamba_out``, LatentMoE's ``latent``; None for any other."""
    if lin.kind == "attention":
        return "attn_out" if lin.split == "row" else "qkv"
    if lin.kind == "ssm" and lin.name == "out_proj":
        return "mamba_out"
    return "latent" if lin.kind == "latent_proj" else None


def bf16_share(model: ModelSpec, rec) -> float:
    """The share of the layers a recipe keeps in BF16: its first and last ones of the stack,
    and under ``bf16_mtp`` (Megatron-Bridge's keep_mtp_spec_in_bf16) the MTP depths'
    layers too, of the stack's and those (the time model runs them as the stack's average
    layer, ``ledger.placement.stages.pace``)."""
    if rec is None:
        return 0.0
    ends = min(sum(rec.bf16_layers), model.layers)
    mtp = model.mtp_layers * len(model.mtp_kinds) if rec.bf16_mtp else 0
    return (ends + mtp) / (model.layers + mtp)


def bf16_averaged(model: ModelSpec, cfg, gpu, stack) -> float:
    """``stack(pk)`` - seconds over the stack at the GEMM peaks ``pk`` - at the config's
    peaks, with the recipe's BF16 layers' share at the BF16 peak averaged in (not placed
    on the first and last pipeline stages that hold them)."""
    pk, share = _peaks(cfg, gpu), bf16_share(model, framework_of(cfg).fp8)
    if not share:
        return stack(pk)
    return (1 - share) * stack(pk) + share * stack({g: gpu.bf16_flops for g in pk})


def layer_gemms_s(model: ModelSpec, cfg, tokens, gpu, cal):
    """Forward GEMM seconds of one layer, averaged over the stack: each kind of layer
    (``ledger.anatomy.mixers.LayerKind``) weighted by how many layers are of it."""
    def stack(pk):
        return sum(n * sum(kind_gemms_s(model, k, cfg, tokens, gpu, cal, pk).values())
                   for k, n in model.kind_counts.items()) / model.layers
    return bf16_averaged(model, cfg, gpu, stack)


def routed_gemms_s(model: ModelSpec, cfg, tokens, gpu, cal):
    """Forward seconds of one layer's routed-expert GEMMs, averaged over the stack: the
    part of a MoE layer that runs after its dispatcher hands the host the token counts
    (``ledger.step.host``)."""
    pk = _peaks(cfg, gpu)
    return sum(n * kind_gemms_s(model, k, cfg, tokens, gpu, cal, pk).get("experts", 0.0)
               for k, n in model.kind_counts.items() if k.mlp == "moe") / model.layers


def shared_gemms_s(model: ModelSpec, cfg, tokens, gpu, cal):
    """Forward seconds of one layer's shared-expert GEMMs, averaged over the stack, as
    (fc1: up and gate, fc2: down): what Megatron's --moe-shared-expert-overlap runs beside
    the dispatch and the combine (``ledger.step.layer_comms.shared_hidden_s``)."""
    if not (model.is_moe and model.shared_experts):
        return 0.0, 0.0
    pk, w, h = _peaks(cfg, gpu), model.shared_ffn, model.hidden
    share = model.mlp_share("moe")
    up = (2 if model.gated_mlp else 1) * w / cfg.tp
    return (share * gemm_s(tokens, up, h, gpu, cal, peak=pk["shared_up"]),
            share * gemm_s(tokens, h, w / cfg.tp, gpu, cal, peak=pk["shared_down"]))


def recurrent_core_s(model: ModelSpec, cfg, tokens, gpu, cal):
    """Forward seconds of the recurrent mixers' chunked cores, averaged over the stack, as
    the batched GEMMs they are (``ledger.arch.recurrent.core_flops_per_token`` counts the
    same products): per chunk of Q tokens and head, Mamba-2's C B^T (per group), its
    intra-chunk product with X, the chunk state and its read-out (Dao & Gu 2024 sec. 6);
    Gated DeltaNet's and KDA's three C x C x d_k products, two C x d_v x C and three
    d_k x d_v ones (the WY form, Yang et al. 2024); lightning attention's two intra-block
    and two state products (Qin et al. 2024). Heads split by tp x cp (Megatron-Core's
    context parallelism is head-parallel for both, mamba_context_parallel.py:140-215,
    gated_delta_net/common.py:692-755), so a rank's share is tokens / cp of the whole.
    Mamba-1's scan and every causal convolution are memory-bound: the step's elementwise
    term prices them from the bytes the layer saves."""
    total = 0.0
    for kind, n in model.kind_counts.items():
        if "mamba" in kind.mixer and model.mamba.version == 2:
            t = _ssd_s(model.mamba, cfg, tokens, gpu, cal)
        elif kind.mixer == "linear":
            la = model.linear
            c, dk, dv = la.chunk, la.key_dim, la.value_dim
            count = tokens / c * la.value_heads / cfg.tp
            if la.kind == "lightning":
                t = count * (gemm_s(c, c, dk, gpu, cal) + gemm_s(c, dv, c, gpu, cal)
                             + gemm_s(c, dv, dk, gpu, cal) + gemm_s(dk, dv, c, gpu, cal))
            else:
                t = count * (3 * gemm_s(c, c, dk, gpu, cal) + 2 * gemm_s(c, dv, c, gpu, cal)
                             + 3 * gemm_s(c, dv, dk, gpu, cal))
        else:
            continue
        total = total + n * t
    return total / model.layers



def _ssd_s(mb, cfg, tokens, gpu, cal, backward: bool = False):
    """Seconds of one Mamba-2 layer's SSD products on this rank's tokens, per chunk of Q:
    C B^T per group (Q x Q x N), and per head the chunk state (P x N over Q), its read-out
    (Q x P x N) and the intra-chunk product with X (Q x P x Q). The backward as mamba_ssm
    runs it (``_mamba_chunk_scan_combined_bwd``, ops/triton/ssd_combined.py L441-509 at
    state-spaces/mamba@e9594ce1, the same kernels at v2.2.4 L379-441; SOURCES["megatron"]
    ["ssd_backward"]): C B^T and the chunk states recomputed; dstates = dout^T C
    (ssd_chunk_scan.py L449), dx = (CB)^T dout + B dstates (ssd_combined.py L93-262),
    dB = x dstates^T (ssd_chunk_state.py L398), dC = dout states^T (ssd_chunk_scan.py
    L530), dCB = dout x^T (L774) and again for the decay's gradient (L1098,
    ``_chunk_scan_bwd_ddAcs_stable``), and dCB's two products into dB and dC per group
    (``_bmm_chunk_bwd``): 3 group and 8 head products against the forward's 1 and 3."""
    q, chunks, p, n = mb.chunk, tokens / mb.chunk, mb.head_dim, mb.state
    heads, groups = mb.heads / cfg.tp, np.maximum(mb.groups / cfg.tp, 1)
    cb, xq, st, ro = (gemm_s(q, q, n, gpu, cal), gemm_s(q, p, q, gpu, cal),
                      gemm_s(p, n, q, gpu, cal), gemm_s(q, p, n, gpu, cal))
    if not backward:
        return chunks * (groups * cb + heads * (xq + st + ro))
    return chunks * (3 * groups * cb + heads * (2 * st + xq + 3 * ro + 2 * xq))


def recurrent_core_bwd_s(model: ModelSpec, cfg, tokens, gpu, cal):
    """Backward seconds of the Mamba-2 layers' SSD products beyond twice their forward
    (the step prices the recurrent cores' backward at twice their forward, as it does an
    attention core priced as GEMMs), averaged over the stack; 0 without Mamba-2 layers."""
    total = 0.0
    for kind, n in model.kind_counts.items():
        if "mamba" in kind.mixer and model.mamba.version == 2:
            mb = model.mamba
            total = total + n * (_ssd_s(mb, cfg, tokens, gpu, cal, backward=True)
                                 - 2 * _ssd_s(mb, cfg, tokens, gpu, cal))
    return total / model.layers

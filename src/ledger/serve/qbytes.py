"""Bytes of quantized weights on one GPU: each stored matrix's codes, scales, zero points
and group indices as the checkpoint lays them out (``matrix_bytes``), which matrices a
``ledger.serve.quant.Quant`` quantizes (``quantized``), and what vLLM's kernels change
at load where the resident bytes change (``mxfp4_expert_bytes``).

A matrix of ``out x in`` elements stores ``out x in x bits / 8`` bytes of codes and one
scale per tensor, per output channel, per group of ``group`` inputs of a channel, or per
``block`` (out, in) tile (DeepSeek-V3's 128 x 128, fp32 ``weight_scale_inv``); AWQ and
GPTQ add a zero point per scale packed at the codes' bits (qzeros), GPTQ with desc_act an
int32 ``g_idx`` per input row; bitsandbytes' NF4 is ``ledger.finetune.nf4.nf4_bytes``.
vLLM's Marlin repacks of GPTQ / AWQ / FP8 (gptq_marlin_repack, awq_marlin_repack) permute
the same codes and scales and keep their size; MXFP4's MoE kernels pad and copy
(``mxfp4_expert_bytes``).

>>> from ledger.serve.quant import read_quant
>>> q = read_quant({"quant_method": "fp8", "weight_block_size": [128, 128]})
>>> int(matrix_bytes(q, 7168, 2048))  # codes + 56 x 16 fp32 scales
14683648
"""
from __future__ import annotations

from dataclasses import replace

from ledger import formats
from ledger.finetune import modules
from ledger.serve import skips
from ledger.serve.quant import BITS, Quant

BF16 = 2


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def format_of(q: Quant):
    """The ``ledger.formats`` entry a method's weights take: the element width and how
    the scales are shared, unpadded (a checkpoint's layout). GPTQ's 2- and 3-bit codes,
    which the table's names do not spell, are built from its ``Format``."""
    if q.scale == "nf4":
        return formats.fmt("nf4")
    if q.weight == "fp8":
        if q.scale == "block":
            return replace(formats.fmt("fp8-block128x128"), block=q.block,
                           scale_bytes=q.scale_bytes)
        if q.scale == "channel":
            return replace(formats.fmt("fp8-channel"), scale_bytes=q.scale_bytes)
        return formats.fmt("fp8")
    if q.weight == "fp4":
        base = formats.fmt("mxfp4" if q.method == "mxfp4" else "nvfp4")
        return replace(base, block=(1, q.group))
    bits = BITS[q.weight]
    block = (1, q.group) if q.scale == "group" else (1, None) if q.scale == "channel" \
        else None
    return formats.Format(name=f"{q.weight}-{q.method}", element_bits=bits, block=block,
                          scale_bytes=q.scale_bytes if block else 0,
                          zero_bits=bits if q.zero_points else 0,
                          tensor_scale_bytes=4 if block is None else 0,
                          source=f"{q.method}: {q.source}")


def matrix_bytes(q: Quant, n_out: int, n_in: int, experts: int = 1) -> float:
    """Bytes one stored matrix (``experts`` of them, fused) takes in format ``q``: the
    format's codes, block scales and zero points (``ledger.formats``, no TE padding),
    its per-tensor scales, GPTQ's g_idx, and a method's extra fp32 scalars (a static
    input scale, NVFP4's input_scale)."""
    f = format_of(q)
    if q.scale == "nf4":
        one = formats.nf4_bytes(n_out * n_in, double_quant=q.double_quant)
    else:
        one = formats.copy_bytes(f, n_out, n_in, te_padding=False) + f.tensor_scale_bytes
    extra = 4 * q.tensor_scales + (4 * n_in if q.g_idx else 0)
    return experts * (one + extra)


# families whose one shared expert vLLM builds as ``mlp.shared_expert`` (vllm v0.22.0
# qwen2_moe.py:165, qwen3_next.py:155; Qwen3.5-MoE builds Qwen3-Next's block, qwen3_5.py:86,
# :158); DeepSeek's and the others' are ``mlp.shared_experts``
SINGULAR_SHARED = ("qwen2_moe", "qwen3_next", "qwen3_5_moe_text")


def module_name(lin, layer: int, family: str | None = None) -> str:
    """A matrix's module path as the checkpoint names it (Llama / DeepSeek layout), for the
    ignore lists: model.layers.{i}.self_attn.q_proj, .mlp.down_proj, .mlp.experts,
    .mlp.shared_experts.up_proj (Qwen's ``SINGULAR_SHARED``: .mlp.shared_expert.up_proj),
    .mlp.shared_expert_gate (Qwen2-MoE / Qwen3-Next's, beside
    the shared expert), .mlp.gate; the head and embedding by their own names."""
    if lin.kind in ("output", "embedding", "positions"):
        return lin.name if lin.kind == "output" else f"model.{lin.name}"
    where = {"attention": "self_attn", "mlp": "mlp", "experts": "mlp.experts",
             "shared_experts": "mlp.shared_experts", "router": "mlp",
             "linear_attention": "linear_attn", "ssm": "mixer", "conv": "conv"}[lin.kind]
    if lin.name == "shared_expert_gate":
        where = "mlp"
    elif lin.kind == "shared_experts" and family in SINGULAR_SHARED:
        where = "mlp.shared_expert"
    leaf = "" if lin.kind == "experts" else f".{lin.name}"
    return f"model.layers.{layer}.{where}{leaf}"


def quantized_matrices(q: Quant, lins, layer: int, stored: bool = False,
                       family: str | None = None) -> list[bool]:
    """Whether ``q`` stores each of one layer's matrices quantized: a linear layer that is
    no router and that the method's rule does not skip (``ledger.serve.skips``, matched on
    the module vLLM builds: q/k/v as qkv_proj, gate and up as gate_up_proj); the output
    head only with GPTQ's lm_head; embeddings never; nor Qwen's shared_expert_gate, which
    vLLM builds with quant_config=None as it builds the router (vllm v0.22.0
    qwen2_moe.py:149-154, qwen3_moe.py:191-196, qwen3_next.py:133-138); nor the DeepSeek-V3.2
    indexer's ``weights_proj``, nor, as vLLM holds it (not ``stored``), its ``wk``: vLLM
    fuses the two with quant_config=None, upcasting an FP8 wk to bf16 (v0.22.0
    deepseek_v2.py:634-642), and GLM-5.1-FP8's files keep wk in FP8 and weights_proj in
    bf16 (its tensor list)."""
    return [m is not None for m in matrix_quants(q, lins, layer, stored, family)]


def matrix_quants(q: Quant, lins, layer: int, stored: bool = False,
                  family: str | None = None) -> list[Quant | None]:
    """``quantized_matrices``' answer as each matrix's format, None where it stays bf16:
    ``q`` itself, or under ModelOpt MIXED_PRECISION the one its module is given
    (``Quant.module``, ``ledger.serve.mixed``)."""
    prefixes = skips.vllm_names([module_name(lin, layer, family) for lin in lins])
    out = []
    for lin, prefix in zip(lins, prefixes):
        if lin.kind in ("embedding", "positions", "router") or not lin.linear \
                or lin.name in ("shared_expert_gate", "weights_proj") \
                or (lin.name == "wk" and not stored):
            out.append(None)
        elif lin.kind == "output":
            out.append(head_quant(q))
        elif skips.skipped(q.method, q.ignore, prefix, lin.experts > 1, q.only):
            out.append(None)
        else:
            out.append(q.module(prefix))
    return out


def head_quant(q: Quant) -> Quant | None:
    """The output head's format: GPTQ's with its lm_head flag; under MIXED_PRECISION the
    one ``lm_head`` is given, unless excluded (modelopt.py:2367-2371, :2395)."""
    if q.layers:
        return None if skips.skipped("modelopt", q.ignore, "lm_head") else q.module("lm_head")
    return q if q.lm_head else None


def share(lin, cfg) -> int:
    """GPUs one matrix is split over: routed experts over tp x dp (whole with EP, split
    without, ``ServeConfig.etp``), column- and row-parallel ones over tp, replicated
    ones (MLA's down projections) over none."""
    if lin.experts > 1:
        return cfg.tp * cfg.dp
    return 1 if lin.split == "none" else cfg.tp


MXFP4_PAD = {  # (intermediate per partition, hidden) rounded up to: mxfp4.py create_weights
    "marlin": (128, 256),  # "n % 256 == 0 and k % 128 == 0" for the Marlin MoE kernel
    "triton": (64, 1),  # the OAI Triton kernels (Hopper): the intermediate to 64
    "flashinfer": (256, 256),  # SM100 FlashInfer MXFP4 x BF16 / MXFP8 (TRT-LLM)
    "checkpoint": (1, 1),  # as the safetensors store it: *_blocks, *_scales, bf16 biases
}


def mxfp4_backend(gpu_name: str) -> str:
    """vLLM's MXFP4 MoE backend on a GPU (get_mxfp4_backend, mxfp4.py): FlashInfer on
    Blackwell, the OAI Triton kernels on Hopper (9.0 <= capability < 11.0, with
    triton_kernels), Marlin below Hopper (VLLM_MXFP4_USE_MARLIN=1 forces it)."""
    name = gpu_name.lower()
    if name.startswith("b"):
        return "flashinfer"
    if name.startswith(("h", "gh", "mi")):
        return "triton"
    return "marlin"


def round_up(n: int, to: int) -> int:
    return cdiv(n, to) * to


def mxfp4_expert_bytes(model, cfg, backend: str) -> float:
    """One MoE layer's MXFP4 experts on one GPU as vLLM keeps them: E / ep experts of
    w13 (2 I x H) and w2 (H x I), I the intermediate per partition, both padded for the
    backend's kernel (``MXFP4_PAD``), e2m1 codes two a byte, one e8m0 scale per 32 and
    bf16 biases (Mxfp4MoEMethod.create_weights). The Triton backend keeps a second,
    swizzled copy of the scales beside the loaded ones (``_swizzle_mxfp4`` returns new
    tensors; only w13_weight / w2_weight are deleted) and casts the biases to fp32
    (process_weights_after_loading, TRITON branch) - vllm mxfp4.py at 007d50058a; at vLLM
    0.22.0 the same (convert_gpt_oss_weight_to_mxfp4_moe_kernel_format,
    vllm/model_executor/layers/fused_moe/oracle/mxfp4.py:1144-1178, and
    Mxfp4MoEMethod.process_weights_after_loading, quantization/mxfp4.py:338-350, which
    keeps w13_weight_scale / w2_weight_scale and stores the copy in the precision config).
    The copy is in triton_kernels' Hopper layouts, which pad (the triton_kernels vLLM
    0.14.1 and 0.22.0 bundle, vllm/third_party/triton_kernels/tensor_details/
    layout_details): HopperMXScaleLayout.swizzle_data pads each matrix's output rows to a
    multiple of 2 x num_warps x 2 x 8 = 256 (num_warps 8, _swizzle_mxfp4's default) -
    gpt-oss's 5,760 and 2,880 to 5,888 and 3,072; HopperMXValueLayout.swizzle_data pads
    the rows to 16 and the packed input bytes to 32 (gpt-oss's need none)."""
    pad_i, pad_h = MXFP4_PAD[backend]
    experts = model.num_experts // cfg.ep
    i = cdiv(model.moe_ffn_hidden // cfg.etp, pad_i) * pad_i
    h = cdiv(model.expert_hidden, pad_h) * pad_h  # the experts' width (LatentMoE: latent)
    if backend == "triton":
        def one(rows: int, cols: int) -> int:  # codes, loaded scales, swizzled scales
            return round_up(rows, 16) * round_up(cols // 2, 32) + rows * cols // 32 \
                + round_up(rows, 256) * cols // 32
        return experts * (one(2 * i, h) + 4 * 2 * i + one(h, i) + 4 * h)
    bias = 2  # the checkpoint's and the other kernels': bf16
    w13 = 2 * i * h // 2 + 2 * i * h // 32 + bias * 2 * i
    w2 = h * i // 2 + h * i // 32 + bias * h
    return experts * (w13 + w2)


def layer_delta_bytes(model, cfg, q: Quant, layer: int, backend: str) -> tuple[float, float]:
    """(dense, routed-expert) bytes one GPU holds for layer ``layer`` beyond its bf16
    share: each quantized matrix's stored bytes less its bf16 bytes, over the GPUs it is
    split over."""
    return kind_delta_bytes(model, cfg, q, model.layer_kind(layer), layer, backend)


def kind_delta_bytes(model, cfg, q: Quant, kind, layer: int,
                     backend: str) -> tuple[float, float]:
    """``layer_delta_bytes`` of a layer of ``kind`` named ``model.layers.{layer}`` (an MTP
    block's layer is numbered after the stack's, as DeepSeek-V3's layer 61); backend
    ``checkpoint``: as the files store it (their scales' dtype, ``Quant.stored``)."""
    if backend == "checkpoint":
        q = q.stored
    dense = expert = 0.0
    lins = modules.layer(model, kind)
    for lin, mq in zip(lins, matrix_quants(q, lins, layer, backend == "checkpoint",
                                           model.family)):
        if q.method == "mxfp4" or mq is None:
            continue  # mxfp4: the experts as a whole, below
        stored = matrix_bytes(mq, lin.out_features, lin.in_features, lin.experts)
        change = (stored - BF16 * lin.weights) / share(lin, cfg)
        if lin.experts > 1:
            expert += change
        else:
            dense += change
    if q.method == "mxfp4" and kind.mlp == "moe":  # every FusedMoE layer (mxfp4.py:74-96)
        bf16 = model.layer_parts(kind)["experts"][2] / (cfg.tp * cfg.dp)
        expert += mxfp4_expert_bytes(model, cfg, backend) - BF16 * bf16
    return dense, expert


def edge_delta_bytes(model, cfg, q: Quant, last: bool) -> float:
    """The output head's change on the last stage when it is quantized (``head_quant``)."""
    hq = head_quant(q)
    if not last or hq is None:
        return 0.0
    head = modules.output(model)
    return (matrix_bytes(hq, head.out_features, head.in_features)
            - BF16 * head.weights) / cfg.tp


def quantized_active_params(model, q: Quant | None) -> float:
    """Weights a token multiplies in quantized matrices, summed over the layers: each
    quantized matrix's elements, the routed experts' at top_k / E - the share of a
    forward's GEMMs that runs at the quantized precision (``ledger.serve.timing``)."""
    if q is None:
        return 0.0
    total = 0.0
    for i in range(model.layers):
        lins = modules.layer(model, model.layer_kind(i))
        for lin, quant in zip(lins, quantized_matrices(q, lins, i, family=model.family)):
            if quant:
                reach = model.top_k / model.num_experts if lin.experts > 1 else 1.0
                total += lin.weights * reach
    return total

"""HBM bytes of NVFP4's and FP8 current scaling's quantization passes beyond the one fused
pass the step's elementwise term stands for, for one micro-batch on one GPU, averaged over
the stack.

The step's elementwise term (``elementwise_traffic`` x the bytes a layer saves) stands for
one read of each tensor a cast quantizes, as delayed-scaling FP8's and MXFP8's casts make
it: Transformer Engine's MXFP8 cast reads a BF16 tensor once and writes its row-wise and column-wise copies together
(MXFP8Quantizer::quantize: one ``nvte_quantize_v2``, transformer_engine/pytorch/csrc/
quantizer.cpp L1091-1103 @ NVIDIA/TransformerEngine v2.11, c188b533). Its NVFP4 quantizer
does not (NVFP4Quantizer::quantize_impl, the same file L1446-1646): for a tensor with the random
Hadamard transform on its column-wise copy - the recipe sets it on the inputs and the
gradients, not the weights (NVFP4BlockScaling, common/recipe/__init__.py L452-468 @ v2.11: fp4_quant_fwd_inp and
fp4_quant_bwd_grad)
- it runs ``nvte_hadamard_transform_amax`` first (the per-tensor amax of the input and of
RHT(input^T): one read, L1488-1500), then the row-wise cast (``nvte_quantize_v2``: a read
and a write, L1570) and, apart, the column-wise Hadamard cast
(``nvte_hadamard_transform_cast_fusion_columnwise``: a read and a write, L1640) -
three reads of the BF16 tensor where MXFP8 makes one: ``EXTRA_READS`` = 2.

Which tensors: every linear layer's input (the forward) and output gradient (the
backward) that the recipe quantizes - the router, a quantization file's BF16 / MXFP8
modules and the recipe's BF16 layers left out, as ``ledger.step.gemm.rht_s`` leaves them.
Linears that read one input are one Megatron-Core module (QKV, fc1's gate and up: one
quantization). Under sequence parallelism Transformer Engine quantizes the rank's shard
before its all-gather (``_all_gather_nvfp4``, pytorch/distributed.py L1347-1349 @ v2.11):
a column-parallel input, and a row-parallel layer's output gradient, count tokens / tp
rows. The passes run at the GPU's HBM bandwidth (memory-bound, a few FLOPs an element).

FP8 current scaling (TE Float8CurrentScaling, Megatron --fp8-recipe tensorwise) takes its
scale from the tensor's own amax, so its quantizer reads the BF16 tensor twice - the amax
(``nvte_compute_amax``) before the cast (``nvte_quantize_v2``): Float8CurrentScaling
Quantizer::quantize_impl, transformer_engine/pytorch/csrc/quantizer.cpp L501-539 @ v2.7
(fedd9ddc, the 25.09 container's TE) and L499-537 @ v2.12 (5671fd36, 26.02's) - one
read more than MXFP8's pass (``AMAX_READS`` = 1). A grouped linear's inputs and gradients
are quantized split by split the same way (split_quantize: the fused multi-tensor cast is
delayed scaling's alone, extensions/cast.cpp L100-134 @ v2.7). A TE norm computes its
output's amax in the norm kernel and casts from it (``quantize_with_amax``), one read as
MXFP8's own unfused cast after the norm (rmsnorm_fwd, extensions/normalization.cpp
L230-250, L279-284 @ v2.7; layernorm_fwd L113-116, L146-151), so the inputs of
Megatron-Core's TE LayerNorm*Linear modules (QKV, MLA's q / kv up-projections behind
their norms, the dense MLP's fc1, Mamba's in_proj) take no amax pass;
every other input (the attention output, the activation Megatron-Core computes before
fc2, the dispatched tokens before the experts' fc1) and every output gradient does.
"""
from __future__ import annotations

from ledger.config import expert_tp
from ledger.finetune import modules
from ledger.frameworks import of as framework_of
from ledger.model import ModelSpec
from ledger.placement import moe_tokens
from ledger.step.gemm import bf16_share, module_of

EXTRA_READS = 2  # the amax pass and the separate column-wise Hadamard cast
AMAX_READS = 1  # current scaling's amax pass before its cast
SOURCE = ("NVIDIA/TransformerEngine v2.11 transformer_engine/pytorch/csrc/quantizer.cpp "
          "L1446-1646 (NVFP4Quantizer::quantize_impl: hadamard_transform_amax, rowwise "
          "quantize, columnwise RHT cast - three reads of the input)")


def nvfp4_pass_bytes(model: ModelSpec, cfg, tokens) -> tuple:
    """(forward, backward) HBM bytes of one layer's NVFP4 quantization passes beyond one
    (the module docstring), averaged over the stack: ``EXTRA_READS`` reads of the BF16
    (``cfg.act_bytes``) inputs forward and output gradients backward; (0, 0) for a recipe
    without the Hadamard transform."""
    rec = framework_of(cfg).fp8
    if rec is None or not rec.wgrad_rht:
        return 0.0, 0.0
    return _quantized_bytes(model, cfg, tokens, rec, EXTRA_READS, norm_fed=True)


def amax_pass_bytes(model: ModelSpec, cfg, tokens) -> tuple:
    """(forward, backward) HBM bytes of one layer's current-scaling amax passes (the module
    docstring's second half), averaged over the stack: ``AMAX_READS`` read of each BF16
    input and output gradient a TE Float8CurrentScaling quantizer casts whose amax no TE
    norm computed beside it; (0, 0) for any other recipe."""
    rec = framework_of(cfg).fp8
    if rec is None or rec.name != "tensorwise" or not rec.per_tensor_te:
        return 0.0, 0.0
    return _quantized_bytes(model, cfg, tokens, rec, AMAX_READS, norm_fed=False)


def _norm_fed(lin) -> bool:
    """A Megatron-Core TE LayerNorm*Linear: the column-parallel attention input (QKV, MLA's
    q / kv up-projections behind their norms), the dense MLP's fc1 and Mamba-2's in_proj."""
    return lin.split == "col" and lin.experts == 1 and lin.kind in ("attention", "mlp", "ssm")


def _quantized_bytes(model: ModelSpec, cfg, tokens, rec, reads: int,
                     norm_fed: bool) -> tuple:
    """(forward, backward) bytes of ``reads`` BF16 reads of every input and output gradient
    the recipe quantizes, averaged over the stack; ``norm_fed`` False leaves out the inputs
    ``_norm_fed`` modules' norms make."""
    tp, etp, sp = cfg.tp, expert_tp(cfg), cfg.sequence_parallel
    shard = tokens / tp if sp else tokens  # what a rank quantizes before an SP all-gather
    expert_rows = moe_tokens(cfg, tokens) * model.top_k * etp if model.is_moe else 0.0
    apart = dict(rec.module_formats)
    fwd = bwd = 0.0
    for kind, n in model.kind_counts.items():
        inputs = {}  # one quantization per input a module reads
        for lin in modules.layer(model, kind):
            if lin.kind == "router" or module_of(lin) in apart:
                continue
            i, o = lin.in_features, lin.out_features
            if lin.experts > 1:  # the rank's routed rows, split over ETP as rht_s splits
                rows_in = rows_out = expert_rows
                i, o = (i, o / etp) if lin.split == "col" else (i / etp, o)
            elif lin.split == "col":
                rows_in, rows_out, o = shard, tokens, o / tp
            elif lin.split == "row":
                rows_in, rows_out, i = tokens, shard, i / tp
            else:
                rows_in = rows_out = tokens
            key = (lin.kind, lin.split, lin.in_features) if lin.split == "col" else lin.name
            if norm_fed or not _norm_fed(lin):
                inputs[lin.kind, key] = rows_in * i
            bwd = bwd + n * rows_out * o
        fwd = fwd + n * sum(inputs.values())
    scale = reads * cfg.act_bytes * (1 - bf16_share(model, rec)) / model.layers
    return fwd * scale, bwd * scale

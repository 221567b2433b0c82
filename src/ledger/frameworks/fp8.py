"""Low-precision training recipes as data (FP8, MXFP8, NVFP4): what each keeps in the low
format, what stays BF16/FP32, what moves low on the wire, and which GEMMs run at which of
the GPU's peaks.

A recipe is named as the framework names it (Megatron-LM ``--fp8-recipe``: delayed,
tensorwise, blockwise; torchao ``Float8LinearRecipeName``: tensorwise, rowwise) and priced
as that framework keeps it: Transformer Engine (Megatron) caches FP8 copies of every GEMM
weight and saves the linear layers' inputs in FP8; torchao (torchtitan) casts per forward
and saves the high-precision inputs. ``deepseek-v3`` is the DeepSeek-V3 report's own
scheme (arXiv:2412.19437 sec. 3.3). ``mxfp8`` (Megatron ``--fp8-recipe mxfp8``, torchao's
MX converters) and ``nvfp4`` (Megatron ``--fp4-format e2m1 --fp4-recipe nvfp4``) are
Transformer Engine's block-scaled recipes for Blackwell: their bytes are ``ledger.formats``'
(MXFP8 1 + 1/32 B per element per copy, NVFP4 0.5 + 1/16), each weight kept as a row-wise
and a column-wise copy, each saved input as the column-wise copy the weight gradient reads.
A precision string carries the choice through the ledger: ``"fp8"`` / ``"fp4"`` (the
framework's default recipe of that width), ``"fp8-<recipe>"`` / ``"fp4-<recipe>"``, and a
``"+param-gather"`` suffix for parameters kept and all-gathered low (``--fp8-param-gather``,
``--fp4-param-gather``).

For the time model (``ledger.step``): ``gemm_precision(fw, gemm, pass_)`` says whether a
GEMM (``GEMMS``: qkv, attn_out, mla_down/up, mlp_up/down, experts_up/down, shared_up/down
run in FP8; router, attention_core, output_head stay BF16) runs in FP8 in a pass
(fprop, dgrad, wgrad); ``peak_flops(gpu, fw, gemm, pass_)`` gives the peak to divide its
FLOPs by (refusing a GPU without FP8); ``fw`` is ``ledger.placement.comms.framework_of(cfg)``. The
bytes on the wire are already in ``ledger.placement.comms``' rows (TP all-gathers, param
all-gathers); ``ep_element_bytes`` gives the MoE dispatcher's per-direction dtype.

Bytes per element: an FP8 value is 1 B; a block-scaled one adds its fp32 scale shared by
the block (1x128 tile: 4/128 B, 128x128 block: 4/16384 B).

>>> r = recipe("megatron", "fp8-blockwise")
>>> r.name, r.act_bytes, round(r.weight_cache_bytes, 6)
('blockwise', 1.03125, 2.000488)
>>> recipe("torchtitan", "fp8").name, recipe("torchtitan", "fp8").act_bytes
('tensorwise', 0.0)
>>> r = recipe("megatron", "fp4+param-gather")
>>> r.name, r.gemm_format, r.act_bytes, r.param_resident_bytes
('nvfp4', 'fp4', 0.5625, 1.125)
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ledger.errors import LedgerError
from ledger.formats import bytes_per_element
from ledger.frameworks.gemm_weights import gemm_params, gemm_weights
from ledger.frameworks.fp8_sources import SOURCES
from ledger.frameworks.module_formats import split_quant, weight_delta

TILE = bytes_per_element("fp8-block1x128") - 1  # fp32 scale per 1 x 128 tile: 4/128 B
BLOCK = bytes_per_element("fp8-block128x128") - 1  # fp32 per 128 x 128 block: 4/16384 B
MX8 = bytes_per_element("mxfp8")  # E4M3 + an E8M0 scale per 32: 1.03125 B per element
NV4 = bytes_per_element("nvfp4")  # packed E2M1 + an E4M3 scale per 16: 0.5625 B
PARAM_GATHER = "+param-gather"
BF16_ENDS = re.compile(r"\+bf16-ends-(\d+)-(\d+)$")  # "+bf16-ends-1-14": bf16_layers (1, 14)
BF16_MTP = "+bf16-mtp"  # the MTP block in BF16 (Fp8Recipe.bf16_mtp)
WIDTHS = ("fp8", "fp4")  # the precision strings' prefixes: the GEMMs' peak
# The GEMMs of a decoder layer and the model around it, and the three passes of each.
GEMMS = ("qkv", "attn_out", "mla_down", "mla_up", "mlp_up", "mlp_down", "experts_up",
         "experts_down", "shared_up", "shared_down", "router", "attention_core",
         "output_head")
PASSES = ("fprop", "dgrad", "wgrad")
# Megatron/TE: fp8_autocast wraps the transformer layers' TE linear modules only
# (fused attention stays BF16 unless --fp8-dot-product-attention; the router is a plain
# torch GEMM; the output layer runs BF16 except under mxfp8 --fp8-output-proj).
# DeepSeek-V3 sec. 3.3: Fprop, Dgrad and Wgrad of the linear layers in FP8; embedding,
# output head, MoE gating, normalization and attention in their original precision.
LINEAR_GEMMS = frozenset(GEMMS) - {"router", "attention_core", "output_head"}


@dataclass(frozen=True, kw_only=True)
class Fp8Recipe:
    """One FP8 recipe as one framework keeps it. Bytes per element of a GEMM weight or a
    saved activation; 0 where nothing is kept."""

    name: str
    summary: str
    weight_cache_bytes: float  # FP8 copies of each GEMM weight kept across micro-batches
    act_bytes: float  # a linear layer's saved input in FP8 (+ scales); 0: saves BF16
    attn_out_bytes: float = 0.0  # the attention output's own format (0: the act dtype)
    expert_swiglu_recompute: bool = False  # cache the expert SwiGLU input, recompute its output
    tp_gather_bytes: float = 0.0  # SP all-gathers of GEMM inputs / grad outputs in FP8
    ep_dispatch_bytes: float = 0.0  # MoE dispatch (fwd) and its backward twin in FP8
    moment_bytes: int | None = None  # optimizer moments (None: the framework's)
    meta_bytes_per_weight: float = 0.0  # scales / amax history of each GEMM weight tensor
    param_gather: bool = False  # GEMM weights all-gathered in FP8 (--fp8-param-gather)
    param_gather_wire_bytes: float = 0.0  # bytes per GEMM weight element on the wire then
    fsdp_wire_bytes: float | None = None  # ... under ZeRO-3 / FSDP (None: the same)
    per_tensor_te: bool = False  # TE's per-tensor FP8 weight: its transpose is a second
    #   buffer only where FP8 GEMMs need the TN layout (``single_buffer``)
    param_resident_bytes: float | None = None  # and kept in place of the BF16 param (FP8
    #   param + its transpose); None: the resident shard is unchanged (torchao casts it)
    gemms: frozenset = LINEAR_GEMMS  # GEMMs run at the recipe's rate, every pass
    gemm_format: str = "fp8"  # the peak those GEMMs run at: "fp8" or "fp4"
    block_scaled: bool = False  # MX / NVFP4 block-scaled MMA: Blackwell-class tensor cores
    wgrad_rht: bool = False  # a 16 x 16 random Hadamard transform on both wgrad operands
    bf16_layers: tuple[int, int] = (0, 0)  # transformer layers at the start and the end kept
    #   in BF16 (Megatron --first-last-layers-bf16, --num-layers-at-start/end-in-bf16)
    bf16_mtp: bool = False  # the MTP block kept in BF16 (keep_mtp_spec_in_bf16)
    module_formats: tuple = ()  # (module, format) a quantization file sets apart
    #   (``ledger.frameworks.module_formats``, "+quant-<name>")


# Delayed scaling: per GEMM module TE keeps, for 3 forward (input, weight, output) and 2
# backward (grad output, grad input) operands, an fp32 scale and an amax history of
# Megatron's default length 1; current scaling the scale and one amax.
_DELAYED_META = 5 * (4 + 4 * 1)
_CURRENT_META = 5 * (4 + 4)

_TE = dict(weight_cache_bytes=2.0, act_bytes=1.0, tp_gather_bytes=1.0,
           param_gather_wire_bytes=1.0, param_resident_bytes=2.0, per_tensor_te=True)
_TE_BLOCK = dict(weight_cache_bytes=2 * (1 + BLOCK), act_bytes=1 + TILE, tp_gather_bytes=1 + TILE,
                 param_gather_wire_bytes=1 + BLOCK, param_resident_bytes=2 * (1 + BLOCK),
                 per_tensor_te=False)
RECIPES: dict[str, dict[str, Fp8Recipe]] = {
    "megatron": {
        "delayed": Fp8Recipe(name="delayed", summary="TE DelayedScaling: per-tensor scales "
                             "from an amax history", meta_bytes_per_weight=_DELAYED_META, **_TE),
        "tensorwise": Fp8Recipe(name="tensorwise", summary="TE Float8CurrentScaling: "
                                "per-tensor scales from the current amax",
                                meta_bytes_per_weight=_CURRENT_META, **_TE),
        "blockwise": Fp8Recipe(
            name="blockwise", summary="TE Float8BlockScaling: 1x128 activation and gradient "
            "tiles, 128x128 weight blocks, fp32 scales", **_TE_BLOCK),
        "deepseek-v3": Fp8Recipe(
            name="deepseek-v3", summary="DeepSeek-V3 (arXiv:2412.19437 sec. 3.3): 1x128 / "
            "128x128 block scaling, FP8 cached activations, E5M6 attention output, recomputed "
            "expert SwiGLU, BF16 Adam moments, FP8 MoE dispatch", attn_out_bytes=1.5 + TILE,
            expert_swiglu_recompute=True, ep_dispatch_bytes=1 + TILE, moment_bytes=2,
            **_TE_BLOCK),
    },
    "torchtitan": {
        "tensorwise": Fp8Recipe(name="tensorwise", summary="torchao float8 tensorwise: dynamic "
                                "per-tensor scales, weights cast every forward, BF16 inputs "
                                "saved", weight_cache_bytes=0.0, act_bytes=0.0,
                                param_gather_wire_bytes=1.0),
        "rowwise": Fp8Recipe(name="rowwise", summary="torchao float8 rowwise: dynamic per-row "
                             "scales (power of 2), weights cast every forward, BF16 inputs "
                             "saved", weight_cache_bytes=0.0, act_bytes=0.0),
    },
}
# TE's block-scaled recipes (Blackwell): both copies of each weight cached across
# micro-batches, the column-wise copy of each input saved, SP gathers in the low format.
RECIPES["megatron"]["mxfp8"] = Fp8Recipe(
    name="mxfp8", summary="TE MXFP8BlockScaling: E4M3 in 32-element blocks with E8M0 "
    "scales, row- and column-wise copies each quantized from BF16",
    weight_cache_bytes=2 * MX8, act_bytes=MX8, tp_gather_bytes=MX8,
    param_gather_wire_bytes=2.0, param_resident_bytes=2 * MX8, block_scaled=True,
    fsdp_wire_bytes=MX8)  # Megatron-FSDP: the row-wise copy forward, column-wise backward
RECIPES["megatron"]["nvfp4"] = Fp8Recipe(
    name="nvfp4", summary="TE NVFP4BlockScaling: E2M1 in 16-element blocks with E4M3 scales "
    "and an fp32 per-tensor scale, 16x16 weight blocks; stochastic rounding and a 16x16 "
    "random Hadamard transform on the weight-gradient operands",
    weight_cache_bytes=2 * NV4, act_bytes=NV4, tp_gather_bytes=NV4,
    param_gather_wire_bytes=0.5, param_resident_bytes=2 * NV4, gemm_format="fp4",
    block_scaled=True, wgrad_rht=True, meta_bytes_per_weight=2 * 4)  # fp32 amax per copy
RECIPES["torchtitan"]["mxfp8"] = Fp8Recipe(
    name="mxfp8", summary="torchao MX (quantize.linear.mx, mxfp8_cublas): E4M3 in 32-element "
    "blocks with E8M0 scales, cast every use, BF16 inputs and weights saved",
    weight_cache_bytes=0.0, act_bytes=0.0, block_scaled=True,
    gemms=LINEAR_GEMMS - {"experts_up", "experts_down"})  # grouped GEMMs: their own converter
# DeepSeek's own stack runs its own recipe only
RECIPES["deepseek"] = {"deepseek-v3": RECIPES["megatron"]["deepseek-v3"]}
DEFAULT_RECIPE = {("megatron", "fp8"): "delayed", ("torchtitan", "fp8"): "tensorwise",
                  ("deepseek", "fp8"): "deepseek-v3", ("megatron", "fp4"): "nvfp4"}
LIBRARY = {"megatron": "Transformer Engine", "torchtitan": "torchao",
           "deepseek": "its report's recipe"}
PARAM_GATHER_RECIPES = {"megatron": ("delayed", "tensorwise", "blockwise", "deepseek-v3",
                                     "mxfp8", "nvfp4"),
                        "torchtitan": ("tensorwise",), "deepseek": ()}


def width(precision: str | None) -> str | None:
    """"fp8" or "fp4" when ``precision`` names a low-precision recipe, else None."""
    if not isinstance(precision, str):
        return None
    return next((w for w in WIDTHS if precision == w or precision.startswith((f"{w}-",
                                                                               f"{w}+"))), None)


def is_fp8(precision: str | None) -> bool:
    return width(precision) == "fp8"


def is_low_precision(precision: str | None) -> bool:
    """An FP8 or FP4 recipe's precision string."""
    return width(precision) is not None


def spell(recipe_name: str | None, param_gather: bool = False, prefix: str = "fp8",
          bf16_layers: tuple[int, int] = (0, 0), bf16_mtp: bool = False) -> str:
    """The precision string of a recipe choice: "fp8", "fp8-blockwise+param-gather",
    "fp4-nvfp4+bf16-mtp+bf16-ends-1-14"."""
    ends = f"+bf16-ends-{bf16_layers[0]}-{bf16_layers[1]}" if any(bf16_layers) else ""
    return prefix + (f"-{recipe_name}" if recipe_name else "") + (PARAM_GATHER * param_gather) \
        + BF16_MTP * bf16_mtp + ends


def recipe(framework: str, precision: str) -> Fp8Recipe:
    """The recipe a precision string names under ``framework``; one line when the
    framework does not offer it."""
    w = width(precision) or "fp8"
    offered = {n: r for n, r in RECIPES.get(framework, {}).items() if r.gemm_format == w}
    if not offered:
        where = [f"{f} ({LIBRARY[f]})" for f in sorted({f for (f, x) in DEFAULT_RECIPE
                                                        if x == w})]
        raise LedgerError("precision", f"{w} is modelled under {', '.join(where)}, "
                                       f"not {framework}")
    ends = BF16_ENDS.search(precision)
    precision = precision[:ends.start()] if ends else precision
    mtp = precision.endswith(BF16_MTP)
    precision = precision[:-len(BF16_MTP)] if mtp else precision
    precision, formats = split_quant(precision)
    gather = precision.endswith(PARAM_GATHER)
    name = precision[:-len(PARAM_GATHER)] if gather else precision
    name = name[len(w) + 1:] if name.startswith(f"{w}-") else DEFAULT_RECIPE[framework, w]
    if name not in offered:
        raise LedgerError(f"{w}_recipe", f"{framework} offers {w} recipes "
                                         f"{', '.join(offered)}, got {name!r}")
    if gather and name not in PARAM_GATHER_RECIPES[framework]:
        raise LedgerError(f"{w}_param_gather", f"{framework} gathers {w} params only under "
                                               f"{', '.join(PARAM_GATHER_RECIPES[framework])}"
                                               f", not {name}")
    bf16 = (int(ends.group(1)), int(ends.group(2))) if ends else (0, 0)
    return replace(offered[name], param_gather=gather, bf16_layers=bf16, bf16_mtp=mtp,
                   module_formats=formats)


def gemm_precision(fw, gemm: str, pass_: str = "fprop") -> str:
    """"fp8" or "fp4" when ``gemm`` (one of ``GEMMS``) runs at that rate in ``pass_``
    (fprop, dgrad or wgrad) under the framework's recipe, else "bf16". The time model's
    one question: every linear layer's three GEMMs run low (TE/Megatron fp8_autocast over
    the transformer layers, NVFP4's wgrad too; DeepSeek-V3 sec. 3.3 fig. 6); the
    attention core, the router and the output head stay BF16."""
    if gemm not in GEMMS or pass_ not in PASSES:
        raise LedgerError("gemm", f"unknown GEMM {gemm!r} / pass {pass_!r}; known: "
                                  f"{', '.join(GEMMS)} x {', '.join(PASSES)}")
    rec = getattr(fw, "fp8", None)
    return rec.gemm_format if rec is not None and gemm in rec.gemms else "bf16"


def peak_flops(gpu, fw, gemm: str, pass_: str = "fprop") -> float:
    """Dense peak FLOP/s of one GEMM: the GPU's FP8 or FP4 peak where it runs so, else
    BF16. A GPU without those tensor cores (A100: no FP8; H100: no FP4, no block-scaled
    MMA for MXFP8) is refused with one line."""
    kind = gemm_precision(fw, gemm, pass_)
    if kind == "bf16":
        return gpu.bf16_flops
    peak = getattr(gpu, f"{kind}_flops", 0.0)
    if not peak > 0:
        raise LedgerError("precision", f"{gpu.name} has no {kind.upper()} tensor cores "
                                       f"({kind} peak {peak:g}); drop --precision {kind}")
    if fw.fp8.block_scaled and not getattr(gpu, "fp4_flops", 0.0) > 0:
        raise LedgerError("precision", f"{fw.fp8.name} needs block-scaled tensor cores "
                                       f"(Blackwell, CDNA 4), {gpu.name} has none; Megatron "
                                       f"runs mxfp8 'for Blackwell architecture only'")
    return peak


def single_buffer(rec, gpu) -> bool:
    """Whether Transformer Engine keeps a per-tensor-scaled FP8 weight as one buffer for
    both usages: on GPUs whose FP8 GEMMs take any layout (compute capability 10.x, 11.x or
    13+: TE pytorch/utils.py L658-663, is_non_tn_fp8_gemm_supported), no transpose is
    materialised (csrc/quantizer.cpp L355-375 delayed, L670-689 current scaling;
    tensor/float8_tensor.py L414-431); Hopper keeps FP8 data and transpose."""
    cc = getattr(gpu, "cuda_capability", None)
    return bool(rec is not None and rec.per_tensor_te and cc is not None
                and ((10, 0) <= cc < (12, 0) or cc >= (13, 0)))


def weight_bytes(model, cfg, fw, layer_counts, kinds, bf16_here: float = 0.0,
                 gpu=None, param_divs=(1, 1)) -> float:
    """Bytes one GPU adds for FP8 weights over ``layer_counts[i]`` layers of each kind
    ``kinds[i]`` (a ``ledger.anatomy.mixers.LayerKind``): the recipe's cached FP8 copies (or, with
    FP8 params, the FP8 param and its transpose in place of the BF16 param) and the scaling
    metadata; ``bf16_here`` of those layers are the recipe's BF16 ones (no low copies,
    the BF16 param kept), taken evenly from the kinds; on ``gpu`` (None: Hopper's layout)
    a per-tensor FP8 weight may need no transpose (``single_buffer``). ``param_divs``:
    ZeRO's (dense, expert) divisors of the params (``ledger.placement.footprint.divisors``):
    FP8 params replace the BF16 shard, so under ZeRO-3 / FSDP they are sharded alike.
    Experts split over tp x ep as ``ledger.placement.largest_unit_params`` splits them."""
    rec = getattr(fw, "fp8", None)
    if rec is None:
        return 0.0
    copies = 0.5 if single_buffer(rec, gpu) else 1.0  # FP8 data without its transpose
    per = rec.weight_cache_bytes * copies
    dense_div, expert_div = 1, 1  # the cached copies are whole on every GPU
    if rec.param_gather:  # the FP8 param (+ transpose) replaces the BF16 param and its cache
        per = 0.0 if rec.param_resident_bytes is None else rec.param_resident_bytes \
            * copies - fw.param_bytes
        dense_div, expert_div = param_divs  # ... as sharded as the BF16 param it replaces
    total = 0.0
    for n, kind in zip(layer_counts, kinds):
        split, repl, routed, tensors = gemm_weights(model, kind)
        etp = cfg.tp if getattr(cfg, "etp", None) is None else cfg.etp  # expert TP
        elems = (split / cfg.tp + repl) / dense_div + routed / (etp * cfg.ep) / expert_div
        tensors = tensors + 2 * model.num_experts / cfg.ep * bool(routed)  # local experts
        total += n * (elems * per + tensors * rec.meta_bytes_per_weight)
        if rec.module_formats and not rec.param_gather:  # a quantization file's modules
            total += n * weight_delta(rec, model, kind, cfg.tp, copies)
    layers = sum(layer_counts)
    return total * max(0.0, 1 - bf16_here / layers) if layers else total


def gathered_param_ratio(model, fw, zero3: bool = False) -> float:
    """Bytes on the wire of a ZeRO/FSDP param all-gather per param-state byte: GEMM
    weights in FP8 under param gather, everything else in the gathered dtype; ``zero3``:
    the gathers of ZeRO-3 / FSDP (``gather_wire_bytes``)."""
    ratio = fw.gathered_param_bytes / fw.param_bytes
    rec = getattr(fw, "fp8", None)
    if rec is None or not rec.param_gather:
        return ratio
    share = gemm_params(model) / model.params
    wire = gather_wire_bytes(rec, zero3)  # the FP8 data moves, its transpose is made after
    return ((1 - share) * fw.gathered_param_bytes + share * wire) / fw.param_bytes


def gather_wire_bytes(rec, zero3: bool = False) -> float:
    """Bytes per GEMM weight element a param all-gather moves under the recipe's param
    gather: ZeRO-1/2's after the optimizer step, or ZeRO-3's per layer (Megatron-FSDP
    gathers MXFP8's row-wise copy for the forward and its column-wise one, a buffer of
    its own, for the backward: megatron_fsdp/param_and_grad_buffer.py L2634-2643,
    L4650-4690 at d98e8a64)."""
    if zero3 and rec.fsdp_wire_bytes is not None:
        return rec.fsdp_wire_bytes
    return rec.param_gather_wire_bytes


def tp_gather_ratio(fw) -> float:
    """SP all-gathers (the column-parallel inputs and the row-parallel grad outputs)
    move FP8 under Transformer Engine: bytes relative to the BF16 activation."""
    rec = getattr(fw, "fp8", None)
    return rec.tp_gather_bytes / 2 if rec is not None and rec.tp_gather_bytes else 1.0


def ep_element_bytes(fw, act_bytes: float = 2) -> dict[str, float]:
    """Bytes per element of each MoE all-to-all: the dispatch direction (forward
    dispatch, and in backward the gradient sent back to the experts before their down
    projections) and the combine direction (forward combine, backward gradient of the
    dispatch). DeepSeek-V3 sec. 3.3.3: FP8 (+ 1x128 scales) one way, BF16 the other."""
    rec = getattr(fw, "fp8", None)
    dispatch = rec.ep_dispatch_bytes if rec is not None and rec.ep_dispatch_bytes else act_bytes
    return {"dispatch": dispatch, "combine": act_bytes}


def ep_wire_ratio(fw, act_bytes: float = 2) -> float:
    """Mean bytes per element of the four MoE all-to-alls per layer (dispatch, combine,
    and their backward twins) relative to ``act_bytes``: DeepSeek-V3 dispatches in FP8
    (and sends the grads before the down projections in FP8), combines in BF16."""
    rec = getattr(fw, "fp8", None)
    if rec is None or not rec.ep_dispatch_bytes:
        return 1.0
    return (rec.ep_dispatch_bytes + act_bytes) / (2 * act_bytes)


def saved_inputs(recipe_name: str) -> dict:
    """The ``ledger.arch.saved_tensors.SavedTensors`` fields a recipe sets: how the linear
    layers' saved inputs are kept (only recipes that save FP8 inputs name a table)."""
    for family in RECIPES.values():
        rec = family.get(recipe_name)
        if rec is not None and rec.act_bytes:
            return dict(fp8_input_bytes=rec.act_bytes, attn_out_bytes=rec.attn_out_bytes,
                        expert_swiglu_recompute=rec.expert_swiglu_recompute)
    raise LedgerError("fp8_recipe", f"no fp8 recipe {recipe_name!r} saves FP8 inputs")


def gemm_input_bytes(t, e) -> float:
    """Bytes per element of a GEMM input a linear layer saves (table ``t``, act dtype e)."""
    return t.fp8_input_bytes or e


def mlp_width_bytes(t, e, per_f: int, swiglu_recompute: bool = False) -> float:
    """Saved bytes per unit of MLP width: ``per_f`` tensors, the last the down
    projection's input (a GEMM input); with the SwiGLU output recomputed (DeepSeek-V3
    sec. 3.3.3) only the up projection's output, in FP8."""
    if swiglu_recompute:
        return (per_f - 1) * gemm_input_bytes(t, e)
    return (per_f - 1) * e + gemm_input_bytes(t, e)


def with_weights(state, model, cfg, fw, layer_counts, kinds, bf16_here: float = 0.0,
                 gpu=None, param_divs=(1, 1)):
    """``state`` (a ``ledger.memory.StateBytes``) with ``weight_bytes`` counted in its
    params: the GPU holding ``layer_counts`` layers of each kind (``bf16_here`` of them
    the recipe's BF16 layers)."""
    extra = weight_bytes(model, cfg, fw, layer_counts, kinds, bf16_here, gpu, param_divs)
    return replace(state, params_bytes=state.params_bytes + extra) if extra else state

"""The dtype of a quantized checkpoint's weight scales: as its files keep them (on disk)
and as vLLM holds them once loaded (resident, the figure serving sizes) - the two differ,
and a config.json names neither for most methods.

compressed-tensors (the format llm-compressor writes). The writer makes each scale a
parameter of the observed weight's dtype - the dtype the model was loaded in to be
quantized, bf16 for a bf16 model - unless the scheme's ``scale_dtype`` says otherwise
(vllm-project/compressed-tensors ac8e2ba8, src/compressed_tensors/quantization/lifecycle/
initialize.py:252-266, ``scale_dtype = observed_dtype``, any non-float dtype -> fp16; at
0.10.2, 2025-06-20, :185-193: ``module.weight.dtype`` unless passed, fp4 -> fp8), one rule for every strategy (tensor, channel, group, block: the shape differs,
:197-249); the calibrated scale is copied into that parameter. ``scale_dtype`` joined the
scheme's arguments on 2025-11-10 (#508; quantization/quant_args.py:201) and is then
written into config.json with them: the presets set it for NVFP4 (fp8 e4m3) and MXFP4 /
MXFP8 (uint8 exponents; quant_scheme.py:174-271). A checkpoint without the key keeps the
model's dtype (``SCALE_DTYPES`` reads either). Released files agree where llm-compressor
wrote them - moonshotai/Kimi-K2.5's int4 group scales are bf16 - and not where another
writer produced the format: zai-org/GLM-4.5-FP8's channel scales are fp32 in a bf16
model (model reports, tests/fixtures/serve/SOURCES.md), which its config.json cannot say;
the ledger counts the rule's bf16 there (0.07% of its files).

vLLM (v0.22.0, vllm/model_executor/layers/quantization/) allocates its own scale tensors
and copies the files' into them, converting the dtype: FP8 weights' scales in fp32 for
every strategy (utils/fp8_utils.py:1199-1208 ``create_fp8_scale_parameter``, float32
unless told; compressed_tensors/schemes/compressed_tensors_w8a8_fp8.py:122-130,
compressed_tensors_w8a16_fp8.py:95; the MoE experts compressed_tensors_moe/
compressed_tensors_moe_w8a8_fp8.py:186-242); INT8 W8A8 in fp32
(compressed_tensors_w8a8_int8.py:70-73, compressed_tensors_moe_w8a8_int8.py:117-128);
INT4 / INT8 weight-only (WNA16) in the model's dtype (compressed_tensors_wNa16.py:146-151,
compressed_tensors_moe_wna16.py:108-116); FP4 in fp8. The ``fp8`` method's block and
tensor scales are fp32 likewise (fp8.py:353-373) - Qwen's block-FP8 files keep them in
bf16 (Qwen3-8B-FP8, Qwen3-235B-A22B-Instruct-2507-FP8), DeepSeek's in fp32 (DeepSeek-R1),
and that ``quantization_config`` has no key for it: the ledger counts 4 B on disk for
both (Qwen's files are smaller by 2 B a block scale: 0.0002%).

>>> ct_scale_bytes("fp8", "fp8", {}, 2), ct_scale_bytes("int4", "bf16", {}, 2)
((4, 2), (2, 2))
>>> ct_scale_bytes("fp4", "fp4", {"scale_dtype": "torch.float8_e4m3fn"}, 2)
(1, 1)
"""
from __future__ import annotations

from ledger.errors import LedgerError

# a dtype's name as config.json writes it (torch's str, with or without "torch.") -> bytes
SCALE_DTYPES = {"float64": 8, "float32": 4, "float": 4, "bfloat16": 2, "float16": 2,
                "half": 2, "float8_e4m3fn": 1, "float8_e8m0fnu": 1, "uint8": 1, "int8": 1}


def dtype_bytes(name, key: str) -> int:
    """Bytes of a dtype named in config.json (``torch.bfloat16``, ``float32``)."""
    short = str(name).removeprefix("torch.")
    if short not in SCALE_DTYPES:
        raise LedgerError("quantization_config", f"{key!r} {name!r} is not a dtype the "
                                                 f"ledger sizes ({', '.join(SCALE_DTYPES)})")
    return SCALE_DTYPES[short]


def ct_scale_bytes(weight: str, acts: str, args: dict, model_bytes: int) -> tuple[int, int]:
    """(resident, stored) bytes of one compressed-tensors weight scale: ``weight`` the
    codes' format and ``acts`` the activations' (keys of ``ledger.serve.quant.BITS``:
    INT8 with INT8 activations is W8A8, without them WNA16), ``args`` the scheme's weight
    arguments, ``model_bytes`` the bytes of the checkpoint's dtype (torch_dtype)."""
    declared = args.get("scale_dtype")
    if declared is not None:
        stored = dtype_bytes(declared, "scale_dtype")
    else:
        stored = 1 if weight == "fp4" else model_bytes  # fp4: fp8 (0.10.2 :187-188)
    if weight == "fp4":
        return 1, stored
    if weight == "fp8" or (weight == "int8" and acts == "int8"):
        return 4, stored
    return model_bytes, stored

"""ModelOpt's ``MIXED_PRECISION``: one algorithm per module, named in the checkpoint's
``quantized_layers`` map, read and resolved as vLLM's ``ModelOptMixedPrecisionConfig``
does (vLLM v0.22.0 vllm/model_executor/layers/quantization/modelopt.py; the class is
selected for ``quant_algo`` MIXED_PRECISION as ``modelopt_mixed``, :2240-2247):

  the map        ``quantized_layers`` under ``quantization`` (hf_quant_config.json's form)
                 or at the top of config.json's ``quantization_config``; empty: vLLM refuses
                 (:2249-2270)
  group size     the first NVFP4-family entry's ``group_size`` (default 16), one for every
                 NVFP4 module (:2272-2284)
  per module     FP8 -> ModelOptFp8LinearMethod (fp8 weight, fp32 per-tensor weight_scale
                 and static input_scale); NVFP4 -> ModelOptNvFp4LinearMethod (W4A4: e2m1
                 codes two a byte, an fp8 scale per group, fp32 weight_scale_2 and
                 input_scale); W4A16_NVFP4 -> ModelOptNvFp4W4A16LinearMethod (the same codes
                 and scales, bf16 activations through the FP4 Marlin GEMM; the files' fp32
                 input_scale is dropped at load, :1333-1351); a linear module the map does
                 not name stays bf16 (UnquantizedLinearMethod) (get_quant_method :2384-2430)
  excluded       first, by ``ignore`` / ``exclude_modules`` (is_layer_excluded :143-178,
                 ``ledger.serve.skips``)
  lookup         the module's own name; a fused module (``PACKED``) by its shards, which
                 must agree - vLLM raises "Mixed quant_algo within fused layer" - else any
                 entry under it (routed experts) (_resolve_quant_algo :2320-2365); the
                 checkpoint's ``model.language_model.`` names are the text model's
                 ``model.`` names the ledger builds (:2367-2382)

vLLM 0.21.0's class dispatches FP8 and NVFP4 only (a W4A16_NVFP4 module would be built
unquantized); 0.22.0 adds the W4A16 sibling. Any other per-module algorithm - vLLM's
QUANT_ALGOS also list FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO and MXFP8 (:103-118), which
this class does not dispatch - is refused in one line naming it and its module.

>>> layers, group = read_layers({"quantized_layers": {
...     "model.language_model.layers.0.mlp.gate_proj": {"quant_algo": "W4A16_NVFP4",
...                                                      "group_size": 16},
...     "model.language_model.layers.0.mlp.up_proj": {"quant_algo": "W4A16_NVFP4"}}})
>>> module_algo(dict(layers), "model.layers.0.mlp.gate_up_proj"), group
('W4A16_NVFP4', 16)
"""
from __future__ import annotations

from collections import Counter

from ledger.errors import LedgerError

ALGOS = ("FP8", "NVFP4", "W4A16_NVFP4")
# packed_modules_mapping of the modules vLLM fuses: llama.py:504-507 (qkv_proj,
# gate_up_proj); qwen3_5.py:440-450, :557-560 (Gated DeltaNet's in_proj_qkvz, in_proj_ba)
PACKED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj"),
          "in_proj_qkvz": ("in_proj_qkv", "in_proj_z"), "in_proj_ba": ("in_proj_b", "in_proj_a")}
NAMES = {"FP8": "FP8 W8A8 per-tensor", "NVFP4": "NVFP4 W4A4", "W4A16_NVFP4": "NVFP4 W4A16"}
TEXT_PREFIXES = ("model.language_model.", "language_model.model.")


def text_name(name: str) -> str:
    """A checkpoint module's name as the ledger names the text model's modules."""
    for p in TEXT_PREFIXES:
        if name.startswith(p):
            return "model." + name[len(p):]
    return name


def read_layers(inner: dict) -> tuple[tuple[tuple[str, str], ...], int]:
    """The map as (module, algorithm) pairs in the file's order, and the NVFP4 group size;
    an empty map, or an algorithm the class does not dispatch, refused in one line."""
    layers = inner.get("quantized_layers")
    if not isinstance(layers, dict) or not layers:
        raise LedgerError("quantization_config", "modelopt MIXED_PRECISION needs a non-empty "
                                                 "'quantized_layers' object")
    out, group = [], None
    for name, info in layers.items():
        algo = str(info.get("quant_algo") or "").upper() if isinstance(info, dict) else ""
        if algo not in ALGOS:
            raise LedgerError("quantization_config",
                              f"modelopt MIXED_PRECISION layer {name!r} has quant_algo "
                              f"{algo or None!r}, not modelled (FP8, NVFP4, W4A16_NVFP4 are)")
        if group is None and algo != "FP8":
            group = info.get("group_size", 16)
        out.append((text_name(name), algo))
    if group is not None and (not isinstance(group, int) or isinstance(group, bool)
                              or group < 1):
        raise LedgerError("quantization_config", f"'group_size' must be an integer >= 1, "
                                                 f"got {group!r}")
    return tuple(out), group or 16


def module_algo(layers: dict[str, str], prefix: str) -> str | None:
    """The algorithm vLLM gives module ``prefix`` (vLLM's name: fused modules by
    ``PACKED``), or None: left in bf16."""
    if prefix in layers:
        return layers[prefix]
    base, _, proj = prefix.rpartition(".")
    if proj in PACKED:
        algos = {layers[f"{base}.{s}"] for s in PACKED[proj] if f"{base}.{s}" in layers}
        if len(algos) > 1:
            raise LedgerError("quantization_config",
                              f"modelopt MIXED_PRECISION gives the shards of {prefix} "
                              f"{', '.join(sorted(algos))}; vLLM refuses a fused module "
                              f"whose shards differ")
        if algos:
            return algos.pop()
    under = prefix + "."
    return next((algo for key, algo in layers.items() if key.startswith(under)), None)


def mixed_label(layers, group: int | None) -> str:
    """The report's phrase: each algorithm and how many modules the map gives it."""
    n = Counter(a for _, a in layers)
    return "modelopt mixed: " + ", ".join(
        f"{NAMES[a]}{'' if a == 'FP8' else f', fp8 scale per {group}'} x{n[a]}"
        for a in sorted(n))

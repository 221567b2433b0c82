"""Which modules a quantization method leaves unquantized: each method matches its
checkpoint's list against a module's name by its own rule, as vLLM does it (``RULES``,
each with its source; every ``file:line`` at vLLM v0.22.0, paths under
vllm/model_executor/layers/quantization/; v0.21.0, the release before the pinned commit
``ledger.serve.engine.VLLM_COMMIT``, has the same rules).

vLLM matches the name of the module it builds (``prefix``). Most families' classes fuse
q/k/v into ``qkv_proj`` and the gated MLP's gate and up into ``gate_up_proj`` (DeepSeek-V3's
MLA q_a_proj and kv_a_proj_with_mqa into ``fused_qkv_a_proj``): their
``packed_modules_mapping`` (``FUSED``); a fused module is matched by its shards'
checkpoint names where the rule expands it (quant_utils.is_layer_skipped, the
compressed-tensors and GPTQ rules: every shard must agree, else vLLM refuses to load) and
by its own name where it does not (ModelOpt's substring and wildcard steps,
bitsandbytes). A MoE layer's routed experts are one module, ``model.layers.{i}.mlp.experts``.

>>> skipped("fp8", ("model.layers.3.mlp.gate",), "model.layers.3.mlp.gate_up_proj")
False
>>> skipped("awq", ("mlp.gate",), "model.layers.3.mlp.gate_up_proj")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ledger.errors.LedgerError: quantization_config: its awq list names gate_proj but not up_proj...
"""
from __future__ import annotations

import fnmatch
import re

from ledger.errors import LedgerError

# packed_modules_mapping: vllm/model_executor/models/llama.py:504-507 (qkv_proj, gate_up_proj),
# deepseek_v2.py:1598-1630 (gate_up_proj; fused_qkv_a_proj with q_lora_rank)
FUSED = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj"),
         "fused_qkv_a_proj": ("q_a_proj", "kv_a_proj_with_mqa")}
SHARD_OF = {s: f for f, shards in FUSED.items() for s in shards}

RULES = {  # method: (how its list is matched, where vLLM v0.22.0 does it)
    "fp8": ("exact names; a fused module by its shards; routed experts when an entry "
            "holding 'experts' contains the layer's name",
            "fp8.py:159-174 (ignored_layers, else modules_to_not_convert), :176-205; "
            "utils/quant_utils.py:464-518 is_layer_skipped"),
    "compressed-tensors": ("exact names or 're:' regexes (re.match); a fused module by its "
                           "shards; routed experts by expert 0's gate/up/down_proj",
                           "compressed_tensors/utils.py:50-110 should_ignore_layer, "
                           ":175-193 _is_equal_or_regex_match; compressed_tensors/"
                           "compressed_tensors_moe/compressed_tensors_moe.py:38-56"),
    "modelopt": ("exact names (as fp8), else an entry contained in the name, else a "
                 "wildcard (fnmatch), on the fused module's own name",
                 "modelopt.py:143-178 is_layer_excluded, :181-191; the list: 'exclude_modules' "
                 "under 'quantization', else 'ignore' (:276-311)"),
    "awq": ("an entry contained in the name (substring); a fused module by its shards",
            "awq.py:97-107; awq_marlin.py:280-312 (experts); moe_wna16.py:204-205"),
    "gptq": ("'dynamic': the first pattern that re.matches, '-:' leaving it unquantized; "
             "'modules_in_block_to_quantize', when given, quantizes only names containing "
             "an entry (a fused module by its shards); modules_to_not_convert is not read",
             "auto_gptq.py:69-92, :193-269; utils/gptq_utils.py:51-69 get_dynamic_override, "
             ":72-114 is_layer_gptq_quantized, :117-146 get_linear_quant_method"),
    "bitsandbytes": ("an entry equal to a dotted component or a leading path of the fused "
                     "module's name; routed experts always quantized",
                     "bitsandbytes.py:159-185 get_quant_method, is_layer_skipped_bnb"),
    "mxfp4": ("no list read (from_config builds Mxfp4Config() without one): linear layers "
              "never quantized, routed experts always",
              "mxfp4.py:52-54 from_config, :74-96 get_quant_method"),
}


def vllm_names(names: list[str]) -> list[str]:
    """The module vLLM builds for each of one layer's checkpoint matrices: a shard whose
    siblings under the same parent are all there is named by its fused module
    (``FUSED``), any other by its own name."""
    have = set(names)
    out = []
    for name in names:
        parent, _, leaf = name.rpartition(".")
        fused = SHARD_OF.get(leaf)
        whole = fused and all(f"{parent}.{s}" in have for s in FUSED[fused])
        out.append(f"{parent}.{fused}" if whole else name)
    return out


def _agree(method: str, prefix: str, flags: list[bool], shards) -> bool:
    """Every shard of a fused module matched alike, or vLLM's refusal in one line."""
    if len(set(flags)) > 1:
        named = ", ".join(s for s, f in zip(shards, flags) if f)
        other = ", ".join(s for s, f in zip(shards, flags) if not f)
        raise LedgerError("quantization_config",
                          f"its {method} list names {named} but not {other} of {prefix}; "
                          f"vLLM refuses to load a fused module whose shards differ")
    return flags[0]


def _layer_skipped(method, prefix: str, ignore, substr: bool = False,
                   fused: bool = True) -> bool:
    """quant_utils.is_layer_skipped (utils/quant_utils.py:464-518)."""
    def match(p: str) -> bool:
        return any(e in p for e in ignore) if substr else p in ignore
    proj = prefix.split(".")[-1]
    if fused and proj in FUSED:
        return _agree(method, prefix, [match(prefix.replace(proj, s)) for s in FUSED[proj]],
                      FUSED[proj])
    if "experts" in prefix and not substr:
        return any(prefix in e for e in ignore if "experts" in e)
    return match(prefix)


def _regex(pattern: str, where: str):
    """``pattern`` compiled as vLLM compiles it (``re``), or refused by name: a pattern
    Python cannot compile stops vLLM's load with re.error."""
    try:
        return re.compile(pattern)
    except re.error as e:
        raise LedgerError("quantization_config", f"{where} pattern {pattern!r} is not a "
                                                 f"regular expression ({e})") from None


def _equal_or_regex(name: str, ignore) -> bool:
    """compressed_tensors/utils.py:105-110, :175-193 (check_contains False)."""
    return any(_regex(e[3:], "ignore").match(name) is not None if e.startswith("re:")
               else e == name for e in ignore)


def _ct_ignored(prefix: str, ignore) -> bool:
    """should_ignore_layer (compressed_tensors/utils.py:50-102)."""
    proj = prefix.split(".")[-1]
    if proj in FUSED and prefix not in ignore:
        return _agree("compressed-tensors", prefix,
                      [_equal_or_regex(prefix.replace(proj, s), ignore) for s in FUSED[proj]],
                      FUSED[proj])
    return _equal_or_regex(prefix, ignore)


def _modelopt_excluded(prefix: str, ignore) -> bool:
    """ModelOptQuantConfigBase.is_layer_excluded (modelopt.py:143-178); the names the
    ledger builds never start with 'language_model.'."""
    if not ignore:
        return False
    if _layer_skipped("modelopt", prefix, ignore):
        return True
    if any(e != prefix and e in prefix for e in ignore):
        return True
    return any(fnmatch.fnmatch(prefix, e) for e in ignore)


def _gptq_skipped(prefix: str, dynamic, only, experts: bool) -> bool:
    """Unquantized by GPTQ's ``dynamic`` ('-:' at the first pattern that matches,
    get_dynamic_override) or, for a linear layer, not named by a non-empty
    ``modules_in_block_to_quantize`` (is_layer_gptq_quantized; an empty or absent list
    is filled from the checkpoint's quantized tensors: every matrix the ledger counts)."""
    for pattern in dynamic:
        if _regex(pattern.removeprefix("-:").removeprefix("+:"), "dynamic").match(prefix):
            if pattern.startswith("-:"):
                return True
            break
    if experts or not only:
        return False
    proj = prefix.split(".")[-1]
    if proj in FUSED:
        return not _agree("gptq", prefix, [any(e in prefix.replace(proj, s) for e in only)
                                           for s in FUSED[proj]], FUSED[proj])
    return not any(e in prefix for e in only)


def _bnb_skipped(prefix: str, ignore) -> bool:
    """is_layer_skipped_bnb (bitsandbytes.py:171-185)."""
    parts = prefix.split(".")
    leading = {".".join(parts[:i + 1]) for i in range(len(parts))}
    return any(e in parts for e in ignore) or bool(leading & set(ignore))


def skipped(method: str, ignore, prefix: str, experts: bool = False,
            only: tuple[str, ...] = ()) -> bool:
    """Whether ``method`` leaves vLLM's module ``prefix`` unquantized by the checkpoint's
    list ``ignore`` (GPTQ: its ``dynamic`` patterns; ``only``: its
    modules_in_block_to_quantize); ``experts``: a MoE layer's routed experts."""
    if method == "mxfp4":
        return not experts
    if method == "compressed-tensors":
        if not experts:
            return _ct_ignored(prefix, ignore)
        shards = ("gate_proj", "up_proj", "down_proj")
        return _agree(method, prefix, [_ct_ignored(f"{prefix}.0.{s}", ignore)
                                       for s in shards], shards)
    if method == "modelopt":
        return _modelopt_excluded(prefix, ignore)
    if method == "awq":
        return _layer_skipped(method, prefix, ignore, substr=True, fused=not experts)
    if method == "gptq":
        return _gptq_skipped(prefix, ignore, only, experts)
    if method == "bitsandbytes":
        return not experts and _bnb_skipped(prefix, ignore)
    return _layer_skipped(method, prefix, ignore)  # fp8

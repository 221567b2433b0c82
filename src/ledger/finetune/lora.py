"""LoRA and DoRA adapters as peft 0.21.2 builds them on a transformers 5.23.0 model.

For each targeted weight W (out x in) peft adds ``lora_A = nn.Linear(in, r)`` and
``lora_B = nn.Linear(r, out)`` without bias (tuners/lora/layer.py L263-264): r (in + out)
trainable parameters; DoRA adds a magnitude vector of ``out`` (tuners/lora/dora.py L86-91,
L130). Which matrices are targeted (tuners/tuners_utils.py):

- a list of names matches a module whose key is the name or ends in ``.name``
  (check_target_module_exists L2371-2376); names matching nothing are ignored, unless
  nothing matches at all (NoMatchingPeftModuleError);
- ``"all-linear"`` is every nn.Linear / Conv1D but the output embedding
  (_maybe_include_all_linear_layers L2430-2490): never lm_head;
- no targets: the family's default, TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
  (utils/constants.py L67-108); a family without one is refused ("Please specify
  target_modules");
- MoE under transformers 5 (utils/transformers_weight_conversion.py L331-482): for the
  model types with a conversion pattern (mixtral; qwen3_moe, deepseek_v2, deepseek_v3 ->
  the qwen2_moe pattern) the v4 expert and router names move from the modules to the
  fused parameters: ``gate`` -> the router's gate.weight, gate_proj/up_proj (mixtral
  w1/w3) -> experts.gate_up_proj at rank 2r and alpha 2 alpha when both are named (one
  alone is refused), down_proj (w2) -> experts.down_proj; ``all-linear`` adds every
  mapping name. A name moved to the parameters no longer matches modules: the dense
  MLPs and shared experts of those families drop out. A parameter target (ParamWrapper,
  tuners/lora/layer.py L2335-2460) of E experts builds lora_A (in, r E) and lora_B
  (r E, out): r E (in + out); DoRA is refused on it (L2371-2372). Other MoE families
  (qwen2_moe, llama4_text, gpt_oss) have no conversion: their fused experts are not
  targeted at all. Without targets these families get none: the conversion runs before
  the default would be looked up (NoMatchingPeftModuleError);
- ``layers_to_transform`` (the ledger's ``freeze_layers``, as its complement) restricts
  modules only: parameter targets are injected in every layer.
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.errors import LedgerError
from ledger.finetune import modules
from ledger.finetune.modules import Linear
from ledger.finetune.spec import ALL_LINEAR, FineTune
from ledger.model import ModelSpec

# TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING (peft utils/constants.py L67-108), the
# families the ledger reads
DEFAULT_TARGETS = {
    "gpt2": ("c_attn",), "gpt_neox": ("query_key_value",), "llama": ("q_proj", "v_proj"),
    "mistral": ("q_proj", "v_proj"), "mixtral": ("q_proj", "v_proj"),
    "gemma": ("q_proj", "v_proj"), "gemma2": ("q_proj", "v_proj"),
    "gemma3_text": ("q_proj", "v_proj"), "qwen2": ("q_proj", "v_proj"),
    "qwen3": ("q_proj", "v_proj"),
}
# v4 name -> transformers 5 parameter (_MOE_TARGET_MODULE_MAPPING L331-344), per pattern
_MIXTRAL = {"gate": "gate.weight", "w1": "gate_up_proj", "w3": "gate_up_proj",
            "w2": "down_proj"}
_QWEN2_MOE = {"gate": "gate.weight", "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj",
              "down_proj": "down_proj"}
# transformers conversion_mapping._MODEL_TO_CONVERSION_PATTERN (+ peft's mixtral, L44-45)
CONVERSION = {"mixtral": _MIXTRAL, "qwen3_moe": _QWEN2_MOE, "deepseek_v2": _QWEN2_MOE,
              "deepseek_v3": _QWEN2_MOE}


@dataclass(frozen=True)
class Adapter:
    """The adapter on one weight matrix: its rank (2r on a fused gate_up_proj) and
    whether DoRA adds its magnitude vector."""

    target: Linear
    rank: int
    dora: bool = False

    @property
    def params(self) -> int:
        t = self.target
        return self.rank * t.experts * (t.in_features + t.out_features) + self.dora * t.out_features


@dataclass(frozen=True)
class Targets:
    """What peft targets on a model: module leaf names, fused parameters (their rank
    multiplier), and the names given that matched nothing."""

    names: frozenset[str]
    parameters: dict  # parameter name -> rank multiplier
    unmatched: tuple[str, ...] = ()


def _names(model: ModelSpec) -> set[str]:
    """Leaf names of every nn.Linear module of the model but the output head."""
    kinds = {model.is_moe_layer(i) for i in range(model.layers)}
    return {lin.name for moe in kinds for lin in modules.layer(model, moe) if lin.module}


def resolve(model: ModelSpec, ft: FineTune) -> Targets:
    """peft's targets for this model (the module docstring's rules)."""
    fam = modules.family(model)
    given = ft.lora_targets
    if given is None:
        if fam not in DEFAULT_TARGETS or fam in CONVERSION:
            raise LedgerError("lora_targets", f"peft has no default target_modules for "
                                              f"model_type {fam!r}; give --lora-targets "
                                              f"(names, or all-linear)")
        given = DEFAULT_TARGETS[fam]
    linear = _names(model)
    mapping = CONVERSION.get(fam, {})  # by model type, dense configs of the family too
    wanted = set(linear) | set(mapping) if given == ALL_LINEAR else set(given)
    bad = [n for n in wanted if "." in n or not n]
    if bad:
        raise LedgerError("lora_targets", f"give module leaf names (q_proj, down_proj, ...), "
                                          f"got {bad[0]!r}")
    params: dict[str, int] = {}
    halves = {}
    for old in sorted(wanted & set(mapping)):
        new = mapping[old]
        halves.setdefault(new, set()).add(old)
    for new, olds in halves.items():
        need = {o for o, n in mapping.items() if n == new}
        if olds != need:
            raise LedgerError("lora_targets", f"peft cannot target {', '.join(sorted(olds))} "
                                              f"without {', '.join(sorted(need - olds))}: "
                                              f"they are fused into {new}")
        params[new] = len(need)  # rank_pattern / alpha_pattern x 2 on gate_up_proj (L471-479)
    names = frozenset(n for n in wanted - set(mapping) if n in linear or n == "lm_head")
    if not names and not params:
        fused = f"; experts and router by peft's names: {', '.join(sorted(mapping))}" \
            if mapping and model.is_moe else ""
        raise LedgerError("lora_targets", f"no module of {model.name} ({fam}) is named "
                                          f"{', '.join(sorted(wanted))}; its linear layers: "
                                          f"{', '.join(sorted(linear))}{fused}")
    unmatched = tuple(sorted(wanted - set(mapping) - names)) if given != ALL_LINEAR else ()
    return Targets(names, params, unmatched)


def layer_adapters(model: ModelSpec, ft: FineTune, i: int,
                   targets: Targets | None = None) -> list[Adapter]:
    """The adapters of layer ``i`` (none without an adapter method; in a frozen layer only
    those on fused parameters, which layers_to_transform does not reach)."""
    if not ft.adapters:
        return []
    t = targets or resolve(model, ft)
    out = []
    for lin in modules.layer(model, model.is_moe_layer(i)):
        if lin.module and ft.frozen_layer(i):
            continue
        rank = ft.lora_rank * t.parameters[lin.name] if (not lin.module
                                                          and lin.name in t.parameters) \
            else ft.lora_rank if (lin.module and lin.name in t.names) else 0
        if not rank:
            continue
        if ft.dora and not lin.module:
            raise LedgerError("dora", f"peft refuses DoRA on the fused expert parameter "
                                      f"{lin.name} (lora.ParamWrapper does not work with "
                                      f"use_dora=True); leave the experts out of "
                                      f"--lora-targets")
        out.append(Adapter(lin, rank, ft.dora))
    return out


def output_adapter(model: ModelSpec, ft: FineTune, targets: Targets | None = None):
    """The adapter on lm_head, when it is named (all-linear never targets it)."""
    if not ft.adapters:
        return None
    t = targets or resolve(model, ft)
    return Adapter(modules.output(model), ft.lora_rank, ft.dora) if "lm_head" in t.names \
        else None

"""LoRA and DoRA adapters as peft 0.21.2 builds them on a transformers 5.23.0 model.

For each targeted weight W (out x in) peft adds ``lora_A = nn.Linear(in, r)`` and
``lora_B = nn.Linear(r, out)`` without bias (tuners/lora/layer.py L263-264): r (in + out)
trainable parameters; on an nn.Embedding of rows x dim, lora_embedding_A (r x rows) and
lora_embedding_B (dim x r) (layer.py L1150+), the same r (rows + dim). DoRA adds a
magnitude vector of ``out`` (tuners/lora/dora.py L86-91, L130; dim on an embedding).
Which matrices are targeted (tuners/tuners_utils.py):

- a list of names matches a module whose key is the name or ends in ``.name``
  (check_target_module_exists L2371-2376); names matching nothing are ignored, unless
  nothing matches at all (NoMatchingPeftModuleError, L1056-1085). A name that matches a
  module peft cannot wrap - a custom router, the experts, Moshi's wrappers, a decoder
  layer named by its index (CTRL's ffn.0 and ffn.2 make "0" and "2" leaf names) - is
  refused (lora/model.py _create_new_module: "Target module ... is not supported");
- ``"all-linear"`` is every nn.Linear / Conv1D but the output embedding, by full name
  (_maybe_include_all_linear_layers L2430-2490): never lm_head;
- no targets: the family's default, TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
  (utils/constants.py L67-108); a family without one is refused ("Please specify
  target_modules");
- ``layers_to_transform`` (the ledger's ``freeze_layers``, as its complement) keeps a
  module whose key has a layer index in range (L2378-2410): lm_head (its key is its name)
  stays, the embeddings (no index) drop; with ``all-linear`` peft refuses it
  ("layers_to_transform cannot be used when target_modules is a str");
- Mamba model types (falcon_h1, mamba, mamba2, falcon_mamba, nemotron_h) refuse an
  adapter on out_proj or conv1d (_check_lora_target_modules_mamba L145-165) - all-linear
  included, since it reaches out_proj;
- MoE under transformers 5 (utils/transformers_weight_conversion.py L331-482): for the
  model types with a conversion pattern the v4 expert and router names move from the
  modules to the fused parameters: ``gate`` -> the router's gate.weight, gate_proj/up_proj
  (mixtral w1/w3) -> experts.gate_up_proj at rank 2r and alpha 2 alpha when both are named
  (one alone is refused), down_proj (w2) -> experts.down_proj; ``all-linear`` becomes the
  leaf names of every linear plus every mapping name. A name moved to the parameters no
  longer matches modules: the dense MLPs and shared experts of those families drop out. A
  parameter target (ParamWrapper, tuners/lora/layer.py L2335-2460) of E experts builds
  lora_A (in, r E) and lora_B (r E, out): r E (in + out); DoRA is refused on it
  (L2371-2372). Other MoE families have no conversion: their fused experts are not
  targeted at all. Without targets these families get none: the conversion empties
  target_modules before the default is looked up (NoMatchingPeftModuleError). Parameter
  targets are injected in every layer (layers_to_transform restricts modules only).

A name the ledger does not table (a norm, a block) is ignored and listed in
``Targets.unmatched``: peft ignores a name that matches nothing and refuses one that
names a module it cannot wrap, which the ledger cannot tell apart.
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.errors import LedgerError
from ledger.finetune import modules
from ledger.finetune.modules import Linear
from ledger.finetune.names import names as family_names
from ledger.finetune.spec import ALL_LINEAR, FineTune
from ledger.model import ModelSpec

# TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING (peft utils/constants.py L67-108), the
# families the ledger reads
_QV = ("q_proj", "v_proj")
DEFAULT_TARGETS = {
    "gpt2": ("c_attn",), "gpt_bigcode": ("c_attn",), "gpt_neox": ("query_key_value",),
    "bloom": ("query_key_value",), "falcon": ("query_key_value",), "codegen": ("qkv_proj",),
    "mpt": ("Wqkv",), "phi": ("q_proj", "v_proj", "fc1", "fc2"),
    "nemotron_h": ("q_proj", "k_proj", "v_proj", "o_proj"),
    **dict.fromkeys(("llama", "mistral", "mixtral", "gemma", "gemma2", "gemma3_text", "qwen2",
                     "qwen3", "gpt_neo", "gptj", "opt", "stablelm"), _QV),
}
# v4 name -> transformers 5 parameter (_MOE_TARGET_MODULE_MAPPING L331-344), per pattern
_MIXTRAL = {"gate": "gate.weight", "w1": "gate_up_proj", "w3": "gate_up_proj",
            "w2": "down_proj"}
_QWEN2_MOE = {"gate": "gate.weight", "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj",
              "down_proj": "down_proj"}
# transformers conversion_mapping.py L44-73 _MODEL_TO_CONVERSION_PATTERN (+ peft's mixtral,
# transformers_weight_conversion.py L44-45), the families the ledger reads
CONVERSION = {**dict.fromkeys(("mixtral", "minimax", "minimax_m2"), _MIXTRAL),
              **dict.fromkeys(("afmoe", "beam", "cohere2_moe", "deepseek_v2", "deepseek_v3",
                               "deepseek_v32", "dots1", "ernie4_5_moe", "exaone_moe",
                               "flex_olmo", "glm4_moe", "glm4_moe_lite", "glm_moe_dsa",
                               "hunyuan_v1_moe", "mellum", "olmoe", "qwen3_moe", "qwen3_next",
                               "solar_open"), _QWEN2_MOE)}
# tuners_utils.py L145-165 _check_lora_target_modules_mamba
MAMBA_TYPES = frozenset(("falcon_h1", "mamba", "mamba2", "falcon_mamba", "nemotron_h"))
MAMBA_INCOMPATIBLE = ("out_proj", "conv1d")


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
    """What peft targets on a model: module leaf names (or, ``every``, all-linear's every
    linear but the head), fused parameters (their rank multiplier), and the names given
    that matched nothing the ledger tables."""

    names: frozenset[str]
    parameters: dict  # parameter name -> rank multiplier
    unmatched: tuple[str, ...] = ()
    every: bool = False

    def module_rank(self, lin: Linear, r: int) -> int:
        """The rank peft gives ``lin`` as a module target (0: none)."""
        hit = lin.linear and lin.kind != "output" if self.every else lin.name in self.names
        return r if lin.module and hit else 0

    def parameter_rank(self, lin: Linear, r: int) -> int:
        """The rank peft gives ``lin``'s weight as a parameter target (0: none)."""
        keys = [p for p in self.parameters if lin.key == p or lin.key.endswith(f".{p}")]
        return r * self.parameters[keys[0]] if keys else 0


def _matrices(model: ModelSpec, active: bool, ft: FineTune) -> list[Linear]:
    """Every weight matrix of the model's layer kinds (``active``: of the layers that
    train only), with no repeats."""
    kinds = {model.layer_kind(i) for i in range(model.layers)
             if not (active and ft.frozen_layer(i))}
    out = {}
    for kind in sorted(kinds, key=lambda k: k.order()):
        for lin in modules.layer(model, kind):
            out.setdefault((lin.name, lin.owner, lin.in_features, lin.out_features), lin)
    return list(out.values())


def check_layers(model: ModelSpec, ft: FineTune) -> None:
    """The frozen layer range lies inside the model."""
    if ft.freeze_layers is not None and ft.freeze_layers[1] > model.layers:
        raise LedgerError("freeze_layers", f"stop({ft.freeze_layers[1]}) is past the model's "
                                           f"layers({model.layers})")


def _given(model: ModelSpec, ft: FineTune, fam: str):
    given = ft.lora_targets
    if given is None:
        if fam not in DEFAULT_TARGETS or fam in CONVERSION:
            raise LedgerError("lora_targets", f"peft has no default target_modules for "
                                              f"model_type {fam!r}; give --lora-targets "
                                              f"(names, or all-linear)")
        return DEFAULT_TARGETS[fam]
    if given == ALL_LINEAR and ft.freeze_layers is not None:
        raise LedgerError("freeze_layers", "peft refuses layers_to_transform with "
                                           "target_modules='all-linear'; name the modules")
    bad = [n for n in ([] if given == ALL_LINEAR else given) if "." in n or not n]
    if bad:
        raise LedgerError("lora_targets", f"give module leaf names (q_proj, down_proj, ...), "
                                          f"got {bad[0]!r}")
    return given


def _convert(wanted: set[str], mapping: dict) -> dict[str, int]:
    """peft's conversion of v4 names to transformers 5's fused parameters (module
    docstring): parameter -> rank multiplier."""
    halves: dict[str, set[str]] = {}
    for old in sorted(wanted & set(mapping)):
        halves.setdefault(mapping[old], set()).add(old)
    params = {}
    for new, olds in halves.items():
        need = {o for o, n in mapping.items() if n == new}
        if olds != need:
            raise LedgerError("lora_targets", f"peft cannot target {', '.join(sorted(olds))} "
                                              f"without {', '.join(sorted(need - olds))}: "
                                              f"they are fused into {new}")
        params[new] = len(need)  # rank_pattern / alpha_pattern x 2 on gate_up_proj (L471-479)
    return params


def resolve(model: ModelSpec, ft: FineTune) -> Targets:
    """peft's targets for this model (the module docstring's rules), or its refusal."""
    fam = model.family or "llama"
    check_layers(model, ft)
    given = _given(model, ft, fam)
    mapping = CONVERSION.get(fam, {})  # by model type, dense configs of the family too
    every = given == ALL_LINEAR
    if every and mapping:  # leaf names of every linear but the head, and the v4 names
        leaves = {x.name for x in _matrices(model, False, ft) if x.module and x.linear}
        given, every = tuple(sorted(leaves | set(mapping))), False
    wanted = set() if every else set(given)
    params = _convert(wanted, mapping)
    t = Targets(frozenset(wanted - set(mapping)), params, every=every)
    mats = _matrices(model, True, ft)
    _refusals(model, ft, fam, t, mats)
    edges = [e for e in modules.embeddings(model) + [modules.output(model)]
             if e.name in t.names]
    every_mat = _matrices(model, False, ft)
    hit = any(t.module_rank(x, 1) for x in mats) or any(t.parameter_rank(x, 1)
                                                        for x in every_mat)
    if not hit and not [e for e in edges if _edge_kept(e, ft)]:
        linear = sorted({x.name for x in every_mat if x.module})
        fused = f"; experts and router by peft's names: {', '.join(sorted(mapping))}" \
            if mapping and model.is_moe else ""
        where = " in the layers that train" if ft.freeze_layers else ""
        raise LedgerError("lora_targets", f"no module of {model.name} ({fam}) is named "
                                          f"{', '.join(sorted(wanted))}{where}; its linear "
                                          f"layers: {', '.join(linear)}{fused}")
    known = {x.name for x in every_mat} | {e.name for e in edges}
    return Targets(t.names, params, tuple(sorted(t.names - known)), every)


def unadapted(model: ModelSpec, ft: FineTune, t: Targets) -> list[str]:
    """Under ``all-linear``, the weight matrices that are parameters, not modules (the
    fused routed experts, a custom router's weight), which peft's all-linear does not
    reach and which so train without an adapter (frozen): their keys, once each."""
    if not t.every:
        return []
    return sorted({x.key for x in _matrices(model, True, ft)
                   if not x.module and not t.parameter_rank(x, 1)})


def _edge_kept(e: Linear, ft: FineTune) -> bool:
    """layers_to_transform drops every module outside the layers but lm_head, whose key is
    its name (check_target_module_exists L2371-2372)."""
    return ft.freeze_layers is None or e.kind == "output"


def _refusals(model: ModelSpec, ft: FineTune, fam: str, t: Targets, mats: list[Linear]):
    """What peft refuses on these targets (module docstring), in one line."""
    n = family_names(fam)
    owners = {x.owner: x for x in mats if x.owner and not t.every}
    hit = sorted(set(owners) & t.names)
    if hit:
        what = {"experts": "the fused experts", "router": "a router",
                "conv": "the short-convolution block"}.get(owners[hit[0]].kind, "a wrapper")
        raise LedgerError("lora_targets", f"peft cannot wrap {hit[0]!r} of {model.name}: it "
                                          f"is {what} (not an nn.Linear); name its "
                                          f"linear layers")
    numbers = sorted(x for x in t.names if x.isdigit() and int(x) < model.layers)
    if numbers and ft.freeze_layers is None:
        raise LedgerError("lora_targets", f"{numbers[0]!r} is the name of decoder layer "
                                          f"{numbers[0]}, which peft cannot wrap")
    convs = sorted(t.names & {n.conv1d}) if _has_conv(model) else []
    targeted = {x.name for x in mats if t.module_rank(x, 1)}
    bad = sorted(targeted & set(MAMBA_INCOMPATIBLE)) + convs
    if fam in MAMBA_TYPES and bad:
        raise LedgerError("lora_targets", f"peft refuses LoRA on {bad[0]} of Mamba model "
                                          f"type {fam!r} (incompatible: out_proj, conv1d); "
                                          f"name the other linear layers")
    if convs:  # lora/layer.py _ConvNd: groups must divide the rank (a depthwise one: never)
        raise LedgerError("lora_targets", f"peft refuses LoRA on {convs[0]!r}, a depthwise "
                                          f"convolution (a Conv1d's groups must divide the "
                                          f"rank); name the linear layers")
    if ft.dora and any(t.parameter_rank(x, 1) for x in _matrices(model, False, ft)):
        raise LedgerError("dora", "peft refuses DoRA on the fused expert and router "
                                  "parameters (lora.ParamWrapper does not work with "
                                  "use_dora=True); leave the experts out of --lora-targets")


def _has_conv(model: ModelSpec) -> bool:
    """A layer runs a mixer with a conv1d (Mamba, GDN, KDA; LFM2's sits in its conv block)."""
    lightning = model.linear is not None and model.linear.kind == "lightning"
    return any("mamba" in k.mixer or (k.mixer == "linear" and not lightning)
               for k in model.kind_counts)


def layer_adapters(model: ModelSpec, ft: FineTune, i: int,
                   targets: Targets | None = None) -> list[Adapter]:
    """The adapters of layer ``i`` (none without an adapter method; in a frozen layer only
    those on fused parameters, which layers_to_transform does not reach)."""
    if not ft.adapters:
        return []
    t = targets or resolve(model, ft)
    out = []
    for lin in modules.layer(model, model.layer_kind(i)):
        rank = t.parameter_rank(lin, ft.lora_rank) or (
            0 if ft.frozen_layer(i) else t.module_rank(lin, ft.lora_rank))
        if rank:
            out.append(Adapter(lin, rank, ft.dora))
    return out


def edge_adapters(model: ModelSpec, ft: FineTune, targets: Targets | None = None,
                  kind: str | None = None) -> list[Adapter]:
    """The adapters on the embedding, a learned position table and the output head, when
    named (all-linear never targets them; layers_to_transform keeps lm_head alone);
    ``kind``: of that component only."""
    if not ft.adapters:
        return []
    t = targets or resolve(model, ft)
    return [Adapter(e, ft.lora_rank, ft.dora)
            for e in modules.embeddings(model) + [modules.output(model)]
            if e.name in t.names and _edge_kept(e, ft) and kind in (None, e.kind)]

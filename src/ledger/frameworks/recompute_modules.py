"""Megatron-Core's selective recompute modules (``--recompute-modules``): the names it
accepts, those the ledger prices, and what Megatron refuses of them - one check for the
CLI's config and for the Megatron launch reader.

Megatron-LM at d98e8a64, megatron/core/transformer/transformer_config.py: the choices
(L560-583, asserted at L1944-1962), their default ["core_attn"] (L1940-1941); moe_act only
with grouped GEMMs (L1964-1967), mla_up_proj only with multi-latent attention (L1969-1973),
gdn_norm_out only with a Gated DeltaNet variant (L1975-1981); moe_act and layernorm not
under FP8 delayed scaling (L2000-2006: ``fp8`` set and ``fp8_recipe == 'delayed'``, Megatron's
default recipe, L594-596); mhc only with HyperConnections, and not beside mlp (L2027-2035). What each drops is ``ledger.arch.selective`` and
``ledger.arch.activations``; what each runs again ``ledger.step.recompute``.
"""
from __future__ import annotations

from ledger.frameworks.host_checks import WHOLE_LAYER

# the modules the ledger prices (gdn_norm_out: Gated DeltaNet's gated output norm and its
# HP-to-CP all-to-all, ledger.arch.recurrent.norm_out_elements)
RECOMPUTE_MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe",
                     "shared_experts", "gdn_norm_out")
# Megatron's other choices act on a mixer the ledger does not model - GatedDeltaProduct's
# input projection and its causal conv (megatron/core/ssm/gated_delta_product.py L270-282)
# - and on the HyperConnections (transformer_block.py L331; DeepSeek-V4's mHC, counted and
# priced in ledger.anatomy.compressed, but not its recompute): accepted, priced as not
# recomputed, and named as not priced
UNPRICED_RECOMPUTE_MODULES = ("gdp_in_proj", "gdp_qkv", "mhc")
MEGATRON_RECOMPUTE_MODULES = RECOMPUTE_MODULES + UNPRICED_RECOMPUTE_MODULES
# the ModelSpec attentions Megatron builds with multi_latent_attention: DeepSeek-V2/V3's MLA,
# and DeepSeek-V4's compressed attention, whose Bridge provider sets it (Megatron-Bridge
# 067f987df, src/megatron/bridge/models/deepseek/deepseek_v4_bridge.py L398)
MLA_ATTENTIONS = ("mla", "csa")


def fp8_recipe_of(fw) -> str | None:
    """The recipe a framework record's FP8 GEMMs run (``Framework.fp8``), as Megatron's
    --fp8-recipe names it; None without FP8 GEMMs (BF16, or FP4's own --fp4-recipe)."""
    rec = getattr(fw, "fp8", None)
    return rec.name if rec is not None and rec.gemm_format == "fp8" else None


def recompute_module_problems(mods, gdn: bool | None, mhc: bool | None,
                              mla: bool | None = None, grouped_gemm: bool | None = None,
                              fp8_recipe: str | None = None) -> list[tuple[str, str]]:
    """(field, reason) for each choice of modules Megatron refuses under selective
    recompute: a name it does not know, moe_act without grouped GEMMs (``grouped_gemm``:
    a launch's --moe-grouped-gemm; the CLI's routed experts run them), mla_up_proj without
    multi-latent attention (``mla``), gdn_norm_out without Gated DeltaNet layers (``gdn``),
    moe_act or layernorm under FP8 delayed scaling (``fp8_recipe``: the recipe of the run's
    FP8 GEMMs, None without FP8), mhc without HyperConnections (``mhc``) or beside mlp.
    None: not known here (the config alone, before a model).

    >>> recompute_module_problems(("core_attn", "mhc", "mlp"), False, None)[0][1][:30]
    "mhc with mlp: Megatron's two c"
    >>> recompute_module_problems(("gdp_qkv", "mhc"), False, True)
    []
    >>> recompute_module_problems(("layernorm",), None, None, fp8_recipe="tensorwise")
    []
    """
    mods, out = tuple(mods or ()), []
    odd = [m for m in mods if m not in MEGATRON_RECOMPUTE_MODULES]
    if odd:
        out.append(("recompute_modules", f"{', '.join(odd)} not among "
                    f"{', '.join(MEGATRON_RECOMPUTE_MODULES)} (transformer_config.py "
                    f"L1944-1962 @d98e8a64)"))
    given = f"got --recompute-modules {','.join(mods)}"
    if "moe_act" in mods and grouped_gemm is False:
        out.append(("recompute_modules", f"moe_act needs grouped GEMMs (--moe-grouped-gemm; "
                    f"transformer_config.py L1964-1967 @d98e8a64; the ledger runs them for "
                    f"routed experts), the run has none: {given}"))
    if "mla_up_proj" in mods and mla is False:
        out.append(("recompute_modules", f"mla_up_proj needs multi-latent attention "
                    f"(--multi-latent-attention; transformer_config.py L1969-1973 @d98e8a64),"
                    f" the model has none: {given}"))
    if "gdn_norm_out" in mods and gdn is False:
        out.append(("recompute_modules", "gdn_norm_out needs Gated DeltaNet layers "
                    "(--experimental-attention-variant gdn or gdn2; transformer_config.py "
                    "L1975-1981 @d98e8a64), the model has none"))
    cached = [m for m in ("moe_act", "layernorm") if m in mods]
    if cached and fp8_recipe == "delayed":
        out.append(("recompute_modules", f"{' and '.join(cached)} cannot be recomputed under "
                    f"FP8 delayed scaling, Megatron's default --fp8-recipe "
                    f"(transformer_config.py L2000-2006 @d98e8a64): take --fp8-recipe "
                    f"tensorwise, mxfp8 or blockwise, or drop {', '.join(cached)}: {given} "
                    f"with --fp8-recipe delayed"))
    if "mhc" in mods and "mlp" in mods:
        out.append(("recompute_modules", "mhc with mlp: Megatron's two checkpoints conflict "
                    "(transformer_config.py L2031-2035 @d98e8a64)"))
    if "mhc" in mods and mhc is False:
        out.append(("recompute_modules", "mhc needs HyperConnections (--enable-mhc-connections"
                    ", the ledger's --hc-mult; transformer_config.py L2028-2030 @d98e8a64), "
                    "the model has none"))
    return out


def pre_mlp_norm_recomputed(model, cfg, dispatcher: str) -> bool:
    """Whether ``layernorm`` recomputes an MoE layer's pre-MLP norm as Megatron-Core builds
    the layer (transformer_layer.py L481-527 @d98e8a64,
    ``can_recompute_pre_mlp_layernorm_for_cudagraph``): always, unless the router is
    captured in a CUDA graph (``moe_router`` among the config's ``cuda_graph`` scopes) by
    Transformer Engine's graphs (``cuda_graph_local``: Megatron's own ``local`` graphs keep
    it); then not beside overlapped shared experts (they read the norm's output outside
    the graph), and only where the graph also takes the dispatcher's preprocessing
    (``moe_preprocess``) under the alltoall dispatcher or LatentMoE - otherwise "the
    layernorm output returns directly as one of the outputs of the cudagraph, which will
    be allocated a static buffer, thus not able to be released", and Megatron disables
    the recompute with a warning. ``dispatcher``: the config's (``config.dispatcher``).
    The input norm (L475-479) is not affected. Arrays of scopes (the planner) are not
    read here: it takes the config's one tuple. A whole-layer capture (``WHOLE_LAYER``:
    Megatron's empty module list, transformer_config.py L2750) names no module, so the
    router is not among them and the recompute stays."""
    scopes = tuple(getattr(cfg, "cuda_graph", ()) or ())
    if "moe_router" not in scopes or getattr(cfg, "cuda_graph_local", False) \
            or set(WHOLE_LAYER) <= set(scopes):
        return True
    if getattr(model, "shared_experts", 0) and getattr(cfg, "shared_expert_overlap", False):
        return False
    latent = bool(getattr(model, "moe_latent", 0))
    return "moe_preprocess" in scopes and (dispatcher == "alltoall" or latent)

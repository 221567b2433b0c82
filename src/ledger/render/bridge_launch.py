"""What a Megatron-Bridge release's perf launch sets beyond its recipe's model config, per
table row (``ledger.validation.bridge.BridgeRow``): the state dtypes the perf scripts keep,
the caching allocator's expandable segments, TE's TP comm-GEMM overlap, the loss kernel
(``loss_of``), the CUDA graphs it captures (``graph_scopes``), the flex dispatcher's SMs
(``ep_sms_of``), the LM head's MXFP8 (``fp8_output_proj``), the shared experts' overlap
(``shared_expert_overlap``) and the recompute (``recompute_of``) - each with the file and
line at the release's tag it is read from."""
from __future__ import annotations

from ledger.validation.bridge import BridgeRow


# what the perf recipes keep of the state beyond Megatron's defaults: every release's perf
# scripts reduce gradients in BF16 (grad_reduce_in_fp32 False: the v0.1.0rc3 YAMLs'
# mixed_precision block, e.g. configs/qwen3/qwen3_30b_a3b_llm_pretrain.yaml L42-43;
# configs/llama3/llama3_llm_pretrain.py L46-47 @v0.2.0, configs/deepseek/
# deepseek_llm_pretrain.py L42-43 @v0.4.1; perf_recipes/_common.py L71-72 @v0.6.0, which
# Kimi K2 alone overrides); DeepSeek-V3 keeps BF16 Adam moments under the precision-aware
# optimizer (recipes/deepseek/deepseek_v3.py L161-165 @v0.4.1, L272-276 @v0.2.0;
# perf_recipes/deepseek/common.py L43-46 @067f987d)
PERF_STATE = dict(grad_dtype="bf16")
RECIPE_STATE = {"deepseek-v3": dict(PERF_STATE, exp_avg_dtype="bf16", exp_avg_sq_dtype="bf16"),
                "kimi-k2": {}}


# PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True as each release's perf launcher sets it
# (Megatron-Bridge scripts/performance at the row's recipe ref): 0.5.x for every Slurm run
# (utils/executors.py L39-50 PERF_ENV_VARS, copied at L105), popped under nccl_ub or Llama on
# Megatron-FSDP (perf_plugins.py L314-319); before that only named runs - Llama 3.1 405B FP8
# on GB200 (0.1.0rc3 setup_experiment.py L116-118, current scaling only; 0.2.0 perf_plugins.py
# L250-252; 0.3.x L262-269) and GB300 (0.4.x L262-269), DeepSeek-V3 on H100 (0.3.x
# L270-276) and GB200 (0.4.x L271-277); 0.6.0 moves it into each perf recipe's
# cfg.env_vars, applied before torch is imported (scripts/performance/bootstrap.py L45), and
# every recipe function the tables name sets it (perf_recipes/deepseek/gb300/deepseek_v3.py
# L165, gpt_oss/gb300/gpt_oss.py L239, qwen/gb300/qwen3_moe.py L495, nemotronh/gb300/
# nemotronh.py L149, L197, L288, ... : 18 of 18 functions, each env_vars block read @v0.6.0)
_EXPANDABLE = {("llama3.1-405b", "v0.1"): ("gb200",), ("llama3.1-405b", "v0.2"): ("gb200",),
               ("llama3.1-405b", "v0.3"): ("gb200",), ("llama3.1-405b", "v0.4"): ("gb200", "gb300"),
               ("deepseek-v3", "v0.3"): ("h100",), ("deepseek-v3", "v0.4"): ("h100", "gb200")}


def expandable_segments(row: BridgeRow) -> bool:
    """Whether the row's launch ran the caching allocator with expandable segments."""
    ref = str(row.recipe.get("ref") or "")
    if ref.startswith("v0.6"):
        return True
    if ref.startswith("v0.5"):
        return not (row.setting("nccl_ub") is True
                    or (row.model.startswith("llama") and row.fsdp))
    if row.model == "llama3.1-405b" and (row.precision not in ("fp8_cs", "fp8_mx")
                                         or (ref.startswith("v0.1") and row.precision != "fp8_cs")):
        return False
    return row.gpu in _EXPANDABLE.get((row.model, ref[:4]), ())


def grad_accumulation_fusion(row: BridgeRow) -> bool:
    """Megatron's gradient-accumulation fusion as the row's run had it: the recipe's own
    setting (the 0.6 recipes set it, e.g. perf_recipes/nemotronh/gb200/nemotronh.py
    @v0.6.0), else the recipe function's setting under the row's Megatron-FSDP - the Llama
    functions turn it off there ("Disabled to avoid functional errors":
    scripts/performance/configs/llama/llama3_llm_pretrain.py L76, L111, L146, L181 @v0.4.0
    and v0.4.2, L75-L177 @v0.3.0, configs/llama3/llama3_llm_pretrain.py L74-L144 @v0.2.0),
    after set_workload_base_configs turned it on (utils/overrides.py L86 @v0.3.0, L88
    @v0.4.0, L90 @v0.4.2; utils/helpers.py L125 @v0.2.0) - else on (v0.1.0rc3's
    run_script.py L154 sets it for every run, Megatron-FSDP's too; Megatron's default)."""
    own = row.setting("gradient_accumulation_fusion")
    if isinstance(own, bool):
        return own
    for value, when in (row.pretrain.get("conditional") or {}).get(
            "model.gradient_accumulation_fusion", ()):
        if when == "cfg.ddp.use_megatron_fsdp" and row.megatron_fsdp:
            return bool(value)
    return True


def fsdp_double_buffer(row: BridgeRow) -> bool:
    """Megatron-FSDP's persistent double buffers as the row's run had them: the recipe's
    own ddp.fsdp_double_buffer, else its function's setting under Megatron-FSDP - the Llama
    functions turn it on there (scripts/performance/configs/llama/llama3_llm_pretrain.py
    L75, L110, L145, L180 @v0.4.2, with suggested_communication_unit_size 8e8; v0.1.0rc3's
    run_script.py L161-163 for Llama 3 70B and 405B) - and on with nccl_ub (Megatron-FSDP
    forces it: param_and_grad_buffer.py L1663-1670 @2edffadb); else Megatron's default, off
    (megatron/core/distributed/distributed_data_parallel_config.py L128 @2edffadb)."""
    if not row.megatron_fsdp:
        return False
    own = row.setting("fsdp_double_buffer")
    if isinstance(own, bool):
        return own or row.setting("nccl_ub") is True
    for value, when in (row.pretrain.get("conditional") or {}).get(
            "ddp.fsdp_double_buffer", ()):
        if when == "cfg.ddp.use_megatron_fsdp":
            return bool(value)
    if str(row.recipe.get("ref") or "").startswith("v0.1.") \
            and row.model in ("llama3-70b", "llama3.1-405b"):
        return True
    return row.setting("nccl_ub") is True


def _holds(when: str, row: BridgeRow) -> bool:
    """Whether a recipe function's condition holds for the row, where it is one the
    tables' generator keeps and the row states: ``precision == 'X'`` (the function's
    precision argument, the launcher's --compute_dtype: scripts/performance/
    argument_parser.py L135-137 @ v0.2.0, the row's precision) and
    ``config_variant.lower() == 'vN'`` (the workload config the row ran, its name's _VN),
    joined by ``and``; any other condition is not taken to hold."""
    import re

    variant = re.search(r"_(V\d+)$", str(row.recipe.get("config") or ""))
    for clause in when.split(" and "):
        prec = re.fullmatch(r"precision == '(\w+)'", clause.strip())
        var = re.fullmatch(r"config_variant\.lower\(\) == '(\w+)'", clause.strip())
        if prec is not None and prec.group(1) == row.precision:
            continue
        if var is not None and variant is not None and variant.group(1).lower() == var.group(1):
            continue
        return False
    return True


def overlap_param_gather(row: BridgeRow) -> bool:
    """--overlap-param-gather as the row's run had it: Megatron-Bridge's CommOverlapConfig
    turns it on with DP > 1 (src/megatron/bridge/training/comm_overlap.py:527-545 @ v0.3.1)
    unless the row's recipe function turns it off under a condition the row meets - the
    0.2.0 functions under MXFP8 ("keeping this eanbled causes NaN grad norm": scripts/
    performance/configs/llama31/llama31_llm_pretrain.py L140-143 @ v0.2.0, and the Llama 3
    70B, DeepSeek-V3 and Qwen3-235B functions beside it), 0.4.2's GB200 Llama 3.1 405B
    NVFP4 V2 (disable_param_gather_overlap, configs/llama/llama31_llm_pretrain.py L46-56,
    L123-124 @ v0.4.2). An unconditional ``comm_overlap.overlap_param_gather`` is read first:
    the user's CommOverlapConfig value wins over that default (comm_overlap.py L594-600,
    applied to the DDP config L636-643 @ v0.6.0; L557-565, L599-606 @ v0.3.1). A recipe's
    ``ddp.overlap_param_gather`` alone is not: under the distributed optimizer setup()
    overwrites it with the CommOverlapConfig's (the functions that turn it off set both;
    no row sets either to False today)."""
    own = row.setting("comm_overlap.overlap_param_gather")
    if own is not None:
        return bool(own)
    for value, when in (row.pretrain.get("conditional") or {}).get(
            "ddp.overlap_param_gather", ()):
        if _holds(when, row):
            return bool(value)
    return True


def recompute_of(row: BridgeRow) -> dict:
    """The row's recompute as ParallelConfig fields. The perf scripts' recompute_num_layers
    is full recompute, method block, of the first n layers of each chunk
    (set_recompute_overrides: scripts/performance/utils/helpers.py L174-177 @ v0.2.0,
    utils/overrides.py L137-140 @ v0.3.0); beside a recipe's own recompute_method uniform,
    groups of n (Megatron's uniform, as the CLI reads it). Else the recipe's granularity
    and modules (selective with none: Megatron's default module, core_attn)."""
    modules, gran = row.setting("recompute_modules"), row.setting("recompute_granularity")
    layers, method = row.setting("recompute_num_layers"), row.setting("recompute_method")
    if isinstance(layers, int) and layers > 0 and method in (None, "block", "uniform"):
        return {"recompute": "full",
                "recompute_group" if method == "uniform" else "recompute_layers": layers}
    if gran == "full":
        return {"recompute": "full"}
    if isinstance(modules, list) and modules:
        return {"recompute": "selective", "recompute_modules": tuple(modules)}
    return {"recompute": "selective"} if gran == "selective" and modules is None else {}


# the families whose Megatron-Bridge recipe turns TP comm overlap on (CommOverlapConfig(
# tp_comm_overlap=True): src/megatron/bridge/recipes/llama/llama3.py:738,828,917,1094,1189
# and recipes/nemotronh/nemotron_3_nano.py:123-125 @ v0.3.1); the others leave it off
TP_OVERLAP_MODELS = ("llama3-8b", "llama3-70b", "llama3.1-405b", "nemotron-3-nano")


def tp_overlap(row: BridgeRow) -> bool:
    """TE's comm-GEMM overlap as the row's recipe sets it: on where its family's recipe
    turns it on and TP > 1 with SP (comm_overlap.py:439-448), off under NVFP4
    (scripts/performance/configs/llama/llama3_llm_pretrain.py:80 @ v0.3.1)."""
    return row.model in TP_OVERLAP_MODELS and row.tp > 1 and row.precision != "nvfp4"


def loss_of(row: BridgeRow) -> str:
    """TE's parallel cross-entropy where the perf scripts set cross_entropy_fusion_impl
    'te' for every run (scripts/performance/utils/helpers.py L108 @ v0.2.0, overrides.py
    L64-L84 @ v0.3.0-v0.6.0) on the providers' cross_entropy_loss_fusion True (gpt_provider
    .py L196, mamba_provider.py L166 @ v0.4.1), unless the row says otherwise; v0.1.0rc3's
    scripts set no impl: its YAML's, else Megatron-Core's own ('native': the compiled
    fused_cross_entropy.py, the same at cd4afffa, the Megatron-LM v0.6.0 pins, as at
    d98e8a64: ``LOSSES['vocab-parallel-fused']``)."""
    ref = (row.recipe or {}).get("ref") or ""
    fused = row.setting("cross_entropy_loss_fusion", True) is not False
    impl = row.setting("cross_entropy_fusion_impl", None if ref.startswith("v0.1.") else "te")
    if not fused:
        return "vocab-parallel"
    return "te-parallel" if impl == "te" else "vocab-parallel-fused"


def graph_scopes(row: BridgeRow) -> tuple[str, ...]:
    """The recipe's CUDA graphs as ``ParallelConfig.cuda_graph``: its cuda_graph_modules, else
    the deprecated cuda_graph_scope Megatron-Core migrates into it (transformer_config.py
    L1047, L1086-1092, L2383-2406 at Megatron-LM cd4afffa, the commit Megatron-Bridge v0.6.0
    pins), under cuda_graph_impl local / transformer_engine (none named: the whole layer, as
    Megatron's reader takes it, ``ledger.io.megatron.flags.WHOLE_LAYER``), or full_iteration.
    The 0.6 recipes set the modules with Megatron-Bridge's helpers (utils/cuda_graph.py
    L77-105 @ v0.6.0), which the tables' generator expands (``recipe["graph_helpers"]``)."""
    from ledger.io.megatron.flags import WHOLE_LAYER

    # a whole-layer capture takes the MoE's expert part too where its shapes are static:
    # the token-drop rows pad every expert to capacity, so the dispatcher needs no token
    # counts on the host (token_dispatcher.py L444-465 at Megatron-LM core_v0.14.0; the
    # "moe" module is drop-and-pad only, enums.py L68-73 at d98e8a64)
    whole = WHOLE_LAYER + (("moe",) if row.model_variant == "tokendrop" else ())
    impl = row.setting("cuda_graph_impl")
    scope = row.setting("cuda_graph_modules", row.setting("cuda_graph_scope"))
    if impl in (None, "none") and row.setting("cuda_graphs") is True:
        # the 0.1 YAML perf_matrix's cuda_graphs: model.enable_cuda_graph (Megatron-Bridge
        # scripts/performance/utils/helpers.py L114-120 @ v0.1.0rc3), on Megatron-Core 0.14
        # (pyproject.toml L88 there) the local CudaGraphManager at its default scope "full"
        # (transformer_config.py L568, L591 @ core_v0.14.0): attention and MLP of every
        # layer, forward and backward (transformer_layer.py L275-287, L764-766)
        return whole
    if impl in (None, "none") or str(impl).startswith("expr:"):
        return ()
    if impl == "full_iteration":
        return ("full_iteration",)
    named = [scope] if isinstance(scope, str) else list(scope or [])
    named = [s for s in named if s != "full"]
    return ("full_iteration",) if "full_iteration" in named else tuple(named) or whole


def graph_impl(row: BridgeRow) -> str | None:
    """Whose graphs capture ``graph_scopes``: the recipe's cuda_graph_impl, ``local`` for the
    0.1 YAML's cuda_graphs (Megatron's own CudaGraphManager, as ``graph_scopes`` reads it);
    None without graphs."""
    impl = row.setting("cuda_graph_impl")
    if impl in (None, "none"):
        return "local" if row.setting("cuda_graphs") is True else None
    return str(impl)


# the SMs every release's perf launcher gives HybridEP, after the recipe ("TODO: This needs to
# be adjusted when overlapping HybridEP with computation"): scripts/performance/utils/
# helpers.py L112-113 @v0.2.0; utils/overrides.py L69 @v0.3.0, L70 @v0.3.1, L71 @v0.4.0,
# L73 @v0.4.2, L75 @v0.5.0 and v0.5.1, L89 @v0.6.0 (and perf_recipes/_common.py L86-87)
PERF_HYBRIDEP_SMS = 32


def ep_sms_of(row: BridgeRow) -> int | None:
    """The flex dispatcher's SMs as the row's run had them (``ParallelConfig.ep_sms``): the
    recipe's moe_flex_dispatcher_num_sms, which Megatron-Core takes over the deprecated
    per-backend knobs (transformer_config.py L1792-1811 @d98e8a64; the v0.6.0 DeepSeek-V4
    recipes set it, perf_recipes/deepseek/gb200/deepseek_v4.py L62, gb300 L75: 32), else
    under HybridEP the launcher's ``PERF_HYBRIDEP_SMS``, under DeepEP the recipe's
    moe_deepep_num_sms; None: the backend's default (ledger.step.ep_sms)."""
    own = row.setting("moe_flex_dispatcher_num_sms")
    if isinstance(own, int) and own > 0:
        return own
    if row.setting("moe_flex_dispatcher_backend") == "hybridep":
        return PERF_HYBRIDEP_SMS
    own = row.setting("moe_deepep_num_sms")
    return own if isinstance(own, int) and own > 0 else None


# the one condition the 0.5 recipe functions set fp8_output_proj under (scripts/performance/
# configs/deepseek/deepseek_llm_pretrain.py L81-82 (GB300), L121-122 (GB200) @v0.5.0;
# gpt_oss/gpt_oss_llm_pretrain.py, the GB300 / GB200 functions at L401 / L431): the run's
# precision recipe is MXFP8
MXFP8_TEST = "cfg.mixed_precision.fp8_recipe == 'mxfp8'"


def fp8_output_proj(row: BridgeRow) -> bool:
    """The LM head under MXFP8 (``ledger.frameworks.fp8_head``) as the row's recipe set it:
    its own model.fp8_output_proj (the 0.6 recipes, e.g. perf_recipes/deepseek/gb300/
    deepseek_v3.py L157 @v0.6.0), else its function's, set under the MXFP8 test
    (``MXFP8_TEST``) where the row's precision recipe is MXFP8."""
    own = row.setting("fp8_output_proj")
    if isinstance(own, bool):
        return own
    for value, when in (row.pretrain.get("conditional") or {}).get("model.fp8_output_proj", ()):
        if when == MXFP8_TEST and row.precision_setting("fp8_recipe") == "mxfp8":
            return bool(value)
    return False


def shared_expert_overlap(row: BridgeRow, model, dispatcher) -> bool:
    """--moe-shared-expert-overlap as the row's recipe runs it: the model providers of the
    shared-expert families turn it on (DeepSeek: models/deepseek/deepseek_provider.py L76
    @ v0.1.0rc3, L78 @ v0.2.0 / v0.3.0; Kimi: models/kimi/kimi_provider.py L91 @ v0.3.0;
    Nemotron-H: models/nemotronh/nemotron_h_provider.py L56 @ v0.3.0, nemotron_h_bridge.py
    L298 @ v0.4.0); the performance scripts turn it off with the combined 1F1B (above) and
    the recipes with the flex dispatcher (recipes/deepseek/deepseek_v3.py L145-149 @
    v0.1.0rc3, recipes/nemotronh/nemotron_3_nano.py L224-226 @ v0.3.0,
    scripts/performance/utils/utils.py L417-419 at 067f987d); release 25.09's launcher
    sets the combined 1F1B and DeepEP on H100 (``ledger.validation.bridge_scripts``)."""
    return bool(model is not None and model.is_moe and model.shared_experts
                and dispatcher != "flex")

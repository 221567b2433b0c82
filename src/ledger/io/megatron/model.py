"""The model and placement a Megatron-LM launch builds, from its parsed arguments, and the
launches Megatron itself refuses. Megatron-LM at d98e8a6 (2026-08-22); ``arguments.py``
is megatron/training/arguments.py, ``argument_utils.py`` megatron/training/argument_utils.py.

Model (``core_transformer_config_from_args``, argument_utils.py:277-381, and the GPT
builder): ffn_hidden_size defaults to 4h, or int(8h/3/64)*64 with --swiglu (arguments.py
:1320-1329; --quick-geglu does not take that rule); kv_channels to h/heads (:1331-1333);
num_query_groups counts only with --group-query-attention (argument_utils.py:330-333);
--swiglu and --quick-geglu are gated MLPs, --squared-relu is not (:314-326); a learned
position table of --max-position-embeddings rows exists iff the type is learned_absolute
(language_model_embedding.py:47, 70-73; gpt_builders.py:90), and the deprecated
--use-rotary-position-embeddings sets rope (arguments.py:1626-1627); add_bias_linear
(default True, --disable-bias-linear) forces the qkv bias too (:1609-1610); embeddings are
tied unless --untie-embeddings-and-output-weights (gpt_builders.py:96); layer i is MoE when
i % --moe-layer-freq == 0 or, for a list, when its entry is 1 (gpt_layer_specs.py:643-661);
a layer is windowed when --window-size is set and layer_number % --window-attn-skip-freq
!= 0 (1-indexed; a list: its entry is set) (megatron/core/transformer/utils.py:531-545);
--window-size (127, 0) lets a query see itself and 127 keys before it; --softmax-type
learnable adds one logit per head (attention sinks); MLA's flag defaults are q-lora-rank
None, kv-lora-rank 32, qk-head-dim 128, qk-pos-emb-head-dim 64, v-head-dim 128
(arguments.py:3548-3562), its latent norms exist with --qk-layernorm.

The vocabulary is the tokenizer's size padded to a multiple of
--make-vocab-size-divisible-by x tp unless --padded-vocab-size is given or
--no-pad-vocab-size (megatron/core/tokenizers/utils/build_tokenizer.py:133-152); only
NullTokenizer and TikTokenizer read --vocab-size (:64-65, 101-102), the others take the
size from their files (``len(tokenizer)``).

Placement: expert tensor parallel defaults to tp (arguments.py:587-588); dp = world /
(tp pp cp) (:430-448); the global batch defaults to micro x dp (:702-704); sequence
parallelism is dropped at tp 1 (:1434-1439); --use-distributed-optimizer is ZeRO-1 and
Megatron-FSDP shards by --data-parallel-sharding-strategy (no_shard, optim, optim_grads,
optim_grads_params = ZeRO 0-3); with --bf16 the main grads are fp32 unless
--grad-reduce-in-bf16 (:1204-1217); --recompute-activations is selective recompute
(:607-608) of the modules ["core_attn"] (transformer_config.py:1940-1941).
"""
from __future__ import annotations

import math

from ledger.errors import LedgerError
from ledger.frameworks.distopt_checks import instances_problem
from ledger.frameworks.host_checks import moe_overlap_problems
from ledger.frameworks.pipeline_checks import deferral_problem
from ledger.frameworks.megatron_tokenizers import SIZED_TOKENIZERS  # noqa: F401  (re-exported)
from ledger.frameworks.recompute_modules import RECOMPUTE_MODULES, recompute_module_problems
from ledger.model import ModelSpec

# tokenizers built from --vocab-file (and --merge-file), the others from --tokenizer-model
# (build_tokenizer.py:8, 38-50)
FILE_TOKENIZERS = ("BertWordPieceLowerCase", "BertWordPieceCase", "GPT2BPETokenizer")
SHARDING = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}
# the recompute modules the reader applies: the ledger's priced ones but gdn_norm_out,
# whose Gated DeltaNet layers the reader does not build (--experimental-attention-variant
# is named, not read); the others are named as not priced (reader._EXACT)
READ_MODULES = tuple(m for m in RECOMPUTE_MODULES if m != "gdn_norm_out")
GDN_VARIANTS = ("gdn", "gdn2", "gated_delta_net")  # is_gated_delta_net_variant
# (megatron/core/models/gpt/experimental_attention_variant_module_specs.py L378-388)
CP_KINDS = {"p2p": "ring", "a2a": "ulysses"}


def refusals(ns: dict, world: int | None) -> list[str]:
    """What Megatron's validate_args (and the builders) raise for this launch: all of it."""
    out = []
    for dest, flag in (("num_layers", "--num-layers"), ("hidden_size", "--hidden-size"),
                       ("num_attention_heads", "--num-attention-heads"),
                       ("max_position_embeddings", "--max-position-embeddings")):
        if ns.get(dest) is None:
            out.append(f"no {flag} (required, arguments.py:1314-1317)")
    if ns.get("seq_length") is None:
        out.append("no --seq-length (arguments.py:1346-1350)")
    if ns.get("micro_batch_size") is None:
        out.append("no --micro-batch-size (arguments.py:693-694)")
    if ns.get("fine_grained_activation_offloading"):
        mods = ns.get("offload_modules") or []
        if not mods:
            out.append("--fine-grained-activation-offloading without --offload-modules "
                       "(transformer_config.py:2131)")
        if "attn_proj" in mods and "core_attn" not in mods:
            out.append("--offload-modules attn_proj without core_attn "
                       "(transformer_config.py:2148-2153)")
        if ns.get("cpu_offloading_num_layers"):
            out.append("--fine-grained-activation-offloading with --cpu-offloading-num-layers "
                       "(transformer_config.py:2128-2130)")
    deferral = ns.get("defer_embedding_wgrad_compute") and deferral_problem(
        ns.get("pipeline_model_parallel_size") or 1,
        ns.get("gradient_accumulation_fusion") is not False, ns.get("wgrad_deferral_limit") or 0)
    if deferral:  # the CLI's check (frameworks.pipeline_checks)
        out.append(f"--defer-embedding-wgrad-compute {deferral}")
    if ns.get("optimizer_cpu_offload") and not ns.get("use_precision_aware_optimizer"):
        out.append("--optimizer-cpu-offload without --use-precision-aware-optimizer "
                   "(arguments.py:1884-1888)")
    if ns.get("step_batch_size_schedule") and ns.get("global_batch_size"):
        out.append("--step-batch-size-schedule with --global-batch-size (arguments.py:698-701)")
    h, heads = ns.get("hidden_size"), ns.get("num_attention_heads")
    if h and heads and ns.get("kv_channels") is None and h % heads:
        out.append(f"--hidden-size {h} is not divisible by --num-attention-heads {heads} "
                   f"(arguments.py:1332)")
    seq, cp, max_pos = ns.get("seq_length"), ns["context_parallel_size"], \
        ns.get("max_position_embeddings")
    if seq and cp > 1 and seq % (2 * cp):
        out.append(f"--seq-length {seq} is not a multiple of 2 x cp({cp}) (arguments.py:1335)")
    if seq and max_pos and max_pos < seq:
        out.append(f"--max-position-embeddings {max_pos} < --seq-length {seq} "
                   f"(arguments.py:1353-1356)")
    if not ns["add_position_embedding"] and position_type(ns) != "rope":
        out.append("--no-position-embedding needs rope (arguments.py:1633-1634)")
    experts, ep = ns.get("num_experts") or 0, ns["expert_model_parallel_size"]
    if ep > 1 and (not experts or experts % ep):
        out.append(f"--expert-model-parallel-size {ep} needs --num-experts divisible by it, "
                   f"got {experts} (arguments.py:1654-1658)")
    if ns["fp16"] and ns["bf16"]:
        out.append("--fp16 with --bf16 (arguments.py:1196)")
    for other, line in (("squared_relu", 321), ("quick_geglu", 324)):  # asserts
        if ns.get(other) and ns["swiglu"]:
            out.append(f"--{other.replace('_', '-')} with --swiglu (argument_utils.py:{line})")
    if ns["multi_latent_attention"] and ns["group_query_attention"]:
        out.append("--multi-latent-attention with --group-query-attention (arguments.py:1973)")
    if ns.get("mtp_num_layers") and position_type(ns) not in ("rope", "none"):
        out.append("--mtp-num-layers needs rope or no position embedding (arguments.py:882-885)")
    freq, layers = ns["moe_layer_freq"], ns.get("num_layers")
    if experts and isinstance(freq, list) and layers and len(freq) != layers:
        out.append(f"--moe-layer-freq has {len(freq)} entries for {layers} layers "
                   f"(gpt_layer_specs.py:651-657)")
    if ns.get("recompute_granularity") == "selective" and ns.get("recompute_modules"):
        out += [problem for _, problem in recompute_module_problems(  # the CLI's check
            ns["recompute_modules"], ns.get("experimental_attention_variant") in GDN_VARIANTS,
            bool(ns.get("enable_mhc_connections")), bool(ns["multi_latent_attention"]),
            bool(ns.get("moe_grouped_gemm")),
            # --fp8-format on, --fp8-recipe as given or Megatron's default (delayed)
            (ns.get("fp8_recipe") or "delayed") if ns.get("fp8") else None)]
    if ns["moe_layer_recompute"] and ns.get("recompute_granularity") == "full":
        out.append("--moe-layer-recompute with full recompute (transformer_config.py:2019)")
    if ns.get("ckpt_format") == "fsdp_dtensor" and not ns["use_megatron_fsdp"]:
        out.append("--ckpt-format fsdp_dtensor needs --use-megatron-fsdp (arguments.py:1675)")
    if ns["optimizer"] not in ("sgd", "adam") and (ns["use_megatron_fsdp"]
                                                   or ns.get("use_torch_fsdp2")):
        out.append(f"--optimizer {ns['optimizer']} with FSDP (arguments.py L1739-1740: "
                   f"emerging optimizers support neither FSDP)")
    sharded = ns["use_distributed_optimizer"] or ns["use_megatron_fsdp"]
    if ns["fp8_param_gather"] and not sharded:
        out.append("--fp8-param-gather needs the distributed optimizer or Megatron-FSDP "
                   "(arguments.py:1096-1098)")
    if ns["overlap_param_gather"] and not (sharded and ns["overlap_grad_reduce"]):
        out.append("--overlap-param-gather needs the distributed optimizer and "
                   "--overlap-grad-reduce (arguments.py:1024-1029)")
    out += [problem for _, problem in moe_overlap_problems(
        bool(ns.get("moe_shared_expert_overlap")),
        ns.get("moe_shared_expert_intermediate_size") is not None,
        ns.get("moe_token_dispatcher_type"), bool(ns.get("overlap_moe_expert_parallel_comm")),
        bool(ns.get("delay_wgrad_compute")),  # the CLI's check (frameworks.host_checks)
        ns.get("recompute_modules") if ns.get("recompute_granularity") == "selective" else ())]
    old = {ns.get("moe_deepep_num_sms"), ns.get("moe_hybridep_num_sms")} - {None}
    if len(old) > 1 and ns.get("moe_flex_dispatcher_num_sms") is None:
        out.append(f"--moe-deepep-num-sms {ns['moe_deepep_num_sms']} and "
                   f"--moe-hybridep-num-sms {ns['moe_hybridep_num_sms']} conflict "
                   f"(transformer_config.py:1805-1810)")
    sources = [bool(ns.get("mock_data")), bool(ns.get("data_path")),
               bool(ns.get("train_data_path") or ns.get("per_split_data_args_path"))]
    if sum(sources) > 1:
        out.append("more than one data source: --mock-data, --data-path, per-split paths "
                   "(arguments.py:1679-1682)")
    return out + _stash_refusals(ns) + _world_refusals(ns, world)


def _stash_refusals(ns: dict) -> list[str]:
    """What TransformerConfig raises of the experts' rank capacity and paged stash
    (transformer_config.py L1868-1882, L2210-2227 @d98e8a64)."""
    out, backend = [], ns.get("moe_flex_dispatcher_backend")
    if ns.get("moe_expert_rank_capacity_factor") is not None:
        if backend not in ("hybridep", "ncclep"):
            out.append(f"--moe-expert-rank-capacity-factor needs --moe-flex-dispatcher-backend "
                       f"hybridep or ncclep, got {backend} (transformer_config.py:1868-1874)")
        elif backend == "hybridep" and not (ns.get("use_transformer_engine_op_fuser")
                                            or ns.get("moe_use_grouped_tensor")):
            out.append("--moe-expert-rank-capacity-factor with hybridep needs "
                       "--use-transformer-engine-op-fuser or --moe-use-grouped-tensor "
                       "(transformer_config.py:1875-1882)")
    if not ns.get("moe_paged_stash"):
        return out
    if ns.get("moe_expert_rank_capacity_factor") is None:
        out.append("--moe-paged-stash without --moe-expert-rank-capacity-factor "
                   "(transformer_config.py:2213-2217)")
    if ns.get("cpu_offloading_num_layers"):  # turns cpu_offloading on (arguments.py:1950)
        out.append("--moe-paged-stash with --cpu-offloading-num-layers "
                   "(transformer_config.py:2211-2212)")
    clash = {"expert_fc1", "moe_act", "fused_group_mlp"} & set(ns.get("offload_modules") or ())
    if clash:
        out.append(f"--moe-paged-stash with --offload-modules {','.join(sorted(clash))} "
                   f"(transformer_config.py:2218-2227)")
    return out


def _world_refusals(ns: dict, world: int | None) -> list[str]:
    if world is None:
        return []
    tp, pp, cp = (ns[k] for k in ("tensor_model_parallel_size",
                                  "pipeline_model_parallel_size", "context_parallel_size"))
    etp, ep = expert_tp(ns), ns["expert_model_parallel_size"]
    out = []
    if world % (tp * pp * cp):
        out.append(f"world {world} is not divisible by tp({tp}) x pp({pp}) x cp({cp}) "
                   f"(arguments.py:430-433)")
    elif world % (etp * ep * pp):
        out.append(f"world {world} is not divisible by etp({etp}) x ep({ep}) x pp({pp}) "
                   f"(parallel_state.py:874-884)")
    elif ns.get("micro_batch_size") and ns.get("global_batch_size"):
        dp = world // (tp * pp * cp)
        if ns["global_batch_size"] % (ns["micro_batch_size"] * dp):
            out.append(f"--global-batch-size {ns['global_batch_size']} is not divisible by "
                       f"micro({ns['micro_batch_size']}) x dp({dp}) "
                       f"(num_microbatches_calculator.py:381-386)")
    n = ns.get("num_distributed_optimizer_instances") or 1
    if n > 1 and not out:  # the CLI's check (frameworks.distopt_checks)
        problem = instances_problem(n, tp, cp, world // (tp * pp * cp), ep, etp)
        if problem is not None:
            out.append(f"--num-distributed-optimizer-instances {n}: {problem}")
    return out


def expert_tp(ns: dict) -> int:
    etp = ns.get("expert_tensor_parallel_size")
    return ns["tensor_model_parallel_size"] if etp is None else etp


def position_type(ns: dict) -> str:
    return "rope" if ns["use_rotary_position_embeddings"] else ns["position_embedding_type"]


def vocab(ns: dict, tokenizer_size: int | None) -> int | None:
    """The embedding's rows, or None when the size must come from the tokenizer files."""
    if ns.get("padded_vocab_size") is not None:
        return ns["padded_vocab_size"]
    size = ns.get("vocab_size") if ns.get("tokenizer_type") in SIZED_TOKENIZERS else None
    size = tokenizer_size or size
    if size is None:
        return None
    if not ns["pad_vocab_size"]:
        return size
    multiple = ns["make_vocab_size_divisible_by"] * ns["tensor_model_parallel_size"]
    return math.ceil(size / multiple) * multiple


def moe_fields(ns: dict, layers: int, ffn: int) -> dict:
    experts = ns.get("num_experts") or 0
    if not experts:
        return {}
    freq = ns["moe_layer_freq"]
    ids = tuple(i for i in range(layers) if (freq[i] if isinstance(freq, list)
                                             else i % freq == 0))
    out = dict(num_experts=experts, top_k=ns["moe_router_topk"],
               moe_ffn_hidden=ns.get("moe_ffn_hidden_size") or ffn, moe_layer_ids=ids,
               router_groups=ns.get("moe_router_num_groups") or 0,
               router_group_topk=ns.get("moe_router_group_topk") or 0,
               moe_latent=ns.get("moe_latent_size") or None)  # moe_layer.py:265-304
    if ns.get("moe_shared_expert_intermediate_size"):
        out |= dict(shared_experts=1,
                    shared_expert_ffn=ns["moe_shared_expert_intermediate_size"])
    return out


def attention_fields(ns: dict) -> dict:
    heads = ns["num_attention_heads"]
    if ns["multi_latent_attention"]:
        return dict(attention="mla", kv_heads=heads, q_lora_rank=ns.get("q_lora_rank"),
                    kv_lora_rank=ns["kv_lora_rank"], qk_nope_head_dim=ns["qk_head_dim"],
                    qk_rope_head_dim=ns["qk_pos_emb_head_dim"], v_head_dim=ns["v_head_dim"])
    kv = ns["num_query_groups"] if ns["group_query_attention"] else heads
    return dict(kv_heads=kv, head_dim=ns.get("kv_channels"),
                qk_norm="head" if ns["qk_layernorm"] else "none")


def window_fields(ns: dict, layers: int) -> dict:
    window = ns.get("window_size")
    if not window:
        return {}
    skip = ns.get("window_attn_skip_freq")
    local = None if skip is None else tuple(
        i for i in range(layers) if (skip[i] if isinstance(skip, list) else (i + 1) % skip))
    return dict(sliding_window=window[0] + 1, local_layers=local)


def model_spec(ns: dict, name: str, vocab_rows: int) -> ModelSpec:
    """The ModelSpec the arguments build (refusals already checked)."""
    layers, h = ns["num_layers"], ns["hidden_size"]
    ffn = ns.get("ffn_hidden_size") or (int(4 * h * 2 / 3 / 64) * 64 if ns["swiglu"]
                                        else 4 * h)
    bias = ns["add_bias_linear"]
    norm = {"LayerNorm": "layernorm", "RMSNorm": "rmsnorm"}[ns["normalization"]]
    learned = ns["max_position_embeddings"] if position_type(ns) == "learned_absolute" else 0
    try:
        return ModelSpec(
            name=name, layers=layers, hidden=h, heads=ns["num_attention_heads"],
            ffn_hidden=ffn, vocab=vocab_rows, seq_len=ns["seq_length"],
            gated_mlp=bool(ns["swiglu"] or ns["quick_geglu"]),
            tied_embeddings=not ns["untie_embeddings_and_output_weights"],
            qkv_bias=bias or bool(ns["add_qkv_bias"]), out_bias=bias, mlp_bias=bias,
            norm=norm, learned_positions=learned,
            attention_sinks=ns.get("softmax_type") == "learnable",
            glu_clamp=float(ns.get("activation_func_clamp_value") or 0.0),
            mtp_layers=ns.get("mtp_num_layers") or 0,
            mtp_shared=bool(ns.get("mtp_use_repeated_layer")), **attention_fields(ns),
            # mHC: two HyperConnectionModules a layer, the streams averaged at the block's
            # end (transformer_layer.py L1684-1692, transformer_block.py L750 @ d98e8a64)
            hc_mult=ns["mhc_num_residual_streams"] if ns.get("enable_mhc_connections") else 0,
            hc_head=False,
            **moe_fields(ns, layers, ffn), **window_fields(ns, layers))
    except LedgerError as e:
        raise LedgerError("from_megatron", f"{name}: {e}") from None


def bf16_grads(ns: dict) -> bool:
    """Whether a --bf16 launch keeps its gradient buffer in bf16: --grad-reduce-in-bf16,
    Megatron-FSDP's --megatron-fsdp-main-grads-dtype bf16, or the precision-aware
    optimizer's --main-grads-dtype bf16 - only fp32 main grads turn
    --accumulate-allreduce-grads-in-fp32 on (arguments.py L1209-1217 @d98e8a64), the DDP's
    grad_reduce_in_fp32 (training.py L2635), else the buffer is in the params' dtype
    (param_and_grad_buffer.py L924); without the precision-aware optimizer Megatron
    refuses a bf16 one (optimizer_config.py L469-471)."""
    return bool(ns["grad_reduce_in_bf16"] or (
        ns["use_megatron_fsdp"] and ns.get("megatron_fsdp_main_grads_dtype") == "bf16") or (
        ns["bf16"] and not ns["use_megatron_fsdp"] and ns.get("use_precision_aware_optimizer")
        and ns.get("main_grads_dtype") == "bf16"
        and not ns.get("accumulate_allreduce_grads_in_fp32")))


def precision(ns: dict) -> tuple[str, list[str]]:
    """The ledger's precision for the launch, and what it cannot express."""
    unpriced = []
    for width, gather in (("fp8", "fp8_param_gather"), ("fp4", "fp4_param_gather")):
        # --fp8-format / --fp4-format (transformer_config.py:587-588, :673-692)
        if not ns.get(width):
            continue
        from ledger.frameworks import spell

        default = {"fp8": "delayed", "fp4": "nvfp4"}[width]
        recipe = ns.get(f"{width}_recipe") or default
        recipe = default if recipe == "custom" else recipe  # named as unpriced (reader)
        # BF16 grads under FP8/FP4: dtypes.state_dtypes prices them
        # --first-last-layers-bf16 keeps --num-layers-at-start/end-in-bf16 (default 1, 1)
        # transformer layers in BF16 (transformer_config.py:649-658)
        ends = (ns.get("num_layers_at_start_in_bf16", 1), ns.get("num_layers_at_end_in_bf16", 1)) \
            if ns.get("first_last_layers_bf16") else (0, 0)
        return spell(recipe, bool(ns.get(gather)), width, ends), unpriced
    if ns["fp16"]:
        return "fp16", unpriced
    if ns["bf16"]:
        return ("bf16" if bf16_grads(ns) else "bf16-fp32grad"), unpriced
    return "fp32", unpriced

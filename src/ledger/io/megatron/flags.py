"""A Megatron launch's parsed arguments as the ledger's CLI flags, and the model flags a
user gives beside the launch file (``--vocab-size``, ``--seq``, ``--layers`` ...), applied
as the Megatron flags they stand for or refused: never dropped.

Pipelines (megatron/core/transformer/transformer_block.py:148-200, arguments.py:927-998):
the embedding and the loss may each take a layer slot of the split
(--account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split); the
slots divide by pp, and by pp x vp with --num-layers-per-virtual-pipeline-stage (vp =
slots / pp / that) or --num-virtual-stages-per-pipeline-rank.
"""
from __future__ import annotations

from ledger.config import OFFLOAD_MODULES
from ledger.errors import LedgerError
from ledger.frameworks.host_checks import WHOLE_LAYER  # noqa: F401  (re-exported)
from ledger.frameworks.paged_stash import of_megatron as paged_stash_of
from ledger.io.megatron import model as mm
from ledger.io.megatron.dtypes import grads_dtype, state_dtypes

# ModelSpec field (the CLI's model flags) -> the Megatron flag it stands for
MODEL_FLAGS = {
    "layers": "--num-layers", "hidden": "--hidden-size", "heads": "--num-attention-heads",
    "kv_heads": "--num-query-groups", "head_dim": "--kv-channels",
    "ffn_hidden": "--ffn-hidden-size", "seq_len": "--seq-length", "num_experts": "--num-experts",
    "top_k": "--moe-router-topk", "moe_ffn_hidden": "--moe-ffn-hidden-size",
    "shared_expert_ffn": "--moe-shared-expert-intermediate-size",
    "mtp_layers": "--mtp-num-layers", "router_groups": "--moe-router-num-groups",
    "moe_latent": "--moe-latent-size", "mtp_shared": "--mtp-use-repeated-layer",
    "router_group_topk": "--moe-router-group-topk", "q_lora_rank": "--q-lora-rank",
    "kv_lora_rank": "--kv-lora-rank", "qk_rope_head_dim": "--qk-pos-emb-head-dim",
    "qk_nope_head_dim": "--qk-head-dim", "v_head_dim": "--v-head-dim",
}


def apply_model_flags(ns: dict, parsed, given: dict, path: str) -> tuple[list[str], int | None]:
    """Apply the CLI's model flags to the launch's arguments: a flag the file sets to
    another value, or one with no Megatron flag, is refused. Returns notes and the
    tokenizer's size (from ``--vocab-size`` beside the file)."""
    from ledger.io.megatron.args import table

    flags, notes, clash, foreign = table()["flags"], [], [], []
    tokenizer_size = None
    for field, value in given.items():
        if field == "vocab":
            tokenizer_size = _tokenizer_size(ns, parsed, value, path)
            notes.append(f"--vocab-size {value} beside {path}: the tokenizer's size, padded "
                         f"as Megatron pads it")
            continue
        flag = MODEL_FLAGS.get(field)
        if flag is None:
            foreign.append(field)
            continue
        dest = flags[flag]["dest"]
        if flag in parsed.given and ns[dest] != value:
            clash.append(f"{flag} {ns[dest]} in the file, {value} beside it")
        ns[dest] = value
        if field == "kv_heads":
            ns["group_query_attention"] = True
    if foreign:
        raise LedgerError("model", f"{', '.join(foreign)} beside {path}: no Megatron flag "
                                   f"stands for it here; edit the launch file")
    if clash:
        raise LedgerError("model", f"given twice: {'; '.join(clash)}; drop one")
    return notes, tokenizer_size


def _tokenizer_size(ns: dict, parsed, value: int, path: str) -> int:
    if ns.get("padded_vocab_size") is not None:
        raise LedgerError("vocab", f"{path} fixes the embedding with --padded-vocab-size "
                                   f"{ns['padded_vocab_size']}; drop --vocab-size")
    own = ns.get("vocab_size") if ns.get("tokenizer_type") in mm.SIZED_TOKENIZERS else None
    if own is not None and own != value:
        raise LedgerError("vocab", f"given twice: --vocab-size {own} in {path} "
                                   f"({ns['tokenizer_type']} reads it), {value} beside it")
    return value


def placement_flags(ns: dict, path: str) -> tuple[dict, list[str]]:
    """The CLI flags the launch sets (framework megatron), and what they cannot express."""
    tp, pp = ns["tensor_model_parallel_size"], ns["pipeline_model_parallel_size"]
    for dest, v in (("tensor_model_parallel_size", tp), ("pipeline_model_parallel_size", pp),
                    ("context_parallel_size", ns["context_parallel_size"]),
                    ("expert_model_parallel_size", ns["expert_model_parallel_size"]),
                    ("micro_batch_size", ns["micro_batch_size"])):
        if v < 1:
            raise LedgerError("from_megatron", f"--{dest.replace('_', '-')} must be at least "
                                               f"1, got {v} in {path}")
    zero = zero_stage(ns)
    flags = {"framework": "megatron", "tp": tp, "pp": pp, "cp": ns["context_parallel_size"],
             "ep": ns["expert_model_parallel_size"], "etp": mm.expert_tp(ns),
             "micro_batch": ns["micro_batch_size"], "no_sp": not ns["sequence_parallel"],
             "zero": zero, "optimizer": OPTIMIZERS.get(ns["optimizer"], "adam")}
    if ns.get("global_batch_size") is not None:
        flags["global_batch"] = ns["global_batch_size"]
    if ns.get("num_experts"):
        flags["moe_dispatcher"] = ns["moe_token_dispatcher_type"]
    flags |= state_dtypes(ns)
    own = _switches_and_split(ns, flags, path)
    flags |= _pipeline(ns, path, own)
    unpriced = []
    if ns["recompute_activations"]:  # arguments.py:607-608
        ns["recompute_granularity"] = "selective"
    if ns.get("recompute_granularity"):
        flags |= _recompute(ns)
    if ns["context_parallel_size"] > 1 and ns["cp_comm_type"][0] in mm.CP_KINDS:
        flags["cp_kind"] = mm.CP_KINDS[ns["cp_comm_type"][0]]
    if ns["tp_comm_overlap"]:
        flags["tp_overlap"] = True
    if ns.get("save_interval"):  # a whole run's checkpoints (ledger.run; --tokens)
        flags["ckpt_interval"] = ns["save_interval"]  # training_config.py:398
    if ns.get("async_save"):  # training_config.py:516
        flags["ckpt_async"] = True
    instances = ns.get("num_distributed_optimizer_instances") or 1
    if instances > 1 and ns["use_megatron_fsdp"]:  # its HSDP: not the DistOpt's groups
        unpriced.append(f"--num-distributed-optimizer-instances {instances} under "
                        f"Megatron-FSDP (HSDP): priced as FSDP over all DP")
    elif instances > 1 and zero == 1:  # the DistOpt's partial sharding (placement_config)
        flags["num_distributed_optimizer_instances"] = instances
    host, odd = _host(ns)
    return flags | _step(ns) | host, unpriced + odd


# -- what the host launches and the pipeline's sends (issue 32) ---------------------------
# Megatron's whole-layer capture: ledger.frameworks.host_checks.WHOLE_LAYER (re-exported)


def _host(ns: dict) -> tuple[dict, list[str]]:
    """CUDA graphs (--cuda-graph-impl, --enable-cuda-graph, --cuda-graph-modules or the
    deprecated --cuda-graph-scope: transformer_config.py L1049-1139, L2698-2739), the
    pipeline's p2p overlap (--no-overlap-p2p-communication, arguments.py L3118-3120), the
    flex dispatcher's backend (--moe-flex-dispatcher-backend; HybridEP's permutation fused
    into its kernels, --moe-permute-fusion-into-hybridep) and the experts' capacity
    (--moe-expert-capacity-factor, --moe-pad-expert-input-to-capacity), as the CLI's
    fields."""
    out, odd = {}, []
    impl = ns.get("cuda_graph_impl") or "none"
    if ns.get("enable_cuda_graph") and impl == "none":
        impl = "local"  # transformer_config.py L2706-2707: deprecated for impl local
    if impl == "full_iteration":
        out["cuda_graph_scope"] = ("full_iteration",)
    elif impl != "none":
        given = ns.get("cuda_graph_modules") or ns.get("cuda_graph_scope_deprecated") or []
        given = [given] if isinstance(given, str) else list(given)
        if "full_iteration" in given:
            out["cuda_graph_scope"] = ("full_iteration",)
        else:
            named = [m for m in given if m != "full"]
            out["cuda_graph_scope"] = tuple(named) if named else WHOLE_LAYER
        if impl == "local":
            out["cuda_graph_impl"] = "local"
    if ns.get("overlap_p2p_comm") is False:
        out["overlap_p2p"] = False
    if ns.get("num_experts") and ns.get("moe_expert_capacity_factor") is not None:
        # transformer_config.py:917-921 at d98e8a64: each expert takes at most factor x its
        # even share; padded to it, the shapes are static and the host never waits
        out["capacity_factor"] = float(ns["moe_expert_capacity_factor"])
        if ns.get("moe_pad_expert_input_to_capacity"):
            out["pad_to_capacity"] = True
    # the shared experts beside the all-to-alls, the combined 1F1B's delayed wgrad
    # (ledger.step.layer_comms.shared_hidden_s / undelayed_wgrad_s)
    if ns.get("num_experts") and ns.get("moe_shared_expert_overlap"):
        out["shared_expert_overlap"] = True
    if ns.get("num_experts") and ns.get("delay_wgrad_compute"):
        out["delay_wgrad"] = True
    if ns.get("ddp_bucket_size"):  # training.py L2179-2194 @d98e8a64
        out["dp_bucket_params"] = ns["ddp_bucket_size"]
    if double_buffer(ns) and zero_stage(ns) == 3:  # priced at ZeRO-3 (reader.DOUBLE_BUFFER)
        out["fsdp_double_buffer"] = True
    comm = ns.get("megatron_fsdp_grad_comm_dtype")
    if ns["use_megatron_fsdp"] and comm not in (None, "auto") and comm != grads_dtype(ns):
        # distributed_data_parallel_config.py L201-212 @d98e8a64: its own wire dtype and
        # buffer beside the main grads'; the ledger reduces in the main grads' dtype
        odd.append(f"--megatron-fsdp-grad-comm-dtype {comm} (priced as {grads_dtype(ns)})")
    backend = ns.get("moe_flex_dispatcher_backend")
    if flex_dispatch(ns):
        if backend in ("deepep", "hybridep"):
            out["ep_backend"] = backend
        else:
            odd.append(f"--moe-flex-dispatcher-backend {backend} (priced as deepep)")
        if backend == "hybridep" and ns.get("moe_permute_fusion_into_hybridep"):
            out["hybridep_permute_fusion"] = True  # only HybridEP reads it (step.eager)
        if ep_sms(ns) is not None:
            out["ep_sms"] = ep_sms(ns)
    return out, odd


# the flex dispatcher's SM count and the per-backend knobs it replaced (reader.NUM_SMS)
NUM_SMS = ("moe_flex_dispatcher_num_sms", "moe_deepep_num_sms", "moe_hybridep_num_sms")


def ep_sms(ns: dict) -> int | None:
    """The SMs the flex dispatcher runs on (``ParallelConfig.ep_sms``), as Megatron-Core
    resolves them: --moe-flex-dispatcher-num-sms, else the deprecated --moe-deepep-num-sms
    or --moe-hybridep-num-sms routed to it whichever backend runs (two different values
    refused: transformer_config.py L964-975, L1792-1811 @d98e8a64); DeepEP, HybridEP and
    NCCL-EP all take it (token_dispatcher.py L1157-1158, L1288-1292, L1658-1662). None:
    the backend's default (ledger.step.ep_sms)."""
    return next((ns[k] for k in NUM_SMS if ns.get(k) is not None), None)


def double_buffer(ns: dict) -> bool:
    """Megatron-FSDP's persistent double buffers (``ParallelConfig.fsdp_double_buffer``):
    --fsdp-double-buffer, or --use-nccl-ub, which turns them on under --use-megatron-fsdp
    (arguments.py L1172-1177 @d98e8a64; param_and_grad_buffer.py L2046-2053: user-buffer
    registration needs persistent memory). Without Megatron-FSDP neither flag allocates
    them (only megatron_fsdp reads fsdp_double_buffer)."""
    return bool(ns["use_megatron_fsdp"] and (ns.get("fsdp_double_buffer") or ns.get("nccl_ub")))


# -- what the step keeps (issue 21) ------------------------------------------------------
def _step(ns: dict) -> dict:
    """The step facts a launch sets: --hidden-dropout is the residual stream's dropout,
    whose masks the bias-dropout-add keeps (0.1 by default: transformer_config.py:188 at
    d98e8a64; a rate of 0 keeps none). --attention-dropout changes nothing priced: the
    fused attention kernels Megatron runs (TransformerEngine, flash) regenerate their mask
    from the RNG state in backward. --attention-backend unfused (TE's
    UnfusedDotProductAttention, backends.py L351-420 @TE d0067d0d: baddbmm, the fused
    scale-mask-softmax keeping its bf16 output, dropout, bmm) and local (Megatron's
    DotProductAttention, the same sequence) materialise the scores; flash, fused and auto
    run a fused kernel (transformer_config.py L151 @d98e8a64). --transformer-impl local
    builds the local layer spec whatever the backend (gpt_builders.py L35, L138-149), whose
    core attention is the same DotProductAttention (backends.py L129-131,
    LocalSpecProvider.core_attention): the scores materialised too."""
    out = {"dropout": ns["hidden_dropout"]}
    if ns.get("cpu_offloading_num_layers"):  # arguments.py L1950-1951: turns offloading on
        out["cpu_offloading_num_layers"] = ns["cpu_offloading_num_layers"]
    if ns.get("fine_grained_activation_offloading"):  # transformer_config.py L2127-2175
        known = [m for m in ns.get("offload_modules") or [] if m in OFFLOAD_MODULES[:-1]]
        if known:
            out["offload_modules"] = tuple(known)
            out["activation_offload_fraction"] = ns.get("activation_offload_fraction", 1.0)
    if ns.get("optimizer_cpu_offload"):  # the hybrid-device optimizer (optimizer/__init__.py
        # L504-545): --optimizer-offload-fraction of it on the host (default 1.0)
        out["optimizer_offload_fraction"] = ns["optimizer_offload_fraction"]
        if ns.get("overlap_cpu_optimizer_d2h_h2d"):
            out["overlap_cpu_optimizer"] = True
    if ns.get("defer_embedding_wgrad_compute"):  # placement.buffers.deferred_wgrad_bytes
        out["wgrad_deferral"] = ns.get("wgrad_deferral_limit") or 0
    if ns.get("gradient_accumulation_fusion") is False:  # TE's dummy wgrads (buffers.py)
        out["grad_accumulation_fusion"] = False
    if str(ns.get("attention_backend")).rpartition(".")[2] in ("unfused", "local") or \
            ns.get("transformer_impl") == "local":
        out["no_flash"] = True
    if ns.get("transformer_impl") == "local":  # Megatron's own layers: no TE buffers
        out["transformer_impl"] = "local"
    stash = paged_stash_of(ns.get("moe_paged_stash"),  # the routed experts' paged stash,
                           ns.get("moe_paged_stash_buffer_size_factor_cuda"),  # as Bridge's
                           ns.get("moe_expert_rank_capacity_factor"))  # (render.bridge)
    if ns.get("num_experts") and stash is not None:
        out["paged_stash"] = stash
    if ns.get("cross_entropy_loss_fusion"):  # language_module.py L173-198: TE's parallel
        # CE, or Megatron's own compiled one under impl 'native' (the default) - compiled
        # under --disable-jit-fuser too: its @jit_fuser binds torch.compile when
        # fused_cross_entropy.py is imported (L7-12), which pretrain_gpt.py does at its top
        # (L45 GPTModel -> gpt_model.py L23 -> language_module.py L17), before
        # set_global_variables calls disable_jit_fuser (global_vars.py L178-179), which
        # only rebinds jit.py's name (L27-29; all @ d98e8a64)
        out["loss"] = {"te": "te-parallel", "native": "vocab-parallel-fused"}[
            ns.get("cross_entropy_fusion_impl") or "native"]
    return out


# Megatron's --optimizer -> the ledger's (ledger.memory.OPTIMIZERS); muon's scalar
# optimizer is adam unless --muon-scalar-optimizer says otherwise (named by the reader)
OPTIMIZERS = {"sgd": "sgd-momentum", "adam": "adam", "muon": "muon", "dist_muon": "muon"}


def flex_dispatch(ns: dict) -> bool:
    """An MoE launch on the flex dispatcher (DeepEP / HybridEP), whose backend and SMs apply."""
    return bool(ns.get("num_experts")) and ns.get("moe_token_dispatcher_type") == "flex"


def zero_stage(ns: dict) -> int:
    """The ZeRO stage the launch shards at."""
    if ns["use_megatron_fsdp"]:
        return mm.SHARDING[ns["data_parallel_sharding_strategy"]]
    # dist_muon: Muon under the layer-wise distributed optimizer (arguments.py L1725-1736)
    return 1 if ns["use_distributed_optimizer"] or ns["optimizer"] == "dist_muon" else 0


def _switches_and_split(ns: dict, flags: dict, path: str) -> bool:
    """The overlap switches and a split of Megatron's own (issue 22), under the CLI's
    names; True when the launch splits the layers itself. Megatron refuses the layout
    beside the other split flags (arguments.py L925-938; transformer_config.py
    L2229-2258); the layout and first/last are read by ``ledger.io.megatron.layout``."""
    for dest, key in (("overlap_grad_reduce", "overlap_grad_reduce"),
                      ("overlap_param_gather", "overlap_param_gather"),
                      ("overlap_moe_expert_parallel_comm", "ep_overlap")):
        if ns.get(dest):
            flags[key] = True
    split = {k: ns.get(d) for k, d in (
        ("pipeline_layout", "pipeline_model_parallel_layout"),
        ("decoder_first", "decoder_first_pipeline_num_layers"),
        ("decoder_last", "decoder_last_pipeline_num_layers")) if ns.get(d) is not None}
    if "pipeline_layout" in split:
        clash = [f"--{d.replace('_', '-')}" for d in (
            "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
            "num_layers_per_virtual_pipeline_stage", "num_virtual_stages_per_pipeline_rank")
            if ns.get(d) is not None] + [f"--{d.replace('_', '-')}" for d in (
                "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")
                if ns.get(d)]
        if clash:
            raise LedgerError("from_megatron", f"--pipeline-model-parallel-layout with "
                                               f"{', '.join(clash)} in {path}: Megatron "
                                               f"refuses them together")
    flags |= split
    return bool(split)


def _pipeline(ns: dict, path: str, own_split: bool = False) -> dict:
    layers, pp = ns["num_layers"], ns["pipeline_model_parallel_size"]
    emb, loss = ns["account_for_embedding_in_pipeline_split"], \
        ns["account_for_loss_in_pipeline_split"]
    slots = layers + bool(emb) + bool(loss)
    named = (f"{slots} layer slots ({layers} layers{', + embedding' if emb else ''}"
             f"{', + loss' if loss else ''})")
    if pp > 1 and slots % pp and not own_split:  # arguments.py L968-969, L985-998
        raise LedgerError("from_megatron", f"{named} do not divide over pp({pp}) in {path}; "
                                           f"Megatron refuses the split")
    out, per_vp = {}, ns.get("num_layers_per_virtual_pipeline_stage")
    if per_vp is not None:
        if per_vp < 1 or (slots // pp) % per_vp:  # arguments.py L972-973
            raise LedgerError("from_megatron", f"--num-layers-per-virtual-pipeline-stage "
                                               f"{per_vp} does not divide the {slots // pp} "
                                               f"layer slots per rank in {path} (it must be "
                                               f"at least 1); Megatron refuses it")
        vp = slots // pp // per_vp
        if vp > 1:  # vp 1 is no interleaving (arguments.py L976-979)
            out["vp"] = vp
    elif ns.get("num_virtual_stages_per_pipeline_rank") is not None:
        out["vp"] = ns["num_virtual_stages_per_pipeline_rank"]
        if out["vp"] < 1:
            raise LedgerError("from_megatron", f"--num-virtual-stages-per-pipeline-rank must "
                                               f"be at least 1, got {out['vp']} in {path}")
    if out.get("vp", 1) > 1 and ns.get("microbatch_group_size_per_vp_stage"):
        out["vp_group"] = ns["microbatch_group_size_per_vp_stage"]  # schedules._rounds
    stages = pp * out.get("vp", 1)
    if pp > 1 and slots % stages and not own_split:  # transformer_block.py L170-178
        raise LedgerError("from_megatron", f"{named} do not divide over pp({pp}) * "
                                           f"vp({out['vp']}) = {stages} stages in {path}; "
                                           f"Megatron refuses the split")
    if pp > 1 and (emb or loss) and not own_split:  # the slots' layers: one fewer on the
        out["stage_layers"] = tuple(slots // stages - bool(emb) * (s == 0) - bool(loss) * (
            s == stages - 1) for s in range(stages))  # first / last stage, L184-201
    return out


def _recompute(ns: dict) -> dict:
    """Selective with its modules, or full of every layer, of the first n of each chunk
    (--recompute-method block) or in groups of n (uniform), under the CLI's (Megatron's)
    names: transformer_config.py L532-583, transformer_block.py _checkpointed_forward
    @d98e8a64."""
    if ns["recompute_granularity"] == "selective":
        mods = ns.get("recompute_modules")  # those the reader prices (the rest named)
        return {"recompute": "selective"} | (
            {"recompute_modules": tuple(m for m in mods if m in mm.READ_MODULES)}
            if mods is not None else {})
    out = {"recompute": "full"}
    if ns.get("recompute_method") in ("block", "uniform"):
        out |= {"recompute_method": ns["recompute_method"],
                "recompute_num_layers": ns.get("recompute_num_layers") or 1}
    return out


def semantic_notes(ns: dict, parsed) -> list[str]:
    """Said always: what Megatron does with a given flag that a reader might not expect."""
    out = []
    if "--vocab-size" in parsed.given and ns.get("tokenizer_type") not in mm.SIZED_TOKENIZERS:
        out.append(f"--vocab-size {ns['vocab_size']} in the file is not read by "
                   f"{ns.get('tokenizer_type')} (only NullTokenizer and TikTokenizer read it)")
    return out

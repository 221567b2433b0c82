"""Sources of the buffers the libraries under a framework allocate and of what its
offloads move (issue 31), merged into ``ledger.frameworks.SOURCES`` per framework: each
fact's file and line at a named commit. The sizing rules themselves live in the modules
named (``ledger.placement.graphs``, ...); this table is where a reader finds the facts.
"""
from __future__ import annotations

_GRAPHS = ("Megatron-LM d98e8a64 megatron/core/transformer/cuda_graphs.py L2322-2420 "
           "(_get_sample_arguments: one static input per graphed layer per micro-batch in "
           "flight, consumed buffers reused), L2596-2601 (one micro-batch without PP), "
           "L2684-2686 (_reuse_graph_input_output_buffers from TE 2.7), L1492-1510 (local "
           "impl: static grad outputs reused by signature); TransformerEngine d0067d0d "
           "transformer_engine/pytorch/graph.py L678-681 (one pool, captured in execution "
           "order), L803-818 (one static grad-output buffer per output signature, outside "
           "the pool, kept), L876-910 (static outputs weak-referenced after capture); the "
           "pool's excess over the eager peak is not derivable: ledger.placement.graphs")

_DEEPEP = ("Megatron-LM d98e8a64 megatron/core/transformer/moe/fused_a2a.py L24-69 "
           "(one Buffer for the EP group, the larger of the dispatch and combine configs' "
           "size hints, hidden_bytes = h x max(element size, 2)), token_dispatcher.py "
           "L1287-1291 (20 SMs by default); deepseek-ai/DeepEP 030cdf0a csrc/config.hpp "
           "L44-101 (get_nvl_buffer_size_hint, get_rdma_buffer_size_hint), deep_ep/buffer.py "
           "L30, L100-102 (NVSHMEM_CUMEM_GRANULARITY 2^29), L218-268 (configs per rank count), "
           "csrc/deep_ep.cpp L29-71 (cudaMalloc of the NVLink buffer and a 32 MiB workspace "
           "outside PyTorch's allocator), csrc/kernels/internode.cu L17-42 (8-byte source "
           "meta). Megatron's Dockerfile.ci.dev pins DeepEP de0dd118, not in the index; "
           "030cdf0a is the nearest V1 snapshot: ledger.placement.ep_buffers")
_HYBRIDEP = ("Megatron-LM d98e8a64 megatron/core/transformer/moe/fused_a2a.py L285-348, "
             "L396-415 (HybridEPBuffer from the first dispatch's tokens, hidden size, local "
             "experts); deepseek-ai/DeepEP hybrid-ep 94a9f8f6 deep_ep/hybrid_ep_buffer.py "
             "L51 (use_shared_buffer=True), L60-83 (ranks per NVLink domain), csrc/hybrid_ep/"
             "buffer/intranode.cu L126-130 (worst case: every token of the domain), L193-213, "
             "L253-261 (token, prob and scale buffers); internode RDMA buffers not priced: "
             "ledger.placement.ep_buffers")

_HYBRIDEP_HANDLE = ("deepseek-ai/DeepEP hybrid-ep 94a9f8f6 csrc/hybrid_ep/executor/executor.cu "
                    "L93-126 (metadata_preprocess_core: sparse_to_dense_map int32 [T x G], "
                    "local_expert_routing_map bool and dense_to_expert_map int32 [T x G, local "
                    "experts], torch::empty), deep_ep/hybrid_ep_buffer.py L376 (dispatch_with_"
                    "permute builds the permute metadata); Megatron-LM d98e8a64 megatron/core/"
                    "transformer/moe/fused_a2a.py L425-437, L495 (the handle kept in the "
                    "dispatch's and the combine's autograd contexts until the backward): "
                    "ledger.placement.ep_buffers.dispatch_handle_bytes")

_FLEX_ROW_ID_MAP = ("Megatron-LM d98e8a64 megatron/core/transformer/moe/token_dispatcher.py "
                    "L1150-1166, L1212-1213 (_HybridEPManager: permute fused into HybridEP's "
                    "dispatch, no TE permute, no row_id_map), L1424-1457 (_DeepepManager: "
                    "moe_utils.permute over the received tokens and local experts, TE's "
                    "row_id_map): ledger.placement.ep_buffers.row_id_map_share")

_NCCL = ("NVIDIA/nccl 5067397c src/transport/nvls.cc L155-160 (NVLS channels 16 on sm90, "
         "24 on sm100 in one domain, 32 across nodes; NCCL_NVLS_ENABLE default 2, chunk 128 "
         "KiB), L245-275 (on where the device multicasts), L409-430 (ncclNvlsBufferSetup: "
         "channels x 2 x chunk x NCCL_STEPS x heads), L314-352 (cuMem allocations outside "
         "PyTorch's allocator, rounded to the driver's granularity: not priced); "
         "src/graph/connect.cc L248-262 (heads); ring/tree buffers (init.cc L810-828) stay "
         "in overhead_bytes: their channel count is NCCL's topology search's. "
         "Megatron-Bridge scripts/performance/utils/executors.py L42-43 @v0.1.0rc3..v0.5.1: "
         "NCCL_NVLS_ENABLE=0: ledger.placement.nccl_buffers")

_OPTIM_OFFLOAD = ("Megatron-LM d98e8a64 megatron/core/optimizer/cpu_offloading/"
                  "hybrid_optimizer.py L97-104 (pinned fp32 grad copies on the host), L109-120 "
                  "(updated params copied back after each CPU step), L145-171 (step: D2H, "
                  "CPU step, H2D after the backward), L209-246 (side streams and one CPU "
                  "optimizer per param under overlap_cpu_optimizer_d2h_h2d), L249-301 (the "
                  "first offload_fraction of the elements cloned to pinned fp32 on the host); "
                  "optimizer/__init__.py L504-545 (param_update_in_fp32=True, torch Adam "
                  "fused), distrib_optimizer.py L778-781 (over the DP shard), training/"
                  "arguments.py L1884-1888 (needs --use-precision-aware-optimizer): "
                  "ledger.placement.optim_offload")

_FINE_GRAINED = ("Megatron-LM d98e8a64 docs/user-guide/features/"
                 "fine_grained_activation_offloading.md (each module offloads its input; the "
                 "modules, --activation-offload-fraction over groups in forward order, "
                 "--min-offloaded-tensor-size 1 Mi elements), megatron/core/pipeline_parallel/"
                 "fine_grained_activation_offload.py L150-260 (pinned host pool), L511-520 "
                 "(d2h / h2d side streams), L609-666 (the last group of each name kept, the "
                 "fraction's later groups kept), transformer_config.py L2127-2175 (the "
                 "checks), transformer/attention.py L1386-1395, L1552-1607, L1626-1629 (each "
                 "group's saved-tensor hooks wrap its whole module): "
                 "ledger.placement.act_offload")
_TITAN_OFFLOAD = ("pytorch/torchtitan b5bcd76c torchtitan/experiments/graph_trainer/"
                  "cpu_offload.py L303-350 (--compile.memory_policy cpu_offload_all: every "
                  "saved activation of every layer but the last; README.md L128-129); "
                  "experimental only, not read from job files: --offload-modules all")

_EP_SMS = ("the flex dispatcher's SMs while an overlapped all-to-all runs: "
           "--moe-flex-dispatcher-num-sms (Megatron-LM d98e8a64 transformer_config.py L964-975, "
           "L1792-1811; token_dispatcher.py L1157-1158), else DeepEP 20 (deepseek-ai/DeepEP "
           "dd758caf deep_ep/buffers/legacy.py L31) or HybridEP 24 inside one NVLink domain, 8 "
           "across (DeepEP 34152ae2 csrc/hybrid_ep/config.cuh L315-316, hybrid_ep_buffer.py L83); "
           "Megatron-Bridge's perf launcher gives HybridEP 32 (scripts/performance/utils/"
           "overrides.py L75 @v0.5.1, L89 @v0.6.0): ledger.step.ep_sms")

LIBRARY_SOURCES = {
    "megatron": {"cuda_graph_buffers": _GRAPHS, "deepep_buffers": _DEEPEP,
                 "hybridep_buffers": _HYBRIDEP, "hybridep_dispatch_handle": _HYBRIDEP_HANDLE,
                 "flex_row_id_map": _FLEX_ROW_ID_MAP,
                 "optimizer_cpu_offload": _OPTIM_OFFLOAD,
                 "flex_dispatcher_sms": _EP_SMS},
}


def _fact(fact: str, source: str, *names: str) -> None:
    """``fact``'s source, the same for each framework of ``names``."""
    for name in names:
        LIBRARY_SOURCES.setdefault(name, {})[fact] = source


_fact("nccl_nvls_buffers", _NCCL, "megatron", "torchtitan", "deepspeed", "hf")
LIBRARY_SOURCES["megatron"]["activation_offload"] = _FINE_GRAINED
LIBRARY_SOURCES["torchtitan"]["activation_offload"] = _TITAN_OFFLOAD
# ZeRO-3's root unit: Megatron-FSDP's non-unit parameters (embedding, final norm, output
# layer) stay gathered from their forward to the step's end, but each one's gradient is
# reduce-scattered when its own backward ends - not held through the layers' backward
LIBRARY_SOURCES["megatron"]["fsdp_root_grads_held"] = (
    "Megatron-LM d98e8a64 megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py "
    "L1137 (a post-accumulate-grad hook on every parameter, units and the rest: copied into "
    "its main-grad bucket and reduce-scattered once its bucket is complete, L761-771 under "
    "optim_grads_params; the bucket itself freed later, fsdp_head_grads_held), "
    "L958 (the backward releases only unit buckets: the root's gathered params stay); the "
    "same at d7288711 (Megatron-Bridge v0.4.0's pin) L1040, L802, L883 and 0d8e0714 "
    "(v0.2.0's) _post_backward L551-594 for every module")
_fact("fsdp_root_grads_held", "FSDP2: the root's gradients are reduce-scattered in its "
      "post-backward, after every layer's (torch _fsdp_param_group.py L588-720)",
      "torchtitan", "hf")
LIBRARY_SOURCES["deepspeed"]["fsdp_root_grads_held"] = ("priced as FSDP2 (DeepSpeed's "
                                                        "bucketed reduction not examined)")
# ... but the bucket its output layer's gradient is copied into stays allocated until the
# next unit's reduce-scatter is queued: through the first layer's backward after it
LIBRARY_SOURCES["megatron"]["fsdp_head_grads_held"] = (
    "Megatron-LM 2edffadb (Megatron-Bridge v0.4.2's pin; the same at 0d8e0714, b0cc2706, "
    "55ac7082, d7288711) megatron/core/distributed/fsdp/src/megatron_fsdp/: "
    "param_and_grad_buffer.py L1445-1489 (non-unit parameters - embedding, final norm, "
    "output layer - cut into buckets closed at bucket_size: Megatron-Bridge's 128 Mi "
    "parameters with DP > 1, comm_overlap.py L570-577, L637-643 @v0.4.2; none set: one "
    "bucket), megatron_fsdp.py L555-604 (_grad_acc: each gradient copied into its bucket, "
    "param.grad freed), param_and_grad_buffer.py L3435-3477 (reduce_gradients: once the "
    "bucket group is complete, wait_for_previous_grad_reduce first, then the reduce-scatter "
    "queued), L3479-3509 (a queued bucket freed only while the queue holds more than "
    "suggested_RS_queue_capacity parameters), megatron_fsdp.py L384-408 (that capacity: "
    "suggested_communication_unit_size, 1e9 or more unless set; the Llama perf functions "
    "set 8e8 under Megatron-FSDP, scripts/performance/configs/llama/llama3_llm_pretrain.py "
    "L110-112 @v0.4.2, GB200) - so the output "
    "layer's bucket is freed as the first layer's bucket group is queued, at the end of "
    "its backward (ledger.placement.footprint.head_bucket_params)")
_fact("fsdp_head_grads_held", "not separately: the root's gradients are held whole "
      "(fsdp_root_grads_held)", "torchtitan", "hf", "deepspeed")
# Which expert GEMMs take the fitted grouped GEMM share (ledger.step.Calibration
# .grouped_gemm_share, benchmarks/fit.py stage 4): the recipes it was fitted on
_GROUPED = ("Megatron-Core's routed experts are Transformer Engine's GroupedLinear "
            "(megatron/core/extensions/transformer_engine.py L2382 TEGroupedLinear, "
            "models/backends.py L198 linear_fc1=TEColumnParallelGroupedLinear @ d98e8a64): "
            "the Megatron-Bridge rows the grouped share was fitted on run them")
_NO_GROUPED = "no fitted figure for this framework's expert GEMMs: the dense rate"
for _name in LIBRARY_SOURCES:
    LIBRARY_SOURCES[_name]["grouped_gemm_fitted"] = \
        _GROUPED if _name == "megatron" else _NO_GROUPED
LIBRARY_SOURCES.setdefault("deepseek", {})["grouped_gemm_fitted"] = (
    "DeepSeek's grouped FP8 GEMMs (deepseek-ai/DeepGEMM README.md @ 4cc65afa, H800) run "
    "at its dense rate: 8 groups of 4,096 rows, N 4096, K 7168, 1,288 TFLOP/s against "
    "1,304 for one 4096 x 4096 x 7168 GEMM")
# the routed experts as Transformer Engine's fused grouped MLP (ledger.step.eager
# .fused_grouped_mlp; ParallelConfig.fused_grouped_mlp)
_FUSED_MLP = (
    "Megatron-LM d98e8a64 megatron/core/transformer/transformer_config.py L525 "
    "(use_transformer_engine_op_fuser, off by default), moe/experts.py L286-291 (the fused "
    "impl, asserted supported), L382-450 (TE >= 2.14, an expert TP group of 1, gated SiLU or "
    "quick GELU, clamped or not, or weighted squared ReLU), L624-638 (fc2's bias scaled by "
    "the probs in GroupedLinear); TransformerEngine d0067d0d transformer_engine/pytorch/ops/"
    "fused/grouped_mlp.py L946-950 (NVTE_CUTEDSL_FUSED_GROUPED_MLP set, compute capability "
    "10.x), L842 (MXFP8 / NVFP4 recipes; MXFP8 alone at 4220403e, ops/_common.py L245), L848 (ScaledSwiGLU, ScaledClampedQGeGLU), "
    "L1530-1567 (fc1's grouped GEMM writes the activation's input and fc2's quantized "
    "input from its epilogue), L352-364 (fc2's bias inside the cuDNN GEMM), L2064-2081 (the "
    "backward's fc2 dgrad GEMM runs dGLU and dbias in its epilogue), L1749, L1793 (what it "
    "keeps: fc1's input, the activation's input, the probs, fc2's input); Megatron-Bridge "
    "scripts/performance/utils/overrides.py L238-243, perf_plugins.py L308-309 @v0.5.1 "
    "(cutedsl_fused_grouped_mlp: the op fuser and NVTE_CUTEDSL_FUSED_GROUPED_MLP=1)")


def _megatron_only(fact: str, source: str, elsewhere: str) -> None:
    """``fact``'s source for Megatron-Core, and what every other framework's entry says."""
    for name, facts in LIBRARY_SOURCES.items():
        facts[fact] = source if name == "megatron" else elsewhere


_megatron_only("fused_grouped_mlp", _FUSED_MLP,
               "not offered (Megatron-Core's TE op fuser path only)")
# what one routed expert costs the host per micro-batch (ledger.step.host.local_experts,
# Calibration.host_expert_s)
_EXPERT_HOST = (
    "TransformerEngine 4220403e (2.16, Megatron-Bridge v0.5.0 uv.lock) transformer_engine/"
    "pytorch/module/grouped_linear.py L177-182 (the inputs quantized for all experts in one "
    "call), L234-245, L475-486, L544-564 (the forward's, input- and weight-gradient grouped "
    "GEMMs), common/gemm/cublaslt_gemm.cu L972-1025 (one cuBLASLt call per expert GEMM across "
    "the compute streams), L454-461, L768-785 (descriptors and heuristic per call); the "
    "per-expert weight cast only retargets FP8 primary weights (module/base.py L712-722) and "
    "otherwise runs on a step's first micro-batch (grouped_linear.py L196-209, L198; Megatron-LM "
    "d0b3b775 extensions/transformer_engine.py L2224-2233, pipeline_parallel/schedules.py "
    "L418-419); under the fused grouped MLP one cuDNN CuTe DSL launch takes every expert "
    "(ops/fused/forward_grouped_mlp.py L48-79, backward_grouped_mlp.py L252-287 @ 4220403e, "
    "MXFP8 alone there: ops/_common.py L245; NVFP4 too from TE 920a7db1, #3048: ops/_common.py "
    "L438-442 @ b9d690e0, v0.5.1's; ops/fused/grouped_mlp.py L707-711 @ 4329ff84, v0.6.0's)")
_megatron_only("expert_host_launches", _EXPERT_HOST,
               "no source read for its experts' loop: host_expert_s per expert as "
               "Megatron-Core's")
# the dispatcher's permutation kernels (ledger.step.eager.dispatch_pass_bytes)
_PERMUTES = (
    "Megatron-LM d98e8a64 megatron/core/transformer/moe/token_dispatcher.py: alltoall "
    "L667-680 (permute before the all-to-all), L780-788 (sort_chunks_by_idxs by local "
    "expert), L815-822 (and back), L891-899 (unpermute after the combine); DeepEP L1424-1466 "
    "(one permute after dispatch, one unpermute before combine); HybridEP L1163, L1194 "
    "(fused=moe_permute_fusion_into_hybridep, transformer_config.py L904, default False; "
    "Megatron-LM #4089, 8c5cf05e): unfused, deepseek-ai/DeepEP hybrid-ep 94a9f8f6 "
    "csrc/hybrid_ep/executor/executor.cu L312-337, L392-404 (a standalone permute after the "
    "dispatch kernel, a standalone unpermute before the combine kernel; "
    "extension/permute.cu L102-155, L319-390: DeepEP's 2 + 2 passes), fused none; "
    "Megatron-Bridge sets it first at v0.6.0, perf_recipes/nemotronh/h100/nemotronh.py L246 "
    "(and perf_recipes/qwen/h100/qwen3_moe.py L40 @ 067f987d); Megatron-Bridge "
    "recipes/deepseek/deepseek_v3.py L259 @v0.2.0 (moe_permute_fusion: TE's fused "
    "permutation kernels)")
_megatron_only("dispatch_passes", _PERMUTES, "not priced (Megatron-Core's dispatchers only)")
# what FP8 attention's fused kernel keeps (ledger.frameworks.fp8_attention)
_FP8_DPA_SAVED = (
    "TransformerEngine d0067d0d transformer_engine/pytorch/attention/dot_product_attention/"
    "backends.py L1445 (NVTE_FP8_DPA_BWD on: the FP8 backward), L1579-1587 (q, k, v kept in "
    "FP8; the output in BF16 under MXFP8 and current scaling, L210 NVTE_DPA_FP8CS_O_in_F16 "
    "on by default; in FP8 under delayed scaling), utils.py L2692-2694 (the QKV quantizer "
    "row-wise only), L3014-3118 (combine_and_quantize); Megatron-LM d98e8a64 "
    "megatron/core/fp8_utils.py L777-788 (fp8_dpa under current scaling and MXFP8)")
_megatron_only("fp8_attention_saved", _FP8_DPA_SAVED,
               "not offered (Megatron-Core's fp8_dot_product_attention only)")
# the LM head under MXFP8 (ledger.frameworks.fp8_head)
_FP8_HEAD = (
    "Megatron-LM d98e8a64 megatron/core/transformer/transformer_config.py L635-638 "
    "(fp8_output_proj), L1569-1575 (fp8 and the mxfp8 recipe only); fp8_utils.py L730-744 "
    "(is_mxfp8_output_proj_active); models/gpt/gpt_model.py L271-276 (the output layer a "
    "TELMHeadColumnParallelLinear); extensions/transformer_engine.py L1785-1905 (a TE linear "
    "layer under get_fp8_context); Megatron-Bridge scripts/performance/configs/deepseek/"
    "deepseek_llm_pretrain.py L81-82, L121-122 @v0.5.0, perf_recipes/deepseek/gb300/"
    "deepseek_v3.py L157, gb200 L160 @v0.6.0")
_megatron_only("fp8_output_proj", _FP8_HEAD,
               "not offered (Megatron-Core's fp8_output_proj only)")
# what a pipeline rank keeps from the step's end to its next forward (ledger.placement.
# buffers.kept_input_tensors)
_INPUTS_KEPT = (
    "Megatron-LM d98e8a64 megatron/core/pipeline_parallel/p2p_communication.py L335-349 "
    "(each received input a fresh tensor, requires_grad, in pipeline_dtype), schedules.py "
    "L506-507 (forward_step hands it to set_input_tensor), models/gpt/gpt_model.py L322 and "
    "transformer/transformer_block.py L455-463 (the decoder keeps the reference until the "
    "next set_input_tensor), schedules.py L559-561, L584-591 (backward_step retain_grad, the "
    "gradient read and never cleared); the shape (s / cp [/ tp under SP], b, h): "
    "schedules.py L2137-2143")
_megatron_only("pipeline_inputs_kept", _INPUTS_KEPT,
               "not examined for this framework's pipeline: not priced")
LIBRARY_SOURCES["deepseek"]["pipeline_inputs_kept"] = (
    "deepseek-ai/DualPipe 3da1bbea dualpipe/dualpipe.py L47-60 (_reset_states drops every "
    "chunk's inputs and input gradients), L438 (called as step ends)")
_fact("pipeline_inputs_kept", "torch pipelining's receive buffers are priced as "
      "pipeline_recv_buffers (kept for the step); what outlives the step is not priced",
      "torchtitan", "hf")
# what the optimizer step adds beside the state, kept to the next step's zero_grad
# (ledger.placement.buffers.fp32_grad_copies)
_GRAD_COPY = (
    "Megatron-LM d98e8a64 megatron/core/optimizer/optimizer.py L1092-1105 (Float16Optimizer"
    "WithFloat16Params: main_param.grad = main_grad.float(), a copy unless the buffer is "
    "fp32), distrib_optimizer.py L2774-2800 (shard_main_param.grad = shard_model_grad."
    "float() on the rank's shard, or decoupled_grad with no copy under use_precision_aware_"
    "optimizer_no_fp8_or_ds_fp8: optimizer_config.py L407-414, the precision-aware optimizer "
    "with non-fp32 main params, no FP8 recipe or delayed scaling, or CPU offload), L2767-2771 "
    "(none under Megatron-FSDP); freed by zero_grad(set_to_none) - optimizer.py L1048-1061, "
    "distrib_optimizer.py L2568-2598 - at the next step's start, training.py L3041-3044")
_megatron_only("fp32_grad_copy", _GRAD_COPY,
               "not examined for this framework's optimizer: not priced")
LIBRARY_SOURCES["deepseek"]["fp32_grad_copy"] = (
    "DeepSeek's stack (HAI-LLM) is not published: not priced")
_fact("fp32_grad_copy", "FSDP2 keeps fp32 sharded gradients and steps them in place "
      "(torch _fsdp_param.py): no copy", "torchtitan", "hf")
# Megatron's own kept buffers beside TE's (ledger.placement.buffers: "Megatron global buffer",
# the output layer's shape among "TE dummy wgrads"; no TE workspace under local layers)
LIBRARY_SOURCES["megatron"]["global_buffer"] = (
    "Megatron-LM d98e8a64 megatron/core/utils.py L727-753 (GlobalMemoryBuffer: one tensor "
    "per (name, dtype), grown to the largest request, never freed), tensor_parallel/"
    "layers.py L623-631, L666-673 (the SP all-gather of a Megatron linear layer's input, "
    "forward and backward, into 'mpu'), transformer/dot_product_attention.py L187-191 "
    "(the local attention's scores, b x a/tp x s x s, into 'mpu')")
LIBRARY_SOURCES["megatron"]["output_layer_dummy_wgrad"] = (
    "Megatron-LM d98e8a64 megatron/core/tensor_parallel/layers.py L57-61 (HAVE_TE), "
    "L733-762 (under gradient-accumulation fusion a parameter with grad_added_to_main_grad "
    "takes TE's get_dummy_wgrad, cached per shape: TransformerEngine d0067d0d pytorch/module/"
    "base.py L134-147), distributed/distributed_data_parallel.py L187 (set on every "
    "parameter), models/gpt/gpt_model.py L272-293 (the output layer a ColumnParallelLinear)")
LIBRARY_SOURCES["megatron"]["local_layers"] = (
    "Megatron-LM d98e8a64 megatron/core/models/backends.py L99-131 (LocalSpecProvider: "
    "ColumnParallelLinear / RowParallelLinear, DotProductAttention - no TE GEMM, so no TE "
    "workspace), gpt_builders.py L35, L138-149 (--transformer-impl local builds it)")

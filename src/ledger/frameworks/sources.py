"""Where each framework fact in ``ledger.frameworks`` comes from: the file and line at a
named snapshot, or the paper and section. One place for all of them;
tests/test_frameworks.py checks that every fact of every real framework has a source. How
layers split and what overlaps compute: ``overlap_sources``, merged in here, as are the
libraries' buffers (``library_sources``) and one model family's facts (``model_sources``);
the PyTorch facts several tables share: ``torch_sources``."""
from __future__ import annotations

from ledger.frameworks.library_sources import LIBRARY_SOURCES
from ledger.frameworks.model_sources import MODEL_SOURCES
from ledger.frameworks.overlap_sources import OVERLAP_SOURCES
from ledger.frameworks.torch_sources import (_CONTEXT, _FRAGMENTATION, _FROZEN, _FSDP2, _RECLAIM,
                                             _TORCH_STEP, _UNRETURNABLE, _WORKING, INPUT_GRADS)

# framework -> fact -> source: the file and line (at the snapshot named in SNAPSHOTS) or the
# paper and section each fact is taken from. tests/test_frameworks.py checks that every
# fact of every real framework has one.
SNAPSHOTS = {
    "Megatron-LM": "NVIDIA/Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553",
    "TransformerEngine": "NVIDIA/TransformerEngine d0067d0da6cb01811b8072a7d304f0e00344ce2b",
    "torchtitan": "pytorch/torchtitan b5bcd76c66d0acb1a08b176d9639425bc55e0b2a",
    "DeepSpeed": "deepspeedai/DeepSpeed edaa7221267243c7be7fb49c5d5f5c4fb97b4641",
    "NCCL": "NVIDIA/nccl 5067397c2676d5aed50042fc39e5c8ee96eb0027",
    "torch": "PyTorch 2.13.0 (torch/distributed/...)",
    "transformers": "transformers 5.23.0",
}
SOURCES: dict[str, dict[str, str]] = {
    "megatron": {
        "fp8": "ledger.frameworks.fp8 (each recipe's facts and sources: ledger.frameworks.fp8.SOURCES)",
        "checkpoint": "ledger.frameworks.checkpoints (each fact's source: "
                      "ledger.frameworks.checkpoints.SOURCES)",
        "param_bytes": "Megatron-LM megatron/training/theoretical_memory_usage.py L293-303 "
                       "(bf16 params + fp32 main grads = 6 B, + 12/dp with the distributed "
                       "optimizer); docs/user-guide/features/dist_optimizer.md L14-20",
        "grad_bytes": "Megatron-LM megatron/training/arguments.py L1204-1217 (--bf16 forces "
                      "fp32 grad accumulation and reduction unless --grad-reduce-in-bf16)",
        "master_bytes": "theoretical_memory_usage.py L293-296 (fp32; dtypes.REMAINDER_BYTES)",
        "moment_bytes": "theoretical_memory_usage.py L293-296; arguments.py L3667-3684 (fp32 "
                        "exp_avg, exp_avg_sq)",
        "gathered_param_bytes": "dist_optimizer.md L36-48 (bf16 params all-gathered after "
                                "the step)",
        "zero_stages": "0: DDP; 1: --use-distributed-optimizer (param_and_grad_buffer.py "
                       "L701-724); 2/3: Megatron-FSDP sharding strategies (optim_grads, "
                       "optim_grads_params), costed here like FSDP2 - not read line by line",
        "sharded_grads_per_microbatch": "ZeRO-1 (distributed optimizer) reduces once per "
                                        "step: param_and_grad_buffer.py L863-885, "
                                        "distributed_data_parallel.py L588-599; ZeRO-2/3 "
                                        "(Megatron-FSDP optim_grads / optim_grads_params) "
                                        "reduce-scatter after every backward, no_sync or "
                                        "not: megatron_fsdp/megatron_fsdp.py L758-775 "
                                        "(grad_reduce_every_bprop)",
        "reshard": "assumed as FSDP2 without PP (Megatron-FSDP)",
        "unsharded_with_pp": "pipeline schedules sync grads on the last micro-batch only: "
                             "megatron/core/pipeline_parallel/schedules.py L1127-1139 "
                             "(ZeRO-1/DDP; sharded stages keep their per-micro-batch sync)",
        "sp_regathers_input": "megatron/core/tensor_parallel/layers.py L604 (saves the SP "
                              "shard), L666-680 (re-gathers it for wgrad), L700-709; "
                              "TransformerEngine pytorch/module/linear.py L618-621, L979-999",
        "moe_dispatcher": "alltoall, as the large MoE recipes set it "
                          "(--moe-token-dispatcher-type alltoall); Megatron's code default "
                          "is allgather: transformer_config.py L891-893. Volumes: "
                          "token_dispatcher.py L375-387, L705-751, L824-870 (alltoall), "
                          "L281-303, L355-368 (allgather), L1809 (flex, DeepEP L1228-1245)",
        "moe_tokens_sp_shard": "megatron/core/transformer/moe/token_dispatcher.py L375-387, "
                               "L554-556, L705-711 (alltoall dispatcher: s b topk / (tp cp) "
                               "rows); the default is allgather (transformer_config.py "
                               "L891-893) - large MoE recipes set alltoall",
        "tied_embedding_allreduce": "megatron/core/distributed/finalize_model_grads.py "
                                    "L164-258 (first and last PP stage, main_grad, per step)",
        "activations": "Megatron-Core with Transformer Engine: transformer_config.py L1314 "
                       "(transformer_impl default); see ledger.arch.saved_tensors",
        "version": "NVIDIA/Megatron-LM d98e8a64, NVIDIA/TransformerEngine d0067d0d",
        "loss": "ledger.frameworks.losses['vocab-parallel'] (cross_entropy.py L25-210; "
                "model_parallel_config.py L320, L325: no fusion, native)",
        "compiled_loss": "Megatron-LM has no --compile of the model; the loss stays its own",
        "tp_loss": "the same vocab-parallel cross-entropy over the TP group "
                   "(cross_entropy.py L25-210)",
        "dropout": "megatron/core/transformer/transformer_config.py L188-192 (hidden_dropout "
                   "= attention_dropout = 0.1), arguments.py L2373 (argparse from the "
                   "dataclass); masks kept: fused_bias_dropout.py L11-59 (bias-dropout-add "
                   "after attention and after the MLP, transformer_layer.py L753-755, "
                   "L1104-1106)",
        "pipeline_outputs": "megatron/core/pipeline_parallel/schedules.py forward_step: the "
                            "last stage returns the loss, its logits are not retained",
        "pipeline_recv_buffers": "megatron/core/pipeline_parallel/p2p_communication.py "
                                 "(_communicate allocates each receive tensor for the one "
                                 "transfer, freed after its use)",
        "grads_persist": "megatron/core/distributed/param_and_grad_buffer.py (the contiguous "
                         "main-grad buffer, allocated at init, zeroed not freed)",
        "optimizer_temp_moments": "the distributed optimizer steps TE / apex FusedAdam "
                                "(multi_tensor_apply, in place): megatron/core/optimizer/"
                                "__init__.py",
        "cp_buffers": "ledger.frameworks.cp['te-p2p']",
        "comm_bucket_bytes": "grads are reduced from the contiguous main-grad buffer "
                             "(param_and_grad_buffer.py L888-899): no extra buckets",
        "fsdp_prefetch_layers": "as FSDP2 (Megatron-FSDP prefetches the next unit)",
        "schedules": "megatron/core/pipeline_parallel/schedules.py L161-168 "
                     "(get_forward_backward_func: interleaved 1F1B when a virtual size is "
                     "set, else 1F1B; Megatron-Core has no GPipe or zero-bubble schedule)",
        "split_slack": "megatron/core/transformer/transformer_config.py L137-143 "
                       "(--account-for-embedding-in-pipeline-split, "
                       "--account-for-loss-in-pipeline-split), transformer_block.py L148-200 "
                       "(each takes one layer slot of the first / last virtual stage) - "
                       "Llama 3's 126 + 2 = 128 slots",
        "even_split": "megatron/training/arguments.py L968-973 (interleaved: the slots "
                      "divide by pp, then by vp); one stage per rank takes any split through "
                      "--decoder-first/last-pipeline-num-layers or "
                      "--pipeline-model-parallel-layout (transformer_config.py L111-135), "
                      "which also builds uneven chunks - not priced here, the schedule "
                      "model takes a rank's chunks as equal",
        "fsdp_buffers": "as FSDP2",
        "overhead_bytes": _CONTEXT,
        "frozen_param_bytes": "bf16 params; fp32 main params exist only for what the "
                              "optimizer holds (optimizer/__init__.py L330-333, L786); "
                              "freezing is done on the model before wrapping "
                              "(multimodal/llava_model.py L553-590); " + _FROZEN,
        "offloads": "ZeRO-Offload / FSDP2's kinds: none offered; Megatron-Core's own "
                    "--optimizer-cpu-offload is ParallelConfig.optimizer_offload_fraction "
                    "(SOURCES['megatron']['optimizer_cpu_offload'])",
        "offload_stage": "none offered",
        "working_set": _WORKING,
        "fragmentation": _FRAGMENTATION,
        "compiled_fragmentation": _FRAGMENTATION,
        # step time's kernels beside the GEMMs (ledger.step.eager, ledger.step.gemm._ssd_s)
        "expert_eager_passes": "NVIDIA/Megatron-LM@55ac7082 (Megatron-Bridge v0.3.1's "
                               "pin): fusions/fused_bias_geglu.py L424-431 (the clamp: "
                               "chunk, two clamps, cat in eager PyTorch before the fused "
                               "weighted quick-GEGLU), moe/experts.py L609-625 (_apply_bias: "
                               "t + b * p per local expert, then cat); fc2 skip_bias_add=True, "
                               "fc1's bias in the grouped GEMM (experts.py L217-248 @d98e8a64); "
                               "fc1's bias gradient in the wgrad GEMM (TransformerEngine "
                               "grouped_linear.py L300-330, L419-437 @v2.9)",
        "expert_probs_fp32_under_flex": "DeepEP and HybridEP take only fp32 routing "
                                        "probabilities, upcasting bf16 ones: Megatron-LM "
                                        "d7288711 moe/token_dispatcher.py L1033-1039 "
                                        "(HybridEP), L1178-1184, L1302 (DeepEP), the same "
                                        "text at 0d8e0714, b0cc2706, d0b3b775, d98e8a64 "
                                        "(L1135-1141, L1312-1318, L1439 there); _apply_bias's "
                                        "b * p then runs in fp32 (experts.py L251-266 @d7288711)",
        "attention_sinks": "gpt-oss's learnable softmax runs in cuDNN's fused attention, not "
                           "an unfused path: TransformerEngine v2.9 (70f53666) "
                           "attention/dot_product_attention/utils.py L685-697 (sinks disable "
                           "FlashAttention only), common/fused_attn/fused_attn.cpp L370-375 "
                           "(cuDNN >= 9.13.1 for off-by-one / learnable; PR #2148, TE 2.8); "
                           "Megatron-Bridge models/gpt_oss/gpt_oss_bridge.py L86-88 @v0.6.0 "
                           "(softmax_type learnable, window (127, 0), every second layer); "
                           "priced as the flash-style kernel it is",
        "ssd_backward": "state-spaces/mamba ops/triton/ssd_combined.py "
                        "_mamba_chunk_scan_combined_bwd: L379-441 @v2.2.4 (95d8aba8), "
                        "L441-503 @e9594ce1 - the same kernels: C B^T and chunk states "
                        "recomputed, dstates, dx, dB, dC, dCB, ddA (ssd_chunk_scan.py L449, "
                        "L530, L774, L1098; ssd_chunk_state.py L398 @e9594ce1)",
        "quantized_input_writes": "the step's elementwise term on the activation dtype's "
                                  "bytes under a low-precision recipe (ledger.step.recompute."
                                  "written_dtype): TransformerEngine d0067d0d transformer_engine/"
                                  "pytorch/module/linear.py L378-397, L420-434 (the linear's "
                                  "input quantizer reads the BF16 input its producer wrote), "
                                  "module/layernorm_linear.py L222-267 (the fused norm writes "
                                  "row- and column-wise quantized copies); the casts' own "
                                  "passes not priced",
        "selective_rerun": "what each --recompute-modules module re-runs in backward "
                           "(ledger.step.recompute), megatron/core/transformer/ @d98e8a64: "
                           "core_attn attention.py L393-394, L495 (the attention core "
                           "only: ssm/mamba_mixer.py and ssm/mamba_layer.py checkpoint "
                           "nothing, a Mamba mixer's SSD scan is not run again); mla_up_proj "
                           "multi_latent_attention.py L862-875, L983-988; layernorm "
                           "transformer_layer.py L475-530; mlp L537-539, L992-1010; moe_act "
                           "moe/experts.py L1019-1030; moe moe/moe_layer.py L655-720 (route, "
                           "dispatch, experts, combine); shared_experts L517-530",
    },
    "torchtitan": {
        "fp8": "ledger.frameworks.fp8 (each recipe's facts and sources: ledger.frameworks.fp8.SOURCES)",
        "checkpoint": "ledger.frameworks.checkpoints (each fact's source: "
                      "ledger.frameworks.checkpoints.SOURCES)",
        **_FSDP2,
        "sp_regathers_input": "DTensor TP/SP under torchtitan's plan (9dec370a torchtitan/"
                              "parallelisms/parallelize_llama.py L175-193: SequenceParallel "
                              "norms, PrepareModuleInput Shard(1) -> Replicate, Colwise "
                              "q/k/v/w1/w3): autograd saves the gathered input; measured per "
                              "rank with saved-tensor hooks on torch 2.13 (ledger.verify."
                              "tp_saved, `train-ledger verify --only tp-saved`) and 4 "
                              "collectives per layer (ledger.verify, tp-sp)",
        "moe_dispatcher": "not read line by line: costed as an all-to-all over EP of "
                          "the CP-local tokens",
        "moe_tokens_sp_shard": "not read: costed on the full CP-local token count",
        "tied_embedding_allreduce": "torchtitan/distributed/fsdp.py L238-250 (tied "
                                    "embedding and output are one unit; with PP they sit "
                                    "on two stages and their grads must be summed)",
        "activations": "torchtitan llama3 modules: torch SDPA, RMSNorm, SwiGLU; see "
                       "ledger.arch.activations",
        "version": "pytorch/torchtitan b5bcd76c; torch 2.13.0",
        **_TORCH_STEP,
        "pipeline_outputs": "torchtitan/trainer.py L827-833 (pp_schedule.step(..., "
                            "return_outputs=False): torch pipelining keeps no outputs)",
        "pipeline_recv_buffers": "torch 2.13 torch/distributed/pipelining/stage.py "
                                 "L1268-1291 (_prepare_forward_infra: an activation "
                                 "receive buffer per micro-batch, L1428), L1596 (a gradient "
                                 "receive buffer per micro-batch), allocated once",
        "comm_bucket_bytes": "FSDP2 reduces per unit, from the unit's own buffers: none extra",
        "overhead_bytes": _CONTEXT,
        "working_set": _WORKING,
        "fragmentation": _FRAGMENTATION,
        "compiled_fragmentation": _FRAGMENTATION,
    },
    "deepspeed": {
        "fp8": "ledger.frameworks.fp8 (each recipe's facts and sources: ledger.frameworks.fp8.SOURCES)",
        "checkpoint": "ledger.frameworks.checkpoints (each fact's source: "
                      "ledger.frameworks.checkpoints.SOURCES)",
        "schedules": "deepspeed/runtime/pipe/schedule.py L189 (TrainSchedule, 1F1B: the only "
                     "training schedule), engine.py L389",
        "split_slack": "the embedding and head are layers of the PipelineModule's list: "
                       "none left over (deepspeed/runtime/pipe/module.py L396-417)",
        "even_split": "deepspeed/runtime/pipe/module.py L396-417 (partition_uniform / "
                      "partition_balanced over any layer count)",
        "param_bytes": "DeepSpeed deepspeed/runtime/zero/stage3.py (ds_tensor in the model "
                       "dtype, bf16)",
        "grad_bytes": "deepspeed/runtime/engine.py L1485-1496, L2363 (grad partitions in the "
                      "model dtype unless data_types.grad_accum_dtype); stage_1_and_2.py "
                      "L1670-1680; reduced in bf16: engine.py L1404-1416",
        "master_bytes": "stage3.py L1031 (_create_fp32_partitions)",
        "moment_bytes": "fp32 Adam moments on the fp32 partition",
        "gathered_param_bytes": "stage3 all_gather_coalesced in the model dtype "
                                "(partitioned_param_coordinator.py L569-609)",
        "zero_stages": "engine.py L2423 (stages 1/2), stage3.py",
        "sharded_grads_per_microbatch": "stage_1_and_2.py L1764-1769 and engine.py L2891-2915 "
                                        "(stage 2 every micro-batch, stage 1 at the "
                                        "boundary); stage3.py L1437-1470, L1570-1600, "
                                        "L1791-1828 (stage 3 every micro-batch)",
        "reshard": "parameter_offload.py L525-599 (fetch and release per forward and "
                   "backward of every micro-batch; params <= 1e5 elements persist, L311-323)",
        "unsharded_with_pp": "DeepSpeed's pipeline engine supports ZeRO-1 only: n/a",
        "sp_regathers_input": "no Megatron-style SP in DeepSpeed's ZeRO engine: n/a",
        "moe_dispatcher": "deepspeed/moe/sharded_moe.py L97-109, L720, L749 (_AllToAll "
                          "of the dispatched input and of the expert output over the EP "
                          "group)",
        "moe_tokens_sp_shard": "not read: costed on the full CP-local token count",
        "tied_embedding_allreduce": "DeepSpeed pipe TiedLayerSpec all-reduces tied weights' "
                                    "grads between their stages (not read line by line)",
        "activations": "HF/torch modules as DeepSpeed wraps them; see ledger.arch.saved_tensors",
        "version": "deepspeedai/DeepSpeed edaa7221",
        "loss": "HF/torch modules' eager cross-entropy: ledger.frameworks.losses['eager']",
        "compiled_loss": "DeepSpeed's engine does not compile the loss: eager",
        "tp_loss": "no tensor parallelism of the output layer in DeepSpeed's ZeRO engine",
        "dropout": "the models DeepSpeed wraps decide; Llama-style modules have none",
        "pipeline_outputs": "DeepSpeed's pipeline engine keeps no outputs past the loss "
                            "(deepspeed/runtime/pipe/engine.py)",
        "pipeline_recv_buffers": "deepspeed/runtime/pipe/engine.py pipe_buffers: one per "
                                 "buffer slot of the schedule, counted with the activations",
        "grads_persist": "stage_1_and_2.py (partitioned gradient buffers allocated at init)",
        "optimizer_temp_moments": "DeepSpeed FusedAdam (multi_tensor_apply, in place)",
        "cp_buffers": "no context parallelism in DeepSpeed's ZeRO engine: n/a",
        "comm_bucket_bytes": "deepspeed/runtime/zero/config.py L113 (reduce_bucket_size 5e8 "
                             "elements, bf16)",
        "fsdp_prefetch_layers": "config.py L238 (stage3_prefetch_bucket_size 5e7: about one "
                                "layer ahead)",
        "fsdp_buffers": "partitioned_param_coordinator.py L310, L494-533",
        "overhead_bytes": _CONTEXT,
        "frozen_param_bytes": "bf16 module params; fp32 master partitions only for "
                              "requires_grad params; " + _FROZEN,
        "offloads": "optimizer: ZeRO-Offload, offload_optimizer.device cpu "
                    "(docs/_tutorials/zero-offload.md L9-56; stage_1_and_2.py L236-238, "
                    "L489-509 fp32 master and a pinned bf16 buffer on the CPU, L837-844 "
                    "fp32 grads on the CPU, L1590-1605 grads cast to fp32 on the GPU then "
                    "copied, L2337-2341 bf16 params copied back after the CPU step); "
                    "params: offload_param.device cpu (ZeRO-3; partition_parameters.py "
                    "L1156, L1205, L1332 the partition copied to the GPU for each gather)",
        "offload_stage": "offload_optimizer under ZeRO-1/2/3, offload_param under ZeRO-3 "
                         "(runtime/zero/config.py)",
        "working_set": _WORKING,
        "fragmentation": _FRAGMENTATION,
        "compiled_fragmentation": _FRAGMENTATION,
    },
    "hf": {
        "fp8": "ledger.frameworks.fp8 (each recipe's facts and sources: ledger.frameworks.fp8.SOURCES)",
        "checkpoint": "ledger.frameworks.checkpoints (each fact's source: "
                      "ledger.frameworks.checkpoints.SOURCES)",
        **_FSDP2,
        "schedules": "transformers has no pipeline schedule of its own: a model is split "
                     "with torch.distributed.pipelining, " + _FSDP2["schedules"],
        "reshard": "FSDP2 default reshard_after_forward=True for non-root units: torch "
                   "_fully_shard.py L180-190, L246-247",
        "unsharded_with_pp": "transformers' Trainer has no pipeline schedule: n/a",
        "sp_regathers_input": "no sequence parallelism in transformers' modules: n/a",
        "moe_dispatcher": "no expert dispatcher in transformers' modules: costed as an "
                          "all-to-all if ep > 1",
        "moe_tokens_sp_shard": "no expert dispatcher in transformers' modules: n/a",
        "tied_embedding_allreduce": "n/a without pipelining; counted if pp > 1",
        "activations": "transformers' own modules (modeling_llama.py etc.), measured by "
                       "tests/test_hf_activations.py; see ledger.arch.saved_tensors",
        "version": "transformers 5.23.0; torch 2.13.0 FSDP2",
        **_TORCH_STEP,
        "loss": "transformers loss_utils ForCausalLMLoss (logits.float(), cross_entropy): "
                "ledger.frameworks.losses['eager']",
        "compiled_loss": "the loss is part of the model's forward: torch.compile(model) "
                         "compiles it (ledger.frameworks.losses['compiled'])",
        "tp_loss": "transformers' tp_plan gathers the logits before its loss (lm_head "
                   "colwise_rep): the eager loss",
        "dropout": "LlamaConfig attention_dropout 0.0 and no hidden dropout (models/llama/"
                   "configuration_llama.py)",
        "pipeline_outputs": "no pipeline schedule in transformers: n/a",
        "pipeline_recv_buffers": "as torch pipelining when a model is split with it: "
                                 "torch/distributed/pipelining/stage.py L1268-1291, L1596",
        "comm_bucket_bytes": "FSDP2 reduces per unit: none extra",
        "overhead_bytes": _CONTEXT,
        "frozen_param_bytes": "peft's recipes load the base in bf16 (torch_dtype bf16; "
                              "peft docs accelerate/fsdp.md, deepspeed.md; QLoRA's "
                              "bnb_4bit_quant_storage bf16); " + _FROZEN,
        "working_set": _WORKING,
        "fragmentation": _FRAGMENTATION,
        "compiled_fragmentation": _FRAGMENTATION,
    },
    "deepseek": {  # every other fact as megatron's (filled in below)
        "version": "the DeepSeek-V3 report (arXiv:2412.19437) and deepseek-ai/DualPipe "
                   "3da1bbea; Megatron-Core's facts otherwise",
        "fp8": "ledger.frameworks.fp8 (the deepseek-v3 recipe: arXiv:2412.19437 sec. 3.3)",
        "zero_stages": "arXiv:2412.19437 sec. 3.2: ZeRO-1 data parallelism (offered as "
                       "Megatron's stages)",
        "moe_dispatcher": "arXiv:2412.19437 sec. 3.2.2 (node-limited IB then NVLink dispatch: "
                          "the flex dispatcher, DeepEP)",
        "schedules": "arXiv:2412.19437 sec. 3.2.1, Table 2 (DualPipe); deepseek-ai/DualPipe "
                     "3da1bbea dualpipe/dualpipe.py L294-422, dualpipe/dualpipev.py "
                     "L280-420 (DualPipe, DualPipeV). What a DualPipe rank holds at its "
                     "peak, from the same code: stage h = min(r, pp-1-r) for pp - h "
                     "micro-batches and stage pp-1-h for h + 1 (steps 1-3, L346-384; "
                     "ledger.placement.layers.inflight_kinds), and no other micro-batch's "
                     "loss at a loss forward or backward - the last stage's B1 runs before "
                     "its next F1 (step 3's B1 W F1, step 4's F0&B1 then F1&B0, L373-404; "
                     "ledger.pipeline.held_closed's at_loss)",
        "even_split": "DeepSeek's own layer assignment is not published; stages take "
                      "Megatron's rule",
        "ep_overlap": "arXiv:2412.19437 sec. 3.2.1 ('both all-to-all and PP communication "
                      "can be fully hidden'), fig. 4; deepseek-ai/profile-data 44960242 "
                      "train.json (one overlapped pair of 4-layer chunks on H800, EP64: "
                      "3% of it communication alone)",
        "ep_overlap_schedules": "DualPipe's forward-backward pairs (dualpipe.py L121-183, "
                                "overlapped_forward_backward)",
    },
}
_TE_BUFFERS = ("TransformerEngine d0067d0d: with Megatron's gradient-accumulation fusion "
               "(on by default, --no-gradient-accumulation-fusion) each TE linear hands "
               "autograd a dummy wgrad cached per (shape, dtype) for the run "
               "(transformer_engine/pytorch/module/base.py L134-147; linear.py L1357-1374, "
               "layernorm_linear.py L1172-1178, grouped_linear.py L1230-1236); the cuBLAS "
               "workspace by the GPU's compute capability, 32 MiB + 1 KiB from sm_90 and "
               "4 MiB before it (cpp_extensions/gemm.py L40-45 "
               "get_cublas_workspace_size_bytes), lru-cached (L48-67), one per compute "
               "stream (4) for grouped GEMMs (common/util/multi_stream.cpp L52-55); "
               "ledger.placement.buffers")
for _name in SOURCES:
    if isinstance(SOURCES[_name], dict):
        SOURCES[_name].setdefault("te_buffers", _TE_BUFFERS if _name == "megatron" else
                                  "not Transformer Engine's linear modules: no dummy wgrads "
                                  "or TE workspaces (the framework's own modules)")
SOURCES["deepseek"]["te_buffers"] = ("DeepSeek's stack (HAI-LLM) is not published: TE's "
                                     "buffers not priced")
for _name in SOURCES:
    if isinstance(SOURCES[_name], dict):
        SOURCES[_name].setdefault("allocator_reclaim", _RECLAIM)
        SOURCES[_name].setdefault("unreturnable", _UNRETURNABLE)
for _name, _facts in OVERLAP_SOURCES.items():  # ledger.frameworks.overlap_sources
    SOURCES[_name] = SOURCES[_name] | _facts
for _name, _facts in (*LIBRARY_SOURCES.items(), *MODEL_SOURCES.items()):  # ..._sources
    SOURCES[_name] = SOURCES[_name] | _facts
SOURCES["deepseek"] = {**{k: "as megatron (ledger.frameworks.SOURCES['megatron'])"
                          for k in SOURCES["megatron"]}, **SOURCES["deepseek"]}
# torchtitan at the commits of its published measurements: what changed from HEAD
SOURCES["torchtitan@2024-12"] = {
    **SOURCES["torchtitan"],
    "version": "pytorch/torchtitan 9dec370a (2024-12-26) on pytorch/pytorch 1963fc83 "
               "(2024-12-23), the commits docs/performance.md @d4c86e37 names",
    "activations": "ledger.arch.saved_tensors.TORCH_2412",
    "compiled_loss": "torchtitan 9dec370 train.py L136-138: compiling the loss is disabled "
                     "('causes CUDA errors')",
    "pipeline_outputs": "torch/distributed/pipelining/stage.py of that era (forward_one_chunk"
                        ": self.output_chunks.append(output) on every stage, freed when the "
                        "step ends; pytorch/pytorch#138504 detaches the last stage's outputs "
                        "but keeps them, #153383 (2025-05) keeps the last stage's only)",
}
SOURCES["torchtitan@2024-04"] = {
    **SOURCES["torchtitan@2024-12"],
    "version": "pytorch/torchtitan 395a5262 (2024-04-18) and 1ea476e9 (2024-04-24), the "
               "commits of the docs/performance.md tables of that month",
    "activations": "ledger.arch.saved_tensors.TORCH_2404",
    "loss": "ledger.frameworks.losses['eager-held'] (model.py L436, train.py L290-293 "
            "@395a5262)",
    "compiled_loss": "compile = false in every toml of the month; the loss is never "
                     "compiled: as 'loss'",
}
SOURCES["torchtitan@2025-06"] = {
    **SOURCES["torchtitan"],
    "version": "pytorch/torchtitan e7c0cae9 (2025-06-13) on torch 2.8.0a0+5228986c (NGC "
               "25.05), the commits benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md "
               "names",
    "activations": "ledger.arch.saved_tensors.TORCH_2506",
    "compiled_loss": "e7c0cae torchtitan/components/loss.py L25-30 (torch.compile(loss_fn) "
                     "when training.compile)",
    "pipeline_outputs": "pytorch/pytorch#153383 (2025-05-12, in torch 2.8): only the last "
                        "stage appends to output_chunks, kept to the step's end",
}
SOURCES.update({n: SOURCES[n] | {"pipeline_input_grads": t} for n, t in INPUT_GRADS.items()})

"""The PyTorch facts that several frameworks' source tables share (``ledger.frameworks.sources``
merges them in): the CUDA context, the caching allocator's fragmentation, autograd's working
set, frozen parameters, FSDP2 and its CPU offload, and a torch training step as torchtitan and
Hugging Face run it - the file and line at the snapshot ``sources.SNAPSHOTS`` names.
"""
from __future__ import annotations


_CONTEXT = ("CUDA context ~0.3-0.43 GiB with lazy module loading (pytorch/pytorch#107667, "
            "#109888, PR #86509); NCCL: 4 MiB SIMPLE + 0.5 MiB LL + 4.69 MiB LL128 buffers "
            "per channel, per peer, per communicator (NCCL src/init.cc L810-828, "
            "src/include/device.h L97-115) - about 0.6 GiB for a handful of process groups; "
            "both outside the caching allocator: torch/cuda/memory.py (torch 2.13) "
            "L231-256, L533-548 (allocated = tensors, reserved = the allocator's segments, "
            "the context not in either)")
_FSDP2_OFFLOAD = ("params: torch _fully_shard/_fsdp_api.py L183-199 CPUOffloadPolicy "
                  "(parameters, gradients and optimizer state on the CPU, the step on the "
                  "CPU; pinned), _fsdp_param.py L312-315, L896-901 (the shard copied "
                  "host-to-device in its original dtype before each all-gather), "
                  "_fsdp_collectives.py L696, L711-743 (grads device-to-host, non_blocking "
                  "only without accumulation); torchtitan training.enable_cpu_offload "
                  "(configs.py L70-73, distributed/fsdp.py L231-232)")
_FROZEN = ("frozen parameters keep no gradient and no optimizer state: torch "
           "_fsdp_param_group.py L615-640, L659-660 (only params with grads are "
           "reduce-scattered; frozen ones are still sharded and all-gathered); Megatron-Core "
           "distributed_data_parallel.py L175-186 (grad buffers for requires_grad only), "
           "optimizer/__init__.py L330-333; DeepSpeed stage_1_and_2.py L376-384 (only "
           "requires_grad params in the partitioned groups), stage3.py L677-690")
_FRAGMENTATION = ("reserved / allocated - 1 at the step's peak, the caching allocator's "
                  "cached and split blocks (torch/cuda/memory.py L571-600, "
                  "inactive_split_bytes): one constant fitted by benchmarks/fit_memory.py on "
                  "the declared calibration rows of ledger.validation.memory, as a share of "
                  "allocated bytes (a share of the churned bytes alone fits them worse). "
                  "Segments and splits: torch 2.13.0 c10/core/AllocatorConfig.h L16-25 "
                  "(512 B rounding; <= 1 MiB in 2 MiB segments, < 10 MiB in 20 MiB ones, "
                  "larger rounded to 2 MiB); c10/cuda/CUDACachingAllocator.cpp @001074d2 "
                  "malloc (best fit, then cudaMalloc, then release the unsplit cached blocks "
                  "and retry), get_allocation_size, should_split (a larger cached block "
                  "split when > 1 MiB remains, below max_split_size)")
_WORKING = ("autograd runs a layer's backward with its input gradients alive at once "
            "(ledger.arch.checkpointing.gradient_bytes) and, under recompute, the tensors "
            "its forward run again keeps (torch/utils/checkpoint.py; Megatron "
            "tensor_parallel/random.py CheckpointFunction)")
_TORCH_STEP = {
    "loss": "eager F.cross_entropy(pred.float()): torchtitan/components/loss.py (HEAD "
            "L32-62); ledger.frameworks.losses",
    "compiled_loss": "torchtitan bbb1b616 (#1033): the loss compiled with training.compile; "
                     "HEAD torchtitan/components/loss.py; ledger.frameworks.losses",
    "tp_loss": "torchtitan parallelism.disable_loss_parallel False: the output layer keeps "
               "its vocab shard and the loss runs under loss_parallel(); "
               "ledger.frameworks.losses['loss-parallel']",
    "dropout": "torchtitan's Llama and DeepSeek modules have no dropout "
               "(torchtitan/models/llama3/model.py)",
    "grads_persist": "torchtitan/trainer.py (optimizers.zero_grad(): torch's set_to_none "
                     "default, torch/optim/optimizer.py zero_grad set_to_none=True); FSDP2 "
                     "writes the sharded grad in post_backward (_fsdp_param_group.py "
                     "L588-720); so each unit's gradient is made at its own first "
                     "backward - under a pipeline holding several stages a rank "
                     "(Interleaved1F1B: pipelining/schedules.py L2872-2888, L2954-3002 @2.13.0, "
                     "backwards from the rank's last stage, a round of pp each) a stage's "
                     "unsharded fp32 gradients appear at that stage's first backward "
                     "(to_accumulated_grad_if_needed in post_backward, torch 2.13.0 "
                     "fsdp/_fully_shard/_fsdp_param_group.py L602-612, _fsdp_param.py "
                     "L802-813; 2.6.0 _fsdp_param.py L629-648); under a split backward "
                     "the weight-gradient step W writes the weights' .grad, the input "
                     "step only the inputs' (pipelining/stage.py L1016-1038, "
                     "backward_weight_one_chunk L1064-1108; _backward.py L255-261, "
                     "stage_backward_weight L334-339 @2.13.0), so under "
                     "ScheduleInterleavedZeroBubble (schedules.py L3072-3127, W's trail "
                     "I's by rank steps L2810, L3114), ScheduleZBVZeroBubble (L3268-3390) "
                     "and ScheduleDualPipeV (L3459-3617) a stage's gradients appear at "
                     "its first W; ledger.pipeline.grad_sets, weight_step_sets",
    "optimizer_temp_moments": "torch/optim/adamw.py _multi_tensor_adam (foreach, the default "
                            "on CUDA): torch._foreach_sqrt(exp_avg_sqs) allocates one copy "
                              "of the second moment",
    "cp_buffers": "ledger.frameworks.cp (torch context_parallel, all-gather rotation: "
                  "torchtitan's context_parallel_rotate_method default 'allgather')",
}
_FSDP2 = {
    "param_bytes": "torchtitan torchtitan/config/configs.py L87-92 (model built in fp32: "
                   "sharded params fp32)",
    "grad_bytes": "torchtitan configs.py L102-106 (mixed_precision_reduce fp32 only); torch "
                  "_fully_shard/_fsdp_collectives.py foreach_reduce (reduce-scatter in "
                  "reduce_dtype)",
    "master_bytes": "FSDP2 keeps no separate master: the fp32 shard is the optimizer's param",
    "moment_bytes": "torch.optim.AdamW exp_avg / exp_avg_sq in the param dtype (fp32)",
    "gathered_param_bytes": "torchtitan configs.py L94-100 (mixed_precision_param bf16); "
                            "torchtitan/distributed/fsdp.py L223-227 (MixedPrecisionPolicy)",
    "zero_stages": "torchtitan applies fully_shard (FSDP2) or replicate: "
                   "torchtitan/models/llama3/parallelize.py L57-78",
    "sharded_grads_per_microbatch": "torchtitan/trainer.py L856-902 (no "
                                    "set_requires_gradient_sync(False) around micro-batches); "
                                    "torch _fsdp_param_group.py post_backward L588-720",
    "reshard": "torchtitan/distributed/fsdp.py L112-136 (default -> not pp_enabled)",
    "unsharded_with_pp": "torch/distributed/pipelining/stage.py L781-848 (no grad sync and no "
                         "reshard after backward until the last micro-batch), L1164-1186",
    "fsdp_prefetch_layers": "torch _fsdp_param_group.py L795 (_backward_prefetch: the next "
                            "unit is gathered while one computes)",
    "fsdp_buffers": "torch _fsdp_param_group.py L499-509, L540-586 (unsharded params "
                    "allocated per unit, freed on reshard)",
    "schedules": "torch/distributed/pipelining/schedules.py L3620-3644 (get_schedule_class: "
                 "GPipe, 1F1B, Interleaved1F1B, InterleavedZeroBubble, ZBVZeroBubble, "
                 "DualPipeV - L3393-3617, 'based on the DualPipe schedule introduced by "
                 "DeepSeek'; no single-stage zero bubble); "
                 "torchtitan/distributed/pipeline_parallel.py L205, L550-560 (v-style stage "
                 "placement for ZBVZeroBubble and DualPipeV)",
    "split_slack": "torchtitan/distributed/pipeline_parallel.py L380-395 (embedding and "
                   "output weighted as one layer each by default, configs.py L197-203: up "
                   "to layers + 2 stages)",
    "even_split": "torchtitan/distributed/pipeline_parallel.py L396-430 (the remainder "
                  "spread over the first stages: any layer count)",
    "frozen_param_bytes": "torchtitan builds the model in fp32 (configs.py L87-92) and its "
                          "LoRA converter freezes those params as they are "
                          "(torchtitan/components/lora.py L79-82): 4 B; " + _FROZEN,
    "offloads": _FSDP2_OFFLOAD,
    "offload_stage": "CPUOffloadPolicy is a fully_shard option: ZeRO-3 only",
}

# What PyTorch's caching allocator hands back before it fails an allocation: the verdict
# (MemoryBreakdown.required_bytes) counts the fragmentation it cannot (ledger.placement.
# allocator.reclaimable); the measured reserved peaks are priced with all of it
_RECLAIM = ("pytorch/pytorch@001074d2 c10/cuda/CUDACachingAllocator.cpp: malloc retries a "
            "failed cudaMalloc after release_available_cached_blocks, then "
            "release_cached_blocks ('Free all non-split cached blocks and retry alloc'); "
            "the comment before the out-of-memory error: 'at this point free_cached_blocks "
            "has already returned all possible \"cached\" memory to the driver. The only "
            "remaining \"cached\" memory is split from a larger block that is partially "
            "in-use' - so the cached whole blocks (freed logits and gradients, "
            "Loss.cached_bytes, whole free segments) are handed back and the split blocks are "
            "not (Framework.unreturnable of allocated, bounded by the outcome rows: "
            "ledger.validation.outcomes); "
            "under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (ParallelConfig."
            "expandable_segments) Note [Expandable Segments]: 'If we end up out of memory, we "
            "can unmap all the memory in our segment corresponding to empty physical pages', "
            "so all of it is. Who sets it: torchtitan run_llama_train.sh L22 @9dec370 "
            "(from a5e57e4a9, 2024-10-22; run_train.sh L24 @e7c0cae); Megatron-Bridge's perf "
            "launchers per release (ledger.render.bridge.expandable_segments)")
# Of the fragmentation, the split blocks kept through a failed cudaMalloc: no reserved peak
# measures them apart, so the outcome rows bound them (one figure for every framework)
_UNRETURNABLE = ("_RECLAIM's split blocks, a share of allocated fitted by "
                 "benchmarks/fit_memory.py on the outcome rows (ledger.validation.outcomes: "
                 "runs that ran fit, runs out of memory do not; the midpoint of the shares "
                 "they allow), the same for every framework: the allocator is PyTorch's")
# The gradient of a pipeline stage's input (its receive buffer's .grad, a leaf requiring
# grad: torch 2.13.0 pipelining/stage.py L1428-1430) is cleared only by the next step's
# clear_runtime_states (stage.py L604-622) unless the backward drops it: torch 2.13.0's
# full backward does (_backward.py L443-450, stage_backward: val.grad = None, "This
# prevents the gradients from persisting in GPU memory for the entire duration of
# step_microbatches until clear_runtime_states() is called"; pytorch/pytorch#164329,
# 2025-10-01), its split backward's input step does not (stage_backward_input sets
# inp.grad, _backward.py L255-261; run on every stage but the first, stage.py L1016-1038)
_INPUT_GRADS_2_13 = ("torch 2.13.0 torch/distributed/pipelining/_backward.py L443-450 "
                     "(stage_backward drops each input's .grad once read), L255-261 "
                     "(stage_backward_input sets it and keeps it), stage.py L604-622 "
                     "(clear_runtime_states: cleared at the next step): a split backward's "
                     "input step only")
_INPUT_GRADS_BEFORE = ("torch before pytorch/pytorch#164329 (2025-10-01, the val.grad = None "
                       "of torch 2.13.0 _backward.py L443-450, whose comment says the input "
                       "gradients persisted through step_microbatches until "
                       "clear_runtime_states, stage.py L604-622): every backward leaves its "
                       "stage input's gradient on the receive buffer until the next step")
_MEGATRON_INPUT_GRADS = ("Megatron-LM megatron/core/pipeline_parallel/schedules.py L554-599 "
                         "(backward_step: retain_grad on the input tensor, its .grad returned "
                         "to be sent), L2427 (the input tensor popped from input_tensors for "
                         "its backward, dropped with its gradient after the send): none kept")
# Framework.pipeline_input_grads of each record (merged into SOURCES last)
INPUT_GRADS = {
    "megatron": _MEGATRON_INPUT_GRADS,
    "deepseek": "as megatron: " + _MEGATRON_INPUT_GRADS,
    "deepspeed": "not torch pipelining: DeepSpeed's pipe engine keeps its inputs in the "
                 "schedule's buffer slots (pipeline_recv_buffers), reused micro-batch after "
                 "micro-batch; no stage input's gradient is held past its slot",
    "torchtitan": _INPUT_GRADS_2_13, "hf": _INPUT_GRADS_2_13,
    "torchtitan@2024-12": _INPUT_GRADS_BEFORE, "torchtitan@2024-04": _INPUT_GRADS_BEFORE,
    "torchtitan@2025-06": _INPUT_GRADS_BEFORE,
}

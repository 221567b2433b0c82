"""The sources of how each framework splits layers over pipeline stages and what it
overlaps with compute unless a launch says otherwise (``Framework.split``,
``overlap_grad_reduce``, ``overlap_param_gather``, ``overlap_fixed``, ``dp_bucket_params``,
``one_bucket_exposed``, ``ep_overlap``, ``ep_overlap_schedules``, ``overlap_p2p_schedules``): file and line at the
commits of ``ledger.frameworks.sources.SNAPSHOTS``; ``sources`` merges them into its
``SOURCES``.
"""

_FSDP2 = {  # torchtitan, and transformers' modules under FSDP2 (accelerate)
    "split": "torchtitan/distributed/pipeline_parallel.py L357-466 "
             "(_generate_llm_fqn_per_model_part: layers + input_weight + output_weight "
             "effective layers, the remainder one each to the first stages; the first stage "
             "holds the embedding, the last norm + lm_head), L194-264; weights 1 each by "
             "default, torchtitan/config/configs.py L197-207",
    "overlap_grad_reduce": "FSDP2 reduce-scatters on its own stream while the backward "
                           "runs: torch _fully_shard/_fsdp_param_group.py L92 "
                           "(reduce_scatter_stream), post_backward L588-720; torch DDP "
                           "(replicate) all-reduces its buckets during the backward: "
                           "torch/nn/parallel/distributed.py (Reducer)",
    "overlap_param_gather": "FSDP2 prefetches the next unit's all-gather on "
                            "all_gather_stream: _fsdp_param_group.py L89, L62, L419-431 "
                            "(implicit forward prefetch), L795 (_backward_prefetch)",
    "overlap_fixed": "FSDP2 has no switch to turn its streams off (fully_shard's arguments: "
                     "_fully_shard.py L180-260)",
    "dp_bucket_params": "torch DDP bucket_cap_mb = 25 (torch/nn/parallel/distributed.py): "
                        "25 MiB of fp32 gradients, 6,553,600 parameters; FSDP2 reduces one "
                        "unit (a layer) per call",
    "one_bucket_exposed": "FSDP2 cannot run unoverlapped: n/a",
    "ep_overlap": "eager torchtitan registers no OVERLAP_F_B function at the snapshot, so "
                  "torch runs DualPipeV's overlapped pair one pass after the other "
                  "(torch schedules.py L2632-2636, register_custom_function L2240-2275); "
                  "torchtitan's dual_pipe_v.py EP overlap (fcc5643f, 2025-12-12) was removed "
                  "in fe80b63c (2026-04-02)",
    "ep_overlap_schedules": "none: see ep_overlap",
    "overlap_p2p_schedules": "none: torch pipelining's sends and receives are priced "
                             "blocking, as before this field (no overlap of them read at "
                             "the snapshot)",
}

OVERLAP_SOURCES: dict[str, dict[str, str]] = {
    "megatron": {
        "split": "megatron/core/transformer/transformer_block.py L152-180 (the slots divide "
                 "evenly; --account-for-embedding/loss-in-pipeline-split take one from the "
                 "first / last virtual stage); a launch's own split: "
                 "--decoder-first/last-pipeline-num-layers (L104-150) or "
                 "--pipeline-model-parallel-layout "
                 "(megatron/core/transformer/pipeline_parallel_layer_layout.py L40-151), "
                 "read by ledger.io.megatron",
        "overlap_grad_reduce": "megatron/training/arguments.py L3121-3122 "
                               "(--overlap-grad-reduce, store_true, default False); "
                               "core/distributed/distributed_data_parallel_config.py L18; "
                               "Megatron-FSDP forces it on when sharding gradients "
                               "(optim_grads, optim_grads_params): "
                               "megatron_fsdp/megatron_fsdp.py L331-333. Without it the "
                               "gradients are reduced in finalize_model_grads after the "
                               "whole backward (pipeline_parallel/schedules.py L866, L2092)",
        "overlap_param_gather": "arguments.py L3148-3149 (--overlap-param-gather, default "
                                "False), L1024-1029 (needs the distributed optimizer and "
                                "--overlap-grad-reduce); Megatron-FSDP forces it for "
                                "optim_grads_params: megatron_fsdp.py L328-330",
        "overlap_fixed": "megatron_fsdp.py L334-337 (sharded gradients: 'Gradient "
                         "reduce-scatter must be overlapped')",
        "dp_bucket_params": "core/distributed/distributed_data_parallel.py L133-134 "
                            "(bucket_size max(40000000, 1000000 x dp))",
        "one_bucket_exposed": "distributed_data_parallel.py L135-137 (bucket_size None, one "
                              "bucket, when overlap_grad_reduce is False)",
        "ep_overlap": "core/model_parallel_config.py L343-346 "
                      "(overlap_moe_expert_parallel_comm: False; "
                      "--overlap-moe-expert-parallel-comm)",
        "ep_overlap_schedules": "core/transformer/transformer_config.py L3002-3046 (with PP a "
                                "virtual pipeline is required; EP > 1; alltoall or flex "
                                "dispatcher; no full recompute); "
                                "pipeline_parallel/combined_1f1b.py L35-58 (one micro-batch's "
                                "forward beside another's backward, 'EP A2A in forward step "
                                "is hidden by the attention/mlp computation in the backward "
                                "step, and vice versa'), schedules.py L966-970 (one more "
                                "warm-up micro-batch); models/common/"
                                "model_chunk_schedule_plan.py L243-247, L261-301 (three "
                                "slots: combine_bwd | dispatch_fwd->dispatch_bwd | "
                                "combine_fwd beside pre_dispatch_fwd | mlp_bwd->mlp_bwd_dw->"
                                "mlp_fwd | pre_dispatch_bwd), models/gpt/"
                                "fine_grained_callables.py L67-203 (pre_dispatch: attention, "
                                "router, shared experts; mlp: the routed experts) "
                                "(ledger.step.layer_comms.combined_1f1b_s)",
        "shared_expert_overlap": "core/transformer/transformer_config.py L717 "
                                 "(moe_shared_expert_overlap False), L1820-1825, L3040-3041; "
                                 "moe/token_dispatcher.py L697-717, L859-873 (alltoall: fc1 "
                                 "beside the dispatch, fc2 beside the combine), L1972-2050 "
                                 "(flex); moe/shared_experts.py L163-198 (its own stream) "
                                 "(ledger.step.layer_comms.shared_hidden_s)",
        "delay_wgrad": "core/distributed/distributed_data_parallel_config.py L185 "
                       "(delay_wgrad_compute False); transformer_config.py L3074-3077; "
                       "models/common/model_chunk_schedule_plan.py L244-281 (the combined "
                       "1F1B's middle slot; mlp.backward_dw before the backward's dispatch); "
                       "extensions/transformer_engine.py L1373-1374 "
                       "(ledger.step.layer_comms.undelayed_wgrad_s)",
        "overlap_p2p_schedules": "megatron/training/arguments.py L3118-3120 "
                                 "(--no-overlap-p2p-communication, store_false: "
                                 "overlap_p2p_comm on by default), L1000-1017 (turned off "
                                 "without a virtual pipeline); pipeline_parallel/schedules.py "
                                 "L1697-1720 (interleaved 1F1B posts the next chunk's "
                                 "send/recv and waits on them only before the chunk that "
                                 "needs them); Megatron-Bridge sets it so with VP > 1 "
                                 "(src/megatron/bridge/training/comm_overlap.py:451-460 @ "
                                 "v0.3.1)",
    },
    "torchtitan": _FSDP2,
    "deepspeed": {
        "split": "deepspeed/runtime/pipe/module.py L396-417 (partition_uniform / balanced "
                 "over the layer list); Megatron-DeepSpeed's type:transformer|embedding "
                 "(BLOOM, bigscience tr11-176B-ml.slurm) leaves the two ends one layer "
                 "fewer",
        "overlap_grad_reduce": "deepspeed/runtime/zero/config.py L138 (overlap_comm None), "
                               "L382-386 (None -> stage == 3); before 2022-07: "
                               "runtime/zero/constants.py L59-60 at 11e94e6c "
                               "(ZERO_OPTIMIZATION_OVERLAP_COMM_DEFAULT False, "
                               "ZERO3_... True); stage_1_and_2.py L1350-1352, stage3.py "
                               "L335-336 (the reduction on its own stream only with it). "
                               "The pipeline engine reduces after the last micro-batch: "
                               "runtime/pipe/schedule.py L238-241, pipe/engine.py L296-303",
        "overlap_param_gather": "stage 3 prefetches parameters "
                                "(stage3_prefetch_bucket_size 5e7, config.py L215); "
                                "stages 1/2 all-gather the updated partitions after the step",
        "overlap_fixed": "overlap_comm is a config key at every stage (config.py L138)",
        "dp_bucket_params": "config.py L113 (reduce_bucket_size 5e8 elements); "
                            "runtime/engine.py L160 (MEMORY_OPT_ALLREDUCE_SIZE 5e8, the "
                            "pipeline engine's all-reduce)",
        "one_bucket_exposed": "buckets of reduce_bucket_size either way (config.py L113)",
        "ep_overlap": "deepspeed/moe/sharded_moe.py L720, L749 (_AllToAll in the layer's "
                      "own stream order): not overlapped",
        "ep_overlap_schedules": "none: see ep_overlap",
        "overlap_p2p_schedules": "none: the pipeline engine's send/recv instructions "
                                 "(runtime/pipe/schedule.py) are priced blocking",
    },
    "hf": _FSDP2,
}

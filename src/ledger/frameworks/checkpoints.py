"""What each framework writes when it checkpoints, and what training waits for.

A resumable checkpoint holds the model's parameters in the dtype the framework keeps them
and the whole optimizer state (fp32 master weights where the framework keeps a separate
copy, and every moment); gradients are not saved - a step starts from zero gradients.
Replicated state is written once: torch DCP's planner keeps one copy of a tensor several
ranks hold, Megatron's fully parallel save spreads the replicas' share over the
data-parallel ranks; DeepSpeed writes the model states from the first data-parallel rank
of each model-parallel group and the optimizer partitions from every rank. Every fact has
its source in ``SOURCES`` below (``ledger.run.checkpoint`` prices them).

>>> FORMATS["megatron"].saved, FORMATS["deepspeed"].model_writers
(('params', 'optim'), 'first-replica')
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class CheckpointFormat:
    """One framework's checkpoint: its layout, what it saves and who writes it."""

    layout: str  # the on-disk format's name
    saved: tuple[str, ...]  # resident states written: "params" and/or "optim"
    model_writers: str  # "balanced": replicated state split over its replicas;
    #                     "first-replica": data-parallel rank 0 writes the model states
    async_save: str  # the switch that makes the save asynchronous ("" when none)
    blocking_async: str  # what an asynchronous save keeps on the critical path


_MODEL_AND_OPTIM = ("params", "optim")
FORMATS = {
    "ideal": CheckpointFormat(layout="one file per rank", saved=_MODEL_AND_OPTIM,
                              model_writers="balanced", async_save="",
                              blocking_async="d2h"),
    "megatron": CheckpointFormat(layout="Megatron-Core torch_dist",
                                 saved=_MODEL_AND_OPTIM, model_writers="balanced",
                                 async_save="--async-save", blocking_async="d2h"),
    "torchtitan": CheckpointFormat(layout="torch DCP",
                                   saved=_MODEL_AND_OPTIM, model_writers="balanced",
                                   async_save='[checkpoint] async_mode = "async"',
                                   blocking_async="d2h"),
    "deepspeed": CheckpointFormat(layout="DeepSpeed model_states + zero_pp_rank optim_states",
                                  saved=_MODEL_AND_OPTIM, model_writers="first-replica",
                                  async_save='"checkpoint": {"writer": {"decoupled": true}}',
                                  blocking_async="d2h"),
}

_DCP = ("torch 2.13.0 torch/distributed/checkpoint/_dedup_save_plans.py L15-24 (a tensor "
        "several ranks plan to write is kept in one plan), used by default_planner.py "
        "L135-141")
SOURCES: dict[str, dict[str, str]] = {
    "megatron": {
        "layout": "Megatron-LM megatron/training/config/training_config.py L484-491 "
                  "(ckpt_format default 'torch_dist')",
        "saved": "megatron/training/checkpointing.py L1556-1624 (generate_state_dict: "
                 "state_dict['model'] = the bf16 model's sharded_state_dict, "
                 "state_dict['optimizer'] unless --no-save-optim); megatron/core/optimizer/"
                 "distrib_optimizer.py L1090-1117 (per parameter: 'param' = the fp32 main "
                 "param, plus exp_avg and exp_avg_sq); no gradients",
        "model_writers": "training_config.py L511-514 (fully_parallel_save default True); "
                         "megatron/core/dist_checkpointing/strategies/fully_parallel.py "
                         "L46-58 (replicated shards distributed over the DP ranks)",
        "async_save": "training_config.py L516-517 (async_save default False, torch_dist "
                      "only)",
        "blocking_async": "megatron/core/dist_checkpointing/strategies/filesystem_async.py "
                          "L134-137 ('We do D2H synchronously for now'), the write runs in "
                          "a background worker",
    },
    "torchtitan": {
        "layout": "torchtitan torchtitan/components/checkpointer/dcp.py L312-331 "
                  "(dcp.save / dcp.async_save)",
        "saved": "dcp.py L172-180 (states: MODEL, OPTIMIZER, DATALOADER, LR_SCHEDULER; the "
                 "model's fp32 sharded params and AdamW's exp_avg / exp_avg_sq), no "
                 "gradients",
        "model_writers": _DCP,
        "async_save": "dcp.py L58-61, L137 (async_mode 'disabled' by default; 'async', "
                      "'async_with_pinned_mem')",
        "blocking_async": "torch 2.13.0 torch/distributed/checkpoint/state_dict_saver.py "
                          "L221-236 (stages the state dict to CPU, then saves in a thread); "
                          "torchtitan dcp.py L427 (the next save waits for the previous)",
    },
    "deepspeed": {
        "layout": "DeepSpeed deepspeed/runtime/engine.py L4195-4205 (zero_pp_rank_{dp}_"
                  "mp_rank_{mp}_optim_states.pt), L4212-4236 (mp_rank_{mp}_model_states.pt)",
        "saved": "engine.py L5409-5411 (optimizer_state_dict); zero/stage_1_and_2.py "
                 "L2594-2624 and bf16_optimizer.py L495-503 (the fp32 master partition and "
                 "the moments); the module's bf16 weights in the model states; no gradients",
        "model_writers": "engine.py L1583-1589 and checkpoint_engine/checkpoint_engine.py "
                         "L47-48 (the model states are written by data-parallel rank 0; "
                         "ZeRO-3 partitions by every rank)",
        "async_save": "checkpoint_engine/utils.py L15-27 (a writer config with decoupled = "
                      "true makes a DecoupledCheckpointEngine); the default is "
                      "TorchCheckpointEngine (torch.save)",
        "blocking_async": "checkpoint_engine/decoupled_checkpoint_engine.py L104-106, "
                          "L157-181 (a separate process writes; commit waits for it): "
                          "priced as the device-to-host copy, not read line by line",
    },
}
SOURCES["hf"] = {k: v + " (transformers under FSDP2: the DCP path)"
                 for k, v in SOURCES["torchtitan"].items()}
SOURCES["deepseek"] = {k: v + " (DeepSeek's own stack publishes no checkpoint format: "
                       "priced as Megatron-Core's)" for k, v in SOURCES["megatron"].items()}

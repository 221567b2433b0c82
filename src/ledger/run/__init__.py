"""Whole runs: tokens and phases to steps, days, GPU-hours, cost and energy, with the
checkpoints a run writes and the failures it survives.

``phases`` splits a run into segments of one batch size (Megatron's ramp included);
``checkpoint`` prices one checkpoint (bytes in total and per GPU, write, copy and load
seconds) from what the framework saves; ``failures`` holds the interruption rates,
Young's and Daly's checkpoint intervals and Daly's expected wall time; ``whole`` adds
them up over a run at the step time ``ledger.step.estimate`` prices (and ranks the
planner's placements by time to train); ``published`` holds the published whole runs the
layer is held against (Llama 3.1 405B, DeepSeek-V3, BLOOM-176B, OPT-175B).

May import: everything below it (up to ``ledger.validation``).
"""
from ledger.run.checkpoint import (
                                   DEFAULT_STORAGE,
                                   MODES,
                                   Checkpoint,
                                   Storage,
                                   checkpoint,
                                   checkpoint_bytes,
                                   saved_bytes_per_param,
)
from ledger.run.failures import (
                                 DEFAULT_GPU_MTBF_S,
                                 DEFAULT_RELAUNCH_S,
                                 RATES,
                                 daly_interval_s,
                                 expected_wall_s,
                                 job_mtbf_s,
                                 young_interval_s,
)
from ledger.run.phases import MAX_PHASES, MAX_RAMP_SEGMENTS, Phase, Segment, segments
from ledger.run.whole import (
                              RunEstimate,
                              RunSettings,
                              SegmentRun,
                              interval_steps,
                              price_segment,
                              rank_by_time_to_train,
                              segment_config,
                              whole_run,
)

__all__ = ["Checkpoint", "DEFAULT_GPU_MTBF_S", "DEFAULT_RELAUNCH_S", "DEFAULT_STORAGE",
           "MAX_PHASES", "MAX_RAMP_SEGMENTS", "MODES", "Phase", "RATES", "RunEstimate",
           "RunSettings", "Segment", "SegmentRun", "Storage", "checkpoint", "checkpoint_bytes",
           "daly_interval_s", "expected_wall_s", "interval_steps", "job_mtbf_s", "price_segment",
           "rank_by_time_to_train", "saved_bytes_per_param", "segment_config", "segments",
           "whole_run", "young_interval_s"]

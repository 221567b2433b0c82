"""Where state and traffic land: the ledger of one placement.

``collectives`` prices one collective (bytes each rank sends); ``comms`` the dense axes
(TP/SP, CP ring or Ulysses, PP, DP and ZeRO, tied embeddings) and ``experts`` the MoE
dispatchers over EP/ETP; ``layout`` maps ranks to axes, groups and links; ``stages`` the
layers and parameters of each PP rank, kind by kind; ``splits`` what TP and CP may split
of a model; ``layers`` one layer's bytes as the framework keeps them; ``buffers`` the
buffers a framework allocates for the run (TE's dummy wgrads, cuBLAS workspaces,
Megatron-FSDP's double buffers); ``allocator`` what PyTorch's caching allocator keeps
beyond the tensors and hands back before it fails; ``footprint`` a GPU's whole memory by
cause, at each point of its step; and ``per_gpu`` puts them together - ``place(model,
cfg)`` -> ``Placement``.

May import: the specs, ``ledger.frameworks``, ``ledger.pipeline`` (activations in flight)
and ``ledger.arch``.
"""
from ledger.placement.collectives import coll_bytes
from ledger.placement.comms import (
                                    RING_BLOCKS_PER_STEP,
                                    Comm,
                                    block_layers,
                                    cp_comms,
                                    dp_collective_counts,
                                    dp_comms,
                                    dp_group_comms,
                                    ep_comms,
                                    ep_pass_comms,
                                    forward_passes,
                                    kv_width,
                                    pp_comms,
                                    ring_kv_block_bytes,
                                    tp_comms,
)
from ledger.placement.experts import moe_tokens
from ledger.placement.footprint import (
                                    MOMENTS,
                                    Capacity,
                                    MemoryBreakdown,
                                    RankParts,
                                    buffer_bytes,
                                    cp_buffer_bytes,
                                    logits_bytes,
                                    logits_elements,
                                    peak_memory,
                                    peak_total,
                                    point_bytes,
                                    shard_state,
)
from ledger.placement.layers import (
                                    activation_bytes_per_layer,
                                    largest_unit_params,
                                    layer_activation_bytes,
                                    inflight_kinds,
                                    layer_kinds,
                                    layer_working_bytes,
                                    routed_activation_bytes,
)
from ledger.placement.layout import Layout
from ledger.placement.per_gpu import (
                                    Placement,
                                    dp_traffic,
                                    memory_points,
                                    per_gpu_state,
                                    place,
                                    rank_parts,
                                    resident_state,
)
from ledger.placement.splits import split_problem
from ledger.placement.stages import (
                                    config_split,
                                    head_ranks,
                                    pace,
                                    rank_layers,
                                    rank_stages,
                                    split_layers,
                                    stage_params,
)
from ledger.placement.tuned import (buffer_framework, dequant_bytes, tuned_stage_state,
                                    tuned_trainable)

__all__ = ["activation_bytes_per_layer", "block_layers", "buffer_bytes",
           "buffer_framework", "Capacity", "coll_bytes", "Comm", "config_split",
           "cp_buffer_bytes", "cp_comms", "dequant_bytes", "dp_collective_counts",
           "dp_comms", "dp_group_comms", "dp_traffic", "ep_comms", "ep_pass_comms",
           "forward_passes", "head_ranks", "inflight_kinds", "kv_width",
           "largest_unit_params", "layer_activation_bytes", "layer_kinds",
           "layer_working_bytes", "Layout",
           "logits_bytes", "logits_elements", "memory_points", "MemoryBreakdown",
           "moe_tokens", "MOMENTS", "pace", "peak_memory", "peak_total",
           "per_gpu_state", "place", "Placement", "point_bytes", "pp_comms", "rank_layers",
           "rank_parts", "rank_stages", "RankParts", "resident_state", "routed_activation_bytes",
           "RING_BLOCKS_PER_STEP", "ring_kv_block_bytes", "shard_state", "split_layers",
           "split_problem", "stage_params", "tp_comms", "tuned_stage_state",
           "tuned_trainable"]

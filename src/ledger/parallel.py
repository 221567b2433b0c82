"""The seed's ``ledger.parallel``: parallelism as state placement, under the seed's names.

The names live where their concept does - the config in ``ledger.config``, the ledger of
one placement in ``ledger.placement``, the bubble in ``ledger.pipeline``, the report in
``ledger.render`` - and are gathered here as the seed spells them. This module sits at
the top of the import order (``ledger/__init__``): nothing in the package imports it.

``python -m ledger.parallel`` prints the seed's six placements.
"""
from __future__ import annotations

from ledger.config import MoESpec, ParallelConfig
from ledger.model import ModelSpec
from ledger.pipeline import pp_bubble_fraction
from ledger.placement import (Comm, Placement, activation_bytes_per_layer, coll_bytes,
                              per_gpu_state, place)
from ledger.render import report

__all__ = ["Comm", "MoESpec", "ParallelConfig", "Placement", "activation_bytes_per_layer",
           "coll_bytes", "per_gpu_state", "place", "pp_bubble_fraction", "report",
           "seed_placements"]


def seed_placements() -> list[tuple[ModelSpec, ParallelConfig]]:
    """The seed's six placements: Llama 3 405B three ways, 70B three ways."""
    from ledger.model import llama3_70b, llama3_405b

    m405, m70 = llama3_405b(), llama3_70b()
    seed = dict(framework="ideal")  # the seed's accounting (ledger.frameworks)
    return [
        # Llama 3 405B on 16K GPUs at s = 8192 (Llama 3 paper, Table 5)
        (m405, ParallelConfig(tp=8, cp=1, pp=16, dp=128, zero_stage=1, num_microbatches=16, **seed)),
        # its long-context stage, s = 131072
        (m405.with_seq(131072), ParallelConfig(tp=8, cp=16, pp=16, dp=4, zero_stage=1,
                                               num_microbatches=32, **seed)),
        # the same model on pure ZeRO-3 / FSDP
        (m405, ParallelConfig(dp=16384, zero_stage=3, **seed)),
        # 70B on 1024 GPUs: TP x PP, TP x PP interleaved, HSDP with 64-GPU shard groups
        (m70, ParallelConfig(tp=8, pp=8, dp=16, zero_stage=1, num_microbatches=32, **seed)),
        (m70, ParallelConfig(tp=8, pp=4, dp=32, zero_stage=1, num_microbatches=16, vp=2, **seed)),
        (m70, ParallelConfig(dp=1024, zero_stage=3, hsdp_shard=64, **seed)),
    ]


if __name__ == "__main__":
    for model, cfg in seed_placements():
        report(model, cfg)

"""From bytes to seconds: step time, MFU and HFU of one placement on one system.

``gemm`` times a layer's GEMMs as the frameworks shape them (``tuned``: under a
fine-tune, the weight gradients a frozen base skips, the adapters', QLoRA's
dequantising); ``nccl`` prices one collective call as NCCL's cost model does;
``layer_comms`` a layer's TP, CP and EP seconds; ``layer_time`` one layer's seconds by
cause and direction (``recompute``: what a selective recompute's modules run again); ``dp`` splits data-parallel traffic by
when it can overlap; ``timing`` adds compute, exposed communication and the pipeline
into a ``StepEstimate`` with ``estimate(model, cfg, system)``; ``exposed`` says where its
exposed communication comes from. Its constants are the declared ``Calibration``
(fitted by ``benchmarks/fit.py``, see ``ledger.validation``).

May import: everything below it (specs, frameworks, pipeline, arch, placement).
"""
from ledger.step.dp import dp_split
from ledger.step.gemm import gemm_s
from ledger.step.timing import (
                                DEFAULT,
                                Calibration,
                                Structure,
                                estimate,
                                layout_links,
                                microbatches_for,
                                recompute_flops_per_token,
                                step_times,
                                structure,
)

__all__ = ["Calibration", "DEFAULT", "Structure", "dp_split", "estimate", "gemm_s",
           "layout_links", "microbatches_for", "recompute_flops_per_token", "step_times", "structure"]

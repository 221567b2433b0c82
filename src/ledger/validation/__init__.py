"""Published training runs the time model is held against: the declared calibration sets
(the only rows constants are fitted on) and the prediction rows.

``run`` is one published run as a row; ``published`` holds the runs with their sources,
the one rule that settles a run's open settings, and the fits that ``benchmarks/fit.py``
prints; ``scale`` the runs at 384 to 3,360 A100s (Narayanan's Table 2, BLOOM, MT-NLG);
``memory`` the measured peak memory of published runs, each in its source's own
definition, and the fragmentation fit ``benchmarks/fit_memory.py`` prints (``peak`` its
row; ``memory_mcore`` the Megatron Core MoE report's Table 5 runs among them).
``outcomes`` the runs that ran or went out of memory bounding the allocator's
unreturnable share, the verdict's one other fitted figure.
``bridge`` NVIDIA's Megatron-Bridge published pre-training rows with their sources
(``ledger.render.bridge`` runs them). ``tutorial`` Megatron-Bridge's low-precision training
tutorial, one run in BF16 / FP8 / MXFP8 / NVFP4 (``ledger.render.bridge_tutorial`` runs it).
``mcore_moe`` NVIDIA's Megatron Core MoE report (arXiv 2603.07685v2), Table 11: DeepSeek-V3
and Qwen3-235B on GB300 / GB200 / H100, settings from Table 20 / B.2 / Tables 17-18 by one
rule (``ledger.render.mcore_moe`` runs them); its sec. 4.1 memory figures for DeepSeek-V3
(``MEMORY``, ``ledger.render.mcore_memory`` compares them).

May import: everything below it (up to ``ledger.plan``).
"""
from ledger.validation.published import (
                                         FIT_GRID,
                                         FIT_SOURCE,
                                         SHARE_GRID,
                                         SHARE_SOURCE,
                                         calibration_set,
                                         fit,
                                         fit_gemm_share,
                                         gpt,
                                         predicted,
                                         runs,
                                         settle,
)

__all__ = ["FIT_GRID", "FIT_SOURCE", "SHARE_GRID", "SHARE_SOURCE", "calibration_set", "fit",
           "fit_gemm_share", "gpt", "predicted", "runs", "settle"]

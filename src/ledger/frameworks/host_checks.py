"""What the host launches and how (``ParallelConfig.cuda_graph``, ``ep_backend``,
``overlap_p2p``): the CUDA-graph scopes Megatron captures, the flex dispatcher's kernels,
the pipeline sends' overlap, DeepSeek-V4's indexer loss, the MoE paged stash - checked, and each framework's
default filled in; what hides the
MoE all-to-alls (``moe_overlap_problems``, the one check of the CLI's config and of the
Megatron launch reader; ``ep_overlap_refusal``, the config's and the planner's pins'); then the Megatron offloads' checks
(``ledger.frameworks.offload_checks``)."""
from __future__ import annotations

from ledger.errors import LedgerError
from ledger.frameworks.dsa_loss import check_indexer_loss
from ledger.frameworks.offload_checks import check_offloads
from ledger.frameworks.paged_stash import check_paged_stash
from ledger.frameworks.pipeline_checks import check_pipeline_settings

# what a CUDA graph captures (Megatron --cuda-graph-modules / --cuda-graph-scope,
# megatron/core/transformer/enums.py L61-73 CudaGraphModule at d98e8a64): a block's kernels
# replay without the host launching them; "full_iteration" (--cuda-graph-impl
# full_iteration) captures the whole step
GRAPH_SCOPES = ("attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba",
                "full_iteration")
# Megatron's whole-layer capture (an empty module list, or "full"): every block a layer has,
# the dropless MoE's expert part excepted (the "moe" module is drop-and-pad only:
# megatron/core/transformer/enums.py L68-73 at d98e8a64)
WHOLE_LAYER = ("attn", "mlp", "mamba", "moe_router", "moe_preprocess")
EP_BACKENDS = ("deepep", "hybridep")  # the flex dispatcher's kernels (--moe-flex-dispatcher-backend)


def check_host(cfg, fw) -> None:
    """CUDA-graph scopes, the flex backend and the p2p overlap: checked, defaults filled in."""
    scopes = tuple(cfg.cuda_graph)
    odd = [s for s in scopes if s not in GRAPH_SCOPES]
    if odd:
        raise LedgerError("cuda_graph", f"unknown scope {', '.join(map(repr, odd))}; known: "
                                        f"{', '.join(GRAPH_SCOPES)}")
    object.__setattr__(cfg, "cuda_graph", scopes)
    if cfg.ep_backend is None:
        object.__setattr__(cfg, "ep_backend", "deepep")
    if cfg.ep_backend not in EP_BACKENDS:
        raise LedgerError("ep_backend", f"must be one of {', '.join(EP_BACKENDS)}, got "
                                        f"{cfg.ep_backend!r}")
    if cfg.overlap_p2p is None:
        object.__setattr__(cfg, "overlap_p2p", cfg.schedule in fw.overlap_p2p_schedules)
    for field, problem in moe_overlap_problems(cfg.shared_expert_overlap, None, None,
                                               cfg.ep_overlap, cfg.delay_wgrad):
        raise LedgerError(field, problem)
    check_offloads(cfg, fw)  # ledger.frameworks.offload_checks
    check_pipeline_settings(cfg, fw)  # ledger.frameworks.pipeline_checks
    check_indexer_loss(cfg, fw)  # ledger.frameworks.dsa_loss
    check_paged_stash(cfg)  # ledger.frameworks.paged_stash


def moe_overlap_problems(shared_overlap: bool, shared_experts: bool | None,
                         dispatcher: str | None, ep_overlap: bool, delay_wgrad: bool,
                         recomputed=()) -> list[tuple[str, str]]:
    """(field, reason) for each MoE overlap Megatron-Core refuses, in its flags' spelling
    (TransformerConfig.__post_init__, megatron/core/transformer/transformer_config.py at
    d98e8a64): --moe-shared-expert-overlap under --overlap-moe-expert-parallel-comm
    (L3039-3041 assert), or for a model with shared experts with a dispatcher other than
    alltoall / flex (L1813, L1820-1826 raise; without shared experts the flag does nothing)
    or beside a selective recompute of the shared experts (``recomputed``, L1991-1997);
    --delay-wgrad-compute without --overlap-moe-expert-parallel-comm (L3072-3076 assert).
    ``shared_experts`` / ``dispatcher`` None: not known here (a ParallelConfig has no
    model: ``ledger.placement.experts.check_model`` asks again with it).

    >>> [f for f, _ in moe_overlap_problems(True, True, "allgather", False, True)]
    ['shared_expert_overlap', 'delay_wgrad']
    >>> moe_overlap_problems(True, False, "allgather", False, False)  # no shared experts
    []
    """
    out = []
    if shared_overlap and ep_overlap:
        out.append(("shared_expert_overlap", "--moe-shared-expert-overlap with "
                    "--overlap-moe-expert-parallel-comm (ep_overlap on): Megatron refuses "
                    "both (transformer_config.py L3039-3041 @d98e8a64)"))
    if shared_overlap and shared_experts and dispatcher not in (None, "alltoall", "flex"):
        out.append(("shared_expert_overlap", f"--moe-shared-expert-overlap needs the "
                    f"alltoall or flex dispatcher, got {dispatcher} "
                    f"(transformer_config.py L1820-1826 @d98e8a64)"))
    if shared_overlap and shared_experts and "shared_experts" in tuple(recomputed or ()):
        out.append(("shared_expert_overlap", "--moe-shared-expert-overlap with "
                    "--recompute-modules shared_experts (transformer_config.py L1991-1997 "
                    "@d98e8a64)"))
    if delay_wgrad and not ep_overlap:
        out.append(("delay_wgrad", "--delay-wgrad-compute needs "
                    "--overlap-moe-expert-parallel-comm, got ep_overlap off "
                    "(transformer_config.py L3072-3076 @d98e8a64)"))
    return out


def ep_overlap_refusal(fw, schedule: str | None, pp: int | None, ep: int | None,
                       recompute: str | None, kind: str | None) -> str | None:
    """Why the EP overlap turned on cannot run, or None: the framework has none or not in
    ``schedule`` (Framework.ep_overlap_problem), EP 1, full recompute, the allgather
    dispatcher ``kind`` (Megatron-LM transformer_config.py L3012-3023 @d98e8a64). None: not
    fixed (the planner's unpinned fields; a schedule is checked only with its pp known)."""
    if not fw.ep_overlap_schedules or (schedule is not None and pp is not None):
        problem = fw.ep_overlap_problem(schedule, pp)
        if problem is not None:
            return problem
    if ep == 1:
        return "ep(1) has no all-to-alls to overlap"
    if recompute == "full":
        return "full recompute runs the forward again inside the backward"
    if kind == "allgather":
        return "the allgather dispatcher has no all-to-alls"
    return None

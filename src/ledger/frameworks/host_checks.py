"""What the host launches and how (``ParallelConfig.cuda_graph``, ``ep_backend``,
``overlap_p2p``): the CUDA-graph scopes Megatron captures, the flex dispatcher's kernels,
the pipeline sends' overlap - checked, and each framework's default filled in; then the
Megatron offloads' checks (``ledger.frameworks.offload_checks``)."""
from __future__ import annotations

from ledger.errors import LedgerError
from ledger.frameworks.offload_checks import check_offloads

# what a CUDA graph captures (Megatron --cuda-graph-modules / --cuda-graph-scope,
# megatron/core/transformer/enums.py L61-73 CudaGraphModule at d98e8a64): a block's kernels
# replay without the host launching them; "full_iteration" (--cuda-graph-impl
# full_iteration) captures the whole step
GRAPH_SCOPES = ("attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba",
                "full_iteration")
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
    check_offloads(cfg, fw)  # ledger.frameworks.offload_checks

"""The CLI's CUDA-graph flags beside Megatron's: --cuda-graph-scope's list (``parse_scopes``);
--cuda-graph-impl alone captures whole layers, as Megatron's flag does, and is refused where
it changes no number."""
from __future__ import annotations

import argparse

from ledger.errors import LedgerError
from ledger.frameworks.host_checks import GRAPH_SCOPES, WHOLE_LAYER


def check_graph_impl(a: argparse.Namespace, model) -> None:
    """--cuda-graph-impl typed beside a --cuda-graph-scope it changes nothing of: whose
    graphs matters only where they capture an MoE layer's router (``moe_router``, the
    pre-MLP norm's recompute: ``ledger.frameworks.recompute_modules.pre_mlp_norm_recomputed``)
    - refused, as --ep-sms is without the flex dispatcher. Alone it captures whole layers, as
    Megatron's does (``graph_scopes``). A launch file's is accepted silently."""
    impl, scopes = getattr(a, "cuda_graph_impl", None), getattr(a, "cuda_graph_scope", None)
    launch = getattr(a, "launch", None)
    if impl is None or not scopes or (launch is not None and "cuda_graph_impl" in launch.flags):
        return
    if not model.is_moe:
        raise LedgerError("cuda_graph_impl", f"--cuda-graph-impl {impl}: {model.name} has no "
                                             f"MoE layer, whose router graph alone it changes; "
                                             f"drop it")
    if "moe_router" not in scopes or set(WHOLE_LAYER) <= set(scopes):
        raise LedgerError("cuda_graph_impl", f"--cuda-graph-impl {impl} with --cuda-graph-scope "
                                             f"{','.join(scopes)}: it changes only a router "
                                             f"graph (moe_router among the scopes); drop it")


def graph_scopes(a: argparse.Namespace) -> tuple[str, ...]:
    """The CUDA-graph scopes: --cuda-graph-scope's, else whole layers where --cuda-graph-impl
    is given alone (Megatron's empty --cuda-graph-modules, transformer_config.py L1090
    @d98e8a64: ``WHOLE_LAYER``), else none."""
    if a.cuda_graph_scope:
        return tuple(a.cuda_graph_scope)
    return WHOLE_LAYER if getattr(a, "cuda_graph_impl", None) else ()


def parse_scopes(text: str) -> tuple[str, ...]:
    """A comma-separated list of CUDA-graph scopes."""
    scopes = tuple(w.strip() for w in text.split(",") if w.strip())
    odd = [w for w in scopes if w not in GRAPH_SCOPES]
    if odd or not scopes:
        raise argparse.ArgumentTypeError(f"unknown scope {', '.join(odd) or repr(text)}; "
                                         f"known: {', '.join(GRAPH_SCOPES)}")
    return scopes

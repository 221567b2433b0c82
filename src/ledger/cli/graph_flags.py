"""The CLI's CUDA-graph flags beside Megatron's: --cuda-graph-scope's list (``parse_scopes``);
--cuda-graph-impl alone captures whole layers, as Megatron's flag does, and is refused where
it changes no number; either is refused off Megatron and with full recompute
(``check_graph_run``)."""
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


# the frameworks whose CUDA graphs the flags price (Megatron-Core's --cuda-graph-impl /
# --cuda-graph-modules; DeepSeek's stack is priced on Megatron-Core's facts): torchtitan and
# DeepSpeed launch no such per-layer graphs
GRAPH_FRAMEWORKS = ("megatron", "deepseek")


def check_graph_run(a: argparse.Namespace) -> None:
    """--cuda-graph-impl / --cuda-graph-scope typed where Megatron would not run them: off
    Megatron (``GRAPH_FRAMEWORKS``), and with --recompute full unless the scope is the full
    iteration (Megatron-LM transformer_config.py L2798, L2854-2858 @d98e8a64: under any
    cuda_graph_impl but "none", a recompute granularity other than selective asserts
    cuda_graph_impl == "full_iteration", "full recompute is only supported with full
    iteration CUDA graph."). A launch file's are Megatron's and accepted here."""
    if getattr(a, "launch", None) is not None:
        return
    impl, scopes = getattr(a, "cuda_graph_impl", None), getattr(a, "cuda_graph_scope", None)
    if impl is None and not scopes:
        return
    field, flag = (("cuda_graph_scope", f"--cuda-graph-scope {','.join(scopes)}") if scopes
                   else ("cuda_graph_impl", f"--cuda-graph-impl {impl}"))
    from ledger.frameworks import DEFAULT, get

    fw = get(getattr(a, "framework", None) or DEFAULT)
    if fw.family not in GRAPH_FRAMEWORKS:
        raise LedgerError(field, f"{flag}: {fw.name} launches no Megatron CUDA graphs "
                                 f"(frameworks {', '.join(GRAPH_FRAMEWORKS)}); drop it")
    if getattr(a, "recompute", None) == "full" and "full_iteration" not in (scopes or ()):
        raise LedgerError(field, f"{flag} with --recompute full: Megatron runs full "
                                 f"recompute only under a full-iteration graph "
                                 f"(--cuda-graph-scope full_iteration; transformer_config.py "
                                 f"L2854-2858 @d98e8a64)")


def graph_scopes(a: argparse.Namespace) -> tuple[str, ...]:
    """The CUDA-graph scopes: --cuda-graph-scope's, else whole layers where --cuda-graph-impl
    is given alone (Megatron's empty --cuda-graph-modules: "An empty list means capturing
    the whole Transformer layer", transformer_config.py L1102 @d98e8a64, to which its
    deprecated default "full" (L1090) is normalised, L1104-1105 and arguments.py L263-274:
    ``WHOLE_LAYER``), else none. Megatron's modules capture nothing without an impl (transformer_config.py
    L1087); the CLI's --cuda-graph-scope alone is TE's graphs (step_flags' help)."""
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

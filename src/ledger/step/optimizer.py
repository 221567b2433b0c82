"""Muon's share of the optimizer step (``ledger.optim.muon``): the Newton-Schulz GEMMs each
GPU runs and the gathers they need, in seconds.

Each NS iteration on an m x n matrix (m <= n) is three GEMMs - X X^T (m x m over n), A A
(m x m over m), B X (m x n over m) - priced as every other GEMM (``ledger.step.gemm.gemm_s``,
BF16, the GPU's sustained share at these shapes); the gathers at the link's achieved
bandwidth: TP's over the TP link, the Moonlight form's DP gather over the DP link. The
optimizer step runs after the last backward, so none of it hides under compute.
"""
from __future__ import annotations

from ledger.optim import muon
from ledger.step.gemm import gemm_s


def ns_s(model, cfg, gpu, cal, optimizer: str) -> float:
    """Seconds of the Newton-Schulz iterations one GPU runs per step (the work
    ``ledger.optim.muon.step_flops`` counts, each GEMM at its own shape)."""
    f = muon.form(optimizer)
    owners = f.owner_per_matrix and cfg.zero_stage >= 1
    etp = cfg.tp if getattr(cfg, "etp", None) is None else cfg.etp
    dp = cfg.dp * cfg.cp if owners else 1
    edp = cfg.dp * cfg.cp * cfg.tp / (cfg.ep * etp) if owners else 1
    total = 0.0
    for m in muon.matrices(model):
        a, b = min(m.rows, m.cols), max(m.rows, m.cols)
        one = gemm_s(a, a, b, gpu, cal) + gemm_s(a, a, a, gpu, cal) + gemm_s(a, b, a, gpu, cal)
        total += muon.NS_STEPS * one * m.count / (cfg.ep * edp if m.expert else dp)
    return total / cfg.pp


def muon_s(model, cfg, system, cal, optimizer: str, links: dict) -> float:
    """Seconds Muon adds to the optimizer step on one GPU: Newton-Schulz and its gathers
    (0 for any other optimizer)."""
    if muon.form(optimizer) is None:
        return 0.0
    tp_bytes, dp_bytes = muon.gather_bytes(model, cfg, optimizer)
    gather = tp_bytes / system.bandwidth(links["tp"]) if tp_bytes else 0.0
    if dp_bytes:
        gather += dp_bytes / system.bandwidth(links["dp"])
    return ns_s(model, cfg, system.gpu, cal, optimizer) + gather

"""Muon: the matrices it orthogonalises, their share of the parameters, the Newton-Schulz
FLOPs of a step, and the gathers distributed Muon adds.

Muon (K. Jordan 2024; Moonlight, arXiv:2502.16982 sec. 2) keeps one momentum buffer per
2-D weight and replaces its update by the orthogonalised momentum, NS_5(M): five
Newton-Schulz iterations with the quintic coefficients (a, b, c) = (3.4445, -4.7750,
2.0315). One iteration on X (m x n, m <= n; the transpose otherwise) computes A = X X^T
(2 m^2 n FLOPs), B = b A + c A A (2 m^3) and X = a X + B X (2 m^2 n):
4 m^2 n + 2 m^3 FLOPs, in BF16.

Which parameters: Megatron-LM orthogonalises every 2-D weight but the embedding and the
output head (``emerging_optimizers.py`` L140-147 at d98e8a64, ``layer_wise_optimizer.py``
``is_managed_by_layer_wise_optimizer``); embeddings, output head, norms and biases go to
``--muon-scalar-optimizer`` (Adam by default, L93-98 and arguments.py L2661): AdamW for
the rest, as Moonlight (sec. 2.2) and Kimi K2 (arXiv:2507.20534, MuonClip) keep it. The
matrices are the ones ``ledger.finetune.modules`` lists (transformers' layout: a fused
gate_up or qkv counts as one matrix where transformers fuses it; Megatron splits q, k, v
per query group, ``--muon-no-split-qkv`` off).

How the work and the state are spread (``FORMS``):

- ``megatron`` (``--optimizer muon``; with ``--use-distributed-optimizer``, or the older
  ``dist_muon``, the layer-wise distributed optimizer, arguments.py L1725-1736): under
  ``--muon-tp-mode duplicated`` (the default, L2650) every TP rank gathers a TP-split
  matrix's momentum whole (an all-gather over TP, fp32 main-param dtype) and runs NS on it;
  layer-wise, each matrix has one owning rank in its data-parallel group, which runs NS
  and the update, and the updated parameters are all-gathered as ZeRO-1's are; the
  gradients are all-reduced whole by DDP first (not reduce-scattered).
- ``moonlight`` (Moonlight's Distributed Muon, Algorithm 1, run for Kimi K2): ZeRO-1 state;
  each DP rank gathers the full momentum of every matrix of its shard (an all-gather over
  DP in BF16), runs NS on all of them and keeps its partition.

>>> ns_flops(4096, 4096)   # 5 x (4 + 2) x 4096^3
2061584302080.0
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.errors import LedgerError
from ledger.finetune import modules
from ledger.frameworks import of as framework_of

NS_STEPS = 5  # Megatron --muon-num-ns-steps (arguments.py L2648), Moonlight, Kimi K2
QUINTIC = (3.4445, -4.7750, 2.0315)  # --muon-coefficient-type quintic (L2643)


@dataclass(frozen=True)
class Form:
    """How one implementation spreads Muon over the ranks."""

    name: str
    owner_per_matrix: bool  # under ZeRO: one DP rank runs NS for a matrix; else every one
    tp_gather_bytes: float  # bytes per element of the TP all-gather of a split momentum
    dp_gather_bytes: float  # ... of the DP all-gather of the sharded momentum (ZeRO only)
    grad_all_reduce: bool  # under ZeRO the gradients are all-reduced, not reduce-scattered
    source: str


FORMS = {f.name: f for f in (
    Form("megatron", owner_per_matrix=True, tp_gather_bytes=4.0, dp_gather_bytes=0.0,
         grad_all_reduce=True, source="Megatron-LM d98e8a64 megatron/core/optimizer/emerging_optimizers.py "
                "L177-245 (TensorParallelMuon, tp_mode duplicated: the momentum gathered "
                "over TP, NS on the whole matrix), layer_wise_optimizer.py (one owner per "
                "matrix in the DP group, updated params all-gathered; the class docstring, "
                "L174-180: DDP all-reduces the gradients, every rank holds them whole)"),
    Form("moonlight", owner_per_matrix=False, tp_gather_bytes=4.0, dp_gather_bytes=2.0,
         grad_all_reduce=False, source="Moonlight arXiv:2502.16982 sec. 2.3, Algorithm 1 (Distributed Muon: ZeRO-1 "
                "state, DP gather of the momentum in BF16, NS on the full matrix on every "
                "DP rank, the local partition kept); Kimi K2 arXiv:2507.20534 sec. 2.1"),
)}
OPTIMIZER_FORMS = {"muon": "megatron", "muon-moonlight": "moonlight"}


def form(optimizer: str) -> Form | None:
    """The Muon form an optimizer name runs (None: not Muon)."""
    return FORMS[OPTIMIZER_FORMS[optimizer]] if optimizer in OPTIMIZER_FORMS else None


def ns_flops(rows: int, cols: int, steps: int = NS_STEPS) -> float:
    """FLOPs of ``steps`` quintic Newton-Schulz iterations on one rows x cols matrix."""
    m, n = min(rows, cols), max(rows, cols)
    return float(steps * (4 * m * m * n + 2 * m ** 3))


@dataclass(frozen=True)
class Matrix:
    """One kind of matrix Muon orthogonalises, and how many of them the stack holds."""

    rows: int
    cols: int
    count: int  # over the whole stack (each routed expert its own)
    expert: bool  # a routed expert's: split over ETP and EP
    split: bool  # TP (ETP) splits it; MLA's down projections and routers stay whole


def matrices(model) -> list[Matrix]:
    """Every matrix Muon orthogonalises: each layer's 2-D weights (the router's too), not
    the embedding or the output head."""
    return [Matrix(lin.out_features, lin.in_features, n * lin.experts, lin.experts > 1,
                   lin.split != "none")
            for kind, n in model.kind_counts.items() for lin in modules.layer(model, kind)]


def managed_params(model) -> int:
    """Parameters Muon keeps one momentum for."""
    return sum(m.rows * m.cols * m.count for m in matrices(model))


def managed_share(model) -> float:
    """Their share of the model's parameters; the rest runs the scalar optimizer (Adam)."""
    return managed_params(model) / model.params


def _form(optimizer: str) -> Form:
    f = form(optimizer)
    if f is None:
        raise LedgerError("optimizer", f"{optimizer!r} is not a Muon optimizer")
    return f


def _groups(cfg) -> tuple[float, float]:
    """(dense, expert) data-parallel group sizes: dp x cp, and the experts' dp x cp x tp
    / (ep x etp)."""
    etp = cfg.tp if getattr(cfg, "etp", None) is None else cfg.etp
    return cfg.dp * cfg.cp, cfg.dp * cfg.cp * cfg.tp / (cfg.ep * etp)


def step_flops(model, cfg, optimizer: str = "muon") -> float:
    """Newton-Schulz FLOPs one GPU runs per step, PP stages even: every whole matrix of
    its stage (TP duplicated) and of its E / ep experts, divided among the data-parallel
    ranks where the form has one owner per matrix under ZeRO."""
    f = _form(optimizer)
    owners = f.owner_per_matrix and cfg.zero_stage >= 1
    dp, edp = _groups(cfg) if owners else (1, 1)
    return sum(ns_flops(m.rows, m.cols) * m.count / (cfg.ep * edp if m.expert else dp)
               for m in matrices(model)) / cfg.pp


def gather_bytes(model, cfg, optimizer: str = "muon") -> tuple[float, float]:
    """(over TP, over DP) bytes one GPU receives per step for Muon's gathers, as ring
    all-gathers ((n - 1) / n of the whole): each TP- (ETP-) split matrix's momentum made
    whole (duplicated mode), and under ZeRO the Moonlight form's DP shards of every
    matrix's momentum, or the Megatron form's second half of an all-reduce of the
    gradients (its layer-wise optimizer has DDP all-reduce them where ZeRO-1
    reduce-scatters: one more (n - 1) / n of them, in the framework's gradient dtype)."""
    f = _form(optimizer)
    etp = cfg.tp if getattr(cfg, "etp", None) is None else cfg.etp
    dp, edp = _groups(cfg)
    tp_b = dp_b = 0.0
    for m in matrices(model):
        n = m.rows * m.cols * m.count / (cfg.ep if m.expert else 1) / cfg.pp
        t, g = (etp, edp) if m.expert else (cfg.tp, dp)
        t = t if m.split else 1
        tp_b += f.tp_gather_bytes * n * (t - 1) / t
        if cfg.zero_stage >= 1:
            dp_b += f.dp_gather_bytes * n / t * (g - 1) / g
    if f.grad_all_reduce and cfg.zero_stage >= 1:
        expert = sum(m.rows * m.cols * m.count for m in matrices(model) if m.expert)
        grads = framework_of(cfg).grad_bytes
        dense, dp_e = (model.params - expert) / (cfg.tp * cfg.pp), dp
        dp_b += grads * (dense * (dp_e - 1) / dp_e
                         + expert / (etp * cfg.ep * cfg.pp) * (edp - 1) / max(edp, 1))
    return tp_b, dp_b

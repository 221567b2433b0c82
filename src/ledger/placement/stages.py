"""Pipeline stages as Megatron lays them out: layers and parameters per PP rank.

The seed's ledger splits every byte evenly over pp. The stage that runs out of
memory is not the average one: the first holds the embedding, the last the final
norm and the output layer, and an uneven layer split lands somewhere.
"""
from __future__ import annotations

from itertools import accumulate

from ledger.config import expert_tp
from ledger.model import ModelSpec


def stage_layers(layers: int, stages: int) -> list[int]:
    """Layers per pipeline stage. An uneven split takes layers from the two ends first,
    which carry the embedding and the output layer (Llama 3: 126 = 7 + 14*8 + 7).

    >>> stage_layers(126, 16)
    [7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7]
    """
    base = -(-layers // stages)
    out = [base] * stages
    ends = [i for pair in zip(range(stages), range(stages - 1, -1, -1)) for i in pair]
    for i in ends[: base * stages - layers]:
        out[i] -= 1
    return out


def stage_starts(counts: list[int]) -> list[int]:
    """The first layer of each stage (a running sum, linear in the stage count).

    >>> stage_starts([7, 8, 8, 7])
    [0, 7, 15, 23]
    """
    return [0, *accumulate(counts)][:-1]


def rank_stages(pp: int, vp: int = 1, v_shape: bool = False) -> list[list[int]]:
    """The (virtual) stages each PP rank holds: Megatron's loop puts stage s on rank
    s % pp; the V of ZB-V gives rank r stages r and 2pp-1-r.

    >>> rank_stages(4, 2), rank_stages(4, 2, v_shape=True)[0]
    ([[0, 4], [1, 5], [2, 6], [3, 7]], [0, 7])
    """
    if v_shape:
        return [[r, 2 * pp - 1 - r] for r in range(pp)]
    return [[c * pp + r for c in range(vp)] for r in range(pp)]


def rank_layers(layers: int, pp: int, vp: int = 1, v_shape: bool = False) -> list[int]:
    """Transformer layers each PP rank holds."""
    counts = stage_layers(layers, pp * vp)
    return [sum(counts[s] for s in stages) for stages in rank_stages(pp, vp, v_shape)]


def mtp_params(model: ModelSpec) -> tuple[int, int, int]:
    """(split by TP, replicated, routed) parameters of the multi-token-prediction modules,
    which Megatron-Core builds on the last pipeline stage beside the output head they
    share (megatron/core/models/gpt/gpt_model.py: mtp on the post-process stage): the
    h x 2h projection (column-parallel), three norms and one transformer block each."""
    if not model.mtp_layers:
        return 0, 0, 0
    split, repl, routed = model.layer_params(model.is_moe)
    n, h = model.mtp_layers, model.hidden
    return n * (split + 2 * h * h), n * (repl + 3 * model.norm_size), n * routed


def end_params(model: ModelSpec, cfg) -> tuple[float, float]:
    """Parameters one GPU of the first and of the last stage holds beyond its layers: the
    embedding (vocab-parallel), positions and embedding norm whole; the final norm whole,
    the output layer and its bias split (a tied embedding kept there too when pp > 1)."""
    b = model.breakdown
    first = b["embedding"] / cfg.tp + model.first_stage_params - b["embedding"]
    tied = b["embedding"] if model.tied_embeddings and cfg.pp > 1 else 0
    return first, (b["output"] + tied) / cfg.tp + model.last_stage_params - b["output"]


def stage_params(model: ModelSpec, cfg,
                 counts: list[int] | None = None) -> list[tuple[float, float]]:
    """Per PP rank, the (dense, expert) parameters one of its GPUs holds, laid out as
    Megatron does: embedding with the first stage; final norm and output layer with
    the last (a tied embedding is kept there too when pp > 1), with any MTP modules
    (``mtp_params``). Routed experts split over
    etp x ep (Megatron's expert grid; theoretical_memory_usage.py L205-212).
    ``counts``: layers per stage when another framework splits them (vLLM's split,
    ``ledger.serve``); None: ``stage_layers``."""
    stages = cfg.pp * cfg.vp
    counts = stage_layers(model.layers, stages) if counts is None else counts
    starts = stage_starts(counts)
    kinds = {k: model.layer_params(k) for k in model.kind_counts}  # each kind of layer
    out = []
    for held in rank_stages(cfg.pp, cfg.vp, cfg.schedule == "zb-v"):
        dense = expert = 0.0
        for s in held:
            for i in range(starts[s], starts[s] + counts[s]):
                split, repl, routed = kinds[model.layer_kind(i)]
                dense += split / cfg.tp + repl
                expert += routed / (expert_tp(cfg) * cfg.ep)  # the expert grid
            first, last = end_params(model, cfg)
            if s == 0:
                dense += first
            if s == stages - 1:
                dense += last
                split, repl, routed = mtp_params(model)
                dense += split / cfg.tp + repl
                expert += routed / (expert_tp(cfg) * cfg.ep)
        out.append((dense, expert))
    return out

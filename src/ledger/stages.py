"""Pipeline stages as Megatron lays them out: layers and parameters per PP rank.

The seed's ledger splits every byte evenly over pp. The stage that runs out of
memory is not the average one: the first holds the embedding, the last the final
norm and the output layer, and an uneven layer split lands somewhere.
"""
from __future__ import annotations

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


def stage_params(model: ModelSpec, cfg) -> list[tuple[float, float]]:
    """Per PP rank, the (dense, expert) parameters one of its GPUs holds, laid out as
    Megatron does: embedding on the first stage; final norm and output layer on the
    last (a tied embedding is kept there too when pp > 1); virtual stage j on rank j % pp."""
    counts = stage_layers(model.layers, cfg.pp * cfg.vp)
    out = []
    for rank in range(cfg.pp):
        dense = expert = 0.0
        for chunk in range(cfg.vp):
            v = chunk * cfg.pp + rank
            start = sum(counts[:v])
            for idx in range(start, start + counts[v]):
                split, repl, routed = model.layer_params(idx >= model.first_dense_layers
                                                         and model.is_moe)
                dense += split / cfg.tp + repl
                expert += routed / (cfg.tp * cfg.ep)
        b = model.breakdown
        if rank == 0:
            dense += b["embedding"] / cfg.tp + b["positions"]
        if rank == cfg.pp - 1:
            dense += model.norm_size  # the final norm, replicated across TP
            output = b["output"] or (b["embedding"] if cfg.pp > 1 else 0)
            dense += output / cfg.tp
        out.append((dense, expert))
    return out

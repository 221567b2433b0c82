"""One published training run as the validation holds it, and the helpers its rows share.

A row carries the run's published settings, its measured figure and metric, and which
settings the publication leaves open (set by the one rule, ``ledger.validation.settle``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.config import ParallelConfig
from ledger.model import ModelSpec

MICRO_BATCHES = (1, 2, 4, 8)
RECOMPUTES = ("none", "selective", "full")


@dataclass(frozen=True)
class Run:
    source: str
    label: str
    model: ModelSpec
    cfg: ParallelConfig  # the published settings (open ones at a placeholder)
    gpu: str
    metric: str  # step_time_s | narayanan_tflops_per_gpu | tflops_per_gpu | ...
    measured: float
    role: str = "prediction"  # "calibration" | "prediction"
    tp_overlap: bool = False  # published, unless "tp_overlap" is open
    open: tuple[str, ...] = ()  # settings the publication leaves open: set by THE RULE
    global_batch: int = 0  # sequences per step, when micro_batch is open
    chunk_slots: int = 0  # pipeline chunk slots, when not the layer count (Llama 3)


def gpt(name: str, layers: int, hidden: int, heads: int, vocab: int = 51200,
        seq: int = 2048, tied: bool = True) -> ModelSpec:
    return ModelSpec(name=name, layers=layers, hidden=hidden, heads=heads, vocab=vocab,
                     seq_len=seq, ffn_hidden=4 * hidden, gated_mlp=False,
                     tied_embeddings=tied, qkv_bias=True, out_bias=True, mlp_bias=True,
                     norm="layernorm", learned_positions=seq if tied else 0)

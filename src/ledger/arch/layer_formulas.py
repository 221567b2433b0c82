"""A layer's activation bytes from its shape's numbers alone, no ``ModelSpec`` at hand: the
seed's GPT figure (Korthikanti et al. 2022) and a Llama layer as the project's plain-torch
block keeps it - each a ``ledger.arch.activations.layer_activations`` call on a one-layer
model of that shape.
"""
from __future__ import annotations

from ledger.arch.activations import layer_activations
from ledger.arch.saved_tensors import KORTHIKANTI, PLAIN
from ledger.model import ModelSpec


def activation_bytes_per_layer(*, seq_len: int, micro_batch: int, hidden: int, heads: int,
                               tp: int = 1, cp: int = 1, sequence_parallel: bool = True,
                               flash: bool = True, recompute: str = "none") -> float:
    """The seed's GPT figure (Korthikanti et al. 2022, eqs. 1-4: 34 sbh + 5as^2b in 16-bit,
    /t under TP+SP, 10 sbh unsplit under TP alone, /cp), computed by
    ``layer_activations`` with the ``KORTHIKANTI`` table.

    >>> activation_bytes_per_layer(seq_len=8192, micro_batch=1, hidden=16384, heads=128,
    ...                            tp=8) / 2**20
    544.0
    """
    gpt = ModelSpec(name="gpt", layers=1, hidden=hidden, heads=heads, vocab=1, seq_len=seq_len,
                    ffn_hidden=4 * hidden, gated_mlp=False, norm="layernorm")
    return layer_activations(gpt, micro_batch=micro_batch, tp=tp, cp=cp,
                             sequence_parallel=sequence_parallel, flash=flash,
                             recompute=recompute, act_bytes=2, table=KORTHIKANTI,
                             dropout=0.1).total_bytes  # GPT-3's dropout, as the paper's


def llama_activation_bytes_per_layer(*, seq_len: int, micro_batch: int, hidden: int,
                                     heads: int, kv_heads: int, head_dim: int,
                                     ffn_hidden: int, tp: int = 1, cp: int = 1,
                                     sequence_parallel: bool = True, flash: bool = True,
                                     recompute: str = "none", act_bytes: int = 2) -> float:
    """A Llama layer (RMSNorm, rotary GQA, SwiGLU) as the project's plain-torch block keeps
    it (``ledger.arch.saved_tensors.PLAIN``; measured in tests/test_activations.py).

    >>> llama_activation_bytes_per_layer(seq_len=16, micro_batch=2, hidden=64, heads=4,
    ...     kv_heads=2, head_dim=16, ffn_hidden=128, act_bytes=4)
    140032.0
    """
    llama = ModelSpec(name="llama", layers=1, hidden=hidden, heads=heads, kv_heads=kv_heads,
                      head_dim=head_dim, vocab=1, seq_len=seq_len, ffn_hidden=ffn_hidden)
    return layer_activations(llama, micro_batch=micro_batch, tp=tp, cp=cp,
                             sequence_parallel=sequence_parallel, flash=flash,
                             recompute=recompute, act_bytes=act_bytes, table=PLAIN).total_bytes

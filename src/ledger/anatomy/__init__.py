"""The anatomy of a decoder: what each layer is and what its parts count.

``mixers`` names a layer's kind (``LayerKind``: its sequence mixer, its MLP, its window)
and holds the recurrent mixers' records (Mamba, linear attention, short convolutions) and
a global layer's own attention shape; ``compressed`` DeepSeek-V4's compressed attention
(per-layer CSA / HCA, the grouped output projection) and mHC residual streams; ``counts``
counts a ModelSpec's parameters term by term, split as Megatron-Core splits them, and
gives ``ModelSpec`` its count properties (``ParamCounts``). ``ledger.model.ModelSpec`` is
built on all three.

May import: ``ledger.errors``.
"""
from ledger.anatomy.mixers import (LINEAR_KINDS, MIXERS, MLPS, GlobalAttention, LayerKind,
                                   LinearAttention, Mamba, ShortConv)

__all__ = ["GlobalAttention", "LINEAR_KINDS", "LayerKind", "LinearAttention", "MIXERS", "MLPS",
           "Mamba", "ShortConv"]

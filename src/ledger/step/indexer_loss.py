"""Seconds of DeepSeek-V4's indexer loss in one layer (``ParallelConfig.indexer_loss``;
what Megatron runs, ``ledger.frameworks.dsa_loss``), averaged over the stack as
``ledger.step.gemm.indexer_core_s`` averages the indexer's scores.

Per CSA layer and token, over the compressed entries the loss reads (``loss_keys``: the
top-k a query may read under the sparse loss, every causal entry under the dense one):

- the target, the main attention's scores recomputed at every head over those entries at
  head_dim (its one K=V head: QK^T only, no PV), ``heads`` GEMMs of tokens x keys x d;
- the indexer's backward, run eagerly in the forward: d q_I and d k_I, each a GEMM of the
  indexer's heads x tokens x keys x d_I, as the step prices the scores' own forward.

The backward adds nothing (it scales the saved gradients); without the loss the indexer's
scores have no backward at all (``ledger.step.layer_time`` then prices none). Elementwise
passes (the softmaxes and the KL) are not priced.
"""
from __future__ import annotations

from ledger.anatomy import compressed
from ledger.arch.flops import compressed_keys
from ledger.model import ModelSpec
from ledger.step.gemm import gemm_s


def loss_keys(model: ModelSpec, kind: str) -> float:
    """Mean compressed entries a query's loss reads: capped at the top-k (``sparse``) or
    every causal one (``dense``); 0 without a loss."""
    if kind == "none":
        return 0.0
    cap = model.index_topk if kind == "sparse" else None
    return compressed_keys(model.seq_len, compressed.INDEXED_RATIO, cap)


def indexer_loss_s(model: ModelSpec, cfg, tokens, gpu, cal):
    """Forward seconds of the loss (the target and the indexer's eager backward) of one
    layer, averaged over the stack; 0 for a model without CSA layers or a run without the
    loss."""
    kind = getattr(cfg, "indexer_loss", "none")
    if model.attention != "csa" or not model.index_heads or kind == "none":
        return 0.0
    share = model.compressed.ratios.count(compressed.INDEXED_RATIO) / model.layers
    keys = loss_keys(model, kind)
    target = model.heads / cfg.tp * gemm_s(tokens, keys, model.head_dim, gpu, cal)
    backward = 2 * model.index_heads / cfg.tp * gemm_s(tokens, keys, model.index_head_dim,
                                                       gpu, cal)
    return share * (target + backward)

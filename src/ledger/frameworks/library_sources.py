"""Sources of the buffers the libraries under a framework allocate and of what its
offloads move (issue 31), merged into ``ledger.frameworks.SOURCES`` per framework: each
fact's file and line at a named commit. The sizing rules themselves live in the modules
named (``ledger.placement.graphs``, ...); this table is where a reader finds the facts.
"""
from __future__ import annotations

_GRAPHS = ("Megatron-LM d98e8a64 megatron/core/transformer/cuda_graphs.py L2322-2420 "
           "(_get_sample_arguments: one static input per graphed layer per micro-batch in "
           "flight, consumed buffers reused), L2596-2601 (one micro-batch without PP), "
           "L2684-2686 (_reuse_graph_input_output_buffers from TE 2.7), L1492-1510 (local "
           "impl: static grad outputs reused by signature); TransformerEngine d0067d0d "
           "transformer_engine/pytorch/graph.py L678-681 (one pool, captured in execution "
           "order), L803-818 (one static grad-output buffer per output signature, outside "
           "the pool, kept), L876-910 (static outputs weak-referenced after capture); the "
           "pool's excess over the eager peak is not derivable: ledger.placement.graphs")

LIBRARY_SOURCES = {
    "megatron": {"cuda_graph_buffers": _GRAPHS},
}

"""What CUDA graphs keep on the GPU beyond what the same step keeps eagerly
(``--cuda-graph-impl transformer_engine|local`` with ``--cuda-graph-modules``; the
config's ``cuda_graph`` scopes), as the code at Megatron-LM d98e8a64 and Transformer
Engine d0067d0d builds them.

- Static inputs: each graphed layer gets a static input surface per micro-batch in
  flight. Megatron's ``TECudaGraphHelper._get_sample_arguments`` (megatron/core/
  transformer/cuda_graphs.py L2322-2420) hands a consumed micro-batch's buffers to the
  next forward with the same signature, and without PP captures one micro-batch only
  (L2596-2601). A static input holds exactly the layer input the eager layer saves for
  its backward: priced already among the activations, not again here.
- Static outputs and static gradient inputs live in the shared graph pool, captured in
  execution order (TE graph.py L678-681) and weak-referenced once their backward is
  captured (L876-910, with Megatron's ``_reuse_graph_input_output_buffers`` on from TE
  2.7, cuda_graphs.py L2684-2686): what the eager step allocates at that point, priced
  as activations.
- **Static grad outputs**: the one buffer per output signature the backward graphs read
  their incoming gradient from (TE graph.py L803-818: ``static_grad_outputs_dict`` keyed
  by (shape, dtype, layout)), allocated outside the pool and kept for the run. Eagerly
  that gradient is the next layer's transient; under graphs a persistent copy. A graphed
  layer's output is its hidden states, s b / cp (/ tp under SP) x h in the activation
  dtype, one signature for every graphed scope of a layer (attention, MLP, router
  outputs that need a gradient are that hidden tensor; the router's probabilities are
  not priced). Megatron's own ``local`` implementation reuses its static grad outputs by
  signature the same way (cuda_graphs.py L1492-1510, ``capture_reuse_count``).

Not derivable from the code, so not priced: how much the private pool keeps beyond the
eager peak. The pool's blocks serve graph captures only and the eager allocator's
blocks eager tensors only, so the device holds the larger of each side's peak rather
than the peak of their sum; which is larger depends on the order the allocator serves
requests in, not on a sizing rule. ``full_iteration`` captures the whole step into one
pool: nothing beyond the eager step is priced for it.
"""
from __future__ import annotations

import numpy as np

LAYER_SCOPES = ("attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba")
NAME = "CUDA-graph static grad outputs"


def hidden_bytes(model, cfg) -> float:
    """One micro-batch's hidden states on one GPU: s b / cp x h, / tp under SP."""
    sp = np.where(cfg.sequence_parallel, cfg.tp, 1)  # numbers, or the planner's arrays
    out = model.seq_len * cfg.micro_batch / cfg.cp / sp * model.hidden * cfg.act_bytes
    return out if np.ndim(out) else float(out)


def graph_buffers(model, cfg) -> dict[str, float]:
    """Named bytes CUDA graphs add to one GPU (module docstring): the static grad-output
    buffer of the graphed layers' one output signature; nothing without layer graphs."""
    scopes = tuple(getattr(cfg, "cuda_graph", ()))
    if not any(s in LAYER_SCOPES for s in scopes):
        return {}
    return {NAME: hidden_bytes(model, cfg)}

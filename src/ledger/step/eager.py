"""HBM bytes of the eager (unfused) tensor passes a MoE layer's routed experts run around
their fused activation, for one micro-batch on one GPU, averaged over the stack. The
step's elementwise term (``elementwise_traffic`` x the bytes a layer saves) is fitted on
dense layers whose activations are fused kernels; these passes are the experts' own, each a
separate kernel that reads and writes the routed rows (Megatron-Core's TEGroupedMLP at the
commit Megatron-Bridge v0.3.1 pins, NVIDIA/Megatron-LM@55ac7082):

- the clamped GLU (gpt-oss, ``activation_func_clamp_value``): before the fused weighted
  quick-GEGLU, the fc1 output is split, each half clamped and the halves concatenated again
  in eager PyTorch (fusions/fused_bias_geglu.py L424-431): two clamps (read and write the
  whole) and a cat (read and write it) - 4 passes over the rows x 2F fc1 output. Backward:
  each clamp's gradient reads the gradient and the input and writes (3 passes), the
  chunk's gradient concatenates the halves (2): 5.
- the fc2 bias (``add_bias_linear`` on experts; fc2 is built with ``skip_bias_add=True``,
  moe/experts.py L236-248 @d98e8a64): ``_apply_bias`` (experts.py L609-625) runs, per
  local expert, ``b * p`` (writes rows x h), ``t + b * p`` (reads two, writes one) and
  one ``torch.cat`` of the experts' pieces (reads and writes): 6 passes over rows x h.
  Backward: the bias gradient (g * p, then its sum: 3 passes) and the routing
  probability's (g * b, then its sum over h: 3).

fc1's bias rides its grouped GEMM's epilogue, and its gradient the weight-gradient GEMM's
(Transformer Engine grouped_linear.py L300-330, L419-437 @v2.9): no pass of its own.
Each pass moves the activation dtype's bytes (``cfg.act_bytes``); the passes run at the
GPU's HBM bandwidth (they are memory-bound, one FLOP or so per element).
"""
from __future__ import annotations

from ledger.config import expert_tp
from ledger.frameworks import of as framework_of
from ledger.model import ModelSpec
from ledger.placement import moe_tokens

CLAMP_PASSES = (4, 5)  # forward, backward passes over the fc1 output (rows x 2F)
BIAS_PASSES = (6, 6)  # forward, backward passes over the fc2 output (rows x h)


def expert_pass_bytes(model: ModelSpec, cfg, tokens) -> tuple:
    """(forward, backward) HBM bytes of one layer's eager expert passes, averaged over the
    stack: the routed rows this GPU's experts hold (the dispatcher's tokens x top_k,
    gathered over ETP, as ``ledger.step.gemm`` shapes the grouped GEMMs) times the passes
    above; 0 for a layer without them, and under a framework other than Megatron-Core
    (whose MoE code these counts are not read from)."""
    if framework_of(cfg).family != "megatron" or not model.is_moe \
            or not (model.glu_clamp or model.mlp_bias):
        return 0.0, 0.0
    etp = expert_tp(cfg)
    rows = moe_tokens(cfg, tokens) * model.top_k * etp
    fc1 = (2 if model.gated_mlp else 1) * model.moe_ffn_hidden / etp
    fc2 = model.expert_hidden if model.expert_hidden else model.hidden
    moe_share = sum(n for k, n in model.kind_counts.items() if k.mlp == "moe") / model.layers
    out = []
    for i in (0, 1):
        passes = (CLAMP_PASSES[i] * fc1 if model.glu_clamp and model.gated_mlp else 0.0) \
            + (BIAS_PASSES[i] * fc2 if model.mlp_bias else 0.0)
        out.append(moe_share * rows * passes * cfg.act_bytes)
    return tuple(out)

"""Fine-grained activation offloading: the saved inputs of chosen modules go to the host
during the forward and come back before their backward.

**Megatron-Core** (``--fine-grained-activation-offloading --offload-modules ...``;
Megatron-LM d98e8a64, megatron/core/pipeline_parallel/fine_grained_activation_offload.py
and docs/user-guide/features/fine_grained_activation_offloading.md). Each module offloads
the input it saves for backward (the docs' table of offloadable modules), as an offload
group per module per layer. A group is a region under saved-tensor hooks (``with
manager`` around the module, attention.py L1552-1607): every tensor the module saves
for backward above the size floor goes, which for most modules is its input:

- ``attn_norm``  the input norm's input, h wide (/ tp under SP); skipped where the norm is
                 an ``IdentityOp`` fused into TE's LayerNormLinear (every attention but
                 MLA's, gpt_layer_specs.py L244-336)
- ``qkv_linear`` the QKV projection's input, h wide, as the GEMM keeps it (FP8 under an
                 FP8 recipe)
- ``core_attn``  Q, K and V of the attention kernel, over the TP shard of the heads, and
                 what the kernel saves beside them (an unfused kernel's scores)
- ``attn_proj``  the attention output the projection keeps, heads x v_head_dim / tp
- ``mlp_norm``   the pre-MLP norm's input, h wide; MoE layers only (the dense MLP's norm
                 is fused)
- ``expert_fc1`` the routed experts' input, k tokens per token routed here, h wide
- ``moe_act``    the experts' activation input, k tokens x (2 for a gated MLP) f / etp
- ``fused_group_mlp`` the whole fused grouped MLP: both of the above and fc2's input

What stays: the last group of each name on the chunk that backs up first
(``post_warmup_callback``, L609-639, so the first reload does not stall the backward) -
one layer's offloaded bytes, priced beside the output head through the loss
(``per_gpu.head_activation_bytes``) - and, during a layer's backward, its reloaded
inputs: one layer's offloaded bytes, priced in that layer's backward working set. ``--activation-offload-fraction`` keeps
the first share of each chunk's groups in forward order offloaded (L648-666): priced as
that share of each layer's offloaded bytes. Tensors under ``--min-offloaded-tensor-size``
(1 Mi elements) stay: every input above is larger at a training micro-batch, so none is
dropped. The copies run on side streams (d2h, h2d: L511-520), under the forward and the
backward: one GPU's host-link rows, each direction, once per layer per micro-batch. The
host holds what the micro-batches in flight offloaded (pinned, ``OffloadTensorPool``
L150-260).

**torchtitan**: activation offload exists only in experiments/graph_trainer at
b5bcd76c (``--compile.memory_policy cpu_offload_all``; cpu_offload.py L303-350: every
saved activation of every layer but the last): ``all`` prices that - a layer's whole
saved bytes, the last layer kept.
"""
from __future__ import annotations

from ledger.config import OFFLOAD_MODULES  # noqa: F401  (the choices, checked there)
from ledger.frameworks import gemm_input_bytes
from ledger.placement.experts import moe_tokens


def module_inputs(model, cfg, kind, table) -> dict[str, float]:
    """Bytes one micro-batch of one layer of ``kind`` saves as each module's input, on one
    GPU (module docstring)."""
    e, tp = cfg.act_bytes, cfg.tp
    tokens = model.seq_len * cfg.micro_batch / cfg.cp
    sp = tp if cfg.sequence_parallel else 1
    h, gi = model.hidden, gemm_input_bytes(table, e)
    out = {}
    moe, attends = _kind(model, kind)
    if attends:
        mla = getattr(model, "attention", "mha") == "mla"
        out["attn_norm"] = tokens * h * e / sp * mla
        out["qkv_linear"] = tokens * h * gi / (sp if table.sp_gemm_input_shard else 1)
        k_width, v_heads = (model.q_dim, model.heads) if mla else (model.kv_dim,
                                                                   model.kv_heads)
        out["core_attn"] = tokens * (model.q_dim + k_width + v_heads * model.v_head_dim) \
            / tp * e
        out["attn_proj"] = tokens * model.heads * model.v_head_dim / tp * gi
    if moe:
        out["mlp_norm"] = tokens * h * e / sp
        routed = moe_tokens(cfg, tokens) * model.top_k * cfg.moe.load_factor
        etp = cfg.tp if cfg.etp is None else cfg.etp
        g = 2 if model.gated_mlp else 1
        xh = getattr(model, "expert_hidden", h)  # the latent width under LatentMoE
        out["expert_fc1"] = routed * xh * gi
        out["moe_act"] = routed * g * model.moe_ffn_hidden / etp * e
        out["fused_group_mlp"] = out["expert_fc1"] + out["moe_act"] \
            + routed * model.moe_ffn_hidden / etp * gi
    return out


def _kind(model, kind) -> tuple[bool, bool]:
    """(MoE?, attends?) of a ``LayerKind``, an (MoE?, window) pair or None (the model's
    typical layer)."""
    if kind is None:
        return bool(getattr(model, "is_moe", False)), True
    if isinstance(kind, tuple):
        return bool(kind[0]), True
    return bool(kind.moe), kind.mixer == "attention"


# each group of modules offloads at most what the ledger prices where those tensors sit
# (ledger.arch.activations.LayerActivations): the norms' inputs and outputs (the QKV
# GEMM's input among them), the attention's linear-in-s tensors and scores, the experts'
# tensors
GROUPS = {("attn_norm", "mlp_norm", "qkv_linear"): ("norms_bytes",),
          ("core_attn", "attn_proj"): ("attention_bytes", "scores_bytes"),
          ("expert_fc1", "moe_act", "fused_group_mlp"): ("experts_bytes",)}


def offloaded_bytes(model, cfg, kind, table, acts) -> float:
    """Of one layer's saved bytes per micro-batch (``acts``, its ``LayerActivations``),
    what the config's offload moves to the host: each group of modules (``GROUPS``) at
    most what the layer keeps where their tensors are priced."""
    mods = tuple(getattr(cfg, "offload_modules", ()) or ())
    if not mods:
        return 0.0 * acts.total_bytes
    share = getattr(cfg, "activation_offload_fraction", 1.0)
    if "all" in mods:
        return acts.total_bytes * share
    inputs = module_inputs(model, cfg, kind, table)
    if "core_attn" in inputs:  # the group's hooks take all the kernel saves: unfused, the scores
        inputs["core_attn"] += acts.scores_bytes
    return share * sum(min(sum(getattr(acts, f) for f in fields),
                           sum(inputs.get(m, 0.0) for m in names if m in mods))
                       for names, fields in GROUPS.items())

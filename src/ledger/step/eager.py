"""HBM bytes of the eager (unfused) tensor passes Megatron-Core runs where a fused kernel
does not take the model's variant: a MoE layer's routed experts around their fused
activation, and the rotary embedding under YaRN - for one micro-batch on one GPU, averaged
over the stack. The step's elementwise term (``elementwise_traffic`` x the bytes a layer
saves) is fitted on dense layers whose activations are fused kernels; these passes are
each a separate kernel that reads and writes the routed rows, or q and k (Megatron-Core's
TEGroupedMLP at the commit Megatron-Bridge v0.3.1 pins, NVIDIA/Megatron-LM@55ac7082):

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
  probability's (g * b, then its sum over h: 3). Under the flex dispatcher the
  probabilities are fp32 (DeepEP and HybridEP take only fp32 probs and upcast bf16 ones:
  token_dispatcher.py L1033-1039, L1178-1184 @d7288711, the same text at 0d8e0714,
  b0cc2706, d0b3b775 and d98e8a64 - there L1135-1141 and L1312-1318), so ``b * p``
  promotes the chain to fp32: the product, the sum and the cat move 4 bytes an element and ``.to`` casts back (read 4, write 2) - 6 x 4 + 2
  x 2 = 28 bytes an element forward; backward the cast's gradient up (2 + 4) and the
  add's down to t (4 + 2) besides the 6 fp32 passes: 36 (``bias_bytes``).

- the rotary embedding under YaRN (gpt-oss, ``ModelSpec.rope_mscale``): Megatron-Core hands
  TE's fused RoPE only an mscale of 1 and otherwise runs its eager one on q and on k
  (models/common/embeddings/rope_utils.py L279-284 @ d7288711, the same at 55ac7082 and
  0d8e0714; attention.py L1104-1125 passes YaRN's factor as mscale): ``_apply_rotary_pos_emb_
  bshd`` (L92-126) runs t * cos, the rotate-half's negation (half) and cat, * sin, the add
  and the final cat - 6.5 reads and 5.5 writes of q and k, 12 passes; backward, g * cos and
  g * sin (4), the negation's gradient (1), the chunk's cat (2), the two paths' sum (3)
  and the slice's zero-filled copy (slice_backward: zeros, then copy_, 3): 13.

fc1's bias rides its grouped GEMM's epilogue, and its gradient the weight-gradient GEMM's
(Transformer Engine grouped_linear.py L300-330, L419-437 @v2.9): no pass of its own.
Each pass moves the activation dtype's bytes (``cfg.act_bytes``); the passes run at the
GPU's HBM bandwidth (they are memory-bound, one FLOP or so per element).

**The dispatcher's permutations** (``dispatch_pass_bytes``). Megatron-Core's ``alltoall``
dispatcher moves the routed rows through four separate kernels a layer (TE's fused
permutation kernels under ``moe_permute_fusion``, which the recipes set): permute the local
tokens into rows x h before the all-to-all (token_dispatcher.py L667-680 @d98e8a64), sort
the received rows by local expert (L780-788, when a GPU holds more than one), unsort them
after the experts (L815-822) and unpermute them, weighting and summing each token's k
rows, after the combine (L891-899): read and write the rows three times and, unpermuting,
read the rows and write the tokens - 7 + 1/k passes over rows x h forward; each kernel's
gradient is its inverse, so as many backward. DeepEP's flex dispatcher hands the experts
a token once per GPU and runs one permute into rows and one unpermute back (L1424-1466):
2 + 2 passes (the unpermute's write counted at the rows', an upper bound). HybridEP
("permute tokens for experts in single step", L1001-1014) fuses them into its dispatch
and combine kernels only under ``moe_permute_fusion_into_hybridep`` (off by default,
transformer_config.py L904; passed as ``fused``, token_dispatcher.py L1163, L1194; the flag
came with Megatron-LM #4089, 8c5cf05e, first in core_v0.18.0). Off, Megatron still calls
``dispatch_with_permute`` / ``combine_with_unpermute`` (fused_a2a.py L425-434, L489-493,
their inverses in the backward L454-459, L507-513), whose executor runs a standalone permute
kernel after the dispatch kernel and a standalone unpermute before the combine kernel
(deepseek-ai/DeepEP hybrid-ep 94a9f8f6 csrc/hybrid_ep/executor/executor.cu L312-337,
L392-404; the same split since f4f2c10, 2025-10-09, before any fused path): the permute
reads each received token out of the dispatch buffer and writes one BF16 row per local
expert it picks (and its fp32 prob), the unpermute reads the rows and writes the token's
sum (extension/permute.cu L102-155, L319-390; before DeepEP #625, 17cfb81, the permute read
the token once per row: permute.cu L306-351 @ d28bd67) - DeepEP's 2 + 2 passes, priced alike
(``hybridep_permute_fused``; on, none). The allgather dispatcher's own permutations are not
priced.

**The fused grouped MLP** (``fused_grouped_mlp``). With Megatron-Core's
``use_transformer_engine_op_fuser`` the routed experts are one Transformer Engine op
sequence, GroupedLinear -> scaled GLU (or weighted squared ReLU) -> GroupedLinear, the
probabilities and the clamp inside the activation op and fc2's bias scaled by them inside
fc2 (moe/experts.py L286-291, L382-450, L624-638 @d98e8a64; it requires an expert TP
group of 1, L397-398). Transformer Engine replaces that triple by its CuTe DSL kernels
when ``NVTE_CUTEDSL_FUSED_GROUPED_MLP`` is set, the GPU is sm_10x and the recipe MXFP8 or
NVFP4 (ops/fused/grouped_mlp.py L946-950, L842 @d0067d0d; SwiGLU and the clamped quick
GEGLU, L848): fc1's grouped GEMM writes the activation's input (kept for the backward)
and its output already quantized for fc2 from its epilogue (L1530-1567), fc2's bias goes
into its GEMM (L352-364), and the backward's fc2 dgrad GEMM runs the activation's
gradient in its epilogue from that saved input (L2064-2081). The activation then has no
kernel of its own: the routed experts' activation bytes carry no elementwise traffic
(their write is the GEMM's, hidden under its math as every GEMM's output is here) and
none of the eager passes above run. The bytes kept are the same tensors (fc1's input,
the activation's input, fc2's quantized input, the probabilities: L1749, L1793), so the
memory model does not change.
"""
from __future__ import annotations

import numpy as np

from ledger.config import expert_tp
from ledger.frameworks import of as framework_of
from ledger.model import ModelSpec
from ledger.placement import moe_tokens

CLAMP_PASSES = (4, 5)  # forward, backward passes over the fc1 output (rows x 2F)
ROPE_PASSES = (12, 13)  # forward, backward passes over q and k (unfused RoPE under YaRN)
BIAS_PASSES = (6, 6)  # forward, backward passes over the fc2 output (rows x h)
# The recipes Transformer Engine's fusion pass takes the grouped MLP in, by TE commit: at
# 4220403e (2.16, Megatron-Bridge v0.5.0's uv.lock) MXFP8 alone (ops/_common.py L245; the one
# class ForwardGroupedMLP_CuTeGEMMSwiGLU_MXFP8, ops/fused/forward_grouped_mlp.py L48); NVFP4
# from TE 920a7db1 (#3048, 2026-06-01, first in v2.17), cherry-picked onto 2.16 as ebb8595d:
# b9d690e0 (v0.5.1) ops/_common.py L438-442, 4329ff84 (2.17.1, v0.6.0) ops/fused/
# grouped_mlp.py L707-711, d0067d0d L842 (the megatron record's TE) - NVFP4 only with its
# random Hadamard transform on (``disable_rht`` off, the recipe's default). Under a TE
# without the recipe the experts run GroupedLinear, one launch per expert (ledger.step.host).
FUSED_MLP_RECIPES_AT = {"4220403e": ("mxfp8",), "b9d690e0": ("mxfp8", "nvfp4"),
                        "4329ff84": ("mxfp8", "nvfp4"), "d0067d0d": ("mxfp8", "nvfp4")}
FUSED_MLP_RECIPES = FUSED_MLP_RECIPES_AT["d0067d0d"]  # the framework record's TE (CLI runs)


def fused_grouped_mlp(model: ModelSpec, cfg, gpu) -> bool:
    """Whether the routed experts run Transformer Engine's fused grouped MLP (the module
    docstring): ``cfg.fused_grouped_mlp`` under Megatron-Core, a MoE model with an expert
    TP group (ETP) of 1, the MXFP8 or NVFP4 recipe and an sm_10x GPU (B200, B300, GB200,
    GB300); an array of them on the planner's grid."""
    if not getattr(cfg, "fused_grouped_mlp", False) or not getattr(model, "is_moe", False):
        return False
    fw = framework_of(cfg)
    rec = getattr(fw, "fp8", None)
    cap = getattr(gpu, "cuda_capability", None)
    if not (fw.family == "megatron" and rec is not None and rec.name in FUSED_MLP_RECIPES
            and cap is not None and cap[0] == 10):
        return False
    # an expert TP group of 1 (experts.py L210: tp_group is expt_tp; the planner's grid:
    # element by element)
    return np.asarray(expert_tp(cfg)) == 1


# cudnn-frontend#256 (grouped_gemm_dglu_wrapper_sm100 10x slower from v1.23.0 to v1.24.0,
# persisting in v1.25.0): the fix's own benchmark at the shape on SM100, PR #322
# (NVIDIA/cudnn-frontend, 2026-06-23): generate_dbias=true 1362.768 us before, 155.632 us
# after (139.392 / 138.960 us without dbias: the slowdown is the dbias path's)
DGLU_DBIAS_BEFORE_S, DGLU_DBIAS_AFTER_S = 1362.768e-6, 155.632e-6


def dglu_regression_s(model: ModelSpec, cfg, gpu, routed) -> float:
    """Seconds the regressed fused dGLU kernel adds to one layer's backward (a container
    whose table line names cudnn-frontend#256: ``cfg.dglu_dbias_regression``): under the
    fused grouped MLP (``fused_grouped_mlp``) the backward's fc2 input-gradient grouped
    GEMM runs dGLU, and dbias where fc1 has a bias (grouped_mlp.py L2072 @d0067d0d:
    generate_dbias = fc1's bias), in one kernel; regressed, it takes PR #322's before /
    after ratio of its time. Its time here is fc2's forward GEMM's, the same FLOPs: fc2's
    share of the routed experts' forward GEMM FLOPs ``routed`` (F of a gated 2F + F)."""
    if not (getattr(cfg, "dglu_dbias_regression", False) and model.mlp_bias):
        return 0.0
    fc2_share = 1 / 3 if model.gated_mlp else 1 / 2
    slower = DGLU_DBIAS_BEFORE_S / DGLU_DBIAS_AFTER_S - 1
    return fused_grouped_mlp(model, cfg, gpu) * slower * fc2_share * routed


def dispatch_pass_bytes(model: ModelSpec, cfg, tokens) -> tuple:
    """(forward, backward) HBM bytes of one layer's dispatcher permutations (the module
    docstring), averaged over the stack: the routed rows this GPU's experts hold, as
    ``expert_pass_bytes`` counts them, x h x the passes its dispatcher runs; 0 under
    HybridEP with its permutation fused (``hybridep_permute_fused``), the allgather
    dispatcher, another framework or a dense model."""
    from ledger.config import dispatcher
    from ledger.step.ep_sms import ep_backend

    if framework_of(cfg).family != "megatron" or not model.is_moe:
        return 0.0, 0.0
    kind, backend = dispatcher(cfg), ep_backend(cfg)
    if kind == "alltoall":
        local = model.num_experts / cfg.ep > 1  # the sort by local expert, and back
        passes = 2 + 4 * local + 1 + 1 / model.top_k
    elif kind == "flex" and (backend == "deepep" or not hybridep_permute_fused(cfg)):
        passes = 4.0  # DeepEP's permute / unpermute, or HybridEP's standalone kernels
    else:
        return 0.0, 0.0
    rows = moe_tokens(cfg, tokens) * model.top_k * expert_tp(cfg)
    width = model.expert_hidden if model.expert_hidden else model.hidden
    moe_share = model.mlp_share("moe")
    one = moe_share * rows * width * passes * cfg.act_bytes
    return one, one


def hybridep_permute_fused(cfg) -> bool:
    """Whether HybridEP permutes inside its dispatch and combine kernels: Megatron-Core's
    ``moe_permute_fusion_into_hybridep`` (``ParallelConfig.hybridep_permute_fusion``,
    default off: the module docstring); False under another backend."""
    from ledger.step.ep_sms import ep_backend

    return ep_backend(cfg) == "hybridep" and bool(getattr(cfg, "hybridep_permute_fusion",
                                                          False))


def probs_bytes(cfg) -> int:
    """Bytes of one routing probability as the experts receive it: fp32 under Megatron's
    flex dispatcher (DeepEP, HybridEP: the module docstring), else the activation dtype's
    (the router's own dtype, moe_router_dtype None; fp32 routers elsewhere are not read)."""
    from ledger.config import dispatcher

    return 4 if dispatcher(cfg) == "flex" else cfg.act_bytes


def bias_bytes(cfg) -> tuple:
    """(forward, backward) HBM bytes per element of the fc2 output that ``_apply_bias``
    moves (the module docstring): ``BIAS_PASSES`` in the activation dtype, and where the
    probabilities are wider (``probs_bytes``) the chain in theirs plus the casts."""
    act, wide = cfg.act_bytes, max(probs_bytes(cfg), cfg.act_bytes)
    if wide == act:
        return BIAS_PASSES[0] * act, BIAS_PASSES[1] * act
    return BIAS_PASSES[0] * wide + 2 * act, BIAS_PASSES[1] * wide + 2 * (act + wide)


def expert_pass_bytes(model: ModelSpec, cfg, tokens, gpu=None) -> tuple:
    """(forward, backward) HBM bytes of one layer's eager expert passes, averaged over the
    stack: the routed rows this GPU's experts hold (the dispatcher's tokens x top_k,
    gathered over ETP, as ``ledger.step.gemm`` shapes the grouped GEMMs) times the passes
    above; 0 for a layer without them, and under a framework other than Megatron-Core
    (whose MoE code these counts are not read from), and under the fused grouped MLP on
    ``gpu`` (``fused_grouped_mlp``)."""
    if framework_of(cfg).family != "megatron" or not model.is_moe \
            or not (model.glu_clamp or model.mlp_bias):
        return 0.0, 0.0
    kept = 1.0 - fused_grouped_mlp(model, cfg, gpu)  # 0 where the fused MLP runs
    etp = expert_tp(cfg)
    rows = moe_tokens(cfg, tokens) * model.top_k * etp
    fc1 = (2 if model.gated_mlp else 1) * model.moe_ffn_hidden / etp
    fc2 = model.expert_hidden if model.expert_hidden else model.hidden
    moe_share = model.mlp_share("moe")
    bias = bias_bytes(cfg)
    out = []
    for i in (0, 1):
        clamp = CLAMP_PASSES[i] * fc1 * cfg.act_bytes \
            if model.glu_clamp and model.gated_mlp else 0.0
        out.append(kept * moe_share * rows * (clamp + (bias[i] * fc2 if model.mlp_bias else 0.0)))
    return tuple(out)


def rope_pass_bytes(model: ModelSpec, cfg, tokens) -> tuple:
    """(forward, backward) HBM bytes of one layer's eager rotary embedding, averaged over the
    stack: q and k of this GPU's heads (``tokens`` x (heads + kv_heads) / TP x head_dim) times
    ``ROPE_PASSES``, in the layers that attend; 0 where Megatron-Core runs TE's fused RoPE
    (an mscale of 1), under another framework, or without rotary positions."""
    if framework_of(cfg).family != "megatron" or model.rope_mscale == 1.0 \
            or model.learned_positions or model.attention != "mha":
        return 0.0, 0.0
    width = (model.heads + (model.kv_heads or model.heads)) / cfg.tp * model.head_dim
    share = model.attention_layers / model.layers
    return tuple(share * tokens * width * n * cfg.act_bytes for n in ROPE_PASSES)

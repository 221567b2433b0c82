"""What each implementation of a decoder layer keeps for backward, as data: one
``SavedTensors`` table per implementation (Korthikanti's GPT layer, Megatron-Core with
Transformer Engine, torchtitan's torch modules at HEAD and at the commits of its published
measurements, transformers' modules, the project's own plain block), each with its
source, and the selective-recompute policy each runs. ``ledger.arch.activations`` turns a
table into bytes."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ledger.errors import LedgerError
from ledger.frameworks import saved_inputs


@dataclass(frozen=True, kw_only=True)
class SavedTensors:
    """What one implementation of a decoder layer keeps for backward.

    Dtype fields take "act" (the activation dtype), "fp32" or "" (not kept).
    """

    name: str
    source: str  # where each fact below was read or measured
    gpt_shape: bool = False  # price every model as Korthikanti's GPT layer (MHA, 4h GELU MLP)
    # -- each norm, per token: its input, x_hat = x*rstd, the per-token statistic --------
    norm_input: str = "act"  # "fp32": the input is upcast and the fp32 copy is what is kept
    norm_xhat: str = ""  # x_hat kept apart from the output (an unfused weight multiply)
    norm_stat: str = "fp32"  # rstd (LayerNorm adds the mean: 2 statistics)
    sp_gemm_input_shard: bool = True  # under SP a column-parallel GEMM keeps the sequence
    #   shard of its input and re-gathers it in backward (Megatron/TE); else the gathered copy
    residual_dropout_masks: int = 0  # h-wide dropout sites per layer (GPT: after attention
    #   and after the MLP), each a 1-byte mask when dropout > 0 (CUDA native_dropout)
    # -- attention ---------------------------------------------------------------------
    flash_kv_repeated: bool = False  # the fused kernel reads K, V expanded to all heads
    flash_lse: str = "fp32"  # log-sum-exp per head and token
    eager_probs: str = "act"  # softmax output per score; "fp32+act": fp32 softmax cast back
    eager_dropout: bool = False  # attention dropout (when > 0) on materialised scores: a
    #   1-byte mask + the dropped probs per score; fused kernels keep an RNG state only
    eager_mask_bytes: int = 0  # a causal mask the layer builds itself, per (query, key)
    eager_softcap: str = "act"  # logit soft-capping (Gemma 2) keeps tanh's output per score
    scores_over_window: bool = True  # a sliding window bounds the kept scores
    mla_flash_copies: bool = False  # MLA under a fused kernel: v is a view of the whole
    #   up-projection (k_nope's columns stay), and the head-major query makes the output
    #   head-major, so the output projection reads a contiguous copy
    # -- MLP, per token, in units of the MLP width f ------------------------------------
    mlp_gated_f: int = 4  # SwiGLU: tensors of width f kept (gate+up counted as 2)
    mlp_plain_f: int = 2  # GELU: fc1 output and activation output
    # -- MoE ---------------------------------------------------------------------------
    router_probs: str = "fp32"  # softmax/sigmoid scores over all experts, per token
    router_index_bytes: int = 8  # top-k expert indices, per token and k
    router_input_fp32: bool = False  # the router GEMM reads an fp32 copy of its input
    routing_map_bytes_per_expert: float = 0  # per token and expert (TE's row_id_map; the flex
    # dispatcher builds a share of it, ledger.placement.ep_buffers.row_id_map_share)
    routed_input_copy: bool = True  # the gathered/permuted copy of each routed token
    routed_output_copies: int = 2  # h-wide expert outputs kept (prob multiply, scatter-add)
    routed_output: str = "act"  # their dtype (torchtitan scores an fp32 copy)
    routed_prob: str = "fp32"  # the gate weight of each routed token
    routed_index_bytes: int = 16  # per routed token (token and slot positions)
    # -- FP8 (``ledger.frameworks.fp8``): a GEMM input saved in FP8 (+ scales), 0: the act dtype; the
    #   attention output kept once in its own format (0: flash's copy + the projection's)
    fp8_input_bytes: float = 0.0
    attn_out_bytes: float = 0.0
    flash_qkv_bytes: float = 0.0  # the fused kernel's q, k, v in FP8 (FP8 attention; 0: act)
    expert_swiglu_recompute: bool = False  # experts keep the SwiGLU input (in FP8) only
    # -- selective recompute --------------------------------------------------------------
    selective: str = "attention-core"  # "attention-core": the materialised scores are
    #   recomputed (Korthikanti et al. 2022 sec. 5, Megatron --recompute-granularity
    #   selective); "op": torchtitan's per-op policy - each checkpointed block keeps its
    #   input, the outputs of its 1st, 3rd, 5th ... matmul, the attention kernel's output
    #   and log-sum-exp and the SP reduce-scatters' outputs, and recomputes the rest
    sac_router_mm: bool = True  # op policy: the router GEMM counts as a matmul (HF); False:
    #   always recomputed and not counted (torchtitan HEAD, or no MoE in its era)
    sac_expert_mms: int = 2  # op policy: matmuls per routed expert (HF: gate_up, down);
    #   0: grouped GEMMs the policy neither counts nor saves (torchtitan)


# ---- the tables ---------------------------------------------------------------------
KORTHIKANTI = SavedTensors(
    name="korthikanti", gpt_shape=True, norm_stat="", residual_dropout_masks=2,
    flash_kv_repeated=True, flash_lse="", eager_dropout=True,
    source="Korthikanti et al. 2022, 'Reducing Activation Recomputation in Large Transformer "
           "Models', sec. 4.1-4.2, eqs. 1-4: a GPT layer in 16-bit keeps per token the two "
           "LayerNorm inputs and outputs (4sbh), Q, K, V and the projection input (8sbh), the "
           "GELU input and output (16sbh at 4h), two 1-byte dropout masks (2sbh); per score "
           "the softmax output, its dropout mask and the dropped output (5as^2b). SP stores "
           "the sequence shard of the LayerNorm outputs and re-gathers them (sec. 4.2.2).")

MEGATRON = SavedTensors(
    name="megatron", mlp_gated_f=3, routing_map_bytes_per_expert=8, routed_output_copies=0,
    routed_index_bytes=0, residual_dropout_masks=2, eager_dropout=True,
    source="Megatron-LM d98e8a64 with TransformerEngine d0067d0d: TELayerNormColumnParallel"
           "Linear keeps the norm input, ln_out (under SP the local shard, re-gathered in "
           "backward) and rsigma/mu (TE pytorch/module/layernorm_linear.py:469-475,526-536,"
           "787); fused attention keeps q, k, v (GQA-native), out and the fp32 softmax_lse "
           "(TE attention/dot_product_attention/backends.py:1655-1664,1776), under ring CP the "
           "local q, kv chunk, out and lse only (context_parallel.py:2094-2142); SwiGLU keeps "
           "fc1's output (megatron/core/fusions/fused_bias_swiglu.py:235, mlp.py:309) and fc2 "
           "its input; MoE: fp32 router softmax and int64 top-k (core/transformer/moe/"
           "moe_utils.py:726,902), TE's int32 row_id_map of (tokens, 2E+1) (TE pytorch/"
           "permutation.py:447-450,519; its extra column, 4 B per token, is not counted), the "
           "permuted tokens fc1 reads, probs applied inside the weighted SwiGLU (fused_bias_"
           "swiglu.py:270, moe/experts.py:966) so unpermute keeps no outputs (permutation.py:"
           "808). Dropout (Megatron's default 0.1; the Llama/Mixtral recipes set 0): the "
           "bias-dropout-add after attention and after the MLP keeps a 1-byte mask each "
           "(transformer_layer.py L753-755, L1104-1106; fused_bias_dropout.py L11-59; ATen "
           "native_dropout allocates a bool mask on CUDA); TE's fused attention applies "
           "attention dropout in-kernel from an RNG state, the unfused path masks its "
           "probabilities (dot_product_attention.py L114, L217-220).")

TORCH = SavedTensors(
    name="torch", sp_gemm_input_shard=False, routed_output_copies=1, routed_output="fp32",
    routed_index_bytes=8, selective="op", sac_router_mm=False, sac_expert_mms=0,
    source="torchtitan b5bcd76c on torch 2.13 (CUDA): nn.RMSNorm (models/common/nn_modules.py:"
           "134) runs aten::_fused_rms_norm, which keeps the input and the fp32 rstd (torch/"
           "_decomp/decompositions.py:1946); F.scaled_dot_product_attention with enable_gqa "
           "(models/common/attention.py:418-424) keeps q, k, v at their own heads, out and the "
           "fp32 logsumexp; FeedForward w2(silu(w1 x) * w3 x) (models/common/feed_forward.py:"
           "53-54) keeps gate, silu(gate), up, product; DTensor SP all-gathers the norm output "
           "before wq/w1, which keep the gathered copy (measured per rank under "
           "torchtitan's plan: ledger.verify.tp_saved). MoE (read, not measured): fp32 router "
           "scores, int64 top-k (models/common/moe.py:294-317); grouped experts keep the "
           "routed input, w1 out, silu, w3 out, product (:94-108); combine scores an fp32 copy "
           "of each routed output with the fp32 score, scatter_add keeps the int64 index "
           "(models/common/token_dispatcher.py:156-168, ops/scatter_add.py:42). On CPU the "
           "composite rms_norm keeps an fp32 x_hat and upcast input instead (measured in "
           "tests/test_activations.py). Selective AC (torchtitan/distributed/"
           "activation_checkpoint.py L31-94, L249-273): outputs of functorch's compute-"
           "intensive ops (mm, SDPA, _scaled_mm), aten.linear, max, topk and the "
           "reduce-scatter / all-to-all collectives are saved, every second mm or linear "
           "recomputed, the router's GEMM always recomputed (L196-198, L260-266); grouped "
           "expert GEMMs are not in the list.")

HF = SavedTensors(
    name="hf", norm_input="fp32", norm_xhat="act", sp_gemm_input_shard=False,
    eager_probs="fp32+act", scores_over_window=False, mla_flash_copies=True,
    eager_dropout=True, selective="op",
    source="transformers 5.23.0, measured with saved-tensor hooks (tests/test_hf_activations"
           ".py): LlamaRMSNorm upcasts to fp32 and keeps that copy, the fp32 rstd and the cast-"
           "back x_hat (models/llama/modeling_llama.py:61-66), nn.LayerNorm the input and mean/"
           "rstd (fp32 on CUDA; CPU keeps them in the input dtype); sdpa keeps q, k, v (enable_gqa "
           "when no mask: integrations/sdpa_attention.py use_gqa_in_sdpa), out, fp32 lse; "
           "eager keeps q, repeat_kv'd k and v, the fp32 softmax and its cast, the contiguous "
           "output copy (modeling_llama.py:180-202) and builds full s x s scores even with a "
           "sliding window (the window is an additive mask), with soft-capping tanh's output "
           "too (models/gemma2/modeling_gemma2.py:195-198); LlamaMLP keeps gate, silu(gate), "
           "up, product (:164); MoE experts loop (models/mixtral/modeling_mixtral.py:68-91) "
           "keeps per routed token the gathered input, gate_up (2f), silu, product, the down "
           "output and the weighted output index_add_ keeps, an fp32 gate weight and the int64 "
           "(slot, token) pair from torch.where; the router keeps fp32 softmax and int64 top-k; "
           "DeepSeek-V3's MLA under sdpa keeps value_states, a view of kv_b_proj's output, "
           "and o_proj's contiguous copy of the head-major output (modeling_deepseek_v3.py:"
           "418,463,480). Under torchtitan's op policy (applied per decoder layer by "
           "ledger.verify.steps) q/k/v/o_proj, the router and each expert's gate_up and "
           "down run as aten.mm (nn.functional.linear on 2-D rows), counted in that order.")

PLAIN = SavedTensors(
    name="plain", norm_xhat="act", norm_stat="act", eager_mask_bytes=1,
    source="ledger.verify.tiny.Block, the project's Llama block written op by op: its RMSNorm "
           "keeps x, rsqrt (activation dtype), x*rsqrt and the output; eager attention builds "
           "its own s x s boolean causal mask; flash is SDPA with enable_gqa (tiny.py).")

# torchtitan's Llama as it ran its published measurements (ledger.validation.memory)
TORCH_2412 = replace(
    TORCH, name="torch-2412", norm_input="fp32", norm_xhat="act", flash_kv_repeated=True,
    source="torchtitan 9dec370a on torch 1963fc83: its own RMSNorm, output = "
           "_norm(x.float()).type_as(x) * weight (torchtitan/models/norms.py L77-104, "
           "from c22d1a8d 2024-04-11 until 3b39d7ab 2025-03-19 switched to nn.RMSNorm), keeps "
           "the fp32 copy, the fp32 rstd and the bf16 x_hat the weight multiplies; "
           "repeat_kv expands K and V to every head before F.scaled_dot_product_attention "
           "(torchtitan/models/llama/model.py L189-209); FeedForward as HEAD. Selective op "
           "AC (torchtitan/parallelisms/parallelize_llama.py L214-276): saves aten.mm, the "
           "flash / efficient SDPA, reduce_scatter_tensor, abs and max outputs, every "
           "second mm recomputed (a fresh counter per block); abs and max are float8's "
           "amax, not modelled (float8 leaves the mm outputs it saves in place: the "
           "caching mode sees aten.mm before Float8Tensor dispatches _scaled_mm). No MoE "
           "in that era.")
TORCH_2506 = replace(
    TORCH, name="torch-2506",
    source="torchtitan e7c0cae9 on torch 2.8.0a0+5228986c: nn.RMSNorm (since 3b39d7ab) and "
           "SDPA as HEAD; selective op AC as 9dec370 without abs "
           "(torchtitan/models/llama3/parallelize_llama.py L218-280; 88247277, #820).")
TORCH_2404 = replace(
    TORCH_2412, name="torch-2404", norm_input="act", norm_xhat="",
    source="torchtitan 395a5262 / 1ea476e9 (April 2024), as torch-2412 but with the "
           "Triton fused_rmsnorm of the 8B and 13B tomls (norm_type = 'fused_rmsnorm', "
           "torchtitan/models/norms.py FusedRMSNorm: the input and the fp32 rstd kept) and "
           "the 4-op SAC list (mm, the two SDPAs, reduce_scatter; parallelize_llama.py "
           "L36-41). The 70B tomls ran 'rmsnorm' (torch-2412's fp32 copy), which only "
           "layers kept whole feel.")
TABLES = {t.name: t for t in (KORTHIKANTI, MEGATRON, TORCH, TORCH_2404, TORCH_2412, TORCH_2506,
                              HF, PLAIN)}


def mla_down_copies(t: SavedTensors) -> int:
    """Copies of MLA's input-norm output its down-projections keep (with a query latent):
    Megatron-Core builds q_down and kv_down as two Transformer Engine linear layers over that
    one output (gpt_layer_specs.py L296, L302, L304; ``mla_down_proj_fusion`` off by default,
    transformer_config.py L3338 @d98e8a64). In BF16 both save the same tensor; under an FP8
    recipe each quantizes its input and saves its own copy (TE linear.py L425-436, L601-621
    @d0067d0d) - unless ``layernorm`` is recomputed, when both save the original input
    (multi_latent_attention.py L1114-1118, ``set_save_original_input``), which the
    checkpoint discards (``ledger.arch.selective``)."""
    megatron = t.name.partition("+")[0] == "megatron"
    return 2 if megatron and t.fp8_input_bytes else 1


def table(name: str) -> SavedTensors:
    """A saved-tensor table by name (``"<table>+fp8-<recipe>"``: its GEMM inputs kept as
    the FP8 recipe keeps them, ``ledger.frameworks.fp8``); an unknown name lists the known ones."""
    base, _, fp8_name = name.partition("+fp8-")
    if fp8_name:
        return replace(table(base), name=name, **saved_inputs(fp8_name))
    if name not in TABLES:
        raise LedgerError("activations", f"unknown saved-tensor table {name!r}; "
                                         f"known: {', '.join(TABLES)}")
    return TABLES[name]

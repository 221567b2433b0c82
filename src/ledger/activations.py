"""Bytes one transformer layer saves for backward, per GPU and micro-batch, tensor by tensor.

One formula for every architecture (GELU or SwiGLU MLP, MHA/GQA/MQA, head_dim != h/a,
qk-norm, MLA, routed and shared experts, sliding windows) and every implementation: what
an implementation keeps is data, a ``SavedTensors`` table, with its source. Tokens per GPU
are T = s*b/cp; under sequence parallelism the residual-stream tensors are the 1/tp shard.

Every term is "elements per token x bytes per element"; ``e`` is the activation dtype's
size, fp32 statistics are 4 bytes, indices 8 (int64) or 4 (int32). The arithmetic takes
numpy arrays for micro_batch, tp and cp (the planner prices a grid at once); only the
categorical arguments (table, recompute, flash, sequence_parallel) branch. Biases add no
saved tensor (a linear keeps its input either way; measured on Starcoder2's layer).

>>> from ledger.model import llama3_405b
>>> r = layer_activations(llama3_405b(), micro_batch=1, tp=8, table=KORTHIKANTI)
>>> r.total_bytes / 2**20  # the seed's figure: 34 sbh / t (Korthikanti et al. 2022, eq. 4)
544.0
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ledger.errors import LedgerError
from ledger.fp8 import gemm_input_bytes as _gi, mlp_width_bytes as _mlp_f, saved_inputs
from ledger.model import ModelSpec

RECOMPUTE = ("none", "selective", "full")
_DTYPE = {"act": None, "fp32": 4, "": 0}  # "act": the activation dtype (act_bytes)


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
    residual_dropout_masks: int = 0  # 1-byte h-wide masks per layer (GPT: attention + MLP)
    # -- attention ---------------------------------------------------------------------
    flash_kv_repeated: bool = False  # the fused kernel reads K, V expanded to all heads
    flash_lse: str = "fp32"  # log-sum-exp per head and token
    eager_probs: str = "act"  # softmax output per score; "fp32+act": fp32 softmax cast back
    eager_dropout: bool = False  # attention dropout: 1-byte mask + dropped probs per score
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
    routing_map_bytes_per_expert: int = 0  # per token and expert (TE's row_id_map)
    routed_input_copy: bool = True  # the gathered/permuted copy of each routed token
    routed_output_copies: int = 2  # h-wide expert outputs kept (prob multiply, scatter-add)
    routed_output: str = "act"  # their dtype (torchtitan scores an fp32 copy)
    routed_prob: str = "fp32"  # the gate weight of each routed token
    routed_index_bytes: int = 16  # per routed token (token and slot positions)
    # -- FP8 (``ledger.fp8``): a GEMM input saved in FP8 (+ scales), 0: the act dtype; the
    #   attention output kept once in its own format (0: flash's copy + the projection's)
    fp8_input_bytes: float = 0.0
    attn_out_bytes: float = 0.0
    expert_swiglu_recompute: bool = False  # experts keep the SwiGLU input (in FP8) only


@dataclass(frozen=True, kw_only=True)
class LayerActivations:
    """Saved bytes of one layer for one micro-batch on one GPU, by cause."""

    norms_bytes: float  # the two residual-stream norms and their outputs (the GEMM inputs)
    attention_bytes: float  # q/k/v/out, lse, qk-norms, MLA latents: everything linear in s
    scores_bytes: float  # materialised attention: probabilities, masks, dropout (s^2)
    mlp_bytes: float  # dense MLP (0 in an MoE layer)
    router_bytes: float
    experts_bytes: float  # routed tokens x top_k x capacity through the expert MLPs
    shared_experts_bytes: float
    dropout_bytes: float  # residual-stream dropout masks
    input_bytes: float = 0.0  # full recompute: the checkpointed layer input, nothing else
    recompute: str = "none"

    @property
    def total_bytes(self) -> float:
        return sum(getattr(self, f.name) for f in fields(self) if f.name.endswith("_bytes"))


def _b(code: str, e) -> float:
    """Bytes per element of a dtype field."""
    if code == "fp32+act":  # an fp32 tensor and its cast back (the same tensor when e = 4)
        return 4 + (e if e != 4 else 0)
    return e if code == "act" else _DTYPE[code]


def _gpt(model: ModelSpec) -> ModelSpec:
    """Korthikanti's layer: MHA, a 4h GELU MLP, no experts (the seed's accounting)."""
    h = model.hidden
    return ModelSpec(name=model.name, layers=model.layers, hidden=h, heads=model.heads,
                     vocab=model.vocab, seq_len=model.seq_len, ffn_hidden=4 * h,
                     gated_mlp=False, norm="layernorm")


def _norm(width, t: SavedTensors, e, stats=1, layernorm=False) -> float:
    """A norm over ``width`` features, per token: its input, x_hat and ``stats``
    statistics (one per normalised row). Its output is counted where it is read (a GEMM
    input), or not at all (RoPE keeps only cos/sin). LayerNorm runs the fused kernel of
    every implementation (aten::native_layer_norm, TE): the input, the mean and rstd."""
    if layernorm:
        return width * e + 2 * _b(t.norm_stat, e)
    return width * (_b(t.norm_input, e) + _b(t.norm_xhat, e)) + stats * _b(t.norm_stat, e)


def _mla(model) -> tuple[int, int, int, int, int]:
    """(q_lora, kv_lora, rope, nope, v) sizes of multi-head latent attention, or 0s
    (DeepSeek-V2 sec. 2.1; ModelSpec's MLA fields, read with defaults)."""
    if getattr(model, "attention", "mha") != "mla":
        return 0, 0, 0, 0, 0
    return (model.q_lora_rank or 0, model.kv_lora_rank, model.qk_rope_head_dim,
            model.qk_nope_head_dim, model.v_head_dim)


def _qk_norm(model, t, e) -> float:
    """qk-norm per token: "head" normalises each head (Qwen3: a + kv statistics),
    "full" the whole q and k (OLMo 2: two); their outputs feed RoPE, which keeps only
    cos/sin, so only input, x_hat and statistics are kept."""
    kind = getattr(model, "qk_norm", "none")
    if kind in ("none", False, None):
        return 0.0
    a, kv, d = model.heads, model.kv_heads, model.head_dim
    stats = (a, kv) if kind == "head" else (1, 1)
    return _norm(a * d, t, e, stats[0]) + _norm(kv * d, t, e, stats[1])


def _attention(model, t, e, tokens, tp, sp_div, flash, keys, q_rows):
    """(norm, linear-in-s, scores) bytes of the attention block.

    Per token: the norm and its output (the QKV GEMM's input), q, k, v, the output the
    projection reads; flash adds the log-sum-exp, a materialised kernel the probabilities over
    ``keys`` keys for each of the ``q_rows`` local queries.
    """
    a, kv, d = model.heads, model.kv_heads, model.head_dim
    q_lora, kv_lora, rope, nope, v_dim = _mla(model)
    norm = _norm(model.hidden, t, e, layernorm=model.norm == "layernorm") * tokens / sp_div
    gi = _gi(t, e)
    norm = norm + model.hidden * gi * tokens / (sp_div if t.sp_gemm_input_shard else 1)
    extra = 0.0  # MLA latents, qk-norms
    if kv_lora:  # MLA: the compressed latent (+ shared rope key) and the q latent
        lat = _norm(kv_lora, t, e) + kv_lora * gi  # latent norm + the up-projection's input
        if q_lora:
            lat += _norm(q_lora, t, e) + q_lora * gi
        extra = lat * tokens / sp_div
        qk, v_w, kv_heads = nope + rope, v_dim, a  # keys expanded to every head
    else:
        qk, v_w, kv_heads = d, d, kv
    extra = extra + _qk_norm(model, t, e) * tokens / tp
    out = a * v_w
    # the output: in its own format, or flash's copy + the projection's FP8 one (eager: that)
    out_b = t.attn_out_bytes or (e + t.fp8_input_bytes if flash else gi)
    if flash:
        k_heads = a if t.flash_kv_repeated else kv_heads
        per_tok = (a * qk + k_heads * (qk + v_w)) * e + out * out_b + a * _b(t.flash_lse, e)
        if kv_lora and t.mla_flash_copies:
            per_tok = per_tok + (a * nope + out) * e
        scores = 0.0
    else:  # q, k and v at every head, the contiguous output copy the projection reads
        per_tok = (a * qk + a * (qk + v_w)) * e + out * out_b
        per_score = _b(t.eager_probs, e) + (1 + e if t.eager_dropout else 0)
        if getattr(model, "attn_logit_softcap", 0.0):  # cap * tanh(scores / cap)
            per_score = per_score + _b(t.eager_softcap, e)
        batch = tokens / q_rows  # sequences per GPU
        scores = (a / tp * per_score * batch + t.eager_mask_bytes) * q_rows * keys
    return norm, extra + per_tok * tokens / tp, scores


def _mlp_block(model, t, e, tokens, tp, sp_div, moe, capacity_factor, etp=1):
    """(norm, dense MLP, router, routed experts, shared experts) bytes of the MLP block.

    Routed tokens are T*top_k, padded by the capacity factor; under SP the dispatcher
    routes the sequence shard (the h-wide copies divide by tp), and the expert width
    divides by tp (ETP) or the tokens do (SP with ETP = 1): either way T*k*f/tp. The
    h-wide copies are what the expert GEMMs read after the all-gather over ETP
    (Megatron's alltoall dispatcher, token_dispatcher.py L741-751): etp x the SP shard.
    """
    h = model.hidden
    ln = model.norm == "layernorm"
    norm = _norm(h, t, e, layernorm=ln) * tokens / sp_div
    norm = norm + h * _gi(t, e) * tokens / (sp_div if t.sp_gemm_input_shard else 1)  # GEMM input
    post = getattr(model, "layer_norms", 2) - 2  # Gemma's post-norms: output feeds the residual
    norm = norm + post * _norm(h, t, e, layernorm=ln) * tokens / sp_div
    per_f = t.mlp_gated_f if model.gated_mlp else t.mlp_plain_f
    if not moe:
        return norm, _mlp_f(t, e, per_f) * model.ffn_hidden * tokens / tp, 0.0, 0.0, 0.0
    n, k, f = model.num_experts, model.top_k, model.moe_ffn_hidden
    router = (n * _b(t.router_probs, e) + k * t.router_index_bytes
              + n * t.routing_map_bytes_per_expert
              + (4 * h if t.router_input_fp32 and e != 4 else 0)) * tokens / sp_div
    routed = tokens * k * capacity_factor
    per_routed = (t.routed_input_copy * h * _gi(t, e)
                  + t.routed_output_copies * h * _b(t.routed_output, e)
                  + _b(t.routed_prob, e) + t.routed_index_bytes)
    per_f_e = _mlp_f(t, e, per_f, t.expert_swiglu_recompute)
    experts = routed * per_routed * etp / sp_div + routed * per_f_e * f / tp
    shared_w = getattr(model, "shared_ffn", model.shared_experts * f)
    shared = _mlp_f(t, e, per_f) * shared_w * tokens / tp
    return norm, 0.0, router, experts, shared


def _kind(model, layer, moe, window):
    """(MoE layer?, window) of one layer: the model's own answer for layer ``layer``."""
    if layer is not None and hasattr(model, "is_moe_layer"):
        moe = model.is_moe_layer(layer) if moe is None else moe
        window = model.window(layer) if window is None else window
    elif layer is not None and moe is None:  # a ModelSpec without per-layer ids
        moe = model.is_moe and layer >= model.first_dense_layers
    if moe is None:
        moe = model.is_moe
    if window is None and getattr(model, "local_layers", None) is None:
        window = getattr(model, "sliding_window", None)
    return moe, window


def layer_kind(model, layer: int) -> tuple[bool, int | None]:
    """(is an MoE layer, its attention window) of layer ``layer``: what sets its bytes."""
    return _kind(model, layer, None, None)


def _check(recompute: str) -> None:
    if recompute not in RECOMPUTE:
        raise LedgerError("recompute", f"must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")


def layer_activations(model: ModelSpec, *, micro_batch, seq_len: int | None = None, tp=1,
                      cp=1, sequence_parallel: bool = True, flash: bool = True,
                      recompute: str = "none", act_bytes: int = 2,
                      capacity_factor: float | None = None,
                      table: SavedTensors | None = None, layer: int | None = None,
                      moe: bool | None = None, window: int | None = None,
                      etp=1) -> LayerActivations:
    """Bytes one decoder layer keeps for backward, per GPU, for one micro-batch.

    ``layer`` (0-based) picks the layer's kind from the model (MoE or dense, its sliding
    window); without it ``moe`` defaults to "the model has experts" and ``window`` to the
    model's window when every layer is local. Explicit ``moe``/``window`` win.
    Recompute: ``full`` keeps the layer input only (h*e per token, the SP shard);
    ``selective`` recomputes the materialised attention core (Korthikanti et al. 2022,
    sec. 5), so the s^2 terms are not kept; with flash there is nothing to drop.

    >>> from ledger.model import llama3_8b
    >>> r = layer_activations(llama3_8b(), micro_batch=1, table=HF)
    >>> r.mlp_bytes == 4 * 14336 * 2 * 8192  # gate, silu(gate), up, product in bf16
    True
    """
    _check(recompute)
    t = MEGATRON if table is None else table
    if t.gpt_shape:  # every layer is Korthikanti's dense GPT layer, whatever its kind
        model, layer, moe, window = _gpt(model), None, False, None
    s = model.seq_len if seq_len is None else seq_len
    e, tokens = act_bytes, s * micro_batch / cp
    sp_div = tp if sequence_parallel else 1
    moe, window = _kind(model, layer, moe, window)
    if recompute == "full":
        zero = 0.0 * tokens
        return LayerActivations(norms_bytes=zero, attention_bytes=zero, scores_bytes=zero,
                                mlp_bytes=zero, router_bytes=zero, experts_bytes=zero,
                                shared_experts_bytes=zero, dropout_bytes=zero,
                                input_bytes=model.hidden * e * tokens / sp_div,
                                recompute=recompute)
    keys = min(s, window) if window and t.scores_over_window else s
    norm_a, attn, scores = _attention(model, t, e, tokens, tp, sp_div, flash, keys, s / cp)
    if recompute == "selective":
        scores = 0.0 * tokens
    norm_m, mlp, router, experts, shared = _mlp_block(
        model, t, e, tokens, tp, sp_div, moe, 1.0 if capacity_factor is None else capacity_factor,
        etp if sequence_parallel else 1)  # without SP every TP rank holds all tokens
    return LayerActivations(
        norms_bytes=norm_a + norm_m, attention_bytes=attn,
        scores_bytes=scores, mlp_bytes=mlp, router_bytes=router, experts_bytes=experts,
        shared_experts_bytes=shared,
        dropout_bytes=t.residual_dropout_masks * model.hidden * tokens / sp_div,
        recompute=recompute)


def recompute_working_bytes(model: ModelSpec, **kw) -> float:
    """Full recompute's working set: the one layer being recomputed holds its whole
    no-recompute activations during its backward (a buffer on top of the kept inputs)."""
    kw["recompute"] = "none"
    return layer_activations(model, **kw).total_bytes


def kind_counts(model: ModelSpec, layers) -> dict[tuple, int]:
    """How many of ``layers`` (layer ids) are of each kind (MoE?, window): the layers of a
    kind save the same bytes, so a stage is priced once per kind."""
    counts: dict[tuple, int] = {}
    for i in layers:
        key = layer_kind(model, i)
        counts[key] = counts.get(key, 0) + 1
    return counts


def layers_activation_bytes(model: ModelSpec, layers: range, **kw) -> float:
    """Sum of ``layer_activations(...).total_bytes`` over ``layers`` (a PP stage's layer
    ids), priced once per kind of layer (``kind_counts``) and multiplied by its count."""
    rest = {k: v for k, v in kw.items() if k not in ("moe", "window", "layer")}
    return sum(n * layer_activations(model, moe=m, window=w, **rest).total_bytes
               for (m, w), n in kind_counts(model, layers).items())


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
    routed_index_bytes=0,
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
           "808). No dropout (Llama/Mixtral recipes: hidden_dropout = attention_dropout = 0).")

TORCH = SavedTensors(
    name="torch", sp_gemm_input_shard=False, routed_output_copies=1, routed_output="fp32",
    routed_index_bytes=8,
    source="torchtitan b5bcd76c on torch 2.13 (CUDA): nn.RMSNorm (models/common/nn_modules.py:"
           "134) runs aten::_fused_rms_norm, which keeps the input and the fp32 rstd (torch/"
           "_decomp/decompositions.py:1946); F.scaled_dot_product_attention with enable_gqa "
           "(models/common/attention.py:418-424) keeps q, k, v at their own heads, out and the "
           "fp32 logsumexp; FeedForward w2(silu(w1 x) * w3 x) (models/common/feed_forward.py:"
           "53-54) keeps gate, silu(gate), up, product; DTensor SP all-gathers the norm output "
           "before wq/w1, which keep the gathered copy. MoE (read, not measured): fp32 router "
           "scores, int64 top-k (models/common/moe.py:294-317); grouped experts keep the "
           "routed input, w1 out, silu, w3 out, product (:94-108); combine scores an fp32 copy "
           "of each routed output with the fp32 score, scatter_add keeps the int64 index "
           "(models/common/token_dispatcher.py:156-168, ops/scatter_add.py:42). On CPU the "
           "composite rms_norm keeps an fp32 x_hat and upcast input instead (measured in "
           "tests/test_activations.py).")

HF = SavedTensors(
    name="hf", norm_input="fp32", norm_xhat="act", sp_gemm_input_shard=False,
    eager_probs="fp32+act", scores_over_window=False, mla_flash_copies=True,
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
           "418,463,480).")

PLAIN = SavedTensors(
    name="plain", norm_xhat="act", norm_stat="act", eager_mask_bytes=1,
    source="ledger.verify.tiny.Block, the project's Llama block written op by op: its RMSNorm "
           "keeps x, rsqrt (activation dtype), x*rsqrt and the output; eager attention builds "
           "its own s x s boolean causal mask; flash is SDPA with enable_gqa (tiny.py).")

TABLES = {t.name: t for t in (KORTHIKANTI, MEGATRON, TORCH, HF, PLAIN)}


def table(name: str) -> SavedTensors:
    """A saved-tensor table by name (``"<table>+fp8-<recipe>"``: its GEMM inputs kept as
    the FP8 recipe keeps them, ``ledger.fp8``); an unknown name lists the known ones."""
    base, _, fp8_name = name.partition("+fp8-")
    if fp8_name:
        return replace(table(base), name=name, **saved_inputs(fp8_name))
    if name not in TABLES:
        raise LedgerError("activations", f"unknown saved-tensor table {name!r}; "
                                         f"known: {', '.join(TABLES)}")
    return TABLES[name]

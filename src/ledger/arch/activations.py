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
>>> r = layer_activations(llama3_405b(), micro_batch=1, tp=8, table=KORTHIKANTI, dropout=0.1)
>>> r.total_bytes / 2**20  # the seed's figure: 34 sbh / t (Korthikanti et al. 2022, eq. 4)
544.0
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ledger.arch import compressed as _v4
from ledger.arch.checkpointing import gradient_bytes, op_policy
from ledger.arch.selective import recomputed_modules as _recomputed_modules
from ledger.arch.selective import selected as _modules
from ledger.arch.recurrent import gemm_input_elements, norm_out_elements, saved_elements
from ledger.arch.saved_tensors import KORTHIKANTI, MEGATRON, SavedTensors, mla_down_copies
from ledger.config import RECOMPUTE
from ledger.errors import LedgerError
from ledger.frameworks import gemm_input_bytes as _gi
from ledger.frameworks import mlp_width_bytes as _mlp_f
from ledger.anatomy.mixers import LayerKind
from ledger.model import ModelSpec

_DTYPE = {"act": None, "fp32": 4, "": 0}  # "act": the activation dtype (act_bytes)


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
    mixer_bytes: float = 0.0  # a recurrent mixer's tensors (ledger.arch.recurrent)
    streams_bytes: float = 0.0  # mHC: the residual streams its sites keep (arch.compressed)
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


def _block_norm(model, t, e, tokens, sp_div):
    """A block's pre-norm and its output, the input of the block's first GEMM (under SP
    the sequence shard where the implementation keeps it, ``sp_gemm_input_shard``)."""
    norm = _norm(model.hidden, t, e, layernorm=model.norm == "layernorm") * tokens / sp_div
    return norm + model.hidden * _gi(t, e) * tokens / (sp_div if t.sp_gemm_input_shard else 1)


def _mixer(model, t, e, tokens, tp, sp_div, flash, keys, q_rows, mixer, dropout=0.0,
           drop_up=False, ratio=0):
    """(norm, attention, scores, recurrent mixer) bytes of a layer's sequence mixer:
    attention, a recurrent mixer (``ledger.arch.recurrent``; Megatron-Core's kernels
    under its table, transformers' otherwise), both side by side (Falcon-H1: one norm
    feeds both), or none. An attention output gate keeps the gate (``attn_gate``), a DSA
    indexer its queries, key and head weights."""
    zero = 0.0 * tokens
    if mixer == "none":
        return zero, zero, zero, zero
    if mixer == "attention" and getattr(model, "attention", "mha") == "csa":
        norm = _block_norm(model, t, e, tokens, sp_div)  # DeepSeek-V4 (ledger.arch.compressed)
        split, repl = _v4.attention_elements(model, t, e, _gi(t, e), flash, ratio,
                                             lambda w, st: _norm(w, t, e, st), drop_up)
        return norm, split * tokens / tp + repl * tokens / sp_div, zero, zero
    if mixer in ("attention", "attention+mamba"):
        norm, attn, scores = _attention(model, t, e, tokens, tp, sp_div, flash, keys, q_rows,
                                        dropout, drop_up)
        gate = {"none": 0, "elementwise": model.q_dim, "head": model.heads}[
            getattr(model, "attn_gate", "none")]
        ih, ihd = getattr(model, "index_heads", 0), getattr(model, "index_head_dim", 0)
        index = ih * (ihd + 1) + ihd
        attn = attn + (gate + index) * e * tokens / tp
    else:
        norm, attn, scores = _block_norm(model, t, e, tokens, sp_div), zero, zero
    megatron = t.name.partition("+")[0] == "megatron"  # its table, or that + an FP8 recipe's
    act, fp32 = saved_elements(model, mixer, megatron)
    gemm = gemm_input_elements(model, mixer, megatron)  # out_proj's input, as TE saves it
    return norm, attn, scores, ((act - gemm) * e + gemm * _gi(t, e) + fp32) * tokens / tp


def _attention(model, t, e, tokens, tp, sp_div, flash, keys, q_rows, dropout=0.0,
               drop_up=False):
    """(norm, linear-in-s, scores) bytes of the attention block.

    Per token: the norm and its output (the QKV GEMM's input), q, k, v, the output the
    projection reads; flash adds the log-sum-exp, a materialised kernel the probabilities over
    ``keys`` keys for each of the ``q_rows`` local queries. ``drop_up``: MLA's up-projected
    q, k, v are discarded after the kernel's forward and rebuilt from the latents in
    backward (Megatron ``--recompute-modules mla_up_proj``; DeepSeek-V3 sec. 3.2.3)."""
    a, kv, d = model.heads, model.kv_heads, model.head_dim
    q_lora, kv_lora, rope, nope, v_dim = _mla(model)
    norm = _block_norm(model, t, e, tokens, sp_div)
    gi = _gi(t, e)
    extra = 0.0  # MLA latents, qk-norms
    if kv_lora:  # MLA: the compressed latent (+ shared rope key) and the q latent
        lat = _norm(kv_lora, t, e) + kv_lora * gi  # latent norm + the up-projection's input
        if q_lora:
            lat += _norm(q_lora, t, e) + q_lora * gi
        if drop_up:  # the checkpoint keeps the latents; their norms run again with it
            lat = (kv_lora + q_lora) * e
        extra = lat * tokens / sp_div
        if q_lora and mla_down_copies(t) == 2:  # the kv down-projection's own FP8 copy
            extra += model.hidden * gi * tokens / (sp_div if t.sp_gemm_input_shard else 1)
        qk, v_w, kv_heads = nope + rope, v_dim, a  # keys expanded to every head
    else:
        qk, v_w, kv_heads = d, getattr(model, "v_head_dim", d), kv
    extra = extra + _qk_norm(model, t, e) * tokens / tp
    out = a * v_w
    # the output: in its own format, or flash's copy + the projection's FP8 one (eager: that)
    out_b = t.attn_out_bytes or (e + t.fp8_input_bytes if flash else gi)
    if flash:
        k_heads = a if t.flash_kv_repeated else kv_heads
        qkv, copy = (a * qk + k_heads * (qk + v_w)) * (t.flash_qkv_bytes or e), 0.0
        if kv_lora and t.mla_flash_copies:  # FP8 attention keeps its own v: no view
            qkv, copy = qkv + a * nope * e * (not t.flash_qkv_bytes), out * e
        per_tok = qkv * (not (drop_up and kv_lora)) + copy + out * out_b \
            + a * _b(t.flash_lse, e)
        scores = 0.0
    else:  # q, k and v at every head, the contiguous output copy the projection reads
        per_tok = (a * qk + a * (qk + v_w)) * e * (not (drop_up and kv_lora)) + out * out_b
        per_score = _b(t.eager_probs, e) + (1 + e if t.eager_dropout and dropout else 0)
        if getattr(model, "attn_logit_softcap", 0.0):  # cap * tanh(scores / cap)
            per_score = per_score + _b(t.eager_softcap, e)
        batch = tokens / q_rows  # sequences per GPU
        scores = (a / tp * per_score * batch + t.eager_mask_bytes) * q_rows * keys
    return norm, extra + per_tok * tokens / tp, scores


def _mlp_block(model, t, e, tokens, tp, sp_div, moe, capacity_factor, etp=1,
               act_recompute=False):
    """(norm, dense MLP, router, routed experts, shared experts) bytes of the MLP block.

    Routed tokens are T*top_k, padded by the capacity factor; under SP the dispatcher
    routes the sequence shard (the h-wide copies divide by tp), and the expert width
    divides by tp (ETP) or the tokens do (SP with ETP = 1): either way T*k*f/tp. The
    h-wide copies are what the expert GEMMs read after the all-gather over ETP
    (Megatron's alltoall dispatcher, token_dispatcher.py L741-751): etp x the SP shard.
    ``act_recompute``: the experts' activation output (fc2's input) is discarded and
    rebuilt from fc1's output in backward (Megatron ``--recompute-modules moe_act``).
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
    x = getattr(model, "expert_hidden", h)  # LatentMoE: rows travel and enter at the latent
    per_routed = (t.routed_input_copy * x * _gi(t, e)  # width (moe_layer.py:488-492,
                  + t.routed_output_copies * x * _b(t.routed_output, e)  # :591-592 at
                  + _b(t.routed_prob, e) + t.routed_index_bytes)  # d98e8a64dd)
    per_f_e = _mlp_f(t, e, per_f, t.expert_swiglu_recompute)
    if act_recompute and not t.expert_swiglu_recompute:
        per_f_e = (per_f - 1) * e
    experts = routed * per_routed * etp / sp_div + routed * per_f_e * f / tp
    if x != h:  # fc2_latent_proj's input, the combined latent rows (fc1_latent_proj's is
        experts = experts + x * _gi(t, e) * tokens / sp_div  # the block input, kept above)
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


def layer_kind(model, layer: int) -> LayerKind:
    """What layer ``layer`` is (``ledger.anatomy.mixers.LayerKind``): what sets its bytes."""
    if hasattr(model, "layer_kind"):
        return model.layer_kind(layer)
    moe, window = _kind(model, layer, None, None)
    return LayerKind("attention", "moe" if moe else "dense", window)


def _check(recompute: str) -> None:
    if recompute not in RECOMPUTE:
        raise LedgerError("recompute", f"must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")


def layer_activations(model: ModelSpec, *, micro_batch, seq_len: int | None = None, tp=1,
                      cp=1, sequence_parallel: bool = True, flash: bool = True,
                      recompute: str = "none", act_bytes: int = 2,
                      capacity_factor: float | None = None,
                      table: SavedTensors | None = None, layer: int | None = None,
                      moe: bool | None = None, window: int | None = None,
                      etp=1, kind: LayerKind | None = None, dropout: float = 0.0,
                      modules: tuple[str, ...] | None = None,
                      moe_norm_recompute: bool = True) -> LayerActivations:
    """Bytes one decoder layer keeps for backward, per GPU, for one micro-batch.

    ``layer`` (0-based) picks the layer's kind from the model (MoE or dense, its sliding
    window); without it ``moe`` defaults to "the model has experts" and ``window`` to the
    model's window when every layer is local. Explicit ``moe``/``window`` win; ``kind``
    (a ``ledger.anatomy.mixers.LayerKind``) sets all three, with the layer's mixer and MLP.
    Recompute: ``full`` keeps the layer input only (h*e per token, the SP shard);
    ``selective`` runs the table's policy: the attention core recomputed (Korthikanti
    et al. 2022, sec. 5: the s^2 terms are not kept; with flash there is nothing to
    drop), or torchtitan's per-op policy (``ledger.arch.checkpointing``). ``dropout`` > 0
    keeps the table's dropout masks; ``moe_norm_recompute``: selective's ``moe_norm``.

    >>> from ledger.model import llama3_8b
    >>> from ledger.arch.saved_tensors import HF
    >>> r = layer_activations(llama3_8b(), micro_batch=1, table=HF)
    >>> r.mlp_bytes == 4 * 14336 * 2 * 8192  # gate, silu(gate), up, product in bf16
    True
    """
    _check(recompute)
    t = MEGATRON if table is None else table
    mixer, mlp_kind, ratio = "attention", None, 0
    if kind is not None:
        moe, window, mixer, mlp_kind = kind.moe, kind.window, kind.mixer, kind.mlp
        ratio = kind.compress
        model = model.attention_of(kind) if hasattr(model, "attention_of") else model
    elif layer is not None and hasattr(model, "layer_kind"):
        mixer, mlp_kind, _, ratio = model.layer_kind(layer)
    if t.gpt_shape:  # every layer is Korthikanti's dense GPT layer, whatever its kind
        model, layer, moe, window, mixer, mlp_kind = _gpt(model), None, False, None, \
            "attention", "dense"
    s = model.seq_len if seq_len is None else seq_len
    e, tokens = act_bytes, s * micro_batch / cp
    sp_div = tp if sequence_parallel else 1
    moe, window = _kind(model, layer, moe, window)
    streams = getattr(model, "hc_mult", 0) or 1  # mHC: the layer's input is n streams
    if recompute == "full":
        zero = 0.0 * tokens
        return LayerActivations(norms_bytes=zero, attention_bytes=zero, scores_bytes=zero,
                                mlp_bytes=zero, router_bytes=zero, experts_bytes=zero,
                                shared_experts_bytes=zero, dropout_bytes=zero,
                                input_bytes=streams * model.hidden * e * tokens / sp_div,
                                recompute=recompute)
    cf = 1.0 if capacity_factor is None else capacity_factor
    if recompute == "selective" and t.selective == "op" and mixer == "attention" \
            and mlp_kind != "none":  # the policy's matmuls are an attention layer's
        kept = op_policy(model, t, e, tokens=tokens, tp=tp, sp_div=sp_div, moe=moe,
                         capacity_factor=cf, etp=etp if sequence_parallel else 1)
        zero = 0.0 * tokens
        return LayerActivations(norms_bytes=zero, attention_bytes=kept["attention"],
                                scores_bytes=zero, mlp_bytes=kept["mlp"],
                                router_bytes=kept["router"], experts_bytes=kept["experts"],
                                shared_experts_bytes=kept["shared"], dropout_bytes=zero,
                                input_bytes=kept["input"], recompute=recompute)
    keys = min(s, window) if window and t.scores_over_window else s
    mods = set(_modules(recompute, modules))
    norm_a, attn, scores, recurrent = _mixer(model, t, e, tokens, tp, sp_div, flash, keys,
                                            s / cp, mixer, dropout, "mla_up_proj" in mods,
                                            ratio)
    if "core_attn" in mods:
        scores = 0.0 * tokens
    if "gdn_norm_out" in mods:  # the gated norm's output, out_proj's input (recurrent)
        recurrent = recurrent - norm_out_elements(model, mixer) * e * tokens / tp
    norm_m, mlp, router, experts, shared = _mlp_block(
        model, t, e, tokens, tp, sp_div, moe, cf,
        etp if sequence_parallel else 1,  # without SP every TP rank holds all tokens
        "moe_act" in mods and moe)
    if mlp_kind == "none":
        norm_m = mlp = router = experts = shared = 0.0 * tokens
    norm_a, norm_m, mlp, router, experts, shared = _recomputed_modules(model, t, e, tokens, sp_div,
        moe, mods, norm_a, norm_m, mlp, router, experts, shared, moe_norm_recompute)
    return LayerActivations(
        norms_bytes=norm_a + norm_m, attention_bytes=attn,
        scores_bytes=scores, mlp_bytes=mlp, router_bytes=router, experts_bytes=experts,
        shared_experts_bytes=shared,
        dropout_bytes=t.residual_dropout_masks * model.hidden * tokens / sp_div * (
            dropout > 0), recompute=recompute, mixer_bytes=recurrent,
        streams_bytes=_v4.hc_elements(model, e) * tokens / sp_div)


def recompute_working_bytes(model: ModelSpec, **kw) -> float:
    """What one layer's backward holds beyond what the layer saved: under recompute the
    tensors its forward, run again, keeps - its no-recompute activations less what the
    policy kept - and, under any mode, its MLP's input gradients
    (``ledger.arch.checkpointing.gradient_bytes``)."""
    mode = kw.get("recompute", "none")
    kept = layer_activations(model, **kw)
    again = 0.0
    if mode != "none":
        again = layer_activations(model, **(kw | {"recompute": "none"})).total_bytes \
            - kept.total_bytes
    t = MEGATRON if kw.get("table") is None else kw["table"]
    spec, kind = (_gpt(model), None) if t.gpt_shape else (model, kw.get("kind"))
    if kind is not None and kind.mlp == "none":
        return again
    moe = kind.moe if kind is not None else _kind(
        spec, kw.get("layer"), False if t.gpt_shape else kw.get("moe"), None)[0]
    tokens = (kw.get("seq_len") or model.seq_len) * kw["micro_batch"] / kw.get("cp", 1)
    return again + gradient_bytes(spec, kw.get("act_bytes", 2), tokens=tokens, tp=kw.get("tp", 1),
                                  moe=moe, capacity_factor=kw.get("capacity_factor") or 1.0)


def head_bytes(model: ModelSpec, *, micro_batch, seq_len: int | None = None, tp=1, cp=1,
               sequence_parallel: bool = True, act_bytes: int = 2,
               table: SavedTensors | None = None) -> float:
    """What the output head keeps for backward, per GPU and micro-batch: the final norm
    (as the table's layers keep theirs) and the output GEMM's input."""
    tokens = (model.seq_len if seq_len is None else seq_len) * micro_batch / cp
    sp_div = np.where(sequence_parallel, tp, 1)  # a flag, or the planner's array of them
    return _block_norm(model, MEGATRON if table is None else table, act_bytes, tokens, sp_div)


def kind_counts(model: ModelSpec, layers) -> dict[LayerKind, int]:
    """How many of ``layers`` (layer ids) are of each kind (``LayerKind``): the layers of a
    kind save the same bytes, so a stage is priced once per kind."""
    counts: dict[tuple, int] = {}
    for i in layers:
        key = layer_kind(model, i)
        counts[key] = counts.get(key, 0) + 1
    return counts


def layers_activation_bytes(model: ModelSpec, layers: range, **kw) -> float:
    """Sum of ``layer_activations(...).total_bytes`` over ``layers`` (a PP stage's layer
    ids), priced once per kind of layer (``kind_counts``) and multiplied by its count."""
    rest = {k: v for k, v in kw.items() if k not in ("moe", "window", "layer", "kind")}
    return sum(n * layer_activations(model, kind=k, **rest).total_bytes
               for k, n in kind_counts(model, layers).items())



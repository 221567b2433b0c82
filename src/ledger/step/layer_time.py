"""One layer's seconds for one micro-batch on one GPU, by cause and direction: its GEMMs,
the attention core, elementwise traffic and the TP / CP / EP communication it exposes
(the terms ``ledger.step.timing``'s module docstring derives), and what its backward and
each recompute policy run again. ``ledger.step.timing`` turns them into a step.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ledger.arch import keys_factor, local_keys_factor, op_share
from ledger.frameworks.fp8_attention import FP8_ATTENTION_RECIPES, fp8_attention  # noqa: F401
from ledger.model import ModelSpec
from ledger.placement import (activation_bytes_per_layer, block_layers, forward_passes,
                              routed_activation_bytes)
from ledger.placement.layers import recomputed_share
from ledger.step.eager import (dglu_regression_s, dispatch_pass_bytes, expert_pass_bytes,
                               fused_grouped_mlp, rope_pass_bytes)
from ledger.step.gemm import (gemm_s, indexer_core_s, layer_gemms_s, recurrent_core_bwd_s,
                              recurrent_core_s, rht_s,
                              routed_gemms_s, shared_gemms_s)
from ledger.step.layer_comms import cp_times, ep_time, shared_hidden_s, tp_times
from ledger.step.quantize import amax_pass_bytes, nvfp4_pass_bytes
from ledger.step.indexer_loss import indexer_loss_s
from ledger.step.recompute import (eager_rerun_s, layer_share, rerun_bytes, rerun_gemms_s,
                                   written_dtype)
from ledger.step.recompute import modules as recompute_modules
from ledger.step.tuned import tuned_gemms
from ledger.system import System
from ledger.system.attention import shares as attention_shares
from ledger.system.attention import window_shares


@dataclass(frozen=True)
class LayerTime:
    """Seconds one layer takes for one micro-batch on one GPU, by cause and direction."""

    gemm: object  # forward GEMMs
    attention: object  # forward attention core (its backward: attention_bwd)
    elementwise: object
    core_elementwise: object  # the attention core's share: selective recompute redoes it
    tp_f: object  # TP comm exposed in forward, and in backward
    tp_b: object
    cp_f: object
    cp_b: object
    ep: object  # one direction's EP all-to-alls
    tp_issued: object = 0.0  # TP comm forward + backward before any overlap
    cp_issued: object = 0.0  # CP comm forward + backward before any overlap
    op_share: float | None = None  # selective under a per-op policy: its GEMMs run again
    every: int = 1  # full recompute of one layer in ``every`` on average: every n-th
    # (recompute_every), or the first recompute_layers of each chunk (Megatron's block
    # method: placement.layers.recomputed_share, the share the memory model keeps)
    dgrad: object = None  # the backward's input- and weight-gradient GEMMs: each the
    wgrad: object = None  # forward's, or a fine-tune's (ledger.step.tuned)
    routed: object = 0.0  # the forward's routed-expert GEMMs (after the dispatcher's sync)
    core_bwd: object = 0.0  # the recurrent cores' backward beyond twice their forward (SSD)
    rerun: dict | None = None  # selective by module: the modules' forward again, by cause
    ep_hidden_f: object = 0.0  # EP seconds the shared experts hide, forward and backward
    ep_hidden_b: object = 0.0  # (--moe-shared-expert-overlap: layer_comms.shared_hidden_s)
    attention_bwd: object = None  # the attention core's backward (default twice its forward;
    # a fused kernel's at its own measured rate, ledger.system.attention)
    recurrent: object = 0.0  # of ``attention``, the recurrent mixers' chunked cores (SSD,
    # Gated DeltaNet, ...): no checkpoint of the attention core wraps them

    def __post_init__(self) -> None:
        for f in ("dgrad", "wgrad"):
            if getattr(self, f) is None:
                object.__setattr__(self, f, self.gemm)
        if self.attention_bwd is None:
            object.__setattr__(self, "attention_bwd", 2 * self.attention)

    def forward(self) -> dict:
        return {"compute": self.gemm + self.attention, "elementwise": self.elementwise,
                "tp_comm": self.tp_f, "cp_comm": self.cp_f, "ep_comm": self.ep - self.ep_hidden_f}

    def backward(self, recompute: str) -> dict:
        """The input- and weight-gradient GEMMs, the attention core's backward, twice the
        elementwise work; TP's conjugate collectives; plus recompute."""
        out = {"compute": self.dgrad + self.wgrad + self.attention_bwd + self.core_bwd,
               "elementwise": 2 * self.elementwise,
               "tp_comm": self.tp_b, "cp_comm": self.cp_b, "ep_comm": self.ep - self.ep_hidden_b}
        if recompute == "full":  # the forward again, its TP collectives included
            for k, v in self.forward().items():
                out[k] = out[k] + v / self.every  # not +=: with arrays it writes into self
        elif recompute == "selective" and self.op_share is not None:  # torchtitan's op
            # policy: the GEMMs it does not keep and every elementwise op, not attention
            out["compute"] = out["compute"] + self.gemm * self.op_share
            out["elementwise"] = out["elementwise"] + self.elementwise
        elif recompute == "selective" and self.rerun is not None:  # Megatron's modules
            for k, v in self.rerun.items():  # (ledger.step.recompute)
                out[k] = out[k] + v
        elif recompute == "selective":  # the attention core only, not a recurrent mixer
            out["compute"] = out["compute"] + self.attention - self.recurrent
            out["elementwise"] = out["elementwise"] + self.core_elementwise
        return out


def attention_peak(cfg, gpu):
    """The peak the attention core's QK^T and PV run at where they are priced as GEMMs (no
    measured fused kernel): the GPU's FP8 peak under ``fp8_attention``, else None (BF16,
    ``gemm_s``'s default)."""
    if not fp8_attention(cfg) or not getattr(gpu, "fp8_flops", 0.0) > 0:
        return None
    return gpu.fp8_flops


def local_share(model: ModelSpec, cfg, gpu, keys, fp8: bool):
    """(share of the core's FLOPs in sliding-window layers, their kernel's measured
    (forward, backward) shares of the peak) where cuDNN's window kernel is measured for the
    GPU's die at a window at least the model's (``ledger.system.attention.window_shares``;
    its FP8 kernel's under FP8 attention): those layers' FLOPs run at the window kernel's
    rate, the rest at the causal kernel's. (0.0, (1.0, 1.0)) elsewhere: context
    parallelism, a model whose global layers have their own head widths (Gemma 4), and
    DeepSeek-V4's compressed attention, which does not run TE's fused window kernel (its
    window is one term of its own sparse core, priced as before)."""
    none = 0.0, (1.0, 1.0)
    if model.global_attention is not None or model.compressed is not None:
        return none
    rates = window_shares(gpu.name, keys, model.sliding_window, fp8=fp8)
    total = keys_factor(model)
    local = local_keys_factor(model, model.sliding_window or 0) / total if total else 0.0
    if rates is None or not local:
        return none
    return np.where(np.asarray(cfg.cp) == 1, local, 0.0), rates  # cp: a planner's grid too


def layer_times(model: ModelSpec, cfg, system: System, links: dict, cal,
                 tp_overlap: bool = False) -> LayerTime:
    """One layer, one micro-batch, one GPU. ``cfg`` may hold numpy arrays for its sizes
    (the planner's grid); its categorical fields are plain values. ``cal``: the time
    model's constants (``ledger.step.timing.Calibration``)."""
    gpu = system.gpu
    tokens = model.seq_len * cfg.micro_batch / cfg.cp  # this GPU's tokens per micro-batch
    tuned = tuned_gemms(model, cfg, tokens, gpu, cal) if getattr(cfg, "finetune", None) \
        else None
    gemm = layer_gemms_s(model, cfg, tokens, gpu, cal) if tuned is None else tuned.forward
    heads, d, dv = model.heads / cfg.tp, model.head_dim, model.v_head_dim  # QK, PV widths
    keys = model.seq_len / cfg.cp  # one chunk's keys (ring) or the whole sequence (Ulysses)
    if cfg.cp_kind == "ulysses":
        heads, keys, q_tokens = heads / cfg.cp, model.seq_len, model.seq_len * cfg.micro_batch
    else:
        q_tokens = tokens
    # causal flash kernels skip the masked half, and local layers' blocks beyond their
    # window or chunk (flops.keys_factor); a materialised s x s score matrix does neither
    skip = 0.5 * keys_factor(model) if cfg.flash_attention else 1.0
    pk = attention_peak(cfg, gpu)
    widths = [(1, d, dv)] if model.global_attention is None else [  # global layers' own
        (n, m.head_dim, m.v_head_dim) for n, m in  # head widths (Gemma 4)
        ((n, model.attention_of(k)) for k, n in model.kind_counts.items() if k.attention)]
    chunks = 1 if cfg.cp_kind == "ulysses" else cfg.cp
    weight = heads * chunks * skip * model.attention_layers / model.layers
    rates = attention_shares(gpu.name, keys, fp8=pk is not None,
                             head_dim=max(w for _, w, _ in widths)) if cfg.flash_attention \
        else None
    if rates is None:  # QK^T and PV as the batched GEMMs they are (scores materialised,
        # or a GPU with no measured fused kernel), at the FP8 peak under FP8 attention
        per_chunk = sum(n * (gemm_s(q_tokens, keys, dq, gpu, cal, peak=pk)
                             + gemm_s(q_tokens, v, keys, gpu, cal, peak=pk))
                        for n, dq, v in widths) / sum(n for n, _, _ in widths)
        core_f = weight * per_chunk
        core_b = 2 * core_f
    else:  # the fused kernel at its measured rate (ledger.system.attention; its FP8 kernel's
        # under FP8 attention): the forward's 2 q k (d + dv) FLOPs a head, the backward's 2.5x
        flops = weight * sum(n * 2 * q_tokens * keys * (dq + v) for n, dq, v in widths) \
            / sum(n for n, _, _ in widths)
        local, wrates = local_share(model, cfg, gpu, keys, pk is not None)
        core_f = flops * ((1 - local) / rates[0] + local / wrates[0]) / gpu.bf16_flops
        core_b = 2.5 * flops * ((1 - local) / rates[1] + local / wrates[1]) / gpu.bf16_flops
    # the layers that attend, and the recurrent mixers' chunked cores (ledger.step.gemm),
    # their backward twice their forward as before; DeepSeek-V4's indexer scores
    # (ledger.step.gemm.indexer_core_s) and its indexer loss, whose backward runs in the
    # forward (ledger.step.indexer_loss): no backward of their own
    scan = recurrent_core_s(model, cfg, tokens, gpu, cal)
    recurrent = scan + indexer_core_s(model, cfg, tokens, gpu, cal) \
        + indexer_loss_s(model, cfg, tokens, gpu, cal)
    attention = core_f + recurrent

    written = written_dtype(cfg)

    def act(flash: bool):  # the bytes the framework's own layer writes (ledger.arch.activations),
        # without dropout masks, as benchmarks/fit.py calibrated elementwise_traffic on them;
        # a CPU-offloaded layer writes them all the same (its copies to the host run on a
        # side stream: TE cpu_offload.py, not priced); under FP8 attention the q, k, v its
        # kernels write in BF16 (the FP8 copies it keeps come from a cast beside them, whose
        # own pass is not priced: ledger.frameworks.fp8_attention), and so under a low-
        # precision recipe the linear layers' inputs (``recompute.written_dtype``): TE keeps
        # them quantized (the memory model's table) but the attention core, the activation,
        # the Mamba mixer's norm or the dispatcher that makes each writes the activation
        # dtype, the quantizer reading it (module/linear.py L378-397, L420-434; TE's
        # fused norm writes both row- and column-wise copies, MXFP8's as many bytes as
        # BF16's: layernorm_linear.py L222-267 @ NVIDIA/TransformerEngine d0067d0d)
        return activation_bytes_per_layer(model, written, flash=flash, recompute="none",
                                          dropout=0.0, offload=False, fp8_qkv=False)
    traffic = cal.elementwise_traffic / gpu.hbm_bytes_per_s
    saved = act(cfg.flash_attention)
    # the routed experts' eager passes (clamped GLU, fc2 bias: ledger.step.eager), their own
    # bytes at the HBM rate; LayerTime runs the backward as twice the forward's elementwise
    # time, so a third of both directions' bytes stands for the forward (their sum is exact)
    eager = (sum(expert_pass_bytes(model, cfg, tokens, gpu)) + sum(rope_pass_bytes(
        model, cfg, tokens)) + sum(dispatch_pass_bytes(model, cfg, tokens))
        + sum(nvfp4_pass_bytes(model, cfg, tokens)) + sum(amax_pass_bytes(model, cfg, tokens))
    ) / 3.0 / gpu.hbm_bytes_per_s  # and YaRN's eager RoPE, the dispatcher's permutations,
    # NVFP4's extra quantization reads, current scaling's amax passes
    # the fused grouped MLP's GEMM epilogues write the experts' activation tensors: no
    # activation kernel of its own (ledger.step.eager.fused_grouped_mlp)
    fused = fused_grouped_mlp(model, cfg, gpu)
    fused = fused * routed_activation_bytes(model, written) if np.any(fused) else 0.0
    elementwise = traffic * (saved - fused) + eager
    core = traffic * (saved - act(True)) if not cfg.flash_attention else 0.0 * saved
    s_act = tokens * model.hidden * cfg.act_bytes
    tp_f, tp_b, tp_raw_f, tp_raw_b = tp_times(cfg, s_act, gemm, links, system, tp_overlap)
    blocks = block_layers(model) / model.layers  # a one-block layer issues half of them
    tp_f, tp_b, tp_raw_f, tp_raw_b = (t * blocks for t in (tp_f, tp_b, tp_raw_f, tp_raw_b))
    cp_f, cp_b, cp_raw = cp_times(model, cfg, tokens, attention, links, system)
    ep = ep_time(model, cfg, tokens, links, system)
    grads = (tuned.dgrad, tuned.wgrad) if tuned is not None else (
        gemm, gemm + rht_s(model, cfg, tokens, gpu, cal))  # NVFP4's Hadamard on wgrad
    again = forward_passes(cfg) - 1  # full recompute issues the forward's TP calls again
    routed = routed_gemms_s(model, cfg, tokens, gpu, cal) if model.is_moe else 0.0
    # a container whose fused dGLU-with-bias kernel regressed (cudnn-frontend#256): what
    # it adds to the backward's input-gradient GEMMs (ledger.step.eager)
    grads = (grads[0] + dglu_regression_s(model, cfg, gpu, routed), grads[1])
    share, rerun = op_share(model, cfg), None
    if cfg.recompute == "selective" and share is None:  # the modules' forward again
        mods = recompute_modules(cfg)
        # a dense MLP block issues half of a two-block layer's TP collectives (tp_times'
        # figure, which tp_f carries times ``blocks``)
        mlp_tp = ("mlp" in mods) * layer_share(model, "dense") / 2 / blocks
        # core_attn checkpoints the attention core alone (attention.py L393-394, L495 @
        # d98e8a64); Megatron-Core's Mamba mixer and its layer checkpoint nothing
        # (their forwards, ssm/mamba_mixer.py L474-537, ssm/mamba_layer.py L122-181, call
        # no checkpoint): the SSD's forward is not run again
        rerun = {"compute": rerun_gemms_s(model, cfg, tokens, gpu, cal, mods)
                 + ("core_attn" in mods) * (attention - scan),
                 "elementwise": traffic * rerun_bytes(model, cfg, mods)
                 + ("core_attn" in mods) * core + eager_rerun_s(model, cfg, tokens, gpu, mods),
                 "tp_comm": mlp_tp * tp_f, "ep_comm": ("moe" in mods) * ep}
        again = again + mlp_tp
    hidden = shared_hidden_s(cfg, ep, *shared_gemms_s(model, cfg, tokens, gpu, cal))
    return LayerTime(gemm, attention, elementwise, core, tp_f, tp_b, cp_f, cp_b, ep,
                  (1 + again) * tp_raw_f + tp_raw_b, cp_raw, share,
                  1 / recomputed_share(model, cfg), *grads, routed,
                  recurrent_core_bwd_s(model, cfg, tokens, gpu, cal), rerun, *hidden,
                  attention_bwd=core_b + 2 * scan, recurrent=scan)

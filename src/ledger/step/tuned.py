"""A fine-tune's GEMM work in one layer: which weight-gradient GEMMs still run, the
adapters' own GEMMs, and QLoRA's dequantisation (``ledger.step.timing`` adds them where
a pre-training layer runs its forward, input-gradient and weight-gradient GEMMs).

- Weight gradients: autograd computes one only for a weight that requires grad, so a
  frozen matrix runs its forward and its input-gradient GEMM and skips the third (Hu et
  al. 2021, LoRA, sec. 4.2). Under peft's ParamWrapper (fused experts, a router's weight)
  the weight is parametrised as W + s B A, which does require grad: its full
  weight-gradient GEMM runs, then dA and dB come from it (peft tuners/lora/layer.py
  L2572-2594, ``_activate_lora``: ``nn.utils.parametrize.register_parametrization``).
- LoRA on a module (tuners/lora/layer.py L1088-1102): x A (tokens x in x r) and (x A) B
  (tokens x r x out) forward, their input and weight gradients backward - thin GEMMs of
  width r, which ``gemm_s`` prices at their low efficiency; under TP the adapter follows
  its matrix (``ledger.finetune.trainable``). DoRA adds B(A(I)) once a forward for its
  norm, an identity of in rows through both adapters: 2 in r (in + out) FLOPs
  (tuners/lora/dora.py L94-99, ``get_lora_weight``; the norm is detached, no backward),
  and with dropout the base matrix once more on the dropped-out input (dora.py L163;
  tuners/lora/variants.py L243-246 passes the base result only without dropout).
- ParamWrapper: the delta s B A of every local expert, a batched in x r x out product
  (``get_delta_factors``, layer.py L2525, folded by ``_LoraFactorsProxy``'s baddbmm) - twice
  a forward, as torch's ``register_parametrization`` evaluates a parametrisation once to
  check it (torch/nn/utils/parametrize.py L586-588) before the forward's cached one - and
  dA, dB in the backward; a router's 2-D weight takes B A once (``get_delta_weight``).
- QLoRA: each NF4 linear dequantises its whole weight to the compute dtype in the forward
  and again in the backward (bitsandbytes backends/cuda/ops.py L904-917
  ``_dequant_linear_fallback``, autograd/_functions.py L384): memory traffic of the packed
  codes and absmax read and the bf16 weight written, at HBM bandwidth, before the GEMM.

Layers that train nothing still run their backward to carry the gradient to the layers
below them (a frozen prefix needs none: not taken off).
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.config import expert_tp
from ledger.finetune import layer_adapters, modules, nf4_bytes_per_param, resolve
from ledger.step.gemm import _peaks, gemm_s, kind_gemms_s


@dataclass(frozen=True)
class TunedGemms:
    """One layer's GEMM seconds under a fine-tune, averaged over the stack, one
    micro-batch on one GPU: forward, input gradients, weight gradients."""

    forward: object
    dgrad: object
    wgrad: object


def _local(lin, cfg):
    """(in, out) of a matrix's shard on one GPU: its TP split, or the experts' over ETP
    (up column-, down row-parallel)."""
    if lin.experts > 1:
        split, tp = ("row" if lin.name in ("down_proj", "w2") else "col"), expert_tp(cfg)
    else:
        split, tp = lin.split, cfg.tp
    if split == "col":
        return lin.in_features, lin.out_features / tp
    if split == "row":
        return lin.in_features / tp, lin.out_features
    return lin.in_features, lin.out_features


def _trained_share(model, ft, i, kind, adapters) -> dict:
    """Per component, the share of this layer's weights whose weight gradient runs."""
    weights: dict[str, float] = {}
    trained: dict[str, float] = {}
    wrapped = [a.target for a in adapters if not a.target.module]
    for lin in modules.layer(model, kind):
        weights[lin.kind] = weights.get(lin.kind, 0) + lin.weights
        runs = lin in wrapped if ft.adapters else not (ft.frozen_layer(i) or lin.kind in
                                                       ft.freeze)
        trained[lin.kind] = trained.get(lin.kind, 0) + lin.weights * runs
    return {k: trained[k] / weights[k] for k in weights if weights[k]}


def _adapter_s(model, cfg, tokens, gpu, cal, adapters):
    """(forward, backward) seconds of a layer's adapters (module docstring)."""
    fwd = bwd = 0.0
    dropout = cfg.finetune.lora_dropout > 0
    for a in adapters:
        i, o = _local(a.target, cfg)
        r = a.rank
        if a.target.module:
            t = gemm_s(tokens, r, i, gpu, cal) + gemm_s(tokens, o, r, gpu, cal)
            fwd, bwd = fwd + t, bwd + 2 * t
            if a.dora:  # B(A(I)) for the weight norm (no backward: detached)
                fwd = fwd + gemm_s(i, r, i, gpu, cal) + gemm_s(i, o, r, gpu, cal)
            if a.dora and dropout:  # the base matrix again on the dropped-out input
                base = gemm_s(tokens, o, i, gpu, cal)
                fwd, bwd = fwd + base, bwd + base  # its input gradient alone: W is frozen
        else:  # peft's ParamWrapper: the delta, of every local expert a batched GEMM
            stacked = a.target.experts > 1
            t = gemm_s(i, o, r, gpu, cal, count=a.target.experts / cfg.ep if stacked else 1)
            fwd, bwd = fwd + (2 if stacked else 1) * t, bwd + 2 * t
    return fwd, bwd


def _dequant_s(model, cfg, kind, gpu) -> float:
    """Seconds one pass spends dequantising a layer's NF4 weights on one GPU."""
    ft = cfg.finetune
    rate = nf4_bytes_per_param(ft.quant_block, ft.double_quant) + ft.compute_bytes
    local = sum(lin.weights / (cfg.tp if lin.split != "none" else 1)
                for lin in modules.layer(model, kind) if lin.quantised)
    return local * rate / gpu.hbm_bytes_per_s


def tuned_gemms(model, cfg, tokens, gpu, cal) -> TunedGemms:
    """A layer's GEMM seconds under ``cfg.finetune`` (module docstring), averaged over
    the stack like ``ledger.step.gemm.layer_gemms_s``."""
    ft = cfg.finetune
    pk = _peaks(cfg, gpu)
    targets = resolve(model, ft) if ft.adapters else None
    base = {k: kind_gemms_s(model, k, cfg, tokens, gpu, cal, pk) for k in model.kind_counts}
    deq = {k: _dequant_s(model, cfg, k, gpu) if ft.quantized else 0.0
           for k in model.kind_counts}
    groups: dict[tuple, list[int]] = {}  # layers alike: one kind, frozen or not
    for i in range(model.layers):
        groups.setdefault((model.layer_kind(i), ft.frozen_layer(i)), []).append(i)
    fwd = dgrad = wgrad = 0.0
    for (kind, _), layers in groups.items():
        i, n = layers[0], len(layers)
        adapters = layer_adapters(model, ft, i, targets)
        share = _trained_share(model, ft, i, kind, adapters)
        a_fwd, a_bwd = _adapter_s(model, cfg, tokens, gpu, cal, adapters)
        gemms = sum(base[kind].values())
        fwd = fwd + n * (gemms + deq[kind] + a_fwd)
        dgrad = dgrad + n * (gemms + deq[kind] + a_bwd / 2)
        wgrad = wgrad + n * (sum(t * share.get(c, 0.0) for c, t in base[kind].items())
                             + a_bwd / 2)
    n = model.layers
    return TunedGemms(fwd / n, dgrad / n, wgrad / n)


def head_wgrad_share(model, ft) -> float:
    """1 when the output head's weight gradient runs, else 0 (tied: the embedding's)."""
    if ft is None:
        return 1.0
    own = "embedding" if model.tied_embeddings else "output"
    return float(not ft.adapters and own not in ft.freeze and "output" not in ft.freeze)

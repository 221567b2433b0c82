"""LoRA adapters inside one layer: what they save for backward and the FLOPs they add.

peft's LoRA forward (tuners/lora/layer.py L1088-1102) runs the frozen base layer, then
for the adapter ``x = _cast_input_dtype(x, lora_A.weight.dtype)`` - a copy of the input
in the adapters' fp32 (tuners_utils.py L2220-2235) - then ``lora_B(lora_A(dropout(x)))
* scaling``. Saved per token of one adapted matrix: A's fp32 input (in features; with
dropout > 0 the dropout output and its mask as well) and B's input, A's r-wide fp32
output. The scaling and the sum save nothing. Under TP, a column-parallel matrix's
adapter reads the whole (gathered) input, a row-parallel one its 1/tp share. Adapters on
transformers 5's fused expert parameters (peft's ParamWrapper) fold B A into the weight
instead and are not priced here.

FLOPs per token: 2 r (in + out) forward and twice that backward for each adapter (its
input and weight gradients), 6 r (in + out) in all; the frozen base skips its weight
gradients, 2 in x out per matrix of the 6 (Hu et al. 2021, LoRA, sec. 4.2: no gradients
or optimizer state for the frozen weights). ``finetune_flops_per_token`` is what a
fine-tune's MFU counts; ``ledger.step.tuned`` times the same GEMMs.
"""
from __future__ import annotations

from ledger.arch.flops import model_flops_per_token
from ledger.finetune import FineTune, edge_adapters, layer_adapters, resolve
from ledger.finetune import modules as weights

FP32 = 4
MASK = 1  # a bool dropout mask


def adapter_activation_bytes(model, ft: FineTune, kind, micro_batch, tp, cp) -> float:
    """Bytes one layer's adapters save for backward, per GPU and micro-batch; ``kind``: the
    layer's ``LayerKind`` (or True / False: an MoE / a dense layer)."""
    if ft is None or not ft.adapters:
        return 0.0

    def same(i):
        return model.layer_kind(i) == kind if not isinstance(kind, bool) \
            else model.is_moe_layer(i) == kind
    layer = next((i for i in range(model.layers) if same(i) and not ft.frozen_layer(i)), None)
    if layer is None:
        return 0.0
    tokens = model.seq_len * micro_batch / cp
    per_token = 0.0
    for a in layer_adapters(model, ft, layer, resolve(model, ft)):
        t = a.target
        if not t.module:
            continue
        width = t.in_features / (tp if t.split == "row" else 1)
        dropout = (FP32 + MASK) * width if ft.lora_dropout > 0 else 0.0
        per_token += FP32 * width + dropout + FP32 * a.rank
    return tokens * per_token


def adapter_flops_per_token(model, ft: FineTune) -> float:
    """Training FLOPs per token the adapters add (module docstring): 6 x the adapter
    parameters a token passes through (the top-k share of expert adapters), as LoRA's
    x A B would compute them (peft folds an expert adapter into the weight instead:
    ``ledger.step.tuned`` times that)."""
    if ft is None or not ft.adapters:
        return 0.0
    t = resolve(model, ft)
    out = sum(6 * a.params for a in edge_adapters(model, ft, t) if a.target.kind == "output")
    for i in range(model.layers):
        for a in layer_adapters(model, ft, i, t):
            share = model.top_k / model.num_experts if a.target.experts > 1 else 1.0
            out += 6 * a.params * share
    return out


def frozen_wgrad_flops_per_token(model, ft: FineTune) -> float:
    """Weight-gradient FLOPs the frozen base matrices skip: 2 x their weights per token
    (routed experts at their top-k share), the output head's when it does not train. A
    matrix adapted as a parameter (peft's ParamWrapper: fused experts, a router's weight)
    still runs its weight gradient (``ledger.step.tuned``) and skips nothing."""
    if ft is None:
        return 0.0
    t = resolve(model, ft) if ft.adapters else None
    out = 0.0
    for i in range(model.layers):
        wrapped = [a.target for a in layer_adapters(model, ft, i, t) if not a.target.module]
        for lin in weights.layer(model, model.layer_kind(i)):
            frozen = (ft.adapters or ft.frozen_layer(i) or lin.kind in ft.freeze) \
                and lin not in wrapped
            share = model.top_k / model.num_experts if lin.experts > 1 else 1.0
            out += 2 * lin.weights * share * frozen
    head = model.tied_embeddings and "embedding" in ft.freeze
    if ft.adapters or "output" in ft.freeze or head:
        out += 2 * model.vocab * model.hidden
    return out


def finetune_flops_per_token(model, ft: FineTune | None) -> float:
    """Model FLOPs per token of a fine-tune, what its MFU counts: the forward and the
    input gradients of every matrix, the weight gradients of those that train, the
    adapters' own (6 per adapter parameter), the attention and recurrent cores as in
    pre-training - ``model_flops_per_token`` less the weight gradients a frozen base
    skips. The convention of litgpt (litgpt/utils.py L458-479 at 26857050,
    ``estimate_flops``: 3 passes for trainable parameters, 2 for frozen ones) and of
    NeMo Automodel's LoRA MFU (nemo_automodel/recipes/llm/benchmark.py L200-210 at
    36044ad3: "Backward to parameters: linear in size of trainable weights"); recompute
    and peft's ParamWrapper detour are hardware FLOPs, not counted."""
    base = model_flops_per_token(model)
    if ft is None:
        return base
    return base - frozen_wgrad_flops_per_token(model, ft) + adapter_flops_per_token(model, ft)

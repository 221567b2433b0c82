"""Bytes of training state: the resident three (params, grads, optimizer) and activations.

>>> from ledger.model import llama3_70b
>>> st = state_bytes(llama3_70b(), "bf16", "adam")
>>> (st.params_bytes, st.grads_bytes, st.optim_bytes) == (2 * 70553706496, 2 * 70553706496,
...                                                       12 * 70553706496)
True
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.errors import LedgerError


@dataclass(frozen=True)
class StateBytes:
    """Resident training state in bytes: parameters, gradients, optimizer state."""

    params_bytes: float
    grads_bytes: float
    optim_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.params_bytes + self.grads_bytes + self.optim_bytes

    def scaled(self, factor: float) -> StateBytes:
        return StateBytes(self.params_bytes * factor, self.grads_bytes * factor,
                          self.optim_bytes * factor)


@dataclass(frozen=True)
class Precision:
    """Bytes per parameter of each resident copy."""

    param: int  # the weights the GEMMs read
    grad: int  # the gradient buffer that is reduced
    master: int  # fp32 master weights kept by the optimizer (0 when params are fp32)
    moment: int  # each optimizer moment


PRECISIONS = {
    "bf16": Precision(param=2, grad=2, master=4, moment=4),  # mixed precision (ZeRO paper)
    "fp16": Precision(param=2, grad=2, master=4, moment=4),
    "bf16-fp32grad": Precision(param=2, grad=4, master=4, moment=4),  # Megatron main grads
    "fp32": Precision(param=4, grad=4, master=0, moment=4),
}
OPTIMIZER_MOMENTS = {"adam": 2, "adamw": 2, "sgd-momentum": 1, "sgd": 0}


def bytes_per_param(precision: str = "bf16", optimizer: str = "adam") -> StateBytes:
    """(params, grads, optimizer) bytes for one parameter.

    >>> bytes_per_param("bf16", "adam")
    StateBytes(params_bytes=2, grads_bytes=2, optim_bytes=12)
    >>> bytes_per_param("fp32", "sgd").total_bytes
    8
    """
    if precision not in PRECISIONS:
        raise LedgerError("precision", f"unknown precision {precision!r}; "
                                       f"known: {', '.join(PRECISIONS)}")
    if optimizer not in OPTIMIZER_MOMENTS:
        raise LedgerError("optimizer", f"unknown optimizer {optimizer!r}; "
                                       f"known: {', '.join(OPTIMIZER_MOMENTS)}")
    p = PRECISIONS[precision]
    return StateBytes(p.param, p.grad, p.master + OPTIMIZER_MOMENTS[optimizer] * p.moment)


def state_bytes(model, precision: str = "bf16", optimizer: str = "adam") -> StateBytes:
    """Whole-model resident state: bytes_per_param x the exact parameter count."""
    per = bytes_per_param(precision, optimizer)
    n = model.params
    return StateBytes(per.params_bytes * n, per.grads_bytes * n, per.optim_bytes * n)


RECOMPUTE = ("none", "selective", "full")


def activation_bytes_per_layer(*, seq_len: int, micro_batch: int, hidden: int, heads: int,
                               tp: int = 1, cp: int = 1, sequence_parallel: bool = True,
                               flash: bool = True, recompute: str = "none") -> float:
    """Bytes one transformer layer saves for backward, per GPU, for one micro-batch.

    Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
    Models", for a GPT layer with 16-bit activations and 1-byte dropout masks:

    - eq. 1, no parallelism:           s*b*h * (34 + 5*a*s/h)
    - eq. 2, tensor parallel t:        s*b*h * (10 + 24/t + 5*a*s/(h*t))
    - eq. 4, tensor + sequence par.:   s*b*h * (34 + 5*a*s/h) / t

    The 10*s*b*h term is what TP alone cannot split (LayerNorm inputs, dropout masks of
    the residual stream); SP splits it along the sequence. The 5*a*s/h term is the
    attention score, softmax and its dropout mask (a*s^2*b * 5 bytes); FlashAttention
    never materialises them, so ``flash=True`` drops it. Context parallelism splits
    the sequence, so every term divides by cp.

    Recompute (Korthikanti sec. 5): ``selective`` recomputes the attention core, so the
    5as/h term is not kept (as with flash); ``full`` keeps only each layer's input,
    2sbh bytes (split by t under SP), and recomputes the rest in the backward.

    >>> activation_bytes_per_layer(seq_len=8192, micro_batch=1, hidden=16384, heads=128,
    ...                            tp=8) / 2**20
    544.0
    """
    if recompute not in RECOMPUTE:
        raise LedgerError("recompute", f"must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    s, b, h, a = seq_len, micro_batch, hidden, heads
    if recompute == "full":
        return s * b * h * 2.0 / (tp if sequence_parallel else 1) / cp
    score = 0.0 if flash or recompute == "selective" else 5.0 * a * s / h
    if sequence_parallel:  # without TP (t = 1) both forms agree
        per_token = (34.0 + score) / tp
    else:
        per_token = 10.0 + 24.0 / tp + score / tp
    return s * b * h * per_token / cp


def llama_activation_bytes_per_layer(*, seq_len: int, micro_batch: int, hidden: int,
                                     heads: int, kv_heads: int, head_dim: int,
                                     ffn_hidden: int, tp: int = 1, cp: int = 1,
                                     sequence_parallel: bool = True, flash: bool = True,
                                     recompute: str = "none", act_bytes: int = 2) -> float:
    """Bytes a Llama decoder layer (RMSNorm, rotary GQA attention, SwiGLU MLP) keeps for
    backward, tensor by tensor, as ``ledger.verify`` measures them with saved-tensor
    hooks (tests/test_activations.py); T = s*b/cp tokens, e = act_bytes:

    - each RMSNorm: its input, the per-token rsqrt, the normalised input and the scaled
      output the next GEMMs read: (3h + 1) T elements, two norms a layer
    - flash attention (fused, GQA-native): q and the output at H heads, k and v at the
      K/V heads, (2H + 2K) d T elements, plus an fp32 log-sum-exp per head and token
    - materialised attention: q, and k, v repeated to H heads, the softmax probabilities
      b H s^2 (per CP rank: its s/cp queries against s keys), the output copy the output
      projection reads, 4 H d T elements, and the s^2 boolean mask (1 byte each)
    - SwiGLU MLP: gate, silu(gate), up and their product: 4 f T elements
    - recompute: ``full`` keeps only the layer input (h T); ``selective`` recomputes the
      materialised attention core, so the probabilities and the mask are not kept (with
      flash there is nothing to recompute)

    TP splits the heads and the MLP width (and, under sequence parallelism, the norms'
    tokens). Unlike ``activation_bytes_per_layer`` (Korthikanti's 34 sbh GPT with dropout,
    the seed's figure), every term here is one tensor this layer really saves.

    >>> llama_activation_bytes_per_layer(seq_len=16, micro_batch=2, hidden=64, heads=4,
    ...     kv_heads=2, head_dim=16, ffn_hidden=128, act_bytes=4)
    140032.0
    """
    if recompute not in RECOMPUTE:
        raise LedgerError("recompute", f"must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    e, s, b = act_bytes, seq_len, micro_batch
    tokens = s * b / cp
    if recompute == "full":
        return tokens * hidden * e / (tp if sequence_parallel else 1)
    norms = 2 * (3 * hidden + 1) * tokens * e / (tp if sequence_parallel else 1)
    mlp = 4 * ffn_hidden * tokens * e / tp
    if flash:
        attention = (2 * heads + 2 * kv_heads) * head_dim * tokens * e / tp
        attention += 4 * heads * tokens / tp  # fp32 log-sum-exp
    else:
        attention = 4 * heads * head_dim * tokens * e / tp
        if recompute != "selective":
            attention += heads / tp * b * (s / cp) * s * e + (s / cp) * s  # probs + mask
    return norms + attention + mlp

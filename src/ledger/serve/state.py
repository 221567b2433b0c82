"""A recurrent layer's state on one GPU, as vLLM keeps it: a fixed set of tensors per
sequence, whatever its length, in one page (MambaSpec.page_size_bytes: the sum over its
tensors of elements x bytes, vllm/v1/kv_cache_interface.py:571-580).

The shapes are vLLM's MambaStateShapeCalculator and the dtypes its
MambaStateDtypeCalculator (vllm/model_executor/layers/mamba/mamba_utils.py at the commit
in ``ledger.serve.engine``), per mixer (``ledger.anatomy.mixers``), with no speculative
tokens (num_spec = 0):

  mamba1     conv (inner / tp, k - 1)            ssm (inner / tp, N)                 :147-159
  mamba2     conv ((inner + 2 g' N) / tp, k - 1) ssm (heads / tp, head_dim, N)       :162-187
             g' = groups, or tp when groups = 1 and tp does not divide them         :200-210
  gdn        conv ((2 kh dk + vh dv) / tp, k - 1) ssm (vh / tp, dv, dk)               :213-234
  kda        conv q, k, v (heads d / tp, k - 1) each, state (heads / tp, d, d)       :237-267
  lightning  state (heads / tp, d, d)                                                :130-137
  conv       conv (hidden / tp, L - 1)  (LFM2's short convolution)                   :190-198

The conv state keeps k - 1 columns, the inputs the next token's convolution still needs;
transformers 5.23.0 keeps k (LinearAttentionLayer, cache_utils.py:1176-1180, :1223-1226).
Dtypes: the conv state in --mamba-cache-dtype (auto: the model's, bf16 here), the ssm
state in --mamba-ssm-cache-dtype (auto: the conv state's; :84-96), except KDA's state,
always float32 (:119-125), and Nemotron-H, whose ssm state vLLM keeps in the config's
mamba_ssm_cache_dtype, float32 by default (vllm/model_executor/models/config.py:398-425;
transformers' NemotronHConfig defaults it to "float32", configuration_nemotron_h.py:132).
transformers keeps every ssm state it computes in float32 on CPU (measured in
tests/test_serve_hf.py; its reference kernels compute them in float32, e.g.
models/mamba/modeling_mamba.py:157, models/qwen3_next/modeling_qwen3_next.py:413), except
MiniMax's lightning state, which stays in the model's dtype (modeling_minimax.py:201-209).

>>> from ledger.anatomy.mixers import Mamba
>>> s = mamba2(Mamba(version=2, inner=8192, state=128, heads=128, groups=8), 8, "bfloat16",
...            "bfloat16")
>>> [t.shape for t in s.tensors], s.bytes   # (8192 + 2 x 8 x 128) / 8 = 1,280 channels
([(1280, 3), (16, 64, 128)], 269824)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ledger.errors import LedgerError

# vLLM's MambaDType (vllm/config/cache.py:35) and bytes per element; "auto" is the
# model's dtype
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
STATE_DTYPES = ("auto", *DTYPE_BYTES)
MODEL_DTYPE = "bfloat16"  # the checkpoint's, as the weights
# model_types whose recurrent layers vLLM has no model for at that commit (no entry in
# vllm/model_executor/models/registry.py): Bailing's KDA with full-rank gates, LFM3
UNSERVED = {"bailing_hybrid": "BailingHybridForCausalLM", "lfm3": "Lfm3ForCausalLM"}
# families whose ssm state vLLM keeps in float32 unless told otherwise
FLOAT32_SSM = {"nemotron_h"}
# the sequence mixers (ledger.anatomy.mixers.MIXERS) that keep a state
RECURRENT = ("mamba", "linear", "conv", "attention+mamba")


def has_state(model) -> bool:
    """Some layer of ``model`` runs a recurrent mixer."""
    return any(k.mixer in RECURRENT for k in model.kind_counts)


@dataclass(frozen=True)
class StateTensor:
    """One tensor of a recurrent state, per sequence, on one GPU."""

    name: str  # "conv", "conv_q", "ssm", ...
    shape: tuple[int, ...]
    dtype: str  # a key of DTYPE_BYTES
    conv: bool = False  # a convolution's window of past inputs (the rest: a recurrent state)

    @property
    def bytes(self) -> int:
        return math.prod(self.shape) * DTYPE_BYTES[self.dtype]


@dataclass(frozen=True)
class RecurrentState:
    """What one recurrent layer keeps per sequence on one GPU."""

    mixer: str  # "mamba1" | "mamba2" | "gdn" | "kda" | "lightning" | "conv"
    tensors: tuple[StateTensor, ...]

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.tensors)

    def transformers_layout(self) -> RecurrentState:
        """The same shards as transformers 5.23.0 keeps them: one more conv column, in the
        model's dtype, and (but for lightning attention) the ssm state in float32 (module
        docstring)."""
        out = []
        for t in self.tensors:
            if t.conv:
                out.append(StateTensor(t.name, (*t.shape[:-1], t.shape[-1] + 1),
                                       MODEL_DTYPE, True))
            else:
                dtype = MODEL_DTYPE if self.mixer == "lightning" else "float32"
                out.append(StateTensor(t.name, t.shape, dtype))
        return RecurrentState(self.mixer, tuple(out))


def _split(field: str, value: int, tp: int) -> int:
    """value / tp, as vLLM's divide() asserts it (vllm/distributed/utils.py)."""
    if value % tp:
        raise LedgerError(field, f"{field}({value}) is not divisible by tp({tp}): vLLM splits "
                                 f"the recurrent state over the TP ranks")
    return value // tp


def _conv(name: str, channels: int, kernel: int, dtype: str) -> StateTensor:
    return StateTensor(name, (channels, kernel - 1), dtype, conv=True)


def mamba1(m, tp: int, conv: str, ssm: str) -> RecurrentState:
    inner = _split("mamba_inner", m.inner, tp)
    return RecurrentState("mamba1", (_conv("conv", inner, m.conv_kernel, conv),
                                     StateTensor("ssm", (inner, m.state), ssm)))


def mamba2_groups(m, tp: int) -> int:
    """Groups once vLLM has replicated them to accompany the head shards: groups, or tp
    when groups = 1 (extra_groups_for_head_shards, mamba_utils.py:200-210; the mixer
    allows no other case, mamba_mixer2.py:285-292)."""
    if m.groups % tp == 0:
        return m.groups
    if m.groups != 1:
        raise LedgerError("mamba_groups", f"mamba_groups({m.groups}) must be 1 or divisible by "
                                          f"tp({tp}) (vLLM's MambaMixer2)")
    return tp


def mamba2(m, tp: int, conv: str, ssm: str) -> RecurrentState:
    channels = _split("mamba_conv_dim", m.inner + 2 * mamba2_groups(m, tp) * m.state, tp)
    heads = _split("mamba_heads", m.heads, tp)
    return RecurrentState("mamba2", (_conv("conv", channels, m.conv_kernel, conv),
                                     StateTensor("ssm", (heads, m.head_dim, m.state), ssm)))


def gdn(la, tp: int, conv: str, ssm: str) -> RecurrentState:
    channels = _split("linear_conv_dim", la.conv_dim, tp)
    heads = _split("linear_value_heads", la.value_heads, tp)
    return RecurrentState("gdn", (_conv("conv", channels, la.conv_kernel, conv),
                                  StateTensor("ssm", (heads, la.value_dim, la.key_dim), ssm)))


def kda(la, tp: int, conv: str, ssm: str) -> RecurrentState:
    """Three convolutions (q, k, v) and a float32 state whatever the flags say."""
    width = _split("linear_width", la.value_width, tp)
    heads = _split("linear_heads", la.value_heads, tp)
    convs = tuple(_conv(f"conv_{x}", width, la.conv_kernel, conv) for x in "qkv")
    return RecurrentState("kda", (*convs, StateTensor("ssm", (heads, la.key_dim,
                                                              la.value_dim), "float32")))


def lightning(la, tp: int, conv: str, ssm: str) -> RecurrentState:
    """One K^T V state per head, in the conv state's dtype (linear_attention_state_dtype,
    mamba_utils.py:52-59)."""
    heads = _split("linear_heads", la.value_heads, tp)
    return RecurrentState("lightning", (StateTensor("ssm", (heads, la.key_dim, la.value_dim),
                                                    conv),))


def short_conv(sc, hidden: int, tp: int, conv: str, ssm: str) -> RecurrentState:
    """LFM2's gated short convolution over the hidden channels (vLLM reads the config's
    conv_dim, lfm2.py:470-474; transformers builds it over hidden_size)."""
    channels = _split("hidden", hidden, tp)
    return RecurrentState("conv", (_conv("conv", channels, sc.kernel, conv),))


def state_dtypes(model, mamba_cache_dtype: str = "auto",
                 mamba_ssm_cache_dtype: str = "auto") -> tuple[str, str]:
    """(conv, ssm) dtypes as vLLM resolves its two flags for ``model``."""
    conv = MODEL_DTYPE if mamba_cache_dtype == "auto" else mamba_cache_dtype
    if mamba_ssm_cache_dtype != "auto":
        return conv, mamba_ssm_cache_dtype
    return conv, "float32" if model.family in FLOAT32_SSM else conv


def layer_state(model, mixer: str, tp: int, dtypes: tuple[str, str]) -> RecurrentState | None:
    """The state of one layer whose sequence mixer is ``mixer`` (``ModelSpec.mixer``), or
    None for attention and for a layer without a mixer."""
    if mixer in ("mamba", "attention+mamba"):
        return (mamba1 if model.mamba.version == 1 else mamba2)(model.mamba, tp, *dtypes)
    if mixer == "linear":
        fn = {"gdn": gdn, "kda": kda, "lightning": lightning}[model.linear.kind]
        return fn(model.linear, tp, *dtypes)
    if mixer == "conv":
        return short_conv(model.conv, model.hidden, tp, *dtypes)
    return None

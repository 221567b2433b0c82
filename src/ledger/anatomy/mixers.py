"""The sequence mixers a hybrid decoder puts where attention would be, and the kind of
each layer.

A layer of a decoder is a sequence mixer and a channel MLP, each behind its norm. The
mixer is attention (``ModelSpec``'s attention fields), or one of the recurrent mixers
below; the MLP is dense, a mixture of experts, or absent (Mamba's blocks, Nemotron-H's
mixer-only layers). ``LayerKind`` names one combination, and ``ModelSpec.layer_kind(i)``
answers it for layer ``i``; the records hold the shape of each recurrent mixer, with its
exact parameter count and how Megatron-Core splits it over tensor parallelism.

- ``Mamba`` version 1: the selective scan (Gu & Dao 2023, arXiv:2312.00752), as
  transformers' ``MambaMixer`` builds it (models/mamba/modeling_mamba.py:302-330; Jamba
  adds RMSNorms on dt, B, C, models/jamba/modeling_jamba.py); version 2: the state-space
  dual (Dao & Gu 2024, arXiv:2405.21060), as Megatron-Core's ``MambaMixer``
  (megatron/core/ssm/mamba_mixer.py at d98e8a64) and transformers' ``Mamba2Mixer``
  (models/mamba2/modeling_mamba2.py:405-437) build it.
- ``LinearAttention``: Gated DeltaNet (Yang et al. 2024, arXiv:2412.06464; Megatron-Core
  megatron/core/ssm/gated_delta_net/, transformers models/qwen3_next/modeling_qwen3_next.py
  :599-624), Kimi Delta Attention (models/kimi_linear/modeling_kimi_linear.py:585-604,
  :325-328; full-rank gates: models/bailing_hybrid/modeling_bailing_hybrid.py:403-682) and
  MiniMax's lightning attention (models/minimax/modeling_minimax.py:135-138).
- ``ShortConv``: LFM2's gated short convolution (models/lfm2/modeling_lfm2.py).

Every count is held to transformers' meta-device build in ``tests/test_corpus.py``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ledger.errors import LedgerError, require_positive

MIXERS = ("attention", "mamba", "linear", "conv", "attention+mamba", "none")
MLPS = ("dense", "moe", "none")
LINEAR_KINDS = ("gdn", "kda", "lightning")


class LayerKind(NamedTuple):
    """What one layer is: its sequence mixer, its MLP and (attention) its window. Layers of
    one kind have the same parameters, FLOPs and saved tensors."""

    mixer: str = "attention"  # one of MIXERS
    mlp: str = "dense"  # one of MLPS
    window: int | None = None  # keys an attention query sees; None: all (global)
    compress: int = 0  # DeepSeek-V4: tokens pooled per compressed entry (0: none;
    #                    ``ledger.anatomy.compressed``)

    @property
    def moe(self) -> bool:
        return self.mlp == "moe"

    @property
    def attention(self) -> bool:
        return self.mixer in ("attention", "attention+mamba")

    def order(self) -> tuple:
        """A stable sort key (mixers, then MLPs in the order listed, then window)."""
        return MIXERS.index(self.mixer), MLPS.index(self.mlp), self.window or 0, \
            self.compress


def _count(name: str, v) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise LedgerError(name, f"must be an integer >= 0, got {v!r}")


def _flags(record, names) -> None:
    for f in names:
        if not isinstance(getattr(record, f), bool):
            raise LedgerError(f, f"must be true or false, got {getattr(record, f)!r}")


@dataclass(frozen=True, kw_only=True)
class GlobalAttention:
    """The attention shape of a model's global layers where it differs from its local
    ones' (``ModelSpec``'s own fields): Gemma 4's wider heads on its full-attention layers
    (models/gemma4_unified/modeling_gemma4_unified.py:341, per_layer_config), MiMo-V2-Flash's
    half as many K/V heads and no sinks there (models/mimo_v2_flash/modeling_mimo_v2_flash
    .py:339-360). A field left None keeps the model's."""

    head_dim: int | None = None
    kv_heads: int | None = None
    sinks: bool | None = None

    def __post_init__(self) -> None:
        for f in ("head_dim", "kv_heads"):
            if getattr(self, f) is not None:
                require_positive(f"global_{f}", getattr(self, f))
        if self.sinks is not None:
            _flags(self, ("sinks",))


@dataclass(frozen=True, kw_only=True)
class Mamba:
    """A Mamba mixer of width ``inner`` (d_inner) over ``state`` (N) per channel."""

    version: int  # 1: selective scan (x_proj, dt_proj); 2: SSD (heads, groups)
    inner: int  # d_inner: expand x hidden, or heads x head_dim
    state: int  # N, the state size
    conv_kernel: int = 4
    heads: int = 0  # Mamba-2: heads (inner = heads x head_dim); Mamba-1: none
    groups: int = 1  # Mamba-2: groups sharing B and C
    dt_rank: int = 0  # Mamba-1: rank of the dt projection
    conv_bias: bool = True
    proj_bias: bool = False  # in_proj and out_proj biases
    gated_norm: bool = True  # Mamba-2: RMSNormGated over inner before out_proj
    dt_norms: bool = False  # Jamba: RMSNorms on dt, B and C
    chunk: int = 128  # SSD chunk length (Megatron's chunk_size, mamba_mixer.py:194)

    def __post_init__(self) -> None:
        if self.version not in (1, 2):
            raise LedgerError("mamba_version", f"must be 1 or 2, got {self.version!r}")
        for f in ("inner", "state", "conv_kernel", "chunk"):
            require_positive(f"mamba_{f}", getattr(self, f))
        for f in ("heads", "groups", "dt_rank"):
            _count(f"mamba_{f}", getattr(self, f))
        _flags(self, ("conv_bias", "proj_bias", "gated_norm", "dt_norms"))
        if self.version == 2:
            require_positive("mamba_heads", self.heads)
            require_positive("mamba_groups", self.groups)
            if self.inner % self.heads or self.heads % self.groups:
                raise LedgerError("mamba_heads", f"inner({self.inner}) must split into "
                                                 f"heads({self.heads}), and heads into "
                                                 f"groups({self.groups})")
        else:
            require_positive("mamba_dt_rank", self.dt_rank)

    @property
    def head_dim(self) -> int:
        return self.inner // self.heads if self.heads else self.inner

    @property
    def conv_dim(self) -> int:
        """Channels the causal convolution runs over: x (and, Mamba-2, B and C)."""
        return self.inner + (2 * self.groups * self.state if self.version == 2 else 0)

    @property
    def in_width(self) -> int:
        """in_proj's output: z and x (Mamba-1); z, xBC and dt per head (Mamba-2)."""
        return 2 * self.inner if self.version == 1 else self.inner + self.conv_dim + self.heads

    def params(self, hidden: int) -> int:
        split, repl = self.parts(hidden)
        return split + repl

    def projections(self, hidden: int) -> tuple[int, int]:
        """(split, replicated) weights of its GEMMs: in_proj and out_proj (Mamba-1 adds
        x_proj and dt_proj), split as ``parts``."""
        w = hidden * self.in_width + self.inner * hidden
        if self.version == 1:
            return 0, w + self.inner * (self.dt_rank + 2 * self.state) + self.dt_rank * self.inner
        return w, 0

    def parts(self, hidden: int) -> tuple[int, int]:
        """(split by TP, replicated) parameters. Mamba-2 as Megatron-Core splits it: in_proj
        column-parallel, conv1d, dt_bias, A_log, D and the gated norm sharded along the
        channels, out_proj row-parallel (mamba_mixer.py:281-451; nothing in the mixer is
        replicated). Mamba-1 has no tensor-parallel form (Megatron-Core d98e8a64 has no
        selective-scan mixer; transformers' tp_plans leave it whole): replicated."""
        h, di, n, k = hidden, self.inner, self.state, self.conv_kernel
        pb, cb = self.proj_bias, self.conv_bias
        proj = h * self.in_width + self.in_width * pb + di * h + h * pb
        conv = self.conv_dim * (k + cb)
        if self.version == 1:
            r = self.dt_rank
            rest = di * (r + 2 * n) + r * di + di + di * n + di + (r + 2 * n) * self.dt_norms
            return 0, proj + conv + rest
        return proj + conv + 3 * self.heads + di * self.gated_norm, 0


@dataclass(frozen=True, kw_only=True)
class LinearAttention:
    """A linear-attention mixer: ``key_heads`` x ``key_dim`` queries and keys,
    ``value_heads`` x ``value_dim`` values, a state of key_dim x value_dim per value head."""

    kind: str  # "gdn" (Gated DeltaNet), "kda" (Kimi Delta Attention), "lightning"
    key_heads: int
    key_dim: int
    value_heads: int
    value_dim: int
    conv_kernel: int = 4  # GDN, KDA: causal convolution over q, k, v (lightning: none)
    full_rank_gates: bool = False  # KDA: h -> heads x dim forget/output gates (Bailing)
    chunk: int = 64  # the chunked kernels' block (FLA chunk size; lightning: 256)

    def __post_init__(self) -> None:
        if self.kind not in LINEAR_KINDS:
            raise LedgerError("linear_kind", f"must be one of {', '.join(LINEAR_KINDS)}, "
                                             f"got {self.kind!r}")
        for f in ("key_heads", "key_dim", "value_heads", "value_dim", "conv_kernel", "chunk"):
            require_positive(f"linear_{f}", getattr(self, f))
        _flags(self, ("full_rank_gates",))
        if self.value_heads % self.key_heads:
            raise LedgerError("linear_value_heads", f"value_heads({self.value_heads}) must be "
                                                    f"a multiple of key_heads({self.key_heads})")

    @property
    def key_width(self) -> int:
        return self.key_heads * self.key_dim

    @property
    def value_width(self) -> int:
        return self.value_heads * self.value_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the causal convolution: q, k and v (none in lightning attention)."""
        return 0 if self.kind == "lightning" else 2 * self.key_width + self.value_width

    def params(self, hidden: int) -> int:
        split, repl = self.parts(hidden)
        return split + repl

    def projections(self, hidden: int) -> tuple[int, int]:
        """(split, replicated) weights of its GEMMs, split as ``parts``: GDN's in_proj (q, k,
        v, z, beta, alpha) and out_proj; KDA's q, k, v, gates, beta and o; lightning's qkv,
        output gate and out_proj."""
        h, key, val, hv, d = hidden, self.key_width, self.value_width, self.value_heads, \
            self.value_dim
        if self.kind == "gdn":
            return h * (2 * key + 2 * val + 2 * hv) + val * h, 0
        if self.kind == "lightning":
            return 0, 5 * h * val
        gate = h * val if self.full_rank_gates else h * d + d * val
        return 0, 3 * h * val + 2 * gate + h * hv + val * h

    def parts(self, hidden: int) -> tuple[int, int]:
        """(split by TP, replicated). GDN as Megatron-Core splits it: in_proj (q, k, v, z,
        beta, alpha) column-parallel, conv1d, dt_bias and A_log sharded by head, out_proj
        row-parallel, the output norm over value_dim replicated (hybrid_layer_specs.py
        :122-131, gated_delta_net/common.py:179-260). KDA and lightning attention have no
        tensor-parallel form in Megatron-Core d98e8a64: replicated."""
        h, key, val, conv = hidden, self.key_width, self.value_width, self.conv_dim
        k, hv, dv = self.conv_kernel, self.value_heads, self.value_dim
        if self.kind == "gdn":  # q, k, v, z; beta and alpha per value head; dt_bias, A_log
            split = h * (2 * key + 2 * val) + 2 * h * hv + conv * k + 2 * hv + val * h
            return split, dv
        if self.kind == "lightning":  # qkv, output gate, out_proj, RMSNorm over heads x dim
            return 0, 3 * h * val + h * val + val * h + val
        d = self.value_dim  # KDA: q, k, v, conv; forget gate f, beta, output gate g, o_norm
        gate = h * val if self.full_rank_gates else h * d + d * val
        return 0, 3 * h * val + conv * k + 2 * gate + val + hv + h * hv + d + val * h


@dataclass(frozen=True, kw_only=True)
class ShortConv:
    """LFM2's gated short convolution: in_proj h -> 3h (B, C, x), a depthwise causal
    convolution of ``kernel`` taps over h channels, out_proj h -> h."""

    kernel: int
    bias: bool = False

    def __post_init__(self) -> None:
        require_positive("conv_kernel", self.kernel)
        _flags(self, ("bias",))

    def params(self, hidden: int) -> int:
        split, repl = self.parts(hidden)
        return split + repl

    def projections(self, hidden: int) -> tuple[int, int]:
        """(split, replicated) weights of its GEMMs: in_proj and out_proj."""
        return 0, 4 * hidden * hidden

    def parts(self, hidden: int) -> tuple[int, int]:
        """No tensor-parallel form in a framework the ledger models: replicated."""
        h, b = hidden, self.bias
        return 0, 3 * h * h + 3 * h * b + h * (self.kernel + b) + h * h + h * b

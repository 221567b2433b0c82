"""ModelSpec: the shape of a decoder-only transformer and its exact parameter count.

Dense and MoE models share one record. Counts are exact, component by component,
so a preset can be checked against the count its publisher prints:

>>> llama3_405b().params
405853388800
>>> llama3_70b().params
70553706496
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from ledger.errors import LedgerError, require_positive

NORMS = ("rmsnorm", "layernorm")


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A decoder-only transformer. Sizes are counts of elements, never bytes."""

    name: str
    layers: int
    hidden: int
    heads: int
    vocab: int
    seq_len: int  # the run's sequence length; kept here because the seed's ledger does
    ffn_hidden: int  # MLP width of a dense layer
    kv_heads: int | None = None  # GQA/MQA key-value heads; None means MHA (= heads)
    head_dim: int | None = None  # None means hidden // heads (Gemma sets 256)
    gated_mlp: bool = True  # SwiGLU / GeGLU: gate, up and down = 3 matrices; plain = 2
    tied_embeddings: bool = False  # output layer reuses the input embedding
    qkv_bias: bool = False  # Qwen2 and GPT-2 carry q/k/v biases
    out_bias: bool = False  # attention output projection bias (GPT-2, NeoX)
    mlp_bias: bool = False  # biases on the MLP matrices (GPT-2, NeoX)
    norm: str = "rmsnorm"  # "layernorm" carries a bias as well as a weight
    learned_positions: int = 0  # rows of a learned position table; 0 for rotary
    num_experts: int = 0  # routed experts per MoE layer; 0 for a dense model
    top_k: int = 1  # experts each token visits
    moe_ffn_hidden: int | None = None  # one expert's MLP width; None means ffn_hidden
    shared_experts: int = 0  # always-on experts of width moe_ffn_hidden (DeepSeek style)
    first_dense_layers: int = 0  # leading layers that keep a dense MLP

    def __post_init__(self) -> None:
        for f in ("layers", "hidden", "heads", "vocab", "seq_len", "ffn_hidden"):
            require_positive(f, getattr(self, f))
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.head_dim is None:
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        if self.moe_ffn_hidden is None:
            object.__setattr__(self, "moe_ffn_hidden", self.ffn_hidden)
        for f in ("kv_heads", "head_dim", "top_k", "moe_ffn_hidden"):
            require_positive(f, getattr(self, f))
        if self.heads % self.kv_heads:
            raise LedgerError(
                "kv_heads", f"heads({self.heads}) is not divisible by kv_heads({self.kv_heads})"
            )
        if self.norm not in NORMS:
            raise LedgerError("norm", f"must be one of {', '.join(NORMS)}, got {self.norm!r}")
        for f in ("learned_positions", "num_experts", "shared_experts", "first_dense_layers"):
            if getattr(self, f) < 0:
                raise LedgerError(f, f"must be >= 0, got {getattr(self, f)}")
        if self.is_moe and self.top_k > self.num_experts:
            raise LedgerError(
                "top_k", f"top_k({self.top_k}) exceeds num_experts({self.num_experts})"
            )
        if self.first_dense_layers > self.layers:
            raise LedgerError(
                "first_dense_layers",
                f"first_dense_layers({self.first_dense_layers}) exceeds layers({self.layers})",
            )

    # ---- structure ---------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def moe_layers(self) -> int:
        return self.layers - self.first_dense_layers if self.is_moe else 0

    @property
    def kv_dim(self) -> int:
        """Width of K (or V): kv_heads x head_dim. Equals hidden under MHA."""
        return self.kv_heads * self.head_dim

    @classmethod
    def from_hf_config(cls, path: str) -> ModelSpec:
        """Read a local Hugging Face ``config.json`` (see ``ledger.hf``)."""
        from ledger.hf import from_hf_config

        return from_hf_config(path)

    def with_seq(self, seq_len: int) -> ModelSpec:
        """The same model run at another sequence length."""
        return replace(self, seq_len=seq_len)

    # ---- parameter counts, one term each ----------------------------------------
    def _mlp(self, width: int) -> int:
        matrices = 3 if self.gated_mlp else 2
        bias = ((matrices - 1) * width + self.hidden) if self.mlp_bias else 0
        return matrices * self.hidden * width + bias

    @property
    def norm_size(self) -> int:
        """Parameters of one norm: a weight, and for LayerNorm a bias."""
        return self.hidden * (2 if self.norm == "layernorm" else 1)

    @cached_property
    def breakdown(self) -> dict[str, int]:
        """Exact parameter count per component; the values sum to ``params``."""
        h, q_dim = self.hidden, self.heads * self.head_dim
        attn = h * q_dim + 2 * h * self.kv_dim + q_dim * h
        attn += (q_dim + 2 * self.kv_dim) * self.qkv_bias + h * self.out_bias
        dense_layers = self.layers - self.moe_layers
        moe_w = self.moe_ffn_hidden
        return {
            "embedding": self.vocab * h,
            "positions": self.learned_positions * h,
            "attention": self.layers * attn,
            "mlp": dense_layers * self._mlp(self.ffn_hidden),
            "experts": self.moe_layers * self.num_experts * self._mlp(moe_w),
            "shared_experts": self.moe_layers * self.shared_experts * self._mlp(moe_w),
            "router": self.moe_layers * h * self.num_experts,
            "norms": self.layers * 2 * self.norm_size + self.norm_size,  # two per layer + final
            "output": 0 if self.tied_embeddings else self.vocab * h,
        }

    @cached_property
    def params(self) -> int:
        return sum(self.breakdown.values())

    @property
    def expert_params(self) -> int:
        """Routed-expert parameters: the share that expert parallelism splits."""
        return self.breakdown["experts"]

    @property
    def active_params(self) -> float:
        """Parameters one token touches: routed experts count top_k / num_experts."""
        if not self.is_moe:
            return float(self.params)
        return self.params - self.expert_params * (1 - self.top_k / self.num_experts)

    def layer_params(self, moe: bool) -> tuple[int, int, int]:
        """(split by TP, replicated across TP, routed experts) parameters of one layer.

        Megatron shards the attention and MLP matrices (and the column-parallel
        biases) across the TP group and replicates the norms, the row-parallel biases
        and the router. Routed experts are split across tp x ep.
        """
        h, q_dim, kv = self.hidden, self.heads * self.head_dim, self.kv_dim
        matrices = 3 if self.gated_mlp else 2

        def mlp_split(width: int) -> int:  # gate/up are column-parallel, biases with them
            return matrices * h * width + (matrices - 1) * width * self.mlp_bias

        split = 2 * h * q_dim + 2 * h * kv + (q_dim + 2 * kv) * self.qkv_bias
        replicated = 2 * self.norm_size + h * self.out_bias
        if not moe:
            return split + mlp_split(self.ffn_hidden), replicated + h * self.mlp_bias, 0
        shared, width = self.shared_experts, self.moe_ffn_hidden
        split += shared * mlp_split(width)
        replicated += shared * h * self.mlp_bias + h * self.num_experts  # router
        return split, replicated, self.num_experts * self._mlp(width)


def _llama(name: str, layers: int, hidden: int, heads: int, kv: int, ffn: int, vocab: int,
           seq: int) -> ModelSpec:
    return ModelSpec(name=name, layers=layers, hidden=hidden, heads=heads, kv_heads=kv,
                     ffn_hidden=ffn, vocab=vocab, seq_len=seq)


def llama3_8b() -> ModelSpec:
    return _llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192)


def llama3_70b() -> ModelSpec:
    return _llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192)


def llama3_405b() -> ModelSpec:
    return _llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192)


def llama2_7b() -> ModelSpec:
    return _llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096)


def llama2_13b() -> ModelSpec:
    return _llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096)


def llama2_70b() -> ModelSpec:
    return _llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096)


def mistral_7b() -> ModelSpec:
    return _llama("mistral-7b", 32, 4096, 32, 8, 14336, 32000, 8192)


def mixtral_8x7b() -> ModelSpec:
    return replace(_llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 4096),
                   num_experts=8, top_k=2)


def gpt3_175b() -> ModelSpec:
    """GPT-3 175B in the Megatron shape (Narayanan et al. 2021): tied embeddings,
    learned positions, LayerNorm, GELU MLP of 4h and biases everywhere."""
    return ModelSpec(name="gpt3-175b", layers=96, hidden=12288, heads=96, vocab=51200,
                     seq_len=2048, ffn_hidden=4 * 12288, gated_mlp=False,
                     tied_embeddings=True, qkv_bias=True, out_bias=True, mlp_bias=True,
                     norm="layernorm", learned_positions=2048)


PRESETS = {f().name: f for f in (llama3_8b, llama3_70b, llama3_405b, llama2_7b, llama2_13b,
                                  llama2_70b, mistral_7b, mixtral_8x7b, gpt3_175b)}


def preset(name: str) -> ModelSpec:
    """A preset by name (case-insensitive); an unknown name lists the known ones."""
    key = name.lower()
    if key not in PRESETS:
        raise LedgerError("model", f"unknown model {name!r}; presets: {', '.join(PRESETS)}")
    return PRESETS[key]()

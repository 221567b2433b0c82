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

from ledger import checks
from ledger.errors import LedgerError


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A decoder-only transformer. Sizes are counts of elements, never bytes.

    Each field names the transformers module whose parameters it describes; ``hf.py``
    maps every supported config.json onto these fields.
    """

    name: str
    layers: int
    hidden: int
    heads: int
    vocab: int
    seq_len: int  # the run's sequence length (a training length, not a config's capacity)
    ffn_hidden: int  # MLP width of a dense layer
    kv_heads: int | None = None  # GQA/MQA key-value heads; None means MHA (= heads)
    head_dim: int | None = None  # query/key head width; None: hidden // heads (MLA: nope+rope)
    gated_mlp: bool = True  # SwiGLU / GeGLU: gate, up and down = 3 matrices; plain = 2
    tied_embeddings: bool = False  # output layer reuses the input embedding
    qkv_bias: bool = False  # q/k/v biases (Qwen2, GPT-2); under MLA the down projections'
    out_bias: bool = False  # attention output projection bias (GPT-2, NeoX, gpt-oss)
    mlp_bias: bool = False  # biases on every MLP matrix, experts' too (GPT-2, gpt-oss)
    norm: str = "rmsnorm"  # "layernorm" carries a bias as well as a weight
    learned_positions: int = 0  # rows of a learned position table; 0 for rotary
    # ---- attention ---------------------------------------------------------------
    attention: str = "mha"  # "mla": DeepSeek-V2's multi-head latent attention (sec. 2.1)
    q_lora_rank: int | None = None  # MLA query down-projection rank; None: plain q_proj
    kv_lora_rank: int = 0  # MLA compressed K/V latent width (what is cached / saved)
    qk_rope_head_dim: int = 0  # MLA decoupled rotary part of q/k (k's is shared by heads)
    qk_nope_head_dim: int = 0  # MLA per-head q/k part without rotary
    v_head_dim: int | None = None  # value head width; None means head_dim
    qk_norm: str = "none"  # "head": RMSNorm over head_dim (Qwen3, Gemma 3); "full": over
    #                        heads*head_dim and kv_heads*head_dim (OLMo 2)
    layer_norms: int = 2  # norms of width hidden per layer (Gemma 2/3: 4, OLMo 2: 2 post)
    sliding_window: int | None = None  # keys a local layer sees (mistral, gemma2/3, gpt-oss)
    local_layers: tuple[int, ...] | None = None  # which layers are local; None: all of them
    local_attention: str = "sliding"  # "chunked": Llama 4's fixed chunks of sliding_window
    attention_sinks: bool = False  # gpt-oss: one learned logit per head per layer
    attn_logit_softcap: float = 0.0  # Gemma 2: tanh cap on scores (no parameters; 0 = off)
    final_logit_softcap: float = 0.0  # Gemma 2: tanh cap on the output logits
    # ---- mixture of experts ----------------------------------------------------------
    num_experts: int = 0  # routed experts per MoE layer; 0 for a dense model
    top_k: int = 1  # experts each token visits
    moe_ffn_hidden: int | None = None  # one expert's MLP width; None means ffn_hidden
    shared_experts: int = 0  # always-on experts (DeepSeek, Qwen2-MoE, Llama 4)
    shared_expert_ffn: int | None = None  # their one MLP's width; None: shared x moe_ffn
    shared_expert_gate: bool = False  # Qwen2-MoE: a sigmoid gate Linear(hidden, 1)
    router_bias: bool = False  # gpt-oss: the router Linear carries a bias
    first_dense_layers: int = 0  # leading layers that keep a dense MLP (first_k_dense)
    moe_layer_ids: tuple[int, ...] | None = None  # MoE layers; None: all from first_dense
    router_groups: int = 0  # group-limited routing: experts in this many groups (n_group)
    router_group_topk: int = 0  # groups a token may pick (topk_group); 0: no limit
    mtp_layers: int = 0  # DeepSeek-V3 multi-token-prediction modules (not in ``params``)
    seq_default: bool = False  # seq_len is the ledger's default, not the user's (``--seq``)
    # the transformers model_type whose modules (and module names) the model is built from:
    # what peft's target names match (``ledger.finetune.modules``); None: Llama's
    family: str | None = None

    def __post_init__(self) -> None:
        checks.check_sizes(self)
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.head_dim is None:
            checks.check_head_width(self)
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            object.__setattr__(self, "head_dim",
                               qk if self.attention == "mla" else self.hidden // self.heads)
        if self.v_head_dim is None:
            object.__setattr__(self, "v_head_dim", self.head_dim)
        if self.moe_ffn_hidden is None:
            object.__setattr__(self, "moe_ffn_hidden", self.ffn_hidden)
        checks.check_attention(self)
        checks.check_local(self)
        checks.check_moe(self)

    # ---- structure ---------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @cached_property
    def _moe_set(self) -> frozenset[int]:
        ids = range(self.layers) if self.moe_layer_ids is None else self.moe_layer_ids
        return frozenset(i for i in ids if i >= self.first_dense_layers) if self.is_moe \
            else frozenset()

    def is_moe_layer(self, i: int) -> bool:
        """Layer ``i`` (0-based) carries routed experts: it is in ``moe_layer_ids`` (all
        layers when None) and not among the ``first_dense_layers``."""
        return i in self._moe_set

    @property
    def moe_layers(self) -> int:
        """How many layers are MoE layers."""
        return len(self._moe_set)

    def window(self, i: int) -> int | None:
        """Keys a query of layer ``i`` may see at most: the window (or chunk) of a local
        layer, None for a global one."""
        if self.sliding_window is None:
            return None
        if self.local_layers is None or i in self.local_layers:
            return self.sliding_window
        return None

    @property
    def q_dim(self) -> int:
        """Width of Q (and, under MLA, of the up-projected K): heads x head_dim."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of K (or V): kv_heads x head_dim. Equals hidden under MHA."""
        return self.kv_heads * self.head_dim

    @property
    def shared_ffn(self) -> int:
        """Width of the shared-expert MLP (0 without one). DeepSeek builds one MLP of
        moe_intermediate_size x n_shared_experts (modeling_deepseek_v3.py:211-213)."""
        if not self.shared_experts:
            return 0
        return self.shared_expert_ffn or self.shared_experts * self.moe_ffn_hidden

    def with_seq(self, seq_len: int) -> ModelSpec:
        """The same model run at another sequence length."""
        return replace(self, seq_len=seq_len, seq_default=False)

    # ---- parameter counts, one term each ----------------------------------------
    def _mlp(self, width: int) -> int:
        matrices = 3 if self.gated_mlp else 2
        bias = ((matrices - 1) * width + self.hidden) if self.mlp_bias else 0
        return matrices * self.hidden * width + bias

    @property
    def norm_size(self) -> int:
        """Parameters of one norm: a weight, and for LayerNorm a bias."""
        return self.hidden * (2 if self.norm == "layernorm" else 1)

    def _attention_parts(self) -> tuple[int, int]:
        """(split by TP, replicated) parameters of one attention block.

        MHA/GQA: q, k, v, o (+ biases); Megatron splits q/k/v/o and the q/k/v biases,
        replicates the output bias. MLA (DeepSeek-V2 sec. 2.1, modeling_deepseek_v3.py
        :371-404): q_a (h x q_lora) + its norm + q_b (q_lora x heads*(nope+rope)), or a plain
        q_proj; kv_a (h x kv_lora+rope) + its norm; kv_b (kv_lora x heads*(nope+v)); o.
        Megatron-Core keeps the down projections (``backend.linear()``, TE's "duplicated"
        mode) and the latent norms whole on every TP rank and splits the up projections
        and o (megatron/core/models/gpt/gpt_layer_specs.py:105-128 at d98e8a64dd).
        """
        h, heads, nf = self.hidden, self.heads, 2 if self.norm == "layernorm" else 1
        o = heads * self.v_head_dim * h
        if self.attention == "mla":
            r_q, r_kv, rope = self.q_lora_rank, self.kv_lora_rank, self.qk_rope_head_dim
            kv_a = h * (r_kv + rope) + (r_kv + rope) * self.qkv_bias + nf * r_kv
            kv_b = r_kv * heads * (self.qk_nope_head_dim + self.v_head_dim)
            if r_q is None:
                return h * self.q_dim + kv_b + o, kv_a + h * self.out_bias
            q_a = h * r_q + r_q * self.qkv_bias + nf * r_q
            return r_q * self.q_dim + kv_b + o, q_a + kv_a + h * self.out_bias
        split = h * self.q_dim + 2 * h * self.kv_dim + o
        split += (self.q_dim + 2 * self.kv_dim) * self.qkv_bias + heads * self.attention_sinks
        qk_norm = {"none": 0, "head": 2 * self.head_dim, "full": self.q_dim + self.kv_dim}
        if self.qk_norm == "full":  # OLMo 2's norm weights follow the sharded channels
            split += nf * qk_norm["full"]
            return split, h * self.out_bias
        return split, h * self.out_bias + nf * qk_norm[self.qk_norm]

    def _mlp_parts(self, width: int) -> tuple[int, int]:
        """(split, replicated) of one MLP: gate/up are column-parallel with their biases,
        down is row-parallel and its bias replicated (Megatron ParallelMLP)."""
        whole = self._mlp(width)
        down_bias = self.hidden * self.mlp_bias
        return whole - down_bias, down_bias

    @cached_property
    def breakdown(self) -> dict[str, int]:
        """Exact parameter count per component; the values sum to ``params``.

        ``attention`` holds the projections, their biases, q/k or latent norms and
        sinks; ``shared_experts`` the shared MLP and its gate; ``router`` its weight and
        bias. DeepSeek-V3's MTP modules are not here (transformers does not build them):
        see ``mtp_params``.
        """
        h, n_moe = self.hidden, self.moe_layers
        attn = sum(self._attention_parts())
        e = self.num_experts
        return {
            "embedding": self.vocab * h,
            "positions": self.learned_positions * h,
            "attention": self.layers * attn,
            "mlp": (self.layers - n_moe) * self._mlp(self.ffn_hidden),
            "experts": n_moe * e * self._mlp(self.moe_ffn_hidden),
            "shared_experts": n_moe * ((self._mlp(self.shared_ffn) if self.shared_experts
                                        else 0) + h * self.shared_expert_gate),
            "router": n_moe * (h * e + e * self.router_bias),
            "norms": (self.layers * self.layer_norms + 1) * self.norm_size,  # + final norm
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
        """Parameters one token touches: everything dense, the shared experts, and of the
        routed experts top_k / num_experts (DeepSeek-V3: 37B of 671B, report abstract)."""
        if not self.is_moe:
            return float(self.params)
        return self.params - self.expert_params * (1 - self.top_k / self.num_experts)

    @property
    def mtp_params(self) -> int:
        """DeepSeek-V3's multi-token-prediction modules (report sec. 2.2, fig. 3): each has
        a projection M (h x 2h), two RMSNorms on its inputs, one transformer block (an MoE
        layer, as layer 61 of the released checkpoint is) and the final norm of its shared
        head; embedding and output head are shared with the main model, so not counted."""
        if not self.mtp_layers:
            return 0
        block = sum(self.layer_params(moe=self.is_moe))
        return self.mtp_layers * (2 * self.hidden * self.hidden + block + 3 * self.norm_size)

    def layer_params(self, moe: bool) -> tuple[int, int, int]:
        """(split by TP, replicated across TP, routed experts) parameters of one layer.

        Megatron shards the attention and MLP matrices (and the column-parallel
        biases) across the TP group and replicates the norms, the row-parallel biases
        and the router. Routed experts are split across tp x ep.
        """
        parts = self.layer_parts(moe).values()
        return tuple(sum(p[i] for p in parts) for i in range(3))

    def layer_parts(self, moe: bool) -> dict[str, tuple[int, int, int]]:
        """``layer_params`` by component (the keys of ``breakdown``): attention, norms, and
        the dense MLP or the MoE block's shared experts (with Qwen2-MoE's gate), router and
        routed experts - what freezing by module kind selects."""
        h, e = self.hidden, self.num_experts
        out = {"attention": (*self._attention_parts(), 0),
               "norms": (0, self.layer_norms * self.norm_size, 0)}
        if not moe:
            return out | {"mlp": (*self._mlp_parts(self.ffn_hidden), 0)}
        split, repl = self._mlp_parts(self.shared_ffn) if self.shared_experts else (0, 0)
        return out | {"shared_experts": (split, repl + h * self.shared_expert_gate, 0),
                      "router": (0, h * e + e * self.router_bias, 0),
                      "experts": (0, 0, e * self._mlp(self.moe_ffn_hidden))}


def _llama(name: str, layers: int, hidden: int, heads: int, kv: int, ffn: int, vocab: int,
           seq: int, family: str = "llama") -> ModelSpec:
    return ModelSpec(name=name, layers=layers, hidden=hidden, heads=heads, kv_heads=kv,
                     ffn_hidden=ffn, vocab=vocab, seq_len=seq, family=family)


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
    return _llama("mistral-7b", 32, 4096, 32, 8, 14336, 32000, 8192, "mistral")


def mixtral_8x7b() -> ModelSpec:
    return replace(_llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 4096, "mixtral"),
                   num_experts=8, top_k=2)


def gpt3_175b() -> ModelSpec:
    """GPT-3 175B in the Megatron shape (Narayanan et al. 2021): tied embeddings,
    learned positions, LayerNorm, GELU MLP of 4h and biases everywhere."""
    return ModelSpec(name="gpt3-175b", layers=96, hidden=12288, heads=96, vocab=51200,
                     seq_len=2048, ffn_hidden=4 * 12288, gated_mlp=False,
                     tied_embeddings=True, qkv_bias=True, out_bias=True, mlp_bias=True,
                     norm="layernorm", learned_positions=2048, family="gpt2")


def deepseek_v3() -> ModelSpec:
    """DeepSeek-V3 (report sec. 4.2: 61 layers, MLA, 1 shared + 256 routed experts, top-8,
    first 3 layers dense, 4K pre-training sequences, one MTP module; node-limited routing
    over 8 expert groups, at most 4 per token: config.json n_group 8, topk_group 4)."""
    return ModelSpec(name="deepseek-v3", layers=61, hidden=7168, heads=128, vocab=129280,
                     seq_len=4096, ffn_hidden=18432, attention="mla", q_lora_rank=1536,
                     kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
                     v_head_dim=128, num_experts=256, top_k=8, moe_ffn_hidden=2048,
                     shared_experts=1, first_dense_layers=3, mtp_layers=1,
                     router_groups=8, router_group_topk=4,  # sec. 2.1.2: M = 4 nodes
                     family="deepseek_v3")


def _qwen3(name: str, **kw) -> ModelSpec:
    """Qwen3 (tech report sec. 3: qk-norm, 128-wide heads, 4,096-token stage-1 sequences)."""
    family = "qwen3_moe" if kw.get("num_experts") else "qwen3"
    return ModelSpec(name=name, vocab=151936, seq_len=4096, head_dim=128, qk_norm="head",
                     family=family, **kw)


def qwen3_8b() -> ModelSpec:
    return _qwen3("qwen3-8b", layers=36, hidden=4096, heads=32, kv_heads=8, ffn_hidden=12288)


def qwen3_30b_a3b() -> ModelSpec:
    return _qwen3("qwen3-30b-a3b", layers=48, hidden=2048, heads=32, kv_heads=4,
                  ffn_hidden=6144, num_experts=128, top_k=8, moe_ffn_hidden=768)


PRESETS = {f().name: f for f in (llama3_8b, llama3_70b, llama3_405b, llama2_7b, llama2_13b,
                                  llama2_70b, mistral_7b, mixtral_8x7b, gpt3_175b,
                                  deepseek_v3, qwen3_8b, qwen3_30b_a3b)}


def preset(name: str) -> ModelSpec:
    """A preset by name (case-insensitive); an unknown name lists the known ones."""
    key = name.lower()
    if key not in PRESETS:
        raise LedgerError("model", f"unknown model {name!r}; presets: {', '.join(PRESETS)}")
    return PRESETS[key]()

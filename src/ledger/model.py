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
from ledger.anatomy.compressed import CompressedAttention, check as check_compressed
from ledger.anatomy.counts import ParamCounts
from ledger.anatomy.mixers import GlobalAttention, LayerKind, LinearAttention, Mamba, ShortConv
from ledger.errors import LedgerError


@dataclass(frozen=True, kw_only=True)
class ModelSpec(ParamCounts):
    """A decoder-only transformer. Sizes are counts of elements, never bytes.

    Each field names the transformers module whose parameters it describes;
    ``ledger.io.hf`` maps every supported config.json onto these fields. A hybrid stack
    says per layer which sequence mixer it runs (``mixers``, ``ledger.anatomy.mixers``) and which
    layers have no MLP; ``layer_kind(i)`` answers both for layer ``i``. Its parameter
    counts (``params``, ``breakdown``, ``layer_params``, ...) are ``ParamCounts``'
    (``ledger.anatomy.counts``).
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
    glu_clamp: float = 0.0  # gpt-oss: the GLU's two halves clamped at this value before the
    #                         activation (config swiglu_limit, Megatron's
    #                         --activation-func-clamp-value; 0 = off)
    norm: str = "rmsnorm"  # "layernorm" carries a bias as well as a weight
    learned_positions: int = 0  # rows of a learned position table; 0 for rotary
    # ---- attention ---------------------------------------------------------------
    attention: str = "mha"  # "mla": DeepSeek-V2's multi-head latent attention (sec. 2.1);
    #                         "csa": DeepSeek-V4's compressed attention (``compressed``)
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
    rope_mscale: float = 1.0  # YaRN's factor on cos/sin (gpt-oss 1.35; ledger.step.eager)
    attn_logit_softcap: float = 0.0  # Gemma 2: tanh cap on scores (no parameters; 0 = off)
    final_logit_softcap: float = 0.0  # Gemma 2: tanh cap on the output logits
    attn_gate: str = "none"  # sigmoid gate on the attention output: "elementwise" (Qwen3-Next,
    #                          AFMoE: h -> heads*head_dim) or "head" (Laguna: h -> heads)
    attn_gate_bias: bool = False  # Beam: the gate's bias, one per head
    diff_attention: bool = False  # DiffLlama: two softmax maps, four lambda vectors a layer
    index_heads: int = 0  # DeepSeek-V3.2's lightning indexer (DSA): its heads,
    index_head_dim: int = 0  # their width,
    index_topk: int = 0  # and the keys each query then attends (0: no indexer)
    global_attention: GlobalAttention | None = None  # global layers' own attention shape
    compressed: CompressedAttention | None = None  # DeepSeek-V4's compression, grouped O
    hc_mult: int = 0  # mHC residual streams (DeepSeek-V4: 4); 0: one plain residual
    hc_head: bool = True  # mHC's learned head (DeepSeek-V4); False: the mean (anatomy.compressed)
    # ---- small terms around the stack -----------------------------------------------
    norm_weights: bool = True  # False: norms without parameters (OLMo, nanochat)
    embedding_norm: bool = False  # a norm on the embedding output (BLOOM)
    final_norm: bool = True  # False: no norm after the last layer (GPT-1)
    sub_norms: bool = False  # BitNet: norms before o_proj (hidden) and down_proj (ffn)
    act_params: int = 0  # learned scalars of each MLP's activation (Apertus' xIELU: 2)
    lm_head_bias: bool = False  # the output layer's bias (GPT-J, CodeGen, Phi-2, CTRL)
    embedding_rows: int | None = None  # input embedding rows; None: vocab (Moshi: vocab+1)
    # ---- mixture of experts ----------------------------------------------------------
    num_experts: int = 0  # routed experts per MoE layer; 0 for a dense model
    top_k: int = 1  # experts each token visits
    moe_ffn_hidden: int | None = None  # one expert's MLP width; None means ffn_hidden
    shared_experts: int = 0  # always-on experts (DeepSeek, Qwen2-MoE, Llama 4)
    shared_expert_ffn: int | None = None  # their one MLP's width; None: shared x moe_ffn
    shared_expert_gate: bool = False  # Qwen2-MoE: a sigmoid gate Linear(hidden, 1)
    router_bias: bool = False  # gpt-oss: the router Linear carries a bias
    moe_norm: bool = False  # AXK1: a norm of width hidden after each MoE block
    first_dense_layers: int = 0  # leading layers that keep a dense MLP (first_k_dense)
    moe_layer_ids: tuple[int, ...] | None = None  # MoE layers; None: all from first_dense
    router_groups: int = 0  # group-limited routing: experts in this many groups (n_group)
    router_group_topk: int = 0  # groups a token may pick (topk_group); 0: no limit
    moe_latent: int | None = None  # LatentMoE (Megatron moe_latent_size): routed experts run
    #                                 and are dispatched at this width between two projections
    mtp_layers: int = 0  # multi-token-prediction depths (DeepSeek-V3's modules; not in ``params``)
    mtp_pattern: str | None = None  # an MTP block's layers in Megatron's hybrid letters (M * - E;
    #                                 Nemotron 3's "*E"); None: one layer of the stack's kind
    mtp_shared: bool = False  # one MTP block's weights serve every depth (mtp_use_repeated_layer)
    # ---- hybrid stacks (ledger.anatomy.mixers) -------------------------------------------------
    mixers: tuple[str, ...] | None = None  # per layer: attention, mamba, linear, conv,
    #                                        attention+mamba (Falcon-H1), none; None: attention
    mamba: Mamba | None = None  # the Mamba mixer of the "mamba" layers
    linear: LinearAttention | None = None  # the linear-attention mixer of the "linear" ones
    conv: ShortConv | None = None  # the short convolution of the "conv" ones
    no_mlp_layers: tuple[int, ...] | None = None  # layers without an MLP (Mamba blocks)
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
        if self.embedding_rows is None:
            object.__setattr__(self, "embedding_rows", self.vocab)
        checks.check_attention(self)
        checks.check_local(self)
        checks.check_moe(self)
        checks.check_stack(self)
        check_compressed(self)

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

    def mixer(self, i: int) -> str:
        """Layer ``i``'s sequence mixer (``ledger.anatomy.mixers.MIXERS``)."""
        return "attention" if self.mixers is None else self.mixers[i]

    def layer_kind(self, i: int) -> LayerKind:
        """What layer ``i`` is: its mixer, its MLP (dense, moe, none) and, when it attends,
        its window. Layers of one kind count, save and cost the same."""
        mixer = self.mixer(i)
        mlp = "none" if self.no_mlp_layers is not None and i in self.no_mlp_layers else \
            "moe" if self.is_moe_layer(i) else "dense"
        window = self.window(i) if mixer in ("attention", "attention+mamba") else None
        compress = self.compressed.ratios[i] if self.compressed is not None else 0
        return LayerKind(mixer, mlp, window, compress)

    def mlp_share(self, mlp: str) -> float:
        """The share of the stack's layers whose MLP block is ``mlp`` (dense | moe | none)."""
        return sum(n for k, n in self.kind_counts.items() if k.mlp == mlp) / self.layers

    @cached_property
    def kind_counts(self) -> dict[LayerKind, int]:
        """How many layers of each kind the stack has, in ``LayerKind.order``."""
        counts: dict[LayerKind, int] = {}
        for i in range(self.layers):
            k = self.layer_kind(i)
            counts[k] = counts.get(k, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: kv[0].order()))

    def attention_of(self, kind: LayerKind) -> ModelSpec:
        """The model as a layer of ``kind`` attends: its own fields, or on a global layer
        of a model with ``global_attention`` the global layers' head width, K/V heads and
        sinks (the rest of the stack is the same)."""
        g = self.global_attention
        if g is None or not kind.attention or kind.window is not None:
            return self
        return self._global_view

    @cached_property
    def _global_view(self) -> ModelSpec:
        g = self.global_attention
        hd = g.head_dim or self.head_dim
        return replace(self, global_attention=None, head_dim=hd,
                       v_head_dim=hd if self.v_head_dim == self.head_dim else self.v_head_dim,
                       kv_heads=g.kv_heads or self.kv_heads,
                       attention_sinks=self.attention_sinks if g.sinks is None else g.sinks)

    @property
    def is_hybrid(self) -> bool:
        """Some layer runs a mixer other than attention, or has no MLP."""
        return any(k.mixer != "attention" or k.mlp == "none" for k in self.kind_counts)

    @property
    def attention_layers(self) -> int:
        """Layers that attend (all of them in a plain transformer)."""
        return sum(n for k, n in self.kind_counts.items() if k.attention)

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

    @property
    def expert_hidden(self) -> int:
        """The width routed experts take in and give out: the latent width under LatentMoE
        (``moe_latent``), else hidden."""
        return self.moe_latent or self.hidden

    def with_seq(self, seq_len: int) -> ModelSpec:
        """The same model run at another sequence length."""
        return replace(self, seq_len=seq_len, seq_default=False)


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

"""The weight matrices of a model as transformers 5.23.0 builds them: what peft's target
names match, what bitsandbytes quantises, how tensor parallelism splits each one.

Which matrices a layer holds follows from its ``LayerKind`` (``ModelSpec.layer_kind``)
and the spec's own fields - attention (MHA / GQA, or MLA's down and up projections; an
output gate; DSA's indexer) as the layer attends (``ModelSpec.attention_of``), a
recurrent mixer's projections from its record (``ledger.anatomy.mixers``: Mamba-1's
in/x/dt/out_proj, Mamba-2's in/out_proj, Gated DeltaNet's and Kimi Delta Attention's
q/k/v, gates, beta and output, lightning attention's qkv_proj/output_gate/out_proj,
LFM2's in/out_proj), a dense MLP (gated or not), an MoE block (routed experts, router,
shared experts and their gate). Their names, and the few layouts names alone do not say
(fused q/k/v, fused gate and up), come from ``ledger.finetune.names``. The shapes are the
same the parameter count uses (``ledger.anatomy.counts``), so every matrix here is a term
of ``ModelSpec.params``.

A ``Linear`` is one weight matrix of one layer (or the embedding, positions, output
head). ``module`` says whether peft sees it as a module (nn.Linear, transformers'
Conv1D, nn.Embedding); transformers 5 keeps a MoE layer's routed experts as fused 3-D
parameters and most routers as a custom module's ``weight`` (``module=False``; ``owner``:
the module holding it), which neither peft's ``all-linear`` nor bitsandbytes'
``replace_with_bnb_linear`` (integrations/bitsandbytes.py:189: ``Conv1D`` or ``type(module)
is nn.Linear``) sees.

``split``: how Megatron-Core (and DTensor TP) splits the matrix, as the parameter count
splits it (``ledger.anatomy.counts``, ``ledger.anatomy.mixers``' ``parts``) - "col" the
outputs (q/k/v, gate/up, MLA's up projections, GDN's and Mamba-2's input projections),
"row" the inputs (o, down, out_proj, a vocabulary-parallel embedding), "none" whole on
every TP rank (MLA's down projections, routers, DSA's indexer, the mixers Megatron-Core
has no tensor-parallel form of).
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.anatomy import compressed
from ledger.anatomy.mixers import LayerKind
from ledger.finetune.names import Names, names
from ledger.model import ModelSpec


@dataclass(frozen=True)
class Linear:
    """One weight matrix of a layer (or an edge of the model), as transformers names it."""

    name: str  # leaf name: what peft's target_modules match (a parameter's own name)
    kind: str  # the ModelSpec.breakdown component it belongs to
    in_features: int
    out_features: int
    split: str = "col"  # TP: "col" (outputs), "row" (inputs), "none" (whole on every rank)
    experts: int = 1  # > 1: a fused parameter holding every routed expert
    module: bool = True  # a module peft wraps; False: a parameter of ``owner``
    owner: str | None = None  # the module around it that is no linear (peft cannot wrap it)
    quantised: bool = True  # bitsandbytes replaces it with Linear4bit (QLoRA's NF4)
    linear: bool = True  # nn.Linear / Conv1D (all-linear's); False: an nn.Embedding

    @property
    def weights(self) -> int:
        return self.experts * self.in_features * self.out_features

    @property
    def key(self) -> str:
        """The end of its parameter's name, what peft's target_parameters match."""
        return f"{self.owner}.{self.name}" if not self.module else f"{self.name}.weight"


def _lin(n: Names, name: str, kind: str, i: int, o: int, split: str = "col",
         **kw) -> Linear:
    quantised = kw.pop("quantised", True) and n.exact  # Falcon's FalconLinear: not replaced
    return Linear(name, kind, i, o, split, quantised=quantised, **kw)


def attention(m: ModelSpec, n: Names, ratio: int = 0) -> list[Linear]:
    """One layer's attention projections, as ``m`` attends (``ModelSpec.attention_of``);
    DeepSeek-V4's by the layer's compress ``ratio`` (``_compressed``)."""
    if m.attention == "csa":
        return _compressed(m, n, ratio)
    h, o_in = m.hidden, m.heads * m.v_head_dim
    gate = {"none": 0, "elementwise": m.heads * m.head_dim, "head": m.heads}[m.attn_gate]
    extra = [_lin(n, n.attn_gate, "attention", h, gate)] if gate and n.attn_gate else []
    q_out = m.q_dim + (gate if n.attn_gate is None else 0)  # Qwen3-Next: gate in q_proj
    if m.attention == "mla":
        r_q, r_kv = m.q_lora_rank, m.kv_lora_rank
        kv_b = m.heads * (m.qk_nope_head_dim + m.v_head_dim)
        qs = [_lin(n, "q_proj", "attention", h, q_out)] if r_q is None else [
            _lin(n, "q_a_proj", "attention", h, r_q, "none"),
            _lin(n, "q_b_proj", "attention", r_q, q_out)]
        return qs + [_lin(n, "kv_a_proj_with_mqa", "attention", h, r_kv + m.qk_rope_head_dim,
                          "none"),
                     _lin(n, "kv_b_proj", "attention", r_kv, kv_b),
                     _lin(n, "o_proj", "attention", o_in, h, "row")] + extra + _indexer(m, n)
    v_out = m.kv_heads * m.v_head_dim
    if n.qkv:
        qkv = [_lin(n, n.qkv, "attention", h, q_out + m.kv_dim + v_out)]
    else:
        qkv = [_lin(n, n.q, "attention", h, q_out), _lin(n, n.k, "attention", h, m.kv_dim),
               _lin(n, n.v, "attention", h, v_out)]
    out = qkv + [_lin(n, n.o, "attention", o_in, h, "row")] + extra
    if n.wrapper:  # Moshi: each a MoshiLinear named q_proj ... holding an nn.Linear "linear"
        return [Linear("linear", t.kind, t.in_features, t.out_features, t.split, owner=t.name)
                for t in out]
    return out


def _indexer(m: ModelSpec, n: Names) -> list[Linear]:
    """DeepSeek-V3.2's lightning indexer (modeling_deepseek_v32.py:175): wq_b q_lora ->
    heads x dim, wk h -> dim, weights_proj h -> heads; transformers keeps weights_proj in
    fp32 (``_keep_in_fp32_modules``, :664), so bitsandbytes leaves it."""
    ih, d = m.index_heads, m.index_head_dim
    if not ih:
        return []
    return [_lin(n, "wq_b", "attention", m.q_lora_rank or 0, ih * d, "none"),
            _lin(n, "wk", "attention", m.hidden, d, "none"),
            _lin(n, "weights_proj", "attention", m.hidden, ih, "none", quantised=False)]


def _compressed(m: ModelSpec, n: Names, ratio: int) -> list[Linear]:
    """DeepSeek-V4's (modeling_deepseek_v4.py L797-806): q_a, q_b, kv_proj, the grouped o_a
    (one weight of g o_lora x heads d / g, an nn.Linear subclass bitsandbytes leaves) and
    o_b, split as ``ledger.anatomy.compressed`` counts them; a compressor's kv / gate projections (L399-400, L627-628) and CSA's
    indexer's (L464, L510-514), which the release keeps in BF16 (L1259-1265)."""
    h, r_q, d, c = m.hidden, m.q_lora_rank, m.head_dim, m.compressed
    out = [_lin(n, "q_a_proj", "attention", h, r_q, "none"),
           _lin(n, "q_b_proj", "attention", r_q, m.heads * d),
           _lin(n, "kv_proj", "attention", h, d, "none"),
           _lin(n, "o_a_proj", "attention", m.heads * d // c.o_groups,
                c.o_groups * c.o_lora_rank, quantised=False),  # a Linear subclass (L314)
           _lin(n, "o_b_proj", "attention", c.o_groups * c.o_lora_rank, h, "row")]
    if ratio:
        w = (2 if ratio == compressed.INDEXED_RATIO else 1) * d
        out += [_lin(n, p, "attention", h, w, "none", quantised=False)
                for p in ("kv_proj", "gate_proj")]
    if ratio == compressed.INDEXED_RATIO:
        ih, ihd = m.index_heads, m.index_head_dim
        out += [_lin(n, p, "attention", h, 2 * ihd, "none", quantised=False)
                for p in ("kv_proj", "gate_proj")] + [
            _lin(n, "q_b_proj", "attention", r_q, ih * ihd, "none"),
            _lin(n, "weights_proj", "attention", h, ih, "none", quantised=False)]
    return out


def mamba(m: ModelSpec, n: Names) -> list[Linear]:
    """A Mamba mixer's projections (``ledger.anatomy.mixers.Mamba``): Mamba-1 in_proj (h ->
    2 d_inner), x_proj (d_inner -> dt_rank + 2N), dt_proj (dt_rank -> d_inner), out_proj,
    kept whole; Mamba-2 in_proj (h -> z, xBC, dt) column- and out_proj row-parallel."""
    r, h = m.mamba, m.hidden
    if r.version == 1:
        return [_lin(n, "in_proj", "ssm", h, r.in_width, "none"),
                _lin(n, "x_proj", "ssm", r.inner, r.dt_rank + 2 * r.state, "none"),
                _lin(n, "dt_proj", "ssm", r.dt_rank, r.inner, "none"),
                _lin(n, "out_proj", "ssm", r.inner, h, "none")]
    return [_lin(n, "in_proj", "ssm", h, r.in_width), _lin(n, "out_proj", "ssm", r.inner, h,
                                                           "row")]


def linear_attention(m: ModelSpec, n: Names) -> list[Linear]:
    """A linear-attention mixer's projections (``ledger.anatomy.mixers.LinearAttention``)."""
    r, h, k = m.linear, m.hidden, "linear_attention"
    key, val, hv, d = r.key_width, r.value_width, r.value_heads, r.value_dim
    out = [_lin(n, "out_proj" if n.gdn != "split" else "o_proj", k, val, h, "row")]
    if r.kind == "gdn":  # q, k, v, z (the output gate), beta and alpha per value head
        ins = {"qkvz": [("in_proj_qkvz", 2 * key + 2 * val), ("in_proj_ba", 2 * hv)],
               "qkv": [("in_proj_qkv", 2 * key + val), ("in_proj_z", val), ("in_proj_b", hv),
                       ("in_proj_a", hv)],
               "split": [("q_proj", key), ("k_proj", key), ("v_proj", val), ("g_proj", val),
                         ("a_proj", hv), ("b_proj", hv)]}[n.gdn]
        return [_lin(n, name, k, h, width) for name, width in ins] + out
    if r.kind == "lightning":
        return [_lin(n, "qkv_proj", k, h, 3 * val, "none"),
                _lin(n, "output_gate", k, h, val, "none"),
                _lin(n, "out_proj", k, val, h, "none")]
    gates = [("f_proj", h, val), ("g_proj", h, val)] if r.full_rank_gates else [
        ("f_a_proj", h, d), ("f_b_proj", d, val), ("g_a_proj", h, d), ("g_b_proj", d, val)]
    ins = [("q_proj", h, val), ("k_proj", h, val), ("v_proj", h, val), *gates, ("b_proj", h, hv),
           ("o_proj", val, h)]  # Kimi Delta Attention
    return [_lin(n, name, k, i, o, "none") for name, i, o in ins]


def short_conv(m: ModelSpec, n: Names) -> list[Linear]:
    """LFM2's gated short convolution, a module named conv (Lfm2ShortConv): in_proj h -> 3h,
    out_proj h -> h, kept whole."""
    h = m.hidden
    return [_lin(n, "in_proj", "conv", h, 3 * h, "none", owner="conv"),
            _lin(n, "out_proj", "conv", h, h, "none", owner="conv")]


def mlp(m: ModelSpec, n: Names, width: int, kind: str = "mlp", gate_up: str | None = None,
        down: str | None = None) -> list[Linear]:
    """A dense MLP (or a shared expert) of ``width`` features."""
    h, down = m.hidden, down or n.down
    if not m.gated_mlp:
        return [_lin(n, n.up, kind, h, width), _lin(n, down, kind, width, h, "row")]
    ups = [_lin(n, gate_up, kind, h, 2 * width)] if gate_up else [
        _lin(n, n.gate, kind, h, width), _lin(n, n.up, kind, h, width)]
    return ups + [_lin(n, down, kind, width, h, "row")]


def moe(m: ModelSpec, n: Names) -> list[Linear]:
    """One MoE block: the routed experts, the router, the shared experts and their gate."""
    h, e, f = m.hidden, m.num_experts, m.moe_ffn_hidden
    x = m.expert_hidden  # LatentMoE: the experts' own width (NemotronHExperts, input_dim)
    if n.experts == "glu2d":  # DBRX's DbrxExpertGLU: w1, v1 (E F, H), w2
        experts = [Linear(w, "experts", i, o, experts=e, module=False, owner="mlp",
                          quantised=False) for w, i, o in (("w1", x, f), ("v1", x, f),
                                                           ("w2", f, x))]
    else:
        up = ("gate_up_proj", 2 * f) if m.gated_mlp else ("up_proj", f)
        experts = [Linear(up[0], "experts", x, up[1], experts=e, module=False, owner="experts",
                          quantised=False),
                   Linear("down_proj", "experts", f, x, experts=e, module=False,
                          owner="experts", quantised=False)]
    if m.moe_latent:  # NemotronHMoE's fc1_latent_proj / fc2_latent_proj (modeling_nemotron_h
        experts += [_lin(n, "fc1_latent_proj", "latent_proj", h, x, "none"),  # .py:733-739)
                    _lin(n, "fc2_latent_proj", "latent_proj", x, h, "none")]
    if n.router_module == "param":
        router = Linear("weight", "router", h, e, "none", module=False, owner=n.router,
                        quantised=False)
    else:  # an nn.Linear subclass (not bitsandbytes'), or a module holding an nn.Linear
        router = _lin(n, n.router, "router", h, e, "none",
                      quantised=n.router_module == "holds",
                      owner=n.router_holder if n.router_module == "holds" else None)
    out = experts + [router]
    if m.shared_experts:
        out += mlp(m, n, m.shared_ffn, "shared_experts", n.shared_gate_up, n.shared_down)
    if m.shared_expert_gate:
        out.append(_lin(n, "shared_expert_gate", "shared_experts", h, 1, "none"))
    return out


def layer(model: ModelSpec, kind: LayerKind) -> list[Linear]:
    """Every weight matrix of a layer of ``kind``."""
    n = names(model.family)
    out = attention(model.attention_of(kind), n, kind.compress) if kind.attention else []
    if "mamba" in kind.mixer:
        out += mamba(model, n)
    elif kind.mixer == "linear":
        out += linear_attention(model, n)
    elif kind.mixer == "conv":
        out += short_conv(model, n)
    if kind.mlp == "dense":
        out += mlp(model, n, model.ffn_hidden, gate_up=n.gate_up)
    elif kind.mlp == "moe":
        out += moe(model, n)
    return out


def kinds(model: ModelSpec) -> list[LayerKind]:
    """The model's layer kinds (``ModelSpec.kind_counts``)."""
    return list(model.kind_counts)


def output(model: ModelSpec) -> Linear:
    """The output head (its weight is the embedding's when tied); bitsandbytes keeps it
    (transformers quantizers/base.py:39-59 get_keys_to_not_convert)."""
    return Linear(names(model.family).output, "output", model.hidden, model.vocab,
                  quantised=False)


def embeddings(model: ModelSpec) -> list[Linear]:
    """The token embedding and a learned position table, as nn.Embedding modules: peft's
    LoRA Embedding adapts one (tuners/lora/layer.py:1150, lora_embedding_A r x rows and
    lora_embedding_B dim x r); vocabulary-parallel under TP (rows split)."""
    n = names(model.family)
    out = [Linear(n.embedding, "embedding", model.embedding_rows, model.hidden, "row",
                  quantised=False, linear=False)]
    if n.positions and model.learned_positions:
        out.append(Linear(n.positions, "positions", model.learned_positions, model.hidden,
                          "none", quantised=False, linear=False))
    return out

"""What transformers 5.23.0 names each weight matrix of a family: the leaf names peft's
target_modules match.

Which matrices a layer holds follows from its ``LayerKind`` and the ModelSpec's fields
(``ledger.finetune.modules``); only their names and a few layouts differ by family, and
a family not listed here uses Llama's (``Names()``). Each entry is read off the family's
modeling file (``transformers/models/<family>/modeling_<family>.py``) and held to the
built model through peft in ``tests/test_finetune_peft.py``, which runs every family the
ledger reads.

Layouts a name alone does not say:

- ``qkv``: q, k and v as one fused projection of q + 2 kv outputs (GPT-2's c_attn,
  GPT-NeoX / BLOOM / Falcon / Persimmon's query_key_value, Phi-3 and CodeGen's qkv_proj,
  MPT and DBRX's Wqkv);
- ``gate_up`` (``shared_gate_up``): the gated MLP's gate and up as one projection of twice
  the width (Phi-3, GLM; Moshi's fc1; a shared expert's: MiniMax-M3, Granite's
  input_linear);
- ``attn_gate``: the attention output gate's own projection, or None where it is folded
  into q_proj (Qwen3-Next and Qwen3.5's q_proj of twice the width);
- ``wrapper``: the attention projections are modules of that name holding an nn.Linear
  called ``linear`` (Moshi's MoshiLinear): peft cannot adapt the wrapper;
- ``router``: the module holding the router's (E, H) weight, and whether it is an
  ``nn.Linear`` itself (Llama 4's Llama4Router and PhiMoE's PhimoeTopKRouter subclass it)
  or holds one (AFMoE's router.gate, DBRX's router.layer, Hunyuan-MoE's gate.wg);
  otherwise a custom module with a ``weight`` parameter (most families' TopKRouter);
- ``experts``: transformers 5's fused 3-D expert parameters (gate_up_proj (E, 2F, H) and
  down_proj, or up_proj alone when ungated) or DBRX's 2-D w1, v1, w2 of (E F, H);
- ``gdn``: Gated DeltaNet's input projections: in_proj_qkvz + in_proj_ba (Qwen3-Next),
  in_proj_qkv, in_proj_z, in_proj_b, in_proj_a (Qwen3.5), or q/k/v/g/a/b_proj and
  o_proj (OLMo-hybrid);
- ``exact``: the linears are ``nn.Linear`` itself (False: Falcon's FalconLinear), which
  bitsandbytes' ``replace_with_bnb_linear`` requires (integrations/bitsandbytes.py:189
  ``type(module) is nn.Linear``).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Names:
    """One family's leaf names (Llama's by default) and its layouts (module docstring)."""

    q: str = "q_proj"
    k: str = "k_proj"
    v: str = "v_proj"
    o: str = "o_proj"
    qkv: str | None = None
    attn_gate: str | None = "gate_proj"
    wrapper: bool = False
    gate: str = "gate_proj"
    up: str = "up_proj"
    down: str = "down_proj"
    gate_up: str | None = None
    shared_gate_up: str | None = None
    shared_down: str | None = None  # None: ``down``
    router: str = "gate"
    router_module: str = "param"  # "param" (a custom module's weight) | "subclass" | "holds"
    router_holder: str = "router"  # router_module "holds": the module around the nn.Linear
    experts: str = "fused"  # "fused" (3-D) | "glu2d" (DBRX)
    gdn: str = "qkvz"  # "qkvz" | "qkv" | "split"
    embedding: str = "embed_tokens"
    positions: str | None = None  # a learned position table's module
    output: str = "lm_head"
    exact: bool = True
    conv1d: str = "conv1d"  # a recurrent mixer's depthwise convolution


_GPT2 = Names(qkv="c_attn", o="c_proj", up="c_fc", down="c_proj", embedding="wte",
              positions="wpe")  # modeling_gpt2.py GPT2Attention, GPT2MLP (Conv1D)
_NEOX = Names(qkv="query_key_value", o="dense", up="dense_h_to_4h", down="dense_4h_to_h")
_FC = Names(o="out_proj", up="fc1", down="fc2")  # OPT, XGLM, BioGPT
_LFM = Names(o="out_proj", gate="w1", up="w3", down="w2")
_ROUTER = Names(router="router")  # a custom TopKRouter module named router
_MAMBA = Names(embedding="embeddings")

NAMES = {
    "gpt2": _GPT2, "gpt_bigcode": _GPT2,
    "openai-gpt": Names(qkv="c_attn", o="c_proj", up="c_fc", down="c_proj",
                        embedding="tokens_embed", positions="positions_embed"),
    "gpt_neo": Names(o="out_proj", up="c_fc", down="c_proj", embedding="wte", positions="wpe"),
    "gpt_neox": Names(qkv="query_key_value", o="dense", up="dense_h_to_4h",
                      down="dense_4h_to_h", embedding="embed_in"),
    "bloom": Names(qkv="query_key_value", o="dense", up="dense_h_to_4h", down="dense_4h_to_h",
                   embedding="word_embeddings"),
    "falcon": Names(qkv="query_key_value", o="dense", up="dense_h_to_4h", down="dense_4h_to_h",
                    embedding="word_embeddings", exact=False),
    "persimmon": _NEOX,
    "gptj": Names(o="out_proj", up="fc_in", down="fc_out", embedding="wte"),
    "codegen": Names(qkv="qkv_proj", o="out_proj", up="fc_in", down="fc_out", embedding="wte"),
    "mpt": Names(qkv="Wqkv", o="out_proj", embedding="wte"),
    "opt": Names(o="out_proj", up="fc1", down="fc2", positions="embed_positions"),
    "xglm": _FC,
    "biogpt": Names(o="out_proj", up="fc1", down="fc2", positions="embed_positions",
                    output="output_projection"),
    "ctrl": Names(q="Wq", k="Wk", v="Wv", o="dense", up="0", down="2", embedding="w"),
    "phi": Names(o="dense", up="fc1", down="fc2"),
    "nanochat": Names(up="fc1", down="fc2"),
    "starcoder2": Names(up="c_fc", down="c_proj"),
    "phi3": Names(qkv="qkv_proj", gate_up="gate_up_proj"),
    "glm": Names(gate_up="gate_up_proj"),
    "glm4": Names(gate_up="gate_up_proj"),
    "moshi": Names(wrapper=True, gate_up="fc1", down="fc2"),
    "lfm2": _LFM, "lfm2_moe": _LFM,
    "lfm3": Names(gate="w1", up="w3", down="w2", attn_gate="g_proj"),
    "laguna": Names(attn_gate="g_proj"),
    "bailing_hybrid": Names(attn_gate="g_proj"),
    "qwen3_next": Names(attn_gate=None),
    "qwen3_5_text": Names(attn_gate=None, gdn="qkv"),
    "qwen3_5_moe_text": Names(attn_gate=None, gdn="qkv"),
    "olmo_hybrid": Names(gdn="split"),
    "minimax_m3_vl_text": Names(shared_gate_up="gate_up_proj"),
    "granitemoe": _ROUTER, "granitemoe_swa": _ROUTER, "aria_text": _ROUTER,
    "jamba": _ROUTER, "gpt_oss": _ROUTER,
    "granitemoeshared": Names(router="router", shared_gate_up="input_linear",
                              shared_down="output_linear"),
    "granitemoehybrid": Names(router="router", shared_gate_up="input_linear",
                              shared_down="output_linear"),
    "llama4_text": Names(router="router", router_module="subclass"),
    "phimoe": Names(router="router", router_module="subclass"),
    "afmoe": Names(router="gate", router_module="holds"),
    "hunyuan_v1_moe": Names(router="wg", router_module="holds", router_holder="gate"),
    "dbrx": Names(qkv="Wqkv", o="out_proj", router="layer", router_module="holds",
                  experts="glu2d", embedding="wte"),
    "mamba": _MAMBA, "mamba2": _MAMBA, "falcon_mamba": _MAMBA, "nemotron_h": _MAMBA,
}


def names(family: str | None) -> Names:
    """The leaf names of a family's matrices (Llama's for one not listed)."""
    return NAMES.get(family or "llama", Names())

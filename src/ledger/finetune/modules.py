"""The weight matrices of a model as transformers 5.23.0 builds them: what peft's target
names match, what bitsandbytes quantises, how tensor parallelism splits each one.

A ``Linear`` is one weight matrix of one layer under its transformers name. Most are
``nn.Linear`` (GPT-2's are ``Conv1D``, the same to peft and bitsandbytes); transformers 5
stores a MoE layer's routed experts as two fused 3-D parameters, ``gate_up_proj``
(E, 2F, H) and ``down_proj`` (E, H, F) (e.g. modeling_mixtral.py, MixtralExperts), and
most routers as a custom module holding ``gate.weight`` (E, H): those are parameters,
not modules (``module=False``), which neither peft's ``all-linear`` nor bitsandbytes'
``replace_with_bnb_linear`` (integrations/bitsandbytes.py L189: ``Conv1D`` or
``type(module) is nn.Linear``) sees.

Names per family (the modeling files of transformers 5.23.0):

  attention  q_proj k_proj v_proj o_proj; Phi-3 qkv_proj o_proj; GPT-2 c_attn c_proj;
             GPT-NeoX query_key_value dense; MLA (DeepSeek-V2/V3) q_proj or q_a_proj
             q_b_proj, kv_a_proj_with_mqa, kv_b_proj, o_proj
  mlp        gate_proj up_proj down_proj; Phi-3 gate_up_proj down_proj; GPT-2 and
             Starcoder2 c_fc c_proj; GPT-NeoX dense_h_to_4h dense_4h_to_h
  MoE        experts.gate_up_proj, experts.down_proj (parameters); router gate.weight
             (a parameter), Llama 4's ``router`` an nn.Linear; shared experts
             gate_proj up_proj down_proj (nn.Linear), Qwen2-MoE's shared_expert_gate
             an nn.Linear(H, 1)
  output     lm_head (nn.Linear; peft's all-linear leaves it out)

``split``: how Megatron-Core (and DTensor TP) splits the matrix - "col" the output
features (q/k/v, gate/up, MLA's up projections), "row" the input features (o, down),
"none" kept whole on every TP rank (MLA's down projections, routers, Qwen2-MoE's gate).
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.errors import LedgerError
from ledger.model import ModelSpec


@dataclass(frozen=True)
class Linear:
    """One weight matrix of a layer (or the output head), as transformers names it."""

    name: str  # leaf name: what peft's target_modules match
    kind: str  # the ModelSpec.breakdown component it belongs to
    in_features: int
    out_features: int
    split: str = "col"  # TP: "col" (outputs), "row" (inputs), "none" (whole on every rank)
    experts: int = 1  # > 1: a fused 3-D parameter holding every routed expert
    module: bool = True  # an nn.Linear / Conv1D module; False: a parameter of a custom module

    @property
    def weights(self) -> int:
        return self.experts * self.in_features * self.out_features


_FUSED_QKV = {"phi3": "qkv_proj", "gpt2": "c_attn", "gpt_neox": "query_key_value"}
_ATTN_OUT = {"gpt2": "c_proj", "gpt_neox": "dense"}
_PLAIN_MLP = {"gpt2": ("c_fc", "c_proj"), "starcoder2": ("c_fc", "c_proj"),
              "gpt_neox": ("dense_h_to_4h", "dense_4h_to_h")}
# routers that are nn.Linear modules (the rest hold gate.weight in a custom router module)
_LINEAR_ROUTER = {"llama4_text": "router"}


# the families whose modules this file names (held to peft in tests/test_finetune_peft.py)
TABLED = frozenset(("llama", "mistral", "mixtral", "qwen2", "gemma", "gpt2", "gpt_neox",
                    "qwen3", "qwen3_moe", "qwen2_moe", "deepseek_v2", "deepseek_v3",
                    "llama4_text", "gemma2", "gemma3_text", "gpt_oss", "phi3", "olmo2",
                    "granite", "starcoder2"))


def family(model: ModelSpec) -> str:
    """The transformers model_type the model's module names follow (Llama's by default);
    a family whose modules are not tabled here (or a hybrid stack's recurrent layers) is
    refused in one line rather than counted under another family's names."""
    fam = model.family or "llama"
    if fam not in TABLED or getattr(model, "is_hybrid", False):
        raise LedgerError("finetune", f"fine-tuning model_type {fam!r} is not modelled: its "
                                      f"weight matrices' names and kinds are tabled for "
                                      f"{', '.join(sorted(TABLED))}")
    return fam


def attention(model: ModelSpec) -> list[Linear]:
    """One layer's attention projections."""
    h, fam = model.hidden, family(model)
    q, kv, o_in = model.q_dim, model.kv_dim, model.heads * model.v_head_dim
    if model.attention == "mla":
        r_q, r_kv, rope = model.q_lora_rank, model.kv_lora_rank, model.qk_rope_head_dim
        kv_b = model.heads * (model.qk_nope_head_dim + model.v_head_dim)
        qs = [Linear("q_proj", "attention", h, q)] if r_q is None else [
            Linear("q_a_proj", "attention", h, r_q, "none"), Linear("q_b_proj", "attention", r_q, q)]
        return qs + [Linear("kv_a_proj_with_mqa", "attention", h, r_kv + rope, "none"),
                     Linear("kv_b_proj", "attention", r_kv, kv_b),
                     Linear("o_proj", "attention", o_in, h, "row")]
    out = Linear(_ATTN_OUT.get(fam, "o_proj"), "attention", o_in, h, "row")
    if fam in _FUSED_QKV:
        return [Linear(_FUSED_QKV[fam], "attention", h, q + 2 * kv), out]
    return [Linear("q_proj", "attention", h, q), Linear("k_proj", "attention", h, kv),
            Linear("v_proj", "attention", h, kv), out]


def mlp(model: ModelSpec, width: int, kind: str = "mlp") -> list[Linear]:
    """A dense MLP (or a shared expert) of ``width`` features."""
    h, fam = model.hidden, family(model)
    if fam in _PLAIN_MLP:
        up, down = _PLAIN_MLP[fam]
        return [Linear(up, kind, h, width), Linear(down, kind, width, h, "row")]
    if fam == "phi3":
        return [Linear("gate_up_proj", kind, h, 2 * width), Linear("down_proj", kind, width, h,
                                                                   "row")]
    ups = [Linear("gate_proj", kind, h, width)] if model.gated_mlp else []
    return ups + [Linear("up_proj", kind, h, width), Linear("down_proj", kind, width, h, "row")]


def moe(model: ModelSpec) -> list[Linear]:
    """One MoE layer: the fused routed experts, the router, the shared experts and gate."""
    h, e, f, fam = model.hidden, model.num_experts, model.moe_ffn_hidden, family(model)
    gated = 2 if model.gated_mlp else 1
    out = [Linear("gate_up_proj", "experts", h, gated * f, experts=e, module=False),
           Linear("down_proj", "experts", f, h, experts=e, module=False)]
    if fam in _LINEAR_ROUTER:
        out.append(Linear(_LINEAR_ROUTER[fam], "router", h, e, "none"))
    else:
        out.append(Linear("gate.weight", "router", h, e, "none", module=False))
    if model.shared_experts:
        out += mlp(model, model.shared_ffn, "shared_experts")
    if model.shared_expert_gate:
        out.append(Linear("shared_expert_gate", "shared_experts", h, 1, "none"))
    return out


def layer(model: ModelSpec, moe_layer: bool) -> list[Linear]:
    """Every weight matrix of one layer."""
    body = moe(model) if moe_layer else mlp(model, model.ffn_hidden)
    return attention(model) + body


def output(model: ModelSpec) -> Linear:
    """The output head (its weight is the embedding's when tied)."""
    return Linear("lm_head", "output", model.hidden, model.vocab)

"""Dense decoders shaped like Llama (RMSNorm, rotary attention, a gated or plain MLP),
family by family: config.json keys -> ModelSpec fields, as in ``ledger.io.hf.families``.

Each reader cites its config class (``transformers/models/<family>/configuration_*.py``)
and, where its modeling file differs from Llama's, what differs. Counts are held to
transformers' own in ``tests/test_corpus.py``.
"""
from __future__ import annotations

from ledger.errors import LedgerError
from ledger.io.hf.keys import bias, decoder, every, every_layer_window, softcaps, windows
from ledger.anatomy.mixers import GlobalAttention


def _llama(r, *, kv=None, head_dim=None, tied=False, maxpos=2048, **extra):
    """Llama's keys (attention_bias on q/k/v/o, mlp_bias) and ``extra`` fields."""
    f, cap = decoder(r, kv=kv, head_dim=head_dim, tied=tied, maxpos=maxpos)
    return {**f, **bias(r), "mlp_bias": r.get("mlp_bias", False, bool), **extra}, cap


def helium(r):  # configuration_helium.py; modeling_helium.py:215-223: o_proj has no bias
    f, cap = _llama(r, kv=20, head_dim=128, maxpos=4096)
    return {**f, "out_bias": False}, cap


def internlm3(r):  # configuration_internlm3.py; built as LlamaForCausalLM
    return _llama(r, kv=2, head_dim=128, maxpos=32768)


def iquestcoder(r):  # configuration_iquestcoder.py; built as LlamaForCausalLM
    return _llama(r, kv=8, head_dim=128, maxpos=131072)


def emu3_text_model(r):  # configuration_emu3.py: Emu3TextConfig, Llama-shaped
    return _llama(r, kv=8, maxpos=9216)


def hunyuan_v1_dense(r):  # configuration_hunyuan_v1_dense.py; q/k norms over head_dim
    return _llama(r, qk_norm="head")


def hyperclovax(r):  # configuration_hyperclovax.py; use_post_norm adds two (Peri-LN)
    f, cap = _llama(r)
    return {**f, "layer_norms": 4 if r.get("use_post_norm", True, bool) else 2}, cap


def cwm(r):  # configuration_cwm.py; layer_types: 1 global : 3 sliding
    f, cap = _llama(r, kv=8, head_dim=128, maxpos=131072)
    return {**f, **windows(r, f["layers"], 8192, every(f["layers"], 4, offset=1))}, cap


def smollm3(r):  # configuration_smollm3.py; NoPE layers have no parameters of their own
    f, cap = _llama(r, kv=4, maxpos=32768, tied=True)
    r.ignore("no_rope_layers", "no_rope_layer_interval")  # rotary or not: nothing priced
    return ({**f, **windows(r, f["layers"])} if r.get("use_sliding_window", False, bool)
            else f), cap


def ernie4_5(r):  # configuration_ernie4_5.py; use_bias on q/k/v/o and the MLP
    f, cap = decoder(r, kv=2, head_dim=128, tied=True, maxpos=131072)
    b = r.get("use_bias", False, bool)
    return {**f, "qkv_bias": b, "out_bias": b, "mlp_bias": b}, cap


def glm(r):  # configuration_glm.py; q/k/v biases only, gate_up fused (the same count)
    f, cap = decoder(r, kv=2, head_dim=128, tied=False, maxpos=131072)
    return {**f, "qkv_bias": r.get("attention_bias", True, bool)}, cap


def glm4(r):  # configuration_glm4.py; glm + post-attention and post-MLP norms
    f, cap = glm(r)
    return {**f, "layer_norms": 4}, cap


def seed_oss(r):  # configuration_seed_oss.py; o_proj's bias is its own key
    f, cap = _llama(r, kv=8, head_dim=128, maxpos=524288)
    return {**f, "qkv_bias": r.get("attention_bias", True, bool),
            "out_bias": r.get("attention_out_bias", False, bool)}, cap


def ministral(r):  # configuration_ministral.py; layer_types, all sliding by default
    f, cap = _llama(r, kv=8, maxpos=131072)
    return {**f, **windows(r, f["layers"], 4096, range(f["layers"]))}, cap


def ministral3(r):  # configuration_ministral3.py; a window masks every layer (Mistral)
    f, cap = _llama(r, kv=8, head_dim=128, maxpos=262144)
    return {**f, **every_layer_window(r)}, cap


def exaone4(r):  # configuration_exaone4.py; qk-norm, post-norms only, 3 sliding : 1 global
    f, cap = _llama(r, qk_norm="head")
    pattern = r.get("sliding_window_pattern", 4)
    return {**f, **windows(r, f["layers"], 4096, every(f["layers"], pattern))}, cap


def olmo3(r):  # configuration_olmo3.py; OLMo 2 with 3 sliding : 1 global
    f, cap = _llama(r, qk_norm="full")
    return {**f, "mlp_bias": False, **windows(r, f["layers"], 4096,
                                              every(f["layers"], 4))}, cap


def vaultgemma(r):  # configuration_vaultgemma.py; Gemma 2 with two norms, alternating
    f, cap = decoder(r, kv=4, head_dim=256, tied=True, maxpos=8192)
    return {**f, **bias(r), **softcaps(r, 50.0, 30.0),
            **windows(r, f["layers"], 4096, every(f["layers"], 2))}, cap


def arcee(r):  # configuration_arcee.py; a plain up/down MLP (ReLU^2)
    f, cap = _llama(r, maxpos=4096)
    return {**f, "gated_mlp": False}, cap


def apertus(r):  # configuration_apertus.py; plain MLP with xIELU's alpha_p, alpha_n
    f, cap = _llama(r, maxpos=65536, qk_norm="head")  # (transformers/activations.py:249-250)
    xielu = r.get("hidden_act", "xielu", str) == "xielu"
    return {**f, "gated_mlp": False, "act_params": 2 * xielu}, cap


def bitnet(r):  # configuration_bitnet.py; modeling_bitnet.py:73,176 sub-norms
    f, cap = _llama(r, kv=5)
    return {**f, "sub_norms": True}, cap


def diffllama(r):  # configuration_diffllama.py; modeling_diffllama.py:238-241 lambdas
    f, cap = _llama(r)
    return {**f, "diff_attention": True}, cap


def olmo(r):  # configuration_olmo.py; modeling_olmo.py:57 LayerNorm without parameters
    f, cap = _llama(r)
    return {**f, "norm": "layernorm", "norm_weights": False}, cap


def nanochat(r):  # configuration_nanochat.py; weightless RMSNorms and qk-norm, ReLU^2 MLP
    f, cap = _llama(r, kv=None)
    return {**f, "gated_mlp": False, "norm_weights": False, "qk_norm": "head",
            **softcaps(r, None, 15.0)}, cap


def gemma4_unified_text(r):  # configuration_gemma4_unified.py; modeling_gemma4_unified.py:341
    r.refuse("attention_k_eq_v", False, "global layers whose keys are their values")
    r.refuse("num_kv_shared_layers", 0, "layers reading another layer's K/V")
    r.refuse("use_double_wide_mlp", False, "a double-width MLP on the shared layers")
    f, cap = decoder(r, kv=4, head_dim=256, tied=True, maxpos=262144)
    local = windows(r, f["layers"], 1024, every(f["layers"], 6))
    if local.get("local_layers") and f["layers"] - 1 in local["local_layers"]:
        # configuration_gemma4_unified.py:164-168 forces the last layer to full attention
        local["local_layers"] = local["local_layers"][:-1] or None
        local = local if local["local_layers"] else {}
    per = r.sub("per_layer_config") if "per_layer_config" in r.cfg else {  # the class's own:
        str(i): {"head_dim": r.get("global_head_dim", 512)} for i in range(f["layers"])  # :177
        if i not in (local.get("local_layers") or ())}
    widths = {}
    for key, layer in per.items():
        sub = type(r)(layer if isinstance(layer, dict) else {"head_dim": layer}, r.kind)
        widths[key] = sub.get("head_dim", f["head_dim"])
    globals_ = [i for i in range(f["layers"]) if i not in (local.get("local_layers") or ())]
    wide: set[int] = set()  # layers (by index, or all of a layer type) of another width
    for key, width in widths.items():
        if width != f["head_dim"]:
            wide |= {int(key)} if key.isdigit() else set(globals_) \
                if key == "full_attention" else {-1}
    if wide and wide != set(globals_) or len(set(widths.values()) - {f["head_dim"]}) > 1:
        raise LedgerError("config.json", f"'per_layer_config' widens layers {sorted(wide)}; "
                                         f"the ledger's global layers are {globals_}")
    g = {"global_attention": GlobalAttention(head_dim=max(widths.values()))} if wide else {}
    return {**f, **bias(r), "layer_norms": 4, "qk_norm": "head", **softcaps(r, None, None),
            **local, **g}, cap


FAMILIES = {fn.__name__: fn for fn in (
    helium, internlm3, iquestcoder, emu3_text_model, hunyuan_v1_dense, hyperclovax, cwm,
    smollm3, ernie4_5, glm, glm4, seed_oss, ministral, ministral3, exaone4, olmo3,
    vaultgemma, arcee, apertus, bitnet, diffllama, olmo, nanochat, gemma4_unified_text)}

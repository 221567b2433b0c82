"""The decoder-only causal LMs of the pinned transformers, from its own mappings, and their
meta-device parameter counts (the reference ``tests/test_corpus.py`` holds the ledger to).

Which keys of ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` are decoder LMs is derived from
transformers' other mappings and configs, not listed by hand:

- encoder-decoder: the key also maps a seq2seq LM (``MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM``) or
  its default config says ``is_encoder_decoder``;
- encoder: the key also maps a masked LM (a bidirectional stack that offers a causal head),
  or its causal class is the decoder half of an encoder-decoder pair - it builds
  cross-attention (TrOCR), or takes its name from that role (``BertGenerationDecoder``);
- composite: the key maps an image-text or multimodal LM, or its config holds a
  ``text_config`` (the text model is what a language-model ledger counts);
- decoder: the rest.
"""
from __future__ import annotations

import json
import re
import warnings
from functools import lru_cache

torch = None
transformers = None


def _load():
    global torch, transformers
    if transformers is None:
        import torch as t
        import transformers as tf

        torch, transformers = t, tf
        tf.logging.set_verbosity_error()
    return transformers


def mappings():
    ma = _load().models.auto.modeling_auto
    return ma


def config(model_type: str, **over):
    """transformers' default config of ``model_type`` (``over`` merged into it)."""
    tf = _load()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tf.AutoConfig.for_model(model_type, **over)


def kind_of(model_type: str) -> str:
    ma = mappings()
    if model_type in ma.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES:
        return "encoder-decoder"
    if model_type in ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return "encoder"
    if ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type].endswith("Decoder"):
        return "encoder"  # bert-generation: the decoder of EncoderDecoderModel
    try:
        cfg = config(model_type)
    except Exception:  # noqa: BLE001 - a default the class itself refuses: still a member
        return "composite" if "text_config" in _sub_configs(model_type) else "decoder"
    if getattr(cfg, "is_encoder_decoder", False):
        return "encoder-decoder"
    if model_type in ma.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES \
            or model_type in ma.MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES \
            or "text_config" in _sub_configs(model_type):
        return "composite"
    return "decoder"


def _sub_configs(model_type: str) -> dict:
    cls = _load().models.auto.configuration_auto.CONFIG_MAPPING[model_type]
    return getattr(cls, "sub_configs", None) or {}


def builds_cross_attention(model_type: str) -> bool:
    """The causal class builds cross-attention to an encoder (TrOCR's ``encoder_attn``)."""
    names = [n for n, _ in build(config(model_type)).named_parameters()]
    return any(re.search(r"encoder_attn|crossattention|cross_attn", n) for n in names)


@lru_cache(maxsize=None)
def members() -> dict[str, str]:
    """model_type -> "decoder" | "composite", for the decoder LMs of the causal-LM mapping."""
    out = {}
    for mt in sorted(mappings().MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        kind = kind_of(mt)
        if kind == "decoder" and getattr(config(mt), "is_decoder", None) is not None \
                and builds_cross_attention(mt):  # a stack that can be made a decoder
            kind = "encoder"
        if kind in ("decoder", "composite"):
            out[mt] = kind
    return out


def build(cfg):
    tf = _load()
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        return tf.AutoModelForCausalLM.from_config(cfg)


def _own_causal_class(cfg):
    import importlib

    module = importlib.import_module(type(cfg).__module__.replace(".configuration_",
                                                                  ".modeling_"))
    for name in dir(module):
        cls = getattr(module, name)
        if name.endswith("ForCausalLM") and getattr(cls, "config_class", None) is type(cfg):
            with warnings.catch_warnings(), torch.device("meta"):
                warnings.simplefilter("ignore")
                return cls(cfg)
    raise ValueError(f"no causal class takes {type(cfg).__name__}")


def decoded(value):
    """transformers writes a non-finite float as {"__float__": "Infinity"}: the float."""
    if isinstance(value, dict):
        if set(value) == {"__float__"}:
            return float(value["__float__"])
        return {k: decoded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decoded(v) for v in value]
    return value


def saved(cfg) -> dict:
    """The dict ``save_pretrained`` writes as config.json (the diff against the base
    class, as transformers writes it)."""
    return json.loads(cfg.to_json_string(use_diff=True))


# ---- MoE: the routed experts' share, read off the built model ------------------------
TOPK_KEYS = ("num_experts_per_tok", "moe_topk", "top_k", "moe_k", "experts_per_token",
             "num_experts_per_token", "router_top_k", "moe_top_k")
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")


def _first_int(cfg, keys):
    for c in (cfg, getattr(cfg, "ffn_config", None)):
        for k in keys:
            v = getattr(c, k, None) if c is not None else None
            if isinstance(v, list) and v and all(isinstance(x, int) for x in v):
                v = v[0]  # Hunyuan's moe_topk, one per layer
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
    return None


def routed_params(model) -> int:
    """Parameters of the routed experts: tensors under an ``experts`` module (not a
    shared expert's), two or more dimensions (a bias shared by all experts is dense)."""
    total = 0
    for n, p in model.named_parameters():
        low = n.lower()
        if "shared" in low or "router" in low or p.dim() < 2:
            continue
        if re.search(r"(^|\.)(experts|local_experts)(\.|$)", low):
            total += p.numel()
    return total


def counts(cfg) -> tuple[int, float | None]:
    """(total parameters, active parameters per token or None for a dense model) of the
    causal LM transformers builds from ``cfg`` on the meta device; tied weights once. A
    composite's text config that the auto mapping does not list (Emu3's) is built by the
    causal class of its modeling module that takes it."""
    try:
        model = build(cfg)
    except ValueError:  # not in the auto mapping: the family's own causal class for it
        model = _own_causal_class(cfg)
    total = sum(p.numel() for p in model.parameters())
    routed = routed_params(model)
    if not routed:
        return total, None
    k, e = _first_int(cfg, TOPK_KEYS), _first_int(cfg, EXPERT_KEYS)
    if k is None or e is None:
        return total, None
    return total, total - routed * (1 - k / e)

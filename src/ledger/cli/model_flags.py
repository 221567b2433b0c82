"""The model flags of the CLI: one per ModelSpec field, and how a model is loaded.

``custom`` builds a ModelSpec from these flags alone. A preset or a config.json fixes
its own shape: any model flag but ``--seq`` given with one is refused by name rather
than dropped. Megatron-LM's spelling is accepted where it has one
(megatron/training/arguments.py: --num-query-groups, --kv-channels, --q-lora-rank,
--qk-head-dim, --qk-pos-emb-head-dim, --moe-ffn-hidden-size, --mtp-num-layers ...).
"""
from __future__ import annotations

import argparse
import os
from dataclasses import fields, replace

from ledger.checks import ATTENTIONS, ATTN_GATES, LOCAL_KINDS, NORMS, QK_NORMS
from ledger.errors import LedgerError, clip
from ledger.io import MAX_LAYERS, model_flag, natural, read_hf_config
from ledger.io.hf.hub import hub_config, is_hub_id
from ledger.anatomy.compressed import CompressedAttention
from ledger.anatomy.mixers import GlobalAttention, LinearAttention, Mamba, ShortConv
from ledger.model import PRESETS, ModelSpec, preset

from ledger.io.hf.families import FAMILIES  # noqa: E402

LAYERS = "layers"  # marker type: a layer-index list such as '1,3,5-9' or 'every:2'
NOT = "not"  # marker type: a flag that turns a default-on field off
MIXER_PATTERN = "mixers"  # marker type: one letter per layer
RECORDS = (Mamba, LinearAttention, ShortConv, GlobalAttention,
           CompressedAttention)  # given as key=value,...
MIXER_LETTERS = {"A": "attention", "M": "mamba", "L": "linear", "C": "conv",
                 "P": "attention+mamba", "N": "none"}

# ModelSpec field -> (flags, type or choices, help)
FLAGS: dict[str, tuple[tuple[str, ...], object, str]] = {
    "layers": (("--layers", "--num-layers"), int, "transformer layers"),
    "hidden": (("--hidden", "--hidden-size"), int, "model width"),
    "heads": (("--heads", "--num-attention-heads"), int, "query heads"),
    "kv_heads": (("--kv-heads", "--num-query-groups"), int, "key/value heads (GQA)"),
    "head_dim": (("--head-dim", "--kv-channels"), int, "head width (default hidden/heads)"),
    "ffn_hidden": (("--ffn", "--ffn-hidden-size"), int, "dense MLP width"),
    "vocab": (("--vocab", "--vocab-size"), int, "vocabulary"),
    "seq_len": (("--seq", "--seq-length"), int, "sequence length (default 4096)"),
    "gated_mlp": (("--mlp",), ("swiglu", "gelu"), "gated (3 matrices) or plain MLP"),
    "tied_embeddings": (("--tied",), bool, "tie input and output embeddings"),
    "qkv_bias": (("--qkv-bias", "--add-qkv-bias"), bool, "q/k/v (MLA: down-proj) biases"),
    "out_bias": (("--out-bias",), bool, "attention output bias"),
    "mlp_bias": (("--mlp-bias",), bool, "biases on every MLP and expert matrix"),
    "norm": (("--norm",), NORMS, "norm kind (layernorm has a bias)"),
    "learned_positions": (("--learned-positions",), int, "rows of a learned position table"),
    "attention": (("--attention",), ATTENTIONS, "mla: multi-head latent attention; csa: "
                                                "DeepSeek-V4's (with --compressed)"),
    "q_lora_rank": (("--q-lora-rank",), int, "MLA query rank (omit: plain q_proj)"),
    "kv_lora_rank": (("--kv-lora-rank",), int, "MLA K/V latent width"),
    "qk_rope_head_dim": (("--qk-rope-head-dim", "--qk-pos-emb-head-dim"), int,
                         "MLA rotary q/k part"),
    "qk_nope_head_dim": (("--qk-nope-head-dim", "--qk-head-dim"), int, "MLA q/k part w/o rope"),
    "v_head_dim": (("--v-head-dim",), int, "MLA value head width"),
    "qk_norm": (("--qk-norm",), QK_NORMS, "head: over head_dim (Qwen3); full: OLMo 2"),
    "layer_norms": (("--layer-norms",), int, "norms per layer (Gemma 2/3: 4)"),
    "sliding_window": (("--sliding-window",), int, "keys a local layer sees"),
    "local_layers": (("--local-layers",), LAYERS, "local layers: '0-4,6', 'except-every:6'"),
    "local_attention": (("--local-attention",), LOCAL_KINDS, "sliding or chunked (Llama 4)"),
    "attention_sinks": (("--attention-sinks",), bool, "one learned logit per head (gpt-oss)"),
    "rope_mscale": (("--rope-mscale",), float,
                    "YaRN's factor on cos/sin (gpt-oss 1.35; not 1: Megatron's eager RoPE)"),
    "glu_clamp": (("--glu-clamp",), float,
                  "GLU inputs clamped at this value (gpt-oss: 7; 0 = off)"),
    "attn_logit_softcap": (("--attn-softcap",), float, "tanh cap on scores (Gemma 2)"),
    "final_logit_softcap": (("--final-softcap",), float, "tanh cap on logits (Gemma 2)"),
    "num_experts": (("--num-experts",), int, "routed experts per MoE layer"),
    "top_k": (("--top-k", "--moe-router-topk"), int, "experts per token"),
    "moe_ffn_hidden": (("--moe-ffn", "--moe-ffn-hidden-size"), int, "one expert's width"),
    "shared_experts": (("--shared-experts",), int, "always-on experts"),
    "shared_expert_ffn": (("--shared-expert-ffn", "--moe-shared-expert-intermediate-size"),
                          int, "shared MLP width (default shared x moe-ffn)"),
    "shared_expert_gate": (("--shared-expert-gate",), bool, "Qwen2-MoE's gate on it"),
    "router_bias": (("--router-bias",), bool, "router bias (gpt-oss)"),
    "first_dense_layers": (("--first-dense-layers",), int, "leading dense layers"),
    "moe_layer_ids": (("--moe-layers",), LAYERS, "MoE layers: '1,3,5', 'every:2'"),
    "mtp_layers": (("--mtp-layers", "--mtp-num-layers"), int, "MTP depths (DeepSeek-V3: 1)"),
    "mtp_pattern": (("--mtp-pattern", "--mtp-hybrid-override-pattern"), str,
                    "an MTP block's layers in M * - E (Nemotron 3: '*E'); default one layer"),
    "mtp_shared": (("--mtp-use-repeated-layer",), bool, "one MTP block at every depth"),
    "moe_latent": (("--moe-latent", "--moe-latent-size"), int,
                   "LatentMoE: the experts' width between two projections (Nemotron 3 Super)"),
    "router_groups": (("--router-groups", "--moe-router-num-groups"), int,
                      "group-limited routing: expert groups (n_group)"),
    "router_group_topk": (("--router-group-topk", "--moe-router-group-topk"), int,
                          "groups a token may pick (topk_group; DeepSeek-V3: 4 nodes)"),
    "family": (("--family",), tuple(sorted(FAMILIES)),
               "the transformers model_type whose module names peft's targets match "
               "(default: Llama's)"),
    "moe_norm": (("--moe-norm",), bool, "a norm after each MoE block (AXK1)"),
    "attn_gate": (("--attn-gate",), ATTN_GATES, "sigmoid gate on attention: per channel "
                                                "(Qwen3-Next) or per head (Laguna)"),
    "attn_gate_bias": (("--attn-gate-bias",), bool, "the gate's bias per head (Beam)"),
    "diff_attention": (("--diff-attention",), bool, "differential attention (DiffLlama)"),
    "index_heads": (("--index-heads",), int, "DSA lightning indexer heads (DeepSeek-V3.2)"),
    "index_head_dim": (("--index-head-dim",), int, "DSA indexer head width"),
    "index_topk": (("--index-topk",), int, "keys each query attends under DSA"),
    "norm_weights": (("--no-norm-weights",), NOT, "norms without parameters (OLMo)"),
    "embedding_norm": (("--embedding-norm",), bool, "a norm on the embedding (BLOOM)"),
    "final_norm": (("--no-final-norm",), NOT, "no norm after the last layer (GPT-1)"),
    "sub_norms": (("--sub-norms",), bool, "BitNet's norms before o_proj and down_proj"),
    "act_params": (("--act-params",), int, "learned scalars per MLP activation (xIELU: 2)"),
    "lm_head_bias": (("--lm-head-bias",), bool, "a bias on the output layer (GPT-J, Phi)"),
    "embedding_rows": (("--embedding-rows",), int, "input embedding rows (default vocab)"),
    "mixers": (("--mixers",), MIXER_PATTERN, "per-layer mixers: A attention, M mamba, "
                                             "L linear, C conv, P attention+mamba, N none; "
                                             "'MMMA*8' repeats MMMA 8 times"),
    "mamba": (("--mamba",), Mamba, "the Mamba mixer: version=2,inner=8192,state=128,"
                                   "heads=128,groups=8 (fields of ledger.anatomy.mixers.Mamba)"),
    "linear": (("--linear",), LinearAttention, "linear attention: kind=gdn,key_heads=16,"
                                               "key_dim=128,value_heads=32,value_dim=128"),
    "conv": (("--conv",), ShortConv, "LFM2's short convolution: kernel=3"),
    "global_attention": (("--global-attention",), GlobalAttention,
                         "global layers' own attention: head_dim=512,kv_heads=4,sinks=false"),
    "no_mlp_layers": (("--no-mlp-layers",), LAYERS, "layers without an MLP: '0-3', 'all'"),
    "compressed": (("--compressed",), CompressedAttention,
                   "DeepSeek-V4's attention: ratios=WW+CH*20+C,o_groups=8,o_lora_rank=1024 "
                   "(per layer W: the window alone, C: CSA every 4 tokens, H: HCA every 128)"),
    "hc_mult": (("--hc-mult",), int, "mHC residual streams (DeepSeek-V4: 4; 0: one residual)"),
    "hc_head": (("--no-hc-head",), NOT, "mHC's streams averaged at the end (Megatron-Core), "
                                        "not collapsed by a learned head (DeepSeek-V4)"),
}
RATIO_LETTERS = {"W": 0, "C": 4, "H": 128}  # ledger.anatomy.compressed.RATIOS
# the record flags' keys a ModelSpec check names (ledger.anatomy.compressed.check)
RECORD_FIELDS = {"compress_ratios": "compressed", "o_groups": "compressed",
                 "o_lora_rank": "compressed"}
# mHC's residual streams. DeepSeek-V4 ships 4 (its config.json's hc_mult: 4) and Megatron's
# --mhc-num-residual-streams defaults to 4 (transformer_config.py L1145 @d98e8a64) with no
# bound: an int read by ArgumentGroupFactory (arguments.py L2373), asserted nowhere, built
# for any n as an n*hidden -> n^2+2n projection (hyper_connection.py L183 @d98e8a64). The
# parameters grow as n^3 x hidden per layer and the residual as n x hidden, so a typed slip (100000)
# priced a 352-trillion-parameter model: typed streams are held to 4x the 4 used in practice.
MAX_HC_MULT = 16
# routing, not shape: these may override a preset's or a config.json's own values
ROUTING = ("router_groups", "router_group_topk")
CUSTOM_REQUIRED = ("layers", "hidden", "heads", "ffn_hidden", "vocab")


def add_model_flags(p: argparse.ArgumentParser) -> None:
    """The model argument and one flag per ModelSpec field (all default to unset)."""
    p.add_argument("model", nargs="?",  # or from --from-megatron / --from-torchtitan
                   help="preset name, path to a HF config.json, a hub id in the local "
                        "Hugging Face cache (org/name), or 'custom'")
    g = p.add_argument_group("model (for 'custom'; --seq also sets a preset's length)")
    for field, (names, typ, text) in FLAGS.items():
        if typ is bool or typ is NOT:
            g.add_argument(*names, dest=field, action="store_const", const=typ is bool,
                           help=text)
        elif isinstance(typ, tuple) and len(typ) > 12:  # a long list: named once, not printed
            g.add_argument(*names, dest=field, choices=typ, metavar=field.upper(),
                           help=f"{text}; one of {len(typ)} (docs/models.md)")
        elif isinstance(typ, tuple):
            g.add_argument(*names, dest=field, choices=typ, help=text)
        else:
            raw = typ in (LAYERS, MIXER_PATTERN) or typ in RECORDS
            parse = str if raw else hc_streams if field == "hc_mult" else model_flag(typ)
            g.add_argument(*names, dest=field, type=parse, help=text)


def hc_streams(text: str) -> int:
    """argparse type of --hc-mult: 0..MAX_HC_MULT streams, the reason in the refusal."""
    try:
        return natural(MAX_HC_MULT)(text)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(
            f"{e} (DeepSeek-V4 and Megatron's mHC use 4 streams)") from None


def parse_layers(text: str, layers: int, flag: str) -> tuple[int, ...]:
    """'1,3,5-9' (inclusive ranges), 'every:N' (layers i with (i+1) % N == 0, as
    Llama 4 and Qwen-MoE space them) or 'except-every:N' (the others: Gemma 3's local)."""
    out: set[int] = set()
    if layers > MAX_LAYERS:  # the set below is built per layer: bounded first
        raise LedgerError("--layers", f"layers({layers:,}) exceeds the limit of {MAX_LAYERS:,}")
    try:
        for item in text.split(","):
            item = item.strip()
            if item.startswith(("every:", "except-every:")):
                n = int(item.split(":")[1])
                if n < 1:
                    raise ValueError
                keep = item.startswith("every:")
                out |= {i for i in range(layers) if ((i + 1) % n == 0) == keep}
            elif "-" in item:
                a, b = (int(x) for x in item.split("-"))
                if b < a:  # '5-2' is a typo, not an empty set of layers
                    raise ValueError
                out |= set(range(a, _in_model(b, layers, flag) + 1))
            else:
                out.add(int(item))
    except LedgerError:
        raise
    except ValueError:
        raise LedgerError(flag, f"expected layer indices like '1,3,5-9' or 'every:2', "
                                f"got {clip(repr(text))}") from None
    return tuple(sorted(out))


def _in_model(last: int, layers: int, flag: str) -> int:
    """A range's last index, refused before the range is built when past the model."""
    if last >= layers:
        raise LedgerError(flag, f"layer {clip(last)} is past the model's {layers:,} layers "
                                f"(indices 0..{layers - 1:,})")
    return last


def parse_mixers(text: str, layers: int) -> tuple[str, ...]:
    """One letter per layer (``MIXER_LETTERS``); 'MMMA*8' repeats a group 8 times."""
    out: list[str] = []
    for group in text.replace(" ", "").split(","):
        letters, _, times = group.partition("*")
        try:
            n = int(times) if times else 1
            if len(out) + n * len(letters) > layers:  # counted before it is built
                raise LedgerError("--mixers", f"names more than the model's {layers:,} "
                                              f"layers ({clip(repr(text))})")
            out += [MIXER_LETTERS[c] for c in letters.upper()] * n
        except LedgerError:
            raise
        except (KeyError, ValueError):
            raise LedgerError("--mixers", f"expected letters of {''.join(MIXER_LETTERS)} "
                                          f"like 'MMMA*8', got {clip(repr(text))}") from None
    if len(out) != layers:
        raise LedgerError("--mixers", f"names {len(out)} layers, the model has {layers}")
    return tuple(out)


def parse_ratios(text: str, flag: str) -> tuple[int, ...]:
    """DeepSeek-V4's per-layer compress ratios as letters (``RATIO_LETTERS``), groups joined
    by '+', 'CH*20' repeating one 20 times."""
    out: list[int] = []
    for group in text.upper().split("+"):
        letters, _, times = group.partition("*")
        try:
            n = int(times) if times else 1
            layer = [RATIO_LETTERS[c] for c in letters]
        except (KeyError, ValueError):
            n = -1
        if n < 0:
            raise LedgerError(flag, f"ratios: expected letters of {''.join(RATIO_LETTERS)} "
                                    f"like 'WW+CH*20+C', got {clip(repr(text))}")
        if len(out) + n * len(letters) > MAX_LAYERS:  # before the list is built
            raise LedgerError(flag, f"ratios: name more than {MAX_LAYERS:,} layers")
        out += layer * n
    return tuple(out)


def parse_record(cls, text: str, flag: str):
    """``key=value,key=value`` into a ``ledger.anatomy.mixers`` record (integers and true/false)."""
    names = {f.name: f.type for f in fields(cls)}
    kw: dict[str, object] = {}
    typed: dict[str, str] = {}
    for item in filter(None, text.replace(" ", "").split(",")):
        key, eq, value = item.partition("=")
        if not eq or key not in names:
            raise LedgerError(flag, f"expected key=value with keys {', '.join(names)}, got "
                                    f"{item!r}")
        if key in typed:  # a slip, not 'the last one wins'
            raise LedgerError(flag, f"{key} given twice ({clip(repr(typed[key]))} and "
                                    f"{clip(repr(value))})")
        typed[key] = value
        if key == "ratios":  # CompressedAttention's per-layer ratios, as letters
            kw[key] = parse_ratios(value, flag)
        elif value in ("true", "false"):
            kw[key] = value == "true"
        elif names[key] == "str":
            kw[key] = value
        else:
            try:
                kw[key] = model_flag(int)(value)
            except argparse.ArgumentTypeError as e:
                raise LedgerError(flag, f"{key}: {e}") from None
    try:
        return cls(**kw)
    except TypeError as e:  # a required key missing
        raise LedgerError(flag, str(e).split(".__init__() ")[-1]) from None
    except LedgerError as e:  # a key's value: name the flag it was typed in too
        raise LedgerError(flag, str(e)) from None


def _given(a: argparse.Namespace) -> dict[str, object]:
    return {f: getattr(a, f) for f in FLAGS if getattr(a, f, None) is not None}


def given_model_flags(a: argparse.Namespace) -> dict[str, object]:
    """The model flags given, by ModelSpec field, values as parsed ('swiglu'/'gelu' as
    gated_mlp True/False; layer lists as typed)."""
    given = _given(a)
    if "gated_mlp" in given:
        given["gated_mlp"] = given["gated_mlp"] == "swiglu"
    return given


def custom_model(a: argparse.Namespace) -> ModelSpec:
    """A ModelSpec from the flags alone."""
    given = _given(a)
    missing = [FLAGS[f][0][0] for f in CUSTOM_REQUIRED if f not in given]
    if missing:
        raise LedgerError("model", f"custom needs {' '.join(missing)}")
    if "gated_mlp" in given:
        given["gated_mlp"] = given["gated_mlp"] == "swiglu"
    if given["layers"] > MAX_LAYERS:  # per-layer lists below are bounded by it
        raise LedgerError("--layers", f"layers({given['layers']:,}) exceeds the limit of "
                                      f"{MAX_LAYERS:,}")
    for f in ("local_layers", "moe_layer_ids", "no_mlp_layers"):
        if f in given:
            text = given[f].replace("all", f"0-{given['layers'] - 1}")
            given[f] = parse_layers(text, given["layers"], FLAGS[f][0][0])
    if "mixers" in given:
        given["mixers"] = parse_mixers(given["mixers"], given["layers"])
    check_latent(given.get("moe_latent"), given["hidden"])
    if given.get("hc_head") is False and not given.get("hc_mult"):  # no streams to average
        raise LedgerError("--no-hc-head", f"averages mHC's streams: needs --hc-mult above 0, "
                                          f"got {given.get('hc_mult', 0)}")
    for f, (names, typ, _) in FLAGS.items():
        if typ in RECORDS and f in given:
            given[f] = parse_record(typ, given[f], names[0])
    seq_default = "seq_len" not in given
    given.setdefault("seq_len", 4096)
    try:
        return ModelSpec(name="custom", seq_default=seq_default, **given)
    except LedgerError as e:  # name the flag the user typed, not the field
        field = RECORD_FIELDS.get(e.field, e.field)
        if field not in FLAGS:
            raise
        message = str(e).split(": ", 1)[1]
        if field != e.field:  # a key of a record flag: say which
            message = f"{e.field}: {message}"
        raise LedgerError(FLAGS[field][0][0], message) from None


def check_latent(latent: int | None, hidden: int) -> None:
    """--moe-latent: a positive integer below --hidden. Megatron asserts only that it is
    positive and beside --num-experts (arguments.py L1980-1982 @d98e8a64; a launch file is
    read so), but the latent is the narrower width the experts are dispatched and run at
    between a hidden -> latent and a latent -> hidden projection (moe_layer.py L265-304
    @d98e8a64; Nemotron 3 Super 4096 -> 1024, Ultra 8192 -> 2048: tests/fixtures/nemotron3):
    typed at or above the width it compresses, it is a slip that adds two projections and
    prices a wider all-to-all. Typed beside a launch file, it is held to the file's
    --hidden-size alike."""
    if latent is not None and latent >= hidden:
        raise LedgerError("--moe-latent", f"{latent:,} must be below --hidden {hidden:,} (the "
                                          f"experts' narrower width between the two latent "
                                          f"projections)")


def load_model(a: argparse.Namespace) -> ModelSpec:
    """A preset, a config.json, or a custom model from flags; --seq sets the length.
    Shape flags given with a preset or a config.json are refused, never ignored."""
    if a.model == "custom":
        return custom_model(a)
    if a.model.lower() in PRESETS:
        m = preset(a.model)
    elif a.model.endswith(".json") or a.model == "" or os.path.lexists(a.model):
        m, notes = read_hf_config(a.model)
        a.model_notes = notes
    elif is_hub_id(a.model):  # org/name: the local Hugging Face cache, offline
        m, notes = read_hf_config(hub_config(a.model), name=a.model)
        a.model_notes = notes
    else:
        m = preset(a.model)  # raises: unknown model, lists the presets
    given = _given(a)
    ignored = [FLAGS[f][0][0] for f in given if f != "seq_len" and f not in ROUTING]
    if ignored:
        raise LedgerError("model", f"{' '.join(ignored)} would change {m.name}, whose shape "
                                   f"is fixed by its preset or config.json; use 'custom' "
                                   f"with every shape flag (only --seq and the router "
                                   f"group flags apply here)")
    routing = {f: given[f] for f in ROUTING if f in given}
    if routing:  # the parameter count does not move; ModelSpec checks the values
        m = replace(m, **routing)
    return m.with_seq(a.seq_len) if a.seq_len is not None else m

"""``--from-megatron FILE``: the arguments of a Megatron-LM ``pretrain_gpt.py`` launch.

The file holds flags as a launch script passes them: one or many per line, ``\\``
continuations, ``#`` comments; a leading launcher (``torchrun ... pretrain_gpt.py``) is
skipped. Each flag is either modelled (below, with Megatron's default when absent),
known to change nothing the ledger prices (learning rate, data, logging, checkpoints),
or refused by name. Sources, Megatron-LM at d98e8a6 (2026-08-22):

- model shape: megatron/core/transformer/transformer_config.py (num_layers :65,
  hidden_size :145, num_attention_heads :148, num_query_groups :175, kv_channels :184,
  add_bias_linear :212 (default True, flag --disable-bias-linear), add_qkv_bias :218,
  normalization :256 (default LayerNorm), qk_layernorm :259, moe_router_topk :760
  (default 2)); flags are the field names with dashes
  (megatron/training/argument_utils.py:45, ArgumentGroupFactory).
- megatron/training/arguments.py: ffn_hidden_size defaults to 4h, or int(8h/3/64)*64 with
  --swiglu (:1320-1329); --position-embedding-type defaults to learned_absolute with
  --max-position-embeddings rows (:2394-2397); embeddings are tied unless
  --untie-embeddings-and-output-weights (:2460); --num-query-groups counts only with
  --group-query-attention (theoretical_memory_usage.py:17); --moe-ffn-hidden-size
  defaults to --ffn-hidden-size (:1650); layer i is MoE when i % moe_layer_freq == 0
  (megatron/core/models/gpt/gpt_layer_specs.py:649).
- the vocabulary is padded to a multiple of --make-vocab-size-divisible-by (128) x tp
  (megatron/core/tokenizers/utils/build_tokenizer.py:133).
- placement: megatron/core/model_parallel_config.py (pipeline :83, sequence_parallel :94
  default False, context :100, expert :127); --use-distributed-optimizer (arguments.py
  :3156) is ZeRO-1; virtual stages from --num-layers-per-virtual-pipeline-stage or
  --num-virtual-stages-per-pipeline-rank (:953-977).
"""
from __future__ import annotations

import math
import shlex

from ledger.errors import LedgerError
from ledger.io.launch import Launch, read_text
from ledger.model import ModelSpec

# flag -> (key, type); bools take no value
_MODEL = {
    "--num-layers": ("layers", int), "--hidden-size": ("hidden", int),
    "--num-attention-heads": ("heads", int), "--ffn-hidden-size": ("ffn", int),
    "--num-query-groups": ("groups", int), "--group-query-attention": ("gqa", bool),
    "--kv-channels": ("head_dim", int), "--seq-length": ("seq", int),
    "--max-position-embeddings": ("max_pos", int),
    "--position-embedding-type": ("pos", str), "--swiglu": ("swiglu", bool),
    "--untie-embeddings-and-output-weights": ("untie", bool),
    "--normalization": ("norm", str), "--disable-bias-linear": ("no_bias", bool),
    "--add-qkv-bias": ("qkv_bias", bool), "--qk-layernorm": ("qk_norm", bool),
    "--vocab-size": ("vocab", int), "--padded-vocab-size": ("padded_vocab", int),
    "--make-vocab-size-divisible-by": ("vocab_multiple", int),
    "--num-experts": ("experts", int), "--moe-router-topk": ("topk", int),
    "--moe-ffn-hidden-size": ("moe_ffn", int),
    "--moe-shared-expert-intermediate-size": ("shared_ffn", int),
    "--moe-layer-freq": ("moe_freq", int), "--mtp-num-layers": ("mtp", int),
}
_PLACEMENT = {
    "--tensor-model-parallel-size": ("tp", int), "--pipeline-model-parallel-size": ("pp", int),
    "--context-parallel-size": ("cp", int), "--expert-model-parallel-size": ("ep", int),
    "--expert-tensor-parallel-size": ("etp", int),
    "--moe-token-dispatcher-type": ("dispatcher", str),
    "--num-layers-per-virtual-pipeline-stage": ("layers_per_vp", int),
    "--num-virtual-stages-per-pipeline-rank": ("vp", int),
    "--account-for-embedding-in-pipeline-split": ("slot_embedding", bool),
    "--account-for-loss-in-pipeline-split": ("slot_loss", bool),
    "--sequence-parallel": ("sp", bool), "--use-distributed-optimizer": ("dist_opt", bool),
    "--micro-batch-size": ("micro_batch", int), "--global-batch-size": ("global_batch", int),
    "--recompute-granularity": ("recompute", str), "--recompute-method": ("rc_method", str),
    "--recompute-num-layers": ("rc_layers", int), "--cp-comm-type": ("cp_comm", str),
    "--tp-comm-overlap": ("tp_overlap", bool), "--bf16": ("bf16", bool),
    "--fp16": ("fp16", bool),
}
# Flags that change nothing the ledger prices: optimiser hyper-parameters, data, logging,
# checkpoints, initialisation, and overlap switches the time model assumes on.
_NO_EFFECT = {f"--{n}" for n in (
    "lr", "min-lr", "lr-decay-style", "lr-decay-iters", "lr-decay-samples", "lr-warmup-iters",
    "lr-warmup-samples", "lr-warmup-fraction", "weight-decay", "clip-grad", "adam-beta1",
    "adam-beta2", "adam-eps", "init-method-std", "train-iters", "train-samples",
    "eval-iters", "eval-interval", "log-interval", "save", "load", "save-interval", "data-path",
    "split", "tokenizer-type", "tokenizer-model", "vocab-file", "merge-file", "seed",
    "tensorboard-dir", "wandb-project", "wandb-exp-name", "exit-duration-in-mins",
    "distributed-backend", "use-mcore-models", "use-flash-attn", "transformer-impl",
    "attention-backend", "overlap-grad-reduce", "overlap-param-gather", "norm-epsilon",
    "rotary-base", "rotary-percent", "no-masked-softmax-fusion", "log-throughput",
    "use-rotary-position-embeddings", "no-position-embedding", "timing-log-level",
    "attention-softmax-in-fp32", "no-bias-swiglu-fusion", "no-rope-fusion",
    "ckpt-format", "data-cache-path", "num-workers", "moe-aux-loss-coeff",
    "moe-router-load-balancing-type", "moe-grouped-gemm")}
# Flags taking no value among the no-effect ones (the rest take one).
_NO_EFFECT_SWITCHES = {f"--{n}" for n in (
    "use-mcore-models", "use-flash-attn", "overlap-grad-reduce", "overlap-param-gather",
    "no-masked-softmax-fusion", "log-throughput", "use-rotary-position-embeddings",
    "no-position-embedding", "attention-softmax-in-fp32", "no-bias-swiglu-fusion",
    "no-rope-fusion", "moe-grouped-gemm")}
_NOTED = {"--attention-dropout", "--hidden-dropout"}  # the framework's table decides masks
_TABLES = (_MODEL, _PLACEMENT)


def tokens(text: str, path: str) -> list[str]:
    """The flags and values of a launch file, launcher and comments removed."""
    try:
        words = shlex.split(text.replace("\\\n", " "), comments=True)
    except ValueError as e:
        raise LedgerError("from_megatron", f"{path}: {e}") from None
    first = next((i for i, w in enumerate(words) if w.startswith("--") and i > 0
                  and words[i - 1].endswith(".py")), None)
    return words[first:] if first is not None else words


def parse(words: list[str], path: str) -> tuple[dict, list[str]]:
    """{key: value} of the modelled flags, and notes on the flags taken with a caveat."""
    raw, notes, i = {}, [], 0
    while i < len(words):
        flag, value = words[i].partition("=")[::2]
        spec = next((t[flag] for t in _TABLES if flag in t), None)
        takes_value = spec[1] is not bool if spec else flag not in _NO_EFFECT_SWITCHES
        if "=" not in words[i] and takes_value:
            if i + 1 >= len(words) or words[i + 1].startswith("--"):
                raise LedgerError("from_megatron", f"{flag} needs a value in {path}")
            value, i = words[i + 1], i + 1
        i += 1
        if spec is None and flag in _NO_EFFECT:
            continue
        if spec is None and flag in _NOTED:
            notes.append(f"{flag} {value} not applied: the framework's activation table "
                         f"decides what dropout keeps")
            continue
        if spec is None:
            raise LedgerError("from_megatron", f"{flag} in {path} is not modelled by the "
                                               f"ledger; remove it to price the rest")
        key, typ = spec
        raw[key] = True if typ is bool else _value(flag, value, typ)
    return raw, notes


# sizes a launch must give as positive integers: key -> flag
_SIZES = {"tp": "--tensor-model-parallel-size", "pp": "--pipeline-model-parallel-size",
          "cp": "--context-parallel-size", "ep": "--expert-model-parallel-size",
          "etp": "--expert-tensor-parallel-size",
          "layers_per_vp": "--num-layers-per-virtual-pipeline-stage",
          "vp": "--num-virtual-stages-per-pipeline-rank", "micro_batch": "--micro-batch-size",
          "global_batch": "--global-batch-size"}


def _value(flag: str, text: str, typ):
    if typ is int:
        try:
            return int(text)
        except ValueError:
            raise LedgerError("from_megatron", f"{flag} must be an integer, got {text!r}") \
                from None
    return text


def _need(raw: dict, key: str, flag: str, path: str):
    if key not in raw:
        raise LedgerError("from_megatron", f"{path} has no {flag}")
    return raw[key]


def model_spec(raw: dict, path: str) -> ModelSpec:
    """The ModelSpec a launch describes, with Megatron's defaults for absent flags."""
    layers, hidden = _need(raw, "layers", "--num-layers", path), \
        _need(raw, "hidden", "--hidden-size", path)
    heads, seq = _need(raw, "heads", "--num-attention-heads", path), \
        _need(raw, "seq", "--seq-length", path)
    ffn = raw.get("ffn") or (int(4 * hidden * 2 / 3 / 64) * 64 if raw.get("swiglu")
                             else 4 * hidden)
    pos = raw.get("pos", "learned_absolute")
    if pos not in ("learned_absolute", "rope", "yarn", "none"):
        raise LedgerError("from_megatron", f"--position-embedding-type {pos} is not modelled")
    norm = {"LayerNorm": "layernorm", "RMSNorm": "rmsnorm"}.get(raw.get("norm", "LayerNorm"))
    if norm is None:
        raise LedgerError("from_megatron", f"--normalization {raw['norm']} is not modelled")
    bias = not raw.get("no_bias", False)
    experts = raw.get("experts") or 0
    moe = {}
    if experts:
        freq = raw.get("moe_freq", 1)
        moe = dict(num_experts=experts, top_k=raw.get("topk", 2),
                   moe_ffn_hidden=raw.get("moe_ffn", ffn),
                   moe_layer_ids=tuple(i for i in range(layers) if i % freq == 0))
        if raw.get("shared_ffn"):
            moe |= dict(shared_experts=1, shared_expert_ffn=raw["shared_ffn"])
    return ModelSpec(
        name=f"megatron:{path.rsplit('/', 1)[-1]}", layers=layers, hidden=hidden,
        heads=heads, kv_heads=raw.get("groups", heads) if raw.get("gqa") else heads,
        head_dim=raw.get("head_dim"), ffn_hidden=ffn, vocab=_vocab(raw, path),
        seq_len=seq, gated_mlp=bool(raw.get("swiglu")), tied_embeddings=not raw.get("untie"),
        qkv_bias=bias or bool(raw.get("qkv_bias")), out_bias=bias, mlp_bias=bias, norm=norm,
        learned_positions=(_need(raw, "max_pos", "--max-position-embeddings", path)
                           if pos == "learned_absolute" else 0),
        qk_norm="head" if raw.get("qk_norm") else "none", mtp_layers=raw.get("mtp", 0), **moe)


def _vocab(raw: dict, path: str) -> int:
    """Megatron pads the tokenizer's vocabulary to a multiple of 128 x tp."""
    if "padded_vocab" in raw:
        return raw["padded_vocab"]
    multiple = raw.get("vocab_multiple", 128) * raw.get("tp", 1)
    vocab = _need(raw, "vocab", "--vocab-size (the tokenizer's size)", path)
    return math.ceil(vocab / multiple) * multiple


def placement_flags(raw: dict, layers: int, path: str) -> dict:
    """The CLI flags the launch sets (framework megatron)."""
    for key, flag in _SIZES.items():
        if key in raw and raw[key] < 1:
            raise LedgerError("from_megatron", f"{flag} must be at least 1, got {raw[key]} in "
                                               f"{path}")
    pp = raw.get("pp", 1)
    flags = {"framework": "megatron", "tp": raw.get("tp", 1), "pp": pp,
             "cp": raw.get("cp", 1), "ep": raw.get("ep", 1),
             "micro_batch": raw.get("micro_batch", 1), "no_sp": not raw.get("sp", False),
             "zero": 1 if raw.get("dist_opt") else 0}
    if "global_batch" in raw:
        flags["global_batch"] = raw["global_batch"]
    # the embedding and the loss may each take a layer slot of the split
    # (transformer_block.py L148-178: the slots divide by pp, then by vp; L191-200: the
    # first and last virtual stage build one layer fewer)
    slots = layers + bool(raw.get("slot_embedding")) + bool(raw.get("slot_loss"))
    named = (f"{slots} layer slots ({layers} layers"
             f"{', + embedding' if raw.get('slot_embedding') else ''}"
             f"{', + loss' if raw.get('slot_loss') else ''})")
    if pp > 1 and slots % pp:  # arguments.py L968-969, L985-998
        raise LedgerError("from_megatron", f"{named} do not divide over pp({pp}) in {path}; "
                                           f"Megatron refuses the split")
    if "layers_per_vp" in raw:  # arguments.py L972-973: it must divide the slots per rank
        if (slots // pp) % raw["layers_per_vp"]:
            raise LedgerError("from_megatron", f"--num-layers-per-virtual-pipeline-stage "
                                               f"{raw['layers_per_vp']} does not divide the "
                                               f"{slots // pp} layer slots per rank in {path}; "
                                               f"Megatron refuses it")
        flags["vp"] = slots // pp // raw["layers_per_vp"]
    elif "vp" in raw:
        flags["vp"] = raw["vp"]
    stages = pp * flags.get("vp", 1)
    if pp > 1 and slots % stages:  # transformer_block.py L170-178
        raise LedgerError("from_megatron", f"{named} do not divide over pp({pp}) * "
                                           f"vp({flags['vp']}) = {stages} stages in {path}; "
                                           f"Megatron refuses the split")
    if "recompute" in raw:
        flags["recompute"] = _recompute(raw, layers // pp, path)
    if "cp_comm" in raw:
        kinds = {"p2p": "ring", "a2a": "ulysses"}
        if raw["cp_comm"] not in kinds:
            raise LedgerError("from_megatron", f"--cp-comm-type {raw['cp_comm']} is not "
                                               f"modelled (p2p: ring, a2a: ulysses)")
        flags["cp_kind"] = kinds[raw["cp_comm"]]
    if raw.get("tp_overlap"):
        flags["tp_overlap"] = True
    if "etp" in raw:  # default: tp (arguments.py L587-588)
        flags["etp"] = raw["etp"]
    if "dispatcher" in raw:  # the dispatcher's bytes differ (ledger.placement.experts)
        flags["moe_dispatcher"] = raw["dispatcher"]
    return flags  # --bf16 / --fp16: the same bytes per state; the framework's table holds


def _recompute(raw: dict, per_stage: int, path: str) -> str:
    """Full recompute of every layer, or selective; partial recompute is refused."""
    kind = raw["recompute"]
    if kind not in ("full", "selective"):
        raise LedgerError("from_megatron", f"--recompute-granularity {kind} is not modelled")
    n = raw.get("rc_layers", 1)
    if kind == "full" and raw.get("rc_method") == "block" and n < per_stage:
        raise LedgerError("from_megatron", f"--recompute-method block with "
                                           f"--recompute-num-layers {n} < {per_stage} layers "
                                           f"per stage recomputes some layers only; not "
                                           f"modelled")
    return kind


def read_launch(path: str) -> Launch:
    raw, notes = parse(tokens(read_text(path, "from_megatron"), path), path)
    model = model_spec(raw, path)
    return Launch(path=path, model=model, flags=placement_flags(raw, model.layers, path),
                  notes=tuple(notes))

"""LoRA's trainable counts against peft itself, on every family the ledger reads.

The expected value is third-party: peft 0.21.2's ``get_peft_model(...)
.get_nb_trainable_parameters()`` on transformers 5.23.0's own model, built on the meta
device for the same config.json dict (and the adapters with it, under
``torch.device("meta")``). The families come from the ledger's own registry
(``ledger.io.hf.families.FAMILIES``), each the config.json transformers writes for the
family's default config with only the keys the ledger requires, small (the corpus test's
second pass, ``tests/test_corpus.py``) and as few layers as still hold every kind of
layer the default has; so a family added later is covered or this test fails. The first
twenty families' feature variants (``tests/test_hf_counts.py``) run too. Where peft
refuses a setting, the ledger must refuse it too, in one line.

The target lists are the ledger's own names for the family (its ``modules`` table): if a
name were wrong, peft would adapt something else or nothing, and the count would differ.
"""
import copy
import re
import warnings
from collections import Counter
from functools import lru_cache

import pytest

from ledger.errors import LedgerError
from ledger.finetune import FineTune, Targets, layer_state, modules, trainable
from ledger.finetune.lora import MAMBA_INCOMPATIBLE, MAMBA_TYPES
from ledger.io import spec_from_dict
from ledger.io.hf.families import FAMILIES

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
with warnings.catch_warnings():  # bitsandbytes (imported by peft) notes its optional kernels
    warnings.simplefilter("ignore")
    peft = pytest.importorskip("peft")
    bnb = pytest.importorskip("bitsandbytes")
corpus = pytest.importorskip("corpus")

import test_corpus as tc  # noqa: E402  (the corpus' configs and repairs, one list)
from test_hf_counts import CASES, SMALL  # noqa: E402

STD7 = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
LAYER_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")
# defaults the ledger refuses that a released config sets: DeepSeek-V2's top-k (its class
# defaults it to None) and Hunyuan-MoE's routed experts (its default has one)
READ_REPAIRS = {"deepseek_v2": {"num_experts_per_tok": 6}, "hunyuan_v1_moe": {"num_experts": 8}}
# GPT-Neo's attention_types name every layer ([[kinds, repeat]]): cut to the small stack
PATTERNS = {"gpt_neo": lambda layers: {"num_layers": layers,
                                       "attention_types": [[["global", "local"], layers // 2]]}}


@lru_cache(maxsize=None)
def _default(mt: str) -> dict:
    return {**tc.ledger_dict(mt), **READ_REPAIRS.get(mt, {})}


def _full(mt: str) -> dict:
    return dict(_default(mt))


def _shape(spec) -> set:
    """What decides a layer's matrices: mixer, MLP, global or local attention."""
    return {(k.mixer, k.mlp, k.window is None) for k in spec.kind_counts}


def _small(mt: str, layers: int, lists: bool = True, base: dict | None = None) -> dict:
    """The required keys alone, small (``test_corpus.test_defaults_as_the_config_class_
    sets_them``), with ``layers`` layers (per-layer lists cut to their first ``layers``, or
    left out: ``lists`` False), of the family's default config or of ``base``."""
    from ledger.io.hf import Reader

    cfg = dict(base) if base is not None else _full(mt)
    r = Reader(cfg, cfg["model_type"])
    FAMILIES[cfg["model_type"]](r)
    shape = {**tc.SHAPE, **dict.fromkeys(LAYER_KEYS, layers)}
    full = next((cfg[k] for k in LAYER_KEYS if k in cfg), None)
    per_layer = [k for k, v in cfg.items() if isinstance(v, list) and len(v) == full] \
        if lists else []
    small = {k: cfg[k] if k in tc.KEEP.get(mt, ()) else shape.get(k, cfg[k])
             for k in dict.fromkeys([*r.required, *READ_REPAIRS.get(mt, {}), *per_layer])}
    small = {k: v[:layers] if k in per_layer else v for k, v in small.items()}
    small |= PATTERNS.get(mt, lambda n: {})(layers)
    return {"model_type": cfg["model_type"], **small,
            **tc.REPAIRS.get(mt, lambda c: {})({**cfg, **small}),
            "pad_token_id": 0, "bos_token_id": 0, "eos_token_id": 0}


def _case(mt: str, base: dict | None = None) -> dict | None:
    """The fewest layers (2 or more) whose small config holds every kind of layer the
    default config (or ``base``) has; None when the ledger does not read the family."""
    whole = dict(base) if base is not None else _full(mt)
    try:
        full = spec_from_dict(whole)
    except LedgerError:
        return None
    for layers in range(2, full.layers + 1):
        try:
            cfg = _small(mt, layers, base=base)
            if _shape(spec_from_dict(cfg)) >= _shape(full):
                return cfg
        except LedgerError:
            continue
    return whole


FAMILY_CASES = {mt: c for mt in sorted(FAMILIES) if mt not in tc.NO_CONFIG
                if (c := _case(mt)) is not None}
# a composite is read as its text_config (ledger.io.hf.reader._text_model): that config,
# small, as the composite's default sets it, against the causal LM transformers builds
# from it - what tests/test_corpus.py holds its counts to (peft on the whole composite
# would adapt the vision tower too, which the ledger says on stderr it does not count)
COUNTED = sorted(mt for mt in tc.MEMBERS if mt not in tc.REFUSED and mt not in tc.NO_CONFIG)
COMPOSITES = [mt for mt in COUNTED if tc.MEMBERS[mt] == "composite"]


def _text(mt: str) -> dict:
    return tc.ledger_dict(mt)["text_config"]


COMPOSITE_CASES = {mt: _case(_text(mt)["model_type"], base=_text(mt)) for mt in COMPOSITES}
VARIANTS = {f"{kind}#{i}": {"model_type": kind, **({} if kind == "gpt2" else SMALL), **case}
            for kind, cases in CASES.items() for i, case in enumerate(cases)}


def _names(spec, split=None) -> list[str]:
    """The ledger's module names for this model (``split``: of that TP split only), less
    those peft refuses outright (a Mamba model's out_proj, CTRL's "0" and "2")."""
    mamba = spec.family in MAMBA_TYPES
    out = {x.name for k in spec.kind_counts for x in modules.layer(spec, k)
           if x.module and (split is None or x.split == split)}
    return sorted(n for n in out if not n.isdigit() and not (mamba and n in MAMBA_INCOMPATIBLE))


def settings(spec) -> dict:
    """label -> (LoraConfig keywords, FineTune keywords)."""
    edges = [e.name for e in modules.embeddings(spec)] + [modules.output(spec).name]
    named, rows = _names(spec) + edges, _names(spec, "row") + [modules.output(spec).name]
    later = list(range(1, spec.layers))
    return {
        "all-linear": (dict(target_modules="all-linear"), dict(lora_targets="all-linear")),
        "dora": (dict(target_modules="all-linear", use_dora=True),
                 dict(lora_targets="all-linear", dora=True)),
        "std7": (dict(target_modules=list(STD7)), dict(lora_targets=STD7)),
        "default": (dict(target_modules=None), dict(lora_targets=None)),
        "its names": (dict(target_modules=named), dict(lora_targets=tuple(named))),
        "row-parallel + head, layers 1-": (
            dict(target_modules=rows, layers_to_transform=later),
            dict(lora_targets=tuple(rows), freeze_layers=(0, 1))),
    }


def _build(cfg: dict):
    kw = {k: corpus.decoded(v) for k, v in cfg.items() if k != "model_type"}
    conf = corpus.config(cfg["model_type"], **kw)
    try:
        return corpus.build(conf)
    except ValueError:  # a text config the auto mapping does not list (Emu3's)
        return corpus._own_causal_class(conf)


def _peft_count(model, lora_kw: dict) -> int:
    conf = peft.LoraConfig(r=4, lora_alpha=8, task_type="CAUSAL_LM", **lora_kw)
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")  # peft warns on lm_head and on tied weights
        return peft.get_peft_model(model, conf).get_nb_trainable_parameters()[0]


def _check(cfg: dict, labels) -> None:
    """Each setting of ``labels`` against peft; "dora" (all-linear with DoRA) runs
    all-linear alone only where peft refuses DoRA (on fused experts)."""
    spec = spec_from_dict(cfg)
    model = _build(cfg)
    _check_layers(spec, model)
    _check_nf4(spec, copy.deepcopy(model))
    table = settings(spec)
    for label in labels:
        lora_kw, ft_kw = table[label]
        ft = FineTune(method="lora", lora_rank=4, lora_alpha=8, **ft_kw)
        try:
            expected = _peft_count(copy.deepcopy(model), lora_kw)
        except (ValueError, TypeError) as e:  # peft refuses (NoMatchingPeft...: a ValueError)
            with pytest.raises(LedgerError) as refusal:
                trainable(spec, ft)
            _same_refusal(str(e), str(refusal.value), label)
            if label == "dora" and "ParamWrapper" in str(e):
                _check_one(spec, model, "all-linear", table["all-linear"])
            continue
        _check_one(spec, model, label, table[label], expected)


def _check_one(spec, model, label, kws, expected=None) -> None:
    lora_kw, ft_kw = kws
    if expected is None:
        expected = _peft_count(copy.deepcopy(model), lora_kw)
    ft = FineTune(method="lora", lora_rank=4, lora_alpha=8, **ft_kw)
    try:
        got = sum(trainable(spec, ft).values())
    except LedgerError as e:
        raise AssertionError(f"{label}: peft counts {expected:,}, the ledger refuses: "
                             f"{e}") from None
    assert got == expected, f"{label}: {got:,} != peft's {expected:,}"


def _check_layers(spec, model) -> None:
    """Layer by layer, the ledger's linear modules (leaf name, in, out) are those
    transformers builds there: the order of a hybrid's mixers, a global layer's wider
    heads, every name."""
    from transformers.pytorch_utils import Conv1D

    built: dict[int, Counter] = {}
    for key, m in model.named_modules():
        at = re.match(r".*?\.[^.]*\.(\d+)\.", key)  # peft's layer index (first number)
        if at and isinstance(m, (torch.nn.Linear, Conv1D)):
            i, o = m.weight.shape if isinstance(m, Conv1D) else reversed(m.weight.shape)
            built.setdefault(int(at.group(1)), Counter())[key.rsplit(".", 1)[1], i, o] += 1
    for i in range(spec.layers):
        ours = Counter((x.name, x.in_features, x.out_features)
                       for x in modules.layer(spec, spec.layer_kind(i)) if x.module)
        assert ours == built.get(i, Counter()), f"layer {i}: {ours} != {built.get(i)}"


def _check_nf4(spec, model) -> None:
    """QLoRA's NF4 weights are what transformers' bitsandbytes integration replaces:
    ``replace_with_bnb_linear`` with the quantizer's own skip list (the output head, tied
    and ``_keep_in_fp32_modules`` weights, quantizers/base.py get_modules_to_not_convert)."""
    from transformers import BitsAndBytesConfig
    from transformers.integrations import replace_with_bnb_linear
    from transformers.quantizers.base import HfQuantizer

    skip = HfQuantizer.get_modules_to_not_convert(model, None, model._keep_in_fp32_modules)
    config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                bnb_4bit_use_double_quant=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = replace_with_bnb_linear(model, modules_to_not_convert=skip,
                                        quantization_config=config)
    expected = sum(m.in_features * m.out_features for m in model.modules()
                   if isinstance(m, bnb.nn.Linear4bit))
    ft, none = FineTune(method="qlora"), Targets(frozenset(), {})
    assert sum(layer_state(spec, ft, i, none)["nf4"].total for i in range(spec.layers)) \
        == expected


# peft's refusal -> what the ledger's one line says
REFUSALS = {"ParamWrapper does not work with use_dora": "ParamWrapper",
            "incompatible with Mamba-based models": "Mamba",
            "not found in the base model": "no module of",
            "Please specify `target_modules`": "no default target_modules",
            "No `target_modules` passed": "no default target_modules",
            "is not supported": "cannot wrap",
            "cannot be used when `target_modules` is a str": "layers_to_transform",
            "without also targeting": "fused into",
            "Targeting a Conv1d with groups": "depthwise convolution"}


def _same_refusal(peft_error: str, ledger_error: str, label: str) -> None:
    assert "\n" not in ledger_error, label
    why = [ours for theirs, ours in REFUSALS.items() if theirs in peft_error]
    assert why, f"{label}: a refusal of peft's not tabled here: {peft_error[:200]}"
    assert why[0] in ledger_error, f"{label}: peft: {peft_error[:160]}; ledger: {ledger_error}"


@pytest.mark.parametrize("mt", sorted(FAMILY_CASES))
def test_every_family_matches_peft(mt):
    _check(FAMILY_CASES[mt], ("dora", "std7", "default", "its names",
                              "row-parallel + head, layers 1-"))


@pytest.mark.parametrize("mt", COMPOSITES)
def test_every_composite_s_text_model_matches_peft(mt):
    small = COMPOSITE_CASES[mt]
    assert spec_from_dict({**tc.ledger_dict(mt), "text_config": small}) == spec_from_dict(small)
    _check(small, ("dora", "std7", "default", "its names", "row-parallel + head, layers 1-"))


@pytest.mark.parametrize("case", sorted(VARIANTS))
def test_feature_variants_match_peft(case):
    _check(VARIANTS[case], ("dora",))


PATTERNED = sorted(mt for mt, c in FAMILY_CASES.items() if c != _full(mt) and any(
    isinstance(v, list) and len(v) == spec_from_dict(c).layers for v in c.values()))


@pytest.mark.parametrize("mt", PATTERNED)
def test_default_layer_patterns_are_transformers(mt):
    """Without its per-layer lists (layer_types, mlp_layer_types ...) a config takes its
    class's own pattern: the ledger's layer kinds, layer by layer, are what transformers
    then builds."""
    layers = spec_from_dict(FAMILY_CASES[mt]).layers
    try:
        cfg = _small(mt, layers, lists=False)
        spec = spec_from_dict(cfg)
    except LedgerError as e:  # a pattern the ledger refuses must be one transformers does
        with pytest.raises((ValueError, TypeError, KeyError, IndexError)):
            _build(_small(mt, layers, lists=False))
        return
    _check_layers(spec, _build(cfg))


# names that reach past the linear layers: convolutions, routers, experts, a layer's
# index, embeddings, a name matching nothing beside one that does
NAMED = [("qwen3_next", ["conv1d"]), ("kimi_linear", ["conv1d", "q_proj"]), ("lfm3", ["conv"]),
         ("mamba", ["conv1d", "in_proj"]), ("ctrl", ["0"]), ("ctrl", ["2", "Wq"]),
         ("qwen2_moe", ["gate", "q_proj"]), ("mixtral", ["experts", "q_proj"]),
         ("llama4_text", ["router"]), ("afmoe", ["router"]), ("afmoe", ["gate"]),
         ("dbrx", ["mlp"]), ("hunyuan_v1_moe", ["wg"]), ("llama", ["q_proj", "nothing"]),
         ("gpt2", ["wpe", "c_fc"]), ("opt", ["embed_positions"]), ("moshi", ["linear"])]


@pytest.mark.parametrize("mt,targets", NAMED, ids=[f"{m}:{','.join(t)}" for m, t in NAMED])
def test_named_modules_match_peft(mt, targets):
    cfg = FAMILY_CASES[mt]
    spec, model = spec_from_dict(cfg), _build(cfg)
    ft = FineTune(method="lora", lora_rank=4, lora_alpha=8, lora_targets=tuple(targets))
    try:
        expected = _peft_count(model, dict(target_modules=targets))
    except (ValueError, TypeError) as e:
        with pytest.raises(LedgerError) as refusal:
            trainable(spec, ft)
        _same_refusal(str(e), str(refusal.value), str(targets))
        return
    assert sum(trainable(spec, ft).values()) == expected


def test_the_families_are_the_ledger_s():
    """Every family the ledger reads is here: 116 model types of its registry (DeepSeek-V2
    and Hunyuan-MoE among them, whose defaults the ledger refuses but whose released
    configs it reads: ``READ_REPAIRS``; and Emu3's text model, no causal-LM key of its
    own) and the corpus' 8 composites by their own text_config - so each of the 122 model
    types the corpus counts exactly, GPT-SW3 being GPT-2's config under another key."""
    assert len(FAMILY_CASES) == 116, sorted(set(FAMILIES) - set(FAMILY_CASES))
    assert len(COMPOSITE_CASES) == 8 and len(COUNTED) == 122
    alias = {mt: next(f for f in FAMILY_CASES if _default(f) == tc.ledger_dict(mt))
             for mt in COUNTED if mt not in FAMILY_CASES and mt not in COMPOSITE_CASES}
    assert alias == {"gpt-sw3": "gpt2"}

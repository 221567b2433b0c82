"""LoRA's trainable counts against peft itself, on every family the ledger reads.

The expected value is third-party: peft 0.21.2's ``get_peft_model(...)
.get_nb_trainable_parameters()`` on transformers 5.23.0's own model, built on the meta
device for the same config.json dict (the small configs of tests/test_hf_counts.py, one
per feature of each family). Where peft refuses a setting, the ledger must refuse it too.
The families come from the ledger's own registry (``ledger.io.FAMILIES``), so a family
added later is covered or this test fails.
"""
import warnings

import pytest

from ledger.errors import LedgerError
from ledger.finetune import FineTune, trainable
from ledger.io import spec_from_dict
from ledger.io.hf.families import FIRST as FAMILIES  # the families with module names / caches

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
with warnings.catch_warnings():  # bitsandbytes (imported by peft) notes its optional kernels
    warnings.simplefilter("ignore")
    peft = pytest.importorskip("peft")

from test_hf_counts import CASES, SMALL  # noqa: E402  (the same configs, one list)

STD7 = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# (label, LoraConfig keywords, FineTune keywords)
SETTINGS = [
    ("std7", dict(target_modules=list(STD7)), dict(lora_targets=STD7)),
    ("all-linear", dict(target_modules="all-linear"), dict(lora_targets="all-linear")),
    ("default", dict(target_modules=None), dict(lora_targets=None)),
    ("dora", dict(target_modules="all-linear", use_dora=True),
     dict(lora_targets="all-linear", dora=True)),
    ("down+head, layers 1-", dict(target_modules=["down_proj", "lm_head", "dense_4h_to_h"],
                                  layers_to_transform=True),
     dict(lora_targets=("down_proj", "lm_head", "dense_4h_to_h"), freeze_layers=(0, 1))),
]
ROWS = [(kind, i, label) for kind in sorted(FAMILIES) for i in range(len(CASES[kind]))
        for label, _, _ in SETTINGS]


def _peft_count(cfg: dict, lora_kw: dict) -> int:
    kw = {k: v for k, v in cfg.items() if k != "model_type"}
    config = transformers.AutoConfig.for_model(cfg["model_type"], **kw)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    conf = peft.LoraConfig(r=4, lora_alpha=8, task_type="CAUSAL_LM", **lora_kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # peft warns on lm_head and on tied weights
        return peft.get_peft_model(model, conf).get_nb_trainable_parameters()[0]


@pytest.mark.parametrize("kind,i,label", ROWS)
def test_trainable_matches_peft(kind, i, label):
    cfg = {"model_type": kind, **({} if kind == "gpt2" else SMALL), **CASES[kind][i]}
    _, lora_kw, ft_kw = next(s for s in SETTINGS if s[0] == label)
    spec = spec_from_dict(cfg)
    if lora_kw.get("layers_to_transform"):  # every layer but the first
        lora_kw = dict(lora_kw, layers_to_transform=list(range(1, spec.layers)))
        if kind == "gpt2":
            lora_kw["target_modules"] = ["c_proj", "lm_head"]
            ft_kw = dict(ft_kw, lora_targets=("c_proj", "lm_head"))
    ft = FineTune(method="lora", lora_rank=4, lora_alpha=8, **ft_kw)
    try:
        expected = _peft_count(cfg, lora_kw)
    except (ValueError, TypeError) as e:  # peft refuses: NoMatchingPeftModuleError is a ValueError
        with pytest.raises(LedgerError):
            trainable(spec, ft)
        return
    assert sum(trainable(spec, ft).values()) == expected

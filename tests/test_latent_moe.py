"""Nemotron 3's LatentMoE and its MTP block (issue 30's 36 rows): the released
config.json read as transformers builds it, held to the published checkpoint counts.

Sources: the fixture and its counts, src/ledger/validation/data/hf/SOURCES.md; Megatron-Core's
latent projections, megatron/core/transformer/moe/moe_layer.py:265-304, :488-492, :591-592
at d98e8a64dd (hidden -> latent before the dispatch, latent -> hidden after the combine).
"""
import json
from dataclasses import replace
from pathlib import Path

import pytest

from ledger.errors import LedgerError
from ledger.io.hf import read_config

DATA = Path(__file__).parent.parent / "src" / "ledger" / "validation" / "data" / "hf"


def super_cfg() -> dict:
    return json.loads((DATA / "nemotron-3-super.json").read_text())


def test_super_counts_its_checkpoint_elements():
    """Megatron-Bridge's verification card (card.yaml L72-76 @ 067f987df03b): the BF16
    release is 123,611,033,088 elements, with the 41 FP32 router correction-bias buffers
    (40 MoE layers + the MTP block's, 512 experts each) that transformers keeps as buffers
    and the ledger does not count as parameters."""
    spec, _ = read_config(super_cfg())
    assert spec.params + spec.mtp_params + 41 * 512 == 123_611_033_088
    # "A12B": active without the input table, as Ultra's "A55B" (below)
    assert round((spec.active_params - spec.breakdown["embedding"]) / 1e9) == 12


def test_super_mtp_block_by_hand():
    """One "*E" block: attention 4096 x (4096 + 2 x 256) + 4096 x 4096 = 35,651,584; the
    MoE layer 512 x 2 x 1024 x 2688 + 2 x 4096 x 5376 + 4096 x 512 + 2 x 4096 x 1024 =
    2,873,098,240; eh_proj 2 x 4096 x 4096 = 33,554,432; five norms of 4096 (enorm, hnorm,
    the two layers', the final one) = 20,480."""
    spec, _ = read_config(super_cfg())
    assert (spec.mtp_layers, spec.mtp_pattern) == (1, "*E")
    assert spec.mtp_params == 35_651_584 + 2_873_098_240 + 33_554_432 + 20_480
    # the recipe runs the one block twice (mtp_num_layers 2, mtp_use_repeated_layer): the
    # same weights
    assert replace(spec, mtp_layers=2, mtp_shared=True).mtp_params == spec.mtp_params
    assert replace(spec, mtp_layers=2).mtp_params == 2 * spec.mtp_params


def test_latent_experts_and_projections_by_hand():
    spec, _ = read_config(super_cfg())
    b = spec.breakdown
    assert spec.expert_hidden == 1024 and spec.moe_layers == 40
    assert b["experts"] == 40 * 512 * 2 * 1024 * 2688
    assert b["latent_proj"] == 40 * 2 * 4096 * 1024
    # whole on every TP rank ("duplicated"), not routed
    from ledger.anatomy.mixers import LayerKind

    parts = spec.layer_parts(LayerKind("none", "moe"))
    assert parts["latent_proj"] == (0, 2 * 4096 * 1024, 0)


@pytest.mark.parametrize("bad,field", [
    ({"mtp_hybrid_override_pattern": "*X"}, "mtp_hybrid_override_pattern"),
    ({"moe_latent_size": 0}, "moe_latent"),
])
def test_refused_in_one_line(bad, field):
    with pytest.raises(LedgerError) as err:
        read_config({**super_cfg(), **bad})
    assert field in str(err.value) and "\n" not in str(err.value)


def test_a_token_multiplies_the_latent_experts_by_hand():
    """One MoE layer: 22 experts' up and down at 1024 x 2688, the shared expert's at
    4096 x 5376, the router 4096 x 512 and the two projections 4096 x 1024."""
    from ledger.anatomy.mixers import LayerKind
    from ledger.arch.flops import layer_matmul_params

    spec, _ = read_config(super_cfg())
    assert layer_matmul_params(spec, LayerKind("none", "moe")) == \
        22 * 2 * 1024 * 2688 + 2 * 4096 * 5376 + 4096 * 512 + 2 * 4096 * 1024


def test_the_weight_matrices_peft_sees_count_the_block():
    """transformers' module names and shapes of one LatentMoE block (what LoRA targets):
    experts at 1024 wide, fc1 / fc2_latent_proj between 4096 and 1024; together every
    parameter of the block but its norm."""
    from ledger.anatomy.mixers import LayerKind
    from ledger.finetune import modules

    spec, _ = read_config(super_cfg())
    kind = LayerKind("none", "moe")
    lins = {(lin.name, lin.kind): (lin.in_features, lin.out_features, lin.experts)
            for lin in modules.layer(spec, kind)}
    assert lins[("up_proj", "experts")] == (1024, 2688, 512)
    assert lins[("fc1_latent_proj", "latent_proj")] == (4096, 1024, 1)
    assert lins[("fc2_latent_proj", "latent_proj")] == (1024, 4096, 1)
    parts = spec.layer_parts(kind)
    assert sum(lin.weights for lin in modules.layer(spec, kind)) == \
        sum(sum(v) for k, v in parts.items() if k != "norms")


def test_the_example_is_the_fixture():
    """docs/models.md reads examples/nemotron-3-super.json: the same file."""
    example = Path(__file__).parent.parent / "examples" / "nemotron-3-super.json"
    assert json.loads(example.read_text()) == super_cfg()


# ---- Nemotron 3 Ultra: its shape from Megatron-LM's launch (tests/fixtures/nemotron3) ----
CONFS = Path(__file__).parent / "fixtures" / "nemotron3"
# Megatron flag -> nemotron_h key, with Megatron's default where the conf gives none
# (transformer_config.py:1259-1265 at d98e8a64dd: state 128, 8 groups)
CONF_KEYS = {"--hidden-size": "hidden_size", "--num-attention-heads": "num_attention_heads",
             "--num-query-groups": "num_key_value_heads", "--kv-channels": "head_dim",
             "--ffn-hidden-size": "intermediate_size", "--moe-latent-size": "moe_latent_size",
             "--num-experts": "n_routed_experts", "--moe-router-topk": "num_experts_per_tok",
             "--moe-shared-expert-intermediate-size": "moe_shared_expert_intermediate_size",
             "--mamba-num-heads": "mamba_num_heads", "--mamba-head-dim": "mamba_head_dim",
             "--mamba-state-dim": "ssm_state_size", "--mamba-num-groups": "n_groups"}


def conf_shape(name: str) -> dict:
    """The nemotron_h shape keys a Megatron-LM modelopt conf's MODEL_ARGS set."""
    text = (CONFS / f"NVIDIA-Nemotron-3-{name}-BF16.sh").read_text()
    words = text.split('MODEL_ARGS="', 1)[1].split('"', 1)[0].replace("\\", " ").split()
    flags = {w: words[i + 1] for i, w in enumerate(words[:-1])
             if w.startswith("--") and not words[i + 1].startswith("--")}
    out = {"ssm_state_size": 128, "n_groups": 8, "moe_latent_size": None}
    out |= {key: int(flags[f]) for f, key in CONF_KEYS.items() if f in flags}
    out["moe_intermediate_size"] = int(flags.get("--moe-ffn-hidden-size",
                                                 flags["--ffn-hidden-size"]))
    pattern = flags.get("--hybrid-override-pattern") or flags["--hybrid-layer-pattern"]
    out["hybrid_override_pattern"] = pattern
    assert int(flags.get("--num-layers", len(pattern))) == len(pattern)
    return out


@pytest.mark.parametrize("name,file", [("Nano-30B-A3B", "nemotron-3-nano.json"),
                                       ("Super-120B-A12B", "nemotron-3-super.json")])
def test_megatrons_confs_give_the_released_shapes(name, file):
    """The mapping from a conf to config.json keys, held on the two released files."""
    released = json.loads((DATA / file).read_text())
    shape = conf_shape(name)
    assert shape == {k: released.get(k) for k in shape}


def test_ultra_is_megatrons_conf_with_two_stated_assumptions():
    ultra = json.loads((DATA / "nemotron-3-ultra.json").read_text())
    shape = conf_shape("Ultra-550B-A55B")
    assert {k: ultra[k] for k in shape} == shape
    # the assumed ones (SOURCES.md): the Nemotron 3 tokenizer, one "*E" MTP block
    assert (ultra["vocab_size"], ultra["mtp_hybrid_override_pattern"]) == (131072, "*E")
    spec, _ = read_config(ultra)
    assert spec.params == 549_308_968_960  # "550B"
    # "A55B": active without the input table (its lookup multiplies nothing)
    assert round((spec.active_params - spec.breakdown["embedding"]) / 1e9) == 55


def test_ultra_counts_as_transformers_builds_it():
    from test_released import transformers_count

    ultra = json.loads((DATA / "nemotron-3-ultra.json").read_text())
    spec, _ = read_config(ultra)
    total, active = transformers_count(ultra)
    assert (spec.params, spec.active_params) == (total, pytest.approx(active, rel=1e-12))


def test_the_mtp_depths_run_their_layers_on_the_last_stage():
    """Two depths of one "*E" block: the last stage runs two more attention-only layers and
    two more MoE-only layers than the stack's 8 and 40, for their activations and time;
    the weights are one block's (``mtp_params``)."""
    from ledger.anatomy.mixers import LayerKind
    from ledger.placement import layer_kinds

    spec, _ = read_config(super_cfg())
    spec = replace(spec, mtp_layers=2, mtp_shared=True)
    kinds, table = layer_kinds(spec, 1)
    held = dict(zip(kinds, table[0]))
    assert held[LayerKind("attention", "none")] == 8 + 2
    assert held[LayerKind("none", "moe")] == 40 + 2
    assert held[LayerKind("mamba", "none")] == 40

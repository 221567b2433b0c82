"""Which modules each quantization method leaves unquantized: the checkpoint's list matched
by the method's own rule as vLLM v0.22.0 matches it (``ledger.serve.skips.RULES`` cites each
file and line). The checkpoints are the real configs of tests/fixtures/serve/quant
(SOURCES.md), their lists replaced where a test says so; expected bytes are by hand."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.errors import LedgerError
from ledger.finetune import modules
from ledger.io.hf.reader import read_hf_config, read_hf_quant
from ledger.serve.disk import checkpoint_bytes
from ledger.serve.qbytes import quantized_matrices
from ledger.serve.quant import read_quant
from ledger.serve.skips import RULES, skipped

QUANT = Path(__file__).parent / "fixtures" / "serve" / "quant"


def load(name: str, **changes):
    """A fixture's model and its quantization_config with ``changes`` to its keys."""
    model, _ = read_hf_config(QUANT / name)
    qc = dict(json.loads((QUANT / name).read_text())["quantization_config"], **changes)
    return model, read_quant(qc)


def flags(model, q, layer: int) -> dict[str, bool]:
    """Leaf name (kind for the routed experts) -> quantized, for one layer."""
    lins = modules.layer(model, model.layer_kind(layer))
    return {f"{lin.kind}.{lin.name}": f for lin, f in zip(lins, quantized_matrices(q, lins,
                                                                                   layer))}


def block_fp8(o: int, i: int) -> int:
    """FP8 codes and fp32 128 x 128 block scales (DeepSeek's weight_scale_inv)."""
    return o * i + -(-o // 128) * -(-i // 128) * 4


def test_fp8_matches_exact_names_so_a_router_entry_keeps_no_dense_gate_proj():
    """fp8 (is_layer_skipped, exact): Qwen3-30B-A3B-Thinking-2507-FP8's own list names
    every router ``model.layers.{i}.mlp.gate``. Put on DeepSeek-R1, whose layers 0-2 are
    dense (gate_proj / up_proj, vLLM's gate_up_proj), it names no matrix vLLM quantizes:
    the bytes are R1's without a list. Matched as substrings it kept the dense layers'
    gate_proj in bf16, 3 x 7168 x 18432 more bytes less their FP8 copies."""
    qwen_list = json.loads((QUANT / "qwen3-30b-a3b-thinking-2507-fp8.json").read_text())[
        "quantization_config"]["modules_to_not_convert"]
    assert "model.layers.0.mlp.gate" in qwen_list and "model.layers.2.mlp.gate" in qwen_list
    model, plain = load("deepseek-r1-fp8.json")
    _, named = load("deepseek-r1-fp8.json", modules_to_not_convert=qwen_list)
    assert named.ignore == tuple(qwen_list)
    assert all(flags(model, named, 0)[k] for k in ("mlp.gate_proj", "mlp.up_proj",
                                                   "mlp.down_proj"))
    assert checkpoint_bytes(model, named) == checkpoint_bytes(model, plain)
    # ModelOpt reads the same entry as a substring too: there it keeps gate_up_proj whole
    assert skipped("modelopt", ["model.layers.0.mlp.gate"], "model.layers.0.mlp.gate_up_proj")


def test_fp8_names_one_expert_and_vllm_keeps_the_whole_moe_layer():
    """fp8's experts rule: a FusedMoE layer is skipped when an entry holding 'experts'
    contains its name (quant_utils.py:506-513) - one expert's down_proj named keeps all
    128 experts of that layer in bf16. Qwen3-30B-A3B-Thinking-2507-FP8 (2048 hidden, 768
    per expert, 128 experts), its list plus model.layers.5.mlp.experts.0.down_proj."""
    model, q = load("qwen3-30b-a3b-thinking-2507-fp8.json")
    entry = "model.layers.5.mlp.experts.0.down_proj"
    _, more = load("qwen3-30b-a3b-thinking-2507-fp8.json",
                   modules_to_not_convert=[*q.ignore, entry])
    assert (flags(model, more, 5)["experts.down_proj"], flags(model, more, 4)[
        "experts.down_proj"]) == (False, True)
    gate_up, down = 2 * 768 * 2048, 2048 * 768
    per_layer = 128 * (2 * gate_up - block_fp8(2 * 768, 2048) + 2 * down
                       - block_fp8(2048, 768))
    assert checkpoint_bytes(model, more) - checkpoint_bytes(model, q) == per_layer


def test_compressed_tensors_matches_exact_names_and_re_patterns():
    """compressed-tensors (should_ignore_layer): an entry equal to the name, or ``re:`` and
    a regex re.match'ed from the name's start; q/k/v and gate/up checked shard by shard.
    On the W4A16 TinyLlama checkpoint (int4, group 128, an int32 g_idx per input): a regex
    for layer 0 leaves its seven matrices in bf16; its parent's plain name leaves nothing
    (no substring); a regex naming q_proj alone is refused as vLLM refuses it."""
    name = "tinyllama-1.1b-chat-w4a16-actorder-group.json"
    model, q = load(name)
    _, layer0 = load(name, ignore=["lm_head", r"re:model\.layers\.0\..*"])
    _, parent = load(name, ignore=["lm_head", "model.layers.0.self_attn"])
    assert not any(flags(model, layer0, 0).get(f"attention.{p}") for p in ("q_proj", "o_proj"))
    assert flags(model, layer0, 1)["attention.q_proj"]

    def w4(o: int, i: int) -> int:  # int4 codes, a bf16 scale per 128 inputs, int32 g_idx
        return o * i // 2 + o * (i // 128) * 2 + 4 * i
    shapes = [(2048, 2048), (256, 2048), (256, 2048), (2048, 2048), (5632, 2048),
              (5632, 2048), (2048, 5632)]
    assert checkpoint_bytes(model, layer0) - checkpoint_bytes(model, q) == sum(
        2 * o * i - w4(o, i) for o, i in shapes)
    assert checkpoint_bytes(model, parent) == checkpoint_bytes(model, q)
    with pytest.raises(LedgerError, match="names q_proj but not k_proj, v_proj of "
                                          r"model\.layers\.0\.self_attn\.qkv_proj"):
        checkpoint_bytes(model, load(name, ignore=[r"re:.*\.q_proj$"])[1])
    # a MoE layer: expert 0's gate/up/down_proj by the same rule
    assert skipped("compressed-tensors", [r"re:.*mlp\.experts.*"], "model.layers.3.mlp.experts",
                   experts=True)
    assert not skipped("compressed-tensors", ["model.layers.3.mlp.experts"],
                       "model.layers.3.mlp.experts", experts=True)


def test_modelopt_excludes_by_wildcard_on_the_fused_name():
    """ModelOpt (is_layer_excluded): exact names, then an entry inside the name, then a
    wildcard (fnmatch) - on the module vLLM builds. ModelOpt writes ``module_path*``
    (modelopt.py:219-228); ``model.layers.*.mlp.gate*`` matches gate_up_proj, so the
    Llama-3.1-8B FP8 checkpoint keeps gate and up of all 32 layers in bf16 (4096 x 14336
    each; FP8: the codes, fp32 weight and input scales) and quantizes down_proj. A glob
    without the star, ``model.layers.*.self_attn``, names no linear layer: nothing moves.
    hf_quant_config.json's form nests the list under ``quantization``."""
    model, _ = read_hf_config(QUANT / "llama-3.1-8b-instruct-modelopt-fp8")
    q = read_hf_quant(QUANT / "llama-3.1-8b-instruct-modelopt-fp8")  # hf_quant_config.json

    def nested(*entries):
        return read_quant({"quant_method": "modelopt", "quantization": {
            "quant_algo": "FP8", "exclude_modules": ["lm_head", *entries]}})
    gate = nested("model.layers.*.mlp.gate*")
    f = flags(model, gate, 7)
    assert (f["mlp.gate_proj"], f["mlp.up_proj"], f["mlp.down_proj"]) == (False, False, True)
    n = 4096 * 14336
    assert checkpoint_bytes(model, gate) - checkpoint_bytes(model, q) == 32 * 2 * (2 * n
                                                                                  - (n + 8))
    assert checkpoint_bytes(model, nested("model.layers.*.self_attn")) == \
        checkpoint_bytes(model, q)
    assert checkpoint_bytes(model, nested("model.layers.*.self_attn*")) > \
        checkpoint_bytes(model, q)


def test_awq_matches_substrings():
    """AWQ (is_layer_skipped with skip_with_substr): an entry anywhere in the name -
    vLLM's own example ``["self_attn"]`` keeps every attention matrix of QwQ-32B-Preview-AWQ
    in bf16 (64 layers of q, k, v, o: 5120 x 5120, 1024 x 5120 twice, 5120 x 5120; AWQ's
    int4 codes, fp16 scales and packed 4-bit zeros per 128 inputs); ``mlp.gate`` names
    gate_proj but not up_proj of the fused gate_up_proj, which vLLM refuses."""
    name = "qwq-32b-preview-awq.json"
    model, q = load(name)
    _, attn = load(name, modules_to_not_convert=["self_attn"])

    def awq(o: int, i: int) -> float:
        return o * i / 2 + o * (i // 128) * 2 + o * (i // 128) / 2
    shapes = [(5120, 5120), (1024, 5120), (1024, 5120), (5120, 5120)]
    assert checkpoint_bytes(model, attn) - checkpoint_bytes(model, q) == 64 * sum(
        2 * o * i - awq(o, i) for o, i in shapes)
    with pytest.raises(LedgerError, match="awq list names gate_proj but not up_proj"):
        checkpoint_bytes(model, load(name, modules_to_not_convert=["mlp.gate"])[1])


def test_gptq_reads_dynamic_and_modules_in_block_not_modules_to_not_convert():
    """GPTQ (AutoGPTQConfig at v0.22.0): no ``modules_to_not_convert`` (nothing moves);
    ``dynamic``'s ``-:`` regex leaves the modules it re.matches unquantized;
    ``modules_in_block_to_quantize`` quantizes only what it names (substrings)."""
    name = "genz-70b-gptq-4bit-128g.json"
    model, q = load(name)
    assert checkpoint_bytes(model, load(name, modules_to_not_convert=["mlp"])[1]) == \
        checkpoint_bytes(model, q)
    _, dyn = load(name, dynamic={r"-:.*\.mlp\..*": {}})
    _, attn_only = load(name, modules_in_block_to_quantize=[
        ["self_attn.k_proj", "self_attn.v_proj", "self_attn.q_proj"], ["self_attn.o_proj"]])
    for x in (dyn, attn_only):
        f = flags(model, x, 10)
        assert (f["attention.q_proj"], f["mlp.gate_proj"], f["mlp.down_proj"]) == \
            (True, False, False)
    assert checkpoint_bytes(model, dyn) == checkpoint_bytes(model, attn_only)


def test_bitsandbytes_matches_components_and_leading_paths():
    """bitsandbytes (is_layer_skipped_bnb): an entry equal to one dotted part of vLLM's
    module name or to a leading path of it. Orpheus-3B's list ('model.layers.0.self_attn',
    'lm_head', ...) keeps layer 0's attention in bf16; an entry ``q_proj`` is no part of
    vLLM's qkv_proj and keeps nothing."""
    model, q = load("orpheus-3b-bnb-nf4.json")
    assert "model.layers.0.self_attn" in q.ignore
    assert (flags(model, q, 0)["attention.k_proj"], flags(model, q, 1)["attention.k_proj"],
            flags(model, q, 0)["mlp.up_proj"]) == (False, True, True)
    _, qproj = load("orpheus-3b-bnb-nf4.json", llm_int8_skip_modules=["q_proj"])
    assert flags(model, qproj, 3)["attention.q_proj"]
    assert skipped("bitsandbytes", ["mlp"], "model.layers.3.mlp.down_proj")
    assert not skipped("bitsandbytes", ["mlp"], "model.layers.3.mlp.experts", experts=True)


def test_mxfp4_reads_no_list():
    """mxfp4: vLLM's Mxfp4Config.from_config builds no list; every MoE layer is MXFP4,
    every linear layer bf16, whatever gpt-oss-20b's modules_to_not_convert says."""
    model, q = load("gpt-oss-20b.json")
    _, experts = load("gpt-oss-20b.json", modules_to_not_convert=["model.layers.*.mlp.experts",
                                                                   "model.layers.3.mlp.experts"])
    assert checkpoint_bytes(model, experts) == checkpoint_bytes(model, q)
    assert not any(v for k, v in flags(model, q, 0).items() if not k.startswith("experts"))


def test_every_method_has_a_rule_with_its_source():
    from ledger.serve.quant import METHODS
    assert set(RULES) == set(METHODS)
    assert all(".py:" in source for _, source in RULES.values())


@pytest.mark.parametrize("name,changes,where", [
    ("tinyllama-1.1b-fp8-dynamic.json", {"ignore": ["lm_head", "re:[("]}, "ignore"),
    ("genz-70b-gptq-4bit-128g.json", {"dynamic": {"-:[(": {}}}, "dynamic")])
def test_a_pattern_python_cannot_compile_is_refused_by_name(name, changes, where):
    """vLLM compiles a compressed-tensors 're:' entry and a GPTQ 'dynamic' key with ``re``;
    one that does not compile stops its load (re.error): one line naming it, not a
    traceback."""
    model, q = load(name, **changes)
    lins = modules.layer(model, model.layer_kind(0))
    with pytest.raises(LedgerError, match=f"{where} pattern .* is not a regular expression"):
        quantized_matrices(q, lins, 0)

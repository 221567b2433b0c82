"""Scales as the released checkpoints store them on disk and as vLLM holds them resident
(issue 33): per-channel and block FP8, bf16 block scales, INT4 W4A16 MoE experts, GLM-5's
block FP8, the scale dtype following the writer. Fixtures and their sources:
tests/fixtures/serve/SOURCES.md."""
from __future__ import annotations

import pytest

from ledger.anatomy.counts import kind_params
from ledger.errors import LedgerError
from ledger.serve import ServeConfig
from ledger.serve.disk import mtp_bytes
from ledger.serve.qbytes import layer_delta_bytes
from ledger.serve.weights import bytes_by_rank
from test_serve_quant import GiB, PUBLISHED, checkpoint_bytes, load


def test_channel_fp8_checkpoint_on_disk():
    """compressed-tensors' FP8_DYNAMIC (the checkpoint's recipe.yaml): FP8 weights with one
    bf16 scale per output channel, FP8 activations per token, lm_head left in bf16 -
    nm-testing/tinyllama-fp8-dynamic-compressed's model.safetensors, listed at 1.23 GB
    (three figures: within 0.41%); the ledger's 1,232,001,024 B is +0.16%. By hand: 22
    layers of FP8 linear weights (968,884,224 B), their channel scales (22 x 17,920 x 2 B:
    the model's bf16, as compressed-tensors makes them, ledger.serve.scales) and the bf16
    embedding, head and norms. vLLM holds the scales in fp32: 788,480 B more resident."""
    model, q = load("quant/tinyllama-1.1b-fp8-dynamic.json")
    assert (q.method, q.weight, q.scale, q.activations, q.ignore) == \
        ("compressed-tensors", "fp8", "channel", "fp8", ("lm_head",))
    assert (q.scale_bytes, q.stored_scale_bytes) == (4, 2)  # resident fp32, stored bf16
    resident = sum(bytes_by_rank(model, ServeConfig(context=1, quant=q))[0])
    assert resident - checkpoint_bytes("quant/tinyllama-1.1b-fp8-dynamic.json") == \
        22 * 17920 * 2
    linear = 22 * (2048 * (2048 + 256 + 256 + 2048) + 3 * 2048 * 5632)
    scales = 22 * (2048 + 256 + 256 + 2048 + 5632 + 5632 + 2048) * 2
    bf16 = 2 * (2 * 32000 * 2048 + (2 * 22 + 1) * 2048)
    assert checkpoint_bytes("quant/tinyllama-1.1b-fp8-dynamic.json") == \
        linear + scales + bf16 == pytest.approx(1.23e9, rel=0.005)


def test_channel_fp8_checkpoint_as_released():
    """compressed-tensors FP8 with one scale per output channel (FP8 activations per
    token), read from zai-org's GLM-4.5-FP8 config.json (a byte copy of a model report's
    "原始 config.json" block, SOURCES.md) and held to its 93 files, 336.48 GiB: the ledger's
    336.96 GiB is +0.14%. The ``ignore`` list (839 names, in the file's order) names every
    layer's norms, q/k/v biases, router ``mlp.gate`` and its ``e_score_correction_bias``,
    ``lm_head``, ``model.embed_tokens``, ``model.norm`` and the MTP layer's (92)
    ``embed_tokens``, ``eh_proj`` and norms: no projection of the stack, which is all FP8.
    What is left, by hand from the report's tensor list (its shapes and dtypes; their sum is
    the report's 336.47 GiB): the files keep each channel scale in fp32 where the ledger
    counts compressed-tensors' rule, the model's bf16 (ledger.serve.scales: another writer's
    choice, which the config cannot say) and the MTP layer's ``shared_head.head`` in FP8
    with its channel scale (not on the list; the ledger counts the MTP vocab copies in
    bf16) - exactly the difference; the routers' fp32 ``e_score_correction_bias`` is
    counted (ledger.serve.weights.CORRECTION_BIAS). Served, vLLM holds the stack's channel
    scales in fp32 and GLM's routers in fp32 (glm4_moe.py:146-151): 387 MB more than the
    files' layout."""
    name = "quant/glm-4.5-fp8.json"
    model, q = load(name)
    assert (q.method, q.weight, q.scale, q.activations) == \
        ("compressed-tensors", "fp8", "channel", "fp8")
    assert len(q.ignore) == len(set(q.ignore)) == 839 and "lm_head" in q.ignore
    kept = ("layernorm", "norm", ".bias", "mlp.gate", "mlp.gate.e_score_correction_bias")
    assert {n for n in q.ignore if not n.endswith(kept)} == {
        "lm_head", "model.embed_tokens", "model.layers.92.embed_tokens",
        "model.layers.92.eh_proj"}
    ledger = checkpoint_bytes(name)
    assert ledger == pytest.approx(336.48 * GiB, rel=0.02)
    assert ledger / (336.48 * GiB) - 1 == pytest.approx(0.0014, abs=1e-4)
    # the report's tensors by hand: hidden 5120, vocab 151552, 93 layers with attention
    # (q 12288, k/v 1024 with biases, q/k norms), 3 dense MLPs of 12288, 90 MoE layers
    # (3 to 92) of 160 experts and one shared expert of 1536, the MTP layer's extras
    h, v, d, i, e = 5120, 151552, 12288, 1536, 160
    attn = 93 * (2 * h * 2 + 2 * 128 * 2 + (d + 2 * 1024) * 2 + (2 * d * h + 2 * 1024 * h))
    dense = 3 * 3 * d * h
    moe = 90 * (e + 1) * 3 * i * h + 90 * (e * h * 2 + e * 4)  # experts; routers, biases
    mtp = h * 2 * h * 2 + v * h * 2 + 3 * h * 2 + v * h + v * 4  # eh_proj, copies, norms
    channels = 93 * (d + 2 * 1024 + h) + 3 * (2 * d + h) + 90 * (e + 1) * (h + 2 * i)
    files = 2 * v * h * 2 + h * 2 + attn + dense + moe + mtp + 4 * channels
    assert round(files / GiB, 2) == 336.47  # "张量累计大小"
    assert ledger == files - 2 * channels + (v * h * 2 - v * h - v * 4)
    stack = 92 * (d + 2 * 1024 + h) + 3 * (2 * d + h) + 89 * (e + 1) * (h + 2 * i)
    one = ServeConfig(context=4096, quant=q)
    resident = sum(bytes_by_rank(model, one)[0])
    assert resident - sum(bytes_by_rank(model, one, "checkpoint")[0]) == \
        2 * stack + 89 * 2 * h * e == pytest.approx(387e6, rel=0.01)


def test_block_fp8_checkpoints_on_disk():
    """DeepSeek's 128 x 128 block FP8 (fp32 ``weight_scale_inv`` of ceil(out/128) x
    ceil(in/128) per matrix), read from six checkpoints' configs and held to what their
    files take (model reports that list every tensor and sum the files, SOURCES.md):
    Qwen3-8B-FP8 -0.008%, Qwen3-30B-A3B-Thinking-2507-FP8 +0.012% (its
    ``modules_to_not_convert``: lm_head, the norms and every router ``mlp.gate``),
    DeepSeek-R1 -0.002%, Kimi-K2-Instruct -0.002%, DeepSeek-V3.2 -0.002%,
    Qwen3-Next-80B-A3B-Instruct-FP8 -0.03% (its Gated DeltaNet layers: in_proj_qkvz and
    out_proj in FP8, in_proj_ba, conv1d and the norms left out) - each within 0.05%. The
    reports' tensor sums (Kimi-K2 958.49 GiB, R1 641.29) are the ledger's own to the
    rounding: what is left is the safetensors headers. DeepSeek-R1's 641.30 GiB holds its
    MTP module (layer 61: an MoE layer in FP8, eh_proj and its own embedding and head
    copies in bf16), which vLLM does not load - 14.36 GiB that the served weights leave
    out; without it the count is 2.2% short."""
    rows = {name: size for name, size, _ in PUBLISHED}
    for name in ("quant/qwen3-8b-fp8.json", "quant/qwen3-30b-a3b-thinking-2507-fp8.json",
                 "quant/deepseek-r1-fp8.json", "../hf/released/kimi-k2-instruct.json",
                 "../hf/released/deepseek-v3.2.json",
                 "quant/qwen3-next-80b-a3b-instruct-fp8.json"):
        q = load(name)[1]
        assert (q.method, q.weight, q.scale, q.block, q.activations) == \
            ("fp8", "fp8", "block", (128, 128), "fp8")
        assert checkpoint_bytes(name) == pytest.approx(rows[name], rel=5e-4)
    moe = load("quant/qwen3-30b-a3b-thinking-2507-fp8.json")[1]
    assert len(moe.ignore) == 1 + 3 * 48 and "model.layers.47.mlp.gate" in moe.ignore
    model, q = load("quant/deepseek-r1-fp8.json")
    served = sum(bytes_by_rank(model, ServeConfig(context=4096, quant=q), "checkpoint")[0])
    assert served / rows["quant/deepseek-r1-fp8.json"] == pytest.approx(0.978, abs=0.001)
    # the MTP module by hand: one MoE layer as the stack's last one is stored, and in bf16
    # eh_proj (7168 x 14336), enorm, hnorm, shared_head.norm and the two vocab copies
    one = ServeConfig(context=4096, quant=q)
    layer60 = sum(layer_delta_bytes(model, one, q, 60, "checkpoint")) + 2 * sum(
        kind_params(model, model.layer_kind(60)))
    assert mtp_bytes(model, q) == pytest.approx(  # + the router's fp32 correction bias
        layer60 + 2 * (7168 * 14336 + 3 * 7168 + 2 * 129280 * 7168) + 256 * 4, rel=1e-12)
    # MTP blocks the config read counts none of: Qwen3-Next's mtp.* (one full-attention MoE
    # layer in FP8, fc and four norms in bf16, no vocab copies) and DeepSeek-V3.2's layer 61
    # (its num_nextn_predict_layers, which DeepseekV32Config does not read): -2.0% and -2.2%
    # of the files without them, -0.03% and -0.006% with them
    for name, depth_gib in (("quant/qwen3-next-80b-a3b-instruct-fp8.json", 1.546),
                            ("../hf/released/deepseek-v3.2.json", 14.378)):
        m, qq = load(name)
        assert m.mtp_layers == 0 and mtp_bytes(m, qq) / GiB == pytest.approx(depth_gib, abs=1e-3)
        assert checkpoint_bytes(name) == pytest.approx(rows[name], rel=5e-4)
    # DeepSeek-V3's config (the presets' checkpoint) reads the same as R1's
    assert checkpoint_bytes("deepseek-v3-fp8.json") == checkpoint_bytes(
        "quant/deepseek-r1-fp8.json")


def test_block_fp8_bf16_scales_as_released():
    """Qwen3-235B-A22B-Instruct-2507-FP8 (128 x 128 block FP8, its printout's
    ``modules_to_not_convert``: lm_head and every layer's norms and router) against its 24
    files, 220.19 GiB: the ledger's 220.21 GiB is +0.008%. Its tensor list keeps every
    ``weight_scale_inv`` in bf16 where the ledger counts DeepSeek's fp32 (the config has no
    key for it, ledger.serve.scales): 2 B less for each of the 94 layers' 151,808 block
    scales puts the count on the report's tensor sum, 220.18 GiB. vLLM holds them in fp32
    (fp8.py:353-373), so served the ledger's 4 B is the resident figure."""
    name = "quant/qwen3-235b-a22b-instruct-2507-fp8.json"
    model, q = load(name)
    assert (q.method, q.block, q.scale_bytes, len(q.ignore)) == ("fp8", (128, 128), 4, 283)
    ledger = checkpoint_bytes(name)
    assert ledger / (220.19 * GiB) - 1 == pytest.approx(0.00008, abs=2e-5)
    # block scales of one layer: q [8192, 4096] 64 x 32, k and v [512, 4096] 4 x 32 each,
    # o [4096, 8192] 32 x 64, 128 experts' gate/up [1536, 4096] 12 x 32 and down 32 x 12
    scales = 94 * (2 * 64 * 32 + 2 * 4 * 32 + 128 * 3 * 12 * 32)
    assert scales == 94 * 151_808
    assert round((ledger - 2 * scales) / GiB, 2) == 220.18  # "张量累计大小"


def test_int4_w4a16_moe_as_released():
    """moonshotai/Kimi-K2.5 (compressed-tensors ``pack-quantized``: INT4 routed experts,
    symmetric, a scale per 32 inputs; ``ignore`` lm_head and, by regex, all attention, the
    shared experts and the dense layer's MLP) - a vision-language composite whose text model
    is DeepSeek-V3's (``text_config``; vLLM builds it as DeepseekV2ForCausalLM,
    kimi_k25.py:360-366) - against its 64 files, 554.30 GiB: the ledger's 553.40 GiB is
    -0.16%. By hand from the report's tensor list, what the ledger leaves out is the vision
    tower (27 MoonViT blocks, 0.78 GiB) and the projector (0.10 GiB) in bf16, which the
    reader does not count (composites: the text model only), and each packed matrix's int32
    ``weight_shape`` [2] (553 KB): with them the count is the report's tensor sum,
    554.27 GiB. The files keep the group scales in bf16, compressed-tensors' rule (the
    model's dtype, ledger.serve.scales), and vLLM holds them so (params_dtype:
    compressed_tensors_moe_wna16.py:108-116): resident and stored agree."""
    name = "quant/kimi-k2.5-int4.json"
    model, q = load(name)
    assert (model.family, model.layers, model.num_experts) == ("deepseek_v3", 61, 384)
    assert (q.method, q.weight, q.group, q.zero_points, q.scale_bytes, q.stored_scale_bytes) \
        == ("compressed-tensors", "int4", 32, False, 2, 2)
    ledger = checkpoint_bytes(name)
    assert ledger / (554.30 * GiB) - 1 == pytest.approx(-0.0016, abs=1e-4)
    block = 2 * 4304 * 1152 + 4304 + 1152 + 1152 * 1152 + 1152 + 3456 * 1152 + 3456 + 4 * 1152
    vision = 2 * (27 * block + 2 * 1152 + 64 * 64 * 1152 + 1152 * 3 * 14 * 14 + 1152)
    projector = 2 * (2 * 1152 + 4608 * 4608 + 4608 + 7168 * 4608 + 7168)
    shapes = 60 * 384 * 3 * 2 * 4
    assert round(vision / GiB, 2) == 0.78 and round(projector / GiB, 2) == 0.10
    assert round((ledger + vision + projector + shapes) / GiB, 2) == 554.27  # "张量累计大小"
    # the routed experts alone: codes 4 bits, bf16 scales per 32 (report: 157.50 GiB of
    # codes and 19.69 GiB of scales for each of gate, up and down)
    experts = 60 * 384 * 3 * 2048 * 7168
    assert (round(experts / 2 / 3 / GiB, 2), round(experts / 32 * 2 / 3 / GiB, 2)) == \
        (157.50, 19.69)
    # Kimi-K2.6's raw config.json: the same files (64, 554.30 GiB, the same tensor list), its
    # quantization_config only inside text_config and that text model's model_type
    # "kimi_k2" - read as vLLM's KimiK25Config reads it (DeepseekV3Config(**text_config),
    # the text model's quantization_config propagated: configs/kimi_k25.py:99-120)
    model6, q6 = load("quant/kimi-k2.6-int4.json")
    assert (model6.family, q6.source, q6.ignore[3]) == \
        ("deepseek_v3", "text_config.quantization_config", "re:.*lm_head.*")
    assert checkpoint_bytes("quant/kimi-k2.6-int4.json") == ledger


def test_block_fp8_glm5_as_released():
    """zai-org/GLM-5.1-FP8 (block FP8, fp32 scales; DeepSeek-V3.2's layout with an indexer
    in every layer) against its 142 files, 704.25 GiB: the ledger's 704.23 GiB is -0.003%,
    the report's tensor sum to the rounding. Its config.json declares one MTP layer, which
    the reader of that layout does not count: the files hold layer 78 (attention and MoE in
    FP8, eh_proj and three norms in bf16, no vocabulary copies), 9.34 GiB
    (ledger.serve.disk.UNDECLARED_MTP). The indexer's ``weights_proj`` is bf16 in the files
    and ``wk`` FP8 with its block scales; vLLM fuses them unquantized, wk upcast to bf16
    (deepseek_v2.py:634-642) - so served, the ledger holds wk in bf16."""
    name = "quant/glm-5.1-fp8.json"
    model, q = load(name)
    assert (model.family, model.layers, model.mtp_layers) == ("glm_moe_dsa", 78, 0)
    assert (q.method, q.block, len(q.ignore)) == ("fp8", (128, 128), 712)
    ledger = checkpoint_bytes(name)
    assert ledger / (704.25 * GiB) - 1 == pytest.approx(-0.00003, abs=1e-5)
    assert round(ledger / GiB, 2) == 704.23  # "张量累计大小"
    assert mtp_bytes(model, q) / GiB == pytest.approx(9.3436, abs=1e-4)
    # served: each layer's wk [128, 6144] in bf16 rather than FP8 with 48 fp32 block scales
    one = ServeConfig(context=4096, quant=q)
    held = sum(layer_delta_bytes(model, one, q, 5, "triton"))
    stored = sum(layer_delta_bytes(model, one, q, 5, "checkpoint"))
    assert held - stored == 128 * 6144 * 2 - (128 * 6144 + 48 * 4)


def test_scale_dtype_follows_the_writer_on_disk_and_vllm_resident():
    """compressed-tensors' scales are the model's dtype in the files unless the scheme's
    ``scale_dtype`` says (ledger.serve.scales); vLLM holds FP8 and INT8 W8A8 scales in
    fp32 and weight-only ones in the model's dtype. A dtype the ledger cannot size is one
    line naming the key."""
    from ledger.serve.quant import config_quant

    def ct(weights, acts=None, **top):
        group = {"weights": weights, **({"input_activations": acts} if acts else {})}
        return config_quant({"quantization_config": {
            "quant_method": "compressed-tensors", "config_groups": {"group_0": group}}, **top})

    fp8 = {"num_bits": 8, "type": "float", "strategy": "channel"}
    tok = {"num_bits": 8, "type": "float", "dynamic": True}
    q = ct(fp8, tok)
    assert (q.scale_bytes, q.stored.scale_bytes) == (4, 2)
    assert ct(fp8, tok, torch_dtype="float32").stored.scale_bytes == 4  # the model's fp32
    assert ct({**fp8, "scale_dtype": "torch.float32"}, tok).stored.scale_bytes == 4
    w8 = {"num_bits": 8, "type": "int", "strategy": "channel"}
    assert (ct(w8, {"num_bits": 8, "type": "int"}).scale_bytes, ct(w8).scale_bytes) == (4, 2)
    w4 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}
    assert (ct(w4, dtype="float16").scale_bytes, ct(w4).stored.scale_bytes) == (2, 2)
    with pytest.raises(LedgerError, match="'scale_dtype' 'torch.int4'"):
        ct({**fp8, "scale_dtype": "torch.int4"}, tok)

"""Weights as checkpoints store them (issue 33): each quantization method read from a real
config.json, its bytes held to the checkpoint's published size on disk, and the weights
per GPU held to what vLLM logged at start-up. Fixtures and their sources:
tests/fixtures/serve/SOURCES.md."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.anatomy.counts import kind_params
from ledger.errors import LedgerError
from ledger.io.hf.reader import read_hf_config, read_hf_quant
from ledger.model import llama3_8b
from ledger.serve import ServeConfig, serve
from ledger.serve.disk import checkpoint_bytes as disk_bytes
from ledger.serve.disk import mtp_bytes
from ledger.serve.qbytes import layer_delta_bytes, matrix_bytes, mxfp4_expert_bytes
from ledger.serve.quant import METHODS, read_quant, resolve
from ledger.serve.weights import bytes_by_rank
from ledger.system import system

HERE = Path(__file__).parent / "fixtures" / "serve"
GiB = 2**30

# (fixture, bytes on disk as published, where the figure is) - SOURCES.md has the commits
PUBLISHED = [
    ("quant/gpt-oss-20b.json", 13_761_264_768, "model.safetensors.index.json total_size"),
    ("quant/genz-70b-gptq-4bit-128g.json", 36_652_345_792, "model.safetensors LFS size"),
    ("quant/genz-70b-gptq-4bit-32g.json", 40_663_149_992, "model.safetensors LFS size"),
    ("quant/genz-70b-gptq-3bit-128g.json", 28_029_117_672, "model.safetensors LFS size"),
    ("quant/genz-70b-gptq-3bit-1g.json", 26_774_982_616, "model.safetensors LFS size"),
    ("quant/orpheus-3b-bnb-nf4.json", 2_456_339_440, "model.safetensors LFS size"),
    # the hub's file listings (decimal GB or MB, three figures: within 0.1%)
    ("quant/tinyllama-1.1b-chat-w4a16-actorder-group.json", 764e6, "model.safetensors 764 MB"),
    ("quant/meta-llama-3-8b-fp8-dynamic.json", 5e9 + 4.08e9, "shards 5 GB + 4.08 GB"),
    ("quant/llama-3.1-8b-instruct-modelopt-fp8", 5e9 + 4.08e9, "shards 5 GB + 4.08 GB"),
    ("quant/phi-4-reasoning-plus-modelopt-nvfp4.json", 4.99e9 + 4.73e9,
     "shards 4.99 GB + 4.73 GB"),
    # ModelOpt NVFP4 as NVIDIA ships it (config.json + hf_quant_config.json, a folder)
    ("quant/llama-3.3-70b-instruct-nvfp4", 42_709_045_632,
     "model.safetensors.index.json total_size at ec8feeb"),
    ("quant/llama-3-8b-instruct-w8a8-static-asym.json", 5e9 + 4.08e9, "shards 5 GB + 4.08 GB"),
    ("quant/qwq-32b-preview-awq.json", (4.96 + 4.99 + 4.96 + 4.42) * 1e9,
     "shards 4.96 + 4.99 + 4.96 + 4.42 GB"),
    ("quant/tinyllama-1.1b-fp8-dynamic.json", 1.23e9, "model.safetensors 1.23 GB"),
    # compressed-tensors FP8 per channel as released: a model report's "文件总大小" (GiB)
    ("quant/glm-4.5-fp8.json", 336.48 * GiB, "93 files, 336.48 GiB"),
    # FP8 with 128 x 128 block scales: model reports' "文件总大小" (the files' total size),
    # in GiB (their unit: lm_head [151936, 4096] bf16 is "1.16 GB", 1,244,659,712 B), two
    # decimals (within 0.001% at these sizes)
    ("quant/qwen3-8b-fp8.json", 8.79 * GiB, "2 files, 8.79 GiB"),
    ("quant/qwen3-30b-a3b-thinking-2507-fp8.json", 29.03 * GiB, "4 files, 29.03 GiB"),
    ("quant/deepseek-r1-fp8.json", 641.30 * GiB, "163 files, 641.30 GiB"),
    ("../hf/released/kimi-k2-instruct.json", 958.51 * GiB, "61 files, 958.51 GiB"),
    ("../hf/released/deepseek-v3.2.json", 642.13 * GiB, "163 files, 642.13 GiB"),
    ("quant/qwen3-next-80b-a3b-instruct-fp8.json", 76.42 * GiB, "8 files, 76.42 GiB"),
    ("quant/qwen3-235b-a22b-instruct-2507-fp8.json", 220.19 * GiB, "24 files, 220.19 GiB"),
    # compressed-tensors INT4 W4A16 (group 32) of a 1T-parameter MoE: a model report
    ("quant/kimi-k2.5-int4.json", 554.30 * GiB, "64 files, 554.30 GiB"),
    ("quant/kimi-k2.6-int4.json", 554.30 * GiB, "64 files, 554.30 GiB"),
    ("quant/glm-5.1-fp8.json", 704.25 * GiB, "142 files, 704.25 GiB"),
]


def load(name: str):
    model, _ = read_hf_config(HERE / name)
    return model, read_hf_quant(HERE / name)


def checkpoint_bytes(name: str) -> float:
    """The whole checkpoint as stored (one GPU, MXFP4 in its safetensors layout, and the
    MTP modules vLLM does not load: ``ledger.serve.disk``)."""
    return disk_bytes(*load(name))


@pytest.mark.parametrize("name,size,what", PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_checkpoint_bytes_match_the_published_size(name, size, what):
    """Within 2% of the size on disk. What is left: the safetensors header and, for
    AutoGPTQ, the zero biases its QuantLinear saves (vLLM's Llama skips them). Each file is
    read as the method it names: the ledger's count is not fitted to the sizes."""
    assert checkpoint_bytes(name) == pytest.approx(size, rel=0.02)


def test_the_published_sizes_read_each_method():
    """The five checkpoints held to the hub's listings: compressed-tensors W4A16 (group 128,
    act-order groups, so an int32 g_idx per input column) and INT8 W8A8 (a bf16 scale per
    output channel), fp8 per tensor (dynamic activations), ModelOpt FP8 and ModelOpt NVFP4
    (fp8 scales per 16, fp32 per-tensor scales), each leaving lm_head in bf16; within 0.1%
    of the listed sizes, the listings' own rounding."""
    rows = {name: size for name, size, _ in PUBLISHED}
    w4 = load("quant/tinyllama-1.1b-chat-w4a16-actorder-group.json")[1]
    assert (w4.method, w4.weight, w4.group, w4.g_idx, w4.ignore) == \
        ("compressed-tensors", "int4", 128, True, ("lm_head",))
    fp8 = load("quant/meta-llama-3-8b-fp8-dynamic.json")[1]
    assert (fp8.method, fp8.weight, fp8.scale, fp8.activations) == \
        ("fp8", "fp8", "tensor", "fp8")
    mo8 = load("quant/llama-3.1-8b-instruct-modelopt-fp8")[1]
    nv4 = load("quant/phi-4-reasoning-plus-modelopt-nvfp4.json")[1]
    assert (mo8.method, mo8.weight, nv4.method, nv4.weight, nv4.group) == \
        ("modelopt", "fp8", "modelopt", "fp4", 16)
    int8 = load("quant/llama-3-8b-instruct-w8a8-static-asym.json")[1]
    assert (int8.method, int8.weight, int8.scale, int8.activations, int8.tensor_scales) == \
        ("compressed-tensors", "int8", "channel", "int8", 1)  # static: an input scale
    for name in ("quant/llama-3-8b-instruct-w8a8-static-asym.json",
                 "quant/tinyllama-1.1b-chat-w4a16-actorder-group.json",
                 "quant/meta-llama-3-8b-fp8-dynamic.json",
                 "quant/llama-3.1-8b-instruct-modelopt-fp8",
                 "quant/phi-4-reasoning-plus-modelopt-nvfp4.json"):
        assert checkpoint_bytes(name) == pytest.approx(rows[name], rel=0.001)


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


def test_methods_read_from_the_configs():
    """Each file's quantization_config, as vLLM reads it."""
    assert load("quant/gpt-oss-20b.json")[1].label == "mxfp4 W4A16: MXFP4, e8m0 scale per 32"
    g = load("quant/genz-70b-gptq-3bit-1g.json")[1]
    assert (g.method, g.weight, g.scale, g.g_idx) == ("gptq", "int3", "channel", True)
    b = load("quant/orpheus-3b-bnb-nf4.json")[1]
    assert (b.weight, b.double_quant, "model.layers.0.self_attn" in b.ignore) == \
        ("nf4", True, True)
    d = load("deepseek-v3-fp8.json")[1]
    assert (d.method, d.block, d.activations) == ("fp8", (128, 128), "fp8")


def test_matrix_bytes_by_hand():
    """One 4096 x 4096 matrix, method by method, counted by hand from the tensors each
    checkpoint stores."""
    n = 4096 * 4096
    awq = read_quant({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True})
    # qweight n/2, fp16 scales and 4-bit zeros per (32 groups x 4096 outputs)
    assert matrix_bytes(awq, 4096, 4096) == n / 2 + 32 * 4096 * 2 + 32 * 4096 / 2
    nvfp4 = read_quant({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16})
    # e2m1 codes n/2, an fp8 scale per 16, fp32 weight_scale_2 and input_scale
    assert matrix_bytes(nvfp4, 4096, 4096) == n / 2 + n / 16 + 8
    ct = read_quant({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": True,
                                           "strategy": "group", "group_size": 128}}},
        "ignore": ["lm_head"]})
    assert (ct.activations, matrix_bytes(ct, 4096, 4096)) == ("bf16", n / 2 + 32 * 4096 * 2)
    w8a8 = read_quant({"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
        "input_activations": {"num_bits": 8, "type": "int", "dynamic": True}}}})
    # a scale per output channel: the model's bf16 in the files, fp32 as vLLM holds it
    # (compressed_tensors_w8a8_int8.py:70-73); INT4 weight-only keeps bf16 resident too
    assert (w8a8.activations, matrix_bytes(w8a8, 4096, 4096)) == ("int8", n + 4096 * 4)
    assert matrix_bytes(w8a8.stored, 4096, 4096) == n + 4096 * 2
    assert matrix_bytes(ct.stored, 4096, 4096) == matrix_bytes(ct, 4096, 4096)
    fp8 = read_quant({"quant_method": "fp8", "activation_scheme": "static"})
    assert matrix_bytes(fp8, 4096, 4096) == n + 4 + 4  # weight and input scales
    # DeepSeek's blocks: fp32 weight_scale_inv of ceil(out/128) x ceil(in/128), the shapes
    # DeepSeek-R1's tensor list gives - kv_a_proj_with_mqa [576, 7168] with [5, 56],
    # kv_b_proj [32768, 512] with [256, 4], an expert's down_proj [7168, 2048] with [56, 16]
    block = read_quant({"quant_method": "fp8", "weight_block_size": [128, 128]})
    for (o, i), (so, si) in (((576, 7168), (5, 56)), ((32768, 512), (256, 4)),
                             ((7168, 2048), (56, 16))):
        assert matrix_bytes(block, o, i) == o * i + so * si * 4


def test_gpt_oss_120b_weights_as_vllm_logged_them():
    """One H100: "Model loading took 64.38 GiB" with the Triton MXFP4 backend (vLLM
    0.14.1, issue #33155; the ledger 64.30, -0.12%) and "65.9651 GiB" with Marlin (0.10.1,
    issue #23278; the ledger 65.90, -0.10%)."""
    model, q = load("gpt-oss-120b.json")
    h100 = system("h100-sxm")
    for backend, logged in (("triton", 64.38), ("marlin", 65.9651)):
        est = serve(model, ServeConfig(context=32768, quant=q, mxfp4_backend=backend), h100)
        assert est.weight_bytes_per_gpu / GiB == pytest.approx(logged, rel=0.03)
    assert serve(model, ServeConfig(context=32768, quant=q), h100).mxfp4_backend == "triton"


def test_qwen3_32b_awq_weights_as_vllm_logged_them():
    """AWQ read from Qwen3-32B-AWQ's config (4 bits, group 128, zero points, GEMM), tensor
    parallel 4: "Model loading took 4.5804 GiB" on each GPU (vLLM 0.8.5, a deployment log
    kept in jackypanster/qwen3-32b-awq); the ledger's 4.50 GiB is -1.7% from it."""
    model, q = load("quant/qwen3-32b-awq.json")
    assert (q.method, q.weight, q.group, q.zero_points) == ("awq", "int4", 128, True)
    est = serve(model, ServeConfig(tp=4, context=32768, quant=q), system("h100-sxm"))
    assert est.weight_bytes_per_gpu / GiB == pytest.approx(4.5804, rel=0.03)


# Resident weights vLLM logged for RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic (compressed-tensors
# W8A8: FP8 weights with a scale per output channel, FP8 activations per token, lm_head in
# bf16), "Model loading took ... GiB" per GPU (SOURCES.md): (tp, GiB logged)
FP8_DYNAMIC_LOGS = [(1, 67.72), (2, 33.88), (4, 16.9619)]


@pytest.mark.parametrize("tp,logged", FP8_DYNAMIC_LOGS, ids=[f"tp{t}" for t, _ in FP8_DYNAMIC_LOGS])
def test_compressed_tensors_fp8_dynamic_weights_as_vllm_logged_them(tp, logged):
    """compressed-tensors W8A8 (FP8) read from the checkpoint's config and held to what vLLM
    logged it holding per GPU at tensor parallel 1, 2 and 4 (a resident-weights measurement,
    not a size on disk): -0.04%, -0.10%, -0.22% - the channel scales counted in the fp32
    vLLM allocates for them (ledger.serve.scales), not the files' bf16 (-0.06%, -0.12%,
    -0.24%)."""
    model, q = load("quant/llama-3.3-70b-instruct-fp8-dynamic.json")
    assert (q.method, q.weight, q.scale, q.activations, q.ignore) == \
        ("compressed-tensors", "fp8", "channel", "fp8", ("lm_head",))
    est = serve(model, ServeConfig(tp=tp, context=8192, quant=q), system("h100-sxm"))
    assert est.weight_bytes_per_gpu / GiB == pytest.approx(logged, rel=0.02)


def test_expert_parallel_keeps_experts_whole_and_pads_less():
    """vLLM pads each GPU's share of an expert's intermediate for the Marlin MoE kernel
    (to 128; hidden to 256): split four ways (tp 4) 2880 / 4 = 720 -> 768, whole with EP
    (32 experts a GPU) 2880 -> 2944. By hand, bytes of one layer's experts on one GPU:
    E x (3 x I x H / 2 + 3 x I x H / 32 + 2 x (2 I + H))."""
    model, q = load("gpt-oss-120b.json")
    def by_hand(e, i, h=3072):
        return e * (3 * i * h // 2 + 3 * i * h // 32 + 2 * (2 * i + h))
    tp = ServeConfig(tp=4, context=8192, quant=q)
    ep = ServeConfig(tp=4, ep=4, context=8192, quant=q)
    assert mxfp4_expert_bytes(model, tp, "marlin") == by_hand(128, 768)
    assert mxfp4_expert_bytes(model, ep, "marlin") == by_hand(32, 2944)
    assert by_hand(32, 2944) < by_hand(128, 768)


def test_deepseek_r1_fp8_starts_on_8_h200():
    """DeepSeek-V3 / R1 as released (FP8, 128 x 128 block scales) on 8 H200: 79.29 GiB a
    GPU, against "Pre-loading model weights on hpu:0 took 79.41 GiB" that the HabanaAI
    vLLM fork logged for DeepSeek-R1 at tensor parallel 8 (HabanaAI/vllm-fork #809); the
    bf16 weights, 157.92 GiB, do not fit."""
    model, q = load("deepseek-v3-fp8.json")
    est = serve(model, ServeConfig(tp=8, context=32768, quant=q), system("h200"))
    assert est.weight_bytes_per_gpu / GiB == pytest.approx(79.41, rel=0.03)
    assert est.pool.short is None and est.max_sequences >= 1
    bf16 = serve(model, ServeConfig(tp=8, context=32768), system("h200"))
    assert bf16.pool.short is not None


def test_gpt_oss_120b_starts_at_high_utilization_with_moderate_context():
    """vLLM 0.11.2 ran it on one H100 at --gpu-memory-utilization 0.97 with 85K tokens
    (issue #33155's description): it starts with that vLLM's sort sampler and no CUDA-graph
    estimate, and at the pinned commit's defaults otherwise (8.01 GiB of KV memory for
    3.27 GiB a request)."""
    model, q = load("gpt-oss-120b.json")
    h100 = system("h100-sxm")
    for extra in ({}, {"sampler": "sort", "cudagraph_bytes": 0.0}):
        est = serve(model, ServeConfig(context=85 * 1024, quant=q, gpu_memory_utilization=0.97,
                                       **extra), h100)
        assert est.pool.short is None and est.max_sequences >= 1


def test_gpt_oss_120b_fails_at_vllm_0_10_defaults_with_131072_tokens():
    """Issue #23278's start-up: vLLM 0.10's defaults (--gpu-memory-utilization 0.9, the
    model's 131,072 tokens) with the Marlin MXFP4 path: "Available KV cache memory:
    -2.14 GiB". The ledger also finds too little, even with the pinned commit's samplers
    (-2.10 GiB with the sort that run had, below)."""
    model, q = load("gpt-oss-120b.json")
    est = serve(model, ServeConfig(context=131072, quant=q, gpu_memory_utilization=0.9,
                                   mxfp4_backend="marlin"), system("h100-sxm"))
    assert not est.starts


def test_gpt_oss_120b_sampler_pass_counted_by_hand():
    """The profile's sampler pass over min(8,192, 1,024) = 1,024 dummy rows of gpt-oss's
    201,088-token vocabulary, beside the 8,192 dummy tokens' bf16 hidden states and the
    1,024 gathered last tokens with their random copy, counted by hand. The sort of vLLM
    before PR #33538 peaks inside its sort: the bf16 logits (2 B), their fp32 copy (4),
    the sort's fp32 values and int64 indices (4 + 8), PyTorch's int64 index per element for
    the segmented sort (8) and CUB's third key and value buffers (4 + 8). At the pinned
    commit FlashInfer's pass holds the logits, their copy, the masked logits and their
    softmax (2+4+4+4), and the native pass vLLM warms after it the logits, their copy, the
    softmax and the exponential draws (2+4+4+4) beside the Triton kernel's buffer of 132
    rows, one per H100 SM, of the vocabulary in fp32."""
    model, q = load("gpt-oss-120b.json")
    h100 = system("h100-sxm")
    hidden = (8192 + 2 * 1024) * 2880 * 2
    buffer = 132 * 201088 * 4
    for sampler, per_logit, extra in (("sort", 38, 0), ("native", 14, buffer),
                                      ("flashinfer", 14, buffer)):
        est = serve(model, ServeConfig(context=131072, quant=q, sampler=sampler), h100)
        assert est.stages[0].budget.activation_bytes == \
            hidden + 1024 * 201088 * per_logit + extra


# The torch peak increase of vLLM's profile run ("torch peak memory increase"), measured at
# start-up on one H100 per GPU at --gpu-memory-utilization 0.9, --max-model-len 16000 and
# vLLM's defaults otherwise (8,192 batched tokens, 1,024 sequences): llm-d/llm-d-benchmark
# config_explorer/empirical-vllm-memory-results.md @4f4d44943c (SOURCES.md). (config, tp,
# GiB logged)
TORCH_PEAKS = [
    ("hf/released/llama-3.1-8b.json", 1, 4.76),
    ("hf/released/qwen3-32b.json", 1, 5.64),
    ("serve/quant/gpt-oss-20b.json", 1, 7.38),
    ("hf/released/llama-3.3-70b-instruct.json", 2, 4.84),
]


@pytest.mark.parametrize("name,tp,logged", TORCH_PEAKS, ids=[t[0] for t in TORCH_PEAKS])
def test_profile_peak_is_the_sort_of_the_sampler_pass(name, tp, logged):
    """Four text models' profile peaks are the PyTorch sampler's sort of 1,024 rows of their
    vocabulary (38 B a logit) plus the hidden states, within 2% (the ledger is 0.5-0.7%
    under each); the pinned commit's 14 B a logit and Triton buffer would be 60-62% under.
    These start-ups ran vLLM before the Triton top-k / top-p kernel (PR #33538)."""
    model, _ = read_hf_config(HERE.parent / name)
    h100 = system("h100-sxm")
    cfg = dict(tp=tp, context=16000, gpu_memory_utilization=0.9)
    old = serve(model, ServeConfig(sampler="sort", **cfg), h100)
    assert old.stages[0].budget.activation_bytes / GiB == pytest.approx(logged, rel=0.02)
    pinned = serve(model, ServeConfig(**cfg), h100)
    assert pinned.stages[0].budget.activation_bytes / GiB < 0.5 * logged


def test_gpt_oss_120b_kv_memory_as_the_failing_logs_found_it():
    """The two logged failures, with the PyTorch sort those start-ups ran, llm-d's measured
    non-torch increase on one H100 (0.13 GiB) and Marlin MXFP4 kernels: #23278 (vLLM 0.10.1:
    0.9, 131,072 tokens) logged "Available KV cache memory: -2.14 GiB", the ledger -2.11;
    #27508 (0.95, --max-num-batched-tokens 1024) logged 1.71 GiB, the ledger 1.89 (with
    Triton's kernels 3.49: the log does not say which ran; Marlin is the one that fits it,
    so that row chose the backend). Those vLLM subtracted no CUDA-graph estimate (default
    from v0.21): --cudagraph-gib 0."""
    model, q = load("gpt-oss-120b.json")
    h100 = system("h100-sxm")
    base = dict(context=131072, quant=q, mxfp4_backend="marlin", sampler="sort",
                cudagraph_bytes=0.0)
    for extra, logged in (({"gpu_memory_utilization": 0.9}, -2.14),
                          ({"gpu_memory_utilization": 0.95, "max_num_batched_tokens": 1024},
                           1.71)):
        est = serve(model, ServeConfig(**base, **extra), h100)
        b = est.stages[0].budget
        assert (b.non_torch_bytes / GiB, b.non_torch_logged) == (pytest.approx(0.13), True)
        assert b.available_bytes / GiB == pytest.approx(logged, abs=0.25)
        assert not est.starts


def test_gpt_oss_120b_with_the_sort_sampler_starts_high_and_fails_long():
    """Both outcomes of the users' logs at once with the sort of their vLLM (before PR
    #33538): at 0.92 a request of 131,072 tokens finds too little (-0.45 GiB for 4.79 GiB;
    1.07 GiB even without a CUDA-graph estimate), and at --gpu-memory-utilization 0.97 85K
    tokens start (issue #33155's description)."""
    model, q = load("gpt-oss-120b.json")
    h100 = system("h100-sxm")
    assert not serve(model, ServeConfig(context=131072, quant=q, sampler="sort"),
                     h100).starts
    high = serve(model, ServeConfig(context=85 * 1024, quant=q, gpu_memory_utilization=0.97,
                                    sampler="sort"), h100)
    assert high.starts and high.max_sequences >= 1


def test_gpt_oss_120b_fails_to_find_kv_memory_at_the_defaults_with_long_contexts():
    """At the pinned commit's defaults (0.92, FlashInfer's sampler then the native warm-up,
    Triton MXFP4 kernels, one H100) a request of 131,072 tokens needs 4.79 GiB of KV cache
    (18 full layers' 8,192 blocks and 18 sliding layers' 521 of 32 KiB a layer:
    _max_memory_usage_bytes_from_groups, vllm/v1/core/kv_cache_utils.py:1741-1800 at
    v0.22.0) and finds 4.05 GiB: 72.85 GiB asked, less the weights (64.30, the swizzled
    scales' padding included), the profile peak (2.84: 8,192 tokens' hidden states, 1,024
    rows of 201,088 logits at 14 B and the Triton top-k buffer), the non-torch increase
    logged on an H100 at TP 1 (0.13) and the CUDA-graph estimate (1.52,
    ledger.serve.graphs: 83 + 83 graphs). The sourced terms alone leave 5.57 GiB; it fails
    for any graph estimate above 0.79 GiB, so the verdict rests on that estimate, which vLLM
    measures at start-up and the ledger fits (logged estimates fell x0.15 to x3.03 of the
    fit: serve's margin line, tests/test_serve_graphs.py). Without the graph estimate
    (--enforce-eager) it starts by 0.79 GiB; with the estimate at llm-d's captured 1.03 GiB
    it fails by 0.24."""
    model, q = load("gpt-oss-120b.json")
    h100 = system("h100-sxm")
    est = serve(model, ServeConfig(context=131072, quant=q), h100)
    b = est.stages[0].budget
    assert (b.graphs.piecewise, b.graphs.full, b.graphs.largest) == (83, 83, 1024)
    # the request by hand: (8,192 + 521) blocks x 18 layers x 32 KiB
    assert est.pool.request_bytes == (8192 + 521) * 18 * 32 * 1024
    assert not est.starts and b.available_bytes < est.pool.request_bytes
    assert not est.graph_margin.settled  # the logged spread of the estimate holds both
    # what fails it is the graph estimate: the sourced terms alone leave room for the request
    assert b.available_bytes + b.cudagraph_bytes > est.pool.request_bytes
    eager = serve(model, ServeConfig(context=131072, quant=q, enforce_eager=True), h100)
    assert eager.starts
    given = serve(model, ServeConfig(context=131072, quant=q, cudagraph_bytes=1.03 * GiB),
                  h100)
    assert not given.starts


def test_quantization_flag_overrides_the_file():
    """--quantization fp8 on a bf16 checkpoint quantizes at load; on a quantized one it
    may name the same method or its Marlin kernel; any other is refused as vLLM does."""
    q = resolve("fp8", None)
    h100 = system("h100-sxm")
    bf16 = serve(llama3_8b(), ServeConfig(context=8192), h100)
    fp8 = serve(llama3_8b(), ServeConfig(context=8192, quant=q), h100)
    # linear layers to 1 byte a weight; embedding and head (2 x 525M) stay bf16
    linear = llama3_8b().params - 2 * 128256 * 4096 - 65 * 4096  # less the norms
    assert bf16.weight_bytes_per_gpu - fp8.weight_bytes_per_gpu == pytest.approx(linear, rel=1e-4)
    gptq = load("quant/genz-70b-gptq-4bit-128g.json")[1]
    assert resolve("gptq_marlin", gptq).method == "gptq"
    with pytest.raises(LedgerError, match="refuses --quantization awq"):
        resolve("awq", gptq)


def test_prefill_runs_at_the_kernels_precision():
    """W8A8 FP8 runs its GEMMs at the FP8 peak; W4A16 dequantizes and runs bf16 GEMMs."""
    h100 = system("h100-sxm")
    model = llama3_8b()
    base = serve(model, ServeConfig(context=32768), h100).prefill_s
    w4a16 = read_quant({"quant_method": "gptq", "bits": 4, "group_size": 128})
    assert serve(model, ServeConfig(context=32768, quant=w4a16), h100).prefill_s == \
        pytest.approx(base)
    assert serve(model, ServeConfig(context=32768, quant=resolve("fp8", None)),
                 h100).prefill_s < 0.8 * base


def test_unknown_quant_method_is_one_line(tmp_path, capsys):
    from ledger.cli import main

    cfg = json.loads((HERE / "quant" / "orpheus-3b-bnb-nf4.json").read_text())
    cfg["quantization_config"] = {"quant_method": "hqq", "nbits": 4}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert main(["serve", str(path), "--context", "4096"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'hqq'" in err[0]


def test_decode_reads_the_stored_bytes():
    """At batch 1 a decode step is memory-bound: a 4-bit GPTQ Llama-3-70B reads its
    stored weights (less the embedding rows it only indexes, bf16 in both) where the
    bf16 model reads its bf16 ones, and the cache the same: the step's time falls in the
    ratio of those bytes."""
    from ledger.model import llama3_70b

    h100 = system("h100-sxm")
    model = llama3_70b()
    gptq = read_quant({"quant_method": "gptq", "bits": 4, "group_size": 128})
    a = serve(model, ServeConfig(tp=4, context=8192), h100)
    b = serve(model, ServeConfig(tp=4, context=8192, quant=gptq), h100)
    table = model.breakdown["embedding"] / 4 * 2
    kv = a.stages[0].kv_bytes_per_sequence
    bw = h100.gpu.hbm_bytes_per_s
    comm = a.decode_s_per_token - (kv + a.weight_bytes_per_gpu - table) / bw
    assert b.decode_s_per_token - comm == pytest.approx(
        (kv + b.weight_bytes_per_gpu - table) / bw, rel=1e-9)
    assert b.decode_s_per_token < 0.4 * a.decode_s_per_token


def test_weights_share_over_the_pipeline():
    """The FP8 DeepSeek-R1 on two nodes: each pipeline rank holds its layers (and the
    first the embedding, the last the head); one GPU of each rank together hold what
    one GPU holds without PP."""
    model, q = load("deepseek-v3-fp8.json")
    one = serve(model, ServeConfig(tp=8, context=8192, quant=q), system("h200"))
    two = serve(model, ServeConfig(tp=8, pp=2, context=8192, quant=q), system("h200"))
    assert sum(s.weight_bytes for s in two.stages) == pytest.approx(one.weight_bytes_per_gpu,
                                                                  rel=1e-12)


KEYS = ["bits", "group_size", "weight_block_size", "quant_algo", "config_groups", "weights",
        "num_bits", "type", "strategy", "input_activations", "ignore", "modules_to_not_convert",
        "desc_act", "zero_point", "load_in_8bit", "block_structure", "quantization",
        "symmetric", "dynamic"]
VALUES = st.recursive(st.none() | st.booleans() | st.integers(-3, 300) | st.text(max_size=6),
                      lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.sampled_from(KEYS), inner, max_size=4),
                      max_leaves=8)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(METHODS + ("hqq",)), st.dictionaries(st.sampled_from(KEYS), VALUES,
                                                           max_size=5))
def test_any_quantization_config_is_read_or_refused_in_one_line(method, rest):
    """Whatever a file's quantization_config holds, it is read into a format whose bytes
    are positive, or refused by name; never a traceback."""
    try:
        q = read_quant({**rest, "quant_method": method})
    except LedgerError as e:
        assert str(e).startswith("quantization_config:") and "\n" not in str(e)
        return
    assert matrix_bytes(q, 64, 96) > 0


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

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

from ledger.errors import LedgerError
from ledger.io.hf.reader import read_hf_config, read_hf_quant
from ledger.model import llama3_8b
from ledger.serve import ServeConfig, serve
from ledger.serve.disk import checkpoint_bytes as disk_bytes
from ledger.serve.qbytes import matrix_bytes, mxfp4_expert_bytes
from ledger.serve.quant import METHODS, read_quant, resolve
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

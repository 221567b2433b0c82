"""ModelOpt checkpoints as NVIDIA ships them (issue 33): the format in
``hf_quant_config.json`` beside a config.json that has none, read as vLLM reads it, and the
bytes held to the checkpoint's own size on disk. Fixtures and sources:
tests/fixtures/serve/SOURCES.md."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ledger.errors import LedgerError
from ledger.io.hf.reader import read_hf_config, read_hf_quant
from ledger.serve.disk import checkpoint_bytes

HERE = Path(__file__).parent / "fixtures" / "serve" / "quant"
NVFP4_70B = HERE / "llama-3.3-70b-instruct-nvfp4"
# nvidia/Llama-3.3-70B-Instruct-NVFP4 at ec8feebb970caeb572f375eb1767b92475e99d84: its
# model.safetensors.index.json metadata.total_size (a public controller script checks the
# file against it), and the packed e2m1 codes' bytes a public write-up summed from the
# safetensors headers (every U8 tensor's data_offsets)
TOTAL_BYTES = 42_709_045_632
U8_BYTES = 34_225_520_640


def test_config_json_carries_no_format_the_sidecar_does():
    """The release's config.json is the base model's (no quantization_config); vLLM reads
    hf_quant_config.json then, and so does the ledger: NVFP4, an fp8 scale per 16, lm_head
    excluded."""
    assert "quantization_config" not in json.loads((NVFP4_70B / "config.json").read_text())
    q = read_hf_quant(NVFP4_70B)
    assert (q.method, q.weight, q.group, q.ignore, q.source) == \
        ("modelopt", "fp4", 16, ("lm_head",), "hf_quant_config.json")
    assert read_hf_quant(NVFP4_70B / "config.json") == q


def test_nvfp4_70b_bytes_are_the_checkpoint_size():
    """The ledger's count is the published total_size to the byte. By hand: 80 layers of
    linear weights (68,451,041,280) as e2m1 codes two a byte - the published U8 bytes - an
    e4m3 scale per 16, two fp32 scalars per matrix (weight_scale_2, input_scale; 560
    matrices), and the bf16 embedding, head and norms."""
    linear = 80 * (8192 * (8192 + 1024 + 1024 + 8192) + 3 * 8192 * 28672)
    assert linear // 2 == U8_BYTES
    bf16 = 2 * (2 * 128256 * 8192 + (2 * 80 + 1) * 8192)
    assert linear // 2 + linear // 16 + 80 * 7 * 2 * 4 + bf16 == TOTAL_BYTES
    model, _ = read_hf_config(NVFP4_70B)
    assert checkpoint_bytes(model, read_hf_quant(NVFP4_70B)) == TOTAL_BYTES


def test_the_sidecar_is_read_only_beside_a_config_json_without_a_format(tmp_path):
    """A config.json's own quantization_config wins (vLLM reads the file only when there is
    none); a config named otherwise is no model folder, so nothing beside it is read; a
    sidecar that is no JSON object is refused naming it."""
    folder = tmp_path / "m"
    shutil.copytree(NVFP4_70B, folder)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "other.json").write_text(json.dumps(cfg))
    assert read_hf_quant(folder / "other.json") is None
    cfg["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic"}
    (folder / "config.json").write_text(json.dumps(cfg))
    assert read_hf_quant(folder).method == "fp8"
    del cfg["quantization_config"]
    (folder / "config.json").write_text(json.dumps(cfg))
    (folder / "hf_quant_config.json").write_text("[1]")
    with pytest.raises(LedgerError, match="hf_quant_config.json"):
        read_hf_quant(folder)


def test_serve_reads_the_folder_as_nvfp4(capsys):
    """serve on the folder prices the sidecar's NVFP4, not the config.json's bf16 (141.06
    GB of bf16 weights would not fit one B200)."""
    from ledger.cli import main

    assert main(["serve", str(NVFP4_70B), "--gpu", "b200", "--context", "8192"]) == 0
    assert "(modelopt W4A4: NVFP4, fp8 scale per 16, linear layers)" in capsys.readouterr().out


def test_fp8_sidecar_is_the_listed_file():
    """nvidia/Llama-3.1-8B-Instruct-FP8 lists its hf_quant_config.json at 241 bytes; of
    ModelOpt's FP8 layouts only FP8 weights and KV with lm_head excluded fill that
    (SOURCES.md), read as vLLM reads the sidecar: FP8 per tensor, lm_head left out."""
    folder = HERE / "llama-3.1-8b-instruct-modelopt-fp8"
    assert (folder / "hf_quant_config.json").stat().st_size == 241
    q = read_hf_quant(folder)
    assert (q.method, q.weight, q.scale, q.ignore, q.source) == \
        ("modelopt", "fp8", "tensor", ("lm_head",), "hf_quant_config.json")


def test_kv_cache_auto_takes_the_checkpoint_kv(capsys, tmp_path):
    """vLLM's --kv-cache-dtype auto takes a ModelOpt checkpoint's kv_cache_quant_algo (a
    user's start-ups saw auto "PROMOTE to fp8_e4m3" on an nvidia NVFP4 release, SOURCES.md):
    FP8 here, half of bf16's 320 KiB a token (80 layers x 8 KV heads x 128 x K and V). The
    flag wins; SGLang's auto takes FP8 too (kv_cache_dtype.py L39-49 at 10a75eae); without
    ModelOpt's producer vLLM reads none."""
    from ledger.cli import main

    assert read_hf_quant(NVFP4_70B).kv_cache == "fp8"
    base = ["serve", str(NVFP4_70B), "--gpu", "b200", "--context", "8192"]
    for extra, kv, per_token in (([], "fp8", "160.00 KiB"),
                                 (["--kv-cache-dtype", "bf16"], "bf16", "320.00 KiB"),
                                 (["--engine", "sglang"], "fp8", "160.00 KiB"),
                                 (["--engine", "sglang", "--kv-cache-dtype", "bf16"], "bf16",
                                  "320.00 KiB")):
        assert main(base + extra) == 0
        out = capsys.readouterr().out
        assert f", kv {kv} [" in out and f"KV cache per GPU         {per_token} per token" in out
    folder = tmp_path / "m"
    shutil.copytree(NVFP4_70B, folder)
    side = json.loads((folder / "hf_quant_config.json").read_text())
    del side["producer"]
    (folder / "hf_quant_config.json").write_text(json.dumps(side))
    assert read_hf_quant(folder).kv_cache is None


def _nvfp4_kv_checkpoint(tmp_path) -> Path:
    """The Llama 3.3 70B NVFP4 release with its KV cache declared NVFP4 (ModelOpt's
    kv_cache_quant_algo, as `hf_ptq.py --kv_cache_qformat nvfp4` writes it)."""
    folder = tmp_path / "kv-nvfp4"
    shutil.copytree(NVFP4_70B, folder)
    side = json.loads((folder / "hf_quant_config.json").read_text())
    side["quantization"]["kv_cache_quant_algo"] = "NVFP4"
    (folder / "hf_quant_config.json").write_text(json.dumps(side))
    return folder


def test_an_nvfp4_kv_cache_is_priced_where_the_engine_runs_it(capsys, tmp_path):
    """vLLM's auto takes a checkpoint's NVFP4 KV cache (MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP
    at 0024350b) and packs each head's K and V in 128 / 2 bytes of codes and 128 / 16 fp8
    scales: 80 layers x 8 heads x 2 x 72 B = 90 KiB a token, 16-token blocks of 18 KiB a
    layer (16 x 8 x 144 B). SGLang runs it when --kv-cache-dtype nvfp4 asks (its cell:
    80 x 8 x 256 / 2 + 80 x 8 x 128 x 2 / 16 = 92,160 B); its auto keeps the model's bf16,
    said in one line on stderr, the figures marked approximate."""
    from ledger.cli import main

    folder = _nvfp4_kv_checkpoint(tmp_path)
    assert read_hf_quant(folder).kv_cache == "nvfp4"
    base = ["serve", str(folder), "--gpu", "b200", "--context", "8192"]
    for extra in ([], ["--engine", "sglang", "--kv-cache-dtype", "nvfp4"]):
        assert main(base + extra) == 0
        out, err = capsys.readouterr()
        assert err == "" and ", kv nvfp4 [" in out and "approximate" not in out
        assert "KV cache per GPU          90.00 KiB per token" in out
    assert main(base) == 0
    assert "16-token blocks of 18.00 KiB a layer" in capsys.readouterr().out
    assert main(base + ["--engine", "sglang", "--kv-cache-dtype", "nvfp4", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["sglang"][0]["cell_bytes"] == 80 * 8 * 256 // 2 + 80 * 8 * 128 * 2 // 16
    assert main(base + ["--engine", "sglang"]) == 0
    out, err = capsys.readouterr()
    assert ", kv bf16 [" in out and "KV cache per GPU         320.00 KiB per token" in out
    assert len(err.splitlines()) == 1 and err.startswith("warning: not modelled") \
        and "NVFP4 KV cache" in err and "SGLang" in err
    assert out.rstrip().endswith("approximate: the checkpoint sets 1 thing(s) the ledger "
                                 "does not model (named on stderr)")
    assert main(base + ["--engine", "sglang", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "NVFP4 KV cache" in json.loads(out)["approximate"][0] and "SGLang" in err


def test_vllm_refuses_nvfp4_on_an_mla_cache(capsys):
    """vLLM's MLA cache spec packs no NVFP4: refused in one line naming the field."""
    from ledger.cli import main

    assert main(["serve", "deepseek-v3", "--gpu", "b200", "--tp", "8", "--context", "4096",
                 "--kv-cache-dtype", "nvfp4"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: kv_cache_dtype: nvfp4 on")


def test_kv_cache_scheme_of_the_flat_form():
    """ModelOpt 0.31 and later write the format into config.json, the KV cache as a
    ``kv_cache_scheme``: a static 8-bit float is FP8, as vLLM reads it."""
    from ledger.serve.quant import read_quant

    flat = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
            "kv_cache_scheme": {"dynamic": False, "num_bits": 8, "type": "float"}}
    assert read_quant(flat).kv_cache == "fp8"
    assert read_quant(dict(flat, kv_cache_scheme=None)).kv_cache is None


# nvidia/Qwen3.6-27B-NVFP4 at 0893e1606ff3d5f97a441f405d5fc541a6bdf404 (ModelOpt
# MIXED_PRECISION): config.json assembled from the base model's and the quantization
# config a public checkpoint note describes (SOURCES.md); the published sizes, that note's
# sums of the three shards' safetensors header data_offsets, in GiB to three decimals:
# every tensor (equal to model.safetensors.index.json's total_size), the vision tower
# (model.visual.*, 333 bf16 tensors) and the MTP block (mtp.*, 15 bf16 tensors)
QWEN36_MIXED = HERE / "qwen3.6-27b-nvfp4.json"
QWEN36_TOTAL_GIB, QWEN36_VISION_GIB, QWEN36_MTP_GIB = 20.416, 0.858, 0.791


def _mixed_cfg(**qc):
    cfg = json.loads(QWEN36_MIXED.read_text())
    cfg["quantization_config"].update(qc)
    return cfg


def test_mixed_precision_gives_each_module_its_algorithm():
    """Read as vLLM 0.22.0's ModelOptMixedPrecisionConfig: FP8 W8A8 for the attention and
    Gated DeltaNet projections (208 modules), NVFP4 weight-only for the MLP and the head
    (193, group 16, bf16 activations); a fused module by its shards; in_proj_a / _b, the
    embedding and what the map does not name stay bf16; the KV cache its kv_cache_scheme."""
    from ledger.serve.qbytes import head_quant
    from ledger.serve.quant import config_quant

    q = read_hf_quant(QWEN36_MIXED)
    assert q.label == ("modelopt mixed: FP8 W8A8 per-tensor x208, "
                       "NVFP4 W4A16, fp8 scale per 16 x193")
    assert (q.kv_cache, q.ignore) == ("fp8", ("mtp*", "mtp.layers.0*"))
    fp8 = q.module("model.layers.3.self_attn.qkv_proj")
    assert (fp8.weight, fp8.scale, fp8.activations, fp8.tensor_scales) == \
        ("fp8", "tensor", "fp8", 1)
    assert q.module("model.layers.0.linear_attn.in_proj_qkv") == fp8
    w4 = q.module("model.layers.0.mlp.gate_up_proj")
    assert (w4.weight, w4.group, w4.activations) == ("fp4", 16, "bf16")
    assert head_quant(q) == w4
    assert q.module("model.layers.0.linear_attn.in_proj_a") is None
    assert q.module("model.layers.0.linear_attn.in_proj_ba") is None
    # the experts of a MoE layer by any entry under them (prefix lookup)
    moe = config_quant(_mixed_cfg(quantized_layers={
        "model.language_model.layers.0.mlp.experts.0.gate_proj": {"quant_algo": "NVFP4"}}))
    nv = moe.module("model.layers.0.mlp.experts")
    assert (nv.weight, nv.activations, moe.module("model.layers.0.mlp.gate_up_proj")) == \
        ("fp4", "fp4", None)


def test_qwen36_27b_mixed_bytes_are_the_published_size():
    """The ledger counts the text model (no vision tower, no MTP block: vLLM does not load
    the MTP block without speculative decoding), so it is held to the published total
    less the published vision-tower and MTP figures: 20.416 - 0.858 - 0.791 = 18.767 GiB.
    By hand, to the byte: the bf16 embedding; the head and 64 MLPs in NVFP4 (e2m1 two a
    byte, an e4m3 scale per 16, two fp32 scalars); 16 gated attentions (q_proj twice the
    heads' width) and 48 Gated DeltaNets' in_proj_qkv / in_proj_z / out_proj in FP8 (two
    fp32 scalars); in_proj_a / _b, conv1d, A_log, dt_bias and the norms in bf16."""
    V, H, I = 248320, 5120, 17408
    nvfp4 = (V * H + 64 * 3 * H * I) * (1 / 2 + 1 / 16) + (1 + 64 * 3) * 8
    fp8 = 16 * (12288 * H + 2 * 1024 * H + 6144 * H + 4 * 8) \
        + 48 * (10240 * H + 6144 * H + H * 6144 + 3 * 8)
    bf16 = 2 * (V * H + 48 * (2 * 48 * H + 10240 * 4 + 48 + 48 + 128) + 16 * 2 * 256
                + 64 * 2 * H + H)
    model, _ = read_hf_config(QWEN36_MIXED)
    ledger_bytes = checkpoint_bytes(model, read_hf_quant(QWEN36_MIXED))
    assert ledger_bytes == nvfp4 + fp8 + bf16 == 20_150_569_096
    published = QWEN36_TOTAL_GIB - QWEN36_VISION_GIB - QWEN36_MTP_GIB
    assert abs(ledger_bytes / 2**30 / published - 1) < 0.02
    assert round(ledger_bytes / 2**30, 3) == round(published, 3) == 18.767


def test_mixed_precision_refusals_are_one_line(tmp_path, capsys):
    """An algorithm vLLM's mixed class does not dispatch (FP8_PB_WO here), an empty map,
    and a fused module whose shards differ are each refused in one line naming them."""
    from ledger.cli import main
    from ledger.serve.quant import config_quant

    cfg = _mixed_cfg()
    cfg["quantization_config"]["quantized_layers"][
        "model.language_model.layers.3.self_attn.k_proj"] = {"quant_algo": "FP8_PB_WO"}
    path = tmp_path / "unknown.json"
    path.write_text(json.dumps(cfg))
    assert main(["serve", str(path), "--context", "8192"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "FP8_PB_WO" in err[0] and "layers.3.self_attn.k_proj" in err[0]
    with pytest.raises(LedgerError, match="non-empty 'quantized_layers'"):
        config_quant(_mixed_cfg(quantized_layers={}))
    split = _mixed_cfg()
    split["quantization_config"]["quantized_layers"][
        "model.language_model.layers.3.self_attn.k_proj"] = {"quant_algo": "W4A16_NVFP4"}
    with pytest.raises(LedgerError, match="shards of model.layers.3.self_attn.qkv_proj"):
        config_quant(split).module("model.layers.3.self_attn.qkv_proj")


def test_serve_prices_the_mixed_checkpoint(capsys):
    """serve on the real config.json: 18.77 GiB of weights in the mixed format, FP8 KV."""
    from ledger.cli import main

    assert main(["serve", str(QWEN36_MIXED), "--gpu", "h100-sxm", "--context", "32768"]) == 0
    out = capsys.readouterr().out
    assert "weights per GPU           18.77 GiB   (modelopt mixed: FP8 W8A8" in out
    assert ", kv fp8 [" in out


def test_mixed_precision_finds_qwens_one_shared_expert():
    """Qwen's MoE blocks name their one shared expert ``mlp.shared_expert`` (vLLM's
    qwen2_moe.py / qwen3_next.py, which Qwen3.5-MoE builds), as nvidia's Qwen3.6-35B-A3B
    map does ("model.language_model.layers.0.mlp.shared_expert.gate_proj"): found there,
    its gate and up fused; its sigmoid gate stays bf16 as vLLM builds it."""
    from ledger.serve.qbytes import matrix_quants
    from ledger.finetune import modules
    from ledger.serve.quant import read_quant

    P = "model.language_model.layers.3"
    w4 = {"quant_algo": "W4A16_NVFP4", "group_size": 16}
    q = read_quant({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
                    "quantized_layers": {f"{P}.mlp.experts": w4,
                                         **{f"{P}.mlp.shared_expert.{p}": w4 for p in
                                            ("gate_proj", "up_proj", "down_proj")},
                                         f"{P}.self_attn.q_proj": {"quant_algo": "FP8"}}})
    model, _ = read_hf_config(Path(__file__).parent / "fixtures" / "hf" / "released"
                              / "qwen3-next-80b-a3b-instruct.json")
    lins = modules.layer(model, model.layer_kind(3))
    got = {(lin.kind, lin.name): mq for lin, mq in
           zip(lins, matrix_quants(q, lins, 3, family=model.family))}
    assert all(got[("shared_experts", p)].activations == "bf16"
               for p in ("gate_proj", "up_proj", "down_proj"))
    assert got[("shared_experts", "shared_expert_gate")] is None
    assert {got[k].activations for k in got if k[0] == "experts"} == {"bf16"}
    assert got[("attention", "q_proj")].weight == "fp8"

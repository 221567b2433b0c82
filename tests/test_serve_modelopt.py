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
    flag wins; SGLang's auto stays the model's bf16; an NVFP4 KV cache is refused in one
    line unless the flag names a dtype; without ModelOpt's producer vLLM reads none."""
    from ledger.cli import main

    assert read_hf_quant(NVFP4_70B).kv_cache == "fp8"
    base = ["serve", str(NVFP4_70B), "--gpu", "b200", "--context", "8192"]
    for extra, kv, per_token in (([], "fp8", "160.00 KiB"),
                                 (["--kv-cache-dtype", "bf16"], "bf16", "320.00 KiB"),
                                 (["--engine", "sglang"], "bf16", "320.00 KiB")):
        assert main(base + extra) == 0
        out = capsys.readouterr().out
        assert f", kv {kv} [" in out and f"KV cache per GPU         {per_token} per token" in out
    folder = tmp_path / "m"
    shutil.copytree(NVFP4_70B, folder)
    side = json.loads((folder / "hf_quant_config.json").read_text())
    side["quantization"]["kv_cache_quant_algo"] = "NVFP4"
    (folder / "hf_quant_config.json").write_text(json.dumps(side))
    assert main(["serve", str(folder), "--context", "8192"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "NVFP4 KV cache" in err[0]
    assert main(["serve", str(folder), "--context", "8192", "--kv-cache-dtype", "fp8"]) == 0
    del side["producer"]
    (folder / "hf_quant_config.json").write_text(json.dumps(side))
    assert read_hf_quant(folder).kv_cache is None


def test_kv_cache_scheme_of_the_flat_form():
    """ModelOpt 0.31 and later write the format into config.json, the KV cache as a
    ``kv_cache_scheme``: a static 8-bit float is FP8, as vLLM reads it."""
    from ledger.serve.quant import read_quant

    flat = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
            "kv_cache_scheme": {"dynamic": False, "num_bits": 8, "type": "float"}}
    assert read_quant(flat).kv_cache == "fp8"
    assert read_quant(dict(flat, kv_cache_scheme=None)).kv_cache is None

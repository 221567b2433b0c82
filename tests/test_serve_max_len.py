"""serve --context beyond the longest context the engine derives from a config.json is
refused as vLLM refuses it (ledger.io.hf.max_len: _get_and_verify_max_len at vllm
18ec6629): one line naming --context and both numbers, exit 2. Real configs from
tests/fixtures/hf/released (SOURCES.md there); expected lengths by hand from each file."""
import json
from pathlib import Path

import pytest

from ledger.io.hf.max_len import sglang_context_len, vllm_max_len
from test_launch_files import run

HF = Path(__file__).parent / "fixtures" / "hf" / "released"


@pytest.mark.parametrize("name,vllm,sglang", [
    ("llama-3.1-8b.json", 131072, 131072),     # llama3 rope: factor not applied
    ("deepseek-r1.json", 4096 * 40, 163840),   # vLLM: yarn's original 4096 x factor 40;
    ("kimi-k2-instruct.json", 4096 * 32, 131072),  # SGLang: the original key, factor 1
    ("qwen2.5-3b.json", 32768, 32768),
    ("phi-4-mini-instruct.json", 131072, 131072),  # longrope, no factor key
])
def test_derived_length_as_each_engine_derives_it(name, vllm, sglang):
    cfg = json.loads((HF / name).read_text())
    assert (vllm_max_len(cfg)[0], sglang_context_len(cfg)[0]) == (vllm, sglang)


def test_linear_scaling_gemma3_and_key_order_by_hand():
    linear = {"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2.0}}
    assert vllm_max_len(linear)[0] == sglang_context_len(linear)[0] == 8192
    gemma3 = {"model_type": "gemma3_text", "max_position_embeddings": 131072,
              "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
    assert (vllm_max_len(gemma3)[0], sglang_context_len(gemma3)[0]) == (131072, 8 * 131072)
    two = {"n_positions": 1024, "max_position_embeddings": 2048, "seq_length": 4096}
    assert (vllm_max_len(two)[0], sglang_context_len(two)[0]) == (1024, 4096)  # smallest; first
    layered = {"max_position_embeddings": 8192, "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 4.0},
        "sliding_attention": {"rope_type": "default"}}}
    assert vllm_max_len(layered)[0] == 32768


def test_context_beyond_the_model_is_refused_in_one_line():
    code, out, err = run("serve", str(HF / "qwen2.5-3b.json"), "--context", "40000")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--context 40000" in err and "32768" in err and "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in err
    code, out, err = run("serve", str(HF / "qwen2.5-3b.json"), "--context", "32768")
    assert code == 0, err
    code, _, err = run("serve", str(HF / "deepseek-r1.json"), "--context", "163841",
                       "--tp", "8", "--engine", "sglang")
    assert code == 2 and "163840" in err and "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("preset,config", [
    ("deepseek-v3", Path(__file__).parent / "fixtures" / "serve" / "deepseek-v3-fp8.json"),
    ("qwen3-8b", HF / "qwen3-8b.json"),
    ("qwen3-30b-a3b", HF / "qwen3-30b-a3b.json"),
])
def test_preset_lengths_are_their_releases_as_both_engines_derive_them(preset, config):
    from ledger.serve.checkpoints import PUBLISHED_MAX_LEN

    cfg = json.loads(config.read_text())
    assert PUBLISHED_MAX_LEN[preset][0] == vllm_max_len(cfg)[0] == sglang_context_len(cfg)[0]


def test_a_preset_beyond_its_release_is_refused_and_an_unnamed_release_is_not_checked():
    code, out, err = run("serve", "qwen3-8b", "--context", "40961")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--context 40961" in err and "40960" in err
    assert run("serve", "qwen3-8b", "--context", "40960")[0] == 0
    assert run("serve", "llama3-8b", "--context", "131072")[0] == 0

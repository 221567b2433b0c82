"""serve --context beyond the longest context the engine derives from a config.json is
refused as vLLM refuses it (ledger.io.hf.max_len: _get_and_verify_max_len at vllm
18ec6629): one line naming --context and both numbers, exit 2. Real configs from
tests/fixtures/hf/released (SOURCES.md there); expected lengths by hand from each file."""
import json
from pathlib import Path

import pytest

from ledger.io.hf.max_len import derived_max_len
from test_launch_files import run

HF = Path(__file__).parent / "fixtures" / "hf" / "released"


@pytest.mark.parametrize("name,length", [
    ("llama-3.1-8b.json", 131072),     # llama3 rope: factor not applied
    ("deepseek-r1.json", 4096 * 40),   # yarn: original 4096 x factor 40
    ("kimi-k2-instruct.json", 4096 * 32),
    ("qwen2.5-3b.json", 32768),
    ("phi-4-mini-instruct.json", 131072),  # longrope: not applied
])
def test_derived_length_as_vllm_derives_it(name, length):
    assert derived_max_len(json.loads((HF / name).read_text()))[0] == length


def test_linear_scaling_and_gemma3_by_hand():
    assert derived_max_len({"max_position_embeddings": 4096,
                            "rope_scaling": {"type": "linear", "factor": 2.0}})[0] == 8192
    assert derived_max_len({"model_type": "gemma3_text", "max_position_embeddings": 131072,
                            "rope_scaling": {"rope_type": "linear", "factor": 8.0}})[0] \
        == 131072
    assert derived_max_len({"n_positions": 1024, "max_position_embeddings": 2048})[0] == 1024


def test_context_beyond_the_model_is_refused_in_one_line():
    code, out, err = run("serve", str(HF / "qwen2.5-3b.json"), "--context", "40000")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--context 40000" in err and "32768" in err and "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in err
    code, out, err = run("serve", str(HF / "qwen2.5-3b.json"), "--context", "32768")
    assert code == 0, err
    code, _, err = run("serve", str(HF / "deepseek-r1.json"), "--context", "163841",
                       "--tp", "8", "--engine", "sglang")
    assert code == 2 and "163840" in err and "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN" in err

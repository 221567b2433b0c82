"""A --system file given badly: each key's wrong type or range in one line naming it, a
directory or a binary file, --gpus-per-node beside the file, any generated file never
crashing or lying, a vanishing figure refused rather than divided by."""
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_bad_input import assert_refused, run, strict_json


SYSTEM_FILES = [
    ("[]", "error: system: {p} must hold a table of keys, got a list"),
    ('{"gpu": 5}', "error: gpu: must be a GPU preset name"),
    ('{"gpu_gemm_efficiency": 5}',
     "error: gpu_gemm_efficiency: is a share of peak and must lie in (0, 1], got 5"),
    ('{"link_efficiency": 1.5}', "error: link_efficiency: is a share of peak"),
    ('{"intra_GBps": NaN}', "error: system: {p} holds NaN, which is not a number"),
    ('{"inter_GBps": 1e300}', "error: inter_GBps: must be at most 1e+09 in its unit"),
    ('{"gpus_per_node": "8"}', "error: gpus_per_node: must be an integer in 1..1,024, got '8'"),
    ('{"gpus_per_node": true}', "error: gpus_per_node: must be an integer in 1..1,024"),
    ('{"intra_GBps": [1]}', "error: intra_GBps: must be a number, got [1]"),
]


@pytest.mark.parametrize("text,line", SYSTEM_FILES)
def test_system_file_type_errors(tmp_path, text, line):
    p = tmp_path / "sys.json"
    p.write_text(text)
    argv = ["estimate", "llama3-8b", "--system", str(p)]
    code, out, err = run(argv)
    assert_refused(argv, code, out, err)
    assert err.startswith(line.format(p=p)), err


def test_system_file_that_is_a_directory_or_binary(tmp_path):
    code, out, err = run(["estimate", "llama3-8b", "--system", str(tmp_path)])
    assert code == 2 and err == f"error: system: {tmp_path} is a folder, not a regular file\n"
    p = tmp_path / "sys.json"
    p.write_bytes(bytes(range(128, 256)))
    code, out, err = run(["estimate", "llama3-8b", "--system", str(p)])
    assert code == 2 and err == (f"error: system: {p} is not UTF-8 text (byte 0x80 at "
                                   f"offset 0); JSON or TOML expected\n")


def test_gpus_per_node_and_a_system_file(tmp_path):
    p = tmp_path / "sys.json"
    p.write_text('{"gpus_per_node": 16}')
    code, _, err = run(["estimate", "llama3-8b", "--system", str(p), "--gpus-per-node", "4"])
    assert code == 2 and "given twice: --gpus-per-node 4 and 16" in err
    # the same number twice is no conflict; a file without the key takes the flag
    code, out, _ = run(["estimate", "llama3-8b", "--system", str(p), "--gpus-per-node", "16",
                        "--json"])
    assert code == 0
    p.write_text('{"gpu": "a100-80gb"}')
    code, out, _ = run(["estimate", "llama3-8b", "--tp", "8", "--system", str(p),
                        "--gpus-per-node", "4", "--json"])
    assert code == 0 and strict_json(out)["config"]["tp"] == 8


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-10**20, max_value=10**20)
    | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=6)


SYSTEM_KEYS = ["gpu", "gpus_per_node", "intra_GBps", "inter_GBps", "intra_latency_us",
               "inter_latency_us", "link_efficiency", "gpu_bf16_tflops", "gpu_fp8_tflops",
               "gpu_hbm_GiB", "gpu_hbm_TBps", "gpu_gemm_efficiency", "host_GBps",
               "host_memory_GiB", "cpu_optimizer_Gparams_per_s", "gpus_per_domain", "nvls",
               "gpu_fp4_tflops", "bogus"]


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(SYSTEM_KEYS), JSON_VALUES, max_size=4)
       | JSON_VALUES)
def test_generated_system_files_never_crash_or_lie(tmp_path, raw):
    p = tmp_path / "system.json"
    p.write_text(json.dumps(raw))  # json.dumps writes NaN/Infinity for such floats
    argv = ["estimate", "llama3-8b", "--tp", "8", "--system", str(p), "--json"]
    code, out, err = run(argv)
    if code == 2:
        assert_refused(argv, code, out, err)
        return
    assert code == 0, (raw, err)
    d = strict_json(out)
    assert 0 < d["mfu"] <= 1, (raw, d["mfu"])  # a share of peak, whatever the file says
    assert math.isfinite(d["step_time_s"]) and d["step_time_s"] > 0


@pytest.mark.parametrize("key", ["gpu_hbm_TBps", "gpu_gemm_efficiency", "gpu_bf16_tflops"])
def test_vanishing_system_figure_is_refused_not_divided_by(tmp_path, key):
    # hypothesis once found gpu_hbm_TBps = 3e-254: the GEMM efficiency underflowed to 0.0
    p = tmp_path / "system.json"
    p.write_text(json.dumps({key: 3.042723292377648e-254}))
    argv = ["estimate", "llama3-8b", "--tp", "8", "--system", str(p), "--json"]
    code, out, err = run(argv)
    assert_refused(argv, code, out, err)
    assert key in err and "at least 1e-06" in err, err

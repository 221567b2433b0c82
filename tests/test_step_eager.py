"""The routed experts' eager passes (ledger.step.eager): gpt-oss's clamped GLU and its fc2
bias, counted by hand from Megatron-Core's TEGroupedMLP (NVIDIA/Megatron-LM@55ac7082,
fusions/fused_bias_geglu.py L424-431, moe/experts.py L609-625)."""
from dataclasses import replace
from pathlib import Path

import pytest

from ledger.io.hf.reader import read_hf_config
from ledger.parallel import ParallelConfig
from ledger.step import estimate
from ledger.step.eager import expert_pass_bytes
from ledger.system import system

ROOT = Path(__file__).parents[1]


def _gpt_oss():
    model, _ = read_hf_config(ROOT / "examples" / "gpt-oss-120b.json")
    return replace(model, seq_len=4096)


def _cfg(**kw):
    return ParallelConfig(**{"tp": 1, "pp": 1, "dp": 64, "ep": 64, "micro_batch": 4,
                             "num_microbatches": 5, "zero_stage": 1, **kw})


def test_gpt_oss_reads_its_clamp_and_biases():
    m = _gpt_oss()
    assert m.glu_clamp == 7.0 and m.mlp_bias and m.gated_mlp  # swiglu_limit 7.0
    assert (m.hidden, m.moe_ffn_hidden, m.top_k) == (2880, 2880, 4)


def test_passes_counted_by_hand():
    # 4 x 4096 tokens, top-4: 65,536 routed rows on each GPU whatever the EP size (every
    # layer is MoE). Forward: 4 passes over the 2 x 2880 fc1 output (two clamps, the cat),
    # 6 over the 2880-wide fc2 output (b*p, the add, the cat); backward 5 and 6; BF16.
    fwd, bwd = expert_pass_bytes(_gpt_oss(), _cfg(), 16384)
    assert fwd == 65536 * (4 * 5760 + 6 * 2880) * 2 == 5_284_823_040
    assert bwd == 65536 * (5 * 5760 + 6 * 2880) * 2 == 6_039_797_760
    # without the clamp only the bias passes stay; without either, nothing
    fwd0, _ = expert_pass_bytes(replace(_gpt_oss(), glu_clamp=0.0), _cfg(), 16384)
    assert fwd0 == 65536 * 6 * 2880 * 2
    assert expert_pass_bytes(replace(_gpt_oss(), glu_clamp=0.0, mlp_bias=False), _cfg(),
                             16384) == (0.0, 0.0)


def test_the_passes_are_the_step_s_elementwise_time_at_hbm_bandwidth():
    gb200 = system("gb200")
    m, cfg = _gpt_oss(), _cfg()
    plain = replace(m, glu_clamp=0.0, mlp_bias=False)
    a = estimate(m, cfg, gb200, precision="bf16", optimizer="adam").breakdown["elementwise"]
    b = estimate(plain, cfg, gb200, precision="bf16", optimizer="adam").breakdown["elementwise"]
    # the biases also add saved bytes of their own to the fitted term: the passes are the
    # bulk of the difference, 36 layers x 5 micro-batches x (fwd + bwd) / HBM
    passes = 36 * 5 * (5_284_823_040 + 6_039_797_760) / gb200.gpu.hbm_bytes_per_s
    assert a - b == pytest.approx(passes, rel=0.05)

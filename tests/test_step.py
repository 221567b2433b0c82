"""The time model: FLOP formulas by hand, the published runs, systems, the CLI."""
import json

import pytest

from ledger.cli import main
from ledger.errors import LedgerError
from ledger.model import llama3_70b
from ledger.parallel import ParallelConfig
from ledger.step import (estimate, microbatches_for, model_flops_per_token,
                         recompute_flops_per_token)
from ledger.system import load_system, system
from ledger.validation import gpt, narayanan_flops, predicted, runs


def test_model_flops_is_narayanans_formula_for_gpt():
    """72 B s l h^2 (1 + s/6h + V/12lh) without recompute, 96 B s l h^2 (1 + s/6h + V/16lh)
    with full recompute (Narayanan et al. 2021 eq. 3), counting all s keys."""
    m = gpt("gpt-22b", 48, 6144, 64)
    B, s, l, h, V = 4, 2048, 48, 6144, 51200
    tokens = B * s
    assert model_flops_per_token(m, causal=False) * tokens == pytest.approx(
        72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)), rel=1e-12)
    full = model_flops_per_token(m, causal=False) + recompute_flops_per_token(m, "full", False)
    assert full * tokens == pytest.approx(narayanan_flops(m, B), rel=1e-12)


def test_causal_count_halves_only_the_attention_term():
    m = llama3_70b()
    q = m.heads * m.head_dim
    assert model_flops_per_token(m, causal=False) - model_flops_per_token(m) == \
        6 * m.layers * m.seq_len * q


@pytest.fixture(scope="module")
def validation():
    rows = []
    for r in runs():
        est = estimate(r.model, r.cfg, system(r.gpu))
        rows.append((r, predicted(r, est)))
    return rows


def _errors(rows, source=None):
    return [abs(p - r.measured) / r.measured for r, p in rows
            if source is None or r.source == source]


def test_korthikanti_rows(validation):
    """The bar: mean |error| <= 5%, max <= 12% (a published analytic model: 3.65% mean)."""
    errs = _errors(validation, "Korthikanti 2022")
    assert len(errs) == 8
    assert sum(errs) / len(errs) <= 0.05 and max(errs) <= 0.12, errs


def test_all_rows(validation):
    errs = _errors(validation)
    assert len(errs) == 21
    assert sum(errs) / len(errs) <= 0.10, errs


def test_breakdown_adds_up_and_overlap_helps():
    m = llama3_70b()
    cfg = ParallelConfig(tp=8, pp=4, dp=8, zero_stage=1, num_microbatches=16, vp=2)
    sysm = system("h100-sxm")
    est = estimate(m, cfg, sysm)
    assert sum(est.breakdown.values()) == pytest.approx(est.step_time_s)
    assert est.mfu == pytest.approx(est.tflops_per_gpu * 1e12 / 989e12)
    overlapped = estimate(m, cfg, sysm, tp_overlap=True)
    assert overlapped.breakdown["tp_comm"] < est.breakdown["tp_comm"]
    assert overlapped.step_time_s < est.step_time_s
    slower_net = estimate(m, ParallelConfig(tp=8, pp=4, dp=8, zero_stage=3, num_microbatches=16,
                                            vp=2), sysm)
    assert slower_net.memory_per_gpu_bytes < est.memory_per_gpu_bytes


def test_full_recompute_costs_time_and_saves_memory():
    m, sysm = llama3_70b(), system("a100-80gb")
    kw = dict(tp=8, pp=4, dp=2, num_microbatches=8)
    none = estimate(m, ParallelConfig(**kw), sysm)
    full = estimate(m, ParallelConfig(**kw, recompute="full"), sysm)
    assert full.step_time_s > none.step_time_s
    assert full.memory_per_gpu_bytes < none.memory_per_gpu_bytes
    assert full.hfu > full.mfu and none.hfu == none.mfu


def test_global_batch_must_divide():
    assert microbatches_for(512, 8, 2) == 32
    with pytest.raises(LedgerError, match=r"global_batch\(500\)"):
        microbatches_for(500, 8, 2)


def test_custom_system_file(tmp_path):
    p = tmp_path / "sys.toml"
    p.write_text('gpu = "a100-80gb"\ngpus_per_node = 4\ninter_GBps = 12.5\n'
                 'gpu_gemm_efficiency = 0.5\n')
    s = load_system(p)
    assert s.gpus_per_node == 4 and s.inter_bytes_per_s == 12.5e9
    assert s.gpu.gemm_efficiency == 0.5 and s.gpu.bf16_flops == 312e12
    j = tmp_path / "sys.json"
    j.write_text(json.dumps({"gpu": "h100-sxm", "intra_GBps": -1}))
    with pytest.raises(LedgerError, match="intra_GBps"):
        load_system(j)
    j.write_text(json.dumps({"gpu": "h100-sxm", "nvlink": 9}))
    with pytest.raises(LedgerError, match="unknown key 'nvlink'"):
        load_system(j)
    with pytest.raises(LedgerError, match="unknown GPU"):
        system("tpu-v5")


def test_estimate_cli_json(capsys):
    assert main(["estimate", "llama3-70b", "--tp", "8", "--pp", "4", "--gpus", "256",
                 "--zero", "1", "--global-batch", "512", "--gpu", "h100-sxm", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    for key in ("step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "hfu",
                "memory_per_gpu_bytes", "fits", "breakdown"):
        assert key in d
    assert d["num_microbatches"] == 512 // 8
    assert sum(d["breakdown"].values()) == pytest.approx(d["step_time_s"])


def test_estimate_cli_bad_gpu(capsys):
    assert main(["estimate", "llama3-70b", "--gpu", "v100"]) == 2
    assert "unknown GPU 'v100'" in capsys.readouterr().err


def test_layout_cli_seed_example(capsys):
    assert main(["layout", "--tp", "4", "--dp", "2", "--pp", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["groups"]["tp"][0] == [0, 1, 2, 3] and d["groups"]["pp"][0] == [0, 8]
    assert d["links"] == {"tp": "nvlink", "dp": "nvlink", "pp": "ib"}

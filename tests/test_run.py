"""A whole run by hand: Young's and Daly's intervals, Daly's expected wall time (and a
Monte Carlo run of the same failure process), checkpoint bytes per framework and per GPU,
Megatron's batch ramp, and days / GPU-hours / cost / energy from the printed inputs."""
import math

import numpy as np
import pytest

from ledger.config import ParallelConfig
from ledger.errors import LedgerError
from ledger.frameworks import get
from ledger.model import llama3_8b, llama3_405b
from ledger.run import (RATES, Phase, RunEstimate, RunSettings, Storage, checkpoint,
                        checkpoint_bytes, daly_interval_s, expected_wall_s, job_mtbf_s,
                        price_segment, saved_bytes_per_param, segments, young_interval_s)
from ledger.run.published import bloom_176b, opt_175b
from ledger.system import system

N8B = 8_030_261_248  # llama3-8b (test_model.py)
H100 = system("h100-sxm")
MIN, HOUR, DAY = 60.0, 3600.0, 86400.0


# ---- intervals ------------------------------------------------------------------------
@pytest.mark.parametrize("mtbf_h,published_min,young_min",
                         [(24, 117, 120.0), (6, 57, 60.0), (0.25, 9.1, 12.247)])
def test_daly_reproduces_the_optima_his_figures_print(mtbf_h, published_min, young_min):
    """Daly 2006, figs. 3-5: delta = 5 min, R = 10 min; 'The new model predicts tau_opt =
    117 min' (M = 24 h), '57 min' (6 h), '9.1 min' (15 min). Young: sqrt(2 x 5 x M)."""
    tau = daly_interval_s(5 * MIN, mtbf_h * HOUR) / MIN
    assert tau == pytest.approx(published_min, abs=0.5 if published_min > 10 else 0.05)
    assert young_interval_s(5 * MIN, mtbf_h * HOUR) / MIN == pytest.approx(young_min, abs=1e-3)


def test_daly_at_the_edge_takes_the_mtbf():
    """C >= 2M: Daly's tau = M (his eq. for delta >= 2M)."""
    assert daly_interval_s(10.0, 5.0) == 5.0


# ---- expected wall time ---------------------------------------------------------------
def test_expected_wall_by_hand():
    """T = 100 h, tau = 1 h, C = 0.1 h, R = 0.2 h, M = 10 h:
    W = 10 e^0.02 (e^0.11 - 1) 100 = 10 x 1.02020134 x 0.11627807 x 100 = 118.6265 h."""
    w = expected_wall_s(100 * HOUR, 1 * HOUR, 0.1 * HOUR, 0.2 * HOUR, 10 * HOUR)
    assert w / HOUR == pytest.approx(118.6265, abs=1e-3)


def test_no_failures_leaves_training_plus_checkpoints():
    """M -> infinity: W = T (1 + C / tau) = 100 x 1.1."""
    assert expected_wall_s(100.0, 10.0, 1.0, 5.0, 1e15) == pytest.approx(110.0, rel=1e-9)


def test_expected_wall_matches_a_simulated_failure_process():
    """An independent Monte Carlo run of the process the formula models: segments of
    tau + C, exponential failures of mean M at any time (restarts included), each
    failure losing the segment so far and costing a restart R."""
    rng = np.random.default_rng(0)
    tau, c, r, m, segs = 3.0, 0.5, 1.0, 10.0, 40
    walls = []
    for _ in range(4000):
        t = 0.0
        for _ in range(segs):
            t += _segment(rng, tau + c, r, m)
        walls.append(t)
    expected = expected_wall_s(segs * tau, tau, c, r, m)
    assert np.mean(walls) == pytest.approx(expected, rel=0.02)


def _segment(rng, length: float, restart: float, m: float) -> float:
    """Seconds to finish one segment: retry it after each failure, once the restart
    itself (which may fail too) has completed."""
    spent = 0.0
    while True:
        x = rng.exponential(m)
        if x >= length:
            return spent + length
        spent += x
        while True:  # the restart
            y = rng.exponential(m)
            if y >= restart:
                spent += restart
                break
            spent += y


def test_a_run_that_cannot_finish_is_refused():
    with pytest.raises(LedgerError, match="^failures: the job stops every 10 s"):
        expected_wall_s(1e6, 1000.0, 10.0, 600.0, 10.0)


# ---- failure rates ----------------------------------------------------------------------
def test_llama3_snapshot_rates():
    """Llama 3 sec. 3.3.4: 419 unexpected interruptions in 54 days on 16,384 H100:
    16,384 x 54 x 24 / 419 = 50,677 GPU-hours; the job: 54 x 86,400 / 419 = 11,135 s."""
    assert RATES["llama3"] / HOUR == pytest.approx(50_677, abs=1)
    assert job_mtbf_s(RATES["llama3"], 16384) == pytest.approx(11_135.1, abs=0.1)
    assert RATES["bloom"] / HOUR == 64_512  # 384 x 7 x 24
    assert RATES["opt"] / HOUR == 11_904  # 992 x 24 / 2


# ---- checkpoint bytes ---------------------------------------------------------------------
def test_bytes_per_parameter_each_framework_saves():
    """Megatron and DeepSpeed: bf16 params 2 + fp32 master 4 + two fp32 moments 8 = 14
    (BLOOM's README: '8 bytes for fp32 optim, 4+2 bytes for weights'); torchtitan's FSDP2
    fp32 shards 4 + 8 = 12; no gradients."""
    assert [saved_bytes_per_param(get(f), 1 if f != "torchtitan" else 3)
            for f in ("megatron", "deepspeed", "torchtitan", "hf")] == [14, 14, 12, 12]


def test_bloom_checkpoint_is_its_measured_size():
    """BLOOM's README: 'each checkpoint ... is 2.3TB', `du -sh` 2.3T (TiB, rounded up);
    176,247,242,752 parameters x 14 = 2.2443 TiB."""
    cfg = ParallelConfig(tp=4, pp=12, dp=8, zero_stage=1, micro_batch=2, num_microbatches=128,
                         framework="deepspeed")
    total, per_gpu = checkpoint_bytes(bloom_176b(), cfg)
    assert total == 14 * 176_247_242_752
    assert 2.2 < total / 2**40 <= 2.3


def test_opt_checkpoint_files():
    """OPT's logbook: '1.6TB of a single model checkpoint (992 files, each ~1.7GB)'. By
    hand with metaseq's fp16 weights and fp32 Adam, no master: 10 B x 174.6e9 = 1.59 TiB,
    1.76e9 B a file. The ledger's FSDP2 convention keeps fp32 shards (12 B): 20% more."""
    cfg = ParallelConfig(tp=8, dp=124, zero_stage=3, framework="torchtitan")
    total, per_gpu = checkpoint_bytes(opt_175b(), cfg)
    n = opt_175b().params
    assert total == 12 * n and per_gpu == pytest.approx(12 * n / 992)
    assert 10 * n / 2**40 == pytest.approx(1.59, abs=0.01)
    assert 10 * n / 992 == pytest.approx(1.7e9, rel=0.05)


def test_llama3_per_gpu_share_is_inside_the_published_range():
    """Llama 3 sec. 3.3.1: 'from 1 MB to 4 GB per GPU'; 405.85e9 x 14 / 16,384 = 347 MB
    (the fullest pipeline stage holds a little more)."""
    cfg = ParallelConfig(tp=8, pp=16, dp=128, zero_stage=2, num_microbatches=16, vp=8)
    total, per_gpu = checkpoint_bytes(llama3_405b(), cfg)
    assert total == 14 * 405_853_388_800
    assert total / 16384 <= per_gpu < 1.1 * total / 16384 and 1e6 < per_gpu < 4e9


def test_first_replica_writes_the_model_states():
    """DeepSpeed ZeRO-1: data-parallel rank 0 writes all bf16 weights (2 N) and its
    twelfth of the optimizer (12 N / 8); Megatron's fully parallel save spreads 14 N / 8."""
    ds = checkpoint_bytes(llama3_8b(), ParallelConfig(dp=8, zero_stage=1,
                                                      framework="deepspeed"))[1]
    mg = checkpoint_bytes(llama3_8b(), ParallelConfig(dp=8, zero_stage=1))[1]
    assert ds == pytest.approx(2 * N8B + 12 * N8B / 8) and mg == pytest.approx(14 * N8B / 8)


def test_write_copy_and_what_blocks():
    """dp = 16 on two nodes at 2 GB/s per node: a node writes 8 x 14 N / 16; an
    aggregate 10 GB/s writes 14 N; the copy to host is 14 N / 16 over PCIe Gen5 (64 GB/s
    at the system's 0.8 link efficiency); asynchronous saves block for the copy only."""
    cfg = ParallelConfig(dp=16, zero_stage=1)
    share = 14 * N8B / 16
    node = checkpoint(llama3_8b(), cfg, H100, Storage(2e9, per_node=True))
    job = checkpoint(llama3_8b(), cfg, H100, Storage(10e9, per_node=False), mode="async")
    assert node.write_s == pytest.approx(8 * share / 2e9)
    assert job.write_s == pytest.approx(14 * N8B / 10e9)
    assert node.d2h_s == pytest.approx(share / (64e9 * 0.8)) == job.d2h_s
    assert node.blocking_s == pytest.approx(node.d2h_s + node.write_s)
    assert job.blocking_s == job.d2h_s and job.load_s == job.write_s


def test_async_needs_a_framework_that_saves_asynchronously():
    with pytest.raises(LedgerError, match="^ckpt_async: ideal has no asynchronous"):
        checkpoint(llama3_8b(), ParallelConfig(dp=8, framework="ideal"), H100, mode="async")


# ---- phases -----------------------------------------------------------------------------
def test_megatrons_ramp_for_bloom():
    """--rampup-batch-size 192 16 9_765_625 to 2,048: 116 increments of 84,186.42
    samples; at 192 a step, ceil(84,186.42 / 192) = 439 steps (84,288 samples); at 208,
    ceil((168,372.84 - 84,288) / 208) = 405."""
    segs = segments(Phase(tokens=366e9, global_batch=2048, rampup=(192, 16, 9_765_625)),
                    2048, 2048)
    assert [(s.global_batch, s.steps) for s in segs[:2]] == [(192, 439), (208, 405)]
    assert len(segs) == 117 and segs[-1].global_batch == 2048
    ramp = sum(s.tokens for s in segs[:-1]) / 2048
    assert 9_765_625 <= ramp < 9_765_625 + 2032  # the last ramp step crosses the end
    assert sum(s.tokens for s in segs) == pytest.approx(366e9)


def test_phase_steps_and_refusals():
    seg = segments(Phase(tokens=1e9), 4096, 256)[0]
    assert seg.steps == math.ceil(1e9 / (256 * 4096)) == 954
    with pytest.raises(LedgerError, match="give tokens or steps"):
        Phase(tokens=1.0, steps=3)
    with pytest.raises(LedgerError, match="end inside the ramp"):
        segments(Phase(tokens=50, rampup=(2, 2, 100)), 1, 4)  # the ramp: 100 samples


# ---- a whole segment by hand ----------------------------------------------------------------
def test_a_run_by_hand():
    """llama3-8b on one node (dp = 8, ZeRO-1, 512 sequences of 8,192) for 1e12 tokens
    at a 9 s step, $2.50 a GPU-hour, PUE 1.2, defaults otherwise:
    steps = ceil(1e12 / 4,194,304) = 238,419; T = 2,145,771 s;
    C = 14 N / 1e9 (one node, 1 GB/s) + 14 N / 8 / (64e9 x 0.8); M = 182,437,209 s / 8;
    tau = round(Daly(C, M) / 9) steps; R = 600 + 14 N / 1e9;
    W = M e^(R/M) (e^((tau + C)/M) - 1) T / tau."""
    model, cfg = llama3_8b(), ParallelConfig(dp=8, zero_stage=1, num_microbatches=64)
    settings = RunSettings(pue=1.2, usd_per_gpu_hour=2.5)
    seg = segments(Phase(tokens=1e12), 8192, 512)[0]
    s = price_segment(model, cfg, H100, seg, 9.0, settings)
    c = 14 * N8B / 1e9 + 14 * N8B / 8 / (64e9 * 0.8)
    m = 16384 * 54 * DAY / 419 / 8
    x = c / (2 * m)
    tau = round((math.sqrt(2 * c * m) * (1 + math.sqrt(x) / 3 + x / 9) - c) / 9.0) * 9.0
    r = 600 + 14 * N8B / 1e9
    w = m * math.exp(r / m) * math.expm1((tau + c) / m) * 238_419 * 9.0 / tau
    assert (seg.steps, s.interval_s, s.restart_s) == (238_419, tau, pytest.approx(r))
    assert s.wall_s == pytest.approx(w, rel=1e-12)
    run = RunEstimate((s,), 700, settings)
    assert run.gpu_hours == pytest.approx(w * 8 / HOUR)
    assert run.cost_usd == pytest.approx(2.5 * w * 8 / HOUR)
    assert run.energy_mwh == pytest.approx(w * 8 / HOUR * 700 * 1.2 / 1e6)
    assert run.interruptions == pytest.approx(w / m)
    assert run.goodput == pytest.approx(238_419 * 9.0 / w)
    assert run.train_s + run.checkpointing_s + run.lost_s == pytest.approx(run.wall_s)
    assert run.checkpointing_s == pytest.approx(c * 238_419 * 9.0 / tau)


def test_energy_and_cost_of_published_totals():
    """BLOOM: 1,082,990 GPU-hours x 0.4 kW = 433,196 kWh, Luccioni et al.'s published
    figure (no PUE); DeepSeek-V3: 2,788K GPU-hours x $2 = $5.576M (Table 1)."""
    def run_of(gpu_hours, gpus, watts, price):
        seg = segments(Phase(steps=1), 2048, 1)[0]
        s = price_segment(llama3_8b(), ParallelConfig(dp=8), H100, seg, 1.0, RunSettings())
        s = type(s)(**{**s.__dict__, "gpus": gpus, "wall_s": gpu_hours * HOUR / gpus})
        return RunEstimate((s,), watts, RunSettings(usd_per_gpu_hour=price))
    assert run_of(1_082_990, 384, 400, None).energy_mwh == pytest.approx(433.196)
    assert run_of(2_788e3, 2048, 700, 2.0).cost_usd == pytest.approx(5.576e6)
    assert run_of(2_788e3, 2048, 700, None).cost_usd is None


def test_every_checkpoint_fact_has_a_source():
    from dataclasses import fields

    from ledger.frameworks import FRAMEWORKS
    from ledger.frameworks.checkpoints import SOURCES, CheckpointFormat

    facts = [f.name for f in fields(CheckpointFormat)]
    for name, fw in FRAMEWORKS.items():  # a dated version (torchtitan@2024-12): its family's
        if name != "ideal":
            assert all(SOURCES[fw.family].get(f) for f in facts), name

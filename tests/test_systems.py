"""Systems: the presets and their sources, hosts apart from NVLink domains, the links a
group crosses, NCCL's NVLS inside a domain, --system files, and the published throughput
ratios of Grace-Blackwell racks against HGX hosts of the same GPUs (Megatron-Bridge)."""
import contextlib
import io
import json
from pathlib import Path

import pytest

from ledger.cli import main
from ledger.io import load_system
from ledger.io.system import SYSTEM_KEYS
from ledger.model import deepseek_v3
from ledger.placement import Layout, place
from ledger.placement.layout import segment
from ledger.config import ParallelConfig
from ledger.step.nccl import collective_s
from ledger.system import (GPU_SOURCES, GPUS, LINK_SOURCES, POWER_SOURCES, SYSTEMS, GiB,
                           MiB, system)

ROOT = Path(__file__).resolve().parents[1]
NEW = ("b300", "gb200", "gb300", "mi325x", "mi355x", "h20", "l40s", "l4", "rtx-pro-6000")


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_every_preset_has_its_sources_and_gpus_lists_them():
    assert set(NEW) <= set(GPUS)
    assert set(GPUS) == set(SYSTEMS) == set(GPU_SOURCES) == set(POWER_SOURCES) \
        == set(LINK_SOURCES)
    code, out, _ = cli("gpus")
    assert code == 0
    sources = out[out.index("sources:"):]
    for name in GPUS:
        block = sources[sources.index(f"\n  {name}\n"):]
        assert block.split("\n")[2].startswith("    chip:   " + GPU_SOURCES[name][:40])
    code, out, _ = cli("gpus", "--json")
    rows = {g["name"]: g for g in json.loads(out)}
    assert all(rows[n]["system_source"] == LINK_SOURCES[n] for n in GPUS)


def test_the_nvl72_racks_as_their_mlperf_system_files_give_them():
    # mlcommons/training_results_v5.1 @ 4da2d1cd NVIDIA/systems/tyche_ngpu72 (GB200) and
    # theia_ngpu72 (GB300): 18 nodes of 4, 189471 / 284208 MiB, 4x ConnectX-7 400 Gb/s /
    # 4x ConnectX-8 800 Gb/s a node; MLPerf v5.1 inference: 960 GB host memory a node,
    # TGP 1200 / 1400 W. NVIDIA GB200 / GB300 NVL72 datasheets: 2.5 PFLOP/s BF16 dense,
    # FP4 10 / 15 PFLOP/s dense, NVLink 1.8 TB/s both directions.
    for name, mib, nic_gbit, fp4, watts in (("gb200", 189471, 400, 10e15, 1200),
                                            ("gb300", 284208, 800, 15e15, 1400)):
        s = system(name)
        assert (s.gpus_per_node, s.gpus_per_domain) == (4, 72)
        assert s.gpu.hbm_bytes == mib * MiB and s.gpu.bf16_flops == 2.5e15
        assert s.gpu.fp4_flops == fp4 and s.gpu.board_power_w == watts
        assert s.inter_bytes_per_s == nic_gbit * 1e9 / 8  # one NIC per GPU
        assert s.intra_bytes_per_s == 900e9 and s.nvls
        assert s.host_memory_bytes == 960e9  # per host of 4, not per rack
    b300 = system("b300")  # DGX B300 MLPerf: 8 a node, 2 TB host, 1100 W; HGX B300: FP4 105/8 PF
    assert (b300.gpus_per_node, b300.gpus_per_domain, b300.gpu.board_power_w) == (8, 8, 1100)
    assert b300.host_memory_bytes == 2048 * GiB and b300.gpu.fp4_flops == 13.125e15


def test_a_job_fills_its_domains_in_segments_of_whole_hosts():
    # Megatron-Bridge executors.py L168-177: --segment = nodes up to 18, else the largest
    # divisor of the nodes up to 18 (hosts of 4: 72 GPUs a rack)
    assert segment(256, 4, 72) == 64  # 64 hosts: segments of 16
    assert segment(288, 4, 72) == 72 and segment(144, 4, 72) == 72
    assert segment(96, 4, 72) == 48  # 24 hosts: 12 divides 24, 18 does not
    assert segment(40, 4, 72) == 40  # one rack holds the job
    assert segment(1024, 8, 8) == 8  # a DGX: the domain is the host
    with pytest.raises(Exception, match="gpus_per_domain"):
        Layout(tp=2, gpus_per_node=8, gpus_per_domain=36)


def test_deepseek_v3_ep64_on_256_gb200_is_priced_at_nvlink():
    """Megatron-Bridge's DeepSeek-V3 on 256 GB200 (performance-summary.md, 26.08: TP 1,
    PP 4, EP 64): the EP groups are 64 consecutive ranks, one 64-GPU segment of a rack,
    so every routed token rides NVLink; the same GPUs counted as 4-GPU hosts without the
    rack cross hosts on the NICs."""
    model = deepseek_v3()
    cfg = ParallelConfig(tp=1, pp=4, dp=64, ep=64, zero_stage=1, micro_batch=1,
                         num_microbatches=64)  # the experts come from the ModelSpec
    rack, trays = system("gb200"), system("gb200", gpus_per_domain=4)
    on = place(model, cfg, gpus_per_node=4, gpus_per_domain=rack.gpus_per_domain)
    off = place(model, cfg, gpus_per_node=4, gpus_per_domain=4)
    ep_on = {c.link for c in on.comms if c.axis == "ep"}
    ep_off = {c.link for c in off.comms if c.axis == "ep"}
    assert ep_on == {"nvlink"} and "ib" in ep_off
    assert {c.link for c in on.comms if c.axis == "pp"} == {"ib"}  # 4 segments apart
    argv = ["estimate", "deepseek-v3", "--gpus", "256", "--pp", "4", "--ep", "64",
            "--zero", "1", "--global-batch", "4096", "--seq", "4096", "--json"]
    on_json = json.loads(cli(*argv, "--gpu", "gb200")[1])
    assert on_json["nvlink_domains"] == {"gpus_per_node": 4, "gpus_per_domain": 72,
                                         "domain": 64, "links": {"ep": "nvlink", "dp": "nvlink",
                                                                 "pp": "ib"}}
    t_on = on_json["breakdown"].get("ep_comm", 0.0)
    t_off = json.loads(cli(*argv, "--gpu", "gb200", "--gpus-per-domain", "4")[1])[
        "breakdown"]["ep_comm"]
    # NVLink 900 GB/s against one 400 Gb/s NIC per GPU: 18x the bandwidth
    assert t_on < t_off / 4
    assert trays.intra_bytes_per_s / trays.inter_bytes_per_s == 18
    code, out, _ = cli(*argv[:-1], "--gpu", "gb200")
    assert "NVLink domains      256 GPUs (64 hosts of 4 in 4 NVLink domain(s) of 64)" in out
    assert "[nvlink ep dp; nics pp]" in out


def test_host_memory_and_offload_are_per_host_not_per_rack():
    """CPU offload fills the memory of the host a GPU sits in: 4 GPUs' optimizer state on
    a GB200 tray's 960 GB, whatever the NVLink domain spans."""
    model = deepseek_v3()
    cfg = ParallelConfig(tp=1, pp=4, dp=64, ep=64, zero_stage=3, framework="deepspeed",
                         offload="optimizer")
    tray = place(model, cfg, gpus_per_node=4, gpus_per_domain=72).host_bytes_per_node
    assert tray > 0
    assert place(model, cfg, gpus_per_node=4, gpus_per_domain=4).host_bytes_per_node == tray
    assert place(model, cfg, gpus_per_node=8, gpus_per_domain=72).host_bytes_per_node == \
        pytest.approx(2 * tray)
    assert system("gb200").host_memory_bytes == 960e9  # per host, not per rack


def test_nvls_inside_one_domain_as_nccls_tuning_model_prices_it():
    """tuning.cc @ 5067397c: NVLS all-reduce bus bandwidth = 2 x nvlsEfficiency (Blackwell
    0.74) x the NVLink's, latency 25 us; reduce-scatter / all-gather x (n-1)/n over the
    whole payload; never across domains."""
    n, bw, payload = 8, 720e9, 1 << 30
    wire = 2 * payload * (n - 1) / n
    nvls = collective_s("all_reduce", wire, n, 1, bw, "blackwell", nvls=True)
    assert nvls == pytest.approx(25e-6 + wire / (2 * 0.74 * bw))
    ring = collective_s("all_reduce", wire, n, 1, bw, "blackwell")
    assert nvls < ring
    across = collective_s("all_reduce", wire * 8 / 7 * 63 / 64, 64, 8, bw, "blackwell",
                          nvls=True)
    assert across == collective_s("all_reduce", wire * 8 / 7 * 63 / 64, 64, 8, bw,
                                  "blackwell")
    ag = payload * (n - 1) / n
    assert collective_s("all_gather", ag, n, 1, bw, "blackwell", nvls=True) == \
        collective_s("all_gather", ag, n, 1, bw, "blackwell")  # the ring's 1.0 x bw wins


def test_every_system_file_key_is_documented_and_the_example_loads(tmp_path):
    doc = (ROOT / "docs/systems.md").read_text(encoding="utf-8")
    assert [k for k in SYSTEM_KEYS if f"`{k}`" not in doc] == []
    s = load_system(ROOT / "examples/gb200-nvl36.toml")
    assert (s.gpu.name, s.gpus_per_node, s.gpus_per_domain, s.nvls) == ("gb200", 4, 36, True)
    p = tmp_path / "rack.toml"
    p.write_text('gpu = "gb200"\ngpus_per_domain = 36\n')
    code, _, err = cli("layout", "--system", str(p), "--tp", "4", "--gpus-per-domain", "72")
    assert code == 2 and "gpus_per_domain: given twice: --gpus-per-domain 72 and 36" in err
    p.write_text('gpu = "b200"\ngpus_per_domain = 12\n')
    code, _, err = cli("estimate", "llama3-8b", "--gpus", "8", "--system", str(p))
    assert code == 2 and "a domain is whole hosts" in err
    p.write_text('gpu = "b200"\nnvls = "yes"\n')
    code, _, err = cli("estimate", "llama3-8b", "--gpus", "8", "--system", str(p))
    assert code == 2 and "nvls: must be true or false" in err


def test_gpu_memory_alone_is_refused_where_the_chip_prices_time():
    base = ["llama3-8b", "--gpus", "8", "--gpu-memory", "80"]
    code, _, err = cli("estimate", *base)
    assert code == 2 and err.count("\n") == 1 and "989 TFLOP/s" in err and "--gpu NAME" in err
    assert cli("estimate", *base, "--gpu", "l40s")[0] == 0  # named: its peaks, this memory
    assert cli("report", *base)[0] == 0  # memory only


# The published rack / HGX ratios at equal GPU count, on one rule: every pair of the
# Megatron-Bridge data file's rows (ledger.validation.bridge, the table line and recipe of
# each) that benchmarks/bridge.py prints - a rack GPU's row and its HGX twin's (GB200 /
# B200, GB300 / B300) in one release with the same model, precision and GPU count, each
# run at its own published placement by ledger.render.bridge's one rule, the side with two
# rows taking the one at the other's GBS (ledger.render.bridge_pairs.ratios).
def _pairs(kind=None):
    from ledger.render.bridge import outcomes, ratios

    return [p for p in ratios(list(outcomes())) if kind is None or p[1] == kind]


def test_the_rule_pairs_the_data_files_rows():
    from ledger.validation.bridge import rows

    got = {(label, pair): pub for label, pair, pub, _ in _pairs()}
    every = {r.id: r.tokens_per_s_per_gpu for r in rows()}
    # the archive's lines 235 / 237 and 516 / 518 (26.04.01 and 26.02 gpt-oss-120b)
    assert got[("26.04.01 gpt-oss-120b bf16 64g", "gb200/b200")] == pytest.approx(
        every["26.04.01/gb200/gpt-oss-120b/bf16/64g/gbs1280/mbs4"]
        / every["26.04.01/b200/gpt-oss-120b/bf16/64g/gbs1280/mbs4"]) == pytest.approx(16640 / 13568)
    assert got[("26.02 gpt-oss-120b bf16 64g", "gb300/b300")] == pytest.approx(19412 / 8359)
    # 26.06's DeepSeek-V3 on GB300 publishes GBS 4096 and 15360; B300's 4096 is the twin
    assert got[("26.06 deepseek-v3 fp8_mx 256g", "gb300/b300")] == pytest.approx(6338 / 3541)
    kinds = {pair for _, pair in got}
    assert kinds == {"gb200/b200", "gb300/b300"}
    for label, pair in got:  # every pair is one release, model, precision and GPU count
        rel, model, prec, gpus = label.split()
        rack, hgx = pair.split("/")
        for gpu in (rack, hgx):
            assert any(i.startswith(f"{rel}/{gpu}/{model}/{prec}/{gpus}/") for i in every)


def _bar(kind):
    pairs = _pairs(kind)
    right = [p for p in pairs if (p[2] - 1) * (p[3] - 1) > 0]
    within = [p for p in pairs if abs(p[3] / p[2] - 1) <= 0.15]
    return pairs, right, within


def test_gb300_over_b300_has_the_published_direction_in_every_pair():
    pairs, right, _ = _bar("gb300/b300")
    assert len(pairs) >= 20 and len(right) == len(pairs), \
        [p for p in pairs if p not in right]


@pytest.mark.xfail(strict=True, reason="measured (benchmarks/bridge.py): GB300/B300 29 "
                   "pairs, 29 in the right direction, 28 within 15% (mean |error| 7.6%); "
                   "the miss: Nemotron 3 Super NVFP4 26.06 on the rack too fast against "
                   "the HGX host (+20.5%)")
def test_gb300_over_b300_within_15_percent_in_every_pair():
    pairs, right, within = _bar("gb300/b300")
    assert len(right) == len(within) == len(pairs)


@pytest.mark.xfail(strict=True, reason="measured (benchmarks/bridge.py): GB200/B200 33 "
                   "pairs, 28 in the right direction, 21 within 15% (mean |error| 14.4%): "
                   "each miss is one side's own row error (issue 32) - B200's Qwen3 at MBS 1 "
                   "priced host-bound (Qwen3-30B +32..+39%, Qwen3-235B +22..+55% on the "
                   "ratio), Nemotron 3 Super MXFP8 (+23% / +25%), DeepSeek-V3 25.11 (-25%) "
                   "and 26.04.01 (-16%: its rack rows 7-15% too slow), the 25.09 405B MXFP8 "
                   "pair (+24%) "
                   "and 25.09 Qwen3-30B (-16%); three Qwen3-30B pairs the tables put at "
                   "0.96-0.99 are priced 1.018 (26.02.01, 26.04, 26.04.01); gpt-oss 25.11 is "
                   "+1% at its B200 recipe's EP 64")
def test_gb200_over_b200_right_direction_and_within_15_percent_in_every_pair():
    pairs, right, within = _bar("gb200/b200")
    assert len(right) == len(within) == len(pairs)


if __name__ == "__main__":  # the pairs as docs/systems.md quotes them
    from ledger.render.bridge import outcomes, ratio_lines

    print("\n".join(ratio_lines(list(outcomes()))))

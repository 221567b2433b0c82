"""The alltoall dispatcher's NCCL all-to-all at the rate nccl-tests measure it
(ledger.system.A2A, sources in ledger.system.A2A_SOURCES); flex's kernels at the link's
inside a domain and at their own benchmarks' rate across NICs (tests/test_flex_rate.py). Expected values are the sources' figures and hand arithmetic, written out."""
from dataclasses import replace

import pytest

from ledger.model import deepseek_v3
from ledger.parallel import ParallelConfig
from ledger.placement import Layout
from ledger.step.layer_comms import ep_time
from ledger.system import A2A, A2A_SOURCES, system


def test_all_to_all_runs_at_the_published_busbw():
    # sjeaugey, nccl-tests #212: 370 of 450 GB/s on H100's NVLink for non-allreduce ops;
    # OCI's alltoall_perf: HGX B300 675.55, 64 GB200 622.92, 64 GB300 666.92 GB/s busbw;
    # 3 GB200 racks 62.49 GB/s busbw = 62.49 x 2/3 = 41.66 GB/s a GPU's NIC
    assert system("h100-sxm").a2a_bandwidth("nvlink") == pytest.approx(370e9)
    assert system("b300").a2a_bandwidth("nvlink") == pytest.approx(675.55e9)
    assert system("b200").a2a_bandwidth("nvlink") == pytest.approx(675.55e9)
    assert system("gb200").a2a_bandwidth("nvlink") == pytest.approx(622.92e9)
    assert system("gb300").a2a_bandwidth("nvlink") == pytest.approx(666.92e9)
    assert system("h100-sxm").a2a_bandwidth("ib") == pytest.approx(41.66e9)
    assert system("gb200").a2a_bandwidth("ib") == pytest.approx(41.66e9)
    # no figure taken: the collectives' link efficiency (0.8 of 100 GB/s; 0.8 of 448)
    assert system("gb300").a2a_bandwidth("ib") == pytest.approx(80e9)
    assert system("mi300x").a2a_bandwidth("nvlink") == pytest.approx(0.8 * 448e9)


def test_every_figure_names_its_source():
    assert set(A2A) == set(A2A_SOURCES)
    for name, (intra, _) in A2A.items():
        nominal = system(name).intra_bytes_per_s
        assert f"{intra * nominal / 1e9:g}" in A2A_SOURCES[name]


def test_alltoall_dispatcher_priced_at_nccls_rate_flex_at_the_links():
    """DeepSeek-V3, EP 64 over 8 HGX H100 hosts, one direction of one MoE layer: the
    dispatch and the combine of 4096 x 8 rows of 7168 bf16 values, 939,524,096 bytes, of
    which 56/64 cross the NICs and 7/64 stay in the host; one call of 63 hops on each
    link (10 and 5 us), the two links at once: the NICs' share bounds it (nccl-tests
    #130); 58 MoE layers of 61."""
    m = deepseek_v3()
    links = {"layout": Layout(pp=16, dp=128, ep=64), "ep": "ib"}
    cfg = ParallelConfig(pp=16, dp=128, ep=64, moe_dispatcher="alltoall")
    h100 = system("h100-sxm")
    rows = 2 * 4096 * 8 * 7168 * 2
    nic, nvl = rows * 56 / 64 / 41.66e9 + 63 * 10e-6, rows * 7 / 64 / 370e9 + 63 * 5e-6
    assert nic > nvl
    assert ep_time(m, cfg, 4096, links, h100) == pytest.approx(nic * 58 / 61, rel=1e-4)
    # without a measured figure, the links' 0.8 of 50 and of 450 GB/s
    plain = replace(h100, a2a_intra_efficiency=None, a2a_inter_efficiency=None)
    was = (rows * 56 / 64 / 40e9 + 63 * 10e-6) * 58 / 61
    assert ep_time(m, cfg, 4096, links, plain) == pytest.approx(was, rel=1e-4)
    # inside one host nothing crosses the NICs: the NVLink call alone, as before
    one = {"layout": Layout(pp=16, dp=8, ep=8), "ep": "nvlink"}
    cfg8 = replace(cfg, dp=8, ep=8)
    host = (rows * 7 / 8 / 370e9 + 7 * 5e-6) * 58 / 61
    assert ep_time(m, cfg8, 4096, one, h100) == pytest.approx(host, rel=1e-4)
    flex = replace(cfg, moe_dispatcher="flex")
    assert ep_time(m, flex, 4096, links, h100) == ep_time(m, flex, 4096, links, plain)


def test_a_share_over_one_is_refused():
    from ledger.errors import LedgerError

    with pytest.raises(LedgerError, match="a2a_intra_efficiency"):
        replace(system("b200"), a2a_intra_efficiency=1.2)


def test_a_system_file_that_sets_a_link_drops_its_measured_share(tmp_path):
    """The measured shares belong to the preset's links as measured: a --system file that
    sets NVLink's rate or the links' efficiency prices that all-to-all at link_efficiency
    (0.9 x 900 GB/s; 0.8 x 450); one that leaves the links keeps 675.55 GB/s."""
    from ledger.io.system import load_system

    def load(text):
        f = tmp_path / "s.toml"
        f.write_text('gpu = "b200"\n' + text)
        return load_system(f)

    assert load("link_efficiency = 0.9\n").a2a_bandwidth("nvlink") == pytest.approx(810e9)
    assert load("link_efficiency = 0.9\n").a2a_bandwidth("ib") == pytest.approx(45e9)
    assert load("intra_GBps = 450\n").a2a_bandwidth("nvlink") == pytest.approx(360e9)
    assert load("intra_GBps = 450\n").a2a_bandwidth("ib") == pytest.approx(41.66e9)
    assert load("host_GBps = 32\n").a2a_bandwidth("nvlink") == pytest.approx(675.55e9)

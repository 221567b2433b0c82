"""The flex dispatcher across NICs (ledger.step.layer_comms.flex_across_nics_s) held to
the kernels' own published benchmarks (ledger.system.FLEX_INTER, sources in
FLEX_SOURCES). Expected values are the sources' figures and hand arithmetic, written out."""
from dataclasses import replace
from math import comb

import pytest

from ledger.model import deepseek_v3
from ledger.parallel import ParallelConfig
from ledger.placement import Layout
from ledger.step.layer_comms import ep_time
from ledger.system import FLEX_INTER, FLEX_INTRA, FLEX_SOURCES, system


def test_shares_are_the_benchmarks_figures():
    # logical RDMA GB/s x (N - 1)/N over a 50 GB/s NIC: DeepEP EP 32 and 64 on H800,
    # HybridEP EP 16 / 32 / 64 on H100 at 8 SMs
    deepep = (58 * 3 / 4 + 57 * 3 / 4 + 51 * 7 / 8 + 50 * 7 / 8) / 4 / 50
    # HybridEP's kernel-only figures, its dispatch's bytes with the fp32 probs of the 64
    # experts on a node's 8 GPUs
    p = 1 + 64 * 4 / 14336
    hybridep = (76.80 * p / 2 + 68.00 / 2 + 54.50 * p * 3 / 4 + 56.40 * 3 / 4
                + 50.55 * p * 7 / 8 + 51.03 * 7 / 8) / 6 / 50
    assert FLEX_INTER["deepep"] == pytest.approx(deepep) == pytest.approx(0.8731, abs=1e-4)
    assert FLEX_INTER["hybridep"] == pytest.approx(hybridep) == pytest.approx(0.8222, abs=1e-4)
    assert set(FLEX_INTER) == set(FLEX_SOURCES)
    for figure in ("58 / 57", "51 / 50", "43 / 43"):
        assert figure in FLEX_SOURCES["deepep"]
    for figure in ("76.80 / 68.00", "54.50 / 56.40", "50.55 / 51.03"):
        assert figure in FLEX_SOURCES["hybridep"]


def _deepep_case(ep):
    """DeepEP's internode benchmark (docs/legacy.md L19: 4096 tokens, hidden 7168, top-8
    of 256 experts, top-4 of one group per node) on 8-GPU H800 hosts, BF16 on the wire:
    the ledger's one direction (dispatch + combine) over two calls."""
    nodes = ep // 8
    m = replace(deepseek_v3(), router_groups=nodes, router_group_topk=min(nodes, 4))
    links = {"layout": Layout(dp=ep, ep=ep), "ep": "ib"}
    cfg = ParallelConfig(dp=ep, ep=ep, moe_dispatcher="flex", act_bytes=2)
    t = ep_time(m, cfg, 4096, links, system("h800")) * m.layers / m.moe_layers
    return nodes, t / 2  # one call


@pytest.mark.parametrize("ep, measured_gb_s", [(16, 43), (32, 57), (64, 50)])
def test_deepep_benchmark_reproduced(ep, measured_gb_s):
    """DeepEP's BF16 combine, logical GB/s (docs/legacy.md L24-26): its time is the
    nodes a token reaches (its own included) x 4096 x 7168 x 2 bytes over that rate. Its
    routing (tests/test_internode.py L40-44 @2be0d4f8) picks min(N, 4) of the N node
    groups by their best expert's score, then the top 8 of their experts: at N <= 4 every
    group, so N x (1 - C(256 - 256/N, 8) / C(256, 8)) nodes; at N = 8 each of the 4 groups
    picked holds its best expert, which stays among the 8 (3.98 nodes a token, simulated
    with its routing): 4. EP 32 and 64 set DeepEP's NIC share (ledger.system.FLEX_INTER):
    for them this checks the fit (within 2%); EP 16, NVLink-bound, is held out (-5.2%)."""
    nodes, t = _deepep_case(ep)
    hit = nodes * (1 - comb(256 - 256 // nodes, 8) / comb(256, 8)) if nodes <= 4 else 4
    want = hit * 4096 * 7168 * 2 / (measured_gb_s * 1e9)
    assert t == pytest.approx(want, rel=0.06 if ep == 16 else 0.02)


def test_the_two_links_pipeline_and_the_backend_sets_the_nic_share():
    """EP 32 on H100 (2 nodes' worth of forwarded rows well under the NIC's): DeepEP's
    time is the NIC's, HybridEP's the same bytes at its lower share; inside one host
    (EP 8) no NIC is crossed and the link's rate stands as it was."""
    m = deepseek_v3()
    links = {"layout": Layout(pp=16, dp=32, ep=32), "ep": "ib"}
    cfg = ParallelConfig(pp=16, dp=32, ep=32, moe_dispatcher="flex", act_bytes=2)
    h100 = system("h100-sxm")
    deep = ep_time(m, cfg, 4096, links, h100)
    hyb = ep_time(m, replace(cfg, ep_backend="hybridep"), 4096, links, h100)
    # 4 nodes, at most 4 of 8 groups: remote nodes 3.14 x 3/4; 2 x 4096 x 7168 x 2 bytes
    hit = 4 * (1 - comb(6, 4) / comb(8, 4))
    ib = hit * 3 / 4 * 2 * 4096 * 7168 * 2
    assert deep == pytest.approx((ib / (50e9 * FLEX_INTER["deepep"]) + 2 * 10e-6) * 58 / 61,
                                 rel=1e-6)
    # HybridEP's IB copies also carry the fp32 probs of the 64 experts on a node's 8 GPUs,
    # in half the passes (forward dispatch, backward combine): 7168 x 2 + 64 x 4 / 2 bytes
    ib_h = hit * 3 / 4 * 2 * 4096 * (7168 * 2 + 64 * 4 / 2)
    assert hyb == pytest.approx((ib_h / (50e9 * FLEX_INTER["hybridep"]) + 2 * 10e-6) * 58 / 61,
                                rel=1e-6)
    one = {"layout": Layout(pp=16, dp=8, ep=8), "ep": "nvlink"}
    cfg8 = ParallelConfig(pp=16, dp=8, ep=8, moe_dispatcher="flex", act_bytes=2)
    rows = 2 * 4096 * 8 * 7 / 8 * 7168 * 2  # forwarded to the other 7 GPUs of the host
    assert ep_time(m, cfg8, 4096, one, h100) == pytest.approx(
        (rows / 360e9 + 7 * 5e-6) * 58 / 61, rel=1e-6)


@pytest.mark.parametrize("ep, dispatch_gb_s, combine_gb_s",
                         [(16, 76.80, 68.00), (32, 54.50, 56.40), (64, 50.55, 51.03)])
def test_hybridep_benchmark_within_its_spread(ep, dispatch_gb_s, combine_gb_s):
    """HybridEP's H100 table (docs/README_Hybrid-EP.md L55-77 @94a9f8f6: 4096 tokens,
    hidden 7168, top 8 of 8 experts a rank, uniform routing, 8 SMs, BF16, kernel only):
    one share for the three EP sizes, each within 20%. The share is the mean of these
    three rows (ledger.system.FLEX_INTER): this checks the fit's spread, not a
    prediction."""
    nodes, experts = ep // 8, 8 * ep
    m = replace(deepseek_v3(), num_experts=experts, router_groups=0, router_group_topk=0)
    links = {"layout": Layout(dp=ep, ep=ep), "ep": "ib"}
    cfg = ParallelConfig(dp=ep, ep=ep, moe_dispatcher="flex", act_bytes=2,
                         ep_backend="hybridep")
    t = ep_time(m, cfg, 4096, links, system("h100-sxm")) * m.layers / m.moe_layers
    hit = nodes * (1 - comb(experts - experts // nodes, 8) / comb(experts, 8))
    logical = hit * 4096 * 7168 * 2
    want = logical / (dispatch_gb_s * 1e9) + logical / (combine_gb_s * 1e9)
    assert abs(t / want - 1) <= 0.20


def test_hybridep_sends_a_token_once_per_gpu_inside_the_domain():
    """HybridEP inside one NVLink domain: one copy of a token per other GPU its experts sit
    on, not one per expert (deepseek-ai/DeepEP hybrid-ep 94a9f8f6, csrc/hybrid_ep/backend/
    hybrid_ep_backend.cuh L1619-1637: a TMA store per rank that needs the token), and the
    forward dispatch / backward combine carry the fp32 probs of every expert on the
    domain's ranks (L1639-1645, L4546). DeepSeek-V3 (256 experts, top-8, 4 of 8 groups):
    at EP 8 a GPU holds one group, so a token reaches exactly 4 GPUs, 4 x 7/8 of them
    another; at EP 64 (each group on 8 GPUs, 4 experts a GPU) a token's 8 experts fall
    among the 4 chosen groups' 128 experts on 32 GPUs: 32 x (1 - C(124, 8) / C(128, 8))."""
    from ledger.placement import ep_pass_comms

    m = deepseek_v3()
    for ep, hit in ((8, 4.0), (64, 32 * (1 - comb(124, 8) / comb(128, 8)))):
        lay = Layout(dp=ep, ep=ep, gpus_per_node=4, gpus_per_domain=72)
        cfg = ParallelConfig(dp=ep, ep=ep, moe_dispatcher="flex", ep_backend="hybridep",
                             act_bytes=2)
        rows = ep_pass_comms(m, cfg, 4096, lay)
        copy = 7168 * 2 + 256 * 4 / 2  # the probs of all 256 experts, half the passes
        assert sum(r.bytes for r in rows if r.link == "ib") == 0
        nvl = sum(r.bytes for r in rows if r.link == "nvlink")
        assert nvl == pytest.approx(2 * 4096 * hit * (ep - 1) / ep * copy, rel=1e-9)
        deepep = ep_pass_comms(m, replace(cfg, ep_backend="deepep"), 4096, lay)
        assert sum(r.bytes for r in deepep) == pytest.approx(
            2 * 4096 * 8 * (ep - 1) / ep * 7168 * 2, rel=1e-9)  # per (token, expert) row


def test_hybridep_in_domain_share_is_its_benchmarks_kernel_rate():
    """HybridEP inside an NVLink domain (ledger.system.FLEX_INTRA): GB200, 32 SMs, kernel
    only, BF16 dispatch / combine 'algorithm bandwidth' (README_Hybrid-EP.md L127-135 at
    deepseek-ai/DeepEP hybrid-ep 94a9f8f6): a rank's received tokens x 7168 x 2 B over the
    time, its own included, so the link carries (L - 1)/L; the dispatch also carried
    8 x L fp32 probs a copy. Averaged over the 10 figures, over GB200's 900 GB/s."""
    figures = {8: (764.03, 737.13), 16: (706.95, 666.26), 24: (665.97, 639.80),
               32: (642.23, 605.15), 36: (632.31, 596.99)}
    link = [d * (1 + 8 * n * 4 / 14336) * (n - 1) / n for n, (d, c) in figures.items()] \
        + [c * (n - 1) / n for n, (d, c) in figures.items()]
    assert FLEX_INTRA["hybridep"] == pytest.approx(sum(link) / 10 / 900) \
        == pytest.approx(0.7133, abs=1e-4)
    for figure in ("764.03 / 737.13", "632.31 / 596.99"):
        assert figure in FLEX_SOURCES["hybridep"]


def test_hybridep_in_domain_is_one_kernel_a_call():
    """Inside one domain HybridEP's dispatch and combine are one kernel each: the bytes at
    FLEX_INTRA x the NVLink's nominal rate plus one NVLink latency a call, not ep - 1 hops.
    GB200 EP 64, DeepSeek-V3: a token's 8 experts on 32 x (1 - C(124, 8) / C(128, 8)) GPUs,
    63/64 of them another, each copy 7168 x 2 B plus the 256 experts' fp32 probs in half
    the passes."""
    m = deepseek_v3()
    ep = 64
    lay = Layout(dp=ep, ep=ep, gpus_per_node=4, gpus_per_domain=72)
    cfg = ParallelConfig(dp=ep, ep=ep, moe_dispatcher="flex", ep_backend="hybridep",
                         act_bytes=2)
    hit = 32 * (1 - comb(124, 8) / comb(128, 8))
    nvl = 2 * 4096 * hit * 63 / 64 * (7168 * 2 + 256 * 4 / 2)
    t = ep_time(m, cfg, 4096, {"layout": lay, "ep": "nvlink"}, system("gb200"))
    assert t == pytest.approx((nvl / (900e9 * FLEX_INTRA["hybridep"]) + 2 * 5e-6) * 58 / 61,
                              rel=1e-9)


def test_hybridep_in_domain_share_holds_on_hgx_b200():
    """Held out: HybridEP's one HGX figure, 8 x B200 at 16 SMs, kernel only, BF16 dispatch /
    combine 734.95 / 673.84 GB/s algbw (README_Hybrid-EP.md L104 at deepseek-ai/DeepEP
    hybrid-ep 94a9f8f6; the 8 x 8 experts' probs on the dispatch), 7/8 of it on the link,
    over 900 GB/s: 0.69 against the GB200 rack's 0.71 taken for every NVLink."""
    b200 = (734.95 * (1 + 64 * 4 / 14336) + 673.84) / 2 * 7 / 8 / 900
    assert b200 == pytest.approx(FLEX_INTRA["hybridep"], rel=0.05)

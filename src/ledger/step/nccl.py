"""One collective call in seconds, as NCCL prices it: latency by algorithm and protocol,
chosen by the least predicted time, and the bandwidth of a group that spans nodes.

NCCL picks (algorithm, protocol) per call from its own cost model, ``ncclTopoTuneModel``
and ``ncclTopoGetAlgoTime`` in src/graph/tuning.cc (NVIDIA/nccl 5067397c, NCCL 2.30.7;
enqueue.cc L2028-2044 takes the least time). Its latencies, in microseconds:

- ring (all-reduce, reduce-scatter, all-gather): ``base + (steps - inter) * intra + inter
  * net``, steps = 2(n - 1) for an all-reduce and n - 1 otherwise, ``inter`` the steps
  that cross nodes, 2(N - 1) or N - 1 over N nodes (L404-412); across nodes a step inside
  one costs at least the network post overhead, 1 us on an Intel host, x3 for Simple
  (L228-233, L406-409). Linear in the group.
- tree (all-reduce only): ``base + 2 ((n / N - 1) intra + log2(N) net)`` (L415-417):
  logarithmic in the nodes.
- PAT (reduce-scatter and all-gather with one rank per node only, L220):
  ``base + log2(N) net / 3.5 + 2.8 n`` (L429-434).

On a system whose NVSwitches reduce in the switch (NVLink SHARP, ``System.nvls``), NCCL
also weighs its NVLS algorithm (Simple only, L301) for a group inside one NVLink domain:
latency 25 us (hwLatencies[NVLINK][NVLS], base 0, L423-425), bus bandwidth the NVLink's x
``NVLS_EFFICIENCY`` of the generation (L138-143, L307-313) - twice that for an all-reduce,
which pipelines its reduce and its broadcast, and x (n - 1) / n for a reduce-scatter or
all-gather, with no algorithm-bandwidth conversion for those (L376-381); the channel
factor (nChannels - 1) / nChannels is left out. Across domains NCCL would run NVLS-tree
(all-reduce only): not modelled. Under MNNVL NCCL's node is the NVLink domain (init.cc
L878: nNvlDomains = nNodes): ``nodes`` below counts domains.

The network latency is the tree's when every node holds one rank (L387-389: "With ppn=1
latencies are fully exposed"); InfiniBand adds none of its own (net_ib/init.cc L558). A
multi-node Simple ring all-reduce pays its latency x1.4 (L650-652, the ring's plateau on
Ampere and later). Bandwidth relative to a Simple ring's (L306-383): LL half of it, capped
at ``LL_MAX_BUS_BYTES_PER_S``; LL128 0.92 of it; the tree all-reduce 0.92 of it at half
the ring's algorithm bandwidth per bus byte (L377-382), scaled by NCCL's size-dependent
tree correction (L613-627); PAT 0.75 of it. Per-channel caps, which need NCCL's channel
count from its topology search, are left out.

A Simple ring's own bandwidth (``group_bandwidth``) is what one of its ranks can push:
NVLink's inside a node. Across exactly two nodes, the NICs of the group's ranks on a node,
up to NVLink's: NCCL's own model prices a ring over two nodes at its intra-node channel
bandwidth (L306: ``bw = nNodes <= 2 ? bwIntra : bwInter``, busBw = nChannels x bw, L324),
each channel leaving and entering a node once through a NIC of its ranks (the ring search
fills them, src/graph/search.cc L1198) - so k ranks on a node move their ring through k
NICs, one rank per node through its own. Beyond two nodes each rank keeps the one NIC it
has to itself (the bound nccl-tests' bus bandwidth reaches with one rank per node,
doc/PERFORMANCE.md): NCCL there prices nChannels x bwInter, which its search would also
spread over k NICs, but those are every other axis's NICs in the same step and their
sharing is not priced - and when tried (not shipped; benchmarks/validation.py on that change), k NICs beyond two nodes
swings the 2021 ZeRO-3 rows (Narayanan Table 2) from +32%..+71% to +51%..+443%. The DP
groups' calls pass their ranks per node (``ledger.step.dp.call_s``); a TP group across
two nodes keeps one NIC a rank (``ledger.step.layer_comms``: its NICs carry the DP rings
of the same GPUs in the same layers, and that sharing is not priced).

>>> round(collective_s("all_reduce", 0.0, 1536, 1536, 40e9, "hopper") * 1e6)  # tree LL
107
>>> round(collective_s("all_gather", 0.0, 1536, 1536, 40e9, "hopper") * 1e6)  # PAT
4349
"""
from __future__ import annotations

import numpy as np

from ledger.placement.collectives import ring_payload

# src/graph/tuning.cc L151-174 (ncclTunerConstantsDefaults), microseconds, by algorithm and
# protocol (LL, LL128, Simple); hwLatencies by the link a step crosses
PROTOCOLS = ("LL", "LL128", "Simple")
BASE_US = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "pat": (8.0, 8.0, 8.0)}
NVLINK_US = {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "pat": (0.0, 0.0, 4.0)}
NET_US = {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0), "pat": (0.0, 0.0, 14.0)}
NET_OVERHEAD_US = 1.0  # Intel host, L228-233; x3 under Simple
RING_PLATEAU = 1.4  # multi-node Simple ring all-reduce on Ampere and later, L650-652
# LL's bus bandwidth cap (llMaxBws, L177-182), bytes/s: one node by GPU generation, two and
# more nodes by host CPU (Intel)
LL_MAX_BUS_BYTES_PER_S = {"ampere": 87.7e9, "ada": 87.7e9, "hopper": 141.0e9,
                          "blackwell": 282.0e9, "multi-node": (39.0e9, 20.4e9)}
# nvlsEfficiency (L138-143) by generation (sm_89 Ada counts as Ampere there: no NVLS);
# NVLS's latency on NVLink, Simple (hwLatencies, L161)
NVLS_EFFICIENCY = {"hopper": 0.85, "blackwell": 0.74}
NVLS_US = 25.0
# treeCorrectionFactor (L613-619): by log2(bytes / 64), 64 B ... 256 MB; 1 beyond
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9,
           1.0, 1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9,
              .9, .9, .9, 1.0, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7,
               .7, .8, .9, .9, .9)}
COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")


def _log2i(x):
    return np.floor(np.log2(np.maximum(x, 1)))


def latency_us(kind: str, algo: str, proto: str, n, nodes):
    """NCCL's latency of one call (microseconds) of ``algo`` under ``proto`` over ``n``
    ranks on ``nodes`` nodes (numbers or arrays), L384-435."""
    p = PROTOCOLS.index(proto)
    multi = nodes > 1
    net = NET_US["tree" if algo != "ring" else "ring"][p]
    net = np.where(n == nodes, NET_US["tree"][p], net)  # one rank per node: the tree's
    base, intra = BASE_US[algo][p], NVLINK_US[algo][p]
    if algo == "ring":
        steps = 2 * (n - 1) if kind == "all_reduce" else n - 1
        inter = np.where(multi, (2 if kind == "all_reduce" else 1) * (nodes - 1), 0)
        intra = np.where(multi, max(intra, NET_OVERHEAD_US * (3 if proto == "Simple" else 1)),
                         intra)
        return base + (steps - inter) * intra + inter * net
    if algo == "tree":
        return base + 2 * ((n / nodes - 1) * intra + _log2i(nodes) * net)
    return base + _log2i(nodes) * net / 3.5 + 2.8 * n  # pat


def _tree_correction(proto: str, payload_bytes):
    table = np.asarray(TREE_CORRECTION[proto])
    idx = _log2i(np.maximum(payload_bytes, 1) / 64).astype(int)
    return np.where(idx < 23, table[np.clip(idx, 0, 22)], 1.0)  # L638: logSize < 23


def _ll_cap(nodes, generation: str):
    two, more = LL_MAX_BUS_BYTES_PER_S["multi-node"]
    return np.where(nodes == 1, LL_MAX_BUS_BYTES_PER_S.get(generation, 141.0e9),
                    np.where(nodes == 2, two, more))


def collective_s(kind: str, wire_bytes, n, nodes, ring_bytes_per_s, generation: str,
                 nvls: bool = False):
    """Seconds of one ``kind`` call whose ranks each send ``wire_bytes`` in the ring model
    (``ledger.placement.coll_bytes``), over ``n`` ranks on ``nodes`` nodes (NVLink domains)
    whose Simple ring moves ``ring_bytes_per_s`` per rank: the least time over NCCL's
    algorithms and protocols, NVLS among them inside one domain of an ``nvls`` system
    (numbers or arrays). One rank alone costs nothing."""
    if kind not in COLLECTIVES:
        raise ValueError(f"NCCL's tuning model prices {', '.join(COLLECTIVES)}, not {kind}")
    n, nodes = np.asarray(n, dtype=float), np.asarray(nodes, dtype=float)
    payload = ring_payload(kind, n, wire_bytes)  # the S a call reduces or gathers
    ll_cap = _ll_cap(nodes, generation)
    best = np.full(np.broadcast(n, nodes, wire_bytes).shape, np.inf)
    for proto in PROTOCOLS:
        bw = {"LL": np.minimum(ll_cap, 0.5 * ring_bytes_per_s),
              "LL128": 0.92 * ring_bytes_per_s, "Simple": ring_bytes_per_s}[proto]
        lat = latency_us(kind, "ring", proto, n, nodes)
        if kind == "all_reduce" and proto == "Simple":
            lat = np.where(nodes > 1, lat * RING_PLATEAU, lat)
        best = np.minimum(best, lat * 1e-6 + wire_bytes / bw)
        if kind == "all_reduce":  # the tree: 0.92 of the bus, half a bus byte per payload byte
            tree_bw = 0.92 * ring_bytes_per_s * {"LL": 1 / 3.8, "LL128": 1.0, "Simple": 1.0}[proto]
            if proto == "LL":
                tree_bw = np.minimum(tree_bw, ll_cap)
            if proto == "LL128":
                tree_bw = tree_bw * np.where(nodes == 1, 7 / 9, 120 / 128)
            tree_bw = tree_bw * _tree_correction(proto, payload)
            t = latency_us(kind, "tree", proto, n, nodes) * 1e-6 + 2 * payload / tree_bw
            best = np.minimum(best, t)
    if kind != "all_reduce":  # PAT: Simple only, one rank per node
        t = latency_us(kind, "pat", "Simple", n, nodes) * 1e-6 + payload / (0.75 * ring_bytes_per_s)
        best = np.where((n == nodes) & (n > 1), np.minimum(best, t), best)
    eff = NVLS_EFFICIENCY.get(generation, 0.0)
    if nvls and eff:
        bus = eff * ring_bytes_per_s * (2.0 if kind == "all_reduce" else 1.0)
        # all-reduce: algBw = bus n / (2(n - 1)), so S / algBw = wire / bus; RS / AG:
        # bus x (n - 1) / n with no conversion, over the whole payload S
        moved = wire_bytes if kind == "all_reduce" else payload * n / np.maximum(n - 1, 1)
        t = NVLS_US * 1e-6 + moved / bus
        best = np.where(nodes == 1, np.minimum(best, t), best)
    out = np.where(n > 1, best, 0.0)
    return out if out.shape else float(out)


def group_bandwidth(intra_bytes_per_s, inter_bytes_per_s, nodes, per_node=1):
    """Bytes per second each rank of a Simple ring moves: NVLink's inside one node; over
    two nodes the NICs of its ``per_node`` ranks on a node (``inter_bytes_per_s`` each),
    at most NVLink's; beyond two nodes its own NIC (numbers or arrays; the module's
    docstring says why).

    >>> group_bandwidth(240e9, 20e9, 4) / 1e9, group_bandwidth(240e9, 20e9, 1) / 1e9
    (20.0, 240.0)
    >>> group_bandwidth(240e9, 20e9, 2, 8) / 1e9, group_bandwidth(240e9, 20e9, 2, 32) / 1e9
    (160.0, 240.0)
    """
    nodes = np.asarray(nodes)
    two = np.minimum(intra_bytes_per_s, np.maximum(per_node, 1) * inter_bytes_per_s)
    out = np.where(nodes > 2, inter_bytes_per_s, np.where(nodes > 1, two, intra_bytes_per_s))
    return out if np.shape(out) else float(out)

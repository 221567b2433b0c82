"""HybridEP's dispatch handle (ledger.placement.ep_buffers.dispatch_handle_bytes): the routing
metadata each MoE layer's dispatch allocates with torch::empty and Megatron keeps in the
dispatch's and the combine's autograd contexts until the layer's backward.

Shapes from deepseek-ai/DeepEP hybrid-ep 94a9f8f6 csrc/hybrid_ep/executor/executor.cu
L93-126: sparse_to_dense_map int32 [T x nodes, ranks per node], local_expert_routing_map
bool [T x ranks, local experts], dense_to_expert_map int32 [T x ranks, local experts] (the
permute's, built since Megatron dispatches with the permute, hybrid_ep_buffer.py L376);
Megatron-LM d98e8a64 megatron/core/transformer/moe/fused_a2a.py L437, L495 keep them. The
settings are the Megatron Core MoE report's Qwen3-235B-A22B TP1 EP64 MBS 3 run on GB200
(ledger.validation.memory_mcore)."""
from dataclasses import replace

import pytest

from ledger.anatomy.mixers import LayerKind
from ledger.placement import layer_activation_bytes
from ledger.placement.ep_buffers import dispatch_handle_bytes, row_id_map_share
from ledger.validation.memory_mcore import qwen3_235b_a22b, table5

ROW = {r.label: r for r in table5()}["Qwen3-235B TP1 EP64 MXFP8 +offload moe_act"]
MOE = LayerKind("attention", "moe")


def test_the_handle_by_hand():
    """12,288 tokens a rank (MBS 3 x 4,096) over 64 ranks, 128 / 64 = 2 local experts."""
    tokens, ranks, local = 3 * 4096, 64, 2
    sparse_to_dense = tokens * ranks * 4  # int32 [T x 1 node, 64 ranks per node]
    local_routing = tokens * ranks * local  # bool [T x 64, 2]
    dense_to_expert = tokens * ranks * local * 4  # int32 [T x 64, 2]
    want = sparse_to_dense + local_routing + dense_to_expert
    assert want == 11_010_048
    assert dispatch_handle_bytes(qwen3_235b_a22b(), ROW.cfg, MOE) == want


def test_sequence_parallel_ranks_dispatch_their_shard():
    """At TP 2 EP 16 (expert TP 1) a rank dispatches its 6,144-token SP shard over the 16
    ranks of the tp x ep group: 8 local experts."""
    cfg = {r.label: r for r in table5()}["Qwen3-235B TP2 EP16 MXFP8 (T5)"].cfg
    assert dispatch_handle_bytes(qwen3_235b_a22b(), cfg, MOE) == 6144 * 16 * (4 + 8 + 8 * 4)


def test_only_hybridep_keeps_it():
    model, cfg = qwen3_235b_a22b(), ROW.cfg
    assert dispatch_handle_bytes(model, replace(cfg, ep_backend="deepep"), MOE) == 0
    assert dispatch_handle_bytes(model, replace(cfg, moe_dispatcher="alltoall"), MOE) == 0
    assert dispatch_handle_bytes(model, cfg, LayerKind("attention", "dense")) == 0
    # a recomputed MoE block's forward keeps no autograd context
    assert dispatch_handle_bytes(model, cfg, MOE, "full") == 0
    moe = replace(cfg, recompute_modules=("moe",), offload_modules=())
    assert dispatch_handle_bytes(model, moe, MOE) == 0


def test_a_layer_keeps_it_beside_its_offloaded_tensors():
    """Against DeepEP a HybridEP layer saves the handle and not TE's row_id_map: HybridEP
    permutes inside its kernels (token_dispatcher.py L1150-1166, L1212-1213 @d98e8a64),
    DeepEP's manager runs TE's permute on the tokens it received over its 2 local experts
    (L1424-1457): int32 (received, 2 x 2 + 1), the extra column not counted (the table's
    convention). A token of k = 8 distinct experts of 128 misses a rank's 2 with probability
    C(126, 8) / C(128, 8) = 120 x 119 / (128 x 127); each of 64 senders' 12,288 tokens.
    Fine-grained offload, which moves saved tensors only, leaves the handle on the GPU."""
    model, cfg = qwen3_235b_a22b(), ROW.cfg
    handle = dispatch_handle_bytes(model, cfg, MOE)
    received = 12_288 * 64 * (1 - 120 * 119 / (128 * 127))
    row_id_map = received * 2 * 2 * 4
    assert round(row_id_map) == 1_529_517
    for c in (cfg, replace(cfg, offload_modules=("expert_fc1", "moe_act"))):
        got = layer_activation_bytes(model, c, MOE) \
            - layer_activation_bytes(model, replace(c, ep_backend="deepep"), MOE)
        assert got == pytest.approx(handle - row_id_map, rel=1e-12)


def test_the_row_id_map_share_by_dispatcher():
    """The alltoall dispatcher permutes the rank's own tokens over all 128 experts before the
    all-to-all (the whole table term); DeepEP's share is etp x p, p = 1976 / 16256 (above)
    at EP 64 and 1 - C(120, 8) / C(128, 8) at EP 16 (8 local experts); HybridEP's none."""
    model, cfg = qwen3_235b_a22b(), ROW.cfg
    assert row_id_map_share(model, replace(cfg, moe_dispatcher="alltoall")) == 1
    assert row_id_map_share(model, cfg) == 0
    assert row_id_map_share(model, replace(cfg, ep_backend="deepep")) == \
        pytest.approx(1976 / 16256, rel=1e-12)
    ep16 = replace(cfg, ep_backend="deepep", ep=16)
    missed = 1
    for i in range(8):
        missed *= (120 - i) / (128 - i)
    assert row_id_map_share(model, ep16) == pytest.approx(1 - missed, rel=1e-12)

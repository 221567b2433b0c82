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

from ledger.anatomy.mixers import LayerKind
from ledger.placement import layer_activation_bytes
from ledger.placement.ep_buffers import dispatch_handle_bytes
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
    """The layer's saved bytes grow by the handle against DeepEP's (same tensors saved), and
    fine-grained offload, which moves saved tensors only, leaves it on the GPU."""
    model, cfg = qwen3_235b_a22b(), ROW.cfg
    handle = dispatch_handle_bytes(model, cfg, MOE)
    for c in (cfg, replace(cfg, offload_modules=("expert_fc1", "moe_act"))):
        got = layer_activation_bytes(model, c, MOE) \
            - layer_activation_bytes(model, replace(c, ep_backend="deepep"), MOE)
        assert got == handle

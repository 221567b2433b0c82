"""The flex dispatcher's communication buffers (``--moe-token-dispatcher-type flex``),
allocated by DeepEP or HybridEP outside PyTorch's allocator (cudaMalloc, cuMem, NVSHMEM),
once per process for the run: they count toward the device (the context), not toward
``max_memory_allocated``.

**DeepEP** (``--moe-flex-dispatcher-backend deepep``, the default; deepseek-ai/DeepEP
030cdf0a). Megatron sizes one ``Buffer`` for the EP group (megatron/core/transformer/moe/
fused_a2a.py L36-69 @d98e8a64): the larger of the dispatch and combine configs' NVLink
and RDMA size hints for ``hidden_bytes = h x max(element size, 2)`` (L24-33: 2 h for
BF16 and FP8 tokens alike), with 20 SMs unless ``--moe-flex-dispatcher-num-sms`` says
otherwise (token_dispatcher.py L1287-1291; DeepEP buffer.py L30): ``ParallelConfig.ep_sms``.

- NVLink buffer (csrc/config.hpp L44-64), per channel (= SMs / 2), per NVLink peer
  (min(ranks, 8)), per received token (the config's ``num_max_nvl_chunked_recv_tokens``,
  buffer.py L218-268): the token, 8 B of source meta (internode.cu L17-42), 128 top-k
  indices (int64) and weights (fp32), 128 fp32 scales; plus (2 x RDMA ranks + 3) ints of
  counters, rounded up to 128 B. cudaMalloc'd with 8 + 8 pointers and signals per peer
  (csrc/deep_ep.cpp L29-57).
- RDMA buffer (config.hpp L66-101), across nodes only (more than 8 ranks): per channel,
  per RDMA rank, per received token, send and receive copies of the same, a 16-byte
  control word, 1 MiB of slack, rounded to 128 B. NVSHMEM hands it out of its symmetric
  heap at a 512 MiB granularity (buffer.py L100-102: NVSHMEM_CUMEM_GRANULARITY = 2^29).
- A 32 MiB workspace (deep_ep.cpp L71, configs.cuh L5).

**HybridEP** (``--moe-flex-dispatcher-backend hybridep``; DeepEP branch hybrid-ep
94a9f8f6). Megatron builds the buffer from the first dispatch's input (fused_a2a.py
L396-415): its tokens per rank T, the hidden size and the local experts. Inside one
NVLink domain (``num_of_ranks_per_node`` = the EP ranks there) the buffers are sized for
the worst case, every token of the domain's ranks routed here (csrc/hybrid_ep/buffer/
intranode.cu L126-130): the combine buffer's BF16 tokens and fp32 probabilities over the
domain's experts, shared with the dispatch buffer (``use_shared_buffer`` defaults to
True, hybrid_ep_buffer.py L51; intranode.cu L193-213, L253-261), and the dispatch's fp32
scales per 128 channels - on a GB200 NVL72 with EP 64 in one domain, 64 ranks' tokens.
Across NVLink domains HybridEP adds RDMA staging buffers (buffer/internode*.cu) that are
not priced here.

**HybridEP's dispatch handle** is PyTorch's, and per layer: each dispatch builds its routing
metadata with ``torch::empty`` (csrc/hybrid_ep/executor/executor.cu L93-126 @94a9f8f6:
``sparse_to_dense_map`` int32 [T x G], ``local_expert_routing_map`` bool and
``dense_to_expert_map`` int32 [T x G, E / ep] - T the tokens a rank dispatches, G the ranks
of the tp x ep group, the permute metadata built because Megatron always dispatches with the
permute, hybrid_ep_buffer.py L376), and Megatron keeps the handle in the dispatch's and the
combine's autograd contexts until the layer's backward (fused_a2a.py L425-437, L495
@d98e8a64): T G (4 + 5 E / ep) bytes a MoE layer a micro-batch in flight
(``dispatch_handle_bytes``), not saved tensors, so offload leaves them. The chunk layout and
the node maps (at most 2 T x nodes bytes) are left out.

**TE's row_id_map under the flex dispatcher** (``row_id_map_share``). The alltoall
dispatcher permutes the rank's own tokens over every expert before the all-to-all, and
TE's permute keeps an int32 row_id_map of (tokens, 2E + 1) for the backward (the table's
``routing_map_bytes_per_expert``). HybridEP permutes with its own kernels: Megatron's
``_HybridEPManager`` dispatches with ``fused=moe_permute_fusion_into_hybridep`` and its
``get_permuted_hidden_states_by_experts`` returns the input as it came (token_dispatcher.py
L1150-1166, L1212-1213 @d98e8a64), so no row_id_map is built: its routing metadata is the
handle above. DeepEP's manager calls ``moe_utils.permute`` after the dispatch on the tokens
it received and its E / ep local experts (L1424-1457): a row_id_map of (received,
2 E / ep + 1). DeepEP sends a token to a rank once, whichever of its experts it picks; under
uniform routing of k distinct experts of E, a rank's E / ep are hit with p = 1 - C(E - E/ep,
k) / C(E, k), so each of the G = tp x ep ranks receives G T p of the G senders' T tokens:
G T p x 8 E / ep bytes, etp x p of the alltoall's T x 8 E. Node- or group-limited routing
is not modelled here.
"""
from __future__ import annotations

import numpy as np

from ledger.config import expert_tp
from ledger.placement.experts import moe_tokens

NVL_PEERS = 8  # NUM_MAX_NVL_PEERS (csrc/kernels/configs.cuh L3)
DEFAULT_SMS = 20  # Buffer.num_sms (buffer.py L30), Megatron's default (token_dispatcher.py L1287)
TOP_K, SCALES = 128, 128  # kNumMaxTopK, kNumMaxScales (config.hpp L47-48)
SOURCE_META = 8  # sizeof(SourceMeta): two ints (internode.cu L17-42)
WORKSPACE = 32 * 2**20  # NUM_WORKSPACE_BYTES (configs.cuh L5)
NVSHMEM_GRANULE = 2**29  # NVSHMEM_CUMEM_GRANULARITY (buffer.py L100-102)
# ranks -> (nvl send, nvl recv, rdma send, rdma recv) chunked tokens: buffer.py L218-268
DISPATCH = {2: (24, 256, 6, 128), 4: (6, 256, 6, 128), 8: (6, 256, 6, 128),
            16: (36, 288, 20, 128), 24: (8, 288, 32, 128), 32: (32, 288, 32, 128),
            64: (20, 288, 28, 128), 128: (20, 560, 32, 128), 144: (32, 720, 12, 128),
            160: (28, 720, 12, 128)}
COMBINE = {2: (10, 256, 6, 128), 4: (9, 256, 6, 128), 8: (4, 256, 6, 128),
           16: (4, 288, 12, 128), 24: (1, 288, 8, 128), 32: (1, 288, 8, 128),
           64: (1, 288, 20, 128), 128: (1, 560, 12, 128), 144: (2, 720, 8, 128),
           160: (2, 720, 8, 128)}


def _round(n: int, to: int) -> int:
    return -(-n // to) * to


def nvl_hint(recv: int, hidden_bytes: int, ranks: int, sms: int = DEFAULT_SMS) -> int:
    """Config::get_nvl_buffer_size_hint (config.hpp L44-64)."""
    rdma_ranks, nvl_ranks, channels = max(ranks // NVL_PEERS, 1), min(ranks, NVL_PEERS), sms // 2
    per_token = hidden_bytes + SOURCE_META + TOP_K * 8 + TOP_K * 4 + SCALES * 4
    n = channels * nvl_ranks * (2 * rdma_ranks + 3) * 4 + channels * nvl_ranks * recv * per_token
    return _round(n, 128)


def rdma_hint(send: int, recv: int, hidden_bytes: int, ranks: int,
              sms: int = DEFAULT_SMS) -> int:
    """Config::get_rdma_buffer_size_hint (config.hpp L66-101); 0 inside one node. The
    receive count is first aligned to the send count (Config's constructor, L33)."""
    if ranks <= NVL_PEERS:
        return 0
    recv = _round(recv, send)
    rdma_ranks, channels = ranks // NVL_PEERS, sms // 2
    per_token = (hidden_bytes + SOURCE_META + TOP_K * 8 + TOP_K * 4 + SCALES * 4 + 16) * 2
    n = channels * rdma_ranks * (NVL_PEERS * 2 + 2) * 2 * 4 \
        + channels * rdma_ranks * recv * per_token + 2**20
    return _round(n, 128)


def deepep_bytes(hidden: int, ranks: int, sms: int = DEFAULT_SMS) -> dict[str, float]:
    """(NVLink, RDMA, workspace) bytes of the Buffer Megatron sizes for ``ranks`` EP ranks
    and hidden size ``hidden`` (module docstring). A group size DeepEP has no config for
    takes the next larger one's (DeepEP itself asserts: buffer.py L242)."""
    key = min((k for k in DISPATCH if k >= ranks), default=max(DISPATCH))
    hb = hidden * 2
    nvl = max(nvl_hint(c[1], hb, ranks, sms) for c in (DISPATCH[key], COMBINE[key]))
    rdma = max(rdma_hint(c[2], c[3], hb, ranks, sms) for c in (DISPATCH[key], COMBINE[key]))
    peers = NVL_PEERS * (4 + 8 + 8)  # barrier signals, buffer and signal pointers
    return {"DeepEP NVLink buffer": float(nvl + peers),
            "DeepEP RDMA buffer": float(_round(rdma, NVSHMEM_GRANULE) if rdma else 0),
            "DeepEP workspace": float(WORKSPACE)}


def hybridep_bytes(tokens: float, hidden: int, local_experts: int, domain_ranks: int):
    """Intranode bytes of HybridEP's buffers (module docstring) for ``tokens`` per rank and
    ``domain_ranks`` EP ranks in one NVLink domain."""
    worst = tokens * domain_ranks  # intranode.cu L126-130
    return {"HybridEP buffer": (worst * hidden * 2  # BF16 tokens, shared
                                + worst * local_experts * domain_ranks * 4  # probs
                                + worst * (hidden // 128) * 4)}  # scales


def dispatch_handle_bytes(model, cfg, kind=None, recompute=None) -> float:
    """What one MoE layer's HybridEP dispatch handle holds for one micro-batch until the
    layer's backward (module docstring): T G (4 + 5 E / ep) bytes, T the tokens a rank
    dispatches, G the tp x ep ranks; 0 for another dispatcher or backend, a dense layer,
    and a layer whose MoE block is recomputed (full recompute, Megatron's ``moe`` module:
    its forward keeps no autograd context). ``kind``: a ``LayerKind``, an (MoE?, window)
    pair or None (the model's typical layer); numbers or the planner's arrays."""
    from ledger.arch import selected
    from ledger.config import dispatcher

    if kind is None:
        moe = getattr(model, "is_moe", False)
    else:  # a LayerKind (itself a tuple) or an (MoE?, window) pair
        moe = kind.moe if hasattr(kind, "moe") else bool(kind[0])
    recompute = cfg.recompute if recompute is None else recompute
    if (not moe or dispatcher(cfg) != "flex" or getattr(cfg, "ep_backend", None) != "hybridep"
            or recompute == "full"
            or "moe" in selected(recompute, getattr(cfg, "recompute_modules", None))):
        return 0.0
    tokens = moe_tokens(cfg, model.seq_len * cfg.micro_batch / cfg.cp)
    ranks = cfg.ep * expert_tp(cfg)
    return tokens * ranks * (4 + 5 * model.num_experts / cfg.ep)


def row_id_map_share(model, cfg) -> float:
    """The share of TE's row_id_map (the saved-tensor table's, priced over a rank's own
    tokens and every expert) a flex-dispatched MoE layer builds (module docstring): 0 under
    HybridEP, etp x p under DeepEP; 1 for another dispatcher."""
    from ledger.config import dispatcher

    if not getattr(model, "is_moe", False) or dispatcher(cfg) != "flex":
        return 1.0
    if getattr(cfg, "ep_backend", None) == "hybridep":
        return 0.0
    e, k = model.num_experts, model.top_k
    missed = 1.0
    for i in range(k):  # C(E - E/ep, k) / C(E, k): no pick lands on the rank's experts
        missed = missed * np.maximum(e - e / cfg.ep - i, 0) / (e - i)
    return expert_tp(cfg) * (1 - missed)


def ep_buffers(model, cfg, domain: int = NVL_PEERS) -> dict[str, float]:
    """Named bytes the flex dispatcher's library allocates on one GPU outside PyTorch's
    allocator; nothing for another dispatcher or without expert parallelism. ``domain``:
    the EP ranks in one NVLink domain (HybridEP's ranks per node: the accessible ranks it
    detects, hybrid_ep_buffer.py L60-72; Megatron-Bridge's launchers set the same, min(EP,
    8) on 8-GPU hosts and EP on GB200 / GB300 NVL72, perf_plugins.py L375-386 @v0.5.1,
    utils/utils.py L313-328 @v0.6.0)."""
    from ledger.config import dispatcher

    if not getattr(model, "is_moe", False) or dispatcher(cfg) != "flex":
        return {}
    ranks = cfg.ep * expert_tp(cfg)  # the tp x ep group the dispatcher runs over
    if getattr(cfg, "ep_backend", "deepep") == "hybridep":
        tokens = moe_tokens(cfg, model.seq_len * cfg.micro_batch / cfg.cp)
        return hybridep_bytes(tokens, model.hidden, model.num_experts // cfg.ep,
                              min(ranks, domain) if np.ndim(domain) == 0  # the planner's
                              else np.minimum(ranks, domain))  # rows: an array of domains
    return deepep_bytes(model.hidden, ranks, int(getattr(cfg, "ep_sms", None) or DEFAULT_SMS))

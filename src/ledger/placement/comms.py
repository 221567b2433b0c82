"""The communication ledger: per axis, the bytes one GPU sends in one training step.

One function per axis, each the formula for its collective with the factors named.
``ledger.parallel.place`` calls them; the toys call them with their own tiny shapes
and compare with the bytes they really hand to torch.distributed; the planner calls them
with numpy arrays for a whole grid of placements, so they branch only on categorical
fields (SP, the ZeRO stage, the CP kind) and let sizes of 1 give zero bytes. A row that
moves nothing is dropped by ``place``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ledger.config import expert_tp
from ledger.frameworks import of as framework_of
from ledger.placement.collectives import ring_bytes as coll_bytes
from ledger.placement.experts import ep_rows
from ledger.placement.stages import head_ranks, model_stages, mtp_embedding_copy, rank_stages

if TYPE_CHECKING:
    from ledger.memory import StateBytes
    from ledger.model import ModelSpec
    from ledger.placement.layout import Layout
    # ledger.parallel.ParallelConfig, or the planner's grid of them (arrays in its size
    # fields). Not imported: parallel builds on comms, and imports point one way.
    ParallelConfig = Any


@dataclass(frozen=True)
class Comm:
    """One row of the ledger: bytes one GPU sends per step on one axis and collective."""

    axis: str  # "tp" | "cp" | "pp" | "dp" | "ep"
    kind: str  # collective
    link: str  # "nvlink" | "ib"
    bytes: float  # per GPU per step, sent
    overlap: str  # "yes" | "partial" | "no"
    what: str = ""  # the payload: "activations", "grads", "expert params", ...
    group: str = ""  # the process group (ledger.placement.layout.GROUPS) a DP row runs over
    ranks: object = 0  # ranks in that group

    @property
    def dim(self) -> str:  # the seed's name for the axis
        return self.axis


def expert_fraction(model: ModelSpec, cfg: ParallelConfig) -> float:
    return model.expert_params / model.params if model.is_moe else cfg.moe.expert_fraction


def forward_passes(cfg) -> int:
    """Forwards each micro-batch runs: full recompute runs the forward again in the
    backward, its collectives included (Korthikanti et al. 2022 sec. 5)."""
    return 2 if cfg.recompute == "full" else 1


def tp_comms(cfg: ParallelConfig, s_act: float, layers: float, link: str) -> list[Comm]:
    """Megatron TP: per layer 2 all-reduces forward (after attention and MLP) and 2
    backward (f's conjugates), each over one activation tensor. With SP each becomes an
    all-gather + reduce-scatter pair of the same total bytes; where the framework saves
    only the sequence shard (Megatron), the backward all-gathers the input of both
    column-parallel GEMMs again: 6 all-gathers against 4 reduce-scatters."""
    fw, fwd = framework_of(cfg), forward_passes(cfg)
    per_mb = layers * cfg.num_microbatches
    one = coll_bytes("all_gather", cfg.tp, s_act)  # = reduce_scatter = all_reduce / 2
    if not cfg.sequence_parallel:
        return [Comm("tp", "all_reduce", link, 2 * (fwd + 1) * 2 * one * per_mb, "no",
                     "activations")]
    gathers = 2 * (fwd + 1) + 2 * fw.sp_regathers_input
    wire = fw.fp8_tp_gather_ratio()  # Transformer Engine gathers GEMM inputs in FP8
    return [Comm("tp", "all_gather", link, gathers * one * per_mb * wire, "partial",
                 "activations" + ", fp8" * (wire != 1)),
            Comm("tp", "reduce_scatter", link, 2 * (fwd + 1) * one * per_mb, "partial",
                 "activations")]


def block_layers(model) -> float:
    """Layers as TP's collectives see them: a layer's mixer and MLP each issue one
    all-gather and one reduce-scatter (or all-reduce) per pass; a layer with only one of
    them (a Mamba block, Nemotron-H's one-block layers) issues half."""
    return sum(n * ((k.mixer != "none") + (k.mlp != "none")) / 2
               for k, n in model.kind_counts.items())


def recurrent_cp_width(model) -> float:
    """Elements per token a recurrent layer's context parallelism all-to-alls, mean over
    the stack: Mamba-2's in_proj output (z, x, B, C, dt) to head-parallel and its output
    back (megatron/core/ssm/mamba_context_parallel.py:140-215), Gated DeltaNet's q, k, v,
    z, beta, alpha and its output (gated_delta_net/common.py:692-755 at d98e8a64)."""
    total = 0.0
    for kind, n in model.kind_counts.items():
        if "mamba" in kind.mixer:
            total += n * (model.mamba.in_width + model.mamba.inner)
        elif kind.mixer == "linear":
            la = model.linear
            total += n * (la.conv_dim + la.value_width + 2 * la.value_heads + la.value_width)
    return total / model.layers


RING_BLOCKS_PER_STEP = 3  # forward: K,V; backward: K,V again (to recompute) and dK,dV


def kv_width(model) -> float:
    """Mean width of one token's K and V as attention reads them: kv_heads x head_dim for
    K, kv_heads x v_head_dim for V (MLA's K and V differ: 192 and 128 per head in
    DeepSeek-V3; Megatron-Core decompresses them before its context-parallel attention,
    megatron/core/transformer/multi_latent_attention.py L815-823, L950-961)."""
    if getattr(model, "global_attention", None) is not None:  # mean over attending layers
        views = [(n, model.attention_of(k)) for k, n in model.kind_counts.items() if k.attention]
        return sum(n * (m.kv_dim + m.kv_heads * m.v_head_dim) / 2 for n, m in views) \
            / sum(n for n, _ in views)
    return (model.kv_dim + model.kv_heads * model.v_head_dim) / 2


def ring_kv_block_bytes(tokens: int, kv_dim: int, tp: int, act_bytes: int) -> float:
    """One ring step's message: this rank's K and V for its tokens, its TP share of heads."""
    return tokens * 2 * (kv_dim / tp) * act_bytes


def cp_comms(model: ModelSpec, cfg: ParallelConfig, tokens: int, layers: float,
              link: str) -> list[Comm]:
    """Ring: each step passes this rank's K and V block (GQA width, split by TP);
    forward receives cp-1 blocks, backward passes K,V again plus dK,dV: 3(cp-1) blocks.
    Ulysses: all-to-all of Q, K, V and the output forward, the same backward. Only the
    layers that attend; a hybrid's recurrent layers add their own all-to-alls
    (``recurrent_cp_width``), forward and backward."""
    extra = forward_passes(cfg) - 1  # a recomputed forward passes its blocks again
    rec = recurrent_cp_width(model) if model.is_hybrid else 0.0
    rows = [Comm("cp", "all_to_all", link, (2 + extra) * coll_bytes(
        "all_to_all", cfg.cp, tokens * rec / cfg.tp * cfg.act_bytes) * layers
        * cfg.num_microbatches, "no", "recurrent mixers' heads")] if rec else []
    layers = layers * model.attention_layers / model.layers
    per_mb = layers * cfg.num_microbatches
    if cfg.cp_kind == "ring":
        block = ring_kv_block_bytes(tokens, kv_width(model), cfg.tp, cfg.act_bytes)
        return [Comm("cp", "send_recv", link, (RING_BLOCKS_PER_STEP + extra) * (cfg.cp - 1)
                     * block * per_mb, "yes", "K/V blocks")] + rows
    q_o = model.heads * (model.head_dim + model.v_head_dim)
    qkvo = tokens * (q_o + 2 * kv_width(model)) / cfg.tp
    per_layer = (2 + extra) * coll_bytes("all_to_all", cfg.cp, qkvo * cfg.act_bytes)
    return [Comm("cp", "all_to_all", link, per_layer * per_mb, "no", "Q/K/V/O heads")] + rows


def pp_comms(cfg: ParallelConfig, s_act: float, link: str) -> list[Comm]:
    """One boundary tensor forward and its gradient backward per micro-batch per virtual
    stage; with SP the tensor is split by TP (Megatron's get_tensor_shapes)."""
    s_pp = s_act / (cfg.tp if cfg.sequence_parallel else 1)
    pipelined = cfg.pp > 1  # one stage sends nothing
    return [Comm("pp", "send_recv", link, pipelined * 2 * s_pp * cfg.num_microbatches * cfg.vp, "yes",
                 "boundary activations")]


def dp_collective_counts(cfg) -> tuple[object, object]:
    """(gradient reductions, parameter all-gathers) per step for the config's ZeRO stage.

    DDP and ZeRO-1 accumulate full gradients over the micro-batches and reduce once.
    ZeRO-2/3 keep gradients sharded: the framework reduce-scatters after every backward
    (m times) unless the config accumulates unsharded (``grad_accumulation="unsharded"``,
    the full gradient buffer in memory) - the seed's ``ideal`` convention counts one.
    ZeRO-1/2 all-gather the updated params once. ZeRO-3 gathers every layer for each
    forward and, resharded after forward, again for each backward - per micro-batch in a
    real framework, once in ``ideal``; accumulating unsharded (as torch pipelining does)
    also keeps the params gathered after each backward, so only the first forward and,
    resharded, each backward gather: 1 + m, or 1.
    """
    fw, m = framework_of(cfg), cfg.num_microbatches
    per_mb = fw.sharded_grads_per_microbatch
    unsharded = np.asarray(cfg.grad_accumulation) == "unsharded"  # arrays in the planner
    reshard = cfg.reshard_after_forward
    reduces = np.where((cfg.zero_stage >= 2) & ~unsharded & per_mb, m, 1)
    gathers = 1
    if cfg.zero_stage == 3:
        if not per_mb:
            gathers = np.where(reshard, 2, 1)
        else:
            gathers = np.where(unsharded, np.where(reshard, 1 + m, 1), np.where(reshard, 2, 1) * m)
    return reduces, gathers


def dp_group_comms(cfg: ParallelConfig, params: float, grads: float, shard: int,
                   repl: int, links: tuple[str, str], tag: str,
                   groups: tuple[str, str] = ("shard", "replicate")) -> list[Comm]:
    """DDP all-reduces the grads; ZeRO reduce-scatters them and all-gathers the params
    (``dp_collective_counts`` says how often); HSDP adds a replica all-reduce of the
    shard after each reduce-scatter. ``params``/``grads``: the bytes one collective moves;
    ``groups``: the process groups of the shard and of the replicas."""
    n = shard * repl
    reduces, gathers = dp_collective_counts(cfg)
    if cfg.zero_stage == 0:
        return [Comm("dp", "all_reduce", links[0], coll_bytes("all_reduce", n, grads), "yes",
                     tag + "grads", groups[0], n)]
    out = [Comm("dp", "reduce_scatter", links[0],
                reduces * coll_bytes("reduce_scatter", shard, grads), "yes", tag + "grads",
                groups[0], shard),
           Comm("dp", "all_gather", links[0], gathers * coll_bytes("all_gather", shard, params),
                "yes", tag + "params", groups[0], shard)]
    out.append(Comm("dp", "all_reduce", links[1],
                    reduces * coll_bytes("all_reduce", repl, grads / shard),
                    "yes", tag + "grads", groups[1], repl))  # HSDP's replicas; nothing without
    return out


def dp_comms(model: ModelSpec, st: StateBytes, cfg: ParallelConfig,
              lay: Layout) -> list[Comm]:
    """Data parallelism over this GPU's own (tp, pp) shard; expert shards (1/(etp ep) of
    the expert bytes) reduce over the expert-data-parallel group, tp cp dp / (etp ep)
    ranks (Megatron-Core: grads of expert params over intra_expt_dp_group, DDP L285-287)."""
    etp = expert_tp(cfg)
    # ep = 1 and etp = tp: the experts are laid out (and reduced) like dense params
    f = expert_fraction(model, cfg) * ((cfg.ep > 1) | (etp != cfg.tp))
    # params travel in the dtype the GEMMs read (FSDP2 gathers bf16 from fp32 shards)
    fw = framework_of(cfg)
    zero3 = np.asarray(cfg.zero_stage) == 3  # FSDP may gather another copy (fp8.py)
    wire_params = st.params_bytes * np.where(zero3, fw.fp8_gathered_param_ratio(model, True),
                                             fw.fp8_gathered_param_ratio(model))
    return dp_rows(model, cfg, lay, (wire_params * (1 - f), st.grads_bytes * (1 - f)),
                   (wire_params * f, st.grads_bytes * f))


def dp_rows(model: ModelSpec, cfg: ParallelConfig, lay: Layout, dense: tuple,
            expert: tuple) -> list[Comm]:
    """The DP rows of ``dp_comms`` from whole-model (params as gathered, grads as
    reduced) bytes, dense and expert; the dense ones divided over tp x pp, the expert ones
    over etp x ep x pp."""
    mp, n = cfg.tp * cfg.pp, cfg.grad_replicas
    etp = expert_tp(cfg)
    shard = n if cfg.hsdp_shard is None else cfg.hsdp_shard
    out = dp_group_comms(cfg, dense[0] / mp, dense[1] / mp,
                         shard, n // shard, (lay.link("shard"), lay.link("replicate")), "")
    if model.is_moe or cfg.moe.expert_fraction > 0:
        e_mp = etp * cfg.pp * cfg.ep
        e_shard = np.maximum(shard * cfg.tp // (etp * cfg.ep), 1)
        edp = n * cfg.tp // (etp * cfg.ep)
        out += dp_group_comms(cfg, expert[0] / e_mp, expert[1] / e_mp,
                              e_shard, edp // e_shard, (lay.link("edp"),) * 2, "expert ",
                              ("edp", "edp"))
    return out


def ep_comms(model: ModelSpec, cfg: ParallelConfig, tokens: int, lay) -> list[Comm]:
    """The MoE dispatcher's rows (``ledger.placement.experts``: alltoall, allgather or flex, the
    expert grid's links, node-limited routing, the busiest rank under an imbalance).
    ``lay``: the rank Layout, or one link name for every row."""
    return [Comm("ep", kind, link, nbytes, "partial", what)
            for kind, link, nbytes, what in ep_rows(model, cfg, tokens, lay, forward_passes(cfg))]


def ep_pass_comms(model: ModelSpec, cfg: ParallelConfig, tokens: int, lay) -> list[Comm]:
    """``ep_comms`` for one MoE layer, one micro-batch, one direction (a forward, or the
    backward: it mirrors the forward byte for byte) - what the time model times per layer."""
    return [Comm("ep", kind, link, nbytes, "partial", what)
            for kind, link, nbytes, what in ep_rows(model, cfg, tokens, lay, 1, one_pass=True)]


def tied_embedding_comms(model: ModelSpec, cfg: ParallelConfig, st: StateBytes,
                         link: str) -> list[Comm]:
    """With a tied embedding split over a pipeline, the first stage (input lookup) and
    the last (output layer) each hold a copy; their gradients are all-reduced over a
    group of those two ranks once per step (Megatron's embedding group). So are those of
    the copy a stage with MTP modules keeps (``stages.mtp_embedding_copy``; Megatron's
    finalize_model_grads.py L146 @d98e8a64: 'share_embeddings_and_output_weights or
    mtp_num_layers')."""
    fw = framework_of(cfg)
    last = rank_stages(cfg.pp, cfg.vp, cfg.schedule)[head_ranks(cfg.pp, cfg.vp, cfg.schedule)[-1]]
    mtp = mtp_embedding_copy(model, cfg, last, model_stages(cfg.pp, cfg.vp, cfg.schedule))
    tied = model.tied_embeddings and cfg.pp > 1
    if not ((tied or mtp) and fw.tied_embedding_allreduce):
        return []
    grads = st.grads_bytes / model.params * model.breakdown["embedding"] / cfg.tp
    return [Comm("pp", "all_reduce", link, coll_bytes("all_reduce", 2, grads), "no",
                 "tied embedding grads" if tied else "MTP embedding grads")]

"""What one GPU sends per token when vLLM serves a model, axis by axis, and the calls that
sit on each forward pass's critical path.

- TP: every layer all-reduces its mixer's output (attention's o_proj, a recurrent
  mixer's out_proj; Falcon-H1's layers, which run both, each) and its MLP or MoE output
  (down_proj, the experts' final reduce): RowParallelLinear.forward,
  vllm/model_executor/layers/linear.py:1558-1559 (a layer without an MLP or without a
  mixer, Nemotron-H's, issues one); the first stage all-reduces the
  vocab-parallel embedding (vocab_parallel_embedding.py:489); the last gathers each
  sampled token's logits to TP rank 0 (logits_processor.py:75-87). Payload h per token:
  in training s b h per call, in decode B h - a few KiB, latency-bound (the seed: 80
  layers x 2 on the path of every token).
- PP: a stage hands the next one the hidden states and the residual (llama.py:426-427),
  each TP rank sending 1/tp of them and the receivers all-gathering them over TP
  (GroupCoordinator.isend_tensor_dict with all_gather_group,
  vllm/distributed/parallel_state.py:866-920, the slice at :910; gpu_worker.py:865-869).
- EP: with dp > 1 the MoE layers span the DP ranks (``ServeConfig.etp``), and vLLM's
  default all2all backend, allgather_reducescatter (vllm/config/parallel.py:174),
  all-gathers every rank's tokens and router logits before the experts and
  reduce-scatters their outputs after (AgRsAll2AllManager, vllm/distributed/
  device_communicators/all2all.py:49-136), over the DP group, or over all tp x dp ranks
  of the EP group when EP runs with tp > 1 (use_sequence_parallel_moe, parallel.py:
  613-627: then each TP rank sends its 1/tp of the tokens). With dp = 1 every GPU holds
  every token and the experts' results meet in the TP all-reduce: no EP traffic.
- DP: engine replicas of a dense model share nothing.

Bytes per collective are ``ledger.placement.collectives``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ledger.placement import Layout
from ledger.placement.collectives import coll_bytes
from ledger.serve.engine import WEIGHT_BYTES


@dataclass(frozen=True)
class ServeComm:
    """One row: bytes one GPU sends per token of the batch on one axis and collective."""

    axis: str  # "tp" | "pp" | "ep"
    kind: str  # collective (ledger.placement.collectives.KINDS)
    link: str  # "nvlink" | "ib"
    bytes_per_token: float
    calls: int  # collectives per forward pass (each on the critical path)
    group: int  # ranks in the group
    what: str = ""
    per_sampled_token: bool = False  # paid per sampled token (the logits), not per token


def layout(cfg, gpus_per_node: int, gpus_per_domain: int | None = None) -> Layout:
    """The serving world on the rank grid (tp fastest, then dp, then pp), its expert
    grid EP x etp over each stage's tp x dp GPUs (``ServeConfig.etp``), on hosts of
    ``gpus_per_node`` in scale-up domains of ``gpus_per_domain``."""
    return Layout(tp=cfg.tp, dp=cfg.dp, pp=cfg.pp, ep=cfg.ep, etp=cfg.etp,
                  gpus_per_node=gpus_per_node, gpus_per_domain=gpus_per_domain)


def tp_reduces(kind) -> int:
    """All-reduces of h values one layer of ``kind`` (a LayerKind) issues per pass."""
    mixers = {"none": 0, "attention+mamba": 2}.get(kind.mixer, 1)
    return mixers + (kind.mlp != "none")


def tp_rows(model, cfg, lay: Layout, held: range, first: bool, last: bool) -> list[ServeComm]:
    """A stage's TP traffic per token: the all-reduces of h values of its layers
    (``tp_reduces``: 2 a layer of attention and an MLP), the embedding's all-reduce on the
    first stage, the logits gather on the last."""
    if cfg.tp == 1:
        return []
    h_bytes, link = model.hidden * WEIGHT_BYTES, lay.link("tp")
    calls = sum(tp_reduces(model.layer_kind(i)) for i in held) + first
    rows = [ServeComm("tp", "all_reduce", link, calls * coll_bytes("all_reduce", cfg.tp, h_bytes),
                      calls, cfg.tp, ("mixer" if model.is_hybrid else "attention")
                      + " and MLP outputs" + ", embedding" * first)]
    if last:  # each TP rank but rank 0 sends its V / tp logits of each sampled token
        shard = model.vocab / cfg.tp * WEIGHT_BYTES
        rows.append(ServeComm("tp", "send_recv", link, coll_bytes("send_recv", 2, shard), 1,
                              cfg.tp, "logits to TP rank 0", per_sampled_token=True))
    return rows


def pp_rows(model, cfg, lay: Layout, first: bool, last: bool) -> list[ServeComm]:
    """A stage's pipeline traffic per token: the hidden states and the residual sent on
    (1/tp of each per TP rank), and those received all-gathered over TP."""
    if cfg.pp == 1:
        return []
    pair = 2 * model.hidden * WEIGHT_BYTES
    rows = []
    if not last:
        rows.append(ServeComm("pp", "send_recv", lay.link("pp"),
                              coll_bytes("send_recv", 2, pair / cfg.tp), 1, 2,
                              "hidden states + residual, 1/tp each"))
    if not first and cfg.tp > 1:
        rows.append(ServeComm("pp", "all_gather", lay.link("tp"),
                              coll_bytes("all_gather", cfg.tp, pair), 1, cfg.tp,
                              "received hidden states + residual over TP"))
    return rows


def ep_rows(model, cfg, lay: Layout, moe_layers: int) -> list[ServeComm]:
    """A stage's MoE dispatch and combine per token of this DP rank: an all-gather of h
    hidden values and E router logits of every rank's tokens, a reduce-scatter of the
    h outputs of all of them (``dp`` tokens' worth per local token), per MoE layer."""
    if not (model.is_moe and cfg.dp > 1 and moe_layers):
        return []
    sequence_parallel = cfg.ep > 1 and cfg.tp > 1  # EP group = tp x dp ranks
    n, link = (cfg.tp * cfg.dp, lay.link("ep")) if sequence_parallel else (cfg.dp, lay.link("dp"))
    # the group gathers dp tokens per local token (each TP rank 1/tp of them when
    # sequence-parallel): a rank sends (n - 1) / n of that whole
    gathered = cfg.dp * (model.hidden + model.num_experts) * WEIGHT_BYTES
    combined = cfg.dp * model.hidden * WEIGHT_BYTES
    return [ServeComm("ep", "all_gather", link,
                      moe_layers * coll_bytes("all_gather", n, gathered), moe_layers, n,
                      "tokens + router logits of every DP rank"),
            ServeComm("ep", "reduce_scatter", link,
                      moe_layers * coll_bytes("reduce_scatter", n, combined), moe_layers, n,
                      "expert outputs back to their ranks")]


def stage_rows(model, cfg, lay: Layout, held: range, rank: int) -> list[ServeComm]:
    """Every row of one pipeline rank's GPUs."""
    first, last = rank == 0, rank == cfg.pp - 1
    moe = sum(model.is_moe_layer(i) for i in held)
    return (tp_rows(model, cfg, lay, held, first, last) + pp_rows(model, cfg, lay, first, last)
            + ep_rows(model, cfg, lay, moe))

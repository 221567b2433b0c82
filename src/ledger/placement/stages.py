"""Pipeline stages as the frameworks lay them out: layers and parameters per PP rank.

The seed's ledger splits every byte evenly over pp. The stage that runs out of
memory, or of time, is not the average one: the first holds the embedding, the last the
final norm and the output layer, and an uneven layer split lands somewhere. Where the
layers land is the config's own split (Megatron's --decoder-first/last-pipeline-num-
layers or --pipeline-model-parallel-layout, a DeepSpeed partition, read by ``ledger.io``)
or its framework's rule (``Framework.split``): ``ends`` takes the remainder from the two
end stages (Megatron's slots for the embedding and the loss, DeepSpeed's
type:transformer|embedding), ``torchtitan`` weighs the embedding and the output as one
layer each and gives the remainder to the first stages. Which stages a rank holds is the
schedule's: Megatron's loop, the V of ZB-V and DualPipeV, or DualPipe's two copies.
"""
from __future__ import annotations

from functools import lru_cache
from itertools import accumulate

from ledger.anatomy.counts import mtp_sets
from ledger.arch.activations import layer_kind
from ledger.config import expert_tp
from ledger.errors import LedgerError
from ledger.frameworks import of as framework_of
from ledger.model import ModelSpec

V_SHAPED = ("zb-v", "dualpipev")  # rank r holds stages r and 2pp-1-r of 2pp
BIDIRECTIONAL = ("dualpipe",)  # rank r holds stages r and pp-1-r of pp, one per direction
SPLIT_RULES = ("ends", "torchtitan")


def stage_layers(layers: int, stages: int) -> list[int]:
    """Layers per pipeline stage. An uneven split takes layers from the two ends first,
    which carry the embedding and the output layer (Llama 3: 126 = 7 + 14*8 + 7).

    >>> stage_layers(126, 16)
    [7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7]
    """
    base = -(-layers // stages)
    out = [base] * stages
    ends = [i for pair in zip(range(stages), range(stages - 1, -1, -1)) for i in pair]
    for i in ends[: base * stages - layers]:
        out[i] -= 1
    return out


def torchtitan_layers(layers: int, stages: int, in_weight: int = 1,
                      out_weight: int = 1) -> list[int]:
    """torchtitan's split (torchtitan/distributed/pipeline_parallel.py L357-466 at the
    snapshot in ``ledger.frameworks.SNAPSHOTS``): the embedding and the output weigh
    ``in_weight`` and ``out_weight`` layers (pipeline_parallel_first/last_stage_less_layers,
    1 by default, configs.py L197-207); the effective layers are dealt evenly, one more to
    each of the first ``remainder`` stages. DeepSeek-V3's 61 layers on 16 stages: 63 units,
    four per stage and three on the last.

    >>> torchtitan_layers(61, 16)
    [3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 2]
    """
    units = layers + in_weight + out_weight
    base, extra = divmod(units, stages)
    out, left = [], layers
    for i in range(stages):
        n = base + (i < extra) - in_weight * (i == 0) - out_weight * (i == stages - 1)
        n = max(0, min(n, left))
        out.append(n)
        left -= n
    return out


def model_stages(pp: int, vp: int, schedule: str | None) -> int:
    """How many parts the model is split into: pp x vp, or pp under DualPipe (each rank
    holds two copies: one stage per direction)."""
    return pp if schedule in BIDIRECTIONAL else pp * vp


def split_layers(model_layers: int, pp: int, vp: int = 1, schedule: str | None = None,
                 rule: str = "ends", counts=None) -> list[int]:
    """Transformer layers per model stage: ``counts`` as given (checked against the layer
    count), else ``rule`` (SPLIT_RULES)."""
    stages = model_stages(pp, vp, schedule)
    if counts is not None:
        counts = list(counts)
        if len(counts) != stages or sum(counts) != model_layers or min(counts) < 0:
            raise LedgerError("stage_layers", f"{len(counts)} stages holding {sum(counts)} "
                                              f"layers; the pipeline has {stages} stages "
                                              f"(pp({pp}) x vp({vp})) and the model "
                                              f"{model_layers} layers")
        return counts
    if rule == "torchtitan" and stages > 1:
        return torchtitan_layers(model_layers, stages)
    return stage_layers(model_layers, stages)


def config_split(model: ModelSpec, cfg) -> list[int]:
    """The config's layers per model stage: its own split, or its framework's rule."""
    return split_layers(model.layers, cfg.pp, cfg.vp, cfg.schedule,
                        framework_of(cfg).split, getattr(cfg, "stage_layers", None))


def stage_starts(counts: list[int]) -> list[int]:
    """The first layer of each stage (a running sum, linear in the stage count).

    >>> stage_starts([7, 8, 8, 7])
    [0, 7, 15, 23]
    """
    return [0, *accumulate(counts)][:-1]


def rank_stages(pp: int, vp: int = 1, schedule: str | None = None) -> list[list[int]]:
    """The model stages each PP rank holds: Megatron's loop puts stage s on rank
    s % pp; the V of ZB-V and DualPipeV gives rank r stages r and 2pp-1-r; DualPipe gives
    it stage r for one direction and stage pp-1-r for the other.

    >>> rank_stages(4, 2), rank_stages(4, 2, "zb-v")[0], rank_stages(4, 2, "dualpipe")[0]
    ([[0, 4], [1, 5], [2, 6], [3, 7]], [0, 7], [0, 3])
    """
    if schedule in V_SHAPED:
        return [[r, 2 * pp - 1 - r] for r in range(pp)]
    if schedule in BIDIRECTIONAL:
        return [[r, pp - 1 - r] for r in range(pp)]
    return [[c * pp + r for c in range(vp)] for r in range(pp)]


def visit_share(schedule: str | None) -> float:
    """The share of a rank's stages one micro-batch passes through: all of them, or one
    of DualPipe's two copies (each direction's micro-batches pass one)."""
    return 0.5 if schedule in BIDIRECTIONAL else 1.0


def pace(model_layers: int, mtp_layers: int, pp: int, vp: int = 1,
         schedule: str | None = None, rule: str = "ends",
         counts=None) -> tuple[float, float, float]:
    """What sets a pipeline's pace, per micro-batch on average: (layers on the busiest
    rank, layers on the busiest rank holding the output head - MTP modules included -,
    output heads per micro-batch there, 1 or DualPipe's 1/2). The time model prices both
    ranks and the slower one sets every chunk's time.

    >>> pace(61, 1, 16, 2, "dualpipe")  # 3 + 3 + 1 MTP layers over two directions
    (4.0, 3.5, 0.5)
    """
    held = rank_layers(model_layers, pp, vp, schedule, counts, rule)
    share = visit_share(schedule)
    heads = head_ranks(pp, vp, schedule)
    head = max(held[r] for r in heads)
    return max(held) * share, (head + mtp_layers) * share, share


def rank_layers(layers: int, pp: int, vp: int = 1, schedule: str | None = None,
                counts=None, rule: str = "ends") -> list[int]:
    """Transformer layers each PP rank holds."""
    counts = split_layers(layers, pp, vp, schedule, rule, counts)
    return [sum(counts[s] for s in stages) for stages in rank_stages(pp, vp, schedule)]


def head_ranks(pp: int, vp: int = 1, schedule: str | None = None) -> list[int]:
    """The ranks holding the last model stage (the final norm, the output layer and any
    MTP modules): the last rank, the first under a V, and both ends under DualPipe."""
    last = model_stages(pp, vp, schedule) - 1
    return [r for r, held in enumerate(rank_stages(pp, vp, schedule)) if last in held]


def mtp_params(model: ModelSpec) -> tuple[int, int, int]:
    """(split by TP, replicated, routed) parameters of the multi-token-prediction modules,
    which Megatron-Core builds on the last pipeline stage beside the output head they
    share (megatron/core/models/gpt/gpt_model.py: mtp on the post-process stage): the
    h x 2h projection (column-parallel), three norms and the block's layers
    (``ModelSpec.mtp_kinds``) each - once for depths that repeat one block."""
    if not model.mtp_layers:
        return 0, 0, 0
    split = repl = routed = 0
    for kind in model.mtp_kinds:
        s, r, e = model.layer_params(kind)
        split, repl, routed = split + s, repl + r, routed + e
    n, h = mtp_sets(model), model.hidden
    return n * (split + 2 * h * h), n * (repl + 3 * model.norm_size), n * routed


def end_params(model: ModelSpec, cfg) -> tuple[float, float]:
    """Parameters one GPU of the first and of the last stage holds beyond its layers: the
    embedding (vocab-parallel), positions and embedding norm whole; the final norm whole,
    the output layer and its bias split (a tied embedding kept there too when pp > 1)."""
    b = model.breakdown
    first = b["embedding"] / cfg.tp + model.first_stage_params - b["embedding"]
    tied = b["embedding"] if model.tied_embeddings and cfg.pp > 1 else 0
    return first, (b["output"] + tied) / cfg.tp + model.last_stage_params - b["output"]


def each_layer_kind(model: ModelSpec) -> tuple:
    """Every layer's kind (``ledger.arch.activations.layer_kind``), in layer order (asked
    of each layer once and kept per model)."""
    try:
        return _kinds_of(model)
    except TypeError:  # a model with a field that does not hash
        return _kinds_of.__wrapped__(model)


@lru_cache(maxsize=64)
def _kinds_of(model: ModelSpec) -> tuple:
    return tuple(layer_kind(model, i) for i in range(model.layers))


MTP_EMBEDDING = ("stage", "rank", "none")  # Framework.mtp_embedding


def mtp_embedding_copy(model: ModelSpec, cfg, held, stages: int) -> float:
    """Parameters of the embedding copy one GPU of a rank holding the stages ``held`` (of
    ``stages``) keeps for its MTP modules (``Framework.mtp_embedding``): where the last
    stage, which holds them, is not the first, Megatron-Core builds that chunk its own
    LanguageModelEmbedding - the table vocab-parallel, learned positions whole - zeroed
    and all-reduced from the first stage's; DeepSeek's stack shares the first stage's
    when one rank holds both (SOURCES[...]["mtp_embedding"])."""
    rule = framework_of(cfg).mtp_embedding
    if not model.mtp_layers or stages == 1 or stages - 1 not in held or rule == "none" \
            or (rule == "rank" and 0 in held):
        return 0.0
    b = model.breakdown
    return b["embedding"] / cfg.tp + b["positions"]


def stage_params(model: ModelSpec, cfg, counts: list[int] | None = None,
                 mtp_embedding: bool = True) -> list[tuple[float, float]]:
    """Per PP rank, the (dense, expert) parameters one of its GPUs holds, laid out as
    Megatron does: embedding with the first stage; final norm and output layer with
    the last (a tied embedding is kept there too when pp > 1), with any MTP modules
    (``mtp_params``) and their embedding copy (``mtp_embedding_copy``; ``mtp_embedding``
    False leaves it out: a checkpoint saves it once). Routed experts split over
    etp x ep (Megatron's expert grid; theoretical_memory_usage.py L205-212).
    ``counts``: layers per stage when another framework splits them (vLLM's split,
    ``ledger.serve``); None: the config's own split or its framework's rule
    (``config_split``)."""
    counts = config_split(model, cfg) if counts is None else list(counts)
    stages = len(counts)
    starts = stage_starts(counts)
    kinds = {k: model.layer_params(k) for k in model.kind_counts}  # each kind of layer
    each = [kinds[k] for k in each_layer_kind(model)]
    grid = expert_tp(cfg) * cfg.ep  # the expert grid
    first, last = end_params(model, cfg)
    out = []
    for held in rank_stages(cfg.pp, cfg.vp, cfg.schedule):
        dense = expert = 0.0
        for s in held:
            for split, repl, routed in each[starts[s]:starts[s] + counts[s]]:
                dense += split / cfg.tp + repl
                expert += routed / grid
            if s == 0:
                dense += first
            if s == stages - 1:
                dense += last
                split, repl, routed = mtp_params(model)
                dense += split / cfg.tp + repl
                expert += routed / grid
        if mtp_embedding:
            dense += mtp_embedding_copy(model, cfg, held, stages)
        out.append((dense, expert))
    return out

"""What one pipeline rank holds at each point of its schedule: the stage activations in
flight, the loss tensors of the micro-batches whose loss ran and whose backward has not,
and the outputs a framework keeps until the step ends.

``walk`` runs one rank's action list and records every point where memory can peak:
the end of a forward (the loss forward on the last stage), the start of a backward (the
loss backward on the last stage) and the backward of a stage's layers. ``held_closed``
gives the point that sets the peak in closed form, for a grid of placements at once;
tests/test_memory.py holds it to the walk for every schedule.

Counts are micro-batches: ``chunks`` in whole-stage units (chunk-micro-batches / v, as
``simulator.SimResult.peak_inflight``), ``losses`` the other micro-batches whose loss
keeps its saved tensors, ``logits`` the last stage's outputs kept and ``boundary`` the
other stages' outputs kept (the current one counted); ``input_grads`` the stage inputs'
gradients left on their receive buffers until the step ends (``GRADS_KEPT``), each one
micro-batch's stage boundary tensor as an output is - ``held_closed`` adds them to
``boundary``.

>>> from ledger.pipeline.schedules import build
>>> last = build("interleaved", 4, 8, 2).ranks[3]
>>> max(h.chunks for h in walk(last, 7, 2, "last")), max(h.losses for h in walk(last, 7, 2))
(2.5, 0)
>>> [float(x) for x in held_closed("interleaved", 3, 4, 8, 2, "last")]
[2.5, 0.0, 8.0, 0.0, 0.0]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ledger.pipeline.schedules import SPLIT_BACKWARD as SPLIT, Action
from ledger.pipeline.simulator import inflight_closed, interleaved_warmup

KEEP = ("none", "last", "all")  # which stages keep each micro-batch's output to the end
# which backwards leave the gradient of a stage's input on its buffer until the step ends
# (Framework.pipeline_input_grads): none, a split backward's input step (I) only, or
# every backward (a full B too)
GRADS_KEPT = ("none", "split", "all")


@dataclass(frozen=True)
class Held:
    """One point of a rank's schedule where its memory can peak."""

    event: str  # "forward" | "loss_forward" | "loss_backward" | "backward"
    chunks: float  # stage activations alive, in whole-stage micro-batches
    losses: int  # other micro-batches whose loss tensors are alive
    logits: int  # the last stage's outputs kept until the step ends
    boundary: int  # the other stages' outputs kept until the step ends
    grads: bool  # a backward ran on this rank before this point: gradients exist
    # of the rank's stages, the share whose weight gradients exist at this point (a stage's
    # first B or W creates them; at a layer's backward its own stage counted)
    grad_stages: float = 1.0
    input_grads: int = 0  # stage inputs' gradients kept to the step's end (GRADS_KEPT)


def walk(actions: list[Action], last_stage, v: int = 1, keep: str = "none",
         grads_kept: str = "none", first_stage=0) -> set[Held]:
    """Every point of one rank's action list (``last_stage``: the stage with the loss, or
    the set of them - DualPipe's two directions each end in one; ``keep``: "last" keeps
    the last stage's outputs, "all" every stage's; ``grads_kept``: which backwards leave
    their stage input's gradient to the step's end, GRADS_KEPT - never on a
    ``first_stage``, whose input is the token ids). A DualPipe pair (FB) is its forward
    then its backward."""
    lasts = {last_stage} if isinstance(last_stage, int) else set(last_stage)
    firsts = {first_stage} if isinstance(first_stage, int) else set(first_stage)
    kept_by = {"none": (), "split": ("I",), "all": ("B", "I")}[grads_kept]
    held = losses = logits = boundary = grads_in = 0
    done_backward = False
    made: set[int] = set()  # stages whose weight gradients exist
    stages = len({a.stage for action in actions for a in action.parts()}) or 1
    points: set[Held] = set()
    for a in (part for action in actions for part in action.parts()):
        last = a.stage in lasts
        g = len(made) / stages
        if a.kind == "F":
            logits += last and keep != "none"
            boundary += not last and keep == "all"
            event = "loss_forward" if last else "forward"
            points.add(Held(event, (held + 1) / v, losses, logits, boundary, done_backward, g,
                            grads_in))
            held, losses = held + 1, losses + last
        elif a.kind in ("B", "I"):
            if last:
                losses -= 1
                points.add(Held("loss_backward", held / v, losses, logits, boundary,
                                done_backward, g, grads_in))
            made |= {a.stage} if a.kind == "B" else set()
            points.add(Held("backward", held / v, losses, logits, boundary, True,
                            len(made) / stages, grads_in))
            held -= a.kind == "B"
            grads_in += a.kind in kept_by and a.stage not in firsts  # set as it ends
            done_backward = True
        elif a.kind == "W":
            made.add(a.stage)
            held -= 1
    return points


def grad_sets(kind: str, rank, p, m, v, lazy: bool = True, inflight=None,
              group=None) -> tuple:
    """Where a rank's peak can fall when its weight gradients are made lazily, stage by
    stage (``lazy``: ``not Framework.grads_persist`` - FSDP2 creates a unit's unsharded
    gradient in its first post-backward, torch 2.13.0 fsdp/_fully_shard/_fsdp_param_group.py
    L602-612, ``to_accumulated_grad_if_needed`` _fsdp_param.py L802-813): one tuple
    (layer chunks, layer gradients, loss chunks, loss gradients) per candidate point -
    the micro-batches in flight (whole-stage units, as ``held_closed``'s chunks) and the
    share of the rank's gradients that exist, at a layer's forward or backward and at the
    rank's loss (its loss forward, loss backward, output backward).

    Interleaved 1F1B (torch 2.13.0 pipelining/schedules.py L2872-2888 warm-up, L2954-3002
    stage order; Megatron's alike): backwards walk the rank's stages from its last, each
    for a round of p micro-batches, so the k-th stage (k = 1..v) first backs up at backward
    (k - 1) p, when min(warm-up + 1, m v - (k - 1) p) chunks are in flight and k of its v
    stages have gradients (the one backing up counted) - of the v points, the last whose
    chunks are the warm-up's and the v-th can be the largest. The loss runs on the last
    rank's first stage: in the first round (one stage's gradients, a micro-batch's before
    it), and again from backward v p on (every stage's) when m >= 2p. Every other
    schedule, and a framework keeping its gradients in a buffer of its own: one point,
    all of them; under a split backward (``WEIGHT_STEP``) a stage's gradients appear at its
    first W instead (``weight_step_sets``). Megatron's rounds are its micro-batch group
    (``group``, p unless set: ``schedules._rounds``)."""
    c1 = inflight_closed(kind, rank, p, m, v, group) if inflight is None else inflight
    if lazy and kind in WEIGHT_STEP:
        return weight_step_sets(kind, rank, p, m, v, c1)
    if not lazy or kind != "interleaved" or np.all(np.asarray(v) < 2):
        return ((c1, 1.0, c1, 1.0),)
    g = p if group is None else group  # a round's micro-batches
    warm = interleaved_warmup(rank, p, m, v, group)
    # the chunks stay at c1 up to the k-th stage, then fall by g a stage while the
    # gradients grow by one stage: a line in k, so its largest point is one of its ends
    k = np.clip((m * v - warm - 1) // g + 1, 1, v)
    last = np.minimum(warm + 1, m * v - (v - 1) * g) / v
    again = np.asarray(m) >= 2 * g  # the loss stage's second round of backwards
    later = np.minimum(warm + 1, m * v - v * g) / v
    return ((c1, k / v, c1, 1 / v),
            (last, 1.0, np.where(again, later, c1), np.where(again, 1.0, 1 / v)))


WEIGHT_STEP = ("interleaved-zb", "zb-v", "dualpipev")  # torch's multi-stage split backwards


def weight_step_sets(kind: str, rank, p, m, v, c1) -> tuple:
    """``grad_sets`` of torch's split-backward schedules holding several stages a rank: the
    weight gradients are made by the W action, not by the input-gradient one (torch 2.13.0
    pipelining/stage.py L1016-1038: a split backward runs stage_backward_input, which sets
    only the inputs' .grad (_backward.py L255-261); backward_weight_one_chunk L1064-1108
    runs stage_backward_weight, which sets each weight's .grad, L334-339; on the first
    stage the I does nothing and the W runs the whole backward, L1093-1108), so a stage's
    unsharded gradients appear at its first W (or full B) with that chunk still in flight.
    In chunk-micro-batches (the sets are in whole-stage units, over v):

    - Interleaved zero bubble (schedules.py L3072-3127, _get_1f1b_rank_ops L2735-2869):
      rank r warms up (v-1) p + p-1-r forwards (multiply_factor 1, L3079) and its W's
      trail its I's by r steps (num_1f1b_microbatches = rank, L3114; L2810), so every
      steady W runs with P = v c1 in flight; the W's take the I's order, a round of p a
      stage from the rank's last, so the k-th stage's first W comes with min(P, m v -
      (k-1) p) in flight - a line in k, its largest point one of its ends. Its loss (the
      last rank's last stage) runs before any W when m = p (one round: all forwards,
      then the I's, the W's after), with every stage's gradients from m = 2p on.
    - ZB-V (L3268-3390): the second chunk's first W (warmup_n3) runs at the peak c1; the
      first chunk's (stage r) comes in the stable phase after min(2p-r-1, m) forwards of
      it, min(p, m) of the second chunk and min(p-r, m) of the latter's W's, plus the
      stable phase's forward if micro-batch 2p-r-1 exists - 2p-1 on rank 0 at m = 2p-1,
      2p (c1) on every rank from m = 2p on. The loss (rank 0's second chunk) runs in that
      chunk's warm-up alone when m <= p, and before its first W when m = 1.
    - DualPipeV (L3459-3617): every stage's gradients exist at the peak on every rank
      (2p+1 in flight, from step 4's first pair); the loss stage's backward after stage
      0's first (step 4's second pair, L3564) needs m > 2p: at m = 2p its later loss
      backwards (step 5) run with 2p.
    """
    r, m = np.asarray(rank), np.asarray(m)
    if kind == "interleaved-zb":
        peak = v * np.asarray(c1)
        k = np.clip((m * v - peak) // p + 1, 1, v)
        last = np.minimum(peak, m * v - (v - 1) * p) / v
        g_loss = np.where(m > p, 1.0, 0.0)
        return ((c1, k / v, c1, g_loss), (last, 1.0, c1, g_loss))
    if kind == "zb-v":
        both = (np.minimum(2 * p - r - 1, m) + np.minimum(p, m) - np.minimum(p - r, m)
                + (2 * p - r - 1 < m)) / 2
        both = np.minimum(c1, both)
        alone = m <= p  # the loss chunk's micro-batches all run in its warm-up
        once = np.where(m > 1, 0.5, 0.0)  # a second loss forward follows its first W
        return ((c1, 0.5, c1, once),
                (both, 1.0, np.where(alone, c1, both), np.where(alone, once, 1.0)))
    edge = m <= 2 * p  # dualpipev: one main step pair before step 5
    return ((c1, 1.0, c1, np.where(edge, 0.5, 1.0)),
            (c1, 1.0, np.where(edge, np.asarray(c1) - 0.5, c1), 1.0))


def loss_stage_ranks(kind: str, pp: int) -> tuple[int, ...]:
    """The ranks holding a last stage: pp - 1; 0 in a V (ZB-V, DualPipeV); both ends
    under DualPipe (one direction's last stage each)."""
    if kind in ("zb-v", "dualpipev"):
        return (0,)
    return (0, pp - 1) if kind == "dualpipe" else (pp - 1,)


def input_grads_closed(kind: str, rank, p, m, v, grads_kept: str = "none", inflight=None):
    """The stage inputs' gradients rank ``rank`` holds at its last forward (numbers or
    arrays), where ``held_closed``'s point falls, when its backwards leave them on their
    buffers to the step's end (``grads_kept``, GRADS_KEPT; never on the pipeline's first
    stage): each backward done by then on a stage with an input. Full backwards (GPipe,
    1F1B, interleaved) at their last forward hold the most micro-batches in flight
    (``inflight``), so the backwards done are the rest, m v - v chunks: none under GPipe,
    m - chunks on 1F1B's ranks but the first, and on the interleaved schedule's rank 0 less
    those of stage 0, which backs up last in each group of p micro-batches (v p backwards a
    group, the stage's p last). After it each backward frees a micro-batch's chunk and
    adds one gradient, which a chunk outweighs (it keeps at least its input), so the peak
    stays there. Split backwards (and DualPipe's pairs): every micro-batch's on each of the
    rank's stages with an input - their count at the step's end, an upper bound at the
    peak, as kept outputs are priced there."""
    r = np.asarray(rank)
    if grads_kept == "none" or (grads_kept == "split" and kind not in SPLIT):
        return 0.0 * r
    chunks = inflight_closed(kind, rank, p, m, v) if inflight is None else inflight
    if kind in SPLIT:
        stages = 2 if kind in ("zb-v", "dualpipe", "dualpipev") else v  # stages per rank
        seen = np.asarray(m) / 2 if kind == "dualpipe" else np.asarray(m)
        firsts = (0, p - 1) if kind == "dualpipe" else (0,)  # ranks holding a first stage
        return seen * (stages - np.isin(r, firsts))
    if kind == "gpipe":
        return 0.0 * r
    done = np.asarray(m) * v - v * np.asarray(chunks)
    if kind == "1f1b" or v == 1:
        return np.where(r == 0, 0.0, done)
    group = v * p  # a group's backwards, the rank's stages from its last, p a stage
    first = (done // group) * p + np.maximum(0, done % group - (v - 1) * p)
    return done - np.where(r == 0, first, 0)


def held_closed(kind: str, rank, p, m, v, keep: str = "none", inflight=None,
                grads_kept: str = "none"):
    """(chunks, losses, logits, boundary, at_loss) at the point that sets rank ``rank``'s
    peak, in closed form (numbers or arrays): the most activations it holds (``inflight``,
    from ``simulator.inflight_closed``) together with every output kept by the end - in
    every schedule the last forward falls in the steady state, where the activations in
    flight are at their most - and, in ``boundary`` beside those outputs, the stage inputs'
    gradients kept by then (``input_grads_closed``, ``grads_kept``: GRADS_KEPT, each a
    boundary tensor) - and the loss tensors of the other micro-batches, at a layer's
    forward or backward (``losses``) and at the rank's own loss forward or backward
    (``at_loss``): GPipe runs every loss before any backward (m - 1 others alive at the
    first backward); 1F1B-style schedules run a micro-batch's last-stage backward right
    after its forward, so no other loss is alive; DualPipe(V) pairs a loss forward with
    the other chunk's backward and runs that micro-batch's loss backward in the next pair,
    before the next loss forward (dualpipe.py L385-404 @3da1bbea: F0&B1 then F1&B0, step
    3's B1 W F1): one other loss alive beside the layers' forwards and backwards, none at
    a loss forward or backward."""
    chunks = inflight_closed(kind, rank, p, m, v) if inflight is None else inflight
    on_loss = np.isin(np.asarray(rank), loss_stage_ranks(kind, p))
    dual = kind in ("dualpipe", "dualpipev")  # a pair runs the loss forward, its backward
    losses = np.where(on_loss & (kind == "gpipe"), m - 1, np.where(on_loss & dual, 1, 0))
    at_loss = np.where(on_loss & (kind == "gpipe"), m - 1, 0)
    stages = 2 if kind in ("zb-v", "dualpipe", "dualpipev") else v  # stages per rank
    seen = m / 2 if kind == "dualpipe" else m  # micro-batches through each stage copy
    logits = np.where(on_loss, seen * (keep != "none"), 0)
    boundary = seen * (stages - on_loss) * (keep == "all") + input_grads_closed(
        kind, rank, p, m, v, grads_kept, chunks)
    return chunks, losses, logits, boundary, at_loss

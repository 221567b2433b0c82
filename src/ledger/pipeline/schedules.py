"""Pipeline schedules as data: for each PP rank, the ordered list of its actions.

An action is a forward (F), a full backward (B), or the two halves of a split
backward - the input gradient (I, the next stage waits for it) and the weight
gradient (W, nobody waits for it) - of one micro-batch on one stage; DualPipe adds FB,
one micro-batch's forward and another's full backward run as one overlapped pair. The
toys execute these lists over real send/recv; ``ledger.pipeline`` simulates them to
measure the bubble and the activations each rank holds.

>>> [str(a) for a in one_f_one_b(4, 8)[3][:4]]
['F0', 'B0', 'F1', 'B1']
>>> [(a.kind, a.mb, a.stage) for a in interleaved(2, 2, 2)[0]][:5]
[('F', 0, 0), ('F', 1, 0), ('F', 0, 2), ('F', 1, 2), ('B', 0, 2)]
"""
from __future__ import annotations

from ledger.errors import LedgerError, require_positive
from ledger.pipeline.actions import Action, Schedule
from ledger.pipeline.dualpipe import dual_pipe, dual_pipe_v


def _check(pp: int, m: int, v: int = 1) -> None:
    require_positive("pp", pp)
    require_positive("num_microbatches", m)
    require_positive("vp", v)


def gpipe(pp: int, m: int) -> list[list[Action]]:
    """All forwards, then all backwards (Huang et al. 2019)."""
    _check(pp, m)
    return [[Action("F", i, r) for i in range(m)] + [Action("B", i, r) for i in range(m)]
            for r in range(pp)]


def one_f_one_b(pp: int, m: int) -> list[list[Action]]:
    """1F1B / PipeDream-Flush (Narayanan et al. 2021): rank r runs min(pp-r-1, m) warm-up
    forwards, then alternates one forward and one backward, then drains."""
    _check(pp, m)
    out = []
    for r in range(pp):
        warm = min(pp - r - 1, m)
        acts = [Action("F", i, r) for i in range(warm)]
        for i in range(m - warm):
            acts += [Action("F", warm + i, r), Action("B", i, r)]
        acts += [Action("B", i, r) for i in range(m - warm, m)]
        out.append(acts)
    return out


def _rounds(pp: int, m: int, v: int, group: int | None = None) -> int:
    """The micro-batches a round of the interleaved schedule walks through one chunk:
    Megatron's --microbatch-group-size-per-virtual-pipeline-stage, pp unless set
    (model_parallel_config.py L567-568 @d98e8a64), which it holds to pp <= group <= m with
    the last group's remainder 0 or at least pp (schedules.py L1160-1180)."""
    if v == 1:
        return m
    n = pp if group is None else group
    if group is None and m % pp:
        raise LedgerError("num_microbatches", f"interleaved schedules need num_microbatches"
                                              f"({m}) divisible by pp({pp})")
    if not pp <= n <= m or 0 < m % n < pp:
        raise LedgerError("vp_group", f"Megatron groups micro-batches by pp({pp}) <= "
                                      f"group({n}) <= num_microbatches({m}), the last "
                                      f"group's remainder ({m % n}) 0 or >= pp")
    return n


def _table(m: int, v: int, n: int) -> list[int]:
    """The chunk of each forward, in order: each group of n micro-batches through every
    chunk, the last group taking what is left (Megatron's get_schedule_table,
    schedules.py L989-1014; its backwards walk the chunks in reverse, L1244-1249)."""
    out = []
    for start in range(0, m, n):
        out += [c for c in range(v) for _ in range(start, m if start + n >= m else start + n)]
    return out


def interleaved(pp: int, m: int, v: int, zero_bubble: bool = False,
                paired: bool = False, group: int | None = None) -> list[list[Action]]:
    """Megatron's interleaved 1F1B (Narayanan et al. 2021, sec. 2.2.2): rank r holds
    stages r, r+pp, ...; forwards walk its chunks in rounds of pp micro-batches (``group``
    where the launch sets another, ``_rounds``), backwards walk them in reverse. Warm-up:
    (v-1)*group + 2*(pp-1-r) forwards (schedules.py L959-965).

    With ``zero_bubble`` the backward is split (Qi et al. 2023): the warm-up shrinks to
    (v-1)*pp + (pp-1-r), and rank r delays its weight gradients by r steps so they fill
    the drain; at v = 1 this is ZB-H1.

    With ``paired`` (Megatron's combined 1F1B, --overlap-moe-expert-parallel-comm:
    pipeline_parallel/schedules.py L966-970, combined_1f1b.py) one more forward warms up
    and every steady step runs its forward and backward as one overlapped pair (FB).
    """
    _check(pp, m, v)
    per_round = _rounds(pp, m, v, group)
    chunk = _table(m, v, per_round)
    total = m * v
    out = []
    for r in range(pp):
        warm = min((v - 1) * per_round + (1 if zero_bubble else 2) * (pp - 1 - r) + paired,
                   total)
        def fwd(k, r=r):  # forwards walk the chunks in rounds of per_round micro-batches
            return chunk[k] * pp + r

        def bwd(k, r=r):  # backwards walk them in reverse
            return (v - 1 - chunk[k]) * pp + r
        nf, nb, nw = {}, {}, {}
        acts: list[Action] = []

        def take(counter, stage, kind):
            i = counter.get(stage, 0)
            counter[stage] = i + 1
            acts.append(Action(kind, i, stage))

        done_b: list[int] = []
        for k in range(total + warm):
            if paired and warm <= k < total:  # the steady step's forward and backward
                f_stage, b_stage = fwd(k), bwd(k - warm)
                f_mb, b_mb = nf.get(f_stage, 0), nb.get(b_stage, 0)
                nf[f_stage], nb[b_stage] = f_mb + 1, b_mb + 1
                acts.append(Action("FB", f_mb, f_stage, b_mb, b_stage))
                continue
            if k < total:
                take(nf, fwd(k), "F")
            if k >= warm:
                take(nb, bwd(k - warm), "I" if zero_bubble else "B")
                done_b.append(bwd(k - warm))
                if zero_bubble and k - warm >= r and len(done_b) > sum(nw.values()):
                    take(nw, done_b[sum(nw.values())], "W")
        while zero_bubble and sum(nw.values()) < len(done_b):
            take(nw, done_b[sum(nw.values())], "W")
        out.append(acts)
    return out


def zb_v(pp: int, m: int) -> list[list[Action]]:
    """ZB-V (Qi et al. 2023, sec. 6): two stages per rank in a V - rank r holds stage r
    and stage 2pp-1-r - with the backward split into I and W. Warm-up: 2(pp-r)-1
    forwards of the first chunk, r pairs of both, then pp-r rounds of the second chunk's
    F, I, W; steady state alternates both chunks' F, I, W; W's fill the drain.
    Built for m >= 2pp-1 micro-batches and trimmed to m, as PyTorch does."""
    _check(pp, m)
    n = max(2 * pp - 1, m)
    out = []
    for r in range(pp):
        s0, s1 = r, 2 * pp - 1 - r
        cnt = {k: 0 for k in ("f0", "f1", "b0", "b1", "w0", "w1")}
        acts: list[Action] = []

        def emit(kind, chunk, key):
            acts.append(Action(kind, cnt[key], s0 if chunk == 0 else s1))
            cnt[key] += 1

        for _ in range(2 * (pp - r) - 1):
            emit("F", 0, "f0")
        for _ in range(r):
            emit("F", 1, "f1")
            emit("F", 0, "f0")
        for _ in range(pp - r):
            emit("F", 1, "f1")
            emit("I", 1, "b1")
            emit("W", 1, "w1")
        while cnt["f1"] < cnt["f0"] or cnt["f0"] < n:
            if cnt["f0"] < n:
                emit("F", 0, "f0")
            emit("I", 0, "b0")
            emit("W", 0, "w0")
            emit("F", 1, "f1")
            emit("I", 1, "b1")
            emit("W", 1, "w1")
        for _ in range(r):
            emit("I", 0, "b0")
            emit("I", 1, "b1")
        for _ in range(pp - r):
            emit("I", 0, "b0")
            emit("W", 0, "w0")
        while cnt["w1"] < cnt["b1"]:
            emit("W", 1, "w1")
        while cnt["w0"] < cnt["b0"]:
            emit("W", 0, "w0")
        out.append([a for a in acts if a.mb < m])
    return out


def peak_inflight(actions: list[Action]) -> int:
    """Most stage-activations one rank holds at once: F stores one; B, or W after a
    split backward, frees it (the weight gradient still needs the layer inputs)."""
    held = peak = 0
    for a in actions:
        held += 1 if a.kind in ("F", "FB") else -1 if a.kind in ("B", "W") else 0
        peak = max(peak, held)  # an FB holds its forward's activations before its
        held -= a.kind == "FB"  # backward frees the other micro-batch's
    return peak


KINDS = ("gpipe", "1f1b", "interleaved", "zb-h1", "interleaved-zb", "zb-v", "dualpipe",
         "dualpipev")
SPLIT_BACKWARD = ("zb-h1", "interleaved-zb", "zb-v", "dualpipe", "dualpipev")  # I and W apart
DUAL = ("dualpipe", "dualpipev")  # overlapped forward-backward pairs (FB)


def check(kind: str, pp: int, m: int, v: int = 1, group: int | None = None) -> None:
    """Refuse a (kind, pp, m, v) the schedule does not admit, without building it."""
    _check(pp, m, v)
    if kind not in KINDS:
        raise LedgerError("schedule", f"unknown schedule {kind!r}; known: {', '.join(KINDS)}")
    fixed_v = {"gpipe": 1, "1f1b": 1, "zb-h1": 1, "zb-v": 2, "dualpipe": 2, "dualpipev": 2}
    if kind in fixed_v and v not in (1, fixed_v[kind]):
        raise LedgerError("vp", f"{kind} runs {fixed_v[kind]} stage(s) per rank, got vp({v})")
    if kind.startswith("interleaved") and v < 2:
        alt = "1f1b" if kind == "interleaved" else "zb-h1"
        raise LedgerError("vp", f"{kind} needs vp >= 2 stages per rank, got vp({v}); "
                                f"with one stage per rank use {alt}")
    if group is not None and kind != "interleaved":
        raise LedgerError("vp_group", f"micro-batch groups order Megatron's interleaved "
                                      f"schedule's chunks; {kind} has none")
    if kind.startswith("interleaved"):
        _rounds(pp, m, v, group)
    if kind in DUAL:
        _check_dual(kind, pp, m)


def _check_dual(kind: str, pp: int, m: int) -> None:
    """DualPipe needs pp and m even and m >= 2 pp (dualpipe.py L332-333); DualPipeV
    m >= 2 pp (dualpipev.py L318)."""
    if kind == "dualpipe" and pp % 2:
        raise LedgerError("pp", f"dualpipe needs an even pp, got pp({pp})")
    if kind == "dualpipe" and m % 2:
        raise LedgerError("num_microbatches", f"dualpipe splits the micro-batches over two "
                                              f"directions: needs an even count, got {m}")
    if m < 2 * pp:
        raise LedgerError("num_microbatches", f"{kind} needs num_microbatches({m}) >= 2 * "
                                              f"pp({pp}) = {2 * pp}")


def build(kind: str, pp: int, m: int, v: int = 1, paired: bool = False,
          group: int | None = None) -> Schedule:
    """The schedule ``kind`` for pp ranks, m micro-batches and v stages per rank;
    ``paired``: Megatron's combined 1F1B, its steady forward-backward pairs overlapped
    (interleaved, or 1f1b on one rank); ``group``: the interleaved rounds' micro-batches."""
    kind = kind.lower()
    check(kind, pp, m, v, group)
    if paired:
        if kind not in ("interleaved", "1f1b") or (kind == "1f1b" and pp > 1):
            raise LedgerError("schedule", f"the combined 1F1B pairs interleaved schedules "
                                          f"(or 1f1b without a pipeline), not {kind} on "
                                          f"pp({pp})")
        return Schedule(kind, pp, m, v, interleaved(pp, m, v, paired=True, group=group))
    if kind == "gpipe":
        return Schedule(kind, pp, m, 1, gpipe(pp, m))
    if kind == "1f1b":
        return Schedule(kind, pp, m, 1, one_f_one_b(pp, m))
    if kind == "zb-h1":
        return Schedule(kind, pp, m, 1, interleaved(pp, m, 1, zero_bubble=True))
    if kind == "zb-v":
        return Schedule(kind, pp, m, 2, zb_v(pp, m), shape="v")
    if kind == "dualpipev":
        return Schedule(kind, pp, m, 2, dual_pipe_v(pp, m), shape="v")
    if kind == "dualpipe":
        return Schedule(kind, pp, m, 2, dual_pipe(pp, m), shape="v", chains=2)
    return Schedule(kind, pp, m, v, interleaved(pp, m, v, zero_bubble=kind == "interleaved-zb",
                                                group=group))


def schedule(kind: str, pp: int, m: int) -> list[list[Action]]:
    """Per-rank action lists of a one-stage-per-rank schedule (the toys' entry point)."""
    return build(kind, pp, m).ranks

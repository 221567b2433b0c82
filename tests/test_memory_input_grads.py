"""The gradient of a pipeline stage's input, left on its receive buffer until the next step
(``Framework.pipeline_input_grads``): torch pipelining before pytorch/pytorch#164329
(2025-10-01) kept every backward's (the torchtitan records of Dec 2024 and Jun 2025);
torch 2.13.0 drops a full backward's and keeps a split backward's input step's
(torchtitan at HEAD). Held to the schedules' own action lists walked point by point, and
to torchtitan's T5-1 / T5-2 (Llama 3 405B, TP 8, PP 8, 8 micro-batches of 4 x 8,192) by
hand."""
from dataclasses import replace

import numpy as np
import pytest

from ledger.frameworks import FRAMEWORKS, SOURCES
from ledger.parallel import place
from ledger.pipeline import KINDS, SPLIT_BACKWARD, build, held_closed, walk
from ledger.validation.memory import peaks

BOUNDARY = 4 * 8192 * 16384 * 2 / 8  # one micro-batch's stage input on a TP 8 rank, bf16


@pytest.mark.parametrize("kind", KINDS)
def test_the_closed_form_is_the_walked_peak(kind):
    """``held_closed``'s boundary term against ``walk``: with the gradients of every
    backward kept (and of split input steps only), the largest point of chunks x a +
    kept gradients x b - a chunk at least one boundary tensor, a >= v b - is the closed
    form's, exactly for full backwards and as an upper bound for split ones (their count
    at the step's end); none on the first stage, whose input is the token ids."""
    vs = {"gpipe": (1,), "1f1b": (1,), "zb-h1": (1,), "zb-v": (2,), "dualpipe": (2,),
          "dualpipev": (2,)}.get(kind, (2, 3))
    for pp, m, v in [(p, m, v) for p in (2, 4) for m in (4, 8) for v in vs]:
        if kind in ("dualpipe", "dualpipev") and m < 2 * pp:
            continue
        s = build(kind, pp, m, v)
        lasts = {c * s.chain + s.chain - 1 for c in range(s.chains)}
        firsts = {c * s.chain for c in range(s.chains)}
        for mode in ("none", "split", "all"):
            for r, acts in enumerate(s.ranks):
                points = walk(acts, lasts, s.v, "none", mode, firsts)
                closed = [float(x) for x in held_closed(kind, r, pp, m, s.v, "none",
                                                        grads_kept=mode)]
                for a, b in ((1.0, 1.0 / s.v), (3.0, 0.1), (1.0, 0.0)):
                    walked = max(p.chunks * a + p.input_grads * b for p in points)
                    priced = closed[0] * a + closed[3] * b
                    if kind in SPLIT_BACKWARD:
                        assert walked <= priced + 1e-9, (pp, m, v, r, mode)
                    else:
                        assert walked == pytest.approx(priced), (pp, m, v, r, mode)
                if mode == "none" or (mode == "split" and kind not in SPLIT_BACKWARD):
                    assert closed[3] == 0 and max(p.input_grads for p in points) == 0


def test_1f1b_counts_by_hand():
    """torch's 1F1B on 8 ranks, 8 micro-batches: rank r holds 8 - r in flight at its last
    forward and has backed up r micro-batches by then - but rank 0, whose input is the
    token ids; on top of every stage's kept outputs (Dec 2024's pipelining)."""
    for r in range(8):
        out = held_closed("1f1b", r, 8, 8, 1, "all", grads_kept="all")
        kept = 8 * (r != 7)  # the last stage's outputs are its logits, counted apart
        assert float(out[0]) == 8 - r and float(out[3]) == kept + (r if r else 0)


def test_interleaved_rank_0_backs_stage_0_up_last():
    """Interleaved, 2 ranks, 8 micro-batches, 2 stages a rank: rank 0's last forward
    (stage 2, micro-batch 7) comes after 11 backwards in groups of p = 2 a stage, the
    rank's later stage first - 6 on stage 2, whose gradients stay, and 5 on stage 0,
    whose input is the token ids."""
    s = build("interleaved", 2, 8, 2)
    acts = [a for act in s.ranks[0] for a in act.parts()]
    last = max(i for i, a in enumerate(acts) if a.kind == "F")
    assert (acts[last].stage, acts[last].mb) == (2, 7)
    done = [a.stage for a in acts[:last] if a.kind == "B"]
    assert done == [2, 2, 0, 0, 2, 2, 0, 0, 2, 2, 0]
    assert float(held_closed("interleaved", 0, 2, 8, 2, grads_kept="all")[3]) == 6


def test_t5_rows_hold_their_input_gradients_by_hand(monkeypatch):
    """T5-1 (1F1B) peaks on rank 1, which has backed up one micro-batch at its last
    forward: one stage input's gradient, 4 x 8,192 x 16,384 bf16 over TP 8 (128 MiB).
    T5-2 (Interleaved1F1B) peaks on rank 7, which backs up stage 15's micro-batches before
    stage 7's: 7 of them by its last forward. Priced against the same framework with the
    term off."""
    rows = {r.label.split()[0]: r for r in peaks()}
    fw = FRAMEWORKS["torchtitan@2024-12"]
    assert fw.pipeline_input_grads == "all"
    on = {k: place(rows[k].model, rows[k].cfg).memory_by_rank for k in ("T5-1", "T5-2")}
    monkeypatch.setitem(FRAMEWORKS, "torchtitan@2024-12",
                        replace(fw, pipeline_input_grads="none"))
    off = {k: place(rows[k].model, rows[k].cfg).memory_by_rank for k in ("T5-1", "T5-2")}
    extra = {k: [a.buffers_bytes - b.buffers_bytes for a, b in zip(on[k], off[k])]
             for k in on}
    assert extra["T5-1"] == pytest.approx([0.0] + [(8 - (8 - r)) * BOUNDARY
                                                    for r in range(1, 8)])
    assert extra["T5-2"][7] == pytest.approx(7 * BOUNDARY)
    assert extra["T5-2"][1] == 0  # all 16 forwards before its first backward


def test_which_records_keep_them():
    """The records of torch before #164329 keep every backward's, torch 2.13.0's only a
    split backward's input step's; Megatron and DeepSpeed run no torch pipelining stage.
    Each with its source."""
    want = {"torchtitan@2024-12": "all", "torchtitan@2024-04": "all",
            "torchtitan@2025-06": "all", "torchtitan": "split", "hf": "split",
            "megatron": "none", "deepspeed": "none"}
    for name, mode in want.items():
        assert FRAMEWORKS[name].pipeline_input_grads == mode, name
        assert SOURCES[name]["pipeline_input_grads"], name
    assert "164329" in SOURCES["torchtitan@2024-12"]["pipeline_input_grads"]
    assert np.all(held_closed("1f1b", np.arange(8), 8, 8, 1, grads_kept="split")[3] == 0)
    assert float(held_closed("zb-v", 1, 4, 8, 2, grads_kept="split")[3]) == 16

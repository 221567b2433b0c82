"""DualPipe, DualPipeV and Megatron's combined 1F1B: our action tables against the third
parties' own (torch 2.13's ScheduleDualPipeV; DeepSeek's reference DualPipe run with its
chunk methods recorded), the DeepSeek-V3 report's Table 2 bubble and activations against
the simulator, and the closed forms against the simulator."""
import sys
from pathlib import Path

import pytest

from ledger.pipeline import Costs, build, pipeline_s, simulate

FIXTURE = Path(__file__).parent / "fixtures" / "dualpipe"


def _tuples(ranks):
    return [[(a.kind, a.mb, a.stage) + ((a.mb2, a.stage2) if a.kind == "FB" else ())
             for a in row] for row in ranks]


def test_dualpipev_tables_are_torchs():
    """torch 2.13 ScheduleDualPipeV (schedules.py L3393-3617) through its visualizer."""
    pytest.importorskip("torch")
    from torch.distributed.pipelining._schedule_visualizer import get_schedule_ops

    kind = {"FORWARD": "F", "FULL_BACKWARD": "B", "BACKWARD_INPUT": "I", "BACKWARD_WEIGHT": "W"}
    for p, m in ((2, 4), (2, 7), (4, 8), (4, 11), (8, 16)):
        theirs = []
        for row in get_schedule_ops("DualPipeV", p, m, num_stages_per_rank=2):
            out = []
            for a in (a for a in row if a is not None):
                if a.computation_type.name == "OVERLAP_F_B":
                    f, b = a.sub_actions
                    out.append(("FB", f.microbatch_index, f.stage_index, b.microbatch_index,
                                b.stage_index))
                elif a.computation_type.name in kind:
                    out.append((kind[a.computation_type.name], a.microbatch_index,
                                a.stage_index))
            theirs.append(out)
        assert _tuples(build("dualpipev", p, m, 2).ranks) == theirs, (p, m)


def _recorded(cls_name: str, p: int, m: int):
    """The chunk calls DeepSeek's ``step`` makes on each rank, as our actions: phase 0/1
    to stage (DualPipe: the direction entering on the rank's side; DualPipeV: the V's
    arms), micro-batches counted per stage, weight chunks popped first in first out."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(FIXTURE))
    try:
        import dualpipe.comm as comm
        from dualpipe import DualPipe, DualPipeV
    finally:
        sys.path.remove(str(FIXTURE))
    base = {"DualPipe": DualPipe, "DualPipeV": DualPipeV}[cls_name]
    comm.set_p2p_tensor_shapes([(1,)])
    comm.set_p2p_tensor_dtype(torch.float32)
    tables = []
    for r in range(p):
        second = cls_name == "DualPipe" and r >= p // 2
        stage = {0: r, 1: 2 * p - 1 - r} if not second else {0: 2 * p - 1 - r, 1: r}
        log, count, queue = [], {}, []

        def take(kind, st):
            n = count.get((kind, st), 0)
            count[(kind, st)] = n + 1
            return n

        class Recorder(base):
            def __init__(self):  # no modules, no process group: only the schedule runs
                self.rank, self.num_ranks, self.batch_dim = r, p, 0
                self.is_first_rank, self.is_last_rank = r == 0, r == p - 1
                self.is_in_second_half = r >= p // 2
                self.is_middle_rank = r in (p // 2 - 1, p // 2)

            def _reset_states(self):
                self.loss_chunks = [torch.zeros(())]

            def _forward_chunk(self, phase, recv=True, send=True):
                log.append(("F", take("F", stage[phase]), stage[phase]))

            def _backward_chunk(self, phase, enable_zb=False, recv=True, send=True):
                st = stage[phase]
                log.append(("I" if enable_zb else "B", take("B", st), st))
                if enable_zb:
                    queue.append(log[-1][1:])

            def _forward_backward_chunk(self, phase0, phase1, recv0=True):
                f, b = stage[phase0], stage[phase1]
                log.append(("FB", take("F", f), f, take("B", b), b))

            def _weight_chunk(self):
                log.append(("W", *queue.pop(0)))

            def _recv_forward(self, phase):
                pass

            _send_forward = _send_backward = _recv_backward = _recv_forward

            def _commit_and_wait_comm(self):
                pass

        Recorder().step(torch.zeros(m, 1), num_chunks=m, criterion=lambda *a: a[0].sum(),
                        labels=[])
        tables.append(log)
    return tables


@pytest.mark.parametrize("p,m", [(2, 4), (4, 8), (4, 10), (8, 16), (8, 20)])
def test_dualpipe_tables_are_deepseeks(p, m):
    """deepseek-ai/DualPipe 3da1bbea dualpipe/dualpipe.py step(), recorded."""
    assert _tuples(build("dualpipe", p, m, 2).ranks) == _recorded("DualPipe", p, m)


@pytest.mark.parametrize("p,m", [(2, 4), (4, 8), (4, 11)])
def test_dualpipev_tables_are_deepseeks(p, m):
    assert _tuples(build("dualpipev", p, m, 2).ranks) == _recorded("DualPipeV", p, m)


@pytest.mark.parametrize("kind", ["dualpipe", "dualpipev"])
def test_the_reports_table_2(kind):
    """DeepSeek-V3 report Table 2: bubble (PP/2 - 1)(F&B + B - 3W) over PP stages (pp for
    DualPipe, 2 pp for DualPipeV), activations PP + 1 chunks - with chunks of F = W = B/2
    and F&B = F + B, the simulator's idle time on the busiest rank and its peak."""
    for p in (2, 4, 6, 8, 16):
        if kind == "dualpipe" and p == 2:
            continue  # PP/2 - 1 = 0: a two-rank DualPipe's middle ranks pair one fewer
        for m in (2 * p, 2 * p + 2, 5 * p + p % 2):
            s = build(kind, p, m, 2)
            sim = simulate(s, Costs(1.0, 2.0))
            stages, chunk = (p, 1.0) if kind == "dualpipe" else (2 * p, 0.5)
            f, b, w = chunk, 2 * chunk, chunk
            assert sim.makespan - max(sim.busy) == pytest.approx(
                (stages / 2 - 1) * ((f + b) + b - 3 * w)), (p, m)
            assert [x * 2 for x in sim.peak_inflight] == [stages + 1] * p


@pytest.mark.parametrize("kind", ["dualpipe", "dualpipev"])
def test_dual_closed_form(kind):
    """``pipeline_s`` (busiest rank's work + Table 2's bubble) equals the simulator where
    Table 2 holds (F = W = B/2, F&B = F + B) and stays within 5% of it elsewhere, for
    m >= 4 pp."""
    for p in (4, 8, 16):
        for m in (4 * p, 6 * p):
            for f, b, w, fb in ((1, 2, 1, 3), (1, 2, 0.5, 2.5), (1, 2.5, 1, 2.8),
                                (1, 2, 1, 2.2), (1.5, 2, 1, 3.5), (0.6, 2, 1, 2.0)):
                sim = simulate(build(kind, p, m, 2), Costs(f, b, b - w, w, fb=fb)).makespan
                closed = pipeline_s(kind, p, m, 2, f, b, 0.0, w, fb)
                if (f, b, w, fb) == (1, 2, 1, 3):
                    assert closed == pytest.approx(sim, rel=1e-12)
                assert abs(closed - sim) / sim < 0.05, (p, m, f, b, w, fb)


def test_combined_1f1b_closed_form():
    """Megatron's combined 1F1B (one more warm-up forward, every steady forward-backward
    pair overlapped): the closed form equals the simulator while a pair takes at least
    as long as either pass alone."""
    for p, v, m in ((1, 1, 3), (1, 1, 8), (2, 2, 4), (2, 3, 8), (4, 2, 8), (4, 4, 16),
                    (8, 2, 32), (3, 3, 12)):
        kind = "1f1b" if p == 1 else "interleaved"
        for f, b, fb in ((1, 2, 3), (1, 2, 2.5), (1, 2, 2.0), (1.3, 2, 2.4), (0.5, 2, 2.1)):
            sim = simulate(build(kind, p, m, v, paired=True), Costs(f, b, fb=fb)).makespan
            assert pipeline_s(kind, p, m, v, f, b, 0.0, None, fb) == pytest.approx(
                sim, rel=1e-12), (p, v, m, f, b, fb)
    # without a pipeline, by hand: F0, three pairs of 2.2, B3
    assert pipeline_s("1f1b", 1, 4, 1, 1.0, 2.0, 0.0, None, 2.2) == pytest.approx(1 + 3 * 2.2 + 2)


def test_dual_schedules_refuse_what_deepseek_refuses():
    from ledger.errors import LedgerError

    for kind, p, m, field in (("dualpipe", 3, 12, "pp"), ("dualpipe", 4, 9, "num_microbatches"),
                              ("dualpipe", 4, 6, "num_microbatches"),
                              ("dualpipev", 4, 7, "num_microbatches")):
        with pytest.raises(LedgerError) as e:
            build(kind, p, m, 2)
        assert e.value.field == field


@pytest.mark.parametrize("p,m", [(4, 8), (4, 12), (8, 16), (8, 40), (16, 32), (16, 120)])
def test_which_stage_each_dualpipe_rank_holds_at_its_peak(p, m):
    """The action tables (held to DeepSeek's own above) walked micro-batch by micro-batch:
    at its peak of p + 1 alive, rank r holds p - h of the stage h = min(r, p-1-r) that
    the direction entering on its side starts at, and h + 1 of stage p-1-h - so the first
    rank keeps 16 micro-batches of the embedding's stage and one of the loss's at PP 16,
    not 8.5 of each (``ledger.placement.layers.inflight_kinds`` prices this)."""
    for r, row in enumerate(build("dualpipe", p, m, 2).ranks):
        alive, peak = {}, (0, None)
        for a in (x for act in row for x in act.parts()):
            if a.kind in ("F", "B", "W"):
                alive[a.stage] = alive.get(a.stage, 0) + (1 if a.kind == "F" else -1)
            total = sum(alive.values())
            if total > peak[0]:
                peak = (total, dict(alive))
        model_stage = {s: (s if s < p else s - p) for s in peak[1]}  # the reverse chain's
        held = {model_stage[s]: n for s, n in peak[1].items() if n}  # stage p+j is stage j
        h = min(r, p - 1 - r)
        assert peak[0] == p + 1 and held == {h: p - h, p - 1 - h: h + 1}, (r, peak)


def test_dualpipe_activations_weigh_each_stage_by_what_is_alive():
    """DeepSeek-V3, PP 16 DualPipe, 61 layers split 3, 3, 4 x 13, 3 (+ the MTP block on
    the last stage): rank 0's in-flight layers are 16 x stage 0's three dense layers and
    1 x stage 15's three MoE layers and MTP block, over the 8.5 rank-micro-batches the
    closed form counts; a middle rank's two 4-layer stages weigh alike."""
    import numpy as np

    from ledger.model import deepseek_v3
    from ledger.placement.layers import inflight_kinds, layer_kinds

    m = deepseek_v3()
    kinds, plain = layer_kinds(m, 16, 2, "dualpipe")
    _, alive = inflight_kinds(m, 16, 2, "dualpipe")
    dense = [i for i, k in enumerate(kinds) if k.mlp == "dense"]
    moe = [i for i, k in enumerate(kinds) if k.mlp == "moe"]
    assert plain[0, dense].sum() == 3 and plain[0, moe].sum() == 4  # 3 + 3 + MTP
    assert 8.5 * alive[0, dense].sum() == pytest.approx(16 * 3)
    assert 8.5 * alive[0, moe].sum() == pytest.approx(1 * 4)
    assert np.allclose(alive[2:14], plain[2:14])  # two 4-layer MoE stages

"""The closed-form peak in flight of torch's multi-stage split-backward schedules against
torch 2.13.0's own action tables (its schedule visualizer, torch/distributed/pipelining/
_schedule_visualizer.py L34, independent of the ledger's action lists): ZB-V
(ScheduleZBVZeroBubble, schedules.py L3199-3390) at every micro-batch count from 1, below
the 2p - 1 its table is built for included (torch trims it, L3380-3389); interleaved zero
bubble (ScheduleInterleavedZeroBubble, L3007-3198) and DualPipeV (ScheduleDualPipeV,
L3393-3617) at counts the ledger admits (m a multiple of p up to 4p; 2p, 2p + 1, 3p and
4p). The ledger's simulator equals this closed form (tests/test_schedules.py). The tables
are generated once per session."""
import numpy as np
import pytest

from ledger.pipeline import inflight_closed, placement_pipeline

PP = range(2, 9)


def _peak(row) -> int:
    """Most chunk-micro-batches one rank holds: a forward adds one, a weight-gradient step
    (W) or full backward frees one; an input-gradient step (I) keeps it; an overlapped
    pair is its forward then its backward."""
    held = peak = 0
    for a in (a for a in row if a is not None):
        for b in a.sub_actions or (a,):
            kind = b.computation_type.name
            if kind == "FORWARD":
                held += 1
                peak = max(peak, held)
            elif kind in ("BACKWARD_WEIGHT", "FULL_BACKWARD"):
                held -= 1
            else:
                assert kind == "BACKWARD_INPUT", kind
    return peak


def _cases():
    out = [("zb-v", "ZBVZeroBubble", p, m, 2) for p in PP for m in range(1, 4 * p + 1)]
    out += [("interleaved-zb", "InterleavedZeroBubble", p, m, v) for p in PP
            for v in (2, 3, 4) for m in range(p, 4 * p + 1, p)]
    out += [("dualpipev", "DualPipeV", p, m, 2) for p in PP
            for m in sorted({2 * p, 2 * p + 1, 3 * p, 4 * p})]
    return out


@pytest.fixture(scope="session")
def torch_peaks():
    """{(kind, p, m, v): per-rank peak chunk-micro-batches in flight} from torch's tables."""
    vis = pytest.importorskip("torch.distributed.pipelining._schedule_visualizer")
    # get_schedule_ops autospecs a fresh mock PipelineStage per call (3/4 of its time),
    # then sets the fields the schedules read; one mock, reset by each call, serves all
    stage = vis.mock.create_autospec(vis.PipelineStage, instance=True)

    def one_stage(spec, instance=False):
        assert spec is vis.PipelineStage and instance
        return stage

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(vis.mock, "create_autospec", one_stage)
        return {(kind, p, m, v): [_peak(row) for row in vis.get_schedule_ops(
            name, p, m, num_stages_per_rank=v)] for kind, name, p, m, v in _cases()}


@pytest.mark.parametrize("kind", ["zb-v", "interleaved-zb", "dualpipev"])
def test_closed_form_is_torchs_peak(torch_peaks, kind):
    """Rank by rank and as the planner's grid calls it (ranks x counts arrays)."""
    cases = {k: v for k, v in torch_peaks.items() if k[0] == kind}
    assert len(cases) >= 28
    for (_, p, m, v), theirs in cases.items():
        ours = [float(inflight_closed(kind, r, p, m, v)) * v for r in range(p)]
        assert ours == theirs, (kind, p, m, v)
    for p in PP:
        counts = sorted({m for k, p_, m, _ in cases if p_ == p})
        v = 2
        grid = np.broadcast_to(inflight_closed(kind, np.arange(p)[None, :], p,
                                               np.array(counts)[:, None], v),
                               (len(counts), p)) * v
        assert grid.tolist() == [torch_peaks[kind, p, m, v] for m in counts], (kind, p)


def test_zb_v_below_2p_minus_1_by_hand(torch_peaks):
    """ZB-V on 4 ranks, 3 micro-batches: rank r's warm-up runs min(2p - r - 1, m) = 3 / 3 /
    3 / 3 ... forwards of its first chunk and min(r + 1, m) = 1 / 2 / 3 / 3 of its second
    before its first W: 4, 5, 6, 6 chunks (2, 2.5, 3, 3 stages' worth), not min(p, m) = 3
    stages' on every rank. From m = 2p - 1 = 7 on, p = 4 on every rank, as before."""
    assert torch_peaks["zb-v", 4, 3, 2] == [4, 5, 6, 6]
    assert [float(inflight_closed("zb-v", r, 4, 3, 2)) for r in range(4)] == [2, 2.5, 3, 3]
    assert torch_peaks["zb-v", 4, 5, 2] == [6, 7, 8, 8]
    for m in (7, 8, 16):
        assert torch_peaks["zb-v", 4, m, 2] == [8] * 4
        assert placement_pipeline("zb-v", 4, m, 2)[1] == (4.0,) * 4

"""Gradients made at the weight-gradient step under torch's split-backward schedules
holding several stages a rank (issue 31): under FSDP2 a stage's unsharded gradients appear
when its weights' .grad is first written, and under a split backward that is the W action
(torch 2.13.0 pipelining/stage.py L1016-1038 runs stage_backward_input, which writes only
the inputs' .grad, _backward.py L255-261; backward_weight_one_chunk L1064-1108 runs
stage_backward_weight, which writes the weights', L334-339). Held to torch's own action
tables for ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble and ScheduleDualPipeV (its
schedule visualizer, independent of the ledger's action lists), to hand counts read off
those tables, and to the planner's grid."""
import numpy as np
import pytest

from ledger.config import ParallelConfig
from ledger.frameworks import get as get_framework
from ledger.model import llama3_8b
from ledger.pipeline import grad_sets, inflight_closed, placement_pipeline
from ledger.placement.footprint import point_bytes
from ledger.placement.per_gpu import _rank_inputs, memory_points, resident_state
from ledger.plan import Pins, enumerate_grid
from ledger.plan.search import _config, _price
from ledger.step import DEFAULT, estimate
from ledger.system import system

TORCH = {"interleaved-zb": "InterleavedZeroBubble", "zb-v": "ZBVZeroBubble",
         "dualpipev": "DualPipeV"}


def _torch_points(kind, p, m, v=2):
    """Per rank, every (at the loss, chunk-micro-batches in flight, stages with gradients)
    walked on torch 2.13.0's own action table: a forward adds a chunk (the point after
    it), an input-gradient step (I) makes no gradient, a weight-gradient step (W) or full
    backward (B) makes its stage's and frees its chunk after the point; an overlapped pair
    is its forward then its backward. The loss: the last stage's forward and I / B."""
    vis = pytest.importorskip("torch.distributed.pipelining._schedule_visualizer")
    last = p * v - 1
    out = []
    for row in vis.get_schedule_ops(TORCH[kind], p, m, num_stages_per_rank=v):
        held, made, points = 0, set(), []
        for a in (a for a in row if a is not None):
            for b in a.sub_actions or (a,):
                kind_, s = b.computation_type.name, b.stage_index
                if kind_ == "FORWARD":
                    held += 1
                    points.append((s == last, held, len(made)))
                elif kind_ == "BACKWARD_INPUT":
                    points.append((s == last, held, len(made)))
                else:
                    assert kind_ in ("BACKWARD_WEIGHT", "FULL_BACKWARD"), kind_
                    made.add(s)
                    points.append((s == last and kind_ == "FULL_BACKWARD", held, len(made)))
                    held -= 1
        out.append(points)
    return out


def _largest(points, wa, wg, loss=None):
    return max((c * wa + k * wg for at, c, k in points if loss is None or at == loss),
               default=None)


def test_zb_v_rank_0_at_2p_minus_1_by_hand():
    """ZB-V, 4 ranks, 7 micro-batches (the planner's smallest count for it): rank 0 runs 7
    forwards of stage 0 and one of stage 7 before stage 7's first W - 8 in flight, one
    stage's gradients; stage 0's first W comes in the stable phase with no stage-0 forward
    left (all 7 ran in the warm-up), 7 in flight and both stages'. Its loss (stage 7) sees
    the same two points. In whole-stage units (over 2): (4, 1/2) and (3.5, 1)."""
    rank0 = _torch_points("zb-v", 4, 7)[0]
    assert max(c for _, c, k in rank0 if k == 1) == 8
    assert max(c for _, c, k in rank0 if k == 2) == 7
    assert max(c for at, c, k in rank0 if at and k == 2) == 7
    got = [[float(x) for x in s] for s in grad_sets("zb-v", 0, 4, 7, 2)]
    assert got == [[4.0, 0.5, 4.0, 0.5], [3.5, 1.0, 3.5, 1.0]]
    # every other rank, and every rank from m = 2p: both stages' gradients at the peak
    for r, points in enumerate(_torch_points("zb-v", 4, 8)):
        assert max(c for _, c, k in points if k == 2) == 8, r


def test_interleaved_zb_one_round_by_hand():
    """Interleaved zero bubble, 4 ranks, 4 micro-batches, 2 stages a rank: one round, so a
    rank runs all 8 forwards before its first W (stage r + 4's, 8 in flight), and stage
    r's first W comes after stage r + 4's 4 W's freed theirs (4 in flight, both stages'
    gradients); the loss (rank 3's stage 7) runs its forwards and I's before any W. At
    m = 2p every stage's first W falls in the steady state, with 8 in flight."""
    for r, points in enumerate(_torch_points("interleaved-zb", 4, 4)):
        assert max(c for _, c, k in points if k == 1) == 8
        assert max(c for _, c, k in points if k == 2) == 4
        assert all(k == 0 for at, c, k in points if at)
        got = [[float(x) for x in s] for s in grad_sets("interleaved-zb", r, 4, 4, 2)]
        assert got == [[4.0, 0.5, 4.0, 0.0], [2.0, 1.0, 4.0, 0.0]]
    for points in _torch_points("interleaved-zb", 4, 8):
        assert max(c for _, c, k in points if k == 2) == 8


def test_dualpipev_layers_hold_every_gradient_at_the_peak():
    """DualPipeV, 4 ranks, 8 micro-batches: every rank reaches its peak (9 in flight, one
    pair's forward on top of 8) with both stages' gradients - no change for layers; the
    loss (rank 0's stage 7) runs with 9 in flight and one stage's, and with both only
    after step 4's single pair, 8 in flight. From m = 2p + 1 on, 9 with both."""
    for r, points in enumerate(_torch_points("dualpipev", 4, 8)):
        assert max(c for _, c, k in points) == max(c for _, c, k in points if k == 2) == 9
    rank0 = _torch_points("dualpipev", 4, 8)[0]
    assert max(c for at, c, k in rank0 if at and k == 1) == 9
    assert max(c for at, c, k in rank0 if at and k == 2) == 8
    got = [[float(x) for x in s] for s in grad_sets("dualpipev", 0, 4, 8, 2)]
    assert got == [[4.5, 1.0, 4.5, 0.5], [4.5, 1.0, 4.0, 1.0]]
    rank0 = _torch_points("dualpipev", 4, 9)[0]
    assert max(c for at, c, k in rank0 if at and k == 2) == 9


CASES = ([("interleaved-zb", p, m, v) for p in (2, 3, 4, 5) for v in (2, 3)
          for m in (p, 2 * p, 3 * p)]
         + [("zb-v", p, m, 2) for p in (2, 3, 4, 5, 6) for m in range(1, 3 * p + 1)]
         + [("dualpipev", p, m, 2) for p in (2, 3, 4, 5) for m in range(2 * p, 3 * p + 1)])


@pytest.mark.parametrize("kind", list(TORCH))
def test_grad_sets_are_torchs_largest_points(kind):
    """For any bytes per chunk in flight and per stage's gradients, the largest of
    ``grad_sets``' points is the largest of torch's table: at the layers on every rank, at
    the loss on the rank holding it (and never above the layers' on the others) - given
    torch's own peak in flight, and given the ledger's closed form (ZB-V below m = 2p - 1
    too, where the planner does not price it)."""
    rng = np.random.default_rng(3)
    for kind_, p, m, v in (c for c in CASES if c[0] == kind):
        for r, points in enumerate(_torch_points(kind, p, m, v)):
            peak = max(c for _, c, _ in points)
            assert float(inflight_closed(kind, r, p, m, v)) * v == peak, (p, m, v, r)
            on_loss = any(at for at, *_ in points)
            for inflight in (peak / v, None):
                sets = [[float(x) * v for x in s] for s in grad_sets(
                    kind, r, p, m, v, inflight=inflight)]
                for wa, wg in rng.uniform(0.1, 3, (4, 2)):
                    layer = max(c * wa + g * wg for c, g, _, _ in sets)
                    at_loss = max(c * wa + g * wg for _, _, c, g in sets)
                    assert layer == pytest.approx(_largest(points, wa, wg)), (p, m, v, r)
                    if on_loss:
                        assert at_loss == pytest.approx(_largest(points, wa, wg, True)), \
                            (p, m, v, r)
                    else:
                        assert at_loss <= layer + 1e-9


def test_persistent_gradients_keep_one_point():
    """A framework keeping its gradients in a buffer of its own (lazy=False): all of them
    at the peak, under every split-backward schedule."""
    for kind in TORCH:
        c1 = float(inflight_closed(kind, 0, 4, 8, 2))
        assert [[float(x) for x in s] for s in grad_sets(kind, 0, 4, 8, 2, lazy=False)] \
            == [[c1, 1.0, c1, 1.0]]


def test_zb_v_rank_0_per_rank_path_by_hand():
    """torchtitan (FSDP2, lazy gradients), Llama 3 8B, ZB-V on 4 ranks with 7
    micro-batches: rank 0's layer backward point is the larger of torch's two - 8 chunks
    with stage 7's gradients, 7 with both - so it sits min(one chunk, one stage's
    gradients) below all gradients with 8 chunks (the count before)."""
    model = llama3_8b()
    cfg = ParallelConfig(tp=1, pp=4, dp=2, num_microbatches=7, vp=2, schedule="zb-v",
                         zero_stage=3, framework="torchtitan", recompute="full")
    st = resident_state(model, cfg)
    inflight = placement_pipeline("zb-v", 4, 7, 2)[1]
    assert inflight[0] == 4.0
    r, parts, point, grads, sets = list(_rank_inputs(model, cfg, st, inflight))[0]
    fw = get_framework("torchtitan")
    before = point_bytes(parts, point, cfg, fw, grads)["backward"]
    now = memory_points(model, cfg, rank=0)["backward"]
    chunk, stage_grads = parts.stage_act / 2, parts.grads / 2
    assert 0 < chunk and 0 < stage_grads
    assert before - now == pytest.approx(min(chunk, stage_grads), rel=1e-12)


@pytest.mark.parametrize("kind,batch", [("zb-v", 112), ("dualpipev", 64)])
def test_planner_grid_prices_split_backward_fsdp2_as_report_does(kind, batch):
    """The planner's grid and estimate() agree on torchtitan's ZB-V / DualPipeV rows,
    among them the counts where the gradients split (m = 2p - 1, m = 2p)."""
    sysm, fw = system("h100-sxm"), get_framework("torchtitan")
    g = enumerate_grid(llama3_8b(), 16, batch, sysm, Pins(schedule=kind), fw)
    keep = np.isin(g["zero"], fw.zero_stages) & (g["pp"] > 1)
    g = {k: v[keep] for k, v in g.items()}
    edge = np.flatnonzero(g["m"] <= 2 * g["pp"])
    assert len(edge)
    step, mem, *_ = _price(llama3_8b(), sysm, DEFAULT, g, None, "adam", "torchtitan")
    assert len(mem) >= 6
    rng = np.random.default_rng(0)
    picks = set(rng.choice(len(mem), 6, replace=False)) | set(edge[:6].tolist())
    for i in sorted(picks):
        cfg = _config(g, i, "torchtitan", True, None, None, Pins(), llama3_8b())
        est = estimate(llama3_8b(), cfg, sysm, tp_overlap=bool(g["tpov"][i]))
        assert est.memory_per_gpu_bytes == pytest.approx(mem[i], rel=1e-12), cfg

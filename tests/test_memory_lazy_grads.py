"""Gradients made stage by stage under an interleaved pipeline (issue 31): FSDP2 creates
a unit's unsharded gradient in its first post-backward (torch 2.13.0
fsdp/_fully_shard/_fsdp_param_group.py L602-612, _fsdp_param.py L802-813), so a rank
holding v stages has one stage's gradients at its first backward, not all v. Held to
torch's own Interleaved1F1B action table, to the ledger's walk of its action lists, to
Llama 3 405B's shapes by hand (torchtitan's T5-2) and to the planner's grid."""
import numpy as np
import pytest

from ledger.frameworks import get as get_framework
from ledger.model import llama3_8b
from ledger.pipeline import build, grad_sets, held_closed, walk
from ledger.plan import Pins, enumerate_grid
from ledger.plan.search import _config, _price
from ledger.step import DEFAULT, estimate
from ledger.system import system
from ledger.validation.memory import _placed, peaks


def _torch_points(p, m, v):
    """Per rank, every (chunk-micro-batches in flight, stages with gradients) at the
    start of a full backward, walked on torch 2.13.0's own Interleaved1F1B table (its
    schedule visualizer; pipelining/schedules.py L2872-2888, L2954-3002) - independent of
    the ledger's action lists."""
    torch_vis = pytest.importorskip("torch.distributed.pipelining._schedule_visualizer")
    out = []
    for row in torch_vis.get_schedule_ops("Interleaved1F1B", p, m, num_stages_per_rank=v):
        held, made, points = 0, set(), set()
        for a in row:
            if a is None:
                continue
            kind = a.computation_type.name
            if kind == "FORWARD":
                held += 1
            elif kind == "FULL_BACKWARD":
                made.add(a.stage_index)
                points.add((held, len(made)))
                held -= 1
        out.append(points)
    return out


def test_torchs_interleaved_1f1b_makes_each_stages_gradients_at_its_first_backward():
    """torchtitan's T5-2 shape (8 ranks, 8 micro-batches, 2 stages a rank): rank 1 runs all
    16 forwards (warm-up (2-1) 8 + 2 (7-1) = 20, capped at 16) before stage 9's first
    backward - 16 in flight, one stage's gradients - and stage 1's first backward comes 8
    backwards later, 8 in flight and both stages' gradients. The ledger's points are
    those, in whole-stage units (chunks / v)."""
    torch_points = _torch_points(8, 8, 2)
    assert max(c for c, k in torch_points[1] if k == 1) == 16
    assert max(c for c, k in torch_points[1] if k == 2) == 8
    sets = grad_sets("interleaved", 1, 8, 8, 2)
    assert [(float(a), float(b)) for a, b, *_ in sets] == [(8.0, 0.5), (4.0, 1.0)]
    rng = np.random.default_rng(2)
    for p, m, v in [(4, 8, 2), (4, 8, 3), (8, 16, 2), (2, 8, 4), (2, 16, 4)]:
        for r, points in enumerate(_torch_points(p, m, v)):
            sets = grad_sets("interleaved", r, p, m, v)
            for wa, wg in rng.uniform(0.1, 3, (8, 2)):  # bytes a chunk, bytes a stage
                theirs = max(c * wa + k * wg for c, k in points)
                ours = max(float(c) * v * wa + float(g) * v * wg for c, g, *_ in sets)
                assert ours == pytest.approx(theirs), (p, m, v, r)


@pytest.mark.parametrize("p,m,v", [(2, 4, 2), (4, 8, 2), (4, 8, 3), (4, 16, 2), (8, 8, 2)])
def test_grad_sets_are_the_walks_largest_points(p, m, v):
    """For any bytes per micro-batch in flight and per stage's gradients, the largest of
    the walk's points (ledger.pipeline.walk over the ledger's action lists) is the
    largest of ``grad_sets``' - at a layer's forward or backward exactly, and at the loss
    (the last rank's) at most, as the first micro-batch's loss runs before any gradient."""
    s = build("interleaved", p, m, v)
    rng = np.random.default_rng(1)
    for r, acts in enumerate(s.ranks):
        points = walk(acts, p * v - 1, v)
        sets = grad_sets("interleaved", r, p, m, v)
        for wa, wg in rng.uniform(0.1, 3, (8, 2)):
            layer = max(h.chunks * wa + h.grad_stages * wg for h in points
                        if h.event in ("forward", "backward"))
            assert layer == pytest.approx(max(float(c) * wa + float(g) * wg
                                              for c, g, *_ in sets)), (r, wa, wg)
            at_loss = [h.chunks * wa + h.grad_stages * wg for h in points
                       if h.event.startswith("loss")]
            if at_loss:
                assert max(at_loss) <= max(float(c) * wa + float(g) * wg
                                           for *_, c, g in sets) + 1e-9


def test_one_point_with_every_gradient_elsewhere():
    """1F1B, and any framework keeping its gradients in a buffer of its own (Megatron's
    contiguous grad buffer, allocated before the first step): all of them, at the peak
    in flight as ``held_closed`` gives it."""
    assert grad_sets("1f1b", 1, 8, 8, 1) == ((7, 1.0, 7, 1.0),)
    chunks = float(held_closed("interleaved", 1, 8, 8, 2)[0])
    assert [float(x) for x in grad_sets("interleaved", 1, 8, 8, 2, lazy=False)[0]] == [
        chunks, 1.0, chunks, 1.0]


def test_t5_2_rank_1_peaks_at_stage_1s_first_backward_by_hand():
    """torchtitan's T5-2 (Llama 3 405B, TP 8, PP 8, 2 stages a rank of 8 layers each,
    FSDP 8, 8 micro-batches of 4 x 8,192, full recompute): rank 1 peaks at stage 1's
    first backward with 8 micro-batches of stage 1's 8 block inputs in flight (each
    4 x 8,192 x 16,384 bf16 over TP 8's sequence shards) and its 16 layers' fp32
    unsharded gradients - not 16 micro-batches with them (67.3 GiB counted whole, 59.3
    stage by stage: docs/memory.md)."""
    row = {r.label.split()[0]: r for r in peaks()}["T5-2"]
    rank1 = _placed(row).memory_by_rank[1]
    h, f, kv = 16384, 53248, 8 * 128
    layer = (2 * h * h + 2 * h * kv + 3 * h * f) / 8 + 2 * h  # one layer on a TP rank
    grads, shards = 16 * layer * 4, 16 * layer / 8 * (4 + 8)  # fp32 grads; params + Adam
    block_input = 4 * 8192 * h * 2 / 8
    assert rank1.moment == "backward"
    assert rank1.state_bytes == pytest.approx(grads + shards, abs=8)
    assert rank1.activations_bytes == pytest.approx(8 * 8 * block_input)
    assert rank1.allocated_bytes / 2**30 == pytest.approx(59.3, abs=0.05)


def test_planner_grid_prices_interleaved_fsdp2_as_report_does():
    """The planner's grid and estimate() agree on torchtitan's interleaved rows (the
    grid's ``grad_sets`` over its distinct micro-batch counts)."""
    sysm, fw = system("h100-sxm"), get_framework("torchtitan")
    g = enumerate_grid(llama3_8b(), 64, 256, sysm, Pins(schedule="interleaved"), fw)
    keep = np.isin(g["zero"], fw.zero_stages) & (g["pp"] > 1) & (g["vp"] > 1)
    g = {k: v[keep] for k, v in g.items()}
    step, mem, *_ = _price(llama3_8b(), sysm, DEFAULT, g, None, "adam", "torchtitan")
    assert len(mem) >= 10
    for i in np.random.default_rng(0).choice(len(mem), 10, replace=False):
        est = estimate(llama3_8b(), _config(g, i, "torchtitan", True, None, None, Pins(),
                                            llama3_8b()), sysm, tp_overlap=bool(g["tpov"][i]))
        assert est.memory_per_gpu_bytes == pytest.approx(mem[i], rel=1e-12)

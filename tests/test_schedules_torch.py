"""Our action tables against torch.distributed.pipelining's own (its schedule visualizer),
action for action. Skips cleanly without torch."""
import pytest

pytest.importorskip("torch")
from torch.distributed.pipelining._schedule_visualizer import get_schedule_ops  # noqa: E402

from ledger.pipeline import build

KIND = {"FORWARD": "F", "FULL_BACKWARD": "B", "BACKWARD_INPUT": "I", "BACKWARD_WEIGHT": "W"}
SHAPES = [(2, 4), (3, 6), (4, 8), (4, 16), (8, 16)]


def torch_table(name, p, m, v):
    ops = get_schedule_ops(name, p, m, num_stages_per_rank=v if v > 1 else None)
    return [[(KIND[a.computation_type.name], a.microbatch_index, a.stage_index)
             for a in row if a is not None and a.computation_type.name in KIND]
            for row in ops]


def ours(kind, p, m, v):
    return [[(a.kind, a.mb, a.stage) for a in row] for row in build(kind, p, m, v).ranks]


@pytest.mark.parametrize("p,m", SHAPES)
@pytest.mark.parametrize("name,kind,v", [
    ("GPipe", "gpipe", 1), ("Interleaved1F1B", "interleaved", 2),
    ("Interleaved1F1B", "interleaved", 3), ("InterleavedZeroBubble", "interleaved-zb", 2),
    ("ZBVZeroBubble", "zb-v", 2),
])
def test_same_actions_as_pytorch(name, kind, v, p, m):
    assert ours(kind, p, m, v) == torch_table(name, p, m, v)


@pytest.mark.parametrize("p,m", SHAPES)
def test_pytorch_1f1b_table_drops_the_last_ranks_first_forward(p, m):
    """PyTorch 2.13's Schedule1F1B table matches ours on every rank but the last, where it
    starts at F1 and invents an F{m} (a micro-batch that does not exist). The runtime
    executes differently from the table; the table is what the visualizer shows."""
    theirs, mine = torch_table("1F1B", p, m, 1), ours("1f1b", p, m, 1)
    assert theirs[:-1] == mine[:-1]
    last = [a for a in theirs[-1] if a[0] == "F"]
    assert last[0] == ("F", 1, p - 1) and ("F", m, p - 1) in last
    assert ("F", 0, p - 1) not in last and mine[-1][0] == ("F", 0, p - 1)

"""Pipeline schedules: closed forms reproduced by simulation, over ranges of p, m, v."""
import json
import xml.etree.ElementTree as ET
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.cli import main
from ledger.errors import LedgerError
from ledger.pipeline import DUAL, KINDS, SPLIT_BACKWARD, Costs, build, simulate

P = st.integers(2, 16)
M = st.integers(1, 64)
TIME = st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0])


@settings(max_examples=60, deadline=None)
@given(p=P, m=M, tf=TIME, tb=TIME, kind=st.sampled_from(["gpipe", "1f1b"]))
def test_gpipe_and_1f1b_bubble(p, m, tf, tb, kind):
    """(p-1)/(m+p-1) of the step, whatever t_f and t_b (Huang 2019; Narayanan 2021)."""
    sim = simulate(build(kind, p, m), Costs(tf, tb))
    assert sim.bubble_fraction == pytest.approx((p - 1) / (m + p - 1))
    assert sim.makespan == pytest.approx((m + p - 1) * (tf + tb))


@settings(max_examples=60, deadline=None)
@given(p=P, m=M)
def test_peak_inflight_1f1b_vs_gpipe(p, m):
    assert simulate(build("1f1b", p, m)).peak_inflight == [min(p - i, m) for i in range(p)]
    assert simulate(build("gpipe", p, m)).peak_inflight == [m] * p


@settings(max_examples=60, deadline=None)
@given(p=P, k=st.integers(1, 4), v=st.integers(2, 4), tf=TIME, tb=TIME)
def test_interleaved_bubble(p, k, v, tf, tb):
    """((p-1)/v) / (m + (p-1)/v) when m is a multiple of p (Narayanan et al. 2021)."""
    m = k * p
    sim = simulate(build("interleaved", p, m, v), Costs(tf, tb))
    b = (p - 1) / v
    assert sim.bubble_fraction == pytest.approx(b / (m + b))


@settings(max_examples=60, deadline=None)
@given(p=P, extra=st.integers(0, 48), tf=TIME, ti=TIME, tw=TIME)
def test_zb_h1_bubble_and_memory(p, extra, tf, ti, tw):
    """Qi et al. 2023, sec. 2.1: ZB-H1's bubble is (p-1)(T_F + T_B - T_W) (T_B the
    input-gradient pass) against 1F1B's (p-1)(T_F + T_B + T_W). Their formula holds while
    T_W <= min(T_F, T_B); a longer W cannot shorten the fill of F's or the drain of B's
    below (p-1) max(T_F, T_B). Peak activations never exceed 1F1B's first stage.
    (With m < p there are too few W's to fill anything.)"""
    m = p + extra
    sim = simulate(build("zb-h1", p, m), Costs(tf, ti + tw, ti, tw))
    bubble = sim.makespan - m * (tf + ti + tw)
    assert bubble == pytest.approx((p - 1) * max(tf + ti - tw, tf, ti))
    if tw <= min(tf, ti):
        assert bubble == pytest.approx((p - 1) * (tf + ti - tw))  # the paper's form
    assert max(sim.peak_inflight) <= min(p, m)
    one_f = simulate(build("1f1b", p, m), Costs(tf, ti + tw))
    if tf == ti == tw:  # a third of 1F1B's bubble
        assert bubble == pytest.approx((one_f.makespan - m * 3 * tf) / 3)


@settings(max_examples=60, deadline=None)
@given(p=P, extra=st.integers(0, 40), t=TIME)
def test_zb_v_only_the_fill_remains(p, extra, t):
    """Qi et al. 2023, sec. 6: with T_F = T_B = T_W and m >= 2p - 1, ZB-V leaves each rank
    idle only for the first micro-batch's walk down the V's first arm, (p-1) chunk
    forwards = (p-1) T_F / 2 - the bubble that skipping the optimizer's synchronisation
    (their sec. 5) removes; peak activations equal 1F1B's first stage on every rank."""
    m = 2 * p - 1 + extra
    sim = simulate(build("zb-v", p, m, 2), Costs(t, 2 * t, t, t))
    assert sim.makespan - m * 3 * t == pytest.approx((p - 1) * t / 2)
    assert sim.peak_inflight == [p] * p


@settings(max_examples=40, deadline=None)
@given(p=P, k=st.integers(1, 4), v=st.integers(1, 4),
       kind=st.sampled_from([k for k in KINDS if k not in DUAL]))
def test_every_schedule_runs_each_pass_once_on_its_rank(p, k, v, kind):
    """Every single-chain schedule (DualPipe's own check: tests/test_dualpipe.py)."""
    v = {"gpipe": 1, "1f1b": 1, "zb-h1": 1, "zb-v": 2}.get(kind, max(v, 2))
    m = k * p
    s = build(kind, p, m, v)
    seen = Counter()
    for r, acts in enumerate(s.ranks):
        for a in acts:
            assert s.rank_of(a.stage) == r
            seen[(a.kind, a.mb, a.stage)] += 1
    kinds = ("F", "I", "W") if kind in SPLIT_BACKWARD else ("F", "B")
    assert seen == Counter({(x, i, st_): 1 for x in kinds for i in range(m)
                            for st_ in range(p * v)})
    sim = simulate(s)  # no deadlock, and every dependency met in time
    end = {(t.action.kind, t.action.mb, t.action.stage): t.end for row in sim.timeline
           for t in row}
    for row in sim.timeline:
        for t in row:
            a = t.action
            if a.kind == "F" and a.stage > 0:
                assert t.start >= end[("F", a.mb, a.stage - 1)]
            if a.kind in ("B", "I") and a.stage < p * v - 1:
                assert t.start >= end[(a.kind, a.mb, a.stage + 1)]


def test_p2p_latency_stretches_the_step():
    base = simulate(build("1f1b", 4, 8), Costs(1, 2))
    slow = simulate(build("1f1b", 4, 8), Costs(1, 2, p2p_s=0.25))
    assert slow.makespan > base.makespan


@pytest.mark.parametrize("kind,p,m,v,field", [
    ("interleaved", 4, 6, 2, "num_microbatches"), ("interleaved", 4, 8, 1, "vp"),
    ("zb-v", 4, 8, 3, "vp"), ("1f1b", 4, 8, 2, "vp"), ("gpipe", 0, 8, 1, "pp"),
    ("nope", 4, 8, 1, "schedule"),
])
def test_refused(kind, p, m, v, field):
    with pytest.raises(LedgerError) as e:
        build(kind, p, m, v)
    assert e.value.field == field


# ---- the CLI ---------------------------------------------------------------------
def test_schedule_json(capsys):
    assert main(["schedule", "1f1b", "--pp", "4", "--microbatches", "8", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["bubble_fraction"] == pytest.approx(3 / 11)
    assert d["makespan"] == 33 and d["peak_inflight"] == [4, 3, 2, 1]


@pytest.mark.parametrize("argv", [["1f1b", "--pp", "4", "--microbatches", "8"],
                                  ["interleaved", "--pp", "4", "--microbatches", "8", "--vp", "2"],
                                  ["zb-v", "--pp", "4", "--microbatches", "8", "--tB", "1",
                                   "--tW", "1"]])
def test_schedule_svg_and_text(tmp_path, capsys, argv):
    svg = tmp_path / "t.svg"
    assert main(["schedule", *argv, "--svg", str(svg)]) == 0
    out = capsys.readouterr().out
    assert out.count("\nrank ") == 4
    root = ET.parse(svg).getroot()
    rects = [e for e in root.iter() if e.tag.endswith("rect")]
    s = build(argv[0], 4, 8, 2 if argv[0] != "1f1b" else 1)
    assert len(rects) == 1 + 4 + sum(len(r) for r in s.ranks)  # page, 4 rows, one per pass


def test_schedule_bad_time(capsys):
    assert main(["schedule", "1f1b", "--pp", "4", "--microbatches", "8", "--tf", "-1"]) == 2
    assert "tf" in capsys.readouterr().err


@pytest.mark.parametrize("kind", KINDS)
def test_closed_form_inflight_equals_the_simulator(kind):
    from ledger.pipeline import inflight_closed
    for p in range(2, 9):
        for m in range(1, 33):
            for v in {"gpipe": [1], "1f1b": [1], "zb-h1": [1], "zb-v": [2], "dualpipe": [2],
                      "dualpipev": [2]}.get(kind, [2, 3, 4]):
                if kind.startswith("interleaved") and m % p:
                    continue
                if kind in DUAL and (m < 2 * p or kind == "dualpipe" and (p % 2 or m % 2)):
                    continue
                sim = simulate(build(kind, p, m, v))
                assert sim.peak_inflight == [float(inflight_closed(kind, r, p, m, v))
                                             for r in range(p)], (kind, p, m, v)


def test_megatron_microbatch_groups():
    """--microbatch-group-size-per-virtual-pipeline-stage: Megatron's own example
    (model_parallel_config.py L441-449 @d98e8a64, PP 2, VP 2, group 3, 5 micro-batches:
    rank 0 runs forwards 0 1 2 0 1 2 3 4 3 4 - three through its first chunk, three through
    its second, then the last two through each); the warm-up (v-1) group + 2 (pp-1-r)
    (schedules.py L959-965) sets the peak: rank 0 five warm-up forwards and one more
    (3 stages' worth), rank 1 three and one more (2). A group outside pp..m, or a last remainder in 1..pp-1, is
    refused as Megatron refuses it (schedules.py L1160-1180)."""
    from ledger.pipeline import inflight_closed, placement_pipeline

    ranks = build("interleaved", 2, 5, 2, group=3).ranks
    fwd = [a for a in ranks[0] if a.kind == "F"]
    assert [a.mb for a in fwd] == [0, 1, 2, 0, 1, 2, 3, 4, 3, 4]
    assert [a.stage for a in fwd] == [0, 0, 0, 2, 2, 2, 0, 0, 2, 2]
    sim = simulate(build("interleaved", 2, 5, 2, group=3), Costs(1, 2))
    assert list(sim.peak_inflight) == [3.0, 2.0]
    assert [float(inflight_closed("interleaved", r, 2, 5, 2, 3)) for r in (0, 1)] == [3.0, 2.0]
    assert placement_pipeline("interleaved", 4, 5, 2, 5)[1] == tuple(
        float(inflight_closed("interleaved", r, 4, 5, 2, 5)) for r in range(4))
    for p, m, g in ((2, 5, 1), (2, 5, 6), (4, 7, 5), (2, 5, 2)):
        with pytest.raises(LedgerError, match="vp_group"):
            build("interleaved", p, m, 2, group=g)
    with pytest.raises(LedgerError, match="vp_group"):
        build("1f1b", 2, 4, 1, group=2)

"""Edge input to the pipeline: zb-v's two stages per rank, a schedule the framework lacks
refused, a billion micro-batches priced in bounded work (past the pass limit the bubble
comes from two short simulations, equal to simulating every micro-batch), one micro-batch
warned of."""
import pytest

from ledger.pipeline import Costs, build, simulate
from ledger.pipeline import simulator as pipeline
from test_bad_input import run, strict_json


def test_zb_v_without_vp_means_its_two_stages_per_rank():
    code, out, err = run(["report", "llama3-8b", "--schedule", "zb-v", "--pp", "4",
                          "--microbatches", "8", "--framework", "torchtitan", "--json"])
    assert code == 0 and err == ""
    assert strict_json(out)["config"]["vp"] == 2


def test_a_schedule_the_framework_lacks_is_refused():
    """Megatron-Core runs 1F1B and interleaved 1F1B only (schedules.py L161-168)."""
    code, out, err = run(["report", "llama3-8b", "--schedule", "zb-v", "--pp", "4",
                          "--microbatches", "8"])
    assert code == 2 and out == ""
    assert err.strip() == ("error: schedule: megatron runs the pipeline schedules 1f1b, "
                           "interleaved, not zb-v; --framework ideal or torchtitan prices the "
                           "others")


def test_a_billion_microbatches_priced_in_bounded_work():
    """1F1B's bubble is (p-1)/(m+p-1) (Narayanan et al. 2021, sec. 2.2.1): 3/(1e9 + 3)."""
    code, out, err = run(["report", "llama3-8b", "--pp", "4", "--microbatches", "1000000000",
                          "--json"])
    assert code == 0 and err == ""
    d = strict_json(out)
    assert d["bubble_fraction"] == pytest.approx(3 / (1e9 + 3), rel=1e-12)
    assert d["peak_inflight"] == [4, 3, 2, 1]  # 1F1B: rank r holds p - r


def test_one_microbatch_warns_that_the_pipeline_idles():
    code, out, err = run(["report", "llama3-8b", "--pp", "4"])
    assert code == 0
    assert err == ("warning: microbatches(1) on pp(4) leaves the pipeline 75% idle; raise "
                   "--microbatches or --global-batch\n")  # 1F1B: (p-1)/(m+p-1) = 3/4


KINDS_V = [("gpipe", 1), ("1f1b", 1), ("zb-h1", 1), ("interleaved", 2), ("interleaved", 3),
           ("interleaved-zb", 2), ("zb-v", 2)]


@pytest.mark.parametrize("kind,v", KINDS_V)
@pytest.mark.parametrize("p", [2, 3, 4, 6])
def test_steady_line_equals_full_simulation(monkeypatch, kind, v, p):
    """Past the pass limit the placement's bubble comes from two short simulations;
    with the limit lowered, that must equal simulating every micro-batch."""
    monkeypatch.setattr(pipeline, "MAX_PASSES", pipeline.passes(kind, p, 3 * p, v))
    for m in (4 * p, 7 * p, 12 * p):
        full = simulate(build(kind, p, m, v), Costs(1.0, 2.0))
        bubble, inflight = pipeline.placement_pipeline(kind, p, m, v)
        assert bubble == pytest.approx(full.bubble_fraction, rel=1e-12, abs=1e-15)
        assert list(inflight) == full.peak_inflight


@pytest.mark.parametrize("costs", [Costs(1, 2), Costs(1, 3, p2p_s=0.3),
                                   Costs(2, 3, 1.0, 2.0, 0.1), Costs(1, 2, p2p_s=3.0)])
@pytest.mark.parametrize("p,v", [(2, 2), (3, 2), (4, 3), (5, 2)])
def test_steady_line_of_interleaved_zb_with_latency(monkeypatch, costs, p, v):
    """The time model simulates interleaved-zb (no closed form); its bounded makespan."""
    monkeypatch.setattr(pipeline, "MAX_PASSES", pipeline.passes("interleaved-zb", p, 3 * p, v))
    for m in (5 * p, 9 * p):
        full = simulate(build("interleaved-zb", p, m, v), costs).makespan
        assert pipeline.makespan_bounded("interleaved-zb", p, m, v, costs) == \
            pytest.approx(full, rel=1e-12)

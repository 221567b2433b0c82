"""benchmarks/fit.py stages 3 to 5 (ledger.render.bridge_fit, ledger.render.fit_rounds): a
whole grid priced in one time-model call per row gives, point by point, the very floats one
call per point gives; the edge rule and the rounds' ends on rankings written by hand."""
from dataclasses import replace
from itertools import product

from ledger.render import fit_rounds
from ledger.render.bridge_fit import (HOST_AXES, _errors, fit_grace, fit_host, fit_share,
                                     grace_score, host_landscape, host_score, share_score)
from ledger.render.fit_rounds import Constants, beyond, rounds, search
from ledger.step import DEFAULT

# a sample of stage 3's grid, every axis's ends and an inner point, and other constants
# than the shipped held (stages 4 and 5's, as a round holds them)
HOST_SAMPLE = ((0.0, 3e-3, 7e-3), (0.0, 6e-3), (1e-3, 8e-3), (1e-4, 4e-4), (0.0, 4.5e-3))
HELD = replace(DEFAULT, grouped_gemm_share=0.7, grace_host_scale=1.25)
SHARES = {"b200": 0.56, "gb200": 0.56, "b300": 0.56 * 1.2, "gb300": 0.56 * 1.2}


def test_stage_3s_grid_in_one_call_per_row_is_each_points_own_score():
    ranked = fit_host(HOST_SAMPLE, cal=HELD, shares=SHARES)
    assert len(ranked) == 48
    for mean, worst, *point in ranked:
        assert (mean, worst) == host_score(*point, cal=HELD, shares=SHARES)[:2], point
    assert [p[2:] for p in ranked] == [p[2:] for p in sorted(ranked)]


def test_the_landscape_in_one_call_per_row_is_each_points_own_errors():
    ids, errs = host_landscape(HOST_SAMPLE[:2] + ((4e-3,), (3e-4,), (4.5e-3,)))
    assert len(ids) == len(next(iter(errs.values()))) >= 30
    for p, e in errs.items():
        assert e == _errors(replace(DEFAULT, **dict(zip(HOST_AXES, p)))), p


def test_stage_4s_grid_in_one_call_per_row_is_each_points_own_score():
    cal = replace(DEFAULT, host_block_s=5e-3, host_moe_s=1e-3, host_expert_s=4e-4,
                  grace_host_scale=1.25)
    grid = ((0.40, 0.52, 0.80), (1.0, 0.6), (1.0, 1.35, 1.5))
    ranked = fit_share(*grid, cal=cal)
    assert len(ranked) == 18
    for mean, worst, share, grouped, ultra in ranked:
        assert (mean, worst) == share_score(share, grouped, ultra, cal)[:2]


def test_stage_5_holds_the_shares_it_is_given():
    one = fit_grace((1.0, 1.5), cal=HELD, shares=SHARES)
    assert {x: (m, w) for m, w, x in one} == {
        x: grace_score(x, HELD, SHARES)[:2] for x in (1.0, 1.5)}
    assert one != fit_grace((1.0, 1.5), cal=HELD)  # the shipped shares price otherwise


def test_the_edge_rule_adds_one_outermost_step_within_the_bounds():
    host = (0.0, 5e-4, 1e-3, 2e-3)
    assert beyond(host, 2e-3, (0.0, None)) == 3e-3  # top: one step of 1 ms past it
    assert beyond(host, 1e-3, (0.0, None)) is None  # bracketed
    assert beyond(host, 0.0, (0.0, None)) is None  # the 0 s floor
    assert beyond((1e-3, 2e-3, 4e-3), 1e-3, (0.0, None)) == 0.0
    assert beyond((2e-3, 5e-3), 2e-3, (0.0, None)) == 0.0  # -1 ms, capped at the floor
    assert beyond((1e-4, 2e-4, 3e-4, 4e-4), 4e-4, (0.0, None)) == 5e-4  # not 5.000...1e-4
    assert beyond((0.76, 0.78, 0.80), 0.80, (0.0, 1.0)) == 0.82
    assert beyond((0.90, 0.95, 1.0), 1.0, (0.0, 1.0)) is None  # a share's peak
    assert beyond((1.0, 0.9, 0.5), 0.5, (0.0, 1.0)) == 0.1  # a descending axis: its low end
    assert fit_rounds._with((1.0, 0.9, 0.5), 0.1) == (1.0, 0.9, 0.5, 0.1)


def _bowl(centre):
    """A ranking on any grid: |x - centre| + |y - centre|, best first."""
    return lambda grids: sorted((abs(x - centre) + abs(y - centre), 0.0, x, y)
                                for x, y in product(*grids))


def test_a_stage_extends_its_grid_until_the_argmin_is_bracketed():
    st = search(_bowl(5.0), ((0.0, 1.0, 2.0), (1.0, 2.0, 3.0)), ((0.0, None),) * 2, ("x", "y"))
    assert st.best == (5.0, 5.0) and st.edges == ()
    assert st.grids == ((0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0), (1.0, 2.0, 3.0, 4.0, 5.0, 6.0))
    assert st.added[:2] == (("x", 3.0), ("y", 4.0))
    # a minimum below the floor stops there, bracketed by the bound
    st = search(_bowl(-3.0), ((2.0, 3.0), (1.0, 2.0)), ((0.0, None),) * 2, ("x", "y"))
    assert st.best == (0.0, 0.0) and st.edges == ()
    # one far away: MAX_EXTENSIONS points, then the axes still on the edge are named
    st = search(_bowl(100.0), ((0.0, 1.0), (0.0, 1.0)), ((0.0, None),) * 2, ("x", "y"))
    assert len(st.added) == fit_rounds.MAX_EXTENSIONS and st.edges == ("x", "y")


def _toy(monkeypatch, block_of_share, share_of_block, best_grace=1.0):
    """Stages on small grids coupled as a toy: stage 3's best block from the held Blackwell
    share, stage 5's best scale fixed, stage 4's best share from the held block."""
    def host(grids, cal, shares):
        b = block_of_share(shares["b200"])
        return sorted((abs(p[0] - b) + abs(cal.grace_host_scale - best_grace), 0.0, *p)
                      for p in product(*grids))

    def share(*grids, cal):
        x = share_of_block(cal.host_block_s)
        return sorted((abs(p[0] - x), 0.0, *p) for p in product(*grids))

    monkeypatch.setattr(fit_rounds, "fit_host", host)
    monkeypatch.setattr(fit_rounds, "fit_share", share)
    grids = {"host": ((1.0, 2.0, 3.0), (0.0,), (0.0,), (0.0,), (0.0,)),
             "share": ((0.4, 0.5, 0.6, 0.7), (0.6,), (1.3,)), "grace": ((0.5, 1.0, 1.5, 2.0),)}
    start = Constants((2.0, 0.0, 0.0, 0.0, 0.0), 0.5, 0.6, 1.3, 1.0)
    return start, grids


def test_rounds_end_at_a_fixed_point_a_cycle_or_the_cap(monkeypatch):
    # stage 3 always answers block 1 and scale 1.5, stage 4 always 0.6: round 1 moves all
    # three, round 2 nothing
    start, grids = _toy(monkeypatch, lambda x: 1.0, lambda b: 0.6, best_grace=1.5)
    out = list(rounds(start, grids))
    assert [r.end for r in out] == [None, "fixed point"]
    assert set(out[0].changed) == {"host_block_s", "blackwell_share", "grace_host_scale"}
    assert out[1].changed == ()
    c = out[-1].constants
    assert (c.host[0], c.share, c.grace) == (1.0, 0.6, 1.5)
    # each answers the other's last move: (2, 0.5) -> (1, 0.6) -> (2, 0.5), the start
    start, grids = _toy(monkeypatch, lambda x: 1.0 if x == 0.5 else 2.0,
                        lambda b: 0.6 if b == 1.0 else 0.5)
    out = list(rounds(start, grids))
    assert [r.end for r in out] == [None, "cycle"] and out[-1].cycle == (0, 1, 2)
    assert out[-1].constants == start
    assert [r.end for r in rounds(start, grids, max_rounds=1)] == ["cap"]


def test_stages_3_and_5_search_together(monkeypatch):
    """Two valleys: at scale 1 stage 3's best block is 1 (mean 0.05), at scale 2 it is 3
    (mean 0.02) - a stage 3 held at scale 1 stays at block 1, the joint search over every
    scale finds (3, 2), and stage 5's ranking lists each scale's best (2 on the edge of its
    axis: 3 is added and ranks last)."""
    def host(grids, cal, shares):
        b, floor = {1.0: (1.0, 0.05), 2.0: (3.0, 0.02)}.get(cal.grace_host_scale, (3.0, 0.5))
        return sorted((floor + abs(p[0] - b), 0.0, *p) for p in product(*grids))

    monkeypatch.setattr(fit_rounds, "fit_host", host)
    grids = {"host": ((1.0, 2.0, 3.0), (0.0,), (0.0,), (0.0,), (0.0,)),
             "grace": ((1.0, 2.0),)}
    start = Constants((1.0, 0.0, 0.0, 0.0, 0.0), 0.5, 0.6, 1.3, 1.0)
    assert host(grids["host"], start.cal(), start.shares())[0][2] == 1.0
    h, g = fit_rounds.joint(start, grids)
    assert h.best == (3.0, 0.0, 0.0, 0.0, 0.0) and g.best == (2.0,)
    assert g.ranking == [(0.02, 0.0, 2.0), (0.05, 0.0, 1.0), (0.5, 0.0, 3.0)]
    assert g.grids == ((1.0, 2.0, 3.0),) and g.added == (("grace_host_scale", 3.0),)
    assert h.ranking[0] == (0.02, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0)


def test_the_shipped_constants_are_stages_3_to_5s_fixed_point():
    """benchmarks/fit.py: from the shipped constants the first round changes nothing - each
    of stages 3, 4 and 5, on its whole declared grid (extended past an edge by the rule),
    returns the shipped constants first with the others held at them."""
    (first,) = rounds(max_rounds=1)
    assert first.end == "fixed point", first.changed
    assert first.constants == fit_rounds.shipped()
    assert first.host.edges == first.share.edges == first.grace.edges == ()

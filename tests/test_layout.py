"""Rank layout: the closed-form link test agrees with enumerating every group."""
from hypothesis import given
from hypothesis import strategies as st

from ledger.placement import Layout


def test_seed_16_gpu_example():
    """TP 4, DP 2, PP 2 on 2 nodes x 8: rank = tp + 4*dp + 8*pp."""
    lay = Layout(tp=4, dp=2, pp=2)
    assert lay.groups("tp") == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert lay.groups("dp") == [[0, 4], [1, 5], [2, 6], [3, 7], [8, 12], [9, 13], [10, 14],
                                [11, 15]]
    assert lay.groups("pp")[0] == [0, 8]
    assert lay.coords(13) == {"tp": 1, "cp": 0, "dp": 1, "pp": 1}
    assert (lay.link("tp"), lay.link("dp"), lay.link("pp")) == ("nvlink", "nvlink", "ib")


def test_expert_groups_are_carved_from_dp():
    lay = Layout(tp=2, dp=8, ep=4)
    assert lay.groups("ep")[:2] == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert lay.groups("edp")[0] == [0, 8]


@given(tp=st.sampled_from([1, 2, 3, 4, 8]), cp=st.sampled_from([1, 2, 4]),
       dp=st.sampled_from([1, 2, 3, 4]), pp=st.sampled_from([1, 2, 4]),
       gpn=st.sampled_from([1, 2, 4, 8, 16]),
       group=st.sampled_from(["tp", "cp", "dp", "pp", "dp_cp"]))
def test_closed_form_link_matches_enumeration(tp, cp, dp, pp, gpn, group):
    lay = Layout(tp=tp, cp=cp, dp=dp, pp=pp, gpus_per_node=gpn)
    same = all(len({r // gpn for r in g}) == 1 for g in lay.groups(group))
    assert lay.link(group) == ("nvlink" if same else "ib")
    ranks = sorted(r for g in lay.groups(group) for r in g)
    assert ranks == list(range(lay.world))

"""The one calibration fit, in five declared stages (ledger.validation):
1. every (gemm_half_balance, elementwise_traffic) of FIT_GRID priced on Korthikanti et
   al. 2022's eight A100 rows, ranked by mean |error|; the shipped ledger.step.DEFAULT
   is its first line;
2. with those constants, every H100 sustained GEMM share of SHARE_GRID on Megatron-LM's
   H100 table (THE RULE re-run at each point); the shipped
   system.GPUS["h100-sxm"].gemm_efficiency is its first line;
3. with those, every (host_block_s, host_router_s, host_moe_s, host_expert_s, host_stall_s) of
   HOST_GRID - the host's seconds per eager block, per routed expert a GPU holds and per MoE
   forward stopped at its dispatch (ledger.step.host) - on the
   declared Megatron-Bridge calibration rows
   (ledger.validation.bridge.CALIBRATION_RELEASE) that run;
4. with those, every sustained GEMM share of BLACKWELL_SHARE_GRID for the Blackwell
   generation's parts together (B200, B300, GB200, GB300: one figure) with every grouped
   GEMM share of GROUPED_SHARE_GRID (the routed experts' rate over a dense GEMM's, every
   part: ledger.step.Calibration.grouped_gemm_share) and every Blackwell Ultra rate of
   ULTRA_RATE_GRID (B300 and GB300, the sm_103 die, sustain the share times it:
   ledger.system.chips.ULTRA_RATE) on the same calibration release's rows;
5. with those, every Grace host's seconds per eager block over an x86 host's of
   GRACE_HOST_GRID (``Calibration.grace_host_scale``: GB200 / GB300 NVL72 trays and GH200
   run Arm Neoverse V2 hosts, ledger.system.HOST_CPU_SOURCES) on the same calibration rows.
What ships of stages 3 to 5 (ledger.step.DEFAULT's host_*_s, grouped_gemm_share and
grace_host_scale; ledger.system.chips.BLACKWELL_SHARE and ULTRA_RATE) is their fixed point,
the "ship" lines at the end.
Stages 3, 4 and 5 run in rounds to their fixed point (ledger.render.fit_rounds): a round
is stages 3 and 5 as one search (stage 3's grid at every Grace scale of stage 5's:
fit_rounds.joint), then stage 4 holding them, from the shipped constants, until a round
changes nothing - its constants are a fixed point. An argmin on an axis's edge adds one
point past it (one step of the axis's outermost spacing, within the axis's physical
bounds, fit_rounds.BOUNDS) and the search runs again; at most fit_rounds.MAX_ROUNDS
rounds, and a round that repeats an earlier one's constants is reported as a cycle. Each
round prints a line per stage; then each stage's first lines at the end and the constants
to ship against the shipped ones. A stage's grid is priced in one time-model call per row (a few
seconds; render.bridge_fit). tests/test_step.py and tests/test_host.py check that the
shipped constants are stages 1 and 2's first lines and stages 3 to 5's argmin among their
grid neighbours."""
from ledger.render.bridge_fit import BLACKWELL, calibration_rows, edge_limited, grace_score
from ledger.render.fit_rounds import HOST_AXES, rounds, shipped
from ledger.step import DEFAULT
from ledger.system import GPUS
from ledger.validation.bridge import CALIBRATION_RELEASE
from ledger.validation import (FIT_GRID, FIT_SOURCE, SHARE_GRID, SHARE_SOURCE, calibration_set,
                               fit, fit_gemm_share)


def main() -> None:
    rows = [r for r in calibration_set() if r.source == FIT_SOURCE]
    print(f"stage 1: {len(rows)} rows ({FIT_SOURCE}); grid {len(FIT_GRID[0])} x "
          f"{len(FIT_GRID[1])}")
    for mean, worst, w, g in fit()[:5]:
        print(f"gemm_half_balance {w:4.2f}  elementwise_traffic {g:3.1f}  mean |error| {mean:.2%}"
              f"  max {worst:.2%}")
    print(f"shipped: gemm_half_balance {DEFAULT.gemm_half_balance:.2f}  elementwise_traffic "
          f"{DEFAULT.elementwise_traffic:.1f}")
    rows = [r for r in calibration_set() if r.source == SHARE_SOURCE]
    print(f"stage 2: {len(rows)} rows ({SHARE_SOURCE}); grid {SHARE_GRID[0]:.2f} ... "
          f"{SHARE_GRID[-1]:.2f} ({len(SHARE_GRID)} points)")
    for mean, worst, share in fit_gemm_share()[:5]:
        print(f"h100 gemm share {share:4.2f}  mean |error| {mean:.2%}  max {worst:.2%}")
    print(f"shipped: h100-sxm gemm_efficiency {GPUS['h100-sxm'].gemm_efficiency:.2f}")
    rows = calibration_rows()
    print(f"stages 3 -> 4 -> 5: Megatron-Bridge release {CALIBRATION_RELEASE} ({len(rows)} "
          f"rows, {len(_timed())} that run; {' / '.join(BLACKWELL)} "
          f"{sum(r.gpu in BLACKWELL for r, *_ in _timed())}, "
          f"{sum(s.host_cpu == 'grace' for _, _, _, s, *_ in _timed())} on Grace hosts), "
          f"in rounds (stages 3 and 5 as one search, then 4) from the shipped constants")
    for last in rounds():
        print(f"round {last.number}")
        for label, st in (("3", last.host), ("5", last.grace), ("4", last.share)):
            added = "".join(f", +{a} {_v(a, v)}" for a, v in st.added)
            print(f"  stage {label} (grid {' x '.join(str(len(g)) for g in st.grids)}"
                  f"{added}): {_point(st)}  mean |error| {st.ranking[0][0]:.2%}  max "
                  f"{st.ranking[0][1]:.2%}" + (f"  still on the edge: {', '.join(st.edges)}"
                                               if st.edges else ""))
        print("  changed: " + (", ".join(last.changed) or "nothing"))
    if last.end == "fixed point":
        print(f"fixed point: round {last.number} changed nothing")
    elif last.end == "cycle":
        print(f"NO fixed point: a cycle, rounds {last.cycle[0]} ... {last.cycle[-1]} "
              f"(round {last.cycle[0]}'s constants again)")
    else:
        print(f"NO fixed point within {last.number} rounds (the cap)")
    _firsts(last)
    was, now = shipped(), last.constants
    for name, v in now.named().items():
        print(f"ship {name} {_v(name, v)}" + ("" if v == was.named()[name] else
                                              f"  (shipped {_v(name, was.named()[name])})"))
    at = [grace_score(c.grace, c.cal(), c.shares())[:2] for c in (now, was)]
    print(f"the {'fixed point' if last.end == 'fixed point' else 'last round'} "
          f"{'IS' if now == was else 'is NOT'} the shipped set: calibration rows' mean "
          f"|error| {at[0][0]:.2%} (max {at[0][1]:.2%}), shipped {at[1][0]:.2%} "
          f"(max {at[1][1]:.2%})")


def _v(name: str, v: float) -> str:
    return f"{v * 1e3:g} ms" if name in HOST_AXES else f"{v:g}"


def _point(st) -> str:
    from ledger.render.fit_rounds import GRACE_AXES, SHARE_AXES

    names = {1: GRACE_AXES, 3: SHARE_AXES, 5: HOST_AXES}[len(st.best)]
    return "  ".join(f"{n} {_v(n, v)}" for n, v in zip(names, st.best))


def _firsts(last) -> None:
    """Each stage's first lines in the last round (the others held as it held them)."""
    host = last.host.ranking
    edges = edge_limited(host[0][2:], last.host.grids)
    print("stage 3's first lines" + (" (argmin on the grid's edge, not bracketed: "
                                     + ", ".join(edges) + ")" if edges else ""))
    for mean, worst, block, router, moe, expert, stall in host[:5]:
        print(f"host_block_s {block * 1e3:4.2f} ms  host_router_s {router * 1e3:4.1f} ms  "
              f"host_moe_s {moe * 1e3:4.1f} ms  host_expert_s {expert * 1e3:4.2f} ms  "
              f"host_stall_s {stall * 1e3:3.1f} ms  mean |error| {mean:.2%}  max {worst:.2%}")
    print("stage 4's first lines")
    for mean, worst, share, grouped, ultra in last.share.ranking[:5]:
        print(f"blackwell gemm share {share:4.2f}  grouped gemm share {grouped:3.1f}  "
              f"ultra rate {ultra:4.2f}  mean |error| {mean:.2%}  max {worst:.2%}")
    print("stage 5's first lines")
    for mean, worst, g in last.grace.ranking[:5]:
        print(f"grace host scale {g:5.3f}  mean |error| {mean:.2%}  max {worst:.2%}")


def _timed():
    from ledger.render.bridge_fit import _timed_rows

    return _timed_rows()


if __name__ == "__main__":
    main()

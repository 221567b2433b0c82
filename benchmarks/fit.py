"""The one calibration fit, in two declared stages (ledger.validation):
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
   (ledger.validation.bridge.CALIBRATION_RELEASE) that run; the shipped ledger.step.DEFAULT
   is its first line;
4. with those, every sustained GEMM share of BLACKWELL_SHARE_GRID for the Blackwell
   generation's parts together (B200, B300, GB200, GB300: one figure) with every grouped
   GEMM share of GROUPED_SHARE_GRID (the routed experts' rate over a dense GEMM's, every
   part: ledger.step.Calibration.grouped_gemm_share) and every Blackwell Ultra rate of
   ULTRA_RATE_GRID (B300 and GB300, the sm_103 die, sustain the share times it:
   ledger.system.chips.ULTRA_RATE) on the same calibration release's rows; the shipped
   ledger.system.chips.BLACKWELL_SHARE, ULTRA_RATE and grouped_gemm_share are its first
   line;
5. with those, every Grace host's seconds per eager block over an x86 host's of
   GRACE_HOST_GRID (``Calibration.grace_host_scale``: GB200 / GB300 NVL72 trays and GH200
   run Arm Neoverse V2 hosts, ledger.system.HOST_CPU_SOURCES) on the same calibration rows;
   the shipped ledger.step.DEFAULT is its first line.
Stages 3, 4 and 5 each hold the others' shipped figures: the shipped set is a fixed
point of the three (each stage's first line is what ships).
tests/test_step.py and tests/test_host.py check all five still are."""
from ledger.render.bridge_fit import (BLACKWELL, BLACKWELL_SHARE_GRID, GRACE_HOST_GRID,
                                     GROUPED_SHARE_GRID, HOST_GRID, ULTRA_RATE_GRID,
                                     calibration_rows, edge_limited, fit_grace, fit_host,
                                     fit_share)
from ledger.step import DEFAULT
from ledger.system import GPUS
from ledger.system.chips import BLACKWELL_SHARE, ULTRA_RATE
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
    print(f"stage 3: Megatron-Bridge release {CALIBRATION_RELEASE} ({len(rows)} rows, those "
          f"that run); grid {' x '.join(str(len(g)) for g in HOST_GRID)}")
    host = fit_host()
    edges = edge_limited(host[0][2:])
    print("argmin on the grid's edge (not bracketed): " + ", ".join(edges) if edges else
          "argmin bracketed on every axis (a 0 ms floor aside)")
    for mean, worst, block, router, moe, expert, stall in host[:5]:
        print(f"host_block_s {block * 1e3:4.2f} ms  host_router_s {router * 1e3:4.1f} ms  "
              f"host_moe_s {moe * 1e3:4.1f} ms  host_expert_s {expert * 1e3:4.2f} ms  "
              f"host_stall_s {stall * 1e3:3.1f} ms  mean |error| {mean:.2%}  max {worst:.2%}")
    print(f"shipped: host_block_s {DEFAULT.host_block_s * 1e3:.2f} ms  host_router_s "
          f"{DEFAULT.host_router_s * 1e3:.1f} ms  host_moe_s "
          f"{DEFAULT.host_moe_s * 1e3:.1f} ms  host_expert_s {DEFAULT.host_expert_s * 1e3:.2f} ms"
          f"  host_stall_s {DEFAULT.host_stall_s * 1e3:.1f} ms")
    n = sum(r.gpu in BLACKWELL for r, *_ in _timed())
    print(f"stage 4: the same release's rows ({len(_timed())}, {' / '.join(BLACKWELL)} "
          f"{n}); grid {BLACKWELL_SHARE_GRID[0]:.2f} ... {BLACKWELL_SHARE_GRID[-1]:.2f} "
          f"({len(BLACKWELL_SHARE_GRID)} points) x grouped {GROUPED_SHARE_GRID[0]:.1f} ... "
          f"{GROUPED_SHARE_GRID[-1]:.1f} ({len(GROUPED_SHARE_GRID)} points) x ultra "
          f"{ULTRA_RATE_GRID[0]:.2f} ... {ULTRA_RATE_GRID[-1]:.2f} ({len(ULTRA_RATE_GRID)} points)")
    for mean, worst, share, grouped, ultra in fit_share()[:5]:
        print(f"blackwell gemm share {share:4.2f}  grouped gemm share {grouped:3.1f}  "
              f"ultra rate {ultra:4.2f}  mean |error| {mean:.2%}  max {worst:.2%}")
    print(f"shipped: blackwell gemm_efficiency {BLACKWELL_SHARE:.2f}  grouped_gemm_share "
          f"{DEFAULT.grouped_gemm_share:.1f}  ultra_rate {ULTRA_RATE:.2f}")
    n = sum(s.host_cpu == "grace" for _, _, _, s, *_ in _timed())
    print(f"stage 5: the same release's rows, {n} of them on Grace hosts; grid "
          f"{' / '.join(f'{g:g}' for g in GRACE_HOST_GRID)}")
    for mean, worst, g in fit_grace()[:5]:
        print(f"grace host scale {g:5.3f}  mean |error| {mean:.2%}  max {worst:.2%}")
    print(f"shipped: grace_host_scale {DEFAULT.grace_host_scale:.3f}")


def _timed():
    from ledger.render.bridge_fit import _timed_rows

    return _timed_rows()


if __name__ == "__main__":
    main()

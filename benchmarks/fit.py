"""The one calibration fit, in two declared stages (ledger.validation):
1. every (gemm_half_balance, elementwise_traffic) of FIT_GRID priced on Korthikanti et
   al. 2022's eight A100 rows, ranked by mean |error|; the shipped ledger.step.DEFAULT
   is its first line;
2. with those constants, every H100 sustained GEMM share of SHARE_GRID on Megatron-LM's
   H100 table (THE RULE re-run at each point); the shipped
   system.GPUS["h100-sxm"].gemm_efficiency is its first line.
tests/test_step.py checks both still are."""
from ledger.step import DEFAULT
from ledger.system import GPUS
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


if __name__ == "__main__":
    main()

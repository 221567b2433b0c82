"""The one calibration fit: every (gemm_half_balance, elementwise_traffic) of
ledger.validation.FIT_GRID priced on the calibration set (Korthikanti et al. 2022's
eight rows) and ranked by mean |error|. The shipped ledger.step.DEFAULT is the first
line; tests/test_step.py checks it still is."""
from ledger.step import DEFAULT
from ledger.validation import FIT_GRID, calibration_set, fit


def main() -> None:
    rows = calibration_set()
    print(f"calibration set: {len(rows)} rows ({', '.join(sorted({r.source for r in rows}))}); "
          f"grid {len(FIT_GRID[0])} x {len(FIT_GRID[1])}")
    for mean, worst, w, g in fit()[:5]:
        print(f"gemm_half_balance {w:4.2f}  elementwise_traffic {g:3.1f}  mean |error| {mean:.2%}"
              f"  max {worst:.2%}")
    print(f"shipped: gemm_half_balance {DEFAULT.gemm_half_balance:.2f}  elementwise_traffic "
          f"{DEFAULT.elementwise_traffic:.1f}")


if __name__ == "__main__":
    main()

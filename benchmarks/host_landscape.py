"""Which calibration rows pin the host's constants (benchmarks/fit.py stage 3,
ledger.render.bridge_fit): every row's error at every point of HOST_GRID (the other
constants as shipped), stage 3's argmin, and each row whose leaving out moves the argmin,
with every row's error that moves between the two points and both points' mean |error|.
Nothing is fitted here; it reads the landscape stage 3 ranks (seconds)."""
from ledger.render.bridge_fit import host_landscape, pinning_rows


def _ms(point) -> str:
    return "(" + ", ".join(f"{v * 1e3:g}" for v in point) + ") ms"


def main() -> None:
    ids, errs = host_landscape()
    best, pins = pinning_rows(ids, errs)

    def mean(p):
        return sum(abs(e) for e in errs[p]) / len(ids)

    print(f"stage 3 on {len(ids)} rows, {len(errs)} points (host_block_s, host_router_s, "
          f"host_moe_s, host_expert_s, host_stall_s)")
    print(f"argmin {_ms(best)}  mean |error| {mean(best):.2%}")
    if not pins:
        print("no single row moves the argmin")
    for row, p in pins:
        print(f"without {row}: argmin {_ms(p)}, mean |error| of all rows there {mean(p):.2%}")
        moved = sorted(((abs(b) - abs(a), r, a, b) for r, a, b in zip(ids, errs[best], errs[p])
                        if abs(b - a) >= 0.005), reverse=True)
        for d, r, a, b in moved:
            print(f"    {r:<58}{a:+7.1%} -> {b:+7.1%}  (|error| {d * 100:+5.1f} points)")


if __name__ == "__main__":
    main()

"""Wall time of `toys all` (and with ``--verify``, of `verify`) against the launch floor,
measured in the same run.

The baseline is `toys spawn`: import torch, fork 4 ranks, initialise gloo, one
all-reduce. What `all` adds on top is the toys themselves (with their wire runs and
kernel snapshots). Runs alternate, so a slow spell of the machine hits all alike.
"""
import statistics
import subprocess
import sys
import time

RUNS = 7


def wall(args, module="ledger.toys") -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", module, *args], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    with_verify = "--verify" in sys.argv[1:]
    spawn, toys, verify = [], [], []
    for _ in range(RUNS):
        spawn.append(wall(["spawn"]))
        toys.append(wall(["all"]))
        if with_verify:
            verify.append(wall([], "ledger.verify"))
    rows = [("toys all (world 4, gloo)", toys),
            ("spawn baseline (import + fork + init + 1 all-reduce)", spawn)]
    if with_verify:
        rows.insert(1, ("verify (world 4, gloo)", verify))
    for name, xs in rows:
        print(f"{name}: median {statistics.median(xs):.2f} s, min {min(xs):.2f} s "
              f"over {RUNS} runs")
    ratio = statistics.median(toys) / statistics.median(spawn)
    print(f"ratio toys all / spawn baseline (medians) = {ratio:.2f}")
    if with_verify:
        print(f"ratio verify / spawn baseline (medians) = "
              f"{statistics.median(verify) / statistics.median(spawn):.2f}")


if __name__ == "__main__":
    main()

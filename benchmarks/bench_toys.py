"""Wall time of `toys all` against the launch floor, measured in the same run.

The baseline is `toys spawn`: import torch, fork 4 ranks, initialise gloo, one
all-reduce. What `all` adds on top is the toys themselves. Runs alternate, so a
slow spell of the machine hits both alike.
"""
import statistics
import subprocess
import sys
import time

RUNS = 7


def wall(args) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "ledger.toys", *args], check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    spawn, toys = [], []
    for _ in range(RUNS):
        spawn.append(wall(["spawn"]))
        toys.append(wall(["all"]))
    for name, xs in (("toys all (world 4, gloo)", toys),
                     ("spawn baseline (import + fork + init + 1 all-reduce)", spawn)):
        print(f"{name}: median {statistics.median(xs):.2f} s, min {min(xs):.2f} s "
              f"over {RUNS} runs")
    ratio = statistics.median(toys) / statistics.median(spawn)
    print(f"ratio toys all / spawn baseline (medians) = {ratio:.2f}")


if __name__ == "__main__":
    main()

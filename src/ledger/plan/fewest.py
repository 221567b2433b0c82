"""The fewest GPUs on which a model fits: the planner run over growing worlds, from a
closed-form lower bound, over a bounded number of worlds.

The bound is the larger of two floors: the weights at 4 bits over every GPU's HBM
(``lower_bound``), and the whole resident state over HBM plus, where the framework offers
a CPU offload for the run, the node's host share (``floor_gpus``): every byte of it lives
once on some GPU or host (ZeRO-3 shards what TP, PP and EP do not split; anything
replicated only adds). tests/test_plan_speed.py holds the answer to the full sweep's.

>>> from ledger.model import llama3_405b
>>> from ledger.system import system
>>> lower_bound(llama3_405b(), system("h100-sxm"), 0.0, None)  # 405.9e9 x 0.5 B / 80 GiB = 2.4
3
"""
from __future__ import annotations

import math
import time
from dataclasses import replace

from ledger.errors import LedgerError
from ledger.model import ModelSpec
from ledger.plan.search import PlanResult, plan
from ledger.system import System

LEANEST_WEIGHT_BYTES = 0.5  # a parameter held in 4 bits (NVFP4, NF4, INT4): the leanest
# format of the number-format table; a GPU without offload holds its share of every weight
NODE_STEPS = 64  # worlds tried one node at a time past the lower bound, at most
GROWTH = 1.25  # past those, each world a quarter larger (then the gap is bisected)


def lower_bound(model: ModelSpec, system: System, headroom_bytes: float, finetune) -> int:
    """No world smaller than this holds the weights: every weight is on some GPU (unless a
    fine-tune offloads them to the host), in at least LEANEST_WEIGHT_BYTES, and no sharding
    spreads them thinner than evenly over every GPU's HBM less the headroom."""
    if finetune is not None:
        return 1  # ZeRO-Offload / FSDP's CPU offload may keep the weights on the host
    room = system.gpu.hbm_bytes - headroom_bytes
    return max(1, math.ceil(model.params * LEANEST_WEIGHT_BYTES / room)) if room > 0 else 1


def state_floor_bytes(model: ModelSpec, system: System, kw: dict) -> tuple[float, float]:
    """(the whole model's resident state at its leanest ZeRO stage, the host memory per
    GPU it may offload to: 0 unless the framework offers an offload for this run)."""
    from ledger.config import ParallelConfig
    from ledger.frameworks import get
    from ledger.placement import resident_state
    from ledger.placement.tuned import tuned_stage_state

    framework, precision = kw.get("framework", "megatron"), kw.get("precision")
    optimizer, ft = kw.get("optimizer", "adam"), kw.get("finetune")
    fw = get(framework, precision)
    totals = []
    for zero in range(4):
        cfg = ParallelConfig(framework=framework, precision=precision, zero_stage=zero,
                             finetune=ft)
        if ft is None:
            totals.append(resident_state(model, cfg, optimizer).total_bytes)
        else:
            (dense, expert), = tuned_stage_state(model, cfg, fw, optimizer, 1, 1, 1, 1, "1f1b")
            totals.append(dense.total_bytes + expert.total_bytes)
    host = system.host_memory_bytes / system.gpus_per_node if ft is not None and fw.offloads \
        else 0.0
    return min(totals), host


def floor_gpus(model: ModelSpec, system: System, kw: dict) -> int:
    """No world below this many GPUs holds the model's resident state (module docstring)."""
    state, host = state_floor_bytes(model, system, kw)
    return max(1, int(state // (system.gpu.hbm_bytes + host)))  # all of HBM: a floor


def worlds(low: int, node: int, max_gpus: int) -> list[int]:
    """The worlds tried, smallest first: each size to the node, then whole nodes from
    ``low`` on, NODE_STEPS of them, then growing by GROWTH (whole nodes) and every power
    of two nodes, to ``max_gpus``.

    >>> worlds(1, 8, 10_000)[:12]
    [1, 2, 3, 4, 5, 6, 7, 8, 16, 24, 32, 40]
    >>> worlds(20, 8, 1 << 20)[:3], worlds(20, 8, 1 << 20)[64:68]
    ([24, 32, 40], [536, 664, 824, 1024])
    """
    out = [n for n in range(max(low, 1), node + 1)]
    n = max(2 * node, -(-low // node) * node)
    for _ in range(NODE_STEPS):
        if n > max_gpus:
            return [w for w in out if w <= max_gpus]
        out.append(n)
        n += node
    grown = {max_gpus} if max_gpus % node == 0 else set()
    while n <= max_gpus:
        grown.add(n)
        n = max(n + node, int(n * GROWTH) // node * node)
    k = node  # and every power of two nodes: the worlds a power-of-two batch divides
    while k <= max_gpus:
        grown |= {k} if k > out[-1] else set()
        k *= 2
    return [w for w in out + sorted(grown) if w <= max_gpus]


def min_gpus(model: ModelSpec, system: System, global_batch: int, max_gpus: int,
             on_world=None, **kw) -> tuple[int, PlanResult]:
    """The smallest world on which a placement fits, of ``worlds`` from ``lower_bound``
    to ``max_gpus``; where the worlds grow by GROWTH, the gap below the first that fits
    is bisected over whole nodes. (gpus, its plan). ``on_world(gpus, tried, planned)``
    is told of each world before it is planned; ``kw``: ``plan``'s other arguments. A
    world that no placement divides (the global batch over dp) is passed over. The plan
    returned counts the whole sweep: ``evaluated`` and ``elapsed_s`` over every world
    planned, ``worlds`` their number."""
    node = system.gpus_per_node
    low = max(lower_bound(model, system, kw.get("headroom_bytes", 0.0), kw.get("finetune")),
              floor_gpus(model, system, kw))
    tried = worlds(low, node, max_gpus)
    last, found, planned = None, None, 0
    start, sweep = time.perf_counter(), [0, 0]  # placements, worlds planned

    def _plan(model, n, system, global_batch, kw):
        result = _plan_one(model, n, system, global_batch, kw)
        if result is not None:
            sweep[0], sweep[1] = sweep[0] + result.evaluated, sweep[1] + 1
        return result

    for k, n in enumerate(tried):
        if on_world:
            on_world(n, k + 1, len(tried))
        result = _plan(model, n, system, global_batch, kw)
        if result is not None and result.plans:
            found = (k, n, result)
            break
        last = result or last
    if found is None:
        _nothing(system, global_batch, max_gpus, low, last)
    k, n, result = found
    below = tried[k - 1] if k else 0
    lo, hi = below // node, n // node  # whole nodes: lo fails, hi fits
    while n > node and hi - lo > 1:  # the worlds grew past single nodes: bisect the gap
        mid = (lo + hi) // 2
        planned += 1
        if on_world:
            on_world(mid * node, len(tried) + planned, len(tried) + planned)
        r = _plan(model, mid * node, system, global_batch, kw)
        if r is not None and r.plans:
            hi, n, result = mid, mid * node, r
        else:
            lo = mid
    return n, replace(result, evaluated=sweep[0], worlds=sweep[1],
                      elapsed_s=time.perf_counter() - start)


def _plan_one(model, n, system, global_batch, kw):
    try:
        return plan(model, n, system, global_batch, **kw)
    except LedgerError as e:
        if e.field != "gpus":
            raise
        return None


def _nothing(system, global_batch, max_gpus, low, last):
    if last is None:
        raise LedgerError("max_gpus", f"no world of {low}..{max_gpus} GPUs divides "
                                      f"global_batch({global_batch})")
    short = (f"offloads {last.host_shortfall_bytes / 2**30:.2f} GiB more per node than its "
             f"host memory" if last.host_shortfall_bytes > 0 else
             f"needs {last.shortfall_bytes / 2**30:.2f} GiB more per GPU")
    raise LedgerError("max_gpus", f"nothing fits on up to {max_gpus} GPUs of "
                                  f"{system.gpu.name}: at {max_gpus} the leanest placement "
                                  + short)

"""The fewest GPUs on which a model fits: the planner run over growing worlds."""
from __future__ import annotations

from ledger.errors import LedgerError
from ledger.model import ModelSpec
from ledger.plan.search import PlanResult, plan
from ledger.system import System


def min_gpus(model: ModelSpec, system: System, global_batch: int, max_gpus: int,
             **kw) -> tuple[int, PlanResult]:
    """The smallest world on which a placement fits: 1 to the node size, then whole
    nodes, up to ``max_gpus``; (gpus, its plan). ``kw``: ``plan``'s other arguments. A
    world that no placement divides (the global batch over dp) is passed over."""
    node = system.gpus_per_node
    worlds = [n for n in range(1, node + 1)] + list(range(2 * node, max_gpus + 1, node))
    last = None
    for n in (w for w in worlds if w <= max_gpus):
        try:
            result = plan(model, n, system, global_batch, **kw)
        except LedgerError as e:
            if e.field != "gpus":
                raise
            continue
        if result.plans:
            return n, result
        last = result
    if last is None:
        raise LedgerError("max_gpus", f"no world of 1..{max_gpus} GPUs divides "
                                      f"global_batch({global_batch})")
    short = (f"offloads {last.host_shortfall_bytes / 2**30:.2f} GiB more per node than its "
             f"host memory" if last.host_shortfall_bytes > 0 else
             f"needs {last.shortfall_bytes / 2**30:.2f} GiB more per GPU")
    raise LedgerError("max_gpus", f"nothing fits on up to {max_gpus} GPUs of "
                                  f"{system.gpu.name}: at {max_gpus} the leanest placement "
                                  + short)

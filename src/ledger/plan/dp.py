"""The planner's DP seconds: ``ledger.step.dp_split`` of the grid's DP rows
(``ledger.placement.dp_traffic``), priced once per distinct ``DP_COLUMNS`` - what
ledger.plan.search hands each group of candidates it times."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ledger.config import MoESpec
from ledger.placement import Layout, dp_traffic
from ledger.plan.grid_memory import twins
from ledger.plan.rows import present
from ledger.plan.switches import dp_overlaps as _dp_overlaps
from ledger.step import dp_split


# the grid's columns ledger.placement.dp_traffic and ledger.step.dp_split read (through the
# namespace dp_seconds gives them: another field read fails)
DP_COLUMNS = ("tp", "cp", "pp", "dp", "ep", "m", "shard", "zero")


def dp_seconds(model, system, g, fw, st_total, framework, precision, finetune, pins,
               need=None, bucket=None, etp=None, dtypes=None):
    """``ledger.step.dp_split`` of the DP rows (``ledger.placement.dp_traffic``) of the
    candidates ``need`` marks (default all), priced once per distinct ``DP_COLUMNS`` and
    in one call per ZeRO stage, the experts' over the run's ``etp`` (None: tp), in the
    run's state ``dtypes`` (search.DTYPE_FACTS): a function from a group's rows (one ZeRO
    stage) to its seconds."""
    count = len(g["tp"])
    rows = np.arange(count) if need is None else np.flatnonzero(need)
    full = np.zeros((7, count))
    scalar = {}  # per ZeRO stage: those of the seven that are one number (0.0: no call)
    if len(rows):
        sub = {k: g[k][rows] for k in DP_COLUMNS}
        reps, of = twins(sub, DP_COLUMNS)
        u = {k: v[reps] for k, v in sub.items()}
        each = np.zeros((7, len(reps)))
        for zero in present(u["zero"]):  # the stages present
            r = np.flatnonzero(u["zero"] == zero)
            tp, cp, pp, dp, ep, m, shard = (u[k][r] for k in DP_COLUMNS[:-1])
            grad, param = _dp_overlaps(fw, int(zero), pins)
            cfg = SimpleNamespace(
                tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, etp=etp, num_microbatches=m,
                zero_stage=int(zero),
                framework=framework, precision=precision, finetune=finetune, moe=MoESpec(),
                reshard_after_forward=(pp == 1) | (fw.reshard == "always"),
                grad_accumulation=np.where((pp > 1) & fw.unsharded_with_pp, "unsharded",
                                           "sharded"),
                hsdp_shard=shard, grad_replicas=dp * cp, overlap_grad_reduce=grad,
                overlap_param_gather=param, dp_bucket_params=bucket, **(dtypes or {}))
            links = Layout(tp=tp, cp=cp, dp=dp, pp=pp, ep=ep, etp=etp, hsdp_shard=shard,
                           gpus_per_node=system.gpus_per_node,
                           gpus_per_domain=system.gpus_per_domain)
            layer_s, *rest = dp_split(dp_traffic(model, st_total, cfg, links), cfg, system,
                                      model.layers / pp, links)
            values = (*layer_s, *rest)
            scalar[int(zero)] = [None if np.ndim(x) else x for x in values]
            for j, x in enumerate(values):
                each[j, r] = x
        full[:, rows] = each[:, of]

    def of_group(idx):
        zeros = g["zero"][idx]
        flat = scalar[int(zeros[0])] if (zeros == zeros[0]).all() else [None] * 7
        v = [full[j, idx] if flat[j] is None else flat[j] for j in range(7)]
        return tuple(v[:4]), v[4], v[5], v[6]
    return of_group

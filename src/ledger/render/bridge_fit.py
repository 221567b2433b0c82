"""benchmarks/fit.py stage 3: the host's constants (``ledger.step.host``) fitted on the
declared Megatron-Bridge calibration rows (``ledger.validation.bridge.CALIBRATION_RELEASE``),
each row run the way ``ledger.render.bridge.outcome`` runs it, placed once and re-timed at
every grid point."""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from ledger.errors import LedgerError
from ledger.render.bridge import (_Skip, config_of, model_of, precision_of, system_of,
                                  tp_overlap)
from ledger.validation.bridge import BridgeRow, rows


# benchmarks/fit.py stage 3: the host's three constants (ledger.step.host), seconds per
# eager block forward + backward (host_block_s, host_moe_s) and per routed expert a GPU
# holds (host_expert_s), on the declared calibration rows (bridge.CALIBRATION_RELEASE)
HOST_GRID = ((0.0, 2.5e-4, 5e-4, 1e-3, 2e-3),
             (0.0, 2e-3, 4e-3, 6e-3, 8e-3, 1e-2, 1.2e-2, 1.6e-2),
             (0.0, 1e-4, 2e-4, 3e-4, 4e-4, 5e-4, 6e-4, 8e-4))


def calibration_rows() -> list[BridgeRow]:
    return [r for r in rows() if r.role == "calibration"]


@lru_cache(maxsize=1)
def _timed_rows() -> tuple:
    """Each calibration row that runs, placed once: (row, model, cfg, system, structure,
    TP overlap) - the fit re-runs only the time model (``ledger.step.step_times``)."""
    from ledger.step import estimate, structure

    out = []
    for r in (c.as_run() for c in calibration_rows()):
        try:
            model, sysm = model_of(r), system_of(r)
            prec, _ = precision_of(r)
            cfg, _ = config_of(r, prec, model)
            est = estimate(model, cfg, sysm, precision=prec, optimizer="adam",
                           tp_overlap=tp_overlap(r))
        except (_Skip, LedgerError):
            continue
        if r.tokens_per_s_per_gpu:
            out.append((r, model, cfg, sysm, structure(model, cfg, sysm, est.placement),
                        tp_overlap(r)))
    return tuple(out)


def host_score(block_s: float, moe_s: float, expert_s: float,
               cal=None) -> tuple[float, float, int]:
    """(mean |error|, max |error|, rows) of the calibration rows that run, at the host's
    constants (the rest of ``cal``, default the shipped): the same tokens/s/GPU
    ``outcome`` prints, each row placed once."""
    from ledger.step import DEFAULT, step_times

    cal = replace(cal or DEFAULT, host_block_s=block_s, host_moe_s=moe_s,
                  host_expert_s=expert_s)
    errs = []
    for r, model, cfg, sysm, st, ov in _timed_rows():
        step = float(step_times(model, cfg, sysm, st, cal, ov)["step_time_s"])
        tokens = model.seq_len * cfg.micro_batch * cfg.num_microbatches * cfg.dp
        errs.append(abs(tokens / cfg.world / step - r.tokens_per_s_per_gpu)
                    / r.tokens_per_s_per_gpu)
    return sum(errs) / len(errs), max(errs), len(errs)


def fit_host(grid=HOST_GRID, cal=None) -> list[tuple[float, ...]]:
    """Every (mean |error|, max |error|, host_block_s, host_moe_s, host_expert_s) of the
    grid on the calibration rows, best first."""
    from itertools import product

    return sorted((*host_score(b, m, e, cal)[:2], b, m, e) for b, m, e in product(*grid))

"""Interruptions: how often a job stops, how often it should checkpoint, and what the
stops cost in wall time.

Failures are independent and exponential per GPU: a job of N GPUs, each interrupted on
average every ``m`` GPU-seconds, stops every M = m / N seconds. Per-GPU rates published
by runs that said how many GPUs failed over how long (``RATES``):

    Llama 3 (arXiv:2407.21783 sec. 3.3.4): '466 job interruptions' in 'a 54-day snapshot',
        '419 were unexpected', on up to 16,384 H100 (sec. 3.3.1): 16,384 x 54 d / 419
        = 50,677 GPU-hours per interruption, the default
    BLOOM (bigscience tr11-176B-ml chronicles.md L225, 2022): 'Every week or so ... one of
        the gpus dies', 384 A100: 384 x 7 d = 64,512 GPU-hours
    OPT-175B (metaseq projects/OPT/chronicles/final_update.md L28, 2021): '~2 machines go
        down every day' of 124 nodes x 8 A100 (paper sec. 2.4: 992 GPUs): 992 x 24 h / 2
        = 11,904 GPU-hours

A checkpoint that blocks training for C seconds, taken every tau seconds of training:
Young 1974 (CACM 17(9):530) gives tau = sqrt(2 C M) to first order; Daly 2006 (Future
Generation Computer Systems 22(3):303, doi:10.1016/j.future.2004.11.016) the higher-order
optimum

    tau = sqrt(2 C M) [1 + sqrt(C / 2M) / 3 + (C / 2M) / 9] - C     (C < 2M; else tau = M)

whose coefficients reproduce the three optima the paper's figures print for C = 5 min,
R = 10 min: 117 min at M = 24 h, 57 min at M = 6 h, 9.1 min at M = 15 min.

>>> [round(daly_interval_s(300, m) / 60, 1) for m in (86400, 21600, 900)]
[116.7, 56.7, 9.1]

Expected wall time (Daly's complete model): a segment of tau training plus its C
checkpoint completes in M e^(R/M) (e^((tau + C)/M) - 1) seconds on average, when every
failure costs a restart of R seconds that can itself fail (the renewal argument: E =
E[min(X, L)] + P(X < L) (E_R + E) with X exponential of mean M, L = tau + C, and a
restart's own E_R = M (e^(R/M) - 1)). A run of T seconds of training is T / tau segments:

    W = M e^(R/M) (e^((tau + C)/M) - 1) T / tau

The work lost since the last checkpoint is inside it. Interruptions over the run are W / M
(a Poisson process of rate 1/M over W, Wald's identity), goodput T / W.
"""
from __future__ import annotations

import math

from ledger.errors import LedgerError

HOUR = 3600.0
DAY = 86400.0
RATES = {  # per-GPU mean time between interruptions, seconds
    "llama3": 16384 * 54 * DAY / 419,
    "bloom": 384 * 7 * DAY,
    "opt": 992 * DAY / 2,
}
DEFAULT_GPU_MTBF_S = RATES["llama3"]
# Relaunch: MegaScale (arXiv:2402.15627 sec. 6.3): 'The average time required for
# detecting failure and executing diagnostic tests is less than 10 minutes'.
DEFAULT_RELAUNCH_S = 600.0
MAX_EXPONENT = 50.0  # e^50: a run that would take 5e21 times its work is refused


def _s(x: float) -> str:
    return f"{x:,.0f}" if x < 1e9 else f"{x:.3g}"


def job_mtbf_s(gpu_mtbf_s: float, gpus: int) -> float:
    """Mean seconds between interruptions of a job on ``gpus`` GPUs."""
    return gpu_mtbf_s / gpus


def young_interval_s(cost_s: float, mtbf_s: float) -> float:
    """Young 1974: the first-order optimum, sqrt(2 C M).

    >>> young_interval_s(300, 86400) / 60
    120.0
    """
    return math.sqrt(2 * cost_s * mtbf_s)


def daly_interval_s(cost_s: float, mtbf_s: float) -> float:
    """Daly 2006: the higher-order optimum (the module's docstring)."""
    if cost_s >= 2 * mtbf_s:
        return mtbf_s
    x = cost_s / (2 * mtbf_s)
    return young_interval_s(cost_s, mtbf_s) * (1 + math.sqrt(x) / 3 + x / 9) - cost_s


def expected_wall_s(work_s: float, interval_s: float, cost_s: float, restart_s: float,
                    mtbf_s: float) -> float:
    """Daly's expected wall time of ``work_s`` of training checkpointed every
    ``interval_s`` at ``cost_s`` each, ``restart_s`` per failure, one failure per
    ``mtbf_s`` (the module's docstring).

    >>> round(expected_wall_s(100.0, 10.0, 1.0, 5.0, 1e12), 6)  # no failures: T (1 + C/tau)
    110.0
    """
    exponent = (interval_s + cost_s) / mtbf_s + restart_s / mtbf_s
    if exponent > MAX_EXPONENT:
        raise LedgerError("failures", (
            f"the job stops every {_s(mtbf_s)} s but a checkpoint interval, its write and "
            f"a restart take {_s(interval_s + cost_s + restart_s)} s: it would never "
            f"finish (e^{_s(exponent)} times its work); fewer GPUs, a higher "
            f"--gpu-mtbf-hours, or a shorter --ckpt-interval"))
    segment = mtbf_s * math.exp(restart_s / mtbf_s) * math.expm1((interval_s + cost_s) / mtbf_s)
    return segment * work_s / interval_s

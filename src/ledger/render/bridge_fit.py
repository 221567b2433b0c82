"""benchmarks/fit.py stages 3 to 5 on the declared Megatron-Bridge calibration rows
(``ledger.validation.bridge.CALIBRATION_RELEASE``): the host's constants
(``ledger.step.host``), then each Blackwell part's sustained GEMM share
(``ledger.system.GPU.gemm_efficiency``), then a Grace host's seconds over an x86 host's
(``Calibration.grace_host_scale``) - each row run the way
``ledger.render.bridge.outcome`` runs it, placed once and re-timed at every grid point.
A stage's whole grid is one call of the time model per row: the constants it fits are
arrays over the grid's points (``ledger.step.step_times`` prices arrays of placements the
same way), which prints the same figures as one call per point (tests/test_fit_rounds.py);
``ledger.render.fit_rounds`` iterates stages 3, 4 and 5 to their fixed point."""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from itertools import product

import numpy as np

from ledger.errors import LedgerError
from ledger.render.bridge import (_Skip, config_of, model_of, precision_of, system_of,
                                  tp_overlap)
from ledger.validation.bridge import BridgeRow, rows


# benchmarks/fit.py stage 3: the host's five constants (ledger.step.host), seconds per
# eager block forward + backward - an attention block, dense MLP or Mamba mixer
# (host_block_s), a MoE router with its preprocessing (host_router_s), the rest of a MoE
# block (host_moe_s) - per routed expert a GPU holds (host_expert_s), and what a MoE
# layer's forward loses at a dispatch the host cannot run through (host_stall_s: combined
# 1F1B's schedule nodes, DeepEP's normal dispatch), on the declared calibration rows
# (bridge.CALIBRATION_RELEASE); 4,500 points (the ms of the old four's argmin, 2 / 4 / 6 /
# 0.2, among them; the block axis to 7 ms and the MoE axis down to 1 ms, past the 5 ms
# and 2 ms the 2,800-point grid's argmin sat at, its edges). ``edge_limited`` names an
# argmin on an edge of its axis
HOST_GRID = ((0.0, 5e-4, 1e-3, 2e-3, 3e-3, 4e-3, 5e-3, 6e-3, 7e-3),
             (0.0, 1e-3, 2e-3, 4e-3, 6e-3),
             (1e-3, 2e-3, 4e-3, 6e-3, 8e-3),
             (1e-4, 2e-4, 3e-4, 4e-4),
             (0.0, 3e-3, 4.5e-3, 6e-3, 7.5e-3))


HOST_AXES = ("host_block_s", "host_router_s", "host_moe_s", "host_expert_s", "host_stall_s")


def edge_limited(point, grid=HOST_GRID, names=HOST_AXES) -> list[str]:
    """The axes whose value in ``point`` is an edge of ``grid``'s axis - not bracketed, so
    the fit may want a value beyond it - a 0 s floor aside (no host time is negative)."""
    return [n for n, v, axis in zip(names, point, grid)
            if v == max(axis) or (v == min(axis) and v > 0)]


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


def _errors(cal, shares: dict | None = None, gpu: str | None = None) -> list[float]:
    """(predicted - published) / published tokens/s/GPU of the calibration rows that run
    (those of ``gpu`` only, if named), at the time model's constants ``cal`` and the GEMM
    shares ``shares`` (GPU preset -> share; the others as shipped)."""
    from ledger.step import step_times

    errs = []
    for r, model, cfg, sysm, st, ov in _timed_rows():
        if gpu is not None and sysm.gpu.name != gpu:
            continue
        if shares and sysm.gpu.name in shares:
            sysm = replace(sysm, gpu=replace(sysm.gpu, gemm_efficiency=shares[sysm.gpu.name]))
        step = float(step_times(model, cfg, sysm, st, cal, ov)["step_time_s"])
        tokens = model.seq_len * cfg.micro_batch * cfg.num_microbatches * cfg.dp
        errs.append((tokens / cfg.world / step - r.tokens_per_s_per_gpu)
                    / r.tokens_per_s_per_gpu)
    return errs


def _score(cal, shares: dict | None = None) -> tuple[float, float, int]:
    """(mean |error|, max |error|, rows) of ``_errors`` at ``cal`` and ``shares``."""
    return _summary(_errors(cal, shares))


def _summary(errs) -> tuple[float, float, int]:
    errs = [abs(e) for e in errs]
    return sum(errs) / len(errs), max(errs), len(errs)


def _errors_at(cal, shares: dict | None, n: int) -> list[list[float]]:
    """``_errors`` at each of ``n`` points at once: ``cal``'s fields and ``shares``' values
    may be arrays of ``n`` (one per point); one time-model call per row, each point's errors
    the same floats ``_errors`` returns for it (elementwise IEEE arithmetic, the rows summed
    in the same order by ``_summary``)."""
    from ledger.step import step_times

    cols = []
    for r, model, cfg, sysm, st, ov in _timed_rows():
        if shares and sysm.gpu.name in shares:
            sysm = replace(sysm, gpu=replace(sysm.gpu, gemm_efficiency=shares[sysm.gpu.name]))
        step = np.broadcast_to(step_times(model, cfg, sysm, st, cal, ov)["step_time_s"], (n,))
        tokens = model.seq_len * cfg.micro_batch * cfg.num_microbatches * cfg.dp
        cols.append(((tokens / cfg.world / step - r.tokens_per_s_per_gpu)
                     / r.tokens_per_s_per_gpu).tolist())
    return [list(e) for e in zip(*cols)]


# benchmarks/fit.py stage 4: one sustained bf16 GEMM share for the Blackwell generation's
# parts (ledger.system.chips: B200, B300, GB200, GB300 - one figure, so their dense peaks'
# ratios stay the datasheets'), Blackwell Ultra's sustained rate over it (ULTRA: sm_103,
# B300 and GB300 - chips.ULTRA_RATE), and the routed experts' grouped GEMMs' share of the
# dense rate (ledger.step.Calibration.grouped_gemm_share, every part), together on the
# release's calibration rows, with the host's constants as shipped; H100's share is stage
# 2's (Megatron-LM's H100 table)
BLACKWELL = ("b200", "b300", "gb200", "gb300")
ULTRA = ("b300", "gb300")  # the sm_103 parts (chips.GPU.cuda_capability (10, 3))
BLACKWELL_SHARE_GRID = tuple(round(0.40 + 0.02 * i, 2) for i in range(21))  # 0.40 ... 0.80
GROUPED_SHARE_GRID = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5)
ULTRA_RATE_GRID = tuple(round(1.0 + 0.05 * i, 2) for i in range(11))  # 1.00 ... 1.50


def blackwell_shares(share: float, ultra: float) -> dict:
    """GPU preset -> gemm_efficiency: ``share`` for the sm_100 parts, ``share`` x ``ultra``
    for the sm_103 ones (ledger.system.chips.ULTRA_SHARE)."""
    return {g: share * (ultra if g in ULTRA else 1.0) for g in BLACKWELL}


def share_score(share: float, grouped: float | None = None, ultra: float | None = None,
                cal=None) -> tuple[float, float, int]:
    """(mean |error|, max |error|, rows) of the release's calibration rows that run at the
    Blackwell GEMM share ``share``, Blackwell Ultra's rate over it ``ultra`` and the
    grouped GEMMs' share ``grouped`` (default: the shipped), the time model's other
    constants ``cal`` (default the shipped)."""
    from ledger.step import DEFAULT
    from ledger.system.chips import ULTRA_RATE

    cal = cal or DEFAULT
    if grouped is not None:
        cal = replace(cal, grouped_gemm_share=grouped)
    return _score(cal, blackwell_shares(share, ULTRA_RATE if ultra is None else ultra))


def fit_share(grid=BLACKWELL_SHARE_GRID, grouped=GROUPED_SHARE_GRID, ultra=ULTRA_RATE_GRID,
              cal=None) -> list[tuple[float, ...]]:
    """Every (mean |error|, max |error|, share, grouped share, ultra rate) of the grid on
    the release's calibration rows, best first: ``share_score`` at every point, the grid
    priced in one call per row."""
    from ledger.step import DEFAULT

    points = list(product(grid, grouped, ultra))
    shares = {g: np.array([blackwell_shares(x, u)[g] for x, _, u in points])
              for g in BLACKWELL}
    cal = replace(cal or DEFAULT, grouped_gemm_share=np.array([g for _, g, _ in points]))
    return sorted((*_summary(e)[:2], *p)
                  for p, e in zip(points, _errors_at(cal, shares, len(points))))


def host_score(block_s: float, router_s: float, moe_s: float, expert_s: float,
               stall_s: float = 0.0, cal=None, shares: dict | None = None
               ) -> tuple[float, float, int]:
    """(mean |error|, max |error|, rows) of the calibration rows that run, at the host's
    constants (the rest of ``cal``, default the shipped; the GEMM shares ``shares``, GPU
    preset -> share, the others as shipped): the same tokens/s/GPU ``outcome`` prints,
    each row placed once."""
    from ledger.step import DEFAULT

    cal = replace(cal or DEFAULT, host_block_s=block_s, host_router_s=router_s,
                  host_moe_s=moe_s, host_expert_s=expert_s, host_stall_s=stall_s)
    return _score(cal, shares)


def _host_errors(grid, cal, shares) -> tuple[list, list[list[float]]]:
    """(every point of ``grid``, each point's errors): ``_errors_at`` with the host's five
    constants arrays over the points."""
    from ledger.step import DEFAULT

    points = list(product(*grid))
    cal = replace(cal or DEFAULT, **{name: np.array(axis)
                                     for name, axis in zip(HOST_AXES, zip(*points))})
    return points, _errors_at(cal, shares, len(points))


def fit_host(grid=HOST_GRID, cal=None, shares: dict | None = None) -> list[tuple[float, ...]]:
    """Every (mean |error|, max |error|, host_block_s, host_router_s, host_moe_s,
    host_expert_s, host_stall_s) of the grid on the calibration rows, best first:
    ``host_score`` at every point, the grid priced in one call per row."""
    points, errs = _host_errors(grid, cal, shares)
    return sorted((*_summary(e)[:2], *p) for p, e in zip(points, errs))


def host_landscape(grid=HOST_GRID, cal=None) -> tuple[tuple[str, ...], dict]:
    """Stage 3's landscape: (the calibration rows' ids, {grid point: each row's error}) -
    every row's (predicted - published) / published at every point of ``grid`` (the rest
    of ``cal``, default the shipped), for benchmarks/host_landscape.py."""
    ids = tuple(r.id for r, *_ in _timed_rows())
    points, errs = _host_errors(grid, cal, None)
    return ids, dict(zip(points, errs))


def pinning_rows(ids, errs) -> tuple[tuple, list[tuple[str, tuple]]]:
    """(stage 3's argmin on every row, [(row, the argmin without it)] for each row whose
    leaving out moves the argmin): the rows that pin the host's constants."""
    def argmin(skip=None):
        keep = [i for i, r in enumerate(ids) if r != skip]
        return min(errs, key=lambda p: (sum(abs(errs[p][i]) for i in keep), p))

    best = argmin()
    return best, [(r, p) for r in ids if (p := argmin(r)) != best]


# benchmarks/fit.py stage 5: a Grace host's (Arm Neoverse V2: GB200 / GB300 NVL72, GH200)
# seconds per eager block over an x86 host's (ledger.step.host.for_host), on the same
# calibration rows with the other constants as shipped. The grid spans the published
# measurements' 1.14x (pytorch/pytorch#187862) to 2.75x (NVIDIA/TransformerEngine#2053)
# and a Grace host as fast as an x86 one or faster
GRACE_HOST_GRID = (0.75, 1.0, 1.125, 1.25, 1.5, 2.0, 2.75)


def grace_score(scale: float, cal=None, shares: dict | None = None) -> tuple[float, float, int]:
    """(mean |error|, max |error|, rows) of the calibration rows that run at a Grace host's
    ``scale`` (the rest of ``cal``, default the shipped; the GEMM shares ``shares``)."""
    from ledger.step import DEFAULT

    return _score(replace(cal or DEFAULT, grace_host_scale=scale), shares)


def fit_grace(grid=GRACE_HOST_GRID, cal=None, shares: dict | None = None
              ) -> list[tuple[float, ...]]:
    """Every (mean |error|, max |error|, grace_host_scale) of the grid, best first (seven
    points: one call per point and row, ``ledger.step.host.for_host`` takes one scale)."""
    return sorted((*grace_score(x, cal, shares)[:2], x) for x in grid)


def outcome_shares() -> list[tuple[str, bool, float]]:
    """(row, ran, critical share) of every Megatron-Bridge row that runs and of the
    placements its tables say did not fit (``ledger.validation.bridge.did_not_fit``): the
    tables' outcomes, for benchmarks/fit_memory.py's unreturnable share
    (``ledger.validation.outcomes.share_bounds``)."""
    from ledger.render.bridge import outcome, outcomes
    from ledger.validation.bridge import did_not_fit

    ran = [(o.row.id, True, o.critical_share) for o in outcomes() if o.status == "ran"]
    return ran + [(r.id, False, outcome(r).critical_share) for r in did_not_fit()]

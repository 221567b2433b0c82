"""A whole run: its phases' steps at the step time ``ledger.step.estimate`` prices, plus
checkpoints and failures, as days, GPU-hours, cost and energy.

Per segment (a phase at one batch size, ``ledger.run.phases``):

    T      = steps x step time                                  training seconds
    C      = the checkpoint's blocking seconds (``ledger.run.checkpoint``)
    M      = per-GPU mean time between interruptions / GPUs     (``ledger.run.failures``)
    tau    = the interval in whole steps: round(Daly's optimum / step) (at least one, and
             for an asynchronous save no shorter than its background write), or
             ``--ckpt-interval`` steps
    R      = relaunch + loading the checkpoint
    W      = M e^(R/M) (e^((tau + C)/M) - 1) T / tau            expected wall seconds

and over the run: days = sum W / 86,400; GPU-hours = sum W x GPUs / 3,600; cost =
GPU-hours x the price; energy = GPU-hours x the board power x PUE; interruptions = sum
W / M; goodput = sum T / sum W. W splits into training T, checkpointing C T / tau, and
failure loss (restarts and the work redone since the last checkpoint) W - T - C T / tau.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ledger.errors import LedgerError
from ledger.run.checkpoint import DEFAULT_STORAGE, Checkpoint, Storage, checkpoint
from ledger.run.failures import (DAY, DEFAULT_GPU_MTBF_S, DEFAULT_RELAUNCH_S, HOUR,
                                 daly_interval_s, expected_wall_s, job_mtbf_s)
from ledger.run.phases import Phase, Segment, segments


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """What a run's overheads depend on besides its placement."""

    storage: Storage = DEFAULT_STORAGE
    ckpt_mode: str = "sync"  # "sync" | "async"
    ckpt_interval_steps: int | None = None  # None: Daly's optimum
    gpu_mtbf_s: float = DEFAULT_GPU_MTBF_S  # per-GPU mean time between interruptions
    relaunch_s: float = DEFAULT_RELAUNCH_S
    pue: float = 1.0  # facility energy / IT energy; 1.0 counts the GPUs' boards alone
    usd_per_gpu_hour: float | None = None


@dataclass(frozen=True)
class SegmentRun:
    segment: Segment
    gpus: int
    step_s: float
    train_s: float
    checkpoint: Checkpoint
    interval_steps: int
    interval_s: float
    job_mtbf_s: float
    restart_s: float
    wall_s: float
    estimate: object = None  # the StepEstimate its step time came from

    @property
    def checkpointing_s(self) -> float:
        return self.checkpoint.blocking_s * self.train_s / self.interval_s

    @property
    def lost_s(self) -> float:
        return self.wall_s - self.train_s - self.checkpointing_s

    @property
    def interruptions(self) -> float:
        return self.wall_s / self.job_mtbf_s

    @property
    def gpu_hours(self) -> float:
        return self.wall_s * self.gpus / HOUR


@dataclass(frozen=True)
class RunEstimate:
    segments: tuple[SegmentRun, ...]
    board_power_w: float
    settings: RunSettings = field(default_factory=RunSettings)

    def _sum(self, name: str) -> float:
        return sum(getattr(s, name) for s in self.segments)

    tokens = property(lambda self: sum(s.segment.tokens for s in self.segments))
    steps = property(lambda self: sum(s.segment.steps for s in self.segments))
    wall_s = property(lambda self: self._sum("wall_s"))
    train_s = property(lambda self: self._sum("train_s"))
    checkpointing_s = property(lambda self: self._sum("checkpointing_s"))
    lost_s = property(lambda self: self._sum("lost_s"))
    interruptions = property(lambda self: self._sum("interruptions"))
    gpu_hours = property(lambda self: self._sum("gpu_hours"))
    days = property(lambda self: self.wall_s / DAY)
    goodput = property(lambda self: self.train_s / self.wall_s)

    @property
    def energy_mwh(self) -> float:
        return self.gpu_hours * self.board_power_w * self.settings.pue / 1e6

    @property
    def cost_usd(self) -> float | None:
        price = self.settings.usd_per_gpu_hour
        return None if price is None else self.gpu_hours * price

    @property
    def main(self) -> SegmentRun:
        """The segment with the most training time (the run's checkpoint and MTBF)."""
        return max(self.segments, key=lambda s: s.train_s)


def interval_steps(step_s: float, ck: Checkpoint, mtbf_s: float,
                   settings: RunSettings) -> int:
    """Steps between checkpoints: the given interval, else Daly's optimum rounded to
    whole steps (at least 1; an asynchronous save's background write must end first)."""
    if settings.ckpt_interval_steps is not None:
        steps = settings.ckpt_interval_steps
    else:
        steps = max(1, round(daly_interval_s(ck.blocking_s, mtbf_s) / step_s))
    if ck.mode == "async" and steps * step_s < ck.write_s:
        if settings.ckpt_interval_steps is not None:
            raise LedgerError("ckpt_interval", (
                f"{steps} steps x {step_s:.3f} s = {steps * step_s:,.1f} s is shorter than "
                f"the asynchronous write of {ck.write_s:,.1f} s: the next save would wait "
                f"for it"))
        steps = -(-ck.write_s // step_s)
    return int(steps)


def price_segment(model, cfg, system, seg: Segment, step_s: float, settings: RunSettings,
                  optimizer: str = "adam", est=None) -> SegmentRun:
    """One segment at a known step time: its checkpoints, failures and wall time."""
    ck = checkpoint(model, cfg, system, settings.storage, settings.ckpt_mode, optimizer)
    mtbf = job_mtbf_s(settings.gpu_mtbf_s, cfg.world)
    every = interval_steps(step_s, ck, mtbf, settings)
    train, tau = seg.steps * step_s, every * step_s
    restart = settings.relaunch_s + ck.load_s
    wall = expected_wall_s(train, tau, ck.blocking_s, restart, mtbf)
    return SegmentRun(seg, cfg.world, step_s, train, ck, every, tau, mtbf, restart, wall, est)


def segment_config(cfg, seg: Segment):
    """The phase's placement with the micro-batches its global batch makes."""
    from ledger.step import microbatches_for

    base = seg.phase.config or cfg
    m = microbatches_for(seg.global_batch, base.dp, base.micro_batch)
    return base if m == base.num_microbatches else replace(base, num_microbatches=m)


def whole_run(model, cfg, system, phases: list[Phase], settings: RunSettings = RunSettings(),
              tp_overlap: bool = False, precision: str | None = None,
              optimizer: str = "adam", step_time=None, cache=None) -> RunEstimate:
    """Every phase of a run, each segment's step time from ``ledger.step.estimate`` (or
    ``step_time(segment, estimate)`` when given: a published step time, say); ``cache``
    keeps the estimates for another call."""
    from ledger.step import estimate

    if precision is not None and cfg.precision is None:
        cfg = replace(cfg, precision=precision)
    batch = cfg.dp * cfg.micro_batch * cfg.num_microbatches
    out, cache = [], {} if cache is None else cache
    for phase in phases:
        overlap = tp_overlap if phase.tp_overlap is None else phase.tp_overlap
        for seg in segments(phase, model.seq_len, batch):
            try:
                c = segment_config(cfg, seg)
                m = model if seg.seq_len == model.seq_len else model.with_seq(seg.seq_len)
                key = (m.seq_len, c, overlap)
                if key not in cache:
                    cache[key] = estimate(m, c, system, tp_overlap=overlap,
                                          precision=precision, optimizer=optimizer)
                est = cache[key]
                step = est.step_time_s if step_time is None else step_time(seg, est)
                out.append(price_segment(m, c, system, seg, step, settings, optimizer, est))
            except LedgerError as e:
                if not phase.name:
                    raise
                raise LedgerError(phase.label(e.field), str(e).split(": ", 1)[1]) from None
    return RunEstimate(tuple(out), system.gpu.board_power_w, settings)


def rank_by_time_to_train(model, system, plans, tokens: float, settings: RunSettings,
                          optimizer: str = "adam") -> list[tuple[object, RunEstimate]]:
    """The planner's placements (``ledger.plan.Plan``s, at their step times) as whole runs
    of ``tokens``, quickest to train first (ties to more memory to spare)."""
    out = []
    for p in plans:
        c = p.config
        seg = segments(Phase(tokens=tokens), model.seq_len,
                       c.dp * c.micro_batch * c.num_microbatches)[0]
        run = RunEstimate((price_segment(model, c, system, seg, p.step_time_s, settings,
                                         optimizer),), system.gpu.board_power_w, settings)
        out.append((p, run))
    return sorted(out, key=lambda pr: (pr[1].wall_s, -pr[0].headroom_bytes))

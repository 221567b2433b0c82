"""Run jobs in one torch.distributed world: under torchrun, or in processes forked here.

A job is any object with ``name`` and ``run(rank: Rank) -> report | None`` (rank 0's
report is kept); the toys and verify each bring their own. This module knows neither.

Built-in launcher: the parent imports torch once, opens a TCPStore on a free port
(port 0, so two runs never collide), forks ``world`` ranks and watches them. A rank
that raises reports its error and exits; a rank that dies shows a non-zero exit
code; either way the parent kills the rest at once and names the rank. Rank 0 sends
each job's report to the parent as soon as it is done, and the parent prints it.
SIGINT / SIGTERM to the parent end every rank (SIGKILL, so no rank dumps a stack) and
surface as ``Interrupted``; a rank whose parent dies is killed by the kernel
(PR_SET_PDEATHSIG), so nothing is orphaned.

Under torchrun (TORCHELASTIC_RUN_ID in the environment) there is no parent: each rank
joins the torchrun world and rank 0 prints. RANK / WORLD_SIZE / MASTER_ADDR left in
the environment by something else are stale for the built-in launcher (``stale_env``).
"""
from __future__ import annotations

import os
import signal
import time
import traceback
from dataclasses import dataclass, field

POLL_S = 0.02
HANG_LIMIT_S = 60.0  # a rank that shows no progress for this long is a hang
PROGRESS_SHARE = 1 / 60  # CPU time, as a share of the limit, that a rank must spend to
# count as progressing: 1 s in 60 s, so a rank throttled to 3% of a core progresses, while
# the idle threads of one waiting in a collective tick ~2 ms a minute
MAX_GAP_S = 1.0  # the most one poll counts towards a hang: a stopped or starved parent
# (SIGSTOP, Ctrl-Z) sees a long gap that no rank is to blame for
SETTLE_S = 0.5  # after a first failure, how long to wait for the rest of the story
PEER_LOST = ("Connection reset", "Connection closed", "Broken pipe", "Socket closed")
DIST_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
            "LOCAL_WORLD_SIZE", "GROUP_RANK")
PR_SET_PDEATHSIG = 1  # linux/prctl.h


class Interrupted(Exception):
    """The parent got SIGINT or SIGTERM; every rank has been ended."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@dataclass(frozen=True)
class Rank:
    """What a job is told about its place in the world."""

    rank: int
    world: int
    device: object  # torch.device
    backend: str


@dataclass
class Outcome:
    reports: list = field(default_factory=list)  # ToyReport, in order
    error: str | None = None  # "rank 2: RuntimeError: ..." when a rank failed

    @property
    def ok(self) -> bool:
        return self.error is None and all(r.ok for r in self.reports)


def run_jobs(jobs, rank: int, world: int, backend: str, emit,
             fault: tuple[str, int] | None = None, progress=lambda: None) -> None:
    """Body of every rank: the world is initialised; run each job, rank 0 emits; every
    rank calls ``progress`` as each job starts and ends (the launcher's sign of life)."""
    import torch

    torch.set_num_threads(1)
    if backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", rank))
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    me = Rank(rank=rank, world=world, device=device, backend=backend)
    for i, job in enumerate(jobs):
        if fault is not None and fault[1] == rank and i == len(jobs) - 1:
            _inject(fault[0])
        progress()  # started: a rank that never gets here is the one the others wait on
        report = job.run(me)
        if rank == 0 and report is not None:
            emit(report)
        progress()


def _inject(kind: str) -> None:
    """Test hook: fail (or stall) this rank while the others wait in a collective."""
    if kind == "raise":
        raise RuntimeError("injected fault")
    if kind == "sleep":  # a world still running when a signal arrives; a hang if none does
        time.sleep(2 * HANG_LIMIT_S)
        return
    if kind == "stop":  # a rank that makes no progress: stopped, as by SIGSTOP
        os.kill(os.getpid(), signal.SIGSTOP)
        return
    if kind == "slow":  # a rank that progresses slowly: busy for twice the limit
        end = time.monotonic() + 2 * HANG_LIMIT_S
        while time.monotonic() < end:
            pass
        return
    os.kill(os.getpid(), signal.SIGKILL)


def _child(rank: int, world: int, ports, jobs, backend, queue, fault) -> None:
    import torch.distributed as dist

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent ends the ranks
    _die_with_parent(os.getppid())
    _quiet_native_stderr()  # a rank's errors reach the parent by the queue
    try:
        port = ports.get()
        store = dist.TCPStore("127.0.0.1", port, world, is_master=False)
        if fault is not None and fault == ("early", rank):  # dies while gloo connects
            _kill_soon(0.05)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world)
        run_jobs(jobs, rank, world, backend, lambda rep: queue.put(("report", rank, rep)),
                 fault, lambda: queue.put(("progress", rank, None)))
        dist.destroy_process_group()
        queue.put(("done", rank, None))
    except BaseException as e:  # report any failure, then exit non-zero
        last = traceback.extract_tb(e.__traceback__)[-1:]
        where = f" ({last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno})" if last else ""
        queue.put(("error", rank, f"{type(e).__name__}: {e}{where}"))
        os._exit(1)
    os._exit(0)


def _kill_soon(after_s: float) -> None:
    """Test hook: SIGKILL this rank from a timer thread, while its main thread connects."""
    import threading

    threading.Timer(after_s, os.kill, (os.getpid(), signal.SIGKILL)).start()


def _die_with_parent(parent: int) -> None:
    """The kernel kills this rank when the process that started it dies (even a stopped
    rank: SIGKILL needs no cooperation), so nothing is orphaned."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def _quiet_native_stderr() -> None:
    """gloo's and c10's C++ logs write to fd 2 (a peer that vanished while connecting is
    15 lines of them): fd 2 goes to /dev/null, Python's sys.stderr keeps the terminal."""
    import sys

    keep = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    sys.stderr = os.fdopen(keep, "w", buffering=1)


def launch(jobs: list, world: int = 4, backend: str = "gloo", on_report=None,
           fault: tuple[str, int] | None = None) -> Outcome:
    """Fork ``world`` ranks (torch and the jobs' modules imported once, here), run
    ``jobs``, watch them. Raises ``Interrupted`` on SIGINT / SIGTERM, ranks ended."""
    import multiprocessing as mp

    import torch.distributed as dist  # imported before the fork, once for every rank

    ctx = mp.get_context("fork")
    queue = ctx.SimpleQueue()  # synchronous writes: a rank's last words are never lost
    ports = ctx.SimpleQueue()
    procs = [ctx.Process(target=_child, args=(r, world, ports, jobs, backend, queue, fault),
                         daemon=True) for r in range(world)]
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def interrupted(signum, frame):
        raise Interrupted(signum)
    for s in previous:
        signal.signal(s, interrupted)
    try:
        for p in procs:
            p.start()
        return _watch(procs, queue, ports, world, on_report)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        for p in procs:
            if p.pid is not None:
                p.join()
        for s, h in previous.items():
            signal.signal(s, h)


def _watch(procs, queue, ports, world: int, on_report) -> Outcome:
    import torch.distributed as dist

    # the store's server threads start only after the fork: a child forked while they
    # hold a lock would inherit it locked. Port 0: two runs never collide.
    store = dist.TCPStore("127.0.0.1", 0, world, is_master=True, wait_for_workers=False)
    for _ in procs:
        ports.put(store.port)
    out, done = Outcome(), set()
    watch = _Progress(procs)
    try:
        failures: list[str] = []
        while len(done) < world and not failures:
            failures = _failures(queue, procs, out, done, on_report, watch.heard)
            if not failures and len(done) < world:
                failures = watch.hangs(done)
            time.sleep(POLL_S)
        if failures:  # the first failure drags the others down: wait briefly for the
            time.sleep(SETTLE_S)  # whole picture, then name the rank that started it
            failures += _failures(queue, procs, out, done, on_report)
            out.error = _root_cause(failures)
    finally:
        for p in procs:  # ended here, before the store they talk to goes away
            if p.is_alive():
                p.kill()
    return out


class _Progress:
    """How long the world has gone without progress, counted only while the parent
    watches (a poll counts at most MAX_GAP_S). A rank progresses when it sends a message
    or spends PROGRESS_SHARE of the limit in CPU time; the world progresses while any rank
    does (the others may be waiting on it in a collective), and while it is runnable (a
    busy machine may not give it a core for a while). A world quiet for
    HANG_LIMIT_S hangs, and the rank named is a stopped one, else the one that has said
    least (it never reached the job the others started), else the one whose CPU went
    idle first."""

    def __init__(self, procs):
        self.procs, self.last = procs, time.monotonic()
        self.quiet_s = [0.0] * len(procs)
        self.cpu_s = [None] * len(procs)  # CPU time at the rank's last progress
        self.ticks = [(-1.0, self.last)] * len(procs)  # (CPU time, when it last moved)
        self.said = [0] * len(procs)  # messages from each rank

    def heard(self, rank: int) -> None:
        self.quiet_s[rank], self.cpu_s[rank] = 0.0, None
        self.said[rank] += 1

    def hangs(self, done: set) -> list[str]:
        now = time.monotonic()
        gap, self.last = min(now - self.last, MAX_GAP_S), now
        states, busy_s = {}, PROGRESS_SHARE * HANG_LIMIT_S
        for rank, p in enumerate(self.procs):
            cpu, states[rank] = _cpu_and_state(p.pid)
            if cpu != self.ticks[rank][0]:
                self.ticks[rank] = (cpu, now)
            if self.cpu_s[rank] is None or cpu - self.cpu_s[rank] >= busy_s or \
                    states[rank] == "R":  # running, or runnable on a busy machine
                self.cpu_s[rank], self.quiet_s[rank] = cpu, 0.0
            else:
                self.quiet_s[rank] += gap
        live = [r for r in range(len(self.procs)) if r not in done]
        if not live or min(self.quiet_s[r] for r in live) <= HANG_LIMIT_S:
            return []
        stopped = [r for r in live if states[r] in "Tt"]
        rank = (stopped or sorted(live, key=lambda r: (self.said[r], self.ticks[r][1])))[0]
        others = len(live) - 1
        return [f"rank {rank}: no progress for {HANG_LIMIT_S:g} s"
                f"{' (stopped)' if stopped else ''}, a hang"
                + (f"; {others} other rank(s) waited on it" if others else "")]


def _cpu_and_state(pid: int) -> tuple[float, str]:
    """A process's CPU time (user + system, seconds) and its state letter (/proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0, "?"
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), fields[0].decode()


def _failures(queue, procs, out: Outcome, done: set, on_report,
              heard=lambda rank: None) -> list[str]:
    """Errors the ranks reported, then ranks that died without a word."""
    errors, told = [], set()
    while not queue.empty():
        kind, rank, payload = queue.get()
        heard(rank)
        if kind == "progress":
            continue
        if kind == "report":
            out.reports.append(payload)
            if on_report:
                on_report(payload)
        elif kind == "done":
            done.add(rank)
        else:
            errors.append(f"rank {rank}: {payload}")
            told.add(rank)
    for rank, p in enumerate(procs):
        code = p.exitcode
        if code and rank not in done and rank not in told and code != 1:
            how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
            errors.append(f"rank {rank}: died ({how})")
    return errors


def _root_cause(failures: list[str]) -> str:
    """A rank that died or raised on its own, before those whose peers vanished."""
    def consequence(msg: str) -> bool:
        return any(s in msg for s in PEER_LOST)
    first = next((f for f in failures if "died" in f), None) or next(
        (f for f in failures if not consequence(f)), failures[0])
    others = len({f.split(":")[0] for f in failures} - {first.split(":")[0]})
    return first + (f" ({others} other rank(s) failed after it)" if others else "")


def under_torchrun() -> bool:
    """torchrun's agent sets TORCHELASTIC_RUN_ID for its workers; RANK alone is not it."""
    return "TORCHELASTIC_RUN_ID" in os.environ and "RANK" in os.environ


def stale_env() -> list[str]:
    """torch.distributed variables set in the environment of a run torchrun did not
    start: the built-in launcher ignores them (``clear_env``)."""
    return [] if under_torchrun() else [k for k in DIST_ENV if k in os.environ]


def clear_env(names: list[str]) -> None:
    for k in names:
        os.environ.pop(k, None)


def torchrun_world() -> int:
    return int(os.environ["WORLD_SIZE"])


def run_under_torchrun(jobs: list, backend: str, on_report, parent: int,
                       fault: tuple[str, int] | None = None) -> Outcome:
    """Join the torchrun world (env://) and run; rank 0 collects the reports. The rank
    keeps the built-in launcher's guarantees: SIGINT / SIGTERM end it at once and quietly
    (128 + the signal; ``ledger.toys.__main__`` installs that before its imports); it dies
    with the torchrun agent that started it (PR_SET_PDEATHSIG, so a stopped rank is not
    orphaned by ``kill -9`` of torchrun; ``parent``: the agent's pid, taken at the rank's
    start); a collective that waits HANG_LIMIT_S on a peer
    fails (the process group's timeout: gloo's own watchdog); gloo's C++ logs are
    silenced; and a failure is ``Outcome.error``, one line naming the rank."""
    from datetime import timedelta

    import torch.distributed as dist

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda signum, frame: os._exit(128 + signum))
    _die_with_parent(parent)
    _quiet_native_stderr()
    out, rank = Outcome(), int(os.environ["RANK"])

    def emit(rep):
        out.reports.append(rep)
        on_report(rep)

    try:
        dist.init_process_group(backend, timeout=timedelta(seconds=HANG_LIMIT_S))
        run_jobs(jobs, rank, dist.get_world_size(), backend, emit, fault)
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001 - any failure of the rank is its one line
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        out.error = f"rank {rank}: {type(e).__name__}: {text[:300]}"
    return out


def exit_now(code: int) -> None:
    """End a torchrun rank that failed: its line flushed, no interpreter teardown (which
    would abort in gloo's threads with a stack dump of its own)."""
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def consequence(error: str) -> bool:
    """A rank's error that another rank caused: its peer vanished, or stopped answering."""
    return any(s in error for s in PEER_LOST + ("Timed out", "timed out", "Timeout"))

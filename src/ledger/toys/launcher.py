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

from ledger.toys.progress import Progress

POLL_S = 0.02
HANG_LIMIT_S = 60.0  # a rank that shows no progress for this long is a hang
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
    watch = Progress(procs, HANG_LIMIT_S)
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
    start); a collective that waits HANG_LIMIT_S on a peer fails (the process group's
    timeout: gloo's own watchdog), and the rank that made least progress (each rank counts
    its jobs' starts and ends in torchrun's store) is named as the hang; gloo's C++ logs
    are silenced; and a failure is ``Outcome.error``, one line naming the rank."""
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

    store = None
    try:
        dist.init_process_group(backend, timeout=timedelta(seconds=HANG_LIMIT_S))
        store = dist.distributed_c10d._get_default_store()
        run_jobs(jobs, rank, dist.get_world_size(), backend, emit, fault,
                 lambda: store.add(f"ledger/progress/{rank}", 1))
        dist.destroy_process_group()
    except Exception as e:  # noqa: BLE001 - any failure of the rank is its one line
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        out.error = f"rank {rank}: {type(e).__name__}: {text[:300]}"
        if store is not None and "imed out" in text:
            out.error = _laggard(store, rank, int(os.environ["WORLD_SIZE"])) or out.error
    return out


def _laggard(store, me: int, world: int) -> str | None:
    """After a collective timed out: the one rank that counted fewest job starts and ends
    (the others waited on it), as the built-in launcher names a hang; None if no one
    rank is behind."""
    try:
        counts = [store.add(f"ledger/progress/{r}", 0) for r in range(world)]
    except Exception:  # noqa: BLE001 - the store went away with the agent
        return None
    behind = [r for r in range(world) if counts[r] == min(counts)]
    if len(behind) != 1 or behind[0] == me:
        return None
    return (f"rank {behind[0]}: no progress for {HANG_LIMIT_S:g} s, a hang; rank {me} "
            f"timed out waiting on it")


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

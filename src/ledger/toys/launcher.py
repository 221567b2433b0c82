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
HANG_LIMIT_S = 60.0  # a world that neither finishes nor fails is ended here
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
             fault: tuple[str, int] | None = None) -> None:
    """Body of every rank: the world is initialised; run each job, rank 0 emits."""
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
        report = job.run(me)
        if rank == 0 and report is not None:
            emit(report)


def _inject(kind: str) -> None:
    """Test hook: fail (or stall) this rank while the others wait in a collective."""
    if kind == "raise":
        raise RuntimeError("injected fault")
    if kind == "sleep":  # a world that is still running when a signal arrives
        time.sleep(HANG_LIMIT_S)
        return
    os.kill(os.getpid(), signal.SIGKILL)


def _child(rank: int, world: int, ports, jobs, backend, queue, fault) -> None:
    import ctypes

    import torch.distributed as dist

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent ends the ranks
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the parent died before the line above
        os._exit(1)
    try:
        port = ports.get()
        store = dist.TCPStore("127.0.0.1", port, world, is_master=False)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world)
        run_jobs(jobs, rank, world, backend, lambda rep: queue.put(("report", rank, rep)),
                 fault)
        dist.destroy_process_group()
        queue.put(("done", rank, None))
    except BaseException as e:  # report any failure, then exit non-zero
        last = traceback.extract_tb(e.__traceback__)[-1:]
        where = f" ({last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno})" if last else ""
        queue.put(("error", rank, f"{type(e).__name__}: {e}{where}"))
        os._exit(1)
    os._exit(0)


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
    start = time.monotonic()
    try:
        failures: list[str] = []
        while len(done) < world and not failures:
            failures = _failures(queue, procs, out, done, on_report)
            if not failures and time.monotonic() - start > HANG_LIMIT_S:
                failures = [f"world did not finish within {HANG_LIMIT_S:.0f} s"]
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


def _failures(queue, procs, out: Outcome, done: set, on_report) -> list[str]:
    """Errors the ranks reported, then ranks that died without a word."""
    errors, told = [], set()
    while not queue.empty():
        kind, rank, payload = queue.get()
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


def run_under_torchrun(jobs: list, backend: str, on_report) -> Outcome:
    """Join the torchrun world (env://) and run; rank 0 collects the reports. SIGINT /
    SIGTERM end this rank at once and quietly (128 + the signal)."""
    import torch.distributed as dist

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, lambda signum, frame: os._exit(128 + signum))
    dist.init_process_group(backend)
    out = Outcome()

    def emit(rep):
        out.reports.append(rep)
        on_report(rep)

    try:
        run_jobs(jobs, dist.get_rank(), dist.get_world_size(), backend, emit)
    finally:
        dist.destroy_process_group()
    return out

"""Run the toys in one world: under torchrun, or in processes forked here.

Built-in launcher: the parent imports torch once, opens a TCPStore on a free port
(port 0, so two runs never collide), forks ``world`` ranks and watches them. A rank
that raises reports its error and exits; a rank that dies shows a non-zero exit
code; either way the parent kills the rest at once and names the rank. Rank 0 sends
each toy's report to the parent as soon as it is done, and the parent prints it.

Under torchrun (RANK / WORLD_SIZE in the environment) there is no parent: each rank
joins the torchrun world and rank 0 prints.
"""
from __future__ import annotations

import os
import signal
import time
import traceback
from dataclasses import dataclass, field

TOYS = ("zero", "tp", "cp", "pp", "ep")
SPAWN_BASELINE = "spawn"  # import + init + one all-reduce: the floor of any launch
POLL_S = 0.02
HANG_LIMIT_S = 60.0  # a world that neither finishes nor fails is ended here
SETTLE_S = 0.5  # after a first failure, how long to wait for the rest of the story
PEER_LOST = ("Connection reset", "Connection closed", "Broken pipe", "Socket closed")


@dataclass
class Outcome:
    reports: list = field(default_factory=list)  # ToyReport, in order
    error: str | None = None  # "rank 2: RuntimeError: ..." when a rank failed

    @property
    def ok(self) -> bool:
        return self.error is None and all(r.ok for r in self.reports)


def _toy(name: str):
    """A toy module (``zero``), or a verify strategy (``verify:fsdp2``)."""
    from importlib import import_module

    if name.startswith("verify:"):
        from ledger.verify.runner import Strategy
        return Strategy(name.split(":", 1)[1])
    return import_module(f"ledger.toys.{name}")


def run_toys(names: list[str], rank: int, world: int, backend: str, emit,
             fault: tuple[str, int] | None = None) -> None:
    """Body of every rank: the world is initialised; run each toy, rank 0 emits."""
    import torch
    import torch.distributed as dist

    from ledger.toys.common import Ctx, Meter

    torch.set_num_threads(1)
    if backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", rank))
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    meter = Meter()
    if not any(n.startswith("verify:") for n in names):  # verify meters at the dispatcher;
        meter.install()  # pipelining also checks that dist.isend is the real one
    try:
        for name in names:
            if fault is not None and fault[1] == rank and name == names[-1]:
                _inject(fault[0])
            if name == SPAWN_BASELINE:
                t = torch.ones(1, device=device)
                dist.all_reduce(t)
                continue
            report = _toy(name).run(Ctx(rank, world, device, meter))
            if rank == 0:
                emit(report)
    finally:
        meter.uninstall()


def _inject(kind: str) -> None:
    """Test hook: fail this rank while the others wait in a collective."""
    if kind == "raise":
        raise RuntimeError("injected fault")
    os.kill(os.getpid(), signal.SIGKILL)


def _child(rank: int, world: int, ports, names, backend, queue, fault) -> None:
    import torch.distributed as dist

    try:
        port = ports.get()
        store = dist.TCPStore("127.0.0.1", port, world, is_master=False)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world)
        run_toys(names, rank, world, backend, lambda rep: queue.put(("report", rank, rep)),
                 fault)
        dist.destroy_process_group()
        queue.put(("done", rank, None))
    except BaseException as e:  # report any failure, then exit non-zero
        last = traceback.extract_tb(e.__traceback__)[-1:]
        where = f" ({last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno})" if last else ""
        queue.put(("error", rank, f"{type(e).__name__}: {e}{where}"))
        os._exit(1)
    os._exit(0)


def launch(names: list[str], world: int = 4, backend: str = "gloo", on_report=None,
           fault: tuple[str, int] | None = None) -> Outcome:
    """Fork ``world`` ranks (torch imported once, here), run ``names``, watch them."""
    import multiprocessing as mp

    import torch.distributed as dist  # imported before the fork, once for every rank

    for name in names:  # so are the toys: each child would otherwise import them again
        if name != SPAWN_BASELINE:
            _toy(name)

    ctx = mp.get_context("fork")
    queue = ctx.SimpleQueue()  # synchronous writes: a rank's last words are never lost
    ports = ctx.SimpleQueue()
    procs = [ctx.Process(target=_child, args=(r, world, ports, names, backend, queue, fault),
                         daemon=True) for r in range(world)]
    for p in procs:
        p.start()
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
        for p in procs:
            if p.is_alive():
                p.kill()
        for p in procs:
            p.join()
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
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def run_under_torchrun(names: list[str], backend: str, on_report) -> Outcome:
    """Join the torchrun world (env://) and run; rank 0 collects the reports."""
    import torch.distributed as dist

    dist.init_process_group(backend)
    out = Outcome()

    def emit(rep):
        out.reports.append(rep)
        on_report(rep)

    try:
        run_toys(names, dist.get_rank(), dist.get_world_size(), backend, emit)
    finally:
        dist.destroy_process_group()
    return out

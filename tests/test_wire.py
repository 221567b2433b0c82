"""The kernel byte meter, gloo's traffic model, and how a torch command ends.

The meter is checked on a plain loopback TCP connection (no torch); gloo's model against
hand arithmetic on its own segment rules; the launcher's exits on real processes:
SIGINT, SIGTERM, a closed pipe, and a stale torch.distributed environment.
"""
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

from ledger.toys import gloo, wire
from procs import leftovers


def _pair():
    srv = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(srv.getsockname())
    b, _ = srv.accept()
    srv.close()
    return a, b


def test_kernel_counts_what_a_socket_wrote():
    a, b = _pair()
    try:
        before = wire.snapshot()
        a.sendall(b"x" * 100_000)
        b.sendall(b"y" * 7)
        got = b""
        while len(got) < 100_000:
            got += b.recv(1 << 16)
        after = wire.snapshot()
        # both ends live in this process: 100000 + 7 bytes written, nothing else
        assert wire.delta(before, after) == 100_007
    finally:
        a.close()
        b.close()


def test_unix_sockets_and_files_are_not_counted():
    u1, u2 = socket.socketpair()  # AF_UNIX
    try:
        before = wire.snapshot()
        u1.sendall(b"z" * 5000)
        assert wire.delta(before, wire.snapshot()) == 0
    finally:
        u1.close()
        u2.close()


def test_gloo_ring_all_reduce_by_hand():
    # 16384 B over 4 ranks: max(ceil(16384 / 1 MiB), 2 x 4) = 8 segments of 2048 B, each
    # phase sends 8 - 8/4 = 6 of them: 12 x 2048 = 24576 = 2 x 3/4 x 16384
    t = gloo.all_reduce(4, 0, 16384, 4)
    assert (t.payload_bytes, t.sends, t.recvs) == (24576, 12, 12)
    # 4194352 B (not a multiple of 8 x 4): segment ceil(4194352 / 8) = 524294 -> 524296
    # (a multiple of 4 B); rank 0's reduce-scatter sends segments 2..7, the last one
    # short (4194352 - 7 x 524296 = 524280), its all-gather segments 0..5, all whole
    assert gloo.all_reduce(4, 0, 4194352, 4).payload_bytes == 5 * 524296 + 524280 + 6 * 524296
    # rank 1: reduce-scatter 4..7 and 0..1 (one short), all-gather 2..7 (one short)
    assert gloo.all_reduce(4, 1, 4194352, 4).payload_bytes == 10 * 524296 + 2 * 524280


def test_gloo_reduce_scatter_and_others_by_hand():
    # reduce-scatter of a 4096 B input over 4: an all-reduce of the whole input
    assert gloo.reduce_scatter(4, 2, 4096, 4).payload_bytes == 2 * 3 * 4096 // 4
    t = gloo.all_gather(4, 4096)  # ring, blocks of 1024 B in halves: 6 messages
    assert (t.payload_bytes, t.sends, t.recvs) == (3072, 6, 6)
    t = gloo.all_to_all(4, 1, [10, 20, 30, 0])  # direct; the empty message still goes
    assert (t.payload_bytes, t.sends, t.recvs) == (40, 3, 3)


def test_a_wire_row_off_by_two_percent_fails():
    from ledger.verify.rows import Row

    good = Row("bytes", "s", "all_reduce", 1000.0, 1000.0, wire_bytes=1005.0,
               wire_expected=1000.0)
    bad = Row("bytes", "s", "all_reduce", 1000.0, 1000.0, wire_bytes=1020.0,
              wire_expected=1000.0)
    assert good.ok and not bad.ok and bad.payload_ok
    assert not Row("bytes", "s", "all_gather", 0.0, 0.0, wire_bytes=64.0,
                   wire_expected=0.0).ok  # bytes where the ledger predicts none


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_ends_every_rank_quietly(sig, code):
    pytest.importorskip("torch")
    tag = f"LEDGER_TEST_{uuid.uuid4().hex}"
    env = dict(os.environ, **{tag: "1"})
    p = subprocess.Popen([sys.executable, "-m", "ledger.toys", "all", "--inject-fault",
                          "sleep:1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    assert p.stdout.readline().startswith("== zero")  # the world is up and running
    time.sleep(0.3)
    p.send_signal(sig)
    out, err = p.communicate(timeout=30)
    assert p.returncode == code
    assert err.strip().splitlines() == [f"{sig.name} received: every rank ended"]
    assert leftovers(tag) == []


def test_a_closed_pipe_ends_quietly(tmp_path):
    pytest.importorskip("torch")
    err = tmp_path / "stderr"
    r = subprocess.run(["bash", "-c", f"set -o pipefail; '{sys.executable}' -m ledger.toys "
                        f"all 2>'{err}' | head -1"], capture_output=True, text=True,
                       timeout=120)
    assert r.stdout.splitlines() == ["== zero " + "=" * 56]
    assert err.read_text() == ""  # no BrokenPipeError, no word at all
    assert r.returncode == 141  # 128 + SIGPIPE, as a shell reports a writer cut off


def test_a_stale_distributed_environment_is_ignored_with_a_note():
    pytest.importorskip("torch")
    env = dict(os.environ, RANK="3", WORLD_SIZE="7", MASTER_ADDR="10.255.255.1",
               MASTER_PORT="1")
    r = subprocess.run([sys.executable, "-m", "ledger.toys", "zero"], capture_output=True,
                       text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("note: ignoring RANK=3, WORLD_SIZE=7, MASTER_ADDR=10.255.255.1,"
                               " MASTER_PORT=1 from the environment")
    assert "toys: 9 passed, 0 failed" in r.stdout


def test_a_toy_wire_row_off_by_two_percent_fails():
    pytest.importorskip("torch")
    from ledger.toys.common import ByteRow, ToyReport, wire_row

    rep = ToyReport("t")
    row = ByteRow("all_gather", [300.0, 300.0], [300.0, 300.0])
    wire_row(rep, row, [300.0, 306.0], "all_gather")  # rank 1: 2% over
    assert [c.ok for c in rep.checks] == [False]
    row = ByteRow("reduce_scatter", [300.0], [300.0])
    wire_row(rep, row, [600.0], "reduce_scatter")  # gloo's all-reduce: twice the ring's
    assert rep.checks[-1].ok and row.wire_expected == [600.0]


def test_the_launcher_knows_nothing_of_verify():
    import ast
    from pathlib import Path

    from ledger.toys import launcher, progress

    for module in (launcher, progress):  # progress: the launcher's own watch, split off
        tree = ast.parse(Path(module.__file__).read_text())
        imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import)
                     for a in n.names]
        assert not [m for m in imported if m and m.startswith("ledger")
                    and m != "ledger.toys.progress"]

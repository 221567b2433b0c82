"""Bytes this process's TCP sockets put on the wire, read from the kernel.

gloo's TCP transport (gloo/transport/tcp/pair.cc) talks to every peer over one socket
per pair; the kernel keeps per-socket counters that no Python code can fake.
``snapshot()`` reads, for every TCP socket in /proc/self/fd, ``getsockopt(TCP_INFO)``
and takes the bytes the application has written into it:

    written = tcpi_bytes_sent - tcpi_bytes_retrans + tcpi_notsent_bytes

``tcpi_bytes_sent`` (RFC 4898 tcpEStatsPerfHCDataOctetsOut) counts data segments
transmitted, retransmissions included, so the retransmitted bytes are taken off; what
the application wrote that the kernel has not transmitted yet (``tcpi_notsent_bytes``)
is added, so a snapshot taken right after a collective returns needs no wait and no
barrier. Offsets are those of ``struct tcp_info`` in linux/include/uapi/linux/tcp.h
(bytes_acked at 120, notsent_bytes at 144, bytes_sent at 200, bytes_retrans at 208;
bytes_sent since Linux 4.19).

gloo frames every message: a 48-byte preamble (six size_t, ``struct Op`` in
gloo/transport/tcp/pair.h), and for unbound buffers, which every collective of
ProcessGroupGloo uses, a sender also writes a NOTIFY_SEND_READY preamble and a receiver
a NOTIFY_RECV_READY one (pair.cc, ``Pair::send`` / ``Pair::recv``). ``framing()``
measures those costs instead of assuming them.
"""
from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass

TCP_INFO_LEN = 232
_OFF_NOTSENT, _OFF_SENT, _OFF_RETRANS = 144, 200, 208


def _written(sock: socket.socket) -> int | None:
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_LEN)
    if len(info) < _OFF_RETRANS + 8:  # a kernel older than 4.19: no bytes_sent
        return None
    (notsent,) = struct.unpack_from("I", info, _OFF_NOTSENT)
    sent, retrans = struct.unpack_from("QQ", info, _OFF_SENT)
    return sent - retrans + notsent


def snapshot() -> dict[str, int]:
    """Bytes written so far into each TCP socket of this process, by socket inode."""
    out: dict[str, int] = {}
    base = "/proc/self/fd"
    for name in os.listdir(base):
        try:
            link = os.readlink(f"{base}/{name}")
        except OSError:  # closed since the listing
            continue
        if not link.startswith("socket:["):
            continue
        try:
            sock = socket.socket(fileno=int(name))
        except OSError:
            continue
        try:
            if sock.family in (socket.AF_INET, socket.AF_INET6) and \
                    sock.type == socket.SOCK_STREAM:
                got = _written(sock)
                if got is not None:
                    out[link] = got
        except OSError:
            pass
        finally:
            sock.detach()  # the fd stays gloo's
    return out


def delta(before: dict[str, int], after: dict[str, int]) -> int:
    """Bytes written between two snapshots (a socket opened in between counts from 0)."""
    return sum(v - before.get(k, 0) for k, v in after.items())


@dataclass(frozen=True)
class Framing:
    """Measured gloo framing: bytes a sender writes per message beyond the payload, and
    bytes a receiver writes per message it receives (its ready notification)."""

    send_bytes: float
    recv_bytes: float
    fit_residual_bytes: float  # largest misfit of bytes = a * messages + payload

    def of(self, sends: int, recvs: int) -> float:
        return self.send_bytes * sends + self.recv_bytes * recvs


FRAMING_SIZES = (0, 4096, 65536)  # payload bytes of the probe messages


def measure_framing(rank: int) -> Framing:
    """Fit ``bytes = a + payload`` to probe messages between ranks 0 and 1.

    Each of the two sends a message of every size to the other and receives one, so
    each measures both figures: the slope must come out 1 (the kernel counts payload one
    for one) and the intercepts are the framing. Rank 0's figures are shared with every
    rank (gloo's framing is a constant of the transport). Run between collectives."""
    import torch
    import torch.distributed as dist

    out: list = [None]
    if rank < 2:
        sent, got = [], []
        for size in FRAMING_SIZES:
            for turn in (0, 1):
                buf = torch.zeros(size, dtype=torch.uint8)
                before = snapshot()
                if rank == turn:
                    dist.send(buf, 1 - rank)
                    sent.append((size, delta(before, snapshot())))
                else:
                    dist.recv(buf, 1 - rank)
                    got.append(delta(before, snapshot()))
        slope, a_send, resid = _fit(sent)
        a_recv = sum(got) / len(got)
        resid = max(resid, max(abs(g - a_recv) for g in got))
        out = [(slope, Framing(send_bytes=a_send, recv_bytes=a_recv,
                               fit_residual_bytes=resid))]
    dist.broadcast_object_list(out, 0)
    slope, framing = out[0]
    if abs(slope - 1.0) > 1e-9:
        raise RuntimeError(f"the kernel counted {slope:.6f} bytes per payload byte, not 1")
    return framing


def _fit(points):
    """Least squares line through (payload, bytes): slope, intercept, largest misfit."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    icpt = my - slope * mx
    return slope, icpt, max(abs(y - icpt - slope * x) for x, y in points)

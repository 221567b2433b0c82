"""A small PNG reader for the browser test (8-bit RGB/RGBA, no interlace): zlib + struct
and the five scanline filters of the PNG spec (RFC 2083, sec. 6), numpy where a filter
allows it."""
import struct
import zlib

import numpy as np


def read_png(data: bytes) -> np.ndarray:
    """The image as a (height, width, channels) uint8 array."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, head = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + n
    width, height, depth, colour, _, _, interlace = head
    assert depth == 8 and colour in (2, 6) and interlace == 0, head
    bpp = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(b"".join(idat)), dtype=np.uint8)
    rows = raw.reshape(height, width * bpp + 1)
    out = np.zeros((height, width * bpp), dtype=np.uint8)
    prior = np.zeros(width * bpp, dtype=np.int64)
    for y in range(height):
        kind, line = rows[y, 0], rows[y, 1:].astype(np.int64)
        if kind == 0:
            cur = line
        elif kind == 1:  # Sub: a running sum per channel
            cur = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1) % 256
        elif kind == 2:  # Up
            cur = (line + prior) % 256
        else:  # Average (3) and Paeth (4) need the reconstructed left pixel: one by one
            cur = np.zeros_like(line)
            for x in range(width * bpp):
                a = cur[x - bpp] if x >= bpp else 0
                b = prior[x]
                if kind == 3:
                    pred = (a + b) // 2
                else:
                    c = prior[x - bpp] if x >= bpp else 0
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                cur[x] = (line[x] + pred) % 256
        out[y] = cur
        prior = cur
    return out.reshape(height, width, bpp)

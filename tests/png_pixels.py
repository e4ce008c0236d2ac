"""A small PNG reader for the report's screenshot test (8-bit RGB/RGBA, not interlaced: what
Chromium writes), so the test needs no imaging library."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np


def png_pixels(path: str | Path) -> np.ndarray:
    """The image as uint8 [height, width, channels]."""
    data = Path(path).read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, header = 8, [], None
    while pos < len(data):
        (size,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + size]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + size
    width, height, depth, color_type, _, _, interlace = header
    if depth != 8 or color_type not in (2, 6) or interlace:
        raise ValueError(f"{path}: unsupported PNG (depth {depth}, colour type {color_type}, interlace {interlace})")
    bpp = 3 if color_type == 2 else 4
    stride = width * bpp
    raw = zlib.decompress(b"".join(idat))
    rows = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], np.frombuffer(raw, np.uint8, stride, start + 1)
        if kind == 0:
            cur = line.copy()
        elif kind == 1:  # Sub: a running sum per channel
            cur = (np.cumsum(line.reshape(-1, bpp), axis=0, dtype=np.int64) % 256).astype(np.uint8).ravel()
        elif kind == 2:  # Up
            cur = line + prev
        else:  # Average (3) and Paeth (4) depend on the pixel to the left: sequential
            cur = _sequential(kind, line.tolist(), prev.tolist(), bpp)
        rows[y] = prev = cur
    return rows.reshape(height, width, bpp)


def _sequential(kind: int, line: list[int], up: list[int], bpp: int) -> np.ndarray:
    out = [0] * len(line)
    for i, value in enumerate(line):
        a = out[i - bpp] if i >= bpp else 0
        b = up[i]
        if kind == 3:
            out[i] = (value + (a + b) // 2) & 255
            continue
        c = up[i - bpp] if i >= bpp else 0
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        out[i] = (value + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    return np.array(out, dtype=np.uint8)

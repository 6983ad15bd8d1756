"""PNGs built by hand with zlib (no Pillow in .venv), each row under a chosen filter, and images turned as Pillow turns them.

An image here is its rows of bytes, ``bpp`` bytes a pixel (1 grey, 2 grey+alpha, 3 RGB, 4 RGBA at 8 bits a sample).
"""

from __future__ import annotations

import functools
import hashlib
import struct
import zlib
from collections.abc import Sequence

COLOR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}  # bytes a pixel -> PNG colour type, at 8 bits a sample


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def filtered(row: bytes, prev: bytes, kind: int, bpp: int) -> bytes:
    """``row`` under PNG filter ``kind`` (0 None, 1 Sub, 2 Up, 3 Average, 4 Paeth), the row above it ``prev``."""
    out = bytearray()
    for i, value in enumerate(row):
        left = row[i - bpp] if i >= bpp else 0
        up = prev[i]
        up_left = prev[i - bpp] if i >= bpp else 0
        predicted = (0, left, up, (left + up) // 2, _paeth(left, up, up_left))[kind]
        out.append((value - predicted) & 255)
    return bytes(out)


def encode(rows: Sequence[bytes], bpp: int = 1, filters: Sequence[int] | None = None) -> bytes:
    """A PNG of ``rows``; ``filters`` one a row (cycled), by default None for every row."""
    width, height = len(rows[0]) // bpp, len(rows)
    filters = filters or [0]
    prev = bytes(len(rows[0]))
    data = bytearray()
    for number, row in enumerate(rows):
        kind = filters[number % len(filters)]
        data += bytes([kind]) + filtered(row, prev, kind, bpp)
        prev = row
    header = struct.pack(">IIBBBBB", width, height, 8, COLOR_TYPES[bpp], 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(bytes(data))) + chunk(b"IEND", b"")


def turned(rows: Sequence[bytes], bpp: int, degrees: int) -> list[bytes]:
    """``rows`` turned ``degrees`` anticlockwise (Pillow's ``Image.Transpose.ROTATE_<degrees>``), pixel by pixel."""
    grid = [[row[i : i + bpp] for i in range(0, len(row), bpp)] for row in rows]
    for _ in range(degrees // 90 % 4):
        width = len(grid[0])
        grid = [[grid[y][width - 1 - x] for y in range(len(grid))] for x in range(width)]  # the right column on top
    return [b"".join(pixels) for pixels in grid]


def page_rows(seed: int, width: int = 1288, height: int = 24, bpp: int = 1) -> list[bytes]:
    """A small page of one seed: dark marks on white where a hash of (seed, position) says, so seeds differ."""
    rows = []
    for y in range(height):
        marks = hashlib.sha256(f"{seed}:{y}".encode()).digest() * (width // 32 + 1)
        rows.append(b"".join(bytes([0 if marks[x] % 7 == 0 else 255] * bpp) for x in range(width)))
    return rows


@functools.cache  # the same pages are asked for again and again; building one is pure Python
def page_png(seed: int, width: int = 1288, height: int = 24, filters: Sequence[int] = (1, 2, 4, 3, 0)) -> bytes:
    """A grey page of ``seed`` as a PNG (its longest side ``width``), under every filter in turn."""
    return encode(page_rows(seed, width, height), 1, filters)

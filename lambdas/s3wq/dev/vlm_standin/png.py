"""What the stand-in needs of a PNG, without Pillow: its header (the size), and its pixels compared across rotations.

The header is all a check needs. The pixels are read only to tell that an image is a page already seen, turned: a
client asked to rotate a page re-renders it, so the bytes differ but the pixels are the same ones in another order.
Decoding covers what renderers write (8 and 16 bits a sample, any colour type, not interlaced); the rest keeps its
size check and is told apart by its bytes alone. The filters are undone in pure Python, ``Up`` and ``Sub`` in C-speed
steps and ``Average`` and ``Paeth`` byte by byte: a 1288x996 RGB page of text as Pillow writes it takes about a third
of a second, which is why the stand-in reads pixels only when a page it has answered as rotated may be coming back.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from dataclasses import dataclass
from itertools import accumulate

SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Bit depths the PNG specification allows for each colour type (grey, RGB, palette, grey+alpha, RGBA) and its samples.
_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
_SAMPLES = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
_LOW_BYTE = (255).__and__
ROTATIONS = (0, 90, 180, 270)


class NotAPng(ValueError):
    """The bytes are not a PNG whose header the stand-in can read; the message says why."""


class Undecodable(ValueError):
    """A valid PNG whose pixels the stand-in does not read (interlaced, or under 8 bits a sample), or a damaged one."""


@dataclass(frozen=True)
class PngHeader:
    width: int
    height: int
    bit_depth: int
    color_type: int
    interlaced: bool

    @property
    def bytes_per_pixel(self) -> int:
        return max(1, _SAMPLES[self.color_type] * self.bit_depth // 8)


def read_header(data: bytes) -> PngHeader:
    """The IHDR chunk, checked (signature, first chunk, CRC, sizes, depth for the colour type); raise NotAPng."""
    if not data.startswith(SIGNATURE):
        raise NotAPng("it does not start with PNG's signature")
    if len(data) < len(SIGNATURE) + 25:
        raise NotAPng(f"it is {len(data)} bytes, shorter than a PNG's header")
    length, kind = struct.unpack(">I4s", data[8:16])
    if kind != b"IHDR" or length != 13:
        raise NotAPng("its first chunk is not a 13-byte IHDR")
    body = data[16:29]
    (crc,) = struct.unpack(">I", data[29:33])
    if zlib.crc32(kind + body) != crc:
        raise NotAPng("its IHDR chunk's CRC is wrong")
    width, height, depth, color, compression, filtering, interlace = struct.unpack(">IIBBBBB", body)
    if not width or not height:
        raise NotAPng(f"it is {width}x{height} pixels")
    if depth not in _DEPTHS.get(color, ()):
        raise NotAPng(f"bit depth {depth} with colour type {color} is not a PNG's")
    if compression or filtering or interlace > 1:
        raise NotAPng("its compression, filter or interlace method is not one PNG defines")
    return PngHeader(width, height, depth, color, bool(interlace))


def _chunks(data: bytes) -> dict[bytes, bytes]:
    """Each chunk type's data, IDATs joined in order (the others are read once, so the last of a type wins)."""
    found: dict[bytes, list[bytes]] = {}
    pos = len(SIGNATURE)
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        found.setdefault(kind, []).append(data[pos + 8 : pos + 8 + length])
        pos += 12 + length
        if kind == b"IEND":
            break
    return {kind: b"".join(parts) if kind == b"IDAT" else parts[-1] for kind, parts in found.items()}


def _up(raw: bytes, prev: bytes) -> bytes:
    # Bytewise (raw + prev) mod 256 on the whole row as one integer: add the low seven bits of each byte, whose carries
    # stop at the byte's top bit, then set each top bit as the exclusive or of the two top bits and that carry.
    low = int.from_bytes(b"\x7f" * len(raw), "big")
    a, b = int.from_bytes(raw, "big"), int.from_bytes(prev, "big")
    return (((a & low) + (b & low)) ^ ((a ^ b) & ~low)).to_bytes(len(raw), "big")


def _sub(raw: bytes, bpp: int) -> bytes:
    out = bytearray(len(raw))
    for channel in range(bpp):  # each byte of a pixel is a running sum, mod 256, of its own column of bytes
        out[channel::bpp] = bytes(map(_LOW_BYTE, accumulate(raw[channel::bpp])))
    return bytes(out)


def _average(raw: bytes, prev: bytes, bpp: int) -> bytes:
    out = bytearray(raw)
    for i in range(len(out)):
        left = out[i - bpp] if i >= bpp else 0
        out[i] = (out[i] + ((left + prev[i]) >> 1)) & 255
    return bytes(out)


def _paeth(raw: bytes, prev: bytes, bpp: int) -> bytes:
    out = bytearray(raw)
    for i in range(len(out)):
        a = out[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        out[i] = (out[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    return bytes(out)


def _unfilter(data: bytes, header: PngHeader) -> list[bytes]:
    bpp = header.bytes_per_pixel
    row_bytes = header.width * bpp
    if len(data) != header.height * (row_bytes + 1):
        raise Undecodable(f"its image data is {len(data)} bytes, not the {header.height * (row_bytes + 1)} its size needs")
    rows: list[bytes] = []
    prev = bytes(row_bytes)
    for start in range(0, len(data), row_bytes + 1):
        kind, raw = data[start], data[start + 1 : start + 1 + row_bytes]
        if kind == 0:
            row = raw
        elif kind == 1:
            row = _sub(raw, bpp)
        elif kind == 2:
            row = _up(raw, prev)
        elif kind == 3:
            row = _average(raw, prev, bpp)
        elif kind == 4:
            row = _paeth(raw, prev, bpp)
        else:
            raise Undecodable(f"a row has filter type {kind}, which PNG does not define")
        rows.append(row)
        prev = row
    return rows


@dataclass(frozen=True)
class Pixels:
    """An image as planes, one per byte of a pixel (a plane is its rows); turning an image turns each plane alike."""

    header: PngHeader
    palette: bytes
    planes: tuple[tuple[bytes, ...], ...]

    def rotated(self, degrees: int) -> Pixels:
        """The image turned ``degrees`` anticlockwise, as Pillow's ``Image.Transpose.ROTATE_<degrees>`` turns it."""
        if degrees % 360 == 0:
            return self
        planes = tuple(_rotate_plane(plane, degrees % 360) for plane in self.planes)
        width, height = (self.header.height, self.header.width) if degrees % 180 else (self.header.width, self.header.height)
        header = PngHeader(width, height, self.header.bit_depth, self.header.color_type, False)
        return Pixels(header, self.palette, planes)

    def key(self) -> str:
        """A digest of the pixels as seen (size, colours and every sample): equal for equal images however encoded."""
        digest = hashlib.sha1(struct.pack(">IIBB", self.header.width, self.header.height, self.header.bit_depth, self.header.color_type))
        digest.update(self.palette)
        for plane in self.planes:
            for row in plane:
                digest.update(row)
        return digest.hexdigest()


def _rotate_plane(plane: tuple[bytes, ...], degrees: int) -> tuple[bytes, ...]:
    if degrees == 180:
        return tuple(row[::-1] for row in reversed(plane))
    columns = list(zip(*plane))  # column x, top to bottom
    if degrees == 90:  # the right-hand column becomes the top row
        return tuple(bytes(column) for column in reversed(columns))
    return tuple(bytes(column[::-1]) for column in columns)  # 270: the left-hand column, bottom up, becomes the top row


def read_pixels(data: bytes) -> Pixels:
    """The image's pixels; raise NotAPng for what is no PNG, Undecodable for what this reader leaves alone."""
    header = read_header(data)
    if header.interlaced or header.bit_depth < 8:
        raise Undecodable("it is interlaced or under 8 bits a sample")
    chunks = _chunks(data)
    try:
        raw = zlib.decompress(chunks.get(b"IDAT", b""))
    except zlib.error as exc:
        raise Undecodable(f"its image data does not inflate ({exc})") from None
    rows = _unfilter(raw, header)
    bpp = header.bytes_per_pixel
    planes = tuple(tuple(row[byte::bpp] for row in rows) for byte in range(bpp))
    return Pixels(header, chunks.get(b"PLTE", b"") if header.color_type == 3 else b"", planes)

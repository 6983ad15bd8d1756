"""The stand-in's PNG reader: headers checked, pixels read under every filter, and images known again when turned."""

from __future__ import annotations

import struct
import zlib

import pytest
from helpers.png_images import chunk, encode, turned
from hypothesis import given
from hypothesis import strategies as st

from s3wq.dev.vlm_standin.png import NotAPng, Undecodable, read_header, read_pixels


@st.composite
def images(draw: st.DrawFn) -> tuple[list[bytes], int, list[int]]:
    bpp = draw(st.sampled_from([1, 2, 3, 4]))
    width, height = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    rows = [draw(st.binary(min_size=width * bpp, max_size=width * bpp)) for _ in range(height)]
    filters = draw(st.lists(st.integers(0, 4), min_size=1, max_size=height))
    return rows, bpp, filters


@given(images())
def test_pixels_are_read_under_every_filter(image: tuple[list[bytes], int, list[int]]) -> None:
    rows, bpp, filters = image
    pixels = read_pixels(encode(rows, bpp, filters))
    assert (pixels.header.width, pixels.header.height) == (len(rows[0]) // bpp, len(rows))
    assert pixels.planes == tuple(tuple(row[byte::bpp] for row in rows) for byte in range(bpp))


@given(images(), st.sampled_from([90, 180, 270]))
def test_a_turned_image_is_known_by_its_pixels_however_it_is_encoded(image: tuple[list[bytes], int, list[int]], degrees: int) -> None:
    rows, bpp, filters = image
    first = read_pixels(encode(rows, bpp, filters))
    again = read_pixels(encode(turned(rows, bpp, degrees), bpp, filters[::-1]))
    assert first.rotated(degrees).key() == again.key()
    assert first.rotated(degrees).rotated(360 - degrees).key() == first.key()


def test_a_different_image_has_a_different_key() -> None:
    assert read_pixels(encode([b"\x00\x01"])).key() != read_pixels(encode([b"\x01\x00"])).key()
    assert read_pixels(encode([b"\x00\x01"])).key() != read_pixels(encode([b"\x00", b"\x01"])).key()


def _ihdr_png(width: int = 4, height: int = 2, depth: int = 8, color: int = 2, interlace: int = 0) -> bytes:
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, color, 0, 0, interlace))


def test_the_header_gives_the_size() -> None:
    header = read_header(_ihdr_png(1288, 996))
    assert (header.width, header.height, header.bit_depth, header.color_type) == (1288, 996, 8, 2)


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"GIF89a" + bytes(40), "signature"),
        (b"\x89PNG\r\n\x1a\n" + bytes(8), "shorter"),
        (b"\x89PNG\r\n\x1a\n" + chunk(b"IDAT", bytes(13)) + bytes(8), "IHDR"),
        (_ihdr_png()[:-1] + b"\x00", "CRC"),
        (_ihdr_png(0, 5), "0x5"),
        (_ihdr_png(depth=4, color=2), "bit depth"),
        (_ihdr_png(interlace=2), "interlace"),
    ],
)
def test_what_is_no_png_is_refused_saying_why(data: bytes, reason: str) -> None:
    with pytest.raises(NotAPng, match=reason):
        read_header(data)


def test_pixels_it_does_not_read_are_said_so() -> None:
    with pytest.raises(Undecodable, match="interlaced"):
        read_pixels(_ihdr_png(interlace=1))
    with pytest.raises(Undecodable, match="inflate"):
        read_pixels(_ihdr_png() + chunk(b"IDAT", b"not zlib") + chunk(b"IEND", b""))
    with pytest.raises(Undecodable, match="bytes"):
        read_pixels(_ihdr_png() + chunk(b"IDAT", zlib.compress(bytes(5))) + chunk(b"IEND", b""))
    bad_filter = _ihdr_png(1, 1, color=0) + chunk(b"IDAT", zlib.compress(b"\x07\x00")) + chunk(b"IEND", b"")
    with pytest.raises(Undecodable, match="filter type 7"):
        read_pixels(bad_filter)

"""Reading a manifest line by line, whatever its bytes: each line is a source or a bad line with its number.

A byte that is not UTF-8, a control byte or a line longer than any source
makes that line bad, and the rest are read as usual; a line of any length is
read in bounded memory. Compression errors and a truncated stream still make
the whole manifest unreadable: a manifest cut short must not pass for a
shorter one.
"""

from __future__ import annotations

import gzip
import os
import tracemalloc
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from s3wq.errors import BadSource
from s3wq.index.manifests import MAX_MANIFEST_LINE_BYTES, iter_manifest
from s3wq.index.sources import SourceExpander

COMPRESS = {".txt": lambda data: data, ".txt.gz": gzip.compress, ".txt.zst": lambda data: zstandard.ZstdCompressor().compress(data)}


def no_s3():
    raise AssertionError("a local manifest needs no S3 client")


def read(path: Path) -> list[tuple[int, str, str | None]]:
    return [(line.number, line.source, line.problem) for line in iter_manifest(str(path), no_s3)]


@pytest.mark.parametrize("suffix", list(COMPRESS))
def test_a_line_that_is_not_utf8_is_one_bad_line_and_the_others_are_read(tmp_path, suffix):
    body = b"s3://b/one.pdf\n# comment\n\ns3://b/caf\xe9.pdf\ns3://b/two.pdf\ns3://b/\xff\xfe\n"
    path = tmp_path / f"m{suffix}"
    path.write_bytes(COMPRESS[suffix](body))

    lines = read(path)

    assert [(n, s) for n, s, p in lines if p is None] == [(1, "s3://b/one.pdf"), (5, "s3://b/two.pdf")]
    assert [(n, p) for n, _, p in lines if p is not None] == [
        (4, "not UTF-8: byte 0xe9 at byte 11 (invalid continuation byte)"),
        (6, "not UTF-8: byte 0xff at byte 8 (invalid start byte)"),
    ]


@pytest.mark.parametrize(
    "byte, problem",
    [(b"\x00", "NUL byte at byte 9"), (b"\x1b", "control character 0x1b at byte 9"), (b"\r", "control character 0x0d at byte 9")],
)
def test_nul_and_control_bytes_make_a_bad_line(tmp_path, byte, problem):
    path = tmp_path / "m.txt"
    path.write_bytes(b"s3://b/a" + byte + b"b.pdf\r\ns3://b/tab\tin key.pdf\r\n")

    assert read(path) == [(1, "", problem), (2, "s3://b/tab\tin key.pdf", None)]


def test_a_byte_order_mark_starts_the_first_line_only(tmp_path):
    path = tmp_path / "m.txt"
    path.write_bytes(b"\xef\xbb\xbfs3://b/a.pdf\n\xef\xbb\xbfs3://b/b.pdf\n")
    [(_, first, ok), (_, _, problem)] = read(path)
    assert (first, ok) == ("s3://b/a.pdf", None) and problem is None  # U+FEFF further on is a character of the key


def test_a_line_longer_than_any_source_is_bad_and_reading_it_holds_a_bounded_amount(tmp_path):
    path = tmp_path / "m.txt"
    with open(path, "wb") as out:
        out.write(b"s3://b/first.pdf\n/")
        for _ in range(50):
            out.write(b"a" * 2**20)  # a 50 MB line
        out.write(b"\ns3://b/" + b"k" * (MAX_MANIFEST_LINE_BYTES - 6) + b"\n" + b"s3://b/last.pdf")  # one byte too long, then no newline

    tracemalloc.start()
    try:
        lines = read(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    too_long = f"longer than {MAX_MANIFEST_LINE_BYTES:,} bytes: no S3 URI or local path is that long"
    assert lines == [(1, "s3://b/first.pdf", None), (2, "", too_long), (3, "", too_long), (4, "s3://b/last.pdf", None)]
    assert peak < 1 * 2**20, f"reading a 50 MB line peaked at {peak / 2**20:.1f} MB"


def test_a_line_of_exactly_the_cap_is_read(tmp_path):
    path = tmp_path / "m.txt"
    line = "s3://b/" + "k" * (MAX_MANIFEST_LINE_BYTES - 7)
    path.write_bytes(line.encode() + b"\r\n")
    assert read(path) == [(1, line, None)]


@pytest.mark.parametrize("name, body", [("cut.txt.gz", gzip.compress(b"s3://b/a.pdf\n" * 5000)[:-20]), ("not.txt.zst", b"s3://b/a.pdf\n")])
def test_a_broken_compressed_manifest_is_still_unreadable_as_a_whole(tmp_path, name, body):
    path = tmp_path / name
    path.write_bytes(body)
    with pytest.raises(BadSource, match="is unreadable"):
        read(path)


# --- every line is indexed or recorded, with its number -------------------------------------------------------

GOOD = st.builds(lambda n: f"s3://bucket/in/{n}.pdf".encode(), st.integers(0, 10**6))
NOT_UTF8 = st.builds(
    lambda head, bad: b"s3://bucket/" + head + bad,
    st.binary(max_size=8).filter(lambda b: b"\n" not in b and b"\r" not in b),
    st.sampled_from([b"\xff", b"\xc3(", b"\xe9x", b"\xed\xa0\x80"]),
)
CONTROL = st.builds(lambda c: b"s3://bucket/x" + bytes([c]) + b".pdf", st.sampled_from([0, 1, 7, 8, 11, 12, 27, 31]))
LONG = st.builds(lambda n: b"s3://bucket/" + b"x" * n, st.integers(MAX_MANIFEST_LINE_BYTES - 11, 3 * MAX_MANIFEST_LINE_BYTES))
FILLER = st.sampled_from([b"", b"   ", b"# a comment \xff with a bad byte", b"\t"])
LINE = st.one_of(
    GOOD.map(lambda b: ("good", b)),
    NOT_UTF8.map(lambda b: ("bad", b)),
    CONTROL.map(lambda b: ("bad", b)),
    LONG.map(lambda b: ("long", b)),
    FILLER.map(lambda b: ("skip", b)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lines=st.lists(LINE, max_size=40), crlf=st.booleans(), suffix=st.sampled_from(list(COMPRESS)))
def test_every_line_is_indexed_or_recorded_bad_with_its_number(tmp_path_factory, lines, crlf, suffix):
    newline = b"\r\n" if crlf else b"\n"
    path = tmp_path_factory.mktemp("m") / f"manifest{suffix}"
    path.write_bytes(COMPRESS[suffix](b"".join(body + newline for _, body in lines)))
    kinds = {
        number: kind for number, (kind, body) in enumerate(lines, start=1) if not (kind == "long" and len(body) <= MAX_MANIFEST_LINE_BYTES)
    }

    expansion = SourceExpander(check=False).expand([f"@{path}"], strict=False)

    good = [lines[n - 1][1].decode() for n, kind in kinds.items() if kind == "good"]
    short_long = [body.decode() for kind, body in lines if kind == "long" and len(body) <= MAX_MANIFEST_LINE_BYTES]
    assert sorted(expansion.paths) == sorted(good + short_long)
    assert [b.line_number for b in expansion.bad_lines] == [n for n, kind in kinds.items() if kind in ("bad", "long")]
    for bad in expansion.bad_lines:
        assert bad.manifest == str(path) and bad.reason
    os.remove(path)

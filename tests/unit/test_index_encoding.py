"""The index's bytes: zstd CSV rows shared with olmocr, the group hash, and the catalog.

The properties here are what keeps s3wq and olmocr able to work on one
workspace: both must compute the same hash for a group and read each other's
index rows as the same groups.
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json

import pytest
import zstandard
from hypothesis import example, given, settings
from hypothesis import strategies as st

from s3wq.errors import IndexCorrupt
from s3wq.index import Catalog, SegmentInfo, codec, decode_groups, encode_groups, prefix_length
from s3wq.index import catalog as catalog_module
from s3wq.model import Group
from s3wq.store import layout

HEX = "0123456789abcdef"

# Characters an index must carry through untouched; drawn often so that every
# run combines them, on top of arbitrary (non-surrogate) unicode.
AWKWARD = [",", '"', "\n", "\r", " ", "+", "\t", "'", "\\", "é", "日本", "😀", "\x00"]
ANY_CHAR = st.characters(exclude_categories=("Cs",))


def path_text(exclude: str = "") -> st.SearchStrategy[str]:
    awkward = [c for c in AWKWARD if not any(x in c for x in exclude)]
    pieces = st.one_of(st.sampled_from(awkward), ANY_CHAR.filter(lambda c: c not in exclude))
    return st.lists(pieces, min_size=1, max_size=12).map("".join)


hashes = st.text(alphabet=HEX, min_size=40, max_size=40)


def groups_of(paths: st.SearchStrategy[str], last: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[list[Group]]:
    group = st.builds(lambda h, ps, p: Group(h, (*ps, p)), hashes, st.lists(paths, max_size=4), paths if last is None else last)
    return st.lists(group, max_size=8)


def reference_hash(paths) -> str:
    return hashlib.sha1(b"".join(p.encode("utf-8") for p in sorted(paths))).hexdigest()


def olmocr_style_index(groups: list[Group]) -> bytes:
    """Bytes as olmocr writes its index: csv rows (QUOTE_MINIMAL), each stripped, joined by newlines, one zstd frame."""
    rows = []
    for group in groups:
        out = io.StringIO()
        csv.writer(out, quoting=csv.QUOTE_MINIMAL).writerow([group.hash, *group.paths])
        rows.append(out.getvalue().strip())
    return zstandard.ZstdCompressor().compress("\n".join(rows).encode("utf-8"))


def read_like_olmocr(data: bytes) -> list[Group]:
    """Groups as olmocr reads its index: one-shot decompress, text lines, each stripped line parsed as one csv row."""
    lines = io.TextIOWrapper(io.BytesIO(zstandard.ZstdDecompressor().decompress(data)), encoding="utf-8").readlines()
    groups = []
    for line in lines:
        if line.strip():
            parts = next(csv.reader([line.strip()]))
            groups.append(Group(parts[0], tuple(parts[1:])))
    return groups


def last_path_survives_strip(groups: list[Group]) -> bool:
    return all(not g.paths[-1][-1:].isspace() for g in groups)


# --- rows round-trip ------------------------------------------------------------------------------


@settings(max_examples=150)
@given(groups_of(path_text()))
def test_encode_decode_round_trip(groups):
    assert decode_groups(encode_groups(groups), "segment") == groups


@pytest.mark.parametrize(
    "paths",
    [
        pytest.param(("a\rb",), id="cr-in-path-makes-index-unreadable"),
        pytest.param(("x\r" + "0" * 40, "y"), id="cr-in-path-injects-a-group"),
    ],
)
def test_encode_decode_round_trip_with_carriage_return(paths):
    groups = [Group(layout.group_hash(paths), paths)]
    assert decode_groups(encode_groups(groups), "segment") == groups


def test_encode_groups_of_nothing_decodes_to_nothing():
    assert decode_groups(encode_groups([]), "segment") == []


# --- the group hash -----------------------------------------------------------------------------------


@given(st.lists(path_text(), min_size=1, max_size=10))
def test_group_hash_matches_reference(paths):
    assert layout.group_hash(paths) == reference_hash(paths)


@given(st.lists(path_text(), min_size=1, max_size=10).flatmap(lambda ps: st.tuples(st.just(ps), st.permutations(ps))))
def test_group_hash_is_order_independent(pair):
    paths, shuffled = pair
    assert layout.group_hash(shuffled) == layout.group_hash(paths)


# --- olmocr compatibility ----------------------------------------------------------------------------


@settings(max_examples=150)
@given(groups_of(path_text(exclude="\r\n")))
def test_decode_reads_olmocr_index_as_olmocr_does(groups):
    data = olmocr_style_index(groups)
    decoded = decode_groups(data, layout.LEGACY_INDEX_KEY)
    assert decoded == read_like_olmocr(data)
    if last_path_survives_strip(groups):
        # olmocr's own strip() loses trailing whitespace of a row's last path; otherwise nothing is lost.
        assert decoded == groups


@settings(max_examples=150)
@given(groups_of(path_text(exclude="\r\n"), last=path_text(exclude="\r\n")))
def test_olmocr_reads_encode_groups_output(groups):
    assert read_like_olmocr(encode_groups(groups)) == groups


def test_olmocr_reads_last_path_ending_in_space():
    paths = ("a.pdf", "b.pdf ")
    groups = [Group(layout.group_hash(paths), paths)]
    assert read_like_olmocr(encode_groups(groups)) == groups


def test_decode_reads_multi_frame_index():
    first = [Group("a" * 40, ("s3://b/one",))]
    second = [Group("b" * 40, ("s3://b/two", "s3://b/three"))]
    assert decode_groups(encode_groups(first) + encode_groups(second), "segment") == first + second


# --- corrupt input ------------------------------------------------------------------------------------

SOURCE = "index/segments/source-name-under-test.csv.zstd"


def zstd(text: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(text)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"hash,path\n", id="not-zstd"),
        pytest.param(b"\x28\xb5\x2f\xfd garbage", id="zstd-magic-then-garbage"),
        pytest.param(zstd(b"\xff\xfe not utf-8"), id="zstd-of-non-utf8"),
        pytest.param(zstd(b"abc123,s3://b/k\n"), id="hash-too-short"),
        pytest.param(zstd(("A" * 40 + ",s3://b/k\n").encode()), id="hash-uppercase"),
        pytest.param(zstd(("g" * 40 + ",s3://b/k\n").encode()), id="hash-not-hex"),
        pytest.param(zstd(("a" * 41 + ",s3://b/k\n").encode()), id="hash-too-long"),
        pytest.param(zstd(("../" + "a" * 37 + ",s3://b/k\n").encode()), id="hash-traversal"),
        pytest.param(zstd(("a" * 40 + ",s3://b/k\n" + "b" * 40 + "\n").encode()), id="row-without-paths"),
    ],
)
def test_corrupt_index_raises_index_corrupt_naming_source(data):
    with pytest.raises(IndexCorrupt, match="source-name-under-test"):
        decode_groups(data, SOURCE)


def test_truncated_index_raises_index_corrupt():
    data = encode_groups([Group(layout.group_hash([f"p{i}"]), (f"p{i}",)) for i in range(50)])
    with pytest.raises(IndexCorrupt, match="source-name-under-test"):
        decode_groups(data[: len(data) // 2], SOURCE)


def test_row_hash_with_trailing_newline_is_corrupt():
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(["a" * 40 + "\n", "s3://b/k"])
    with pytest.raises(IndexCorrupt, match="source-name-under-test"):
        decode_groups(zstd(out.getvalue().encode()), SOURCE)


# --- segment sizing -----------------------------------------------------------------------------------


@given(st.integers(min_value=0, max_value=10**12))
@example(catalog_module.SEGMENT_TARGET_GROUPS)
@example(catalog_module.SEGMENT_TARGET_GROUPS + 1)
@example(catalog_module.SEGMENT_TARGET_GROUPS * 16)
@example(catalog_module.SEGMENT_TARGET_GROUPS * 16 + 1)
@example(catalog_module.SEGMENT_TARGET_GROUPS * 16**4)
def test_prefix_length_keeps_segments_near_target(count):
    target = catalog_module.SEGMENT_TARGET_GROUPS
    k = prefix_length(count)
    if count <= target:
        assert k == 0
    else:
        # 16**k segments of count / 16**k groups on average: at most the target, and not 16 times smaller.
        assert target / 16 < count / 16**k <= target


# --- the catalog --------------------------------------------------------------------------------------

segment_infos = st.builds(
    SegmentInfo,
    key=hashes.map(layout.segment_key),
    prefix=st.text(alphabet=HEX, max_size=4),
    groups=st.integers(min_value=0, max_value=10**9),
    paths=st.integers(min_value=0, max_value=10**12),
)


@given(st.lists(segment_infos, max_size=20).map(tuple))
def test_catalog_json_round_trip(segments):
    catalog = Catalog(segments)
    assert Catalog.from_json(catalog.to_json()) == catalog
    assert Catalog.from_json(catalog.to_json()).groups == sum(s.groups for s in segments)


@given(st.binary())
def test_catalog_rejects_arbitrary_bytes(data):
    with pytest.raises(IndexCorrupt):
        Catalog.from_json(data)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_catalog_rejects_json_that_is_not_a_catalog(value):
    with pytest.raises(IndexCorrupt):
        Catalog.from_json(json.dumps(value).encode())


def catalog_bytes(**segment) -> bytes:
    entry = {"key": layout.segment_key("c" * 40), "prefix": "", "groups": 1, "paths": 1, **segment}
    return json.dumps({"format": catalog_module.CATALOG_FORMAT, "segments": [entry]}).encode()


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(json.dumps({"format": "s3wq-index/999", "segments": []}).encode(), id="unknown-format"),
        pytest.param(json.dumps({"format": catalog_module.CATALOG_FORMAT}).encode(), id="no-segments"),
        pytest.param(json.dumps({"format": catalog_module.CATALOG_FORMAT, "segments": {"a": 1}}).encode(), id="segments-not-a-list"),
        pytest.param(catalog_bytes(key="results/output_" + "c" * 40 + ".jsonl"), id="key-in-results"),
        pytest.param(catalog_bytes(key="index/catalog.json"), id="key-is-catalog"),
        pytest.param(catalog_bytes(key="index/segments/../../done_flags/x.csv.zstd"), id="key-traversal"),
        pytest.param(catalog_bytes(key="/index/segments/" + "c" * 40 + ".csv.zstd"), id="key-absolute"),
        pytest.param(catalog_bytes(key="index/segments/notahash.csv.zstd"), id="key-not-a-hash"),
        pytest.param(catalog_bytes(key="index/segments/sub/" + "c" * 40 + ".csv.zstd"), id="key-in-subfolder"),
        pytest.param(catalog_bytes(prefix="AB"), id="prefix-uppercase"),
        pytest.param(catalog_bytes(prefix="zz"), id="prefix-not-hex"),
        pytest.param(catalog_bytes(groups="many"), id="groups-not-a-number"),
        pytest.param(catalog_bytes(paths=None), id="paths-null"),
    ],
)
def test_catalog_rejects_invalid_documents(data):
    with pytest.raises(IndexCorrupt, match=layout.INDEX_CATALOG_KEY):
        Catalog.from_json(data)


def test_catalog_rejects_deeply_nested_garbage():
    with pytest.raises(IndexCorrupt):
        Catalog.from_json(b"[" * 100_000)


# --- streaming: the same rows, a piece at a time -------------------------------------------------------


def cut(data: bytes, points: list[int]) -> list[bytes]:
    """``data`` cut at ``points`` (taken modulo its length + 1): consecutive pieces, some possibly empty."""
    marks = sorted({p % (len(data) + 1) for p in points} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(marks)] or [b""]


def in_frames(raw: bytes, points: list[int]) -> bytes:
    """``raw`` compressed as consecutive zstd frames, cut at ``points`` (a frame may end inside a UTF-8 character)."""
    return b"".join(zstd(piece) for piece in cut(raw, points))


def reference_rows(text: str) -> tuple[list[tuple[int, int, list[str]]], bool]:
    """(row number, start in characters, fields) as csv.reader reads the whole text, and whether it raised csv.Error."""
    consumed = 0

    def lines():
        nonlocal consumed
        for line in io.StringIO(text, newline=""):
            consumed += len(line)
            yield line

    rows, start = [], 0
    try:
        for number, fields in enumerate(csv.reader(lines()), start=1):
            rows.append((number, start, fields))
            start = consumed
    except csv.Error:
        return rows, True
    return rows, False


def streamed_rows(pieces: list[bytes]) -> tuple[list[tuple[int, int, list[str]]], bool]:
    rows = []
    try:
        for row in codec.rows(pieces, SOURCE):
            rows.append(row)
    except IndexCorrupt as exc:
        assert "source-name-under-test" in str(exc)
        return rows, True
    return rows, False


CSV_TEXT = st.lists(st.sampled_from([*AWKWARD, '""', "\r\n", "a", "b,c"]) | ANY_CHAR, max_size=40).map("".join)
CUTS = st.lists(st.integers(min_value=0, max_value=10**6), max_size=4)


@settings(max_examples=300)
@given(CSV_TEXT, CUTS, CUTS)
@example('a,"b\r\nc",d\r\n\r\n"x""y"\n', [11], [5])
@example("a\r\nb\r", [2], [])  # a "\r" ending a frame may be half of "\r\n"
@example('a"b,c\n"d', [], [])  # a quote inside an unquoted field, and one never closed
def test_streamed_rows_are_the_rows_of_the_whole_text(text, frame_cuts, piece_cuts):
    pieces = cut(in_frames(text.encode("utf-8"), frame_cuts), piece_cuts)
    assert streamed_rows(pieces) == reference_rows(text)


@settings(max_examples=150)
@given(groups_of(path_text()), CUTS, CUTS)
def test_stream_groups_of_any_frames_and_pieces_equals_decode(groups, frame_cuts, piece_cuts):
    raw = zstandard.ZstdDecompressor().decompress(encode_groups(groups))
    pieces = cut(in_frames(raw, frame_cuts), piece_cuts)
    assert list(codec.stream_groups(pieces, "segment")) == groups == decode_groups(b"".join(pieces), "segment")


@settings(max_examples=100)
@given(groups_of(path_text(exclude="\r\n")), CUTS)
def test_stream_groups_reads_olmocr_index_as_olmocr_does(groups, piece_cuts):
    data = olmocr_style_index(groups)
    assert list(codec.stream_groups(cut(data, piece_cuts), layout.LEGACY_INDEX_KEY)) == read_like_olmocr(data)


def test_stream_groups_reads_every_frame():
    first = [Group("a" * 40, ("s3://b/one",))]
    second = [Group("b" * 40, ("s3://b/two", "s3://b/three"))]
    data = encode_groups(first) + zstd(b"") + encode_groups(second)
    for pieces in ([data], [bytes([b]) for b in data]):
        assert list(codec.stream_groups(pieces, "segment")) == first + second


def test_a_cut_short_index_is_corrupt_wherever_it_is_cut():
    groups = [Group(layout.group_hash([f"p{i}"]), (f"p{i}", f"q{i}")) for i in range(40)]
    data = encode_groups(groups[:20]) + encode_groups(groups[20:])
    first_frame_ends = len(encode_groups(groups[:20]))
    for end in range(len(data)):
        if end == first_frame_ends:
            continue  # the first frame whole: a shorter index, not a cut one
        with pytest.raises(IndexCorrupt, match="source-name-under-test"):
            list(codec.stream_groups(cut(data[:end], [end // 3]), SOURCE))


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"hash,path\n", id="not-zstd"),
        pytest.param(zstd(b"ok") + b"trailing garbage", id="garbage-after-a-frame"),
        pytest.param(zstd(b"\xff\xfe not utf-8"), id="zstd-of-non-utf8"),
        pytest.param(zstd("é".encode()[:1]), id="text-ends-inside-a-character"),
        pytest.param(zstd(("a" * 40 + ",s3://b/k\n" + "b" * 40 + "\n").encode()), id="row-without-paths"),
        pytest.param(zstd(("a" * 40 + ',"s3://b/' + "x" * 200_000 + '"\n').encode()), id="field-over-csv-limit"),
    ],
)
def test_streamed_corrupt_index_raises_index_corrupt_naming_source(data):
    with pytest.raises(IndexCorrupt, match="source-name-under-test"):
        list(codec.stream_groups(cut(data, [len(data) // 2]), SOURCE))

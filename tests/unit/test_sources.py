"""Sources and manifests: what a manifest line, a glob or a folder expands to, and how a bad one is reported.

The command line reading them, as a user runs it, is tests/integration/test_sources_cli.py.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import zstandard

from s3wq.errors import BadManifestLines, BadSource
from s3wq.index.sources import SourceExpander

# --- manifests ----------------------------------------------------------------------------------------


def zstd_streamed(data: bytes) -> bytes:
    """Streamed compression leaves the content size out of the frame header."""
    compressor = zstandard.ZstdCompressor().compressobj()
    return compressor.compress(data) + compressor.flush()


ENCODINGS = {
    ".txt": lambda data: data,
    ".txt.gz": gzip.compress,
    ".txt.zst": lambda data: zstandard.ZstdCompressor().compress(data),
    ".txt.zstd": zstd_streamed,
}


def write_manifest(directory: Path, lines: list[str], *, suffix: str = ".txt", newline: str = "\n") -> str:
    path = directory / f"manifest{suffix}"
    path.write_bytes(ENCODINGS[suffix](newline.join(lines).encode("utf-8") + newline.encode()))
    return str(path)


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("suffix", list(ENCODINGS))
def test_manifest_yields_sources_skipping_comments_and_blank_lines(tmp_path, inputs, suffix, newline):
    manifest = write_manifest(
        tmp_path,
        [
            "# inputs for run 1",
            "s3://bucket/a.pdf",
            "",
            "   ",
            "   # an indented comment",
            "s3://bucket/dir/with space+plus.pdf",
            str(inputs / "a.txt"),
            str(inputs / "sub"),
        ],
        suffix=suffix,
        newline=newline,
    )

    expansion = SourceExpander(check=False).expand([f"@{manifest}"])

    assert expansion.bad_lines == []
    assert expansion.paths == [
        "s3://bucket/a.pdf",
        "s3://bucket/dir/with space+plus.pdf",
        str((inputs / "a.txt").resolve()),
        str((inputs / "sub/c.txt").resolve()),
        str((inputs / "sub/d e.txt").resolve()),
    ]


BAD_LINES = {
    "ftp://x/y": "unsupported scheme",
    "s3://": "no bucket",
    "s3://bucket": "no object key",
    "s3://bucket/": "no object key",
    "s3://Bad_Bucket/key": "invalid bucket",
    "no/such/local/file.pdf": "no such file",
}


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize("suffix", [".txt", ".txt.gz", ".txt.zst"])
@pytest.mark.parametrize("bad", list(BAD_LINES))
def test_strict_manifest_names_the_bad_line(tmp_path, bad, suffix, newline, monkeypatch):
    monkeypatch.chdir(tmp_path)
    manifest = write_manifest(
        tmp_path, ["# header", "", "s3://bucket/ok.pdf", bad, "s3://bucket/after.pdf"], suffix=suffix, newline=newline
    )

    with pytest.raises(BadManifestLines) as caught:
        SourceExpander(check=False).expand([f"@{manifest}"], strict=True)

    [line] = caught.value.bad_lines
    assert (line.manifest, line.line_number) == (manifest, 4)
    assert BAD_LINES[bad] in line.reason
    assert str(caught.value) == str(line) and f"{manifest}:4:" in str(caught.value)


def test_lenient_manifest_collects_bad_lines_and_keeps_the_rest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lines = ["# header", "s3://bucket/ok.pdf", *BAD_LINES, "", "s3://bucket/last.pdf"]
    manifest = write_manifest(tmp_path, lines, newline="\r\n")

    expansion = SourceExpander(check=False).expand([f"@{manifest}"], strict=False)

    assert expansion.paths == ["s3://bucket/ok.pdf", "s3://bucket/last.pdf"]
    assert [(b.manifest, b.line_number) for b in expansion.bad_lines] == [(manifest, n) for n in range(3, 3 + len(BAD_LINES))]
    for bad, reason in zip(expansion.bad_lines, BAD_LINES.values()):
        assert reason in bad.reason


@pytest.mark.parametrize(
    "source",
    ["ftp://x/y", "s3://", "s3://bucket", "no/such/file.pdf", "", "s3://bucket/a\nb"],
)
def test_bad_direct_source_raises_bad_source(tmp_path, source, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BadSource):
        SourceExpander(check=False).expand([source])


def test_missing_or_corrupt_manifest_raises_bad_source(tmp_path):
    with pytest.raises(BadSource, match="cannot read manifest"):
        SourceExpander(check=False).expand([f"@{tmp_path / 'absent.txt'}"])
    corrupt = tmp_path / "broken.txt.gz"
    corrupt.write_bytes(b"not gzip at all")
    with pytest.raises(BadSource, match="unreadable"):
        SourceExpander(check=False).expand([f"@{corrupt}"])


def test_local_glob_and_directory_expand_to_absolute_files(tmp_path, inputs, monkeypatch):
    monkeypatch.chdir(tmp_path)
    expansion = SourceExpander(check=False).expand(["in/*.txt", "in/sub"])
    assert expansion.paths == [str((inputs / n).resolve()) for n in ["a.txt", "b.txt", "sub/c.txt", "sub/d e.txt"]]

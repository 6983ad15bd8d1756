"""Sources and manifests, and the command line as a user runs it (a child process on a local workspace)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
import zstandard
from support import run_cli

from s3wq.errors import BadManifestLines, BadSource
from s3wq.index import WorkIndex
from s3wq.ops.sources import SourceExpander
from s3wq.store import LocalBackend, layout

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


@pytest.fixture
def inputs(tmp_path) -> Path:
    directory = tmp_path / "in"
    (directory / "sub").mkdir(parents=True)
    for name in ["a.txt", "b.txt", "sub/c.txt", "sub/d e.txt"]:
        (directory / name).write_text(f"contents of {name}\n")
    return directory


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


# --- the command line ---------------------------------------------------------------------------------


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def cli(tmp_path: Path, *args: str):
    return run_cli(*args, cwd=tmp_path)


STATUS_KEYS = {
    "groups",
    "paths",
    "done",
    "failed",
    "locked",
    "claimed_ahead",
    "pending",
    "remaining",
    "finished",
    "released",
    "wait_seconds",
}
PROBLEM_KEYS = {"input_error_groups", "manifests_with_bad_lines", "manifest_errors"}
WORK_KEYS = {"worker_id", "processed", "failed", "conflicts", "reclaimed", "stopped_reason"}


def test_cli_populate_status_work(tmp_path, inputs, local_workspace):
    populate = cli(tmp_path, "populate", local_workspace, str(inputs), "--group-size", "3", "--json")
    assert populate.returncode == 0, populate.stderr
    assert json.loads(populate.stdout)["added_paths"] == 4

    status = cli(tmp_path, "status", local_workspace, "--json")
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert set(doc) == STATUS_KEYS | PROBLEM_KEYS
    assert {k: doc[k] for k in STATUS_KEYS} == {
        "groups": 2,
        "paths": 4,
        "done": 0,
        "failed": 0,
        "locked": 0,
        "claimed_ahead": 0,
        "pending": 2,
        "remaining": 2,
        "finished": 0,
        "released": 0,
        "wait_seconds": 0,
    }
    assert {k: doc[k] for k in PROBLEM_KEYS} == {"input_error_groups": 0, "manifests_with_bad_lines": 0, "manifest_errors": []}

    work = cli(tmp_path, "work", local_workspace, "--json", "--time-limit", "60", "--worker-id", "cli-worker", "--processor", "text")
    assert work.returncode == 0, work.stderr
    report = json.loads(work.stdout)
    assert WORK_KEYS <= set(report)
    assert (report["worker_id"], report["processed"], report["failed"], report["stopped_reason"]) == ("cli-worker", 2, 0, "queue_empty")

    backend = LocalBackend(local_workspace)
    results = [json.loads(line) for key in backend.list_keys(layout.RESULTS_PREFIX) for line in backend.read(key).body.splitlines()]
    assert sorted(r["text"] for r in results) == sorted(f"contents of {n}\n" for n in ["a.txt", "b.txt", "sub/c.txt", "sub/d e.txt"])
    status = json.loads(cli(tmp_path, "status", local_workspace, "--json").stdout)
    assert (status["done"], status["remaining"]) == (2, 0)


@pytest.fixture
def busy_workspace(tmp_path, inputs, local_workspace) -> str:
    """A populated workspace with one failed group, so a command that wrongly went ahead would change something."""
    backend = LocalBackend(local_workspace)
    WorkIndex(backend).populate([str(p) for p in sorted(inputs.rglob("*.txt"))], group_size=2)
    failed = next(WorkIndex(backend).iter_groups()).hash
    backend.create(layout.failed_key(failed), b'{"attempts": 3}')
    return failed


def write_bad_manifest(tmp_path: Path) -> str:
    # The good line a local file: every line is checked before the error, and there is no S3 here to ask.
    return "@" + write_manifest(tmp_path, ["# header", "in/a.txt", "ftp://x/y"])


BAD_INVOCATIONS = {
    "unknown-scheme-workspace": (["populate", "gs://bucket/ws", "{input}"], "unsupported scheme 'gs'"),
    "manifest-with-bad-line": (["populate", "{ws}", "{bad_manifest}"], "manifest.txt:3: unsupported scheme 'ftp'"),
    "nonexistent-source": (["populate", "{ws}", "no-such-file.pdf"], "no such file or directory: 'no-such-file.pdf'"),
    "group-size-zero": (["populate", "{ws}", "{input}", "--group-size", "0"], "--group-size: must be at least 1"),
    "bad-processor": (["work", "{ws}", "--processor", "nope"], "processor 'nope'"),
    "requeue-bad-hash": (["requeue-failed", "{ws}", "--hash", "{failed}", "--hash", "nothex"], "got 'nothex'"),
    "time-limit-inf": (["work", "{ws}", "--time-limit", "inf"], "--time-limit: must be a finite number, got 'inf'"),
    "lease-nan": (["work", "{ws}", "--lease", "nan"], "--lease/--lock-timeout: must be a finite number, got 'nan'"),
    "margin-negative": (["work", "{ws}", "--safety-margin", "-1"], "--safety-margin: must be 0 or more, got -1"),
    "group-size-not-a-number": (["populate", "{ws}", "{input}", "--group-size", "ten"], "--group-size: must be a whole number, got 'ten'"),
    "worker-index-negative": (["work", "{ws}", "--worker-index", "-1", "--workers", "2"], "--worker-index: must be 0 or more, got -1"),
    "port-out-of-range": (["local", "up", "--port", "99999"], "--port: must be a TCP port, 1 to 65535, got 99999"),
    "keep-logs-in-a-file": (["local", "up", "--keep-logs", "{input}"], "a.txt: is a file, not a folder"),
}


def fill(args: list[str], tmp_path: Path, inputs: Path, ws: str, failed: str) -> list[str]:
    values = {"ws": ws, "input": str(inputs / "a.txt"), "failed": failed}
    if any("{bad_manifest}" in a for a in args):
        values["bad_manifest"] = write_bad_manifest(tmp_path)
    return [a.format(**values) for a in args]


@pytest.mark.parametrize("case", list(BAD_INVOCATIONS))
def test_cli_bad_input_exits_2_and_changes_nothing(tmp_path, inputs, local_workspace, busy_workspace, case):
    template, problem = BAD_INVOCATIONS[case]
    args = fill(template, tmp_path, inputs, local_workspace, busy_workspace)
    before = snapshot(tmp_path)

    result = cli(tmp_path, *args)

    assert result.returncode == 2, result.stderr
    error_lines = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(error_lines) == 1 and problem in error_lines[0], result.stderr
    assert result.stdout == ""
    assert snapshot(tmp_path) == before


# argparse's own usage errors name the command; the others are the library's one line.
USAGE_ERRORS = {
    "group-size-zero",
    "time-limit-inf",
    "lease-nan",
    "margin-negative",
    "group-size-not-a-number",
    "worker-index-negative",
    "port-out-of-range",
}


@pytest.mark.parametrize("case", [c for c in BAD_INVOCATIONS if c not in USAGE_ERRORS])
def test_cli_bad_input_error_is_one_line(tmp_path, inputs, local_workspace, busy_workspace, case):
    result = cli(tmp_path, *fill(BAD_INVOCATIONS[case][0], tmp_path, inputs, local_workspace, busy_workspace))
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("s3wq: error: "), result.stderr


def test_cli_group_size_zero_error_is_one_line(tmp_path, inputs, local_workspace):
    result = cli(tmp_path, "populate", local_workspace, str(inputs / "a.txt"), "--group-size", "0")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr


@pytest.mark.parametrize("command", ["", "populate", "status", "work", "requeue-failed", "local", "local demo", "local up"])
def test_cli_help_shows_an_example(tmp_path, command):
    result = cli(tmp_path, *command.split(), "--help")
    assert result.returncode == 0, result.stderr
    assert re.search(rf"examples?:\n\s+s3wq {command}", result.stdout), result.stdout


@pytest.mark.parametrize("case", sorted(USAGE_ERRORS))
def test_cli_bad_number_error_is_one_line(tmp_path, inputs, local_workspace, busy_workspace, case):
    result = cli(tmp_path, *fill(BAD_INVOCATIONS[case][0], tmp_path, inputs, local_workspace, busy_workspace))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "_positive" not in result.stderr and "invalid" not in result.stderr, result.stderr


def test_cli_verbose_is_accepted_after_the_command_too(tmp_path, inputs, local_workspace):
    cli(tmp_path, "populate", local_workspace, str(inputs / "a.txt"))
    before, after = cli(tmp_path, "-v", "status", local_workspace), cli(tmp_path, "status", local_workspace, "-v")
    assert (before.returncode, after.returncode) == (0, 0), after.stderr
    assert before.stdout == after.stdout and "groups=1" in after.stdout


def test_cli_counts_read_right_for_one(tmp_path, inputs, local_workspace, busy_workspace):
    result = cli(tmp_path, "failures", local_workspace)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "1 failed group"

"""A mistyped URI is refused with a suggestion, never taken for a local path: exit 2, one line, nothing created.

`s3wq populate s3:/x inputs` once answered "added 3 paths in 1 groups" and
made a folder named `s3:`. The CLI runs as a user runs it, in a child
process, with the local S3 server as its endpoint (so that nothing could
reach AWS even if a URI were taken as meant).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import run_cli

SUGGESTED = "did you mean s3://my-bucket/ws?"

WORKSPACES = {
    "one-slash": ("s3:/my-bucket/ws", SUGGESTED),
    "no-slash": ("s3:my-bucket/ws", SUGGESTED),
    "no-colon": ("s3//my-bucket/ws", SUGGESTED),
    "windows-backslashes": ("s3:\\\\my-bucket\\ws", SUGGESTED),
    "uppercase-scheme": ("S3://my-bucket/ws", SUGGESTED),
    "hadoop-s3a": ("s3a://my-bucket/ws", SUGGESTED),
    "hadoop-s3n": ("s3n://my-bucket/ws", SUGGESTED),
    "https-object-url": ("https://my-bucket.s3.us-east-1.amazonaws.com/ws", SUGGESTED),
    "google-storage": ("gs://my-bucket/ws", "unsupported scheme 'gs'"),
    "http": ("http://example.com/ws", "unsupported scheme 'http'"),
    "gs-one-slash": ("gs:/my-bucket/ws", "looks like a gs:// URI"),
    "empty-bucket": ("s3://", "no bucket in 's3://'"),
    "empty-bucket-with-prefix": ("s3:///ws", "no bucket in 's3:///ws'"),
}


def tree(root: Path) -> dict[str, bytes | None]:
    """Every file and folder under ``root`` (folders too: a mistyped workspace must not become one)."""
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for name in ("a.txt", "b.txt", "c.txt"):
        (inputs / name).write_text(f"text of {name}\n")
    return tmp_path


def refused(result, *expected: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("s3wq: error: ")
    for text in expected:
        assert text in line, line
    return line


@pytest.mark.parametrize("case", list(WORKSPACES))
def test_populate_refuses_a_mistyped_workspace_and_creates_nothing(s3_server, project, case):
    workspace, suggestion = WORKSPACES[case]
    before = tree(project)

    result = run_cli("populate", workspace, "inputs", cwd=project)

    refused(result, f"workspace {workspace!r}" if case not in ("empty-bucket", "empty-bucket-with-prefix") else "", suggestion)
    assert tree(project) == before


@pytest.mark.parametrize("command", [["status"], ["status", "--watch", "--wait-for-index"], ["work"], ["failures"], ["requeue-failed"]])
def test_every_command_refuses_a_mistyped_workspace(s3_server, project, command):
    before = tree(project)

    result = run_cli(command[0], "s3:/my-bucket/ws", *command[1:], cwd=project, timeout=60)

    refused(result, SUGGESTED, "./s3:/my-bucket/ws")
    assert tree(project) == before


def test_a_local_path_that_only_starts_like_s3_is_a_local_workspace(project):
    """A folder named s3, and ./s3:/x written out: local paths, as the refusals suggest."""
    for workspace in ("s3/ws", "./s3:/ws"):
        result = run_cli("populate", workspace, "inputs", "--json", cwd=project)
        assert result.returncode == 0, result.stderr
    assert (project / "s3" / "ws").is_dir() and (project / "s3:" / "ws").is_dir()


SOURCES = {
    "one-slash": ("s3:/my-bucket/in/a.pdf", "did you mean s3://my-bucket/in/a.pdf?"),
    "no-colon": ("s3//my-bucket/in/a.pdf", "did you mean s3://my-bucket/in/a.pdf?"),
    "windows-backslashes": ("s3:\\\\my-bucket\\in\\a.pdf", "did you mean s3://my-bucket/in/a.pdf?"),
    "uppercase-scheme": ("S3://my-bucket/in/a.pdf", "did you mean s3://my-bucket/in/a.pdf?"),
    "hadoop-s3a": ("s3a://my-bucket/in/a.pdf", "did you mean s3://my-bucket/in/a.pdf?"),
    "https-object-url": ("https://s3.amazonaws.com/my-bucket/in/a.pdf", "did you mean s3://my-bucket/in/a.pdf?"),
    "google-storage": ("gs://my-bucket/in/a.pdf", "unsupported scheme 'gs'"),
    "file-uri": ("file:///etc/hostname", "unsupported scheme 'file'"),
}


@pytest.fixture
def populated(project) -> Path:
    result = run_cli("populate", "ws", "inputs/a.txt", cwd=project)
    assert result.returncode == 0, result.stderr
    return project


@pytest.mark.parametrize("case", list(SOURCES))
def test_populate_refuses_a_mistyped_source_and_changes_nothing(s3_server, populated, case):
    source, suggestion = SOURCES[case]
    before = tree(populated)

    result = run_cli("populate", "ws", "inputs/b.txt", source, cwd=populated)

    refused(result, suggestion)
    assert tree(populated) == before


@pytest.mark.parametrize("case", ["one-slash", "no-colon", "uppercase-scheme", "google-storage"])
def test_populate_refuses_a_mistyped_manifest_line_naming_its_line(s3_server, populated, case):
    source, suggestion = SOURCES[case]
    (populated / "list.txt").write_text(f"inputs/b.txt\n{source}\n")
    before = tree(populated)

    result = run_cli("populate", "ws", "@list.txt", cwd=populated)

    assert result.returncode == 2, result.stderr
    assert "list.txt:2" in result.stderr and suggestion in result.stderr, result.stderr
    assert tree(populated) == before


def test_populate_refuses_a_mistyped_manifest_name(s3_server, populated):
    before = tree(populated)

    result = run_cli("populate", "ws", "@s3:/my-bucket/lists/batch.txt", cwd=populated)

    refused(result, "manifest 's3:/my-bucket/lists/batch.txt'", "did you mean s3://my-bucket/lists/batch.txt?")
    assert tree(populated) == before

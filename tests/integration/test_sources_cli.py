"""The command line as a user runs it on sources and manifests (a child process on a local workspace).

What the sources themselves expand to is tests/unit/test_sources.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support import STATUS_KEYS, run_cli

from s3wq.index import WorkIndex
from s3wq.store import LocalBackend, layout


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def cli(tmp_path: Path, *args: str):
    return run_cli(*args, cwd=tmp_path)


PROBLEM_KEYS = {"input_error_groups", "manifests_with_bad_lines", "manifest_errors"}
WORK_KEYS = {"worker_id", "processed", "failed", "conflicts", "reclaimed", "stopped_reason"}


def test_cli_populate_status_work(tmp_path, inputs, local_workspace):
    populate = cli(tmp_path, "populate", local_workspace, str(inputs), "--group-size", "3", "--json")
    assert populate.returncode == 0, populate.stderr
    assert json.loads(populate.stdout)["added_paths"] == 4

    status = cli(tmp_path, "status", local_workspace, "--json")
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert set(doc) == STATUS_KEYS | PROBLEM_KEYS | {"pages"}
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
        "unavailable": 0,
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
    manifest = tmp_path / "manifest.txt"
    manifest.write_text("# header\nin/a.txt\nftp://x/y\n")
    return f"@{manifest}"


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

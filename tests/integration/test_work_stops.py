"""`s3wq work` through the command line: no silent zero (issue 31).

A worker that stops with groups pending, or finds every group done by
another processor, exits 0; it says why it stopped and the command that
would go on. On a terminal it has no time limit unless given one.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from s3wq.store import LocalBackend, layout

S3WQ_SCRIPT = str(Path(sys.executable).parent / "s3wq")


def s3wq(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([S3WQ_SCRIPT, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def on_a_terminal(cwd: Path, *args: str) -> str:
    """What the command prints to stdout when stdin and stdout are a terminal (a pty), as a person at it sees it."""
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen([S3WQ_SCRIPT, *args], cwd=cwd, stdin=terminal, stdout=terminal, stderr=subprocess.PIPE)
    finally:
        os.close(terminal)
    shown = b""
    try:
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the last holder of the terminal closed it
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(controller)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    return shown.decode("utf-8").replace("\r\n", "\n")


@pytest.fixture
def project(tmp_path) -> Path:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
        (inputs / name).write_text(f"text of {name}\n")
    (tmp_path / "myproc.py").write_text(
        textwrap.dedent(
            """
            import time

            def slow(group, ctx):
                time.sleep(0.6)
                ctx.write_result([{"path": p} for p in group.paths])
            """
        )
    )
    populated = s3wq(tmp_path, "populate", "ws", "inputs", "--group-size", "1")
    assert populated.returncode == 0, populated.stderr
    return tmp_path


def advice(result: subprocess.CompletedProcess) -> list[str]:
    """The lines after the summary on stderr (a run that went well prints nothing else there)."""
    return result.stderr.strip().splitlines()


def test_a_workspace_done_by_another_processor_names_the_reset_that_runs_it_again(project):
    assert s3wq(project, "work", "ws").returncode == 0  # the default: text

    again = s3wq(project, "work", "ws", "--processor", "noop")

    assert again.returncode == 0, again.stderr
    assert "processed 0" in again.stdout
    assert advice(again) == ["s3wq: every group is done (by text); to run them again with noop: s3wq reset ws --all, then work"]
    # The done flag names the processor that made the group, and each text record names itself.
    backend = LocalBackend(str(project / "ws"))
    [key, *_] = backend.list_keys(layout.DONE_PREFIX)
    assert json.loads(backend.read(key).body)["processor"] == "text"
    record = json.loads(next((project / "ws" / "results").glob("*.jsonl")).read_text().splitlines()[0])
    assert record["metadata"]["processor"]["name"] == "text"


def test_a_workspace_done_by_the_same_processor_says_every_group_is_done(project):
    assert s3wq(project, "work", "ws", "--processor", "noop").returncode == 0

    again = s3wq(project, "work", "ws", "--processor", "noop")

    assert advice(again) == ["s3wq: every group is already done; to run them again: s3wq reset ws --all, then work"]


def test_done_flags_of_an_older_s3wq_or_olmocr_name_no_processor_and_still_read(project):
    assert s3wq(project, "work", "ws", "--processor", "noop").returncode == 0
    backend = LocalBackend(str(project / "ws"))
    for key in backend.list_keys(layout.DONE_PREFIX):
        backend.write(key, b"")  # olmocr's flags are empty

    again = s3wq(project, "work", "ws", "--processor", "text")

    assert advice(again) == ["s3wq: every group is already done; to run them again: s3wq reset ws --all, then work"]


def test_a_worker_stopped_at_its_time_limit_with_groups_pending_says_how_to_go_on(project):
    result = s3wq(project, "work", "ws", "--processor", "myproc:slow", "--time-limit", "1", "--json")

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    left = 4 - report["processed"]
    assert left >= 1 and report["time_limit"] == 1
    groups = f"{left} group" + ("s" if left > 1 else "")
    expected = {
        "time_limit": f"s3wq: stopped at the time limit (1 s) with {groups} pending: run s3wq work ws again, or --time-limit 0 for no limit",
        "not_enough_time": f"s3wq: stopped with {groups} pending that need more time than this worker had left of its 1 s: "
        "run s3wq work ws with a longer --time-limit (0: no limit)",
    }
    assert advice(result) == [expected[report["stopped_reason"]]]


def test_the_time_limit_is_off_on_a_terminal_and_900_s_elsewhere(project):
    piped = json.loads(s3wq(project, "work", "ws", "--processor", "noop", "--json").stdout)
    assert piped["time_limit"] == 900
    assert s3wq(project, "reset", "ws", "--all", "--yes").returncode == 0

    shown = on_a_terminal(project, "work", "ws", "--processor", "noop", "--json")
    assert json.loads(shown.strip().splitlines()[-1])["time_limit"] is None

    given = on_a_terminal(project, "work", "ws", "--processor", "noop", "--json", "--time-limit", "30")
    assert json.loads(given.strip().splitlines()[-1])["time_limit"] == 30
    none = json.loads(s3wq(project, "work", "ws", "--processor", "noop", "--json", "--time-limit", "0").stdout)
    assert none["time_limit"] is None

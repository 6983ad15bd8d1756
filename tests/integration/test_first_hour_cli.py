"""A new user's first hour on a local workspace, through the command line as they run it (child processes).

Each test is one surprise a user met (issue 13): a default that dropped work,
a processor error with no traceback, a zero that looked like success, an
error that named the wrong problem.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from support import run_cli

from s3wq.store import LocalBackend, layout

# The console script, as `pip install` makes it: unlike `python -m s3wq`, it
# does not put the current directory on sys.path by itself.
S3WQ_SCRIPT = str(Path(sys.executable).parent / "s3wq")


def s3wq(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([S3WQ_SCRIPT, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def project(tmp_path) -> Path:
    """A user's folder: three text inputs and a processor module of their own."""
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for name in ("a.txt", "b.txt", "c.txt"):
        (inputs / name).write_text(f"text of {name}\n")
    (tmp_path / "myproc.py").write_text(
        textwrap.dedent(
            """
            import os, time

            def upper(group, ctx):
                ctx.write_result([{"path": p, "upper": ctx.read_input(p).decode().upper()} for p in group.paths])

            def broken(group, ctx):
                return helper({})

            def helper(settings):
                return settings["missing"]

            def stamped_failure(group, ctx):
                with open(os.environ["STAMPS"], "a") as stamps:
                    stamps.write(f"{time.monotonic()}\\n")
                raise RuntimeError("always fails")
            """
        )
    )
    return tmp_path


def populate(project: Path, *extra: str) -> None:
    result = s3wq(project, "populate", "ws", "inputs", "--group-size", "1", *extra)
    assert result.returncode == 0, result.stderr


def results(project: Path) -> list[dict]:
    return [json.loads(line) for path in sorted((project / "ws" / "results").glob("*.jsonl")) for line in path.read_text().splitlines()]


def status(project: Path) -> dict:
    result = s3wq(project, "status", "ws", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# --- 1. defaults that cannot lose work ------------------------------------------------------------------------


def test_work_without_a_processor_extracts_text_as_lambda_does(project):
    populate(project)

    work = s3wq(project, "work", "ws")

    assert work.returncode == 0, work.stderr
    assert sorted(r["text"] for r in results(project)) == ["text of a.txt\n", "text of b.txt\n", "text of c.txt\n"]


def test_reset_all_makes_done_groups_run_again_with_a_new_processor(project):
    populate(project)
    assert s3wq(project, "work", "ws", "--processor", "noop").returncode == 0
    assert status(project)["done"] == 3 and results(project) == []

    reset = s3wq(project, "reset", "ws", "--all", "--yes")
    assert reset.returncode == 0, reset.stderr
    assert reset.stdout.strip() == "reset 3 groups: pending again"
    assert (status(project)["done"], status(project)["pending"]) == (0, 3)

    assert s3wq(project, "work", "ws", "--processor", "myproc:upper").returncode == 0
    assert sorted(r["upper"] for r in results(project)) == ["TEXT OF A.TXT\n", "TEXT OF B.TXT\n", "TEXT OF C.TXT\n"]


def test_reset_of_one_hash_leaves_the_others_done(project):
    populate(project)
    s3wq(project, "work", "ws", "--processor", "noop")
    one = sorted(p.name for p in (project / "ws" / "done_flags").iterdir())[0].removeprefix("done_").removesuffix(".flag")

    reset = s3wq(project, "reset", "ws", "--hash", one, "--json")

    assert reset.returncode == 0, reset.stderr
    assert json.loads(reset.stdout) == {"reset": [one], "skipped_live": []}
    assert not (project / "ws" / layout.done_key(one)).exists()
    assert (status(project)["done"], status(project)["pending"]) == (2, 1)


@pytest.mark.parametrize(
    "args, problem",
    [
        (["reset", "ws"], "name the groups to reset: --hash H (repeatable) or --all"),
        (["reset", "ws", "--all", "--hash", "a" * 40], "name the groups to reset"),
        (["reset", "ws", "--hash", "b" * 40], f"no group {'b' * 40} in the index"),
        (["reset", "ws", "--hash", "nothex"], "got 'nothex'"),
    ],
)
def test_reset_refuses_an_unclear_or_unknown_target_and_changes_nothing(project, args, problem):
    populate(project)
    s3wq(project, "work", "ws", "--processor", "noop")
    before = snapshot(project)

    assert problem in one_error_line(s3wq(project, *args))
    assert snapshot(project) == before


def test_reset_on_a_terminal_asks_first_and_a_no_changes_nothing(project):
    import pty

    populate(project)
    s3wq(project, "work", "ws", "--processor", "noop")
    before = snapshot(project)
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [S3WQ_SCRIPT, "reset", "ws", "--all"], cwd=project, stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    os.close(terminal)
    try:
        time.sleep(0.2)
        os.write(controller, b"n\n")
        _, stderr = process.communicate(timeout=60)
    finally:
        os.close(controller)
    assert process.returncode == 2
    assert b"nothing reset" in stderr
    assert snapshot(project) == before


# --- 2. debugging a processor ---------------------------------------------------------------------------------


def test_a_failing_processor_keeps_its_traceback_for_failures_inspect_and_verbose(project):
    populate(project)

    work = s3wq(
        project, "-v", "work", "ws", "--processor", "myproc:broken", "--breaker", "0", "--retry-backoff", "0", "--max-attempts", "1"
    )

    assert work.returncode == 1
    assert "failed here; see s3wq failures ws" in work.stderr
    # -v: the traceback as it happens, down to the user's helper.
    assert 'myproc.py", line 11, in helper' in work.stderr and "KeyError: 'missing'" in work.stderr
    failures = json.loads(s3wq(project, "failures", "ws", "--json").stdout)["failures"]
    assert len(failures) == 3
    for failure in failures:
        assert failure["error"] == "KeyError: 'missing'"
        assert 'myproc.py", line 8, in broken' in failure["traceback"] and "line 11, in helper" in failure["traceback"]
        assert (
            "warden.py" not in failure["traceback"] and "sandbox.py" not in failure["traceback"]
        )  # s3wq's own frame says nothing to the user
    shown = s3wq(project, "failures", "ws").stdout
    assert shown.count("traceback") == 3 and 'return settings["missing"]' in shown
    inspected = s3wq(project, "inspect", "ws", failures[0]["hash"]).stdout
    assert "traceback:" in inspected and "in helper" in inspected


def test_retries_of_a_failing_group_back_off(project, tmp_path):
    stamps = tmp_path / "stamps"
    env = {**os.environ, "STAMPS": str(stamps)}
    group = ["populate", "ws2", "inputs/a.txt"]
    assert subprocess.run([S3WQ_SCRIPT, *group], cwd=project, capture_output=True).returncode == 0

    work = subprocess.run(
        [S3WQ_SCRIPT, "work", "ws2", "--processor", "myproc:stamped_failure", "--retry-backoff", "0.3", "--max-attempts", "3"],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )

    assert work.returncode == 1, work.stderr
    runs = [float(line) for line in stamps.read_text().split()]
    assert len(runs) == 3
    first_gap, second_gap = runs[1] - runs[0], runs[2] - runs[1]
    assert first_gap >= 0.3 and second_gap >= 0.6, (first_gap, second_gap)


def test_a_broken_processor_trips_the_breaker_and_leaves_the_rest_of_the_queue(project):
    for n in range(3, 8):
        (project / "inputs" / f"more-{n}.txt").write_text(f"more {n}\n")
    populate(project)  # 8 groups

    work = s3wq(project, "work", "ws", "--processor", "myproc:broken", "--retry-backoff", "0")

    assert work.returncode == 1
    assert "processor myproc:broken failed the first 3 groups it ran with the same error" in work.stderr
    assert "KeyError: 'missing'" in work.stderr
    counts = status(project)
    # Two groups used up their attempts before the breaker could tell; the
    # third kept one attempt; the other five were never run.
    assert (counts["failed"], counts["pending"], counts["done"]) == (2, 6, 0), counts


def test_a_breaker_that_trips_on_a_groups_last_attempt_fails_it_with_its_real_error(project):
    (project / "inputs" / "d.txt").write_text("d\n")
    populate(project)  # 4 groups

    work = s3wq(project, "work", "ws", "--processor", "myproc:broken", "--max-attempts", "1")

    assert work.returncode == 1 and "failed the first 3 groups it ran with the same error" in work.stderr
    failures = json.loads(s3wq(project, "failures", "ws", "--json").stdout)["failures"]
    assert [(f["kind"], f["error"], "in helper" in f["traceback"]) for f in failures] == [("error", "KeyError: 'missing'", True)] * 3
    assert status(project)["pending"] == 1


def test_different_errors_do_not_trip_the_breaker(project):
    (project / "myproc.py").write_text("def each_its_own(group, ctx):\n    raise ValueError(f'bad input {group.paths[0]}')\n")
    populate(project)

    work = s3wq(project, "work", "ws", "--processor", "myproc:each_its_own", "--retry-backoff", "0")

    assert work.returncode == 1 and "breaker" not in work.stderr and "same error" not in work.stderr
    assert status(project)["failed"] == 3


def test_a_processor_module_in_the_current_directory_is_found_by_the_installed_script(project):
    populate(project)

    work = s3wq(project, "work", "ws", "--processor", "myproc:upper")

    assert work.returncode == 0, work.stderr
    assert len(results(project)) == 3


def test_a_processor_module_not_found_says_where_it_looked(project):
    populate(project)
    line = one_error_line(s3wq(project, "work", "ws", "--processor", "no_such_module:fn"))
    assert "processor module 'no_such_module' not found" in line and "current directory" in line


@pytest.mark.parametrize(
    "source, where",
    [
        ("def process(group, ctx)\n    pass\n", "badproc.py:1: SyntaxError"),
        ("import os\nraise RuntimeError('needs a GPU')\n", "badproc.py:2: RuntimeError: needs a GPU"),
        ("import no_such_dependency_for_s3wq\n", "badproc.py:1: No module named 'no_such_dependency_for_s3wq'"),
    ],
    ids=["syntax-error", "raises-at-import", "missing-dependency"],
)
def test_a_processor_module_that_fails_to_import_is_one_line_with_file_and_line(project, source, where):
    populate(project)
    (project / "badproc.py").write_text(source)
    before = snapshot(project)

    line = one_error_line(s3wq(project, "work", "ws", "--processor", "badproc:process"))

    assert where in line, line
    assert snapshot(project) == before


# --- 3. no silent zeros ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["work"], ["status"], ["status", "--watch"], ["failures"], ["inspect", "{hash}"], ["reset", "--all"]])
def test_a_workspace_with_no_index_is_an_error_not_zeros(project, command):
    before = snapshot(project)
    args = [a.replace("{hash}", "a" * 40) for a in command]

    line = one_error_line(s3wq(project, args[0], "wsx", *args[1:]))

    assert line == f"s3wq: error: no index at {project / 'wsx'}: run s3wq populate first (is the workspace spelt right?)"
    assert snapshot(project) == before


def test_status_watch_waits_for_the_index_when_asked(project):
    watch = subprocess.Popen(
        [S3WQ_SCRIPT, "status", "ws", "--watch", "--wait-for-index", "--interval", "0.2", "--json"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.0)
        assert watch.poll() is None, watch.communicate()  # still waiting: there is nothing to count yet
        populate(project)
        assert s3wq(project, "work", "ws").returncode == 0
        stdout, stderr = watch.communicate(timeout=60)
    finally:
        if watch.poll() is None:
            watch.kill()
    assert watch.returncode == 0, stderr
    assert "waiting for an index" in stderr
    last = json.loads(stdout.splitlines()[-1])
    assert (last["groups"], last["done"], last["remaining"]) == (3, 3, 0)


def test_wait_for_index_without_watch_is_refused(project):
    assert "--wait-for-index goes with --watch" in one_error_line(s3wq(project, "status", "ws", "--wait-for-index"))


def test_inputs_the_text_processor_cannot_use_are_counted_and_listed(project):
    (project / "inputs" / "scan.bin").write_bytes(b"\x00\x01 not text")
    (project / "inputs" / "broken.pdf").write_bytes(b"%PDF-1.4 cut short")
    populate(project)

    work = s3wq(project, "work", "ws")

    assert work.returncode == 0, work.stderr
    assert "processed 5 (2 input errors: s3wq failures ws --inputs)" in work.stdout
    counts = s3wq(project, "status", "ws")
    assert "2 done groups had inputs the processor could not use: s3wq failures ws --inputs" in counts.stdout
    listed = json.loads(s3wq(project, "failures", "ws", "--inputs", "--json").stdout)["groups"]
    bad = {i["path"]: i["error"] for g in listed for i in g["inputs"]}
    assert set(bad) == {str(project / "inputs" / "scan.bin"), str(project / "inputs" / "broken.pdf")}
    assert "unsupported content type" in bad[str(project / "inputs" / "scan.bin")]
    assert "not a readable PDF" in bad[str(project / "inputs" / "broken.pdf")]
    flags = [json.loads(p.read_text()) for p in (project / "ws" / "done_flags").iterdir()]
    assert sorted(f.get("input_errors", 0) for f in flags) == [0, 0, 0, 1, 1]


def test_a_reset_group_whose_input_was_fixed_has_no_input_errors_left(project):
    (project / "inputs" / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    populate(project)
    s3wq(project, "work", "ws")
    [listed] = json.loads(s3wq(project, "failures", "ws", "--inputs", "--json").stdout)["groups"]
    assert "not UTF-8 text" in listed["inputs"][0]["error"]
    (project / "inputs" / "latin1.txt").write_text("café\n", encoding="utf-8")

    assert s3wq(project, "reset", "ws", "--hash", listed["hash"], "--yes").returncode == 0
    assert s3wq(project, "work", "ws").returncode == 0

    assert json.loads(s3wq(project, "failures", "ws", "--inputs", "--json").stdout)["groups"] == []
    assert status(project)["input_error_groups"] == 0


# --- 4. errors that name the problem --------------------------------------------------------------------------


def test_local_up_on_a_port_in_use_says_so(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("local", "up", "--port", str(port), cwd=tmp_path)
        line = one_error_line(result)
    assert line == f"s3wq: error: port {port} is already in use; choose another with --port, or leave --port out for a free one"
    # A cloud that never started wrote no logs: nothing was "removed", and no line says so.
    assert result.stdout == ""


def test_an_unreadable_directory_is_permission_denied_not_empty():
    # Root reads a mode-000 directory: as root (CI's containers), the command runs as nobody.
    base = Path(tempfile.mkdtemp(prefix="s3wq-permissions-"))
    try:
        base.chmod(0o777)
        (base / "inputs" / "locked").mkdir(parents=True)
        (base / "inputs" / "a.txt").write_text("a")
        (base / "inputs" / "locked" / "secret.txt").write_text("x")
        (base / "inputs" / "locked").chmod(0)
        command = [S3WQ_SCRIPT, "populate", str(base / "ws"), str(base / "inputs")]
        if os.geteuid() == 0:
            command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
        result = subprocess.run(command, cwd=base, capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(base)})

        line = one_error_line(result)
        assert "cannot read directory" in line and "Permission denied" in line
        assert not (base / "ws").exists()
    finally:
        (base / "inputs" / "locked").chmod(0o755)
        shutil.rmtree(base)


def test_a_safety_margin_that_leaves_no_time_is_refused(project):
    populate(project)
    line = one_error_line(s3wq(project, "work", "ws", "--safety-margin", "1000"))
    assert "a safety margin of 1000 s leaves no time to run a group in a time limit of 900 s" in line


# --- 5. populate ----------------------------------------------------------------------------------------------


def test_populate_of_a_folder_holding_the_workspace_skips_the_workspace(project):
    populate(project)
    assert s3wq(project, "work", "ws").returncode == 0

    again = s3wq(project, "populate", "ws", ".", "--json")

    assert again.returncode == 0, again.stderr
    paths = {path for group in _groups(project) for path in group}
    assert not any(f"{os.sep}ws{os.sep}" in p for p in paths), sorted(paths)
    assert str(project / "myproc.py") in paths


def _groups(project: Path) -> list[tuple[str, ...]]:
    from s3wq.index import WorkIndex

    return [g.paths for g in WorkIndex(LocalBackend(project / "ws")).iter_groups()]


def test_relative_paths_in_a_manifest_are_relative_to_the_manifest(project, tmp_path):
    lists = project / "lists"
    lists.mkdir()
    (lists / "batch.txt").write_text("../inputs/a.txt\n../inputs/*.txt\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    result = s3wq(elsewhere, "populate", str(project / "ws"), f"@{lists / 'batch.txt'}", "--json")

    assert result.returncode == 0, result.stderr
    paths = sorted(p for group in _groups(project) for p in group)
    assert paths == [str(project / "inputs" / n) for n in ("a.txt", "b.txt", "c.txt")]


def test_relative_paths_from_a_stream_are_relative_to_the_current_directory(project):
    listing = subprocess.run(
        [S3WQ_SCRIPT, "populate", "ws", "@/dev/stdin"], cwd=project, input="inputs/a.txt\ninputs/c.txt\n", capture_output=True, text=True
    )

    assert listing.returncode == 0, listing.stderr
    assert sorted(p for group in _groups(project) for p in group) == [str(project / "inputs" / n) for n in ("a.txt", "c.txt")]

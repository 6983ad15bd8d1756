"""A host that died says how, and "out of memory" only when the kernel's OOM killer ran: real ``s3wq work`` processes.

Out of memory is told by the OOM killer's own count (the worker's memory
cgroup's, else the machine's), read before the run and after the death: a
SIGKILL that another process sent -- the processor's own ``os.kill``, a
``killpg`` on a group it shares -- is not called out of memory. The
out-of-memory case runs the worker in a memory cgroup of its own, with a
limit, where this machine lets the tests make one.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from s3wq.protocol.bodies import load_object
from s3wq.store import layout

from .test_containment import populate

CGROUP_LIMIT_BYTES = 400 * 1024 * 1024


def _own_memory_cgroup() -> Path | None:
    """This process's memory cgroup (v1) as a folder, where it can be seen."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            folder = Path(f"/sys/fs/cgroup/memory{path}")
            return folder if folder.is_dir() else None
    return None


@pytest.fixture
def memory_cgroup():
    """A memory cgroup (v1) of its own below this process's, with a limit; a skip where the tests cannot make one."""
    parent = _own_memory_cgroup()
    if parent is None:
        pytest.skip("no cgroup v1 memory controller here to run the worker under a limit")
    folder = parent / f"s3wq-test-{uuid.uuid4().hex[:8]}"
    try:
        folder.mkdir()
        (folder / "memory.limit_in_bytes").write_text(str(CGROUP_LIMIT_BYTES))
        if (folder / "memory.memsw.limit_in_bytes").exists():  # with swap on, the limit holds for memory and swap together
            (folder / "memory.memsw.limit_in_bytes").write_text(str(CGROUP_LIMIT_BYTES))
    except OSError as exc:
        if folder.exists():
            folder.rmdir()
        pytest.skip(f"cannot make a memory cgroup here: {exc}")
    yield folder
    folder.rmdir()  # empty: every process of the worker has exited


def _work(s3_workspace: str, processor: str, env: dict, *, cgroup: Path | None = None) -> subprocess.CompletedProcess:
    command = [
        sys.executable, "-m", "s3wq", "work", s3_workspace, "--worker-id", "w", "--json", "--time-limit", "60",
        "--max-attempts", "1", "--processor", f"reliability.dying_processor:{processor}",
    ]  # fmt: skip
    if cgroup is not None:  # the worker and every process it starts, in the cgroup from the first instruction
        command = ["sh", "-c", f"echo $$ > {shlex.quote(str(cgroup / 'cgroup.procs'))} && exec {shlex.join(command)}"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def _failed_error(s3_backend, hash_: str) -> str:
    return load_object(s3_backend.read(layout.failed_key(hash_)).body)["error"]


def test_a_runner_the_oom_killer_ended_is_said_out_of_memory(memory_cgroup, s3_workspace, s3_backend, child_env):
    [hash_] = populate(s3_backend)
    done = _work(s3_workspace, "eats_memory", child_env, cgroup=memory_cgroup)
    assert done.stdout, done.stderr
    error = _failed_error(s3_backend, hash_)
    print(f"\nOOM-killed runner: {error}")
    assert "killed by SIGKILL" in error and "OOM killer ran" in error and "out of memory" in error, error


def test_a_runner_killed_by_a_process_is_not_said_out_of_memory(s3_workspace, s3_backend, child_env):
    [hash_] = populate(s3_backend)
    done = _work(s3_workspace, "kills_itself", child_env)
    assert done.stdout, done.stderr
    error = _failed_error(s3_backend, hash_)
    assert "killed by SIGKILL, not by the kernel's OOM killer" in error, error

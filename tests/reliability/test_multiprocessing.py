"""A correct processor that uses multiprocessing finishes every group, with every start method: real ``s3wq work`` processes.

multiprocessing starts its forkserver and resource tracker lazily, inside
the first run that needs them, and keeps them for the rest of the process;
killed as a run's leftovers, every run failed ``leftover`` and later ones
raised ``ChildProcessError`` (the runner still pointed at the dead
forkserver). Forkserver is the default start method on Linux from Python
3.14, the deployed worker's. Each start method runs in the Python of these
tests and, where this machine has one, in a newer CPython's venv
(:mod:`other_pythons`): every group ends done on its first attempt, no run
counts leftovers, and one host serves them all.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from other_pythons import VenvFailed, interpreters, venv_for

from s3wq.store import layout

from .pool_processor import HOST_DIR_ENV, START_METHOD_ENV
from .test_containment import populate

START_METHODS = ("fork", "spawn", "forkserver")
GROUPS = 3
THIS_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture(scope="session", params=[THIS_PYTHON, "newer"])
def python(request) -> Path:
    """This Python, and the newest newer CPython found here (a skip naming what is missing where there is none)."""
    if request.param == THIS_PYTHON:
        return Path(sys.executable)
    found = interpreters()
    if not found:
        pytest.skip("no CPython newer than this one here (looked for python3.12-3.14 on PATH and in pyenv)")
    version, interpreter = next(iter(found.items()))
    try:
        return venv_for(version, interpreter)
    except VenvFailed as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize("start_method", START_METHODS)
def test_a_pool_used_and_closed_in_every_run_ends_done_in_one_host(python, start_method, s3_workspace, s3_backend, child_env, tmp_path):
    hashes = populate(s3_backend, GROUPS)
    hosts = tmp_path / "hosts"
    hosts.mkdir()
    env = {**child_env, START_METHOD_ENV: start_method, HOST_DIR_ENV: str(hosts)}
    command = [
        str(python), "-m", "s3wq", "work", s3_workspace, "--worker-id", "mp", "--json", "--time-limit", "120",
        "--max-attempts", "1", "--processor", "reliability.pool_processor:both",
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0 and done.stdout, done.stderr
    report = json.loads(done.stdout)
    version = subprocess.run(
        [str(python), "-c", "import sys; print(sys.version.split()[0])"], capture_output=True, text=True
    ).stdout.strip()
    print(f"\nmultiprocessing {start_method} on Python {version}: {report['processed']} done, leftovers {report['leftovers']}, "
          f"failed {report['failed']}, hosts {len(list(hosts.iterdir()))}")  # fmt: skip

    # Done on the first attempt (one allowed), nothing left running, no host replaced.
    assert (report["processed"], report["failed"], report["leftovers"], report["retried"]) == (GROUPS, 0, 0, 0), done.stderr
    assert all(s3_backend.exists(layout.done_key(h)) for h in hashes)
    assert len(list(hosts.iterdir())) == 1
    for hash_ in hashes:
        [record] = [json.loads(line) for line in s3_backend.read(layout.result_key(hash_)).body.splitlines()]
        assert record["squares"] == [x * x for x in range(8)]

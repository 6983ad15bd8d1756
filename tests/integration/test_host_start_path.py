"""The processor host's reaper and warden run none of the worker's import path: only the runner takes it.

A folder on ``PYTHONPATH`` (or the current directory, or a processor
folder) can hold a ``sitecustomize.py``, which Python runs as it starts, or
a module named like one the host imports. The worker's own environment is
the user's to choose, but the reaper and the warden, which alone end the
host's processes, start without that path; the runner, which loads the
processor, imports as the worker does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

SITECUSTOMIZE = """
import os
with open(os.path.join(os.environ["S3WQ_TEST_STARTED_DIR"], str(os.getpid())), "w") as f:
    f.write("started")
"""
PROCESSOR = """
import os


def process(group, ctx):
    with open(os.path.join(os.environ["S3WQ_TEST_STARTED_DIR"], "runner"), "w") as f:
        f.write(str(os.getpid()))
"""


def test_a_sitecustomize_on_the_workers_path_runs_in_neither_the_reaper_nor_the_warden(tmp_path):
    folder, started, inputs = tmp_path / "on-path", tmp_path / "started", tmp_path / "in.txt"
    folder.mkdir()
    started.mkdir()
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    (folder / "pathproc.py").write_text(PROCESSOR, encoding="utf-8")
    inputs.write_text("x", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(folder), "S3WQ_TEST_STARTED_DIR": str(started)}
    workspace = str(tmp_path / "ws")

    def s3wq(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "s3wq", *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)

    assert s3wq("populate", workspace, str(inputs)).returncode == 0
    for path in started.iterdir():  # populate's own process ran the hook too
        path.unlink()
    worker = subprocess.Popen([sys.executable, "-m", "s3wq", "work", workspace, "--processor", "pathproc:process", "--json"],
                              env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    out, err = worker.communicate(timeout=120)
    assert worker.returncode == 0 and json.loads(out)["processed"] == 1, err

    # The processor ran, imported from the worker's path; the hook ran in the worker (the user's own environment) alone.
    assert (started / "runner").exists()
    hooked = {int(path.name) for path in started.iterdir() if path.name.isdigit()}
    assert hooked == {worker.pid}, f"sitecustomize ran in {hooked - {worker.pid}} too, besides the worker {worker.pid}"

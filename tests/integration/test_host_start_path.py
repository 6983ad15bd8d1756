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

from support import REPO_ROOT

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


def test_the_host_runs_the_workers_s3wq_when_the_interpreter_has_another_installed(tmp_path):
    # An interpreter whose own site-packages holds some other s3wq, and a worker that imports this checkout's
    # through PYTHONPATH: the host imports the worker's, not the one the interpreter would find first.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    [site_packages] = venv.glob("lib/python3*/site-packages")
    (site_packages / "s3wq").mkdir()
    (site_packages / "s3wq" / "__init__.py").write_text("raise ImportError('the other s3wq')\n", encoding="utf-8")
    # This checkout's s3wq first (the dev venv finds it through an editable install's hook, not a path), then the rest.
    ours = [str(REPO_ROOT / "lambdas"), *(path for path in sys.path if path)]
    script = (
        "import tempfile, time\n"
        "from s3wq.host.sandbox import ProcessorHost\n"
        "from s3wq.protocol import clock\n"
        "host = ProcessorHost('noop', tempfile.mkdtemp())\n"
        "host.start()\n"
        "host.run('0' * 40, ['a'], worker_id='w', attempt=1, owner='w:1', deadline_epoch=time.time() + 60, held_until=clock.now() + 60)\n"
        "print(type(host.wait(30)).__name__)\n"
        "host.close()\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(ours)}
    done = subprocess.run([str(venv / "bin" / "python"), "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "Returned", done.stderr

"""``s3wq local up``: a local cloud left running, driven from outside with AWS_ENDPOINT_URL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from s3wq.local_s3 import FAKE_CREDENTIALS, free_port
from support import run_cli


def test_local_up_prints_what_to_drive_it_with_and_serves_until_interrupted(monkeypatch):
    port = free_port()
    up = subprocess.Popen(
        [sys.executable, "-m", "s3wq", "local", "up", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        lines = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any("Ctrl-C" in line for line in lines):
            line = up.stdout.readline()
            if not line:
                break
            lines.append(line)
        printed = "".join(lines)
        assert f"export AWS_ENDPOINT_URL=http://127.0.0.1:{port}" in printed, printed + up.stderr.read()
        workspace = next(line.split()[1] for line in lines if line.strip().startswith("WorkspaceUri"))
        assert workspace == "s3://s3wq-local/s3wq"

        # A user's shell, pointed at the printed endpoint.
        for key, value in {**FAKE_CREDENTIALS, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}.items():
            monkeypatch.setenv(key, value)
        status = run_cli("status", workspace, "--json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["groups"] == 0
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(timeout=30)
    assert up.returncode == 0

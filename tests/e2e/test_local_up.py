"""``s3wq local up``: a local cloud left running, driven from outside with AWS_ENDPOINT_URL, as its banner says."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3

from s3wq.local_s3 import FAKE_CREDENTIALS, free_port


def test_local_up_banner_commands_follow_a_manifest_upload_to_the_end_and_logs_outlive_it(tmp_path):
    port = free_port()
    up = subprocess.Popen(
        [sys.executable, "-m", "s3wq", "local", "up", "--port", str(port), "--workers", "2"],
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
        log_dir = Path(next(line for line in lines if "logs in " in line).rsplit("logs in ", 1)[1].strip())

        # A user's shell, set up with the printed exports.
        exports = dict(line.split()[1].split("=", 1) for line in lines if line.strip().startswith("export "))
        shell_env = {**os.environ, **exports}
        assert exports["AWS_ENDPOINT_URL"] == f"http://127.0.0.1:{port}" and set(FAKE_CREDENTIALS) <= set(exports)
        # The banner's status command, started before anything is uploaded: it waits for populate's index.
        [status_line] = [line.strip() for line in lines if line.strip().startswith("s3wq status")]
        watch = subprocess.Popen(
            [sys.executable, "-m", "s3wq", *shlex.split(status_line)[1:], "--json", "--interval", "0.5"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=shell_env,
        )
        try:
            time.sleep(1.0)
            assert watch.poll() is None, watch.communicate()
            # The banner's `aws s3 cp`, done with boto3 (the AWS CLI is not a dependency).
            s3 = boto3.client("s3", endpoint_url=exports["AWS_ENDPOINT_URL"], region_name=exports["AWS_DEFAULT_REGION"])
            for n in range(4):
                s3.put_object(Bucket="s3wq-local", Key=f"inputs/doc-{n}.txt", Body=f"document {n}\n".encode())
            manifest = "".join(f"s3://s3wq-local/inputs/doc-{n}.txt\n" for n in range(4)) + "s3://s3wq-local/inputs/missing.txt\n"
            s3.put_object(Bucket="s3wq-local", Key="s3wq/manifests/my-manifest.txt", Body=manifest.encode())
            stdout, stderr = watch.communicate(timeout=180)
        finally:
            if watch.poll() is None:
                watch.kill()
        assert watch.returncode == 0, stderr
        last = json.loads(stdout.splitlines()[-1])
        assert (last["groups"], last["paths"], last["done"], last["remaining"]) == (2, 4, 2, 0), last

        # The manifest's bad line is where status shows it, not only in a Lambda log.
        status = subprocess.run([sys.executable, "-m", "s3wq", "status", workspace], capture_output=True, text=True, env=shell_env)
        assert status.returncode == 0, status.stderr
        assert "manifest s3://s3wq-local/s3wq/manifests/my-manifest.txt: 1 bad line skipped" in status.stdout, status.stdout
    finally:
        up.send_signal(signal.SIGINT)
        tail, _ = up.communicate(timeout=30)
    assert up.returncode == 0
    assert f"the Lambdas' logs are kept in {log_dir}" in tail
    logs = list((log_dir / "lambda").glob("*.log"))
    assert any("Populate" in p.name for p in logs) and any("Worker" in p.name for p in logs), logs

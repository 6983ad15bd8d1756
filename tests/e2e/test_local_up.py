"""``s3wq local up``: a local cloud left running, driven from outside with AWS_ENDPOINT_URL, as its banner says."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import boto3
import pytest

from s3wq.dev.local_s3 import FAKE_CREDENTIALS, free_port


def test_local_up_banner_commands_follow_a_manifest_upload_to_the_end_and_logs_outlive_it(tmp_path):
    port = free_port()
    kept = tmp_path / "kept logs"
    up = subprocess.Popen(
        [sys.executable, "-m", "s3wq", "local", "up", "--port", str(port), "--workers", "2", "--keep-logs", str(kept)],
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
        assert log_dir == kept

        # A user's shell, set up with the printed exports, and the AWS CLI of this venv on its PATH.
        exports = dict(line.split()[1].split("=", 1) for line in lines if line.strip().startswith("export "))
        shell_env = {**os.environ, **exports, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        shell_env |= {"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
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
            s3 = boto3.client("s3", endpoint_url=exports["AWS_ENDPOINT_URL"], region_name=exports["AWS_DEFAULT_REGION"])
            for n in range(4):
                s3.put_object(Bucket="s3wq-local", Key=f"inputs/doc-{n}.txt", Body=f"document {n}\n".encode())
            manifest = "".join(f"s3://s3wq-local/inputs/doc-{n}.txt\n" for n in range(4)) + "s3://s3wq-local/inputs/missing.txt\n"
            (tmp_path / "my-manifest.txt").write_text(manifest, encoding="utf-8")
            # The banner's `aws s3 cp`, as printed, by the AWS CLI.
            [copy_line] = [line.strip() for line in lines if line.strip().startswith("aws s3 cp")]
            copied = subprocess.run(shlex.split(copy_line), cwd=tmp_path, capture_output=True, text=True, env=shell_env, timeout=60)
            assert copied.returncode == 0, copied.stderr
            assert s3.get_object(Bucket="s3wq-local", Key="s3wq/manifests/my-manifest.txt")["Body"].read() == manifest.encode()
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

        # The banner's `s3wq start`, as printed: an execution of the stack found by its name, followed to its end.
        [start_line] = [line.strip() for line in lines if line.strip().startswith("s3wq start")]
        started = subprocess.run(
            [sys.executable, "-m", *shlex.split(start_line)], capture_output=True, text=True, env=shell_env, timeout=180
        )
        assert started.returncode == 0, started.stdout + started.stderr
    finally:
        up.send_signal(signal.SIGINT)
        tail, _ = up.communicate(timeout=30)
    assert up.returncode == 0
    assert f"the Lambdas' logs are kept in {log_dir}" in tail
    logs = list((log_dir / "lambda").glob("*.log"))
    assert any("Populate" in p.name for p in logs) and any("Worker" in p.name for p in logs), logs


def start_local_up(port: int, env: dict, *options: str) -> tuple[subprocess.Popen, list[str]]:
    """``s3wq local up --port PORT``, once it printed its banner (or ended without one)."""
    up = subprocess.Popen(
        [sys.executable, "-m", "s3wq", "local", "up", "--port", str(port), "--workers", "1", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines: list[str] = []
    while not any("Ctrl-C" in line for line in lines):
        line = up.stdout.readline()
        if not line:
            break
        lines.append(line)
    return up, lines


def logs_folder(lines: list[str]) -> Path:
    banner = next(line for line in lines if "logs in " in line)
    return Path(banner.split("logs in ", 1)[1].split(" (", 1)[0].strip())


def time_wait_sockets(port: int) -> int:
    """Connections whose local end is ``port`` in TIME-WAIT (Linux: /proc/net/tcp): what a server's closed connections leave."""
    local_port = f":{port:04X}"
    rows = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    return sum(1 for row in rows if row[1].endswith(local_port) and row[3] == "06")


def close_connections_first(port: int, count: int) -> None:
    """HTTP/1.0 requests read to the end: the server closes each connection first, so its side lingers in TIME-WAIT."""
    for _ in range(count):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
            connection.sendall(b"GET /moto-api/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            while connection.recv(65536):
                pass


def children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts TIME-WAIT sockets and finds the server in /proc")
def test_local_up_restarts_at_once_on_its_port_says_where_its_logs_are_on_any_stop_and_leaves_nothing_in_the_temp_directory(tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(temp)}
    port = free_port()

    first, lines = start_local_up(port, env)
    try:
        assert any("Ctrl-C" in line for line in lines), "".join(lines) + first.stderr.read()
        close_connections_first(port, 200)
    finally:
        first.send_signal(signal.SIGTERM)
        tail, errors = first.communicate(timeout=60)
    assert first.returncode == 0, errors
    # A service manager's stop: it says so, and where the logs were (removed: --keep-logs was not given).
    log_dir = logs_folder(lines)
    assert "stopping (SIGTERM)" in tail, tail
    assert f"the Lambdas' logs were in {log_dir}, removed with the local cloud (--keep-logs keeps them)" in tail, tail
    assert not log_dir.exists()
    assert list(temp.iterdir()) == []

    # The first one's connections still linger on the port: the restart must not take them for a server.
    assert time_wait_sockets(port) > 0
    kept = tmp_path / "kept"
    second, lines = start_local_up(port, env, "--keep-logs", str(kept))
    try:
        assert any("Ctrl-C" in line for line in lines), "".join(lines) + second.stderr.read()
        assert logs_folder(lines) == kept
        s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name=FAKE_CREDENTIALS["AWS_DEFAULT_REGION"])
        assert "s3wq-local" in [b["Name"] for b in s3.list_buckets()["Buckets"]]
        # Its server dies.
        [server] = children(second.pid)
        os.kill(server, signal.SIGKILL)
        tail, errors = second.communicate(timeout=60)
    finally:
        if second.poll() is None:
            second.send_signal(signal.SIGTERM)
            second.communicate(timeout=60)
    assert second.returncode == 1, errors
    assert f"s3wq: error: the local cloud's server exited with code {-signal.SIGKILL}" in errors, errors
    assert f"the Lambdas' logs are kept in {kept}" in tail, tail
    assert (kept / "server.log").is_file() and (kept / "lambda").is_dir()
    assert list(temp.iterdir()) == []


def ours(marker: str) -> list[int]:
    """Processes whose command line names ``marker`` (a folder of this test's own): the ones this test started."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass  # ended meanwhile
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the local cloud's processes in /proc")
def test_local_demo_stopped_by_sighup_stops_its_cloud_and_its_lambdas_and_leaves_nothing_in_the_temp_directory(tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(temp)}
    demo = subprocess.Popen(
        [sys.executable, "-m", "s3wq", "local", "demo", "--inputs", "8", "--workers", "2", "--group-size", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        lines: list[str] = []
        # The execution is under way: populate ran, worker Lambdas are running or about to.
        while not any(line.startswith("populate started execution") for line in lines):
            line = demo.stdout.readline()
            if not line:
                break
            lines.append(line)
        assert any(line.startswith("populate started execution") for line in lines), "".join(lines) + demo.stderr.read()
        endpoint = lines[0].split(" on ", 1)[1].strip()
        demo.send_signal(signal.SIGHUP)  # the terminal closed
        tail, errors = demo.communicate(timeout=60)
        assert demo.returncode == 128 + signal.SIGHUP, errors
        assert "s3wq: stopped by SIGHUP" in errors, errors
        assert "removed with the local cloud (--keep-logs keeps them)" in tail, tail
        with pytest.raises(OSError):
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=5)
        # No Lambda outlives its cloud (their commands name the cloud's folder, under this TMPDIR); the kernel ends them.
        deadline = time.monotonic() + 10
        while ours(str(temp)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ours(str(temp)) == []
        assert list(temp.iterdir()) == []
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.communicate()
        for pid in ours(str(temp)):  # left by a failing run: the server, its Lambdas
            os.kill(pid, signal.SIGKILL)

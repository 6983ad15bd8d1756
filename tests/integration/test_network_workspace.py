"""A local-directory workspace on a network filesystem, refused by the real ``s3wq`` command: exit 2, one line (a child process).

The mountinfo parser and open_backend's refusal are tests/unit/test_network_workspace.py.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from s3wq.store import mounts


@pytest.fixture
def on_nfs(tmp_path, monkeypatch):
    """A fake /proc/self/mountinfo that puts the test's directory on nfs4."""
    device = os.stat(tmp_path).st_dev
    fake = tmp_path / "mountinfo"
    fake.write_text(f"1 0 {os.major(device)}:{os.minor(device)} / {tmp_path} rw,relatime - nfs4 server:/export rw,vers=4.2\n")
    monkeypatch.setattr(mounts, "MOUNTINFO_PATH", fake)
    return fake


def test_s3wq_refuses_a_workspace_on_nfs_in_one_line_and_exits_2(tmp_path, on_nfs):
    # The real command, with only the path of mountinfo changed in its process.
    command = (
        "import sys; from pathlib import Path; from s3wq.store import mounts; "
        f"mounts.MOUNTINFO_PATH = Path({str(on_nfs)!r}); from s3wq.cli import entry_point; sys.argv[0] = 's3wq'; entry_point()"
    )
    done = subprocess.run(
        [sys.executable, "-c", command, "populate", str(tmp_path / "ws"), str(on_nfs)], capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "network filesystem (nfs4)" in done.stderr and "must be on S3" in done.stderr
    assert not (tmp_path / "ws").exists()

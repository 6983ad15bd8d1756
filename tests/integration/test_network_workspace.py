"""A local-directory workspace on a network filesystem, refused by the real ``s3wq`` command: exit 2, one line (a child process).

The mountinfo parser and open_backend's refusal are tests/unit/test_network_workspace.py.
"""

from __future__ import annotations

import subprocess
import sys


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

"""``s3wq local demo`` and ``local up`` without the ``s3wq[local]`` extra, as a plain ``pip install .`` leaves them (child processes).

A child that cannot import moto gets one line naming the extra and exit 2,
before anything is started or created: no server, no temporary folder, no
log folder.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support import run_cli

# Loaded by every child through PYTHONPATH: moto is then missing there as if it were not installed.
WITHOUT_MOTO = """
import sys


class _NoMoto:
    def find_spec(self, name, path=None, target=None):
        if name == "moto" or name.startswith("moto."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoMoto())
"""
MISSING_EXTRA = "s3wq: error: the local cloud needs moto[server]: pip install 's3wq[local]'"


@pytest.fixture
def without_moto(tmp_path, monkeypatch):
    """Children that cannot import moto, and whose temporary files land in a folder of the test's own (returned)."""
    site = tmp_path / "no-moto"
    site.mkdir()
    (site / "sitecustomize.py").write_text(WITHOUT_MOTO)
    pythonpath = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(site) + (os.pathsep + pythonpath if pythonpath else ""))
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    return temp


def test_a_child_with_the_blocker_cannot_import_moto(without_moto):
    # The premise of the tests below: without it they would start a real local cloud.
    result = subprocess.run([sys.executable, "-c", "import moto"], capture_output=True, text=True, timeout=60, env=os.environ.copy())
    assert result.returncode == 1
    assert "ModuleNotFoundError: No module named 'moto'" in result.stderr


@pytest.mark.parametrize("command", [["demo"], ["demo", "--json"], ["up", "--port", "4566"]], ids=["demo", "demo-json", "up"])
def test_the_local_cloud_without_moto_is_one_line_naming_the_extra_and_creates_nothing(without_moto, tmp_path, command):
    project = tmp_path / "project"
    project.mkdir()
    logs = tmp_path / "logs"
    result = run_cli("local", *command, "--keep-logs", str(logs), timeout=60, cwd=project)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stderr.splitlines() == [MISSING_EXTRA]
    assert result.stdout == ""
    assert not logs.exists()
    assert list(without_moto.iterdir()) == []
    assert list(project.iterdir()) == []

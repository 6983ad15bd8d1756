"""Fixtures of the reliability tier: marker directory, worker processes' environment, the fault proxy."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .fault_proxy import FaultProxy
from .marking_processor import MARK_DIR_ENV

TESTS_DIR = Path(__file__).resolve().parent.parent


@pytest.fixture
def mark_dir(tmp_path) -> Path:
    path = tmp_path / "marks"
    path.mkdir()
    return path


@pytest.fixture
def child_env(s3_server, mark_dir) -> dict[str, str]:
    """The environment of worker processes: AWS_ENDPOINT_URL (from s3_server), this tier importable, the marker directory."""
    pythonpath = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONPATH": str(TESTS_DIR) + (os.pathsep + pythonpath if pythonpath else ""),
        MARK_DIR_ENV: str(mark_dir),
    }


@pytest.fixture
def fault_proxy(s3_server):
    """A fault proxy in front of the session's S3 endpoint, injecting nothing until a test sets its plan."""
    with FaultProxy(s3_server.endpoint) as proxy:
        yield proxy

"""Fixtures of the integration tier: racing processes, a backend per workspace, worker processes' environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import s3wq

from .racing import Racers

RACERS = 8
HELPERS_DIR = Path(__file__).resolve().parent.parent / "helpers"


@pytest.fixture(scope="session")
def racers(s3_server):
    """Eight spawned processes for barrier races, started after AWS_ENDPOINT_URL is set so they inherit it."""
    pool = Racers(RACERS)
    yield pool
    pool.close()


@pytest.fixture
def backend(request, workspace):
    """The parametrized workspace opened in this process (S3 through the test's own client)."""
    s3_client = request.getfixturevalue("s3_client") if workspace.startswith("s3://") else None
    return s3wq.open_backend(workspace, s3_client=s3_client)


@pytest.fixture
def record_dir(tmp_path):
    path = tmp_path / "records"
    path.mkdir()
    return path


@pytest.fixture
def helper_env(monkeypatch, record_dir):
    """os.environ (and so every child process) can import tests/helpers and knows where to record calls."""
    pythonpath = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(HELPERS_DIR) + (os.pathsep + pythonpath if pythonpath else ""))
    monkeypatch.setenv("S3WQ_TEST_RECORD_DIR", str(record_dir))
    return os.environ

"""Fixtures of the integration tier: racing processes, a backend per workspace, worker processes' environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import s3wq
from s3wq.config import (
    ENV_AUTO_START,
    ENV_GROUP_SIZE,
    ENV_INPUT_LOCATIONS,
    ENV_LEASE,
    ENV_MAX_ATTEMPTS,
    ENV_PROCESSOR,
    ENV_STATE_MACHINE_ARN,
    ENV_WORKERS,
    ENV_WORKSPACE,
)
from s3wq.handlers.runtime import reset_runtime

from .racing import Racers

RACERS = 8
HELPERS_DIR = Path(__file__).resolve().parent.parent / "helpers"
# Every variable the stack sets on the handlers: the lambda_env fixture starts each test without them.
ALL_ENV = [
    ENV_WORKSPACE,
    ENV_INPUT_LOCATIONS,
    ENV_LEASE,
    ENV_MAX_ATTEMPTS,
    ENV_GROUP_SIZE,
    ENV_PROCESSOR,
    ENV_STATE_MACHINE_ARN,
    ENV_AUTO_START,
    ENV_WORKERS,
]


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


@pytest.fixture
def lambda_env(monkeypatch, s3_server, bucket, helper_env):
    """Configure the handlers like the stack does; each call of the returned function is a fresh cold start."""
    monkeypatch.syspath_prepend(str(HELPERS_DIR))  # processors named module:function live there
    for name in ALL_ENV:
        monkeypatch.delenv(name, raising=False)

    def configure(**variables: str) -> None:
        # The input locations the stack writes for a bucket it created: the whole of it.
        for name, value in {ENV_WORKSPACE: f"s3://{bucket}/ws", ENV_INPUT_LOCATIONS: f"s3://{bucket}", **variables}.items():
            monkeypatch.setenv(name, str(value))
        reset_runtime()

    configure()
    yield configure
    reset_runtime()

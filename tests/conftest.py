"""Fixtures shared by every tier: credentials -> endpoint -> client -> bucket -> workspace.

No test can reach AWS: fake credentials are set for the whole session, and
S3 tests talk over HTTP to a ``moto_server`` process on a free loopback port,
exported as ``AWS_ENDPOINT_URL`` so that child processes (workers started by
a test) reach the same endpoint. With ``S3WQ_TEST_STORE=localstack`` that
endpoint is LocalStack's S3 instead (``make test-localstack``, see
localstack_s3.py).
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from localstack_s3 import STORE_ENV, LocalStackS3
from support import IGNORING_CONDITIONS_BUCKETS, NO_CONDITIONAL_DELETE_BUCKETS, REPO_ROOT, STORES, TEST_STORE

from s3wq.dev.local_s3 import FAKE_CREDENTIALS, LocalS3
from s3wq.store import LocalBackend, S3Backend, mounts

# Properties are judged by what they find, not by how fast a loaded machine runs an example: CI shares 2 cores
# with worker processes, and a per-example deadline or a slow-generation check there failed passing properties.
settings.register_profile("s3wq", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("s3wq")
if TEST_STORE not in STORES:
    raise pytest.UsageError(f"{STORE_ENV}={TEST_STORE!r}: expected one of {', '.join(STORES)}")


@pytest.fixture(scope="session", autouse=True)
def fake_aws_credentials():
    saved = {k: os.environ.get(k) for k in [*FAKE_CREDENTIALS, "AWS_ENDPOINT_URL", "AWS_PROFILE"]}
    os.environ.pop("AWS_PROFILE", None)
    os.environ.update(FAKE_CREDENTIALS)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def s3_server(fake_aws_credentials):
    """One S3 server process for the session (moto, or LocalStack's); AWS_ENDPOINT_URL points at it from then on."""
    if TEST_STORE == "localstack":
        server = LocalStackS3().start()
    else:
        server = LocalS3(without_conditional_delete=NO_CONDITIONAL_DELETE_BUCKETS, ignoring_conditions=IGNORING_CONDITIONS_BUCKETS).start()
    os.environ["AWS_ENDPOINT_URL"] = server.endpoint
    yield server
    server.stop()


@pytest.fixture
def s3_client(s3_server):
    return s3_server.client()


@pytest.fixture
def bucket(s3_client):
    name = f"test-{uuid.uuid4().hex[:16]}"
    s3_client.create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_workspace(bucket):
    return f"s3://{bucket}/ws"


@pytest.fixture
def s3_backend(s3_client, bucket):
    return S3Backend(s3_client=s3_client, bucket=bucket, prefix="ws")


@pytest.fixture
def local_workspace(tmp_path):
    return str(tmp_path / "ws")


@pytest.fixture
def local_backend(local_workspace):
    return LocalBackend(local_workspace)


@pytest.fixture
def s3_workspace_without_conditional_delete(s3_client):
    """A workspace on a store that cannot delete on a condition (a bucket the local server answers 501 for)."""
    name = f"{NO_CONDITIONAL_DELETE_BUCKETS}{uuid.uuid4().hex[:16]}"
    s3_client.create_bucket(Bucket=name)
    return f"s3://{name}/ws"


@pytest.fixture(params=["local", "s3"])
def workspace(request):
    """A workspace URI on each backend, for tests that every backend must pass."""
    if request.param == "local":
        return request.getfixturevalue("local_workspace")
    return request.getfixturevalue("s3_workspace")


@pytest.fixture(scope="session")
def published_olmocr() -> Path:
    """The published olmocr, the version the benchmarks pin, installed into bench/.olmocr if it is not there; its path.

    The benchmarks' own helper installs it (pip, no dependencies: it needs
    the package registry). pytest-xdist's workers take turns under a file
    lock, so one installs and the others find it done. A failed install
    fails the test that needs it, in one line: it never turns into a skip.
    """
    spec = importlib.util.spec_from_file_location("olmocr_queue", REPO_ROOT / "bench" / "olmocr_queue.py")
    olmocr_queue = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(olmocr_queue)
    olmocr_queue.INSTALL_DIR.mkdir(parents=True, exist_ok=True)
    with open(olmocr_queue.INSTALL_DIR / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return olmocr_queue.ensure_installed()
        except subprocess.CalledProcessError as exc:
            pytest.fail(
                f"could not install olmocr=={olmocr_queue.OLMOCR_VERSION} into bench/.olmocr "
                f"(pip exited {exc.returncode}; it needs the package registry)",
                pytrace=False,
            )


@pytest.fixture
def inputs(tmp_path) -> Path:
    """A folder of four small text files, one in a subfolder and one with a space in its name."""
    directory = tmp_path / "in"
    (directory / "sub").mkdir(parents=True)
    for name in ["a.txt", "b.txt", "sub/c.txt", "sub/d e.txt"]:
        (directory / name).write_text(f"contents of {name}\n")
    return directory


@pytest.fixture
def on_nfs(tmp_path, monkeypatch):
    """A fake /proc/self/mountinfo that puts the test's directory on nfs4."""
    device = os.stat(tmp_path).st_dev
    fake = tmp_path / "mountinfo"
    fake.write_text(f"1 0 {os.major(device)}:{os.minor(device)} / {tmp_path} rw,relatime - nfs4 server:/export rw,vers=4.2\n")
    monkeypatch.setattr(mounts, "MOUNTINFO_PATH", fake)
    return fake

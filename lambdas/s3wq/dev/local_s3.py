"""An S3 endpoint on a loopback port: a moto server process, for the demo and the tests.

It is a separate process spoken to over HTTP, so everything s3wq does against
it -- conditional writes, retries, concurrency between worker processes -- is
the same code path as against AWS.

One difference from ``moto_server`` itself: moto checks ``If-None-Match`` /
``If-Match`` and then stores the object as two steps, and its server handles
requests on many threads, so two racing conditional PUTs could both pass the
check. AWS S3 makes the check and the write one atomic step. To test *our*
protocol rather than moto's race, this server runs each PUT and DELETE alone
(reads stay concurrent), which is the atomicity S3 documents.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from typing import Any, Self

from s3wq.errors import BadInput

# moto accepts any credentials; real-looking names keep botocore from
# searching ~/.aws and the instance metadata service.
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    """A moto-based server process on a loopback port; subclasses say how to start it."""

    name = "local server"
    # In a session of its own, the server and what it starts do not get the
    # terminal's Ctrl-C: whoever started it stops it, in order.
    own_session = False

    def __init__(self, port: int | None = None):
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def output(self) -> Any:
        """Where the server's own log goes."""
        return subprocess.DEVNULL

    def env(self) -> dict[str, str]:
        """Environment variables that point any AWS SDK or CLI at this endpoint."""
        return {**FAKE_CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}

    def _check_port_free(self) -> None:
        # Checked before starting: a server already answering on the port (a
        # local cloud left running) would otherwise be taken for ours.
        with socket.socket() as probe:
            # As the server binds (werkzeug's allow_reuse_address): the
            # connections of a server just stopped linger in TIME-WAIT for a
            # minute and do not keep a new one from listening, while a server
            # still listening does.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", self.port))
            except PermissionError:
                raise BadInput(
                    f"port {self.port} may not be used by this user (ports below 1024 need root); choose another with --port"
                ) from None
            except OSError:
                raise BadInput(
                    f"port {self.port} is already in use; choose another with --port, or leave --port out for a free one"
                ) from None

    def start(self, timeout: float = 60.0) -> Self:
        self._check_port_free()
        log = self.output()
        try:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=log, start_new_session=self.own_session)
        finally:
            if hasattr(log, "close"):
                log.close()  # the child holds its own copy
        try:
            self._wait_until_answering(timeout)
        except BaseException:
            # Not started, so no `with` block will stop it: a signal or a
            # timeout here must not leave the process running.
            self.stop()
            raise
        return self

    def _wait_until_answering(self, timeout: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the {self.name} exited with code {self.process.returncode} (is moto[server] installed?)")
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"the {self.name} did not answer on {self.endpoint} within {timeout:.0f}s")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def client(self, service: str = "s3") -> Any:
        """A client on this endpoint (credentials passed explicitly, environment untouched)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            service,
            endpoint_url=self.endpoint,
            region_name=FAKE_CREDENTIALS["AWS_DEFAULT_REGION"],
            aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            config=Config(retries={"mode": "standard", "max_attempts": 8}, max_pool_connections=32),
        )

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LocalS3(LocalServer):
    """``without_conditional_delete``: buckets named with this prefix answer a DELETE with If-Match with 501, as LocalStack's S3 does;
    ``ignoring_conditions``: buckets named with this prefix ignore every write condition.

    One server, one endpoint: a test (and every process it starts) reaches a
    store without conditional DELETE by its bucket name alone.
    """

    name = "local S3 server"

    def __init__(self, port: int | None = None, *, without_conditional_delete: str | None = None, ignoring_conditions: str | None = None):
        super().__init__(port)
        self.without_conditional_delete = without_conditional_delete
        self.ignoring_conditions = ignoring_conditions

    def command(self) -> list[str]:
        options = []
        if self.without_conditional_delete:
            options += ["--no-conditional-delete", self.without_conditional_delete]
        if self.ignoring_conditions:
            options += ["--ignore-conditions", self.ignoring_conditions]
        return [sys.executable, "-m", "s3wq.dev.local_s3", "--port", str(self.port), *options]


def serialized_writes(app: Any) -> Any:
    """Wrap a WSGI app so each PUT and DELETE runs alone (see the module docstring)."""
    import threading

    write_lock = threading.Lock()

    def application(environ: dict, start_response: Any) -> Any:
        if environ.get("REQUEST_METHOD") in ("PUT", "DELETE"):
            with write_lock:
                # Consume the whole response inside the lock: the write happens
                # while the response is produced.
                return list(app(environ, start_response))
        return app(environ, start_response)

    return application


def dispatch_without_rescanning() -> None:
    """Make moto's server find a request's service without listing its own package on every request.

    moto 5.2's dispatcher lists and stats every folder of the moto package for
    each request it routes (``backends.list_of_moto_modules``): about a
    quarter of the server's CPU per S3 request, measured with cProfile. The
    folders do not change while the server runs, so the list is taken once.
    A stand-in for S3 should spend its CPU on S3's work, or every benchmark
    measures the stand-in.
    """
    from moto import backends

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules


_NOT_IMPLEMENTED = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NotImplemented</Code>'
    b"<Message>A header you provided implies functionality that is not implemented.</Message><Header>If-Match</Header></Error>"
)


def without_conditional_delete(app: Any, bucket_prefix: str) -> Any:
    """In buckets named ``bucket_prefix...``, answer a DELETE that carries If-Match with 501 NotImplemented, deleting nothing.

    As LocalStack's S3 (2026.3) does. Path-style requests only: what an SDK
    sends to a loopback endpoint.
    """

    def application(environ: dict, start_response: Any) -> Any:
        bucket = environ.get("PATH_INFO", "").lstrip("/").split("/", 1)[0]
        if environ.get("REQUEST_METHOD") == "DELETE" and environ.get("HTTP_IF_MATCH") and bucket.startswith(bucket_prefix):
            start_response("501 Not Implemented", [("Content-Type", "application/xml"), ("Content-Length", str(len(_NOT_IMPLEMENTED)))])
            return [_NOT_IMPLEMENTED]
        return app(environ, start_response)

    return application


def ignoring_conditions(app: Any, bucket_prefix: str) -> Any:
    """In buckets named ``bucket_prefix...``, ignore If-None-Match and If-Match on writes: a store s3wq must refuse."""

    def application(environ: dict, start_response: Any) -> Any:
        bucket = environ.get("PATH_INFO", "").lstrip("/").split("/", 1)[0]
        if environ.get("REQUEST_METHOD") in ("PUT", "DELETE") and bucket.startswith(bucket_prefix):
            environ.pop("HTTP_IF_NONE_MATCH", None)
            environ.pop("HTTP_IF_MATCH", None)
        return app(environ, start_response)

    return application


def serve(
    host: str, port: int, *, without_conditional_delete_prefix: str | None = None, ignoring_conditions_prefix: str | None = None
) -> None:
    """Run moto's server app with PUT and DELETE serialised."""
    import signal

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import run_simple

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    dispatch_without_rescanning()
    app = serialized_writes(DomainDispatcherApplication(create_backend_app))
    if without_conditional_delete_prefix:
        app = without_conditional_delete(app, without_conditional_delete_prefix)
    if ignoring_conditions_prefix:
        app = ignoring_conditions(app, ignoring_conditions_prefix)
    run_simple(host, port, app, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Local S3 endpoint (moto) with atomic conditional writes")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument(
        "--no-conditional-delete",
        metavar="BUCKET_PREFIX",
        help="in buckets named so, answer DELETE with If-Match with 501, as LocalStack does",
    )
    parser.add_argument(
        "--ignore-conditions", metavar="BUCKET_PREFIX", help="in buckets named so, ignore If-None-Match and If-Match on writes"
    )
    options = parser.parse_args()
    os.environ.setdefault("MOTO_PORT", str(options.port))
    serve(
        options.host,
        options.port,
        without_conditional_delete_prefix=options.no_conditional_delete,
        ignoring_conditions_prefix=options.ignore_conditions,
    )

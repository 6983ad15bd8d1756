"""A fault-injecting HTTP proxy on a loopback port, in front of the local S3 endpoint.

Clients point ``AWS_ENDPOINT_URL`` (or ``endpoint_url``) at the proxy. For
each request a *plan* decides whether to inject a fault and which one:

* ``500``         answer 500 InternalError, without forwarding;
* ``503``         answer 503 SlowDown, without forwarding;
* ``reset``       reset the connection (RST), without forwarding;
* ``lost-500``    forward to S3, which applies the request, then answer 500;
* ``lost-reset``  forward to S3, then reset the connection: the response is lost;
* ``slow``        forward to S3 only after ``slow_seconds``: a pause, a congested network.

The ``lost-*`` faults are the case a conditional write must survive: S3
applied the PUT or DELETE, the client saw an error, and its retry meets the
object its own first attempt wrote (or removed).

:class:`SeededFaults` decides from a hash of (seed, request, how many times
that same request was seen before), not from the order requests arrive in,
so a seed injects the same faults into the same requests however the workers
interleave.
"""

from __future__ import annotations

import hashlib
import http.client
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import unquote, urlsplit

BEFORE_FORWARDING = ("500", "503", "reset")
AFTER_FORWARDING = ("lost-500", "lost-reset")
ALL_FAULTS = BEFORE_FORWARDING + AFTER_FORWARDING
SLOW = "slow"

_ERRORS = {
    "500": (500, "Internal Server Error", "InternalError", "We encountered an internal error. Please try again."),
    "503": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
}
# Headers that belong to one connection, never forwarded as they are.
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "expect"}


@dataclass(frozen=True)
class Request:
    method: str
    key: str  # the object key, URL-decoded, without the bucket ("" for bucket-level requests)
    query: str
    condition: str  # "If-None-Match", "If-Match" or ""
    occurrence: int  # 1 for the first time this exact request (method, key, query, condition) is seen

    @property
    def kind(self) -> str:
        """What the request is to the claim protocol: ``PUT If-None-Match``, ``DELETE If-Match``, ``GET``..."""
        return f"{self.method} {self.condition}".strip()


Plan = Callable[[Request], "str | None"]


class SeededFaults:
    """A fault on about ``rate`` of all requests, the kind drawn from ``kinds``; reproducible per request."""

    def __init__(self, seed: int, rate: float, kinds: tuple[str, ...] = ALL_FAULTS):
        self.seed, self.rate, self.kinds = seed, rate, kinds

    def __call__(self, request: Request) -> str | None:
        text = f"{self.seed}|{request.method}|{request.key}|{request.query}|{request.condition}|{request.occurrence}"
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        if int.from_bytes(digest[:8], "big") / 2**64 >= self.rate:
            return None
        return self.kinds[int.from_bytes(digest[8:16], "big") % len(self.kinds)]


@dataclass
class Exchange:
    request: Request
    fault: str | None
    upstream_status: int | None  # None when the request never reached S3


@dataclass
class Journal:
    """Every request the proxy saw, in arrival order (thread-safe)."""

    exchanges: list[Exchange] = field(default_factory=list)
    _seen: Counter = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def occurrence(self, signature: tuple) -> int:
        with self._lock:
            self._seen[signature] += 1
            return self._seen[signature]

    def add(self, exchange: Exchange) -> None:
        with self._lock:
            self.exchanges.append(exchange)

    def faults(self) -> Counter:
        """Injected faults by kind."""
        with self._lock:
            return Counter(e.fault for e in self.exchanges if e.fault)

    def requests(self) -> int:
        with self._lock:
            return len(self.exchanges)


class _Discard:
    """Stands in for the output stream of a connection that was reset."""

    closed = False

    def write(self, data: bytes) -> int:
        return len(data)

    def flush(self) -> None: ...

    def close(self) -> None: ...


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as botocore's pool expects
    server: _Server

    def log_message(self, format: str, *args) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _request(self) -> Request:
        parts = urlsplit(self.path)
        # Path-style addressing: /bucket/key...
        key = unquote(parts.path.lstrip("/").partition("/")[2])
        condition = "If-None-Match" if "If-None-Match" in self.headers else "If-Match" if "If-Match" in self.headers else ""
        signature = (self.command, key, parts.query, condition)
        return Request(self.command, key, parts.query, condition, self.server.journal.occurrence(signature))

    def _forward(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        upstream = http.client.HTTPConnection(self.server.upstream_host, self.server.upstream_port, timeout=60)
        try:
            upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                    upstream.putheader(name, value)
            if body or self.command in ("PUT", "POST"):
                upstream.putheader("Content-Length", str(len(body)))
            upstream.endheaders(body or None)
            response = upstream.getresponse()
            data = response.read()
            return response.status, response.reason, response.getheaders(), data
        finally:
            upstream.close()

    def _reset(self) -> None:
        # SO_LINGER 0: close() sends RST instead of FIN. The read stream holds
        # a reference to the socket, so it must go first.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.rfile.close()
        self.wfile = _Discard()
        self.connection.close()
        self.close_connection = True

    def _send_error(self, fault: str) -> None:
        status, reason, code, message = _ERRORS[fault]
        body = (
            b""
            if self.command == "HEAD"
            else (
                f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
                f"<RequestId>s3wq-fault-proxy</RequestId></Error>"
            ).encode()
        )
        self.send_response_only(status, reason)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _relay(self) -> None:
        body = self._body()
        request = self._request()
        fault = self.server.plan(request)
        if fault is not None and fault not in (*ALL_FAULTS, SLOW):
            raise ValueError(f"unknown fault {fault!r}")
        upstream_status = None
        journaled = False

        def journal() -> None:
            # Before the client hears anything: a client that has its answer (or its reset) must find the
            # exchange in the journal, else a test reading it as soon as the worker returns misses the last one.
            nonlocal journaled
            if not journaled:
                journaled = True
                self.server.journal.add(Exchange(request, fault, upstream_status))

        try:
            if fault in BEFORE_FORWARDING:
                journal()
                if fault == "reset":
                    self._reset()
                else:
                    self._send_error(fault)
                return
            if fault == SLOW:
                time.sleep(self.server.slow_seconds)
            status, reason, headers, data = self._forward(body)
            upstream_status = status
            journal()
            if fault == "lost-reset":
                self._reset()
                return
            if fault == "lost-500":
                self._send_error("500")
                return
            # send_response_only: no Server/Date of our own, S3's Date is what ages a lock.
            self.send_response_only(status, reason)
            no_body = self.command == "HEAD" or status in (204, 304) or 100 <= status < 200
            for name, value in headers:
                if name.lower() in _HOP_BY_HOP or (name.lower() == "content-length" and not no_body):
                    continue
                self.send_header(name, value)
            if not no_body:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if not no_body:
                self.wfile.write(data)
        finally:
            journal()  # the upstream failed: recorded with no status

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionError, OSError):
            pass  # the client went away, or we reset it on purpose

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, upstream: str, plan: Plan, journal: Journal):
        super().__init__(("127.0.0.1", 0), _Handler)
        parts = urlsplit(upstream)
        if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"the fault proxy only fronts a loopback endpoint, not {upstream!r}")
        self.upstream_host, self.upstream_port = parts.hostname, parts.port
        self.plan = plan
        self.journal = journal
        self.slow_seconds = 1.5

    def handle_error(self, request, client_address) -> None:
        pass  # a reset connection is the point, not an error


class FaultProxy:
    """``with FaultProxy(upstream, plan) as proxy:`` -- clients use ``proxy.endpoint``; ``proxy.journal`` records what happened."""

    def __init__(self, upstream: str, plan: Plan | None = None):
        self.journal = Journal()
        self._plan: Plan = plan or (lambda request: None)
        self._server = _Server(upstream, lambda request: self._plan(request), self.journal)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True)

    def set_plan(self, plan: Plan) -> None:
        self._plan = plan

    @property
    def slow_seconds(self) -> float:
        return self._server.slow_seconds

    @slow_seconds.setter
    def slow_seconds(self, seconds: float) -> None:
        self._server.slow_seconds = seconds

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

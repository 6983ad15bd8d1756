"""An HTTP relay that gives the local S3 endpoint S3's latency: each request waits a lognormal time first.

AWS documents tens of milliseconds for small S3 requests; by default the
wait has a median of 20 ms and a 99th percentile of 60 ms. Time is then
spent waiting on the store, as on AWS, instead of on the local server's CPU.
It runs as a process of its own, so its CPU is neither the benchmark's nor
the server's.

    .venv/bin/python bench/latency_proxy.py --upstream http://127.0.0.1:5000 --port 5001
"""

from __future__ import annotations

import argparse
import http.client
import math
import random
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import urlsplit

# A p99 of 3x the median: sigma = ln(3) / z(0.99).
_Z99 = 2.3263
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "expect"}


def lognormal_seconds(median_ms: float, p99_ms: float, rng: random.Random) -> float:
    sigma = math.log(p99_ms / median_ms) / _Z99
    return rng.lognormvariate(math.log(median_ms / 1000), sigma)


class _Relay(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # A response goes out in two writes (headers, then body). With Nagle's
    # algorithm the body waits for the client's ACK of the headers, which the
    # client delays (up to 40 ms on Linux): every request took ~40 ms more
    # than the wait it was given (measured: a GET's median 68 ms, 28 ms without).
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args) -> None:
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while (size := int(self.rfile.readline().split(b";")[0], 16)) != 0:
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _upstream(self) -> http.client.HTTPConnection:
        local = self.server.connections
        if getattr(local, "conn", None) is None:
            local.conn = http.client.HTTPConnection(self.server.upstream_host, self.server.upstream_port, timeout=120)
        return local.conn

    def _relay(self) -> None:
        body = self._body()
        time.sleep(lognormal_seconds(self.server.median_ms, self.server.p99_ms, self.server.rng))
        for attempt in range(2):
            conn = self._upstream()
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                        conn.putheader(name, value)
                if body or self.command in ("PUT", "POST"):
                    conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body or None)
                response = conn.getresponse()
                data = response.read()
                break
            except (http.client.HTTPException, OSError):
                conn.close()
                self.server.connections.conn = None
                if attempt:
                    raise
        self.send_response_only(response.status, response.reason)
        no_body = self.command == "HEAD" or response.status in (204, 304)
        for name, value in response.getheaders():
            if name.lower() in _HOP_BY_HOP or (name.lower() == "content-length" and not no_body):
                continue
            self.send_header(name, value)
        if not no_body:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not no_body:
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int, upstream: str, median_ms: float, p99_ms: float, seed: int):
        super().__init__(("127.0.0.1", port), _Relay)
        parts = urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname, parts.port
        self.median_ms, self.p99_ms = median_ms, p99_ms
        self.rng = random.Random(seed)
        self.connections = threading.local()


class LatencyProxy:
    """``with LatencyProxy(upstream) as proxy:`` -- point clients at ``proxy.endpoint``."""

    def __init__(self, upstream: str, *, median_ms: float = 20.0, p99_ms: float = 60.0, seed: int = 1):
        from s3wq.dev.local_s3 import free_port

        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.command = [
            sys.executable, __file__, "--upstream", upstream, "--port", str(self.port),
            "--median-ms", str(median_ms), "--p99-ms", str(p99_ms), "--seed", str(seed),
        ]  # fmt: skip
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Self:
        self.process = subprocess.Popen(self.command)
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=5).close()
                return self
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("the latency proxy did not start") from None
                time.sleep(0.1)

    def __exit__(self, *exc) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--median-ms", type=float, default=20.0)
    parser.add_argument("--p99-ms", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    _Server(args.port, args.upstream, args.median_ms, args.p99_ms, args.seed).serve_forever()


if __name__ == "__main__":
    main()

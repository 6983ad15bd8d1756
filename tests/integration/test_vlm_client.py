"""The vlm processor's HTTP client against a real HTTP server on a loopback port, scripted request by request.

Backoff waits go to an injected ``sleep`` that records them (and moves the injected clock on), so the retries are
judged by the waits asked for, not timed; the breaker's cool-down runs on the same injected clock. Only the deadline
tests wait in real time, a fraction of a second each.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given
from hypothesis import strategies as st

from s3wq.errors import S3wqError
from s3wq.processors.vlm.breaker import Admission, EndpointBreaker
from s3wq.processors.vlm.client import (
    MAX_REPLY_BYTES,
    BadReply,
    BreakerOpen,
    ChatClient,
    ChatError,
    EndpointUnavailable,
    OutOfTime,
    RequestRejected,
    RetryPolicy,
    retry_after_seconds,
)

KEY = "sk-test-9f8e7d6c5b4a"
COMPLETION = {"id": "c1", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "the page"}}]}
REQUEST = {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "read the page"}]}]}
VLLM_404 = {"object": "error", "message": "The model `olmocr-typo` does not exist.", "type": "NotFoundError", "param": None, "code": 404}
SERVER_DATE = "Wed, 21 Oct 2015 07:28:00 GMT"


@dataclass
class Reply:
    """What the server sends for one request."""

    status: int = 200
    body: bytes | dict = field(default_factory=lambda: COMPLETION)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # before answering (cut short when the test ends)
    sized: bool = True  # False: no Content-Length, the body ends when the connection closes


@dataclass
class Seen:
    headers: dict[str, str]
    body: bytes
    peer: tuple


class ChatServer:
    """A ThreadingHTTPServer answering each POST with the next scripted Reply (the default one once they run out)."""

    def __init__(self, port: int = 0):
        self.script: list[Reply] = []
        self.seen: list[Seen] = []
        self.in_flight = self.peak = 0
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1/chat/completions"

    def close(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def _next(self, seen: Seen) -> Reply:
        with self._lock:
            self.seen.append(seen)
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            return self.script.pop(0) if self.script else Reply()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, so the client's pool is what bounds the connections

            def log_message(self, *_):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                reply = server._next(Seen(dict(self.headers), body, self.client_address))
                try:
                    server.stopping.wait(reply.delay)
                    self._send(reply)
                except OSError:
                    self.close_connection = True  # the client went away mid-answer, as it may
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _send(self, reply: Reply):
                data = json.dumps(reply.body).encode() if isinstance(reply.body, dict) else reply.body
                self.send_response_only(reply.status)
                headers = {"Date": SERVER_DATE, "Content-Type": "application/json", **reply.headers}
                for name, value in headers.items():
                    self.send_header(name, value)
                if reply.sized:
                    self.send_header("Content-Length", str(len(data)))
                else:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                for start in range(0, len(data), 1 << 20):
                    self.wfile.write(data[start : start + (1 << 20)])

        return Handler


class FakeTime:
    """The client's clock and sleep: a sleep is recorded and moves the clock on at once."""

    def __init__(self):
        self.now = 1000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def server():
    chat = ChatServer()
    yield chat
    chat.close()


@pytest.fixture
def fake():
    return FakeTime()


def client_of(url: str, fake: FakeTime | None = None, key: str | None = KEY, **kwargs) -> ChatClient:
    kwargs.setdefault("request_timeout", 30.0)
    if fake is not None:
        kwargs.update(clock=fake.clock, sleep=fake.sleep)
    return ChatClient(url, key, **kwargs)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_completion_comes_back_and_the_key_goes_as_a_bearer_token(server, fake):
    with client_of(server.url, fake) as client:
        reply = client.complete(REQUEST, until=fake.now + 60)
    assert reply.data == COMPLETION and reply.attempts == 1 and reply.seconds >= 0
    (seen,) = server.seen
    assert seen.headers["Authorization"] == f"Bearer {KEY}"
    assert seen.headers["Content-Type"] == "application/json"
    assert json.loads(seen.body) == REQUEST
    with client_of(server.url, fake, key=None) as keyless:
        keyless.complete(REQUEST, until=fake.now + 60)
    assert "Authorization" not in server.seen[1].headers


def test_retry_after_is_honoured_as_seconds_and_as_an_http_date_and_capped(server, fake):
    in_three_seconds = formatdate(
        datetime.strptime(SERVER_DATE, "%a, %d %b %Y %H:%M:%S GMT").replace(tzinfo=UTC).timestamp() + 3, usegmt=True
    )
    server.script = [
        Reply(429, {"error": "slow down"}, {"Retry-After": "7"}),
        Reply(503, b"busy", {"Retry-After": in_three_seconds}),  # measured from the server's Date, not this machine's clock
        Reply(429, b"", {"Retry-After": "3600"}),  # more than max_delay: max_delay
        Reply(),
    ]
    with client_of(server.url, fake, retry=RetryPolicy(attempts=4, max_delay=30)) as client:
        reply = client.complete(REQUEST, until=fake.now + 600)
        totals = client.totals()
    assert fake.slept == [7, 3, 30]
    assert reply.attempts == 4 and reply.seconds == 40
    assert (totals.requests, totals.retries, totals.failures, totals.seconds_waiting) == (4, 3, 0, 40)
    assert totals.by_status == {429: 2, 503: 1, 200: 1}


def test_a_retry_after_past_the_deadline_is_out_of_time_without_waiting(server, fake):
    server.script = [Reply(429, b"", {"Retry-After": "20"})]
    with client_of(server.url, fake) as client, pytest.raises(OutOfTime, match="deadline"):
        client.complete(REQUEST, until=fake.now + 5)
    assert fake.slept == [] and len(server.seen) == 1


def test_a_500_then_success_waits_a_full_jitter_backoff(server, fake):
    server.script = [Reply(500, b"oops")]
    with client_of(server.url, fake, rng=lambda: 0.5) as client:
        reply = client.complete(REQUEST, until=fake.now + 60)
    assert reply.attempts == 2 and fake.slept == [0.25]  # half of base_delay * 2**0


def test_5xx_every_time_is_endpoint_unavailable_after_the_attempts_with_a_capped_exponential_backoff(server, fake):
    server.script = [Reply(502, b"bad gateway") for _ in range(10)]
    policy = RetryPolicy(attempts=4, base_delay=0.5, max_delay=1.5)
    with client_of(server.url, fake, retry=policy, rng=lambda: 1.0) as client, pytest.raises(EndpointUnavailable) as raised:
        client.complete(REQUEST, until=fake.now + 60)
    assert len(server.seen) == 4 and fake.slept == [0.5, 1.0, 1.5]
    assert raised.value.status == 502 and not isinstance(raised.value, BreakerOpen)
    assert str(raised.value) == f"POST {server.url}: HTTP 502 after 4 tries"
    assert client.totals().failures == 1


def test_a_429_that_never_lets_up_hands_the_page_back_as_endpoint_unavailable(server, fake):
    server.script = [Reply(429, b"", {"Retry-After": "1"}) for _ in range(3)]
    breaker = EndpointBreaker(failures=1, clock=fake.clock)
    with client_of(server.url, fake, retry=RetryPolicy(attempts=3), breaker=breaker) as client:
        with pytest.raises(EndpointUnavailable) as raised:
            client.complete(REQUEST, until=fake.now + 60)
    assert raised.value.status == 429 and not breaker.is_open  # throttling is the endpoint answering, not failing


def test_refused_connections_open_the_breaker_which_fails_fast_until_a_probe_finds_the_endpoint_back(fake):
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    breaker = EndpointBreaker(failures=5, cool_seconds=30, clock=fake.clock)
    with client_of(url, fake, retry=RetryPolicy(attempts=3), breaker=breaker) as client:
        with pytest.raises(EndpointUnavailable, match="cannot connect") as first:
            client.complete(REQUEST, until=fake.now + 600)
        assert not isinstance(first.value, BreakerOpen) and first.value.status is None
        with pytest.raises(BreakerOpen):  # tries 4 and 5 fail, and the breaker stops the sixth
            client.complete(REQUEST, until=fake.now + 600)
        assert client.totals().requests == 5 and breaker.is_open
        waits = len(fake.slept)
        with pytest.raises(BreakerOpen, match="breaker is open"):
            client.complete(REQUEST, until=fake.now + 600)
        assert client.totals().requests == 5 and len(fake.slept) == waits  # nothing sent, no wait
        chat = ChatServer(port)
        try:
            with pytest.raises(BreakerOpen):  # the endpoint is back, but the cool-down has not run out
                client.complete(REQUEST, until=fake.now + 600)
            fake.now += 31
            assert client.complete(REQUEST, until=fake.now + 600).attempts == 1  # the probe
            assert not breaker.is_open and len(chat.seen) == 1
            client.complete(REQUEST, until=fake.now + 600)
        finally:
            chat.close()
    assert client.totals().failures == 4 and client.totals().by_status == {200: 2}


def test_the_half_open_breaker_lets_one_probe_through_at_a_time(fake):
    breaker = EndpointBreaker(failures=2, cool_seconds=10, clock=fake.clock)
    assert breaker.failed(Admission.ADMITTED) is False and breaker.failed(Admission.ADMITTED) is True
    assert breaker.admit() is Admission.REFUSED
    fake.now += 10
    assert [breaker.admit(), breaker.admit()] == [Admission.PROBE, Admission.REFUSED]
    breaker.abandoned(Admission.PROBE)  # its caller ran out of time: the next try probes
    assert breaker.admit() is Admission.PROBE
    assert breaker.failed(Admission.PROBE) is True and breaker.admit() is Admission.REFUSED  # another cool-down
    fake.now += 10
    assert breaker.admit() is Admission.PROBE
    breaker.succeeded()
    assert not breaker.is_open and breaker.admit() is Admission.ADMITTED
    assert breaker.failed(Admission.ADMITTED) is False  # the count started again


def test_4xx_answers_are_not_endpoint_failures(server, fake):
    server.script = [Reply(400, {"error": {"message": "bad image"}}) for _ in range(5)]
    breaker = EndpointBreaker(failures=2, clock=fake.clock)
    with client_of(server.url, fake, breaker=breaker) as client:
        for _ in range(5):
            with pytest.raises(RequestRejected):
                client.complete(REQUEST, until=fake.now + 60)
    assert not breaker.is_open and len(server.seen) == 5


def test_an_answer_slower_than_the_deadline_is_out_of_time_when_the_deadline_comes(server):
    server.script = [Reply(delay=30)]
    with client_of(server.url, request_timeout=60) as client:
        started = time.monotonic()
        with pytest.raises(OutOfTime, match="left before the deadline"):
            client.complete(REQUEST, until=started + 0.5)
        assert time.monotonic() - started < 10
    assert len(server.seen) == 1


def test_a_read_timeout_within_the_deadline_is_retried(server, fake):
    server.script = [Reply(delay=30), Reply(delay=30)]
    with client_of(server.url, request_timeout=0.3, retry=RetryPolicy(attempts=2), sleep=fake.sleep) as client:
        with pytest.raises(EndpointUnavailable, match=r"no answer within 0.3s after 2 tries"):
            client.complete(REQUEST, until=time.monotonic() + 60)
    assert len(server.seen) == 2


def test_no_time_left_sends_nothing(server, fake):
    with client_of(server.url, fake) as client, pytest.raises(OutOfTime, match="no time left"):
        client.complete(REQUEST, until=fake.now)
    assert server.seen == [] and client.totals().requests == 0


@pytest.mark.parametrize(
    "body, shown",
    [
        (VLLM_404, "HTTP 404: The model `olmocr-typo` does not exist."),
        (
            {"error": {"message": "The model `olmocr-typo` does not exist.", "code": 404}},
            "HTTP 404: The model `olmocr-typo` does not exist.",
        ),
        ({"detail": "Not Found"}, "HTTP 404: Not Found"),
        (b"<html>\n  <h1>404</h1>\n</html>", "HTTP 404: <html> <h1>404</h1> </html>"),
    ],
    ids=["vllm", "openai", "fastapi", "html"],
)
def test_a_404_is_rejected_at_once_with_the_servers_message(server, fake, body, shown):
    server.script = [Reply(404, body)]
    with client_of(server.url, fake) as client, pytest.raises(RequestRejected) as raised:
        client.complete(REQUEST, until=fake.now + 60)
    assert raised.value.status == 404 and len(server.seen) == 1 and fake.slept == []
    assert str(raised.value) == f"POST {server.url}: {shown}"


def test_a_long_error_body_is_cut_to_one_short_line(server, fake):
    server.script = [Reply(422, {"message": "no\n" * 2000})]
    with client_of(server.url, fake) as client, pytest.raises(RequestRejected) as raised:
        client.complete(REQUEST, until=fake.now + 60)
    assert "\n" not in str(raised.value) and len(str(raised.value)) < 300 + len(server.url) + 30


def test_a_redirect_is_not_followed(server, fake):
    elsewhere = server.url.replace("/v1/", "/elsewhere/")
    server.script = [Reply(302, b"", {"Location": elsewhere})]
    with client_of(server.url, fake) as client, pytest.raises(RequestRejected, match=f"a redirect to {re.escape(elsewhere)} ") as raised:
        client.complete(REQUEST, until=fake.now + 60)
    assert raised.value.status == 302 and len(server.seen) == 1


@pytest.mark.parametrize(
    "reply, problem",
    [
        (Reply(200, b"<html>gateway</html>"), "not JSON: <html>gateway</html>"),
        (Reply(200, {"choices": []}), "no choices\\[0\\].message"),
        (Reply(200, {"choices": [{"text": "old completions API"}]}), "no choices\\[0\\].message"),
        (Reply(200, b"x" * (MAX_REPLY_BYTES + 1)), "over the cap"),
        (Reply(200, b"x" * (MAX_REPLY_BYTES + 1), sized=False), "runs past the cap"),
    ],
    ids=["not-json", "no-choices", "no-message", "oversized", "oversized-unsized"],
)
def test_a_200_that_is_not_a_completion_is_a_bad_reply_and_the_client_goes_on(server, fake, reply, problem):
    server.script = [reply]
    with client_of(server.url, fake) as client:
        with pytest.raises(BadReply, match=problem):
            client.complete(REQUEST, until=fake.now + 60)
        assert client.complete(REQUEST, until=fake.now + 60).data == COMPLETION  # the pool is sound after it
    assert len(server.seen) == 2 and fake.slept == []


def test_32_threads_share_a_pool_of_8_connections(server):
    server.script = [Reply(delay=0.05) for _ in range(32)]
    with client_of(server.url, pool_size=8) as client, ThreadPoolExecutor(32) as pool:
        replies = list(pool.map(lambda _: client.complete(REQUEST, until=time.monotonic() + 60), range(32)))
        totals = client.totals()
    assert all(reply.data == COMPLETION for reply in replies)
    assert server.peak <= 8 and len({seen.peer for seen in server.seen}) <= 8
    assert (totals.requests, totals.retries, totals.failures, totals.by_status) == (32, 0, 0, {200: 32})


def test_the_wait_for_a_connection_ends_at_the_deadline(server):
    server.script = [Reply(delay=30)]
    with client_of(server.url, pool_size=1) as client, ThreadPoolExecutor(1) as pool:
        holding = pool.submit(client.complete, REQUEST, until=time.monotonic() + 1.5)  # holds the one connection
        while not server.seen:
            time.sleep(0.01)
        with pytest.raises(OutOfTime, match="no connection came free"):  # not a wait until the connection is free
            client.complete(REQUEST, until=time.monotonic() + 0.3)
        with pytest.raises(OutOfTime):
            holding.result()
    assert len(server.seen) == 1


def test_the_key_is_in_no_error_log_or_repr(server, fake, caplog):
    caplog.set_level(logging.DEBUG, logger="s3wq")
    echoed = f"Incorrect API key provided: {KEY}."
    server.script = [
        Reply(401, {"error": {"message": echoed}}),
        Reply(200, f"not json {KEY}".encode()),
        Reply(500, echoed.encode()),
        Reply(500, echoed.encode()),
    ]
    breaker = EndpointBreaker(failures=2, clock=fake.clock)
    errors: list[ChatError] = []
    with client_of(f"{server.url}?key={KEY}", fake, retry=RetryPolicy(attempts=2), breaker=breaker) as client:
        for until in [fake.now + 60] * 4 + [fake.now - 1]:
            with pytest.raises(ChatError) as raised:
                client.complete(REQUEST, until=until)
            errors.append(raised.value)
        texts = [repr(client), repr(breaker), caplog.text, *(f"{e!s} {e!r}" for e in errors)]
    with client_of(f"http://127.0.0.1:{free_port()}/v1/chat/completions", fake, retry=RetryPolicy(attempts=1)) as refused:
        with pytest.raises(EndpointUnavailable) as raised:
            refused.complete(REQUEST, until=fake.now + 60)
        texts += [str(raised.value), repr(refused)]
    assert [type(e) for e in errors] == [RequestRejected, BadReply, EndpointUnavailable, BreakerOpen, OutOfTime]
    assert all(isinstance(e, S3wqError) for e in errors)
    assert "[api key]" in str(errors[0]) and server.seen[0].headers["Authorization"] == f"Bearer {KEY}"
    assert [text for text in texts if KEY in text] == []


@given(st.integers(min_value=0, max_value=10**30))
def test_retry_after_in_delta_seconds(seconds):
    assert retry_after_seconds(f" {seconds} ", now=0.0) == float(seconds)


@given(st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2200, 1, 1)), st.integers(min_value=-(10**7), max_value=10**7))
def test_retry_after_as_an_http_date_is_measured_from_now(when, offset):
    when = when.replace(microsecond=0, tzinfo=UTC)
    now = (when - timedelta(seconds=offset)).timestamp()
    assert retry_after_seconds(format_datetime(when, usegmt=True), now=now) == max(0.0, float(offset))


@given(st.text(max_size=60))
def test_retry_after_of_anything_is_a_wait_or_none(value):
    seconds = retry_after_seconds(value, now=time.time())
    assert seconds is None or seconds >= 0

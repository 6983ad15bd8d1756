"""The vlm processor's HTTP client: one OpenAI-compatible ``chat/completions`` endpoint, shared by many threads.

Each call has a deadline (``until``, on the client's monotonic clock) that no request, wait or backoff passes. What
fails for a moment is retried with full-jitter exponential backoff (AWS's "Exponential Backoff and Jitter"): 408, 409,
429, 5xx and connection errors, with ``Retry-After`` honoured on 429 and 503. The rest of 4xx is the request's own fault
and is never retried. Retries that never got an answer end in ``EndpointUnavailable`` -- a 429 that never let up too:
throttling says nothing against the page, so the processor hands the group back for a later attempt rather than failing
a page that would have been read an hour later. An ``EndpointBreaker`` (``breaker``) shared by the threads stops them
all from hammering an endpoint that is down.

The API key goes in one header and nowhere else: not in ``repr``, a log line or an error (a server that echoes it back
has it blanked out).
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any, Self
from urllib.parse import urlsplit

import urllib3
from urllib3.exceptions import DecodeError, HTTPError, NewConnectionError
from urllib3.exceptions import TimeoutError as Urllib3Timeout

from s3wq.errors import S3wqError
from s3wq.processors.vlm.breaker import Admission, EndpointBreaker

log = logging.getLogger("s3wq")

# An answer of 8,000 tokens is ~40 KB of JSON; 16 MB is room for any real one and a cap on a misbehaving server.
MAX_REPLY_BYTES = 16 * 1024 * 1024
MAX_SHOWN_CHARS = 300  # of a server's error body, in a RequestRejected's message
RETRIED_STATUSES = frozenset({408, 409, 429, *range(500, 600)})
RETRY_AFTER_STATUSES = frozenset({429, 503})  # RFC 9110 15.5.20/15.6.4: the statuses Retry-After is meant for
_CHUNK = 64 * 1024
_DELTA_SECONDS_RE = re.compile(r"\d+(\.\d+)?")


class ChatError(S3wqError):
    """The endpoint gave no usable answer to a chat completion."""


class EndpointUnavailable(ChatError):
    """The endpoint could not be reached or kept failing (connection errors, 5xx, throttling) through every retry."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status  # the last try's HTTP status; None when it got no answer


class BreakerOpen(EndpointUnavailable):
    """The endpoint failed too often in a row: nothing is sent to it until its cool-down ends."""


class OutOfTime(ChatError):
    """The call's deadline came before an answer (or before the next try would have ended its backoff)."""


class RequestRejected(ChatError):
    """The endpoint refused the request itself (a 4xx but 408/409/429, or a redirect): sending it again would not help."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class BadReply(ChatError):
    """The endpoint answered 2xx with something that is not a chat completion (not JSON, no message, too large)."""


@dataclass(frozen=True)
class ChatReply:
    data: dict  # the completion, as the endpoint sent it (choices[0].message is there)
    seconds: float  # from the call to the answer, backoff included
    attempts: int  # tries sent, this one included


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6  # tries in all, the first included
    base_delay: float = 0.5  # a retry waits a random share of base_delay * 2**n (n: retries so far) ...
    max_delay: float = 30.0  # ... and never longer than this, Retry-After included

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.base_delay < 0 or self.max_delay < 0:
            raise ValueError(f"a retry policy needs attempts >= 1 and delays >= 0, not {self}")


@dataclass(frozen=True)
class ClientTotals:
    requests: int  # tries sent (or begun: a refused connection counts)
    retries: int  # tries after a call's first
    failures: int  # calls that raised
    by_status: dict[int, int]  # answers by HTTP status; requests minus their sum got no answer
    seconds_waiting: float  # in backoff


def retry_after_seconds(value: str, *, now: float) -> float | None:
    """The wait a ``Retry-After`` value asks for: delta-seconds, or an HTTP-date less ``now`` (epoch seconds).

    None when it is neither; never negative (a date gone by asks for no wait).
    """
    value = value.strip()
    if _DELTA_SECONDS_RE.fullmatch(value):
        return float(value)
    epoch = _epoch_of(value)
    return None if epoch is None else max(0.0, epoch - now)


def _epoch_of(http_date: str) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(http_date)
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()  # "-0000": UTC, source unsaid
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


@dataclass(frozen=True)
class _Try:
    """One try's outcome: an answer (status, headers, body), or none (status None, ``problem`` says why)."""

    status: int | None
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    problem: str = ""


class ChatClient:
    """POSTs chat completions to ``url`` (the whole ``.../chat/completions`` URL); one client for many threads."""

    def __init__(
        self,
        url: str,
        api_key: str | None,
        *,
        request_timeout: float,
        retry: RetryPolicy = RetryPolicy(),
        breaker: EndpointBreaker | None = None,
        pool_size: int = 16,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
    ):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL with a host: {_shown_url(url)}")
        self.where = _shown_url(url)
        self.request_timeout = request_timeout
        self.retry = retry
        self.breaker = breaker
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._key = api_key or None
        self._headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "s3wq-vlm"}
        if self._key:
            self._headers["Authorization"] = f"Bearer {self._key}"
        self._clock, self._sleep, self._rng = clock, sleep, rng
        # block=True: a thread waits for one of pool_size connections rather than opening one more for each page.
        self._pool = urllib3.connection_from_url(url, maxsize=pool_size, block=True, retries=False)
        # The wait for a connection happens here, under the deadline, so that each request's timeout is set when
        # it is sent (urllib3's own pool_timeout would add its wait to the request's).
        self._slots = threading.BoundedSemaphore(pool_size)
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._by_status: Counter[int] = Counter()
        self._waited = 0.0
        self._closed = False

    def __repr__(self) -> str:
        return f"ChatClient({self.where!r}, api_key={'set' if self._key else 'none'}, request_timeout={self.request_timeout:g})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        self._pool.close()

    def totals(self) -> ClientTotals:
        with self._lock:
            counts = self._counts
            return ClientTotals(counts["requests"], counts["retries"], counts["failures"], dict(self._by_status), self._waited)

    def complete(self, body: dict, *, until: float) -> ChatReply:
        """The completion of ``body`` (an OpenAI chat request), by ``until`` (a ``clock()`` reading)."""
        if self._closed:
            raise ChatError(f"POST {self.where}: the client is closed")
        started = self._clock()
        payload = json.dumps(body, ensure_ascii=False).encode()
        try:
            return self._tries(payload, until, started)
        except ChatError:
            self._add(failures=1)
            raise

    def _tries(self, payload: bytes, until: float, started: float) -> ChatReply:
        for attempt in range(1, self.retry.attempts + 1):
            if attempt > 1:
                self._add(retries=1)
            answer = self._send(payload, until)
            if answer.status is not None and 200 <= answer.status < 300:
                return ChatReply(self._completion(answer), self._clock() - started, attempt)
            if answer.status is not None and answer.status not in RETRIED_STATUSES:
                raise self._rejected(answer.status, answer)
            problem = answer.problem or f"HTTP {answer.status}"
            if attempt == self.retry.attempts:
                break
            self._back_off(answer, attempt, until, problem)
        tries = f"{self.retry.attempts} tr{'y' if self.retry.attempts == 1 else 'ies'}"
        raise EndpointUnavailable(f"POST {self.where}: {problem} after {tries}", answer.status)

    def _back_off(self, answer: _Try, attempt: int, until: float, problem: str) -> None:
        """Wait before try ``attempt + 1``: what Retry-After asks, or a random share of the exponential backoff."""
        delay = None
        if answer.status in RETRY_AFTER_STATUSES and "Retry-After" in answer.headers:
            server_now = _epoch_of(answer.headers.get("Date", "")) or time.time()  # the server's clock: no skew
            delay = retry_after_seconds(answer.headers["Retry-After"], now=server_now)
        if delay is None:
            delay = self._rng() * self.retry.base_delay * 2 ** (attempt - 1)
        delay = min(delay, self.retry.max_delay)
        if self._clock() + delay > until:
            raise OutOfTime(f"POST {self.where}: {problem}, and the wait of {delay:.1f}s for a retry would pass the deadline")
        log.debug("POST %s: %s; retry %d of %d in %.2fs", self.where, problem, attempt, self.retry.attempts - 1, delay)
        self._sleep(delay)
        self._add(waited=delay)

    def _send(self, payload: bytes, until: float) -> _Try:
        """One try, under the breaker and the deadline; the breaker hears what it showed of the endpoint."""
        if self._clock() >= until:
            raise OutOfTime(f"POST {self.where}: no time left to send the request")
        admission = self.breaker.admit() if self.breaker else Admission.ADMITTED
        if admission is Admission.REFUSED:
            raise BreakerOpen(f"POST {self.where}: not sent, the endpoint failed too often in a row (its breaker is open)")
        answer: _Try | None = None
        try:
            answer = self._exchange(payload, until)
            return answer
        finally:
            self._judge(admission, answer)

    def _judge(self, admission: Admission, answer: _Try | None) -> None:
        if self.breaker is None:
            return
        if answer is None:  # out of time or a bad reply: nothing learnt of the endpoint's health
            self.breaker.abandoned(admission)
        elif answer.status is None or answer.status >= 500:
            if self.breaker.failed(admission):
                log.warning(
                    "POST %s: %s; the endpoint's breaker opens for %gs",
                    self.where,
                    answer.problem or answer.status,
                    self.breaker.cool_seconds,
                )
        else:
            self.breaker.succeeded()

    def _exchange(self, payload: bytes, until: float) -> _Try:
        if not self._slots.acquire(timeout=max(0.0, until - self._clock())):
            raise OutOfTime(f"POST {self.where}: no connection came free before the deadline")
        try:
            timeout = min(self.request_timeout, until - self._clock())
            if timeout <= 0:
                raise OutOfTime(f"POST {self.where}: no time left to send the request")
            self._add(requests=1)
            try:
                return self._request(payload, timeout, until)
            except DecodeError as exc:
                raise BadReply(f"POST {self.where}: the answer's content encoding does not decode ({type(exc).__name__})") from None
            except Urllib3Timeout as exc:
                if isinstance(exc, NewConnectionError):
                    return _Try(None, problem=f"cannot connect ({_reason(exc)})")
                if timeout < self.request_timeout:  # cut short by the deadline: the deadline's, not the endpoint's, fault
                    raise OutOfTime(f"POST {self.where}: no answer within the {timeout:.1f}s left before the deadline") from None
                return _Try(None, problem=f"no answer within {timeout:g}s")
            except HTTPError as exc:
                return _Try(None, problem=f"the connection failed ({_reason(exc)})")
        finally:
            self._slots.release()

    def _request(self, payload: bytes, timeout: float, until: float) -> _Try:
        response = self._pool.urlopen(
            "POST",
            self._target,
            body=payload,
            headers=self._headers,
            timeout=urllib3.Timeout(total=timeout),
            retries=False,
            redirect=False,
            preload_content=False,
        )
        try:
            with self._lock:
                self._by_status[response.status] += 1
            body = self._read_capped(response, until)
            return _Try(
                response.status, {k: response.headers[k] for k in ("Retry-After", "Date", "Location") if k in response.headers}, body
            )
        except ChatError:
            response.close()  # mid-body: the connection cannot be used again
            raise
        finally:
            response.release_conn()

    def _read_capped(self, response: urllib3.BaseHTTPResponse, until: float) -> bytes:
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > MAX_REPLY_BYTES:
            raise BadReply(f"POST {self.where}: the answer is {int(declared):,} bytes, over the cap of {MAX_REPLY_BYTES:,}")
        chunks: list[bytes] = []
        size = 0
        for chunk in response.stream(_CHUNK):
            size += len(chunk)
            if size > MAX_REPLY_BYTES:
                raise BadReply(f"POST {self.where}: the answer runs past the cap of {MAX_REPLY_BYTES:,} bytes")
            # Each read has the request's timeout; a server that dribbles its answer is stopped here at the deadline.
            if self._clock() > until:
                raise OutOfTime(f"POST {self.where}: the answer was still coming at the deadline")
            chunks.append(chunk)
        return b"".join(chunks)

    def _completion(self, answer: _Try) -> dict:
        try:
            data = json.loads(answer.body)
        except ValueError:
            raise BadReply(f"POST {self.where}: HTTP {answer.status} but the answer is not JSON: {self._shown(answer.body, 80)}") from None
        choices = data.get("choices") if isinstance(data, dict) else None
        if not (isinstance(choices, list) and choices and isinstance(choices[0], dict) and isinstance(choices[0].get("message"), dict)):
            raise BadReply(
                f"POST {self.where}: HTTP {answer.status} but the answer has no choices[0].message: {self._shown(answer.body, 80)}"
            )
        return data

    def _rejected(self, status: int, answer: _Try) -> RequestRejected:
        if 300 <= status < 400:
            where = _shown_url(answer.headers.get("Location", "")) or "nowhere"
            return RequestRejected(
                status, f"POST {self.where}: HTTP {status}, a redirect to {where} (not followed: give the endpoint's own URL)"
            )
        return RequestRejected(status, f"POST {self.where}: HTTP {status}: {self._shown(_error_text(answer.body), MAX_SHOWN_CHARS)}")

    def _shown(self, text: bytes | str, limit: int) -> str:
        """Server text on one line, cut to ``limit``, with the key blanked out if the server echoed it."""
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        if self._key:
            text = text.replace(self._key, "[api key]")
        text = " ".join(text.split())
        return (text[:limit] + "...") if len(text) > limit else (text or "(no body)")

    def _add(self, waited: float = 0.0, **counts: int) -> None:
        with self._lock:
            self._counts.update(counts)
            self._waited += waited


def _error_text(body: bytes) -> str | bytes:
    """The message of an error body: OpenAI's ``{"error": {"message"}}``, vLLM's ``{"message"}``, FastAPI's ``{"detail"}``."""
    try:
        data: Any = json.loads(body)
    except ValueError:
        return body
    if isinstance(data, dict):
        error = data.get("error")
        for text in (error.get("message") if isinstance(error, dict) else error, data.get("message"), data.get("detail")):
            if isinstance(text, str) and text.strip():
                return text
    return body


def _shown_url(url: str) -> str:
    """``scheme://host:port/path``: no credentials, query or fragment, whatever the URL held."""
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return "(a malformed URL)"
    if not parts.hostname:
        return ""
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}{f':{port}' if port else ''}{parts.path}"


def _reason(exc: HTTPError) -> str:
    """What went wrong with a connection, in a few words: the OS's reason, not urllib3's text naming the pool and URL."""
    inner = exc.__context__ or exc.__cause__
    if isinstance(inner, OSError) and inner.strerror:
        return inner.strerror
    return str(inner)[:120] if inner else type(exc).__name__

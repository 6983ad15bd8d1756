"""The stand-in's HTTP side: vLLM's routes (``/v1/chat/completions``, ``/v1/models``, ``/health``) and its own
(``/_standin/script``, ``/_standin/requests``, ``/_standin/reset``), which let another process drive it."""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from s3wq.errors import BadInput

from .answers import Reader, answer, completion_body, error_body, models_body
from .checks import Expectations, Refused, Seen, check_authorization, check_request
from .journal import Journal, Record, Slots
from .pages import Pages, View
from .script import Behaviour, Script, Step

# Far over a page's request (a 1288-pixel PNG is under a few MB, base64 a third more): what olmocr would never send.
MAX_BODY_BYTES = 64 * 1024 * 1024


@dataclass
class State:
    """Everything the handlers share; each part guards itself."""

    expect: Expectations
    latency: float
    reader: Reader | None
    slots: Slots
    script: Script = field(default_factory=Script)
    pages: Pages = field(default_factory=Pages)
    journal: Journal = field(default_factory=Journal)
    stopping: threading.Event = field(default_factory=threading.Event)

    def reset(self) -> None:
        self.script.reset()
        self.pages.reset()
        self.journal.reset()
        self.slots.reset_peak()


class StandInServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's backlog is 5: a worker's pages in flight (16 by default) connecting at once would be reset.
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], state: State):
        super().__init__(address, Handler)
        self.state = state
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client gone, or a connection dropped on purpose

    def close_connections(self) -> None:
        """End every open connection, idle keep-alive ones too: a stopped stand-in answers nothing more."""
        with self.connections_lock:
            connections = list(self.connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive for pooled clients; olmocr's own sends Connection: close
    server: StandInServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def handle(self) -> None:
        try:
            super().handle()
        except OSError:
            pass  # the client went away, or the stand-in stopped

    @property
    def state(self) -> State:
        return self.server.state

    def _send_json(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes | None:
        """The request's body; None when it has no Content-Length or one too large (the connection then closes)."""
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit() or int(length) > MAX_BODY_BYTES:
            self.close_connection = True
            return None
        return self.rfile.read(int(length))

    def _drop(self) -> None:
        """Close the connection with no answer, as a server that died mid-request does."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/health":
            self._send_json(200, {})
        elif path == "/v1/models":
            try:
                check_authorization(self.headers.get("Authorization"), self.state.expect)
            except Refused as refused:
                self._send_json(refused.status, error_body(refused.status, str(refused), refused.kind))
                return
            self._send_json(200, models_body(self.state.expect.model))
        elif path == "/_standin/requests":
            self._send_json(200, self._status())
        else:
            self._send_json(404, error_body(404, f"no route GET {path} on the stand-in"))

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        if path == "/v1/chat/completions":
            Completion(self).run()
        elif path in ("/_standin/script", "/_standin/reset"):
            self._control(path)
        else:
            self._body()
            self._send_json(404, error_body(404, f"no route POST {path} on the stand-in"))

    def _status(self) -> dict[str, Any]:
        return {
            "requests": [record.to_json() for record in self.state.journal.records()],
            "in_flight": self.state.slots.in_flight,
            "peak_in_flight": self.state.slots.peak,
            "max_in_flight": self.state.slots.cap,
            "script": self.state.script.to_json(),
        }

    def _control(self, path: str) -> None:
        body = self._body()
        if path == "/_standin/reset":
            self.state.reset()
            self._send_json(200, {"reset": True})
            return
        try:
            order = json.loads(body or b"{}")
            if not isinstance(order, dict) or set(order) - {"steps", "default"} or not isinstance(order.get("steps", []), list):
                raise Refused('a script is {"steps": [step, ...], "default": step}, both optional')
            queued = self.state.script.add(order.get("steps", []), order.get("default"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            self._send_json(400, error_body(400, "the script is not JSON"))
            return
        except BadInput as bad:  # a bad step (BadStep) or a bad shape (Refused): the message names the mistake
            self._send_json(400, error_body(400, str(bad)))
            return
        self._send_json(200, {"queued": queued})


class Completion:
    """One POST /v1/chat/completions: checked, given its step, answered, and recorded before the client hears it."""

    def __init__(self, handler: Handler):
        self.handler = handler
        self.state = handler.state
        self.number = self.state.journal.next_number()
        self.time = time.time()
        self.started = time.monotonic()
        self.seen = Seen()
        self.view: View | None = None

    def run(self) -> None:
        body = self.handler._body()
        try:
            check_authorization(self.handler.headers.get("Authorization"), self.state.expect)
            if body is None:
                raise Refused(f"the request has no Content-Length (or one over {MAX_BODY_BYTES} bytes)")
            check_request(body, self.state.expect, self.seen)
        except Refused as refused:
            self._record(None, refused.status, refused=True, error=str(refused))
            self.handler._send_json(refused.status, error_body(refused.status, str(refused), refused.kind))
            return
        assert self.seen.header is not None and self.seen.sha1 is not None
        self.view = self.state.pages.identify(self.seen.png, self.seen.header, self.seen.sha1)
        self._answer(self._step())

    def _step(self) -> Step:
        step = self.state.script.take()
        correction = self.view.correction if self.view else None
        if step.behaviour is Behaviour.OK and correction:
            return Step(Behaviour.ROTATED, rotation=correction)  # still askew: a model says so again
        return step

    def _answer(self, step: Step) -> None:
        if step.behaviour is Behaviour.STATUS:
            assert step.status is not None
            message = f"stand-in: scripted status {step.status}"
            self._record(step, step.status, error=message)
            headers = {} if step.retry_after is None else {"Retry-After": f"{step.retry_after:g}"}
            self.handler._send_json(step.status, error_body(step.status, message), headers)
            return
        if step.behaviour is Behaviour.DROP:
            self._record(step, None)
            self.handler._drop()
            return
        if not self.state.slots.acquire():
            self.handler._drop()  # stopping
            return
        try:
            self._generate(step)
        finally:
            self.state.slots.release()

    def _generate(self, step: Step) -> None:
        """The answer's time on the model (latency, and a slow step's seconds), then the answer, inside a slot."""
        if self.state.stopping.wait(self.state.latency + (step.seconds or 0.0)):
            self.handler._drop()
            return
        try:
            result = answer(step, self.seen, self.state.reader, self.state.expect.max_tokens)
        except Exception as exc:  # noqa: BLE001 -- the reader is the demo's OCR: its failure is the answer, a 500
            message = f"the stand-in's reader failed: {type(exc).__name__}: {exc}"
            self._record(step, 500, error=message)
            self.handler._send_json(500, error_body(500, message))
            return
        if step.behaviour is Behaviour.ROTATED and self.view is not None and step.rotation:
            self.state.pages.turned(self.view, self.seen.png, step.rotation)
        self._record(step, 200, finish_reason=result.finish_reason, tokens=(result.prompt_tokens, result.completion_tokens))
        self.handler._send_json(200, completion_body(result, self.state.expect.model, self.number))

    def _record(
        self,
        step: Step | None,
        status: int | None,
        *,
        refused: bool = False,
        error: str | None = None,
        finish_reason: str | None = None,
        tokens: tuple[int | None, int | None] = (None, None),
    ) -> None:
        seen, view = self.seen, self.view
        self.state.journal.add(
            Record(
                number=self.number,
                time=self.time,
                model=seen.model,
                temperature=seen.temperature,
                width=seen.header.width if seen.header else None,
                height=seen.header.height if seen.header else None,
                sha1=seen.sha1,
                page=view.page if view else None,
                rotation=view.rotation if view else None,
                behaviour=step.behaviour.value if step else None,
                status=status,
                refused=refused,
                error=error,
                finish_reason=finish_reason,
                prompt_tokens=tokens[0],
                completion_tokens=tokens[1],
                seconds=round(time.monotonic() - self.started, 6),
            )
        )

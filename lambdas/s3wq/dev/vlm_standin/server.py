"""``StandIn``: the stand-in started, driven and read from Python, and stopped."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Self

from s3wq.processors.vlm.prompt import PROMPT
from s3wq.processors.vlm.settings import DEFAULT_LONGEST_SIDE, DEFAULT_MODEL

from .answers import Reader
from .checks import OLMOCR_MAX_TOKENS, OLMOCR_TEMPERATURES, Expectations
from .handler import StandInServer, State
from .journal import Record, Slots
from .script import Step


class StandIn:
    """An OpenAI-compatible stand-in for olmocr's model on a loopback port: ``with StandIn(latency=0.2) as s: s.url``.

    It is no model: it checks each request against what olmocr sends and answers in olmocr's format with made-up text
    (``reader``'s, when given: png bytes -> text). ``latency`` is each answer's time on the "GPU"; ``max_in_flight``
    caps the answers in progress (vLLM's --max-num-seqs), the rest waiting; ``api_key`` makes ``Authorization: Bearer``
    required; ``prompt`` is the text part required (olmocr's prompt; None: any). The port is bound when the object is made.
    """

    def __init__(
        self,
        *,
        model: str = DEFAULT_MODEL,
        host: str = "127.0.0.1",
        port: int = 0,
        longest_side: int = DEFAULT_LONGEST_SIDE,
        latency: float = 0.0,
        max_in_flight: int | None = None,
        api_key: str | None = None,
        prompt: str | None = PROMPT,
        reader: Reader | None = None,
        temperatures: Iterable[float] = OLMOCR_TEMPERATURES,
        max_tokens: int = OLMOCR_MAX_TOKENS,
    ):
        if latency < 0:
            raise ValueError(f"latency {latency} is under 0 seconds")
        expect = Expectations(model, longest_side, tuple(temperatures), max_tokens, prompt, api_key)
        self._state = State(expect, latency, reader, Slots(max_in_flight))
        self._server = StandInServer((host, port), self._state)
        self.host: str = host
        self.port: int = self._server.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The API's base URL, as olmocr's --server takes it: ``http://HOST:PORT/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def model(self) -> str:
        return self._state.expect.model

    def start(self) -> Self:
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="vlm-standin", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop at once: answers being made are dropped, waiting ones too, and open connections closed."""
        self._state.stopping.set()
        self._state.slots.close()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=10)
        self._server.close_connections()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, *steps: Step | str | dict, default: Step | str | dict | None = None) -> int:
        """Queue ``steps`` (Step, a behaviour's name, or its JSON) after those queued; ``default`` for after them.

        Each request olmocr would send takes the next step (a refused one takes none). Return how many are queued.
        """
        return self._state.script.add(steps, default)

    def requests(self) -> list[Record]:
        """Every chat-completions request so far, in the order they came."""
        return self._state.journal.records()

    def refusals(self) -> list[Record]:
        return [record for record in self.requests() if record.refused]

    @property
    def in_flight(self) -> int:
        return self._state.slots.in_flight

    @property
    def peak_in_flight(self) -> int:
        """The most answers in progress at once since the start (or the last reset)."""
        return self._state.slots.peak

    def reset(self) -> None:
        """Forget the script, the pages, the records and the peak."""
        self._state.reset()

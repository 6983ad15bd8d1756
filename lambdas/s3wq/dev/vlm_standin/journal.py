"""What the stand-in keeps of its work: a record of every chat-completions request, and the answers in progress."""

from __future__ import annotations

import itertools
import threading
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Record:
    """One POST /v1/chat/completions, as it was answered.

    ``behaviour`` is the one applied (None when the request was refused); ``status`` None when the connection was
    dropped; ``refused`` when the request was one olmocr would never send (or lacked the API key), ``error`` saying why
    (or what failed: a reader's exception). ``page`` names the page (the sha1 prefix of its first image seen) and
    ``rotation`` how far this image is turned from that one, anticlockwise.
    """

    number: int
    time: float
    model: str | None
    temperature: float | None
    width: int | None
    height: int | None
    sha1: str | None
    page: str | None
    rotation: int | None
    behaviour: str | None
    status: int | None
    refused: bool
    error: str | None
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Record:
        return cls(**value)


class Journal:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._numbers = itertools.count(1)
        self._records: list[Record] = []

    def next_number(self) -> int:
        with self._lock:
            return next(self._numbers)

    def add(self, record: Record) -> None:
        with self._lock:
            self._records.append(record)

    def records(self) -> list[Record]:
        """In the order the requests arrived (they are added as they are answered)."""
        with self._lock:
            return sorted(self._records, key=lambda record: record.number)

    def reset(self) -> None:
        with self._lock:
            self._records.clear()


class Slots:
    """Answers in progress, at most ``cap`` at once (vLLM's --max-num-seqs; None: no cap): the rest wait their turn."""

    def __init__(self, cap: int | None) -> None:
        if cap is not None and cap < 1:
            raise ValueError(f"max_in_flight {cap} is under 1")
        self.cap = cap
        self._changed = threading.Condition()
        self._closed = False
        self.in_flight = 0
        self.peak = 0

    def acquire(self) -> bool:
        """Wait for a slot; False when the stand-in is stopping instead."""
        with self._changed:
            while not self._closed and self.cap is not None and self.in_flight >= self.cap:
                self._changed.wait()
            if self._closed:
                return False
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            return True

    def release(self) -> None:
        with self._changed:
            self.in_flight -= 1
            self._changed.notify()

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def reset_peak(self) -> None:
        with self._changed:
            self.peak = self.in_flight

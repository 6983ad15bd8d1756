"""How the stand-in is told to answer: a behaviour per request, from a queue consumed in order, then a default.

A step is spelt the same from Python and over HTTP: ``Step("status", status=503, retry_after=2)`` is the JSON
``{"behaviour": "status", "status": 503, "retry_after": 2}``, and a behaviour without a parameter may be its bare name
(``"drop"``).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from s3wq.errors import BadInput


class BadStep(BadInput):
    """A scripted step names no behaviour, or lacks (or has out of range) the parameter its behaviour needs."""


class Behaviour(StrEnum):
    """What one answer is."""

    OK = "ok"  # the page's text under valid front matter
    STATUS = "status"  # an error status (``status``), with Retry-After if ``retry_after`` is given
    SLOW = "slow"  # ok, after ``seconds`` more than the latency
    MALFORMED = "malformed"  # front matter olmocr's parser rejects (fields missing)
    ROTATED = "rotated"  # is_rotation_valid false, rotation_correction ``rotation``: the page is expected back turned
    LENGTH = "length"  # finish_reason "length": the answer ran out of max_tokens
    TOO_LONG = "too_long"  # total_tokens over olmocr's context of 16384
    DROP = "drop"  # the connection closed with no answer
    TABLE = "table"  # is_table true, an HTML table in the text


# The parameter each behaviour needs, and its bounds.
_NEEDS = {Behaviour.STATUS: "status", Behaviour.SLOW: "seconds", Behaviour.ROTATED: "rotation"}
_FIELDS = ("status", "retry_after", "seconds", "rotation")


@dataclass(frozen=True)
class Step:
    behaviour: Behaviour
    status: int | None = None
    retry_after: float | None = None
    seconds: float | None = None
    rotation: int | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "behaviour", Behaviour(self.behaviour))
        except ValueError:
            raise BadStep(f"{self.behaviour!r} is no behaviour; one of {', '.join(b.value for b in Behaviour)}") from None
        needed = _NEEDS.get(self.behaviour)
        if needed and getattr(self, needed) is None:
            raise BadStep(f"behaviour {self.behaviour.value!r} needs {needed!r}")
        extra = [name for name in _FIELDS if getattr(self, name) is not None and name != needed and not self._retry_after_of_status(name)]
        if extra:
            raise BadStep(f"behaviour {self.behaviour.value!r} takes no {', '.join(extra)}")
        self._check_ranges()

    def _retry_after_of_status(self, name: str) -> bool:
        return name == "retry_after" and self.behaviour is Behaviour.STATUS

    def _check_ranges(self) -> None:
        if self.status is not None and (type(self.status) is not int or not 400 <= self.status <= 599):
            raise BadStep(f"status {self.status!r} is not an error status (400 to 599)")
        if self.rotation is not None and (type(self.rotation) is not int or self.rotation not in (90, 180, 270)):
            raise BadStep(f"rotation {self.rotation!r} is none of 90, 180, 270 (a page needing 0 is not rotated)")
        for name in ("seconds", "retry_after"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 3600):
                raise BadStep(f"{name} {value!r} is not a number of seconds from 0 to 3600")

    @classmethod
    def from_json(cls, value: Any) -> Step:
        """A step from its JSON: a bare behaviour name, or an object with ``behaviour`` and its parameter."""
        if isinstance(value, Step):
            return value
        if isinstance(value, str):
            return cls(value)  # type: ignore[arg-type]  # checked by __post_init__
        if not isinstance(value, dict) or "behaviour" not in value:
            raise BadStep(f"a step is a behaviour's name or an object with 'behaviour', not {value!r}")
        unknown = set(value) - {"behaviour", *_FIELDS}
        if unknown:
            raise BadStep(f"a step has no field {', '.join(sorted(unknown))}")
        return cls(**value)

    def to_json(self) -> dict[str, Any]:
        return {"behaviour": self.behaviour.value, **{name: getattr(self, name) for name in _FIELDS if getattr(self, name) is not None}}


OK = Step(Behaviour.OK)


class Script:
    """The steps still to come, then the default; safe to change while requests take steps."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Step] = deque()
        self._default = OK

    def add(self, steps: Iterable[Step | str | dict], default: Step | str | dict | None = None) -> int:
        """Queue ``steps`` after those already queued (all checked before any is queued); return how many wait."""
        checked = [Step.from_json(step) for step in steps]
        new_default = None if default is None else Step.from_json(default)
        with self._lock:
            self._queue.extend(checked)
            if new_default is not None:
                self._default = new_default
            return len(self._queue)

    def take(self) -> Step:
        with self._lock:
            return self._queue.popleft() if self._queue else self._default

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self._default = OK

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {"queued": [step.to_json() for step in self._queue], "default": self._default.to_json()}

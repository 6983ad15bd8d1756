"""What s3wq writes into lock, done and failed objects, and how it reads them back.

Every body is JSON, and every body is read strictly: anything that does not
decode to exactly the expected shape -- hostile numbers (``1e999``, ``NaN``,
a 5,000-digit integer), deep nesting, a wrong type, an olmocr lock (empty) --
is *unparseable*, never a crash. An unparseable lock is a foreign lock, which
the claim protocol honours for the foreign timeout (olmocr's 1,800 s).
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal, overload

from s3wq.config import FOREIGN_LOCK_TIMEOUT_SECONDS, MAX_LEASE_SECONDS
from s3wq.model import LockState, Outcome
from s3wq.protocol.tracebacks import MAX_FRAME_CODE_CHARS, MAX_FRAME_FILE_CHARS, MAX_FRAME_FUNCTION_CHARS
from s3wq.store import layout

MAX_ATTEMPT = 1_000_000
_MAX_DURATION_SECONDS = 1e9
# Large enough for a traceback's last lines, small enough that a lock stays one small PUT.
MAX_ERROR_CHARS = 2000
# The end of a processor's traceback a failed flag keeps: what `s3wq failures` shows, in one small object.
MAX_TRACEBACK_CHARS = 8000

# Every state and outcome a lock body may hold (the words are defined once, in s3wq.model).
STATES = tuple(LockState)
OUTCOMES = tuple(Outcome)


class Unparseable(ValueError):
    """A body is not what s3wq writes."""


def _reject_constant(name: str) -> float:
    raise Unparseable(f"non-finite number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Unparseable(f"number out of range: {text[:20]}")
    return value


def strict_json(data: bytes) -> Any:
    """Parse JSON, refusing NaN, Infinity and numbers that overflow; Unparseable for anything invalid."""
    try:
        return json.loads(data, parse_constant=_reject_constant, parse_float=_finite_float)
    except Unparseable:
        raise
    # ValueError covers malformed JSON and integers past Python's digit limit;
    # RecursionError deep nesting.
    except (ValueError, TypeError, RecursionError, UnicodeDecodeError) as exc:
        raise Unparseable(str(exc)[:200]) from None


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@overload
def _string(doc: dict[str, object], name: str, *, optional: Literal[False] = False) -> str: ...
@overload
def _string(doc: dict[str, object], name: str, *, optional: bool) -> str | None: ...
def _string(doc: dict[str, object], name: str, *, optional: bool = False) -> str | None:
    value = doc.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise Unparseable(f"{name} must be a string")
    return value


@overload
def _number(doc: dict[str, object], name: str, low: float, high: float, *, optional: Literal[False] = False) -> float: ...
@overload
def _number(doc: dict[str, object], name: str, low: float, high: float, *, optional: bool) -> float | None: ...
def _number(doc: dict[str, object], name: str, low: float, high: float, *, optional: bool = False) -> float | None:
    value = doc.get(name)
    if value is None and optional:
        return None
    # bool is an int in Python; a lock saying "attempt": true is not ours.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise Unparseable(f"{name} must be a number in [{low}, {high}]")
    return float(value)


def _hash(doc: dict[str, object], name: str) -> str | None:
    value = _string(doc, name, optional=True)
    if value is not None and not layout.is_hash(value):
        raise Unparseable(f"{name} must be a group hash")
    return value


def _whole(doc: dict[str, object], name: str, low: int, high: int) -> int:
    value = _number(doc, name, low, high)
    if not value.is_integer():
        raise Unparseable(f"{name} must be a whole number")
    return int(value)


@dataclass(frozen=True)
class LockBody:
    """One write of a group's lock.

    ``lease_seconds`` is the holder's own lease: a taker judges staleness by
    it, never by its own setting. ``budget_seconds`` is how long the holder
    could give this run when it started (None: as long as it keeps renewing).
    ``counted`` says whether a run that ended (released or failed) used up an
    attempt. ``needs_seconds`` is the longest the group has run without
    finishing, carried from holder to holder so that a group that ran out of
    time is next taken only by a worker with more time to give.
    """

    owner: str
    worker_id: str
    attempt: int
    lease_seconds: float
    claimed_at: str = field(default_factory=now_iso)
    budget_seconds: float | None = None
    state: str = LockState.HELD
    outcome: str | None = None
    counted: bool = False
    needs_seconds: float | None = None
    # Claimed ahead, while the worker still ran the group with this hash under
    # this claim's owner token: if the holder vanished before finishing that
    # claim, this one never ran.
    behind: str | None = None
    behind_owner: str | None = None
    error: str | None = None
    # Unique to this write: an s3wq lock's ETag is never equal to an earlier
    # one, and finding these exact bytes stored means this write was applied.
    write_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])

    @property
    def held(self) -> bool:
        return self.state == LockState.HELD

    @property
    def next_attempt(self) -> int:
        """The attempt number of the run that takes this lock over."""
        if self.state == LockState.HELD:  # taken over from a holder that vanished: a lost run counts
            return self.attempt + 1
        return self.attempt + 1 if self.counted else self.attempt

    def rewritten(self, **changes: Any) -> LockBody:
        """The same claim, written again (a renewal or a change of state): a fresh write id."""
        return replace(self, write_id=uuid.uuid4().hex[:16], **changes)

    def encode(self) -> bytes:
        doc = {k: v for k, v in asdict(self).items() if v is not None}
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> LockBody | None:
        """The parsed body, or None for anything s3wq did not write (an olmocr lock is empty)."""
        try:
            doc = strict_json(data)
            if not isinstance(doc, dict):
                raise Unparseable("not an object")
            if "state" not in doc:
                doc = _from_first_format(doc)
            state = _string(doc, "state")
            outcome = _string(doc, "outcome", optional=True)
            if state not in STATES or (outcome is not None and outcome not in OUTCOMES):
                raise Unparseable("unknown state or outcome")
            counted = doc.get("counted", False)
            if not isinstance(counted, bool):
                raise Unparseable("counted must be true or false")
            error = _string(doc, "error", optional=True)
            return cls(
                owner=_string(doc, "owner"),
                worker_id=_string(doc, "worker_id"),
                attempt=_whole(doc, "attempt", 1, MAX_ATTEMPT),
                lease_seconds=_number(doc, "lease_seconds", 0.001, MAX_LEASE_SECONDS),
                claimed_at=_string(doc, "claimed_at"),
                budget_seconds=_number(doc, "budget_seconds", 0, _MAX_DURATION_SECONDS, optional=True),
                state=state,
                outcome=outcome,
                counted=counted,
                needs_seconds=_number(doc, "needs_seconds", 0, _MAX_DURATION_SECONDS, optional=True),
                behind=_hash(doc, "behind"),
                behind_owner=_string(doc, "behind_owner", optional=True),
                error=None if error is None else error[:MAX_ERROR_CHARS],
                write_id=_string(doc, "write_id"),
            )
        except Unparseable:
            return None


def _from_first_format(doc: dict[str, object]) -> dict[str, object]:
    """A lock written before leases (booleans, no lease) in today's shape.

    Its holder's lock timeout is unknown, so it is honoured as long as a
    foreign lock; a released one had kept its count for the next attempt,
    and a failed one still means failed.
    """
    failed, released = doc.get("failed", False), doc.get("released", False)
    if not isinstance(failed, bool) or not isinstance(released, bool):
        raise Unparseable("released and failed must be true or false")
    return {
        **doc,
        "state": LockState.FAILED if failed else LockState.RELEASED if released else LockState.HELD,
        "counted": True,
        "lease_seconds": FOREIGN_LOCK_TIMEOUT_SECONDS,
        "write_id": doc.get("write_id") or "first-format",
    }


def load_object(data: bytes) -> dict[str, object] | None:
    """A flag body as a dict, or None if it is empty (olmocr's flags) or not a JSON object."""
    try:
        doc = strict_json(data) if data.strip() else None
    except Unparseable:
        return None
    return doc if isinstance(doc, dict) else None


def error_frame(doc: dict[str, object]) -> dict[str, object] | None:
    """A failed flag's ``error_frame`` ({file, line, function, code}), read strictly; None if absent or not what s3wq writes.

    Flags written before s3wq recorded the frame have none; their traceback is shown as it was.
    """
    frame = doc.get("error_frame")
    if not isinstance(frame, dict):
        return None
    try:
        read = {
            "file": _string(frame, "file")[:MAX_FRAME_FILE_CHARS],
            "line": _whole(frame, "line", 0, 10**9),
            "function": _string(frame, "function")[:MAX_FRAME_FUNCTION_CHARS],
        }
        code = _string(frame, "code", optional=True)
    except Unparseable:
        return None
    return read if code is None else {**read, "code": code[:MAX_FRAME_CODE_CHARS]}

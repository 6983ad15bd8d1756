"""The lock body codec: what s3wq writes comes back equal; anything else -- hostile numbers, deep nesting, junk -- is unparseable, never a crash."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from s3wq.config import FOREIGN_LOCK_TIMEOUT_SECONDS, MAX_LEASE_SECONDS
from s3wq.model import LockState
from s3wq.protocol.bodies import MAX_ATTEMPT, OUTCOMES, STATES, LockBody, Unparseable, load_object, strict_json

text = st.text(max_size=40)
seconds = st.floats(min_value=0, max_value=1e6, allow_nan=False, allow_infinity=False)
bodies = st.builds(
    LockBody,
    owner=text,
    worker_id=text,
    attempt=st.integers(1, MAX_ATTEMPT),
    lease_seconds=st.floats(min_value=1, max_value=MAX_LEASE_SECONDS),
    claimed_at=text,
    budget_seconds=st.none() | seconds,
    state=st.sampled_from(STATES),
    outcome=st.none() | st.sampled_from(OUTCOMES),
    counted=st.booleans(),
    needs_seconds=st.none() | seconds,
    error=st.none() | st.text(max_size=200),
    write_id=text,
)
# Every JSON value, including numbers no s3wq writer produces.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=6),
    max_leaves=20,
)
# Each is refused in every numeric field: not finite, past Python's digit limit, out of range, or not a number.
HOSTILE_NUMBERS = ["1e999", "-1e999", "NaN", "Infinity", "-Infinity", "1" * 5000, "-" + "9" * 400, "1e308", "-1", "true", '"5"', "[]", "{}"]


@given(bodies)
def test_every_body_s3wq_writes_decodes_to_itself(body):
    assert LockBody.decode(body.encode()) == body


@given(st.binary(max_size=300))
@example(b"")
@example(b"\xff\xfe")
@example(b"[" * 100_000)
@example(b'{"a":' * 50_000)
def test_decoding_arbitrary_bytes_never_raises(data):
    result = LockBody.decode(data)
    assert result is None or isinstance(result, LockBody)


@given(json_values)
def test_decoding_any_json_gives_none_or_a_body_within_bounds(value):
    data = json.dumps(value).encode()  # floats nan/inf come out as NaN/Infinity, which must be refused
    result = LockBody.decode(data)
    if result is not None:
        assert math.isfinite(result.lease_seconds) and 0 < result.lease_seconds <= MAX_LEASE_SECONDS
        assert isinstance(result.attempt, int) and 1 <= result.attempt <= MAX_ATTEMPT
        assert result.state in STATES


@pytest.mark.parametrize("field", ["attempt", "lease_seconds", "budget_seconds", "needs_seconds"])
@pytest.mark.parametrize("number", HOSTILE_NUMBERS)
def test_a_hostile_number_in_any_numeric_field_makes_the_lock_unparseable(field, number):
    valid = LockBody(owner="w:1", worker_id="w", attempt=2, lease_seconds=30.0, budget_seconds=10.0, needs_seconds=5.0)
    doc = json.loads(valid.encode())
    text = json.dumps({**doc, field: "PLACEHOLDER"}).replace('"PLACEHOLDER"', number)

    assert LockBody.decode(text.encode()) is None


def test_an_attempt_must_be_a_whole_number():
    doc = json.loads(LockBody(owner="w:1", worker_id="w", attempt=2, lease_seconds=30.0).encode())
    assert LockBody.decode(json.dumps({**doc, "attempt": 2.5}).encode()) is None
    assert LockBody.decode(json.dumps({**doc, "attempt": 2.0}).encode()).attempt == 2


@pytest.mark.parametrize("data", [b"", b"not json", b'{"owner": 1}', b"[1, 2, 3]", b"null", b'"text"', b"{}"])
def test_what_olmocr_or_a_stranger_writes_is_unparseable(data):
    assert LockBody.decode(data) is None


def test_a_lock_from_the_first_format_is_read_with_the_foreign_lease():
    # What s3wq wrote before leases: booleans, no lease, no state.
    first = {
        "owner": "w1:abc",
        "worker_id": "w1",
        "attempt": 2,
        "claimed_at": "2026-11-29T00:00:00.000+00:00",
        "released": False,
        "failed": True,
        "error": "boom",
    }
    decoded = LockBody.decode(json.dumps(first).encode())
    assert (decoded.state, decoded.lease_seconds, decoded.attempt, decoded.error) == (
        LockState.FAILED,
        FOREIGN_LOCK_TIMEOUT_SECONDS,
        2,
        "boom",
    )
    released = LockBody.decode(json.dumps({**first, "failed": False, "released": True}).encode())
    assert (released.state, released.next_attempt) == (LockState.RELEASED, 3)
    held = LockBody.decode(json.dumps({**first, "failed": False}).encode())
    assert held.state == LockState.HELD


@pytest.mark.parametrize(
    "state, counted, expected",
    [(LockState.HELD, False, 4), (LockState.RELEASED, True, 4), (LockState.RELEASED, False, 3), (LockState.FAILED, True, 4)],
    ids=["lost-holder-counts", "counted-release", "uncounted-release", "failed"],
)
def test_the_next_attempt_counts_only_runs_that_used_one_up(state, counted, expected):
    body = LockBody(owner="w:1", worker_id="w", attempt=3, lease_seconds=60, state=state, counted=counted)
    assert body.next_attempt == expected


def test_a_rewrite_keeps_the_claim_and_changes_only_the_write_id_and_what_was_asked():
    body = LockBody(owner="w:1", worker_id="w", attempt=1, lease_seconds=60)
    again = body.rewritten(state=LockState.RELEASED)
    assert (again.owner, again.attempt, again.state) == ("w:1", 1, LockState.RELEASED)
    assert again.write_id != body.write_id and again.encode() != body.encode()


@pytest.mark.parametrize("number", ["1e999", "NaN", "-Infinity", "1" * 5000])
def test_strict_json_refuses_numbers_no_writer_produces(number):
    with pytest.raises(Unparseable):
        strict_json(f'{{"n": {number}}}'.encode())


def test_flags_that_are_empty_or_not_objects_load_as_none():
    assert load_object(b"") is None  # an olmocr done flag
    assert load_object(b"[1]") is None
    assert load_object(b'{"n": 1e999}') is None
    assert load_object(b'{"owner": "w:1"}') == {"owner": "w:1"}

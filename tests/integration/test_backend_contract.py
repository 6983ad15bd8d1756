"""The storage contract of store/base.py, run against every backend: local directory and S3 over HTTP.

S3 twice: as AWS behaves, and as a store that cannot delete on a condition
(LocalStack's S3 answers 501; emulated by the local server for buckets named
``nocd-...``), where the claim protocol releases by rewriting instead.

The single-process tests pin down each operation's result and typed error;
the races start eight real processes at a barrier and check that the atomic
operations (create, replace and delete with an ETag) have exactly one winner,
judged by what the store holds afterwards.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from support import deletes_on_a_condition

from s3wq.errors import ConditionalDeleteUnsupported, ObjectChanged, ObjectExists, ObjectNotFound
from s3wq.protocol.bodies import LockBody
from s3wq.protocol.claims import Claim, ClaimProtocol, Held
from s3wq.store import layout

from . import racing


@pytest.fixture(params=["local", "s3", "s3-without-conditional-delete"])
def workspace(request):
    """Every backend, and S3 without conditional DELETE."""
    name = {"local": "local_workspace", "s3": "s3_workspace"}.get(request.param, "s3_workspace_without_conditional_delete")
    return request.getfixturevalue(name)


# ETags are quoted in S3 and in the local backend alike; this one matches no body.
FOREIGN_ETAG = '"00000000000000000000000000000000"'


def fresh_key(prefix: str = "contract") -> str:
    return f"{prefix}/{uuid.uuid4().hex}"


# --- create / read / exists ----------------------------------------------------


def test_create_stores_body_and_returns_its_etag(backend):
    key = fresh_key()

    etag = backend.create(key, b"first body")

    stored = backend.read(key)
    assert stored.body == b"first body"
    assert stored.etag == etag
    assert backend.exists(key)


def test_create_and_read_an_empty_body(backend):
    # olmocr's locks and done flags are empty objects.
    key = fresh_key()

    etag = backend.create(key, b"")

    assert backend.read(key).body == b""
    assert backend.read(key).etag == etag


def test_create_of_an_existing_key_raises_object_exists_and_keeps_the_first_body(backend):
    key = fresh_key()
    etag = backend.create(key, b"first")

    with pytest.raises(ObjectExists):
        backend.create(key, b"second")

    stored = backend.read(key)
    assert (stored.body, stored.etag) == (b"first", etag)


def test_read_of_a_missing_key_raises_object_not_found(backend):
    with pytest.raises(ObjectNotFound):
        backend.read(fresh_key())


def test_exists_is_false_for_a_missing_key(backend):
    backend.create("contract/present", b"x")

    assert not backend.exists("contract/absent")
    assert not backend.exists("contract/pres")  # a prefix of a key is not a key


def test_a_fresh_object_is_young_by_the_stores_clock(backend):
    key = fresh_key()
    backend.create(key, b"x")

    age = backend.read(key).age_seconds

    assert 0.0 <= age <= 2.0


# --- read_range ----------------------------------------------------------------


def test_read_range_returns_the_bytes_asked_for_fewer_at_the_end_and_none_past_it(backend):
    key = fresh_key()
    etag = backend.create(key, b"0123456789")

    pieces = [backend.read_range(key, start, 4) for start in (0, 4, 8, 10, 50)]

    assert [p.body for p in pieces] == [b"0123", b"4567", b"89", b"", b""]
    assert {p.etag for p in pieces} == {etag, backend.read(key).etag}
    assert all(0.0 <= p.age_seconds <= 2.0 for p in pieces)


def test_read_range_of_an_empty_object_is_empty_with_its_etag(backend):
    key = fresh_key()
    etag = backend.create(key, b"")

    assert (backend.read_range(key, 0, 18).body, backend.read_range(key, 0, 18, etag).etag) == (b"", etag)


def test_read_range_with_the_current_etag_reads_and_with_another_raises_object_changed(backend):
    key = fresh_key()
    old = backend.create(key, b"first version")
    new = backend.replace(key, b"second version", old)

    assert backend.read_range(key, 0, 6, new).body == b"second"
    for start in (0, 100):  # within the object and past its end
        with pytest.raises(ObjectChanged):
            backend.read_range(key, start, 6, old)


def test_read_range_of_a_missing_key_raises_object_not_found(backend):
    for etag in (None, FOREIGN_ETAG):
        with pytest.raises(ObjectNotFound):
            backend.read_range(fresh_key(), 0, 10, etag)


# --- replace -------------------------------------------------------------------


def test_replace_with_the_current_etag_overwrites_and_changes_the_etag(backend):
    key = fresh_key()
    old_etag = backend.create(key, b"old")

    new_etag = backend.replace(key, b"new", old_etag)

    stored = backend.read(key)
    assert stored.body == b"new"
    assert stored.etag == new_etag
    assert new_etag != old_etag


def test_replace_with_a_stale_etag_raises_object_changed_and_keeps_the_body(backend):
    key = fresh_key()
    first_etag = backend.create(key, b"one")
    second_etag = backend.replace(key, b"two", first_etag)

    with pytest.raises(ObjectChanged):
        backend.replace(key, b"three", first_etag)

    stored = backend.read(key)
    assert (stored.body, stored.etag) == (b"two", second_etag)


def test_replace_with_a_foreign_etag_raises_object_changed(backend):
    key = fresh_key()
    backend.create(key, b"kept")

    with pytest.raises(ObjectChanged):
        backend.replace(key, b"lost", FOREIGN_ETAG)

    assert backend.read(key).body == b"kept"


def test_replace_of_a_missing_key_raises_object_not_found_and_creates_nothing(backend):
    key = fresh_key()

    with pytest.raises(ObjectNotFound):
        backend.replace(key, b"body", FOREIGN_ETAG)

    assert not backend.exists(key)


# --- delete --------------------------------------------------------------------


def test_conditional_delete_with_the_current_etag_removes_the_key(workspace, backend):
    key = fresh_key()
    etag = backend.create(key, b"x")

    if not deletes_on_a_condition(workspace):
        with pytest.raises(ConditionalDeleteUnsupported):
            backend.delete(key, etag)
        assert backend.read(key).body == b"x"  # and deleted nothing
        return
    backend.delete(key, etag)

    assert not backend.exists(key)


def test_conditional_delete_with_a_wrong_etag_raises_object_changed_and_keeps_the_key(workspace, backend):
    key = fresh_key()
    old_etag = backend.create(key, b"one")
    backend.replace(key, b"two", old_etag)

    with pytest.raises(ObjectChanged if deletes_on_a_condition(workspace) else ConditionalDeleteUnsupported):
        backend.delete(key, old_etag)

    assert backend.read(key).body == b"two"


def test_conditional_delete_of_a_missing_key_raises_object_not_found(workspace, backend):
    key = fresh_key()

    with pytest.raises(ObjectNotFound if deletes_on_a_condition(workspace) else ConditionalDeleteUnsupported):
        backend.delete(key, FOREIGN_ETAG)

    assert not backend.exists(key)


def test_unconditional_delete_removes_the_key(backend):
    key = fresh_key()
    backend.create(key, b"x")

    backend.delete(key)

    assert not backend.exists(key)


def test_unconditional_delete_of_a_missing_key_succeeds(backend):
    key = fresh_key()

    backend.delete(key)

    assert not backend.exists(key)


def test_a_deleted_key_can_be_created_again(backend):
    key = fresh_key()
    backend.create(key, b"first life")
    backend.delete(key)

    backend.create(key, b"second life")

    assert backend.read(key).body == b"second life"


# --- write ---------------------------------------------------------------------


def test_write_creates_a_missing_key_and_overwrites_an_existing_one(backend):
    key = fresh_key()

    first_etag = backend.write(key, b"first")
    assert backend.read(key).body == b"first"

    second_etag = backend.write(key, b"second")
    stored = backend.read(key)
    assert (stored.body, stored.etag) == (b"second", second_etag)
    assert second_etag != first_etag


# --- list_keys -----------------------------------------------------------------


def test_list_keys_yields_every_matching_key_in_ascending_order(backend):
    keys = [
        "done_flags/done_b2.flag",
        "done_flags/done_a1.flag",
        "done_flags/done_a10.flag",
        "done_flags/done_a2.flag",
        "done_flags/nested/deeper/done_a3.flag",
        "done_flagsX/done_a1.flag",
        "worker_locks/worker_a1.lock",
        "z-last",
        "a-first",
    ]
    for key in keys:
        backend.write(key, b"")

    assert list(backend.list_keys("")) == sorted(keys)
    assert list(backend.list_keys("done_flags/")) == [
        "done_flags/done_a1.flag",
        "done_flags/done_a10.flag",
        "done_flags/done_a2.flag",
        "done_flags/done_b2.flag",
        "done_flags/nested/deeper/done_a3.flag",
    ]
    # A prefix may end inside a name, as S3 prefixes do.
    assert list(backend.list_keys("done_flags/done_a1")) == ["done_flags/done_a1.flag", "done_flags/done_a10.flag"]
    assert list(backend.list_keys("done_flags")) == [k for k in sorted(keys) if k.startswith("done_flags")]


def test_list_keys_of_an_unmatched_prefix_is_empty(backend):
    backend.write("present/key", b"")

    assert list(backend.list_keys("absent/")) == []
    assert list(backend.list_keys("present/key-longer")) == []


def test_list_keys_leaves_out_deleted_keys(backend):
    for name in ("a", "b", "c"):
        backend.write(f"listing/{name}", b"")

    backend.delete("listing/b")

    assert list(backend.list_keys("listing/")) == ["listing/a", "listing/c"]


# --- races between processes ---------------------------------------------------


def test_racing_creates_of_one_key_have_exactly_one_winner_whose_body_is_stored(racers, workspace, backend):
    for round_number in range(5):
        key = fresh_key("race-create")

        outcomes = racers.race(racing.create, workspace, [(key, f"racer {i} round {round_number}".encode()) for i in range(racers.size)])

        winners = [i for i, outcome in enumerate(outcomes) if outcome == racing.WON]
        assert len(winners) == 1, f"round {round_number}: outcomes {outcomes}"
        assert sorted(set(outcomes)) == sorted({racing.WON, "ObjectExists"})
        assert backend.read(key).body == f"racer {winners[0]} round {round_number}".encode()


def test_racing_replaces_with_one_etag_have_exactly_one_winner_whose_body_is_stored(racers, workspace, backend):
    key = fresh_key("race-replace")
    etag = backend.create(key, b"original")

    outcomes = racers.race(racing.replace, workspace, [(key, f"racer {i}".encode(), etag) for i in range(racers.size)])

    winners = [i for i, outcome in enumerate(outcomes) if outcome == racing.WON]
    assert len(winners) == 1, f"outcomes {outcomes}"
    assert set(outcomes) - {racing.WON} == {"ObjectChanged"}
    assert backend.read(key).body == f"racer {winners[0]}".encode()


def test_racing_conditional_deletes_with_one_etag_have_exactly_one_winner(racers, workspace, backend):
    key = fresh_key("race-delete")
    etag = backend.create(key, b"doomed")

    outcomes = racers.race(racing.delete, workspace, [(key, etag)] * racers.size)

    if not deletes_on_a_condition(workspace):
        assert set(outcomes) == {"ConditionalDeleteUnsupported"} and backend.read(key).body == b"doomed"
        return
    assert outcomes.count(racing.WON) == 1, f"outcomes {outcomes}"
    # A loser either saw the object gone or (S3 under overlap) a conflict.
    assert set(outcomes) - {racing.WON} <= {"ObjectNotFound", "ObjectChanged"}
    assert not backend.exists(key)


def wait_until_stale(backend, key: str, lock_timeout: float, deadline_seconds: float = 20.0) -> None:
    """Poll the store until the lock's age *by the store's clock* passes the timeout.

    S3 dates have one-second resolution and the backend subtracts one more
    second, so the wall time this takes varies between two and three seconds.
    """
    give_up = time.monotonic() + deadline_seconds
    while backend.read(key).age_seconds <= lock_timeout:
        assert time.monotonic() < give_up, f"lock {key} never became stale"
        time.sleep(0.2)


def test_racing_takeovers_of_a_stale_lock_have_exactly_one_winner(racers, workspace, backend):
    lock_timeout = 1.0
    hash_ = layout.group_hash([f"s3://inputs/{uuid.uuid4().hex}.pdf"])
    original = ClaimProtocol(backend, worker_id="parent", lease_seconds=lock_timeout).claim(hash_)
    assert isinstance(original, Claim) and original.attempt == 1
    wait_until_stale(backend, layout.lock_key(hash_), lock_timeout)

    outcomes = racers.race(racing.claim, workspace, [(hash_, f"r{i}", lock_timeout) for i in range(racers.size)])

    claims = [(i, outcome) for i, outcome in enumerate(outcomes) if isinstance(outcome, Claim)]
    assert len(claims) == 1, f"outcomes {outcomes}"
    winner_index, winner = claims[0]
    assert winner.reclaimed is True
    assert winner.attempt == 2
    assert all(isinstance(outcome, Held) for i, outcome in enumerate(outcomes) if i != winner_index)
    stored = backend.read(layout.lock_key(hash_))
    lock = LockBody.decode(stored.body)
    assert lock is not None
    assert (lock.worker_id, lock.owner, lock.attempt) == (f"r{winner_index}", winner.owner, 2)
    assert stored.etag == winner.etag
    assert json.loads(stored.body)["state"] == "held"


def test_racing_takeovers_of_a_released_lock_have_exactly_one_winner(racers, workspace, backend):
    hash_ = layout.group_hash([f"s3://inputs/{uuid.uuid4().hex}.pdf"])
    protocol = ClaimProtocol(backend, worker_id="parent", lease_seconds=600)
    original = protocol.claim(hash_)
    assert protocol.hand_back(original, "error", counted=True, error="RuntimeError: first attempt failed")

    outcomes = racers.race(racing.claim, workspace, [(hash_, f"r{i}", 600) for i in range(racers.size)])

    claims = [(i, outcome) for i, outcome in enumerate(outcomes) if isinstance(outcome, Claim)]
    assert len(claims) == 1, f"outcomes {outcomes}"
    winner_index, winner = claims[0]
    assert (winner.reclaimed, winner.attempt) == (False, 2)  # a hand-back is not a stale takeover, but it used an attempt
    lock = LockBody.decode(backend.read(layout.lock_key(hash_)).body)
    assert (lock.worker_id, lock.owner, lock.attempt, lock.state) == (f"r{winner_index}", winner.owner, 2, "held")


# --- releasing: deleted where the store can, rewritten where it cannot ---------


def test_a_release_frees_the_group_for_exactly_one_next_claimant(racers, workspace, backend):
    hash_ = layout.group_hash([f"s3://inputs/{uuid.uuid4().hex}.pdf"])
    protocol = ClaimProtocol(backend, worker_id="parent", lease_seconds=600)
    original = protocol.claim(hash_)

    assert protocol.release(original) is True

    if deletes_on_a_condition(workspace):
        assert not backend.exists(layout.lock_key(hash_))
    else:
        lock = LockBody.decode(backend.read(layout.lock_key(hash_)).body)
        assert (lock.owner, lock.state, lock.outcome, lock.counted) == (original.owner, "released", "finished", False)
    outcomes = racers.race(racing.claim, workspace, [(hash_, f"r{i}", 600) for i in range(racers.size)])
    claims = [outcome for outcome in outcomes if isinstance(outcome, Claim)]
    assert len(claims) == 1 and all(isinstance(o, Held) for o in outcomes if not isinstance(o, Claim)), f"outcomes {outcomes}"
    assert claims[0].attempt == 1  # a release is not an attempt


def test_a_release_after_a_takeover_changes_nothing_of_the_takers(workspace, backend):
    hash_ = layout.group_hash([f"s3://inputs/{uuid.uuid4().hex}.pdf"])
    slow = ClaimProtocol(backend, worker_id="slow", lease_seconds=1.0)
    stale_claim = slow.claim(hash_)
    wait_until_stale(backend, layout.lock_key(hash_), 1.0)
    taker = ClaimProtocol(backend, worker_id="taker", lease_seconds=600).claim(hash_)
    assert isinstance(taker, Claim)

    assert slow.release(stale_claim) is False

    stored = backend.read(layout.lock_key(hash_))
    assert stored.etag == taker.etag and LockBody.decode(stored.body).owner == taker.owner

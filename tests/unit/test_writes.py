"""The conditional writes of s3wq.protocol.writes: a write applied whose response was lost still counts as ours.

The store below applies a write and then answers as the SDK's retry of it
would (the retry fails its condition against our own first write), which is
what S3 does when a response is lost on the way back. Another writer's
object must never pass for ours, and ours never for another's.
"""

from __future__ import annotations

import pytest
from memory_store import MemoryBackend

from s3wq.errors import ObjectChanged, ObjectExists, ObjectNotFound, WriteConflict
from s3wq.protocol import writes

KEY = "worker_locks/worker_x.lock"


class LosesResponses(MemoryBackend):
    """Applies each write, then answers it as its retry would: the condition failed against our own write."""

    def create(self, key, body):
        super().create(key, body)
        raise ObjectExists(key)

    def replace(self, key, body, etag):
        super().replace(key, body, etag)
        raise ObjectChanged(key)

    def delete(self, key, etag=None):
        super().delete(key, etag)
        raise ObjectNotFound(key)


def ours(data: bytes):
    return lambda found: found.body == data


def test_a_create_whose_response_was_lost_landed():
    backend = LosesResponses()
    landed = writes.create(backend, KEY, b"mine", is_ours=ours(b"mine"), rounds=1)
    assert isinstance(landed, writes.Landed)
    assert landed.etag == backend.read(KEY).etag and landed.found.body == b"mine"


def test_a_create_that_found_another_writers_object_is_refused_with_what_it_found():
    backend = MemoryBackend()
    backend.create(KEY, b"theirs")
    refused = writes.create(backend, KEY, b"mine", is_ours=ours(b"mine"), rounds=2)
    assert isinstance(refused, writes.Refused)
    assert refused.found.body == b"theirs" and refused.found.etag == backend.read(KEY).etag
    assert backend.read(KEY).body == b"theirs"


def test_a_create_whose_key_vanishes_each_round_says_so_and_tries_each_round():
    class Vanishing(MemoryBackend):
        creates = 0

        def create(self, key, body):
            self.creates += 1
            raise ObjectExists(key)  # another's object, deleted again before we read it

    backend = Vanishing()
    assert writes.create(backend, KEY, b"mine", is_ours=ours(b"mine"), rounds=3) is None
    assert backend.creates == 3


def test_a_replace_whose_response_was_lost_landed():
    backend = LosesResponses()
    etag = MemoryBackend.create(backend, KEY, b"before")
    assert writes.replace(backend, KEY, b"after", etag) == backend.read(KEY).etag
    assert backend.read(KEY).body == b"after"


def test_a_replace_that_another_write_beat_gives_up_and_leaves_it():
    backend = MemoryBackend()
    etag = backend.create(KEY, b"before")
    backend.replace(KEY, b"theirs", etag)
    assert writes.replace(backend, KEY, b"mine", etag) is None
    assert backend.read(KEY).body == b"theirs"


def test_a_replace_of_a_key_that_is_gone_gives_up():
    backend = MemoryBackend()
    etag = backend.create(KEY, b"before")
    backend.delete(KEY)
    assert writes.replace(backend, KEY, b"mine", etag) is None
    assert not backend.exists(KEY)


def test_a_conflict_on_an_unchanged_object_is_tried_again(monkeypatch):
    # A 409 for a write of ours still in flight that then did not apply: the object is as we read it.
    monkeypatch.setattr(writes, "_CONFLICT_SETTLE_SECONDS", 0.0)

    class ConflictsOnce(MemoryBackend):
        conflicted = False

        def replace(self, key, body, etag):
            if not self.conflicted:
                self.conflicted = True
                raise WriteConflict(key)
            return super().replace(key, body, etag)

    backend = ConflictsOnce()
    etag = backend.create(KEY, b"before")
    assert writes.replace(backend, KEY, b"mine", etag) == backend.read(KEY).etag
    assert backend.read(KEY).body == b"mine"


@pytest.mark.parametrize("backend_type", [MemoryBackend, LosesResponses])
def test_a_delete_of_our_version_is_done_whether_or_not_its_response_came_back(backend_type):
    backend = backend_type()
    etag = MemoryBackend.create(backend, KEY, b"mine")
    assert writes.delete(backend, KEY, etag) is True
    assert not backend.exists(KEY)


def test_a_delete_of_a_version_another_wrote_over_is_refused_and_leaves_it():
    backend = MemoryBackend()
    etag = backend.create(KEY, b"mine")
    backend.replace(KEY, b"theirs", etag)
    assert writes.delete(backend, KEY, etag) is False
    assert backend.read(KEY).body == b"theirs"

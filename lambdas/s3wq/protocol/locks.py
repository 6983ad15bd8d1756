"""A group's lock as a reader finds it: its body, its age by the store's clock, the lease it is judged by.

The claim path and the operator's commands (status, inspect, the repairs)
read locks through :class:`LockReading`, so a lock is live, stale, released
or failed by one judgement everywhere: a count never calls a lock live that
a claim would take over, nor the other way round.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from s3wq.config import FOREIGN_LOCK_TIMEOUT_SECONDS
from s3wq.errors import ObjectNotFound
from s3wq.model import LockState, Outcome
from s3wq.protocol.bodies import LockBody
from s3wq.protocol.time_rules import lease_ran_out
from s3wq.store import MAX_PARALLEL_REQUESTS, Backend, StoredObject, layout


@dataclass(frozen=True)
class LockReading:
    """A lock as a reader sees it now."""

    body: LockBody | None  # None: a lock s3wq cannot parse (olmocr's)
    age_seconds: float
    lease_seconds: float
    etag: str

    @classmethod
    def of(cls, stored: StoredObject, *, foreign_lock_timeout: float = FOREIGN_LOCK_TIMEOUT_SECONDS) -> LockReading:
        """The lock object ``stored``, judged by its holder's own lease (a lock s3wq cannot parse: by ``foreign_lock_timeout``)."""
        body = LockBody.decode(stored.body)
        lease = foreign_lock_timeout if body is None else body.lease_seconds
        return cls(body, stored.age_seconds, lease, stored.etag)

    @property
    def failed(self) -> bool:
        return self.body is not None and self.body.state == LockState.FAILED

    @property
    def released(self) -> bool:
        return self.body is not None and self.body.state == LockState.RELEASED

    @property
    def finished(self) -> bool:
        """Released by a holder whose group is finished (done or failed), where the store cannot delete on a condition (see ClaimProtocol.release)."""
        return self.released and self.body is not None and self.body.outcome == Outcome.FINISHED

    @property
    def held(self) -> bool:
        """Written by a holder that has not given it up: an s3wq lock in state held, or a foreign one (olmocr's say nothing else)."""
        return self.body is None or self.body.held

    @property
    def stale(self) -> bool:
        """Held, by a holder whose lease ran out: anyone may take it over."""
        return self.held and lease_ran_out(self.age_seconds, self.lease_seconds)

    @property
    def live(self) -> bool:
        """Held by a holder whose lease has not run out."""
        return self.held and not self.stale

    @property
    def stale_in(self) -> float:
        """Seconds until the store will call this lock stale, unless its holder renews it."""
        return max(0.0, self.lease_seconds - self.age_seconds)


def read_lock(backend: Backend, hash_: str, *, foreign_lock_timeout: float = FOREIGN_LOCK_TIMEOUT_SECONDS) -> LockReading | None:
    """The group's lock now; None if it has none."""
    try:
        stored = backend.read(layout.lock_key(hash_))
    except ObjectNotFound:
        return None
    return LockReading.of(stored, foreign_lock_timeout=foreign_lock_timeout)


def read_locks(
    backend: Backend, hashes: list[str], *, foreign_lock_timeout: float = FOREIGN_LOCK_TIMEOUT_SECONDS
) -> dict[str, LockReading]:
    """The current state of each group's lock (groups whose lock vanished meanwhile are left out)."""
    if not hashes:
        return {}
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_REQUESTS, len(hashes))) as pool:
        states = pool.map(lambda h: read_lock(backend, h, foreign_lock_timeout=foreign_lock_timeout), hashes)
        return {h: s for h, s in zip(hashes, states) if s is not None}

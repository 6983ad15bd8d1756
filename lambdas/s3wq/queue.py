"""The claim protocol and the worker loop.

A group is worked on only by the holder of its lock,
``worker_locks/worker_<hash>.lock``:

1. ``create`` the lock (``If-None-Match: *``). Exactly one of any number of
   racing workers succeeds.
2. If the lock exists, read it. It may be taken over only if it is *stale*
   (older than the lock timeout by the store's own clock) or its holder
   *released* it after a failed attempt. The takeover is a ``replace`` with
   ``If-Match`` on the ETag just read, so of several reclaimers exactly one
   wins. A lock body that cannot be parsed counts as held until stale.
3. Holding the lock, check the done flag: a holder that finished writes its
   done flag *before* deleting its lock, so a lock taken after that delete
   always sees the flag.
4. Process, then ``create`` the done flag (a second completion is recognised,
   not an error) and delete the lock with ``If-Match`` on our own ETag, so a
   worker never deletes a lock it no longer owns.

Every lock body carries a per-claim owner token. When a conditional write's
response is lost and the SDK retries it, the retry loses to our own first
write; reading the body back and finding our token tells us we hold it.

Guarantees: no two live workers hold a group (as long as a worker stops
within its time limit and the lock timeout is at least that limit);
processing is at-least-once (a worker killed mid-group is redone after its
lock goes stale); completion is marked exactly once.
"""

from __future__ import annotations

import json
import logging
import random
import time
import traceback
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Callable

from . import layout
from .backends import Backend
from .config import WorkerSettings
from .errors import BadInput, ObjectChanged, ObjectExists, ObjectNotFound
from .index import Group, SegmentRef, WorkIndex
from .processors import Processor, ProcessorContext

log = logging.getLogger("s3wq")

# A segment's done flags are listed (instead of checked one by one) when the
# listing is expected to cost at most one request per this many groups.
_LISTING_GROUPS_PER_PAGE = 50
_LIST_PAGE = 1000


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class LockBody:
    owner: str
    worker_id: str
    attempt: int
    claimed_at: str
    released: bool = False
    error: str | None = None

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> "LockBody | None":
        """The parsed body, or None for anything else (an olmocr lock is empty)."""
        try:
            doc = json.loads(data)
            return cls(
                owner=str(doc["owner"]),
                worker_id=str(doc["worker_id"]),
                attempt=int(doc["attempt"]),
                claimed_at=str(doc["claimed_at"]),
                released=bool(doc.get("released", False)),
                error=None if doc.get("error") is None else str(doc["error"]),
            )
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class Claim:
    hash: str
    etag: str
    attempt: int
    reclaimed: bool
    owner: str


@dataclass(frozen=True)
class Held:
    """Someone else holds the lock; it may be taken over in ``stale_in`` seconds at the latest."""

    stale_in: float


@dataclass
class WorkerReport:
    worker_id: str
    processed: int = 0
    failed: int = 0
    conflicts: int = 0
    reclaimed: int = 0
    already_done: int = 0
    retried: int = 0
    lost_locks: int = 0
    stopped_reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


class ClaimProtocol:
    """Lock, complete and release one group; every step is one conditional request."""

    def __init__(self, backend: Backend, *, worker_id: str, lock_timeout: float, max_attempts: int):
        self.backend = backend
        self.worker_id = worker_id
        self.lock_timeout = lock_timeout
        self.max_attempts = max_attempts

    def _new_body(self, attempt: int) -> LockBody:
        return LockBody(owner=f"{self.worker_id}:{uuid.uuid4().hex}", worker_id=self.worker_id, attempt=attempt, claimed_at=_now_iso())

    def claim(self, hash_: str) -> Claim | Held:
        key = layout.lock_key(hash_)
        body = self._new_body(attempt=1)
        # Two rounds: the lock can vanish between our failed create and our read.
        for _ in range(2):
            try:
                etag = self.backend.create(key, body.encode())
                return Claim(hash_, etag, body.attempt, reclaimed=False, owner=body.owner)
            except ObjectExists:
                pass
            try:
                current = self.backend.read(key)
            except ObjectNotFound:
                continue
            existing = LockBody.decode(current.body)
            if existing is not None and existing.owner == body.owner:
                return Claim(hash_, current.etag, existing.attempt, reclaimed=False, owner=body.owner)
            stale = current.age_seconds > self.lock_timeout
            released = existing is not None and existing.released
            if not (stale or released):
                return Held(stale_in=max(0.0, self.lock_timeout - current.age_seconds))
            # An unreadable or empty (olmocr) lock carries no attempt count; a
            # stale one still cost its holder an attempt.
            previous = existing.attempt if existing is not None else 1
            takeover = self._new_body(attempt=previous + 1)
            try:
                etag = self.backend.replace(key, takeover.encode(), current.etag)
            except (ObjectChanged, ObjectNotFound):
                if self._holds(key, takeover.owner):
                    return self._reread_claim(hash_, key, takeover)
                return Held(stale_in=self.lock_timeout)
            return Claim(hash_, etag, takeover.attempt, reclaimed=stale and not released, owner=takeover.owner)
        return Held(stale_in=0.0)

    def _holds(self, key: str, owner: str) -> bool:
        try:
            body = LockBody.decode(self.backend.read(key).body)
        except ObjectNotFound:
            return False
        return body is not None and body.owner == owner

    def _reread_claim(self, hash_: str, key: str, body: LockBody) -> Claim:
        current = self.backend.read(key)
        return Claim(hash_, current.etag, body.attempt, reclaimed=True, owner=body.owner)

    def is_done(self, hash_: str) -> bool:
        return self.backend.exists(layout.done_key(hash_))

    def is_failed(self, hash_: str) -> bool:
        return self.backend.exists(layout.failed_key(hash_))

    def mark_done(self, claim: Claim) -> bool:
        """Write the done flag; False if one was already there (a second completion)."""
        doc = {"worker_id": self.worker_id, "attempt": claim.attempt, "finished_at": _now_iso()}
        try:
            self.backend.create(layout.done_key(claim.hash), json.dumps(doc).encode("utf-8"))
            return True
        except ObjectExists:
            return False

    def mark_failed(self, claim: Claim, group: Group, error: str) -> None:
        doc = {
            "hash": group.hash,
            "paths": list(group.paths),
            "attempts": claim.attempt,
            "error": error,
            "worker_id": self.worker_id,
            "failed_at": _now_iso(),
        }
        try:
            self.backend.create(layout.failed_key(claim.hash), json.dumps(doc, ensure_ascii=False).encode("utf-8"))
        except ObjectExists:
            pass  # another holder already recorded this group's failure

    def next_attempt(self, claim: Claim, error: str) -> Claim | None:
        """Keep the lock for another attempt, recording the count first so a crash still uses it up."""
        body = LockBody(owner=claim.owner, worker_id=self.worker_id, attempt=claim.attempt + 1, claimed_at=_now_iso(), error=error)
        try:
            etag = self.backend.replace(layout.lock_key(claim.hash), body.encode(), claim.etag)
        except (ObjectChanged, ObjectNotFound):
            return None
        return Claim(claim.hash, etag, body.attempt, reclaimed=claim.reclaimed, owner=claim.owner)

    def release_for_retry(self, claim: Claim, error: str) -> bool:
        """Hand the group back after a failed attempt, keeping its attempt count; False if we had lost the lock."""
        body = LockBody(owner=claim.owner, worker_id=self.worker_id, attempt=claim.attempt, claimed_at=_now_iso(), released=True, error=error)
        try:
            self.backend.replace(layout.lock_key(claim.hash), body.encode(), claim.etag)
            return True
        except (ObjectChanged, ObjectNotFound):
            return False

    def release(self, claim: Claim) -> bool:
        """Delete our lock only if it is still ours; False if it had been taken over or removed."""
        try:
            self.backend.delete(layout.lock_key(claim.hash), claim.etag)
            return True
        except ObjectChanged:
            return False
        except ObjectNotFound:
            # Our own earlier delete whose response was lost, or an operator's cleanup.
            return True


def _error_text(exc: BaseException) -> str:
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return last[:2000]


class Worker:
    """Drain the queue until it is empty or the time budget is spent."""

    def __init__(
        self,
        backend: Backend,
        processor: Processor,
        settings: WorkerSettings,
        *,
        worker_id: str | None = None,
        remaining_time: Callable[[], float] | None = None,
        seed: int | None = None,
    ):
        self.backend = backend
        self.processor = processor
        self.settings = settings
        self.worker_id = worker_id or f"w-{uuid.uuid4().hex[:8]}"
        started = time.monotonic()
        self.remaining_time = remaining_time or (lambda: settings.time_limit - (time.monotonic() - started))
        # Different workers start at different places: a per-worker shuffle of
        # segments and of groups within them keeps collisions rare.
        self.rng = random.Random(seed if seed is not None else self.worker_id)
        self.protocol = ClaimProtocol(
            backend, worker_id=self.worker_id, lock_timeout=settings.effective_lock_timeout, max_attempts=settings.max_attempts
        )
        self.index = WorkIndex(backend)
        self.report = WorkerReport(worker_id=self.worker_id)
        self.longest_group_seconds = 0.0
        self._stale_at: dict[str, float] = {}

    def has_time(self) -> bool:
        return self.remaining_time() >= self.settings.effective_safety_margin + self.longest_group_seconds

    def run(self) -> WorkerReport:
        refs = self.index.segment_refs()
        total_groups = sum(r.groups or 0 for r in refs)
        self.rng.shuffle(refs)
        waiting: dict[str, tuple[Group, bool]] = {}
        for ref in refs:
            if not self.has_time():
                self.report.stopped_reason = "time_limit"
                return self.report
            listed = self._listing_worthwhile(ref, total_groups)
            groups = self._pending_groups(ref, listed)
            for group in groups:
                if not self.has_time():
                    self.report.stopped_reason = "time_limit"
                    return self.report
                outcome = self._work_on(group, checked_failed=listed)
                if isinstance(outcome, Held):
                    waiting[group.hash] = (group, listed)
        self._drain_waiting(waiting)
        return self.report

    def _listing_worthwhile(self, ref: SegmentRef, total_groups: int) -> bool:
        if ref.groups is None:
            return True
        expected_flags = total_groups / (16 ** len(ref.prefix))
        return expected_flags / _LIST_PAGE <= max(1.0, ref.groups / _LISTING_GROUPS_PER_PAGE)

    def _listed_hashes(self, prefix: str, hash_prefix: str, suffix: str) -> set[str]:
        found = set()
        for key in self.backend.list_keys(prefix + hash_prefix):
            hash_ = layout.hash_from_key(key, prefix, suffix)
            if hash_ is not None:
                found.add(hash_)
        return found

    def _pending_groups(self, ref: SegmentRef, listed: bool) -> list[Group]:
        groups = self.index.load(ref.key)
        if listed:
            finished = self._listed_hashes(layout.DONE_PREFIX, ref.prefix, layout.DONE_SUFFIX)
            finished |= self._listed_hashes(layout.FAILED_PREFIX, ref.prefix, layout.FAILED_SUFFIX)
            groups = [g for g in groups if g.hash not in finished]
        self.rng.shuffle(groups)
        return groups

    def _drain_waiting(self, waiting: dict[str, tuple[Group, bool]]) -> None:
        """Come back to groups others held: they may finish, release or go stale.

        Stop early when every remaining lock will still be live at our
        deadline: waiting for it would only burn the invocation's time, and
        the next Map round picks up whatever its holder leaves behind.
        """
        pause = 0.2
        while waiting:
            soonest = min(self._stale_at.get(h, 0.0) for h in waiting) - time.monotonic()
            if self.remaining_time() - max(0.0, soonest) < self.settings.effective_safety_margin + self.longest_group_seconds:
                self.report.stopped_reason = "locked_by_others"
                return
            # Poll with backoff, but never past the moment a lock goes stale.
            time.sleep(max(0.0, min(pause, soonest)))
            pause = min(pause * 2, 5.0)
            for hash_, (group, _listed) in list(waiting.items()):
                if not self.has_time():
                    self.report.stopped_reason = "time_limit"
                    return
                # A HEAD is cheaper than a lock round trip, and most held
                # groups are simply finished by their holder.
                if self.protocol.is_done(hash_):
                    del waiting[hash_]
                    continue
                outcome = self._work_on(group, checked_failed=False)
                if not isinstance(outcome, Held):
                    del waiting[hash_]
        self.report.stopped_reason = "queue_empty"

    def _work_on(self, group: Group, *, checked_failed: bool) -> str | Held:
        claimed = self.protocol.claim(group.hash)
        if isinstance(claimed, Held):
            self.report.conflicts += 1
            self._stale_at[group.hash] = time.monotonic() + claimed.stale_in
            return claimed
        if claimed.reclaimed:
            self.report.reclaimed += 1
        if self.protocol.is_done(group.hash) or (not checked_failed and self.protocol.is_failed(group.hash)):
            self.report.already_done += 1
            self._release(claimed)
            return "skipped"
        return self._attempt(group, claimed)

    def _release(self, claim: Claim) -> None:
        if not self.protocol.release(claim):
            self.report.lost_locks += 1
            log.warning("lock on %s was taken over before release", claim.hash)

    def _attempt(self, group: Group, claim: Claim) -> str:
        while True:
            if claim.attempt > self.settings.max_attempts:
                self.protocol.mark_failed(claim, group, "worker lost (killed or timed out) on every attempt")
                self.report.failed += 1
                self._release(claim)
                return "failed"
            remaining = self.remaining_time()
            ctx = ProcessorContext(
                worker_id=self.worker_id, attempt=claim.attempt, deadline=time.time() + remaining, group=group, backend=self.backend
            )
            started = time.monotonic()
            try:
                self.processor(group, ctx)
            except Exception as exc:  # a processor failure is an attempt, never a crash of the worker
                error = _error_text(exc)
                self.longest_group_seconds = max(self.longest_group_seconds, time.monotonic() - started)
                log.warning("group %s attempt %d failed: %s", group.hash, claim.attempt, error)
                if claim.attempt >= self.settings.max_attempts:
                    self.protocol.mark_failed(claim, group, error)
                    self.report.failed += 1
                    self._release(claim)
                    return "failed"
                self.report.retried += 1
                if not self.has_time():
                    # Out of time: hand the group back with its count so that
                    # another worker can retry it without waiting for staleness.
                    if not self.protocol.release_for_retry(claim, error):
                        self.report.lost_locks += 1
                    return "released"
                next_claim = self.protocol.next_attempt(claim, error)
                if next_claim is None:
                    self.report.lost_locks += 1
                    return "released"
                claim = next_claim
                continue
            self.longest_group_seconds = max(self.longest_group_seconds, time.monotonic() - started)
            if self.protocol.mark_done(claim):
                self.report.processed += 1
            else:
                self.report.already_done += 1
            self._release(claim)
            return "done"


def queue_status(backend: Backend) -> dict:
    """Counts for a workspace: groups, paths, done, failed, locked, pending, remaining."""
    index = WorkIndex(backend)
    paths_by_hash: dict[str, int] = {}
    for group in index.iter_groups():
        paths_by_hash[group.hash] = len(group.paths)
    hashes = set(paths_by_hash)

    def listed(prefix: str, suffix: str) -> set[str]:
        return {h for k in backend.list_keys(prefix) if (h := layout.hash_from_key(k, prefix, suffix)) in hashes}

    done = listed(layout.DONE_PREFIX, layout.DONE_SUFFIX)
    failed = listed(layout.FAILED_PREFIX, layout.FAILED_SUFFIX) - done
    locked = listed(layout.LOCKS_PREFIX, layout.LOCK_SUFFIX) - done - failed
    groups = len(hashes)
    return {
        "groups": groups,
        "paths": sum(paths_by_hash.values()),
        "done": len(done),
        "failed": len(failed),
        "locked": len(locked),
        "pending": groups - len(done) - len(failed) - len(locked),
        "remaining": groups - len(done) - len(failed),
    }


def requeue_failed(backend: Backend, hashes: list[str] | None = None) -> list[str]:
    """Delete failed flags so those groups are claimed again from attempt 1; return their hashes.

    With ``hashes``, every one must name a failed group, checked before
    anything is deleted.
    """
    failed = {
        h for k in backend.list_keys(layout.FAILED_PREFIX) if (h := layout.hash_from_key(k, layout.FAILED_PREFIX, layout.FAILED_SUFFIX))
    }
    if hashes is not None:
        missing = [layout.check_hash(h) for h in hashes if h not in failed]
        if missing:
            raise BadInput(f"not a failed group: {missing[0]}")
        failed = set(hashes)
    for hash_ in sorted(failed):
        backend.delete(layout.failed_key(hash_))
    return sorted(failed)

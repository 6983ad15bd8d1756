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
   worker never deletes a lock it no longer owns. A group that used up its
   attempts gets a failed flag and keeps its lock, marked failed, so nobody
   claims it again.

Every lock body carries a per-claim owner token. When a conditional write's
response is lost and the SDK retries it, the retry loses to our own first
write; reading the body back and finding our token tells us we hold it.

Guarantees: no two live workers hold a group (as long as a worker stops
within its time limit and the lock timeout is at least that limit);
processing is at-least-once (a worker killed mid-group is redone after its
lock goes stale); completion is marked exactly once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
import traceback
import uuid
from collections import deque
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
    released: bool = False  # handed back after a failed attempt: take it over at once
    failed: bool = False  # attempts used up: never take it over (see ClaimProtocol.finalize_failed)
    error: str | None = None
    # Unique to this write, so that finding these exact bytes stored means
    # this write was applied (its response lost), never an equal later one.
    write_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])

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
                failed=bool(doc.get("failed", False)),
                error=None if doc.get("error") is None else str(doc["error"]),
                write_id=str(doc.get("write_id", "")),
            )
        except (ValueError, KeyError, TypeError, RecursionError):
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


@dataclass(frozen=True)
class Finished:
    """The lock says the group failed for good; there is nothing to claim."""


@dataclass
class WorkerReport:
    worker_id: str
    processed: int = 0
    failed: int = 0
    conflicts: int = 0
    reclaimed: int = 0
    already_finished: int = 0
    retried: int = 0
    lost_locks: int = 0
    listings: int = 0
    stopped_reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


class ClaimProtocol:
    """Lock, complete and release one group; every step is one conditional request."""

    def __init__(self, backend: Backend, *, worker_id: str, lock_timeout: float):
        self.backend = backend
        self.worker_id = worker_id
        self.lock_timeout = lock_timeout

    def _new_body(self, attempt: int) -> LockBody:
        return LockBody(owner=f"{self.worker_id}:{uuid.uuid4().hex}", worker_id=self.worker_id, attempt=attempt, claimed_at=_now_iso())

    def claim(self, hash_: str) -> Claim | Held | Finished:
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
            if existing is not None and existing.failed:
                return Finished()
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
                    return Claim(hash_, self.backend.read(key).etag, takeover.attempt, reclaimed=stale, owner=takeover.owner)
                return Held(stale_in=self.lock_timeout)
            return Claim(hash_, etag, takeover.attempt, reclaimed=stale and not released, owner=takeover.owner)
        return Held(stale_in=0.0)

    def _holds(self, key: str, owner: str) -> bool:
        try:
            body = LockBody.decode(self.backend.read(key).body)
        except ObjectNotFound:
            return False
        return body is not None and body.owner == owner

    def is_done(self, hash_: str) -> bool:
        return self.backend.exists(layout.done_key(hash_))

    def is_failed(self, hash_: str) -> bool:
        return self.backend.exists(layout.failed_key(hash_))

    def mark_done(self, claim: Claim) -> bool:
        """Write the done flag; False if another completion had written it first.

        The flag names the claim's owner, so that our own write whose response
        was lost (the SDK's retry then finds the flag) still counts as ours.
        """
        key = layout.done_key(claim.hash)
        doc = {"worker_id": self.worker_id, "attempt": claim.attempt, "owner": claim.owner, "finished_at": _now_iso()}
        try:
            self.backend.create(key, json.dumps(doc).encode("utf-8"))
            return True
        except ObjectExists:
            pass
        try:
            existing = json.loads(self.backend.read(key).body or b"{}")
        except (ValueError, ObjectNotFound):
            return False  # an olmocr flag (empty) or one being replaced: not ours
        return isinstance(existing, dict) and existing.get("owner") == claim.owner

    def finalize_failed(self, claim: Claim, group: Group, error: str, *, attempts: int | None = None) -> bool:
        """Record that the group used up its attempts; False if we had lost the lock meanwhile.

        The failed flag is the record. The lock is then kept, marked failed,
        instead of deleted: a worker whose listing of failed flags predates
        this failure would otherwise find the lock free and start the group
        over from attempt 1. (A lifecycle rule may expire the lock after a
        day; by then every worker has re-listed.)
        """
        doc = {
            "hash": group.hash,
            "paths": list(group.paths),
            "attempts": claim.attempt if attempts is None else attempts,
            "error": error,
            "worker_id": self.worker_id,
            "failed_at": _now_iso(),
        }
        try:
            self.backend.create(layout.failed_key(claim.hash), json.dumps(doc, ensure_ascii=False).encode("utf-8"))
        except ObjectExists:
            pass  # a previous holder recorded it and died before marking the lock
        body = LockBody(claim.owner, self.worker_id, claim.attempt, _now_iso(), failed=True, error=error)
        return self._rewrite(claim, body) is not None

    def _rewrite(self, claim: Claim, body: LockBody) -> str | None:
        """Replace our own lock's body; the new ETag, or None if the lock is no longer ours."""
        key, data = layout.lock_key(claim.hash), body.encode()
        try:
            return self.backend.replace(key, data, claim.etag)
        except (ObjectChanged, ObjectNotFound):
            pass
        # The SDK retries a request whose response was lost; if the first try
        # was applied, the retry fails its If-Match against our own write.
        try:
            current = self.backend.read(key)
        except ObjectNotFound:
            return None
        return current.etag if current.body == data else None

    def next_attempt(self, claim: Claim, error: str) -> Claim | None:
        """Keep the lock for another attempt, recording the count first so a crash still uses it up."""
        body = LockBody(claim.owner, self.worker_id, claim.attempt + 1, _now_iso(), error=error)
        etag = self._rewrite(claim, body)
        return None if etag is None else Claim(claim.hash, etag, body.attempt, reclaimed=claim.reclaimed, owner=claim.owner)

    def release_for_retry(self, claim: Claim, error: str) -> bool:
        """Hand the group back after a failed attempt, keeping its attempt count; False if we had lost the lock."""
        body = LockBody(claim.owner, self.worker_id, claim.attempt, _now_iso(), released=True, error=error)
        return self._rewrite(claim, body) is not None

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


class WorkerObserver:
    """Hooks for logging and metrics (the Lambda handler plugs Powertools in); all no-ops here."""

    def group_started(self, group: Group, claim: Claim) -> None: ...

    def group_finished(self, group: Group, claim: Claim, outcome: str, seconds: float) -> None: ...

    def conflict(self, hash_: str) -> None: ...


def start_position(worker_id: str) -> float:
    """A stable, uniformly spread place in [0, 1) for a worker that does not know its index."""
    digest = hashlib.sha1(worker_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass
class _SegmentView:
    """A loaded segment and what this worker knows of its finished groups."""

    ref: SegmentRef
    groups: list[Group]
    listed: bool
    finished: set[str] = field(default_factory=set)


class Worker:
    """Drain the queue until it is empty or the time budget is spent.

    Workers spread out instead of all starting at the top: worker ``i`` of
    ``n`` starts ``i/n`` of the way through the index (a worker that does not
    know its index picks a place from its id) and walks on from there,
    wrapping around; after running into a peer it jumps to a random place.
    Each then mostly finds groups nobody else has touched.
    """

    def __init__(
        self,
        backend: Backend,
        processor: Processor,
        settings: WorkerSettings,
        *,
        worker_id: str | None = None,
        position: float | None = None,
        remaining_time: Callable[[], float] | None = None,
        observer: WorkerObserver | None = None,
    ):
        self.backend = backend
        self.processor = processor
        self.settings = settings
        self.worker_id = worker_id or f"w-{uuid.uuid4().hex[:8]}"
        self.position = start_position(self.worker_id) if position is None else position % 1.0
        self.rng = random.Random(self.worker_id)
        started = time.monotonic()
        self.remaining_time = remaining_time or (lambda: settings.time_limit - (time.monotonic() - started))
        self.observer = observer or WorkerObserver()
        self.protocol = ClaimProtocol(backend, worker_id=self.worker_id, lock_timeout=settings.effective_lock_timeout)
        self.index = WorkIndex(backend)
        self.report = WorkerReport(worker_id=self.worker_id)
        self.longest_group_seconds = 0.0
        self._stale_at: dict[str, float] = {}

    def has_time(self) -> bool:
        return self.remaining_time() >= self.settings.effective_safety_margin + self.longest_group_seconds

    def run(self) -> WorkerReport:
        refs = self.index.segment_refs()
        total_groups = sum(r.groups or 0 for r in refs)
        spot = self.position * len(refs)
        first = int(spot)
        waiting: dict[str, Group] = {}
        for n in range(len(refs)):
            if not self.has_time():
                self.report.stopped_reason = "time_limit"
                return self.report
            view = self._load(refs[(first + n) % len(refs)], total_groups)
            # Only the first segment is entered part-way, at this worker's spot.
            cut = int((spot - first) * len(view.groups)) if n == 0 else 0
            ahead = deque(view.groups[cut:] + view.groups[:cut])
            while ahead:
                group = ahead.popleft()
                if group.hash in view.finished:
                    continue
                if not self.has_time():
                    self.report.stopped_reason = "time_limit"
                    return self.report
                outcome = self._work_on(group, checked_failed=view.listed)
                if isinstance(outcome, Held):
                    waiting[group.hash] = group
                elif outcome == "already_finished" and view.listed:
                    # Our listing is out of date: peers have been finishing
                    # groups here. One LIST now saves a lock round trip for
                    # each of them.
                    self._list_finished(view)
                if outcome == "already_finished" or isinstance(outcome, Held):
                    # We ran into a peer. Walking on would trail right behind
                    # it, colliding at every step; jump somewhere random.
                    ahead.rotate(-self.rng.randrange(len(ahead) or 1))
        self._drain_waiting(waiting)
        return self.report

    def _load(self, ref: SegmentRef, total_groups: int) -> _SegmentView:
        groups = self.index.load(ref.key)
        # List a prefix's flags only when that costs at most one request per
        # _LISTING_GROUPS_PER_PAGE groups; a small segment of a big workspace
        # (a short prefix) is checked group by group instead.
        listed = ref.groups is None or (total_groups / 16 ** len(ref.prefix)) / _LIST_PAGE <= max(1.0, ref.groups / _LISTING_GROUPS_PER_PAGE)
        view = _SegmentView(ref, groups, listed)
        if listed:
            self._list_finished(view)
        return view

    def _list_finished(self, view: _SegmentView) -> None:
        self.report.listings += 1
        view.finished = self._listed_hashes(layout.DONE_PREFIX, view.ref.prefix, layout.DONE_SUFFIX)
        view.finished |= self._listed_hashes(layout.FAILED_PREFIX, view.ref.prefix, layout.FAILED_SUFFIX)

    def _listed_hashes(self, prefix: str, hash_prefix: str, suffix: str) -> set[str]:
        found = set()
        for key in self.backend.list_keys(prefix + hash_prefix):
            hash_ = layout.hash_from_key(key, prefix, suffix)
            if hash_ is not None:
                found.add(hash_)
        return found

    def _drain_waiting(self, waiting: dict[str, Group]) -> None:
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
            for hash_, group in list(waiting.items()):
                if not self.has_time():
                    self.report.stopped_reason = "time_limit"
                    return
                # A HEAD is cheaper than a lock round trip, and most held
                # groups are simply finished by their holder.
                if self.protocol.is_done(hash_):
                    del waiting[hash_]
                    continue
                if not isinstance(self._work_on(group, checked_failed=False), Held):
                    del waiting[hash_]
        self.report.stopped_reason = "queue_empty"

    def _work_on(self, group: Group, *, checked_failed: bool) -> str | Held:
        claimed = self.protocol.claim(group.hash)
        if isinstance(claimed, Finished):
            self.report.already_finished += 1
            return "already_finished"
        if isinstance(claimed, Held):
            self.report.conflicts += 1
            self._stale_at[group.hash] = time.monotonic() + claimed.stale_in
            self.observer.conflict(group.hash)
            return claimed
        if claimed.reclaimed:
            self.report.reclaimed += 1
        # A failed group keeps a lock marked failed, so a free lock means "not
        # failed" unless that lock was removed (expired, or an operator's
        # cleanup); only then does the failed flag need its own check.
        if self.protocol.is_done(group.hash) or (not checked_failed and self.protocol.is_failed(group.hash)):
            self.report.already_finished += 1
            self._release(claimed)
            return "already_finished"
        return self._attempt(group, claimed)

    def _release(self, claim: Claim) -> None:
        if not self.protocol.release(claim):
            self.report.lost_locks += 1
            log.warning("lock on %s was taken over before release", claim.hash)

    def _fail(self, group: Group, claim: Claim, error: str, started: float, *, attempts: int | None = None) -> str:
        if not self.protocol.finalize_failed(claim, group, error, attempts=attempts):
            self.report.lost_locks += 1
        self.report.failed += 1
        self.observer.group_finished(group, claim, "failed", time.monotonic() - started)
        return "failed"

    def _attempt(self, group: Group, claim: Claim) -> str:
        started = time.monotonic()
        while True:
            if claim.attempt > self.settings.max_attempts:
                # Taken over from a holder that died on the last allowed attempt.
                error = "worker lost (killed or timed out) on every attempt"
                return self._fail(group, claim, error, started, attempts=claim.attempt - 1)
            self.observer.group_started(group, claim)
            remaining = self.remaining_time()
            ctx = ProcessorContext(
                worker_id=self.worker_id, attempt=claim.attempt, deadline=time.time() + remaining, group=group, backend=self.backend
            )
            attempt_started = time.monotonic()
            try:
                self.processor(group, ctx)
            except Exception as exc:  # a processor failure is an attempt, never a crash of the worker
                error = _error_text(exc)
                self.longest_group_seconds = max(self.longest_group_seconds, time.monotonic() - attempt_started)
                log.warning("group %s attempt %d failed: %s", group.hash, claim.attempt, error)
                if claim.attempt >= self.settings.max_attempts:
                    return self._fail(group, claim, error, started)
                self.report.retried += 1
                if not self.has_time():
                    # Out of time: hand the group back with its count so that
                    # another worker can retry it without waiting for staleness.
                    if not self.protocol.release_for_retry(claim, error):
                        self.report.lost_locks += 1
                    self.observer.group_finished(group, claim, "released", time.monotonic() - started)
                    return "released"
                next_claim = self.protocol.next_attempt(claim, error)
                if next_claim is None:
                    self.report.lost_locks += 1
                    return "released"
                claim = next_claim
                continue
            self.longest_group_seconds = max(self.longest_group_seconds, time.monotonic() - attempt_started)
            if self.protocol.mark_done(claim):
                self.report.processed += 1
            else:
                self.report.already_finished += 1
            self._release(claim)
            self.observer.group_finished(group, claim, "done", time.monotonic() - started)
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
    """Put failed groups back, to be claimed again from attempt 1; return their hashes.

    With ``hashes``, every one must name a failed group, checked before
    anything is deleted. The failed-marked lock goes first: if we stop in
    between, the failed flag still stands and a second requeue finishes.
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
        try:
            lock = backend.read(layout.lock_key(hash_))
            body = LockBody.decode(lock.body)
            if body is not None and body.failed:
                backend.delete(layout.lock_key(hash_), lock.etag)
        except (ObjectNotFound, ObjectChanged):
            pass  # no failed-marked lock (any more): nothing to clear
        backend.delete(layout.failed_key(hash_))
    return sorted(failed)

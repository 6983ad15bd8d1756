"""The claim protocol: take a group's lock, keep it, and give it up; each step is one conditional request.

A group is worked on only by the holder of ``worker_locks/worker_<hash>.lock``:

1. ``create`` the lock (``If-None-Match: *``): of any number of racing
   workers exactly one succeeds.
2. If it exists, read it. A lock is taken over only when its holder
   *released* it, or when it is *stale*: older, by S3's own clock, than the
   lease its holder wrote into it (a lock s3wq cannot parse -- olmocr's are
   empty -- than the foreign timeout, olmocr's 1,800 s). The takeover is a
   ``replace`` with ``If-Match`` on the ETag just read, so of several takers
   exactly one wins. Every s3wq lock body is unique (it carries a write id),
   so an s3wq ETag never matches a later lock; olmocr's empty locks all share
   one ETag, which the foreign takeover guards against separately.
   (:class:`s3wq.protocol.locks.LockReading` judges the lock, for status too.)
3. Holding the lock, check the done flag: a holder that finished writes its
   done flag *before* deleting its lock, so a lock taken after that delete
   always sees the flag.
4. While the processor runs, the holder renews its lease (a ``replace`` on
   its own ETag) whenever the run would otherwise outlive it.
5. Finish: ``create`` the done flag, then ``delete`` the lock with
   ``If-Match`` on our own ETag -- a worker never deletes a lock it no longer
   holds. A run that did not finish hands the lock back (state ``released``)
   with its outcome; a group that used up its attempts gets a failed flag and
   keeps its lock, state ``failed``, so that nobody claims it again.

Every lock body carries a per-claim owner token. When a conditional write's
response is lost and the SDK retries it, the retry loses to our own first
write; reading the body back and finding our exact bytes tells us it was ours
(:mod:`s3wq.protocol.writes` does this for each kind of conditional write).
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass

from s3wq.config import FOREIGN_LOCK_TIMEOUT_SECONDS
from s3wq.errors import ConditionalDeleteUnsupported, ObjectChanged, ObjectNotFound
from s3wq.model import Group, LockState, Outcome
from s3wq.protocol import clock, flags, writes
from s3wq.protocol.bodies import LockBody, now_iso
from s3wq.protocol.locks import LockReading
from s3wq.protocol.time_rules import enough_time
from s3wq.protocol.tracebacks import ErrorFrame
from s3wq.store import Backend, StoredObject, layout

log = logging.getLogger("s3wq")


# Every empty lock has the same ETag, so an If-Match takeover of one could
# land on a *fresh* empty lock that an olmocr worker wrote after our read.
# The takeover is trusted only if our write was acknowledged this soon after
# we sent the read that showed the lock stale; see ClaimProtocol._take_foreign.
FOREIGN_TAKEOVER_WINDOW_SECONDS = 1.0
# olmocr checks a lock and writes its own in one step after the other; a
# write of that kind racing our takeover lands within this long of ours.
FOREIGN_RECHECK_SECONDS = 2.0
# After losing a takeover race we do not know the winner's lease yet: look again soon.
_RECHECK_SECONDS = 1.0
_STALE_EPSILON_SECONDS = 0.05


@dataclass(frozen=True)
class Claim:
    """A lock we hold: the body we wrote, its ETag, and when (on our clock) we sent that write."""

    hash: str
    etag: str
    body: LockBody
    sent_at: float
    reclaimed: bool = False  # taken over from a holder whose lease ran out
    created: bool = False  # a lock that did not exist before: giving it back unrun is deleting it

    @property
    def attempt(self) -> int:
        return self.body.attempt

    @property
    def owner(self) -> str:
        return self.body.owner

    @property
    def lease_seconds(self) -> float:
        return self.body.lease_seconds


@dataclass(frozen=True)
class Held:
    """Someone else holds the lock; by ``stale_in`` seconds from now S3 will call it stale unless it is renewed."""

    stale_in: float


@dataclass(frozen=True)
class Finished:
    """The lock says the group failed for good; there is nothing to claim."""


@dataclass(frozen=True)
class NotEnoughTime:
    """The group ran out of time before (after ``needs_seconds``) and this worker cannot give it enough more."""

    needs_seconds: float


class ClaimProtocol:
    """Lock, keep, complete and give back one group at a time; every step is one conditional request."""

    def __init__(
        self,
        backend: Backend,
        *,
        worker_id: str,
        lease_seconds: float,
        foreign_lock_timeout: float = FOREIGN_LOCK_TIMEOUT_SECONDS,
        processor: str | None = None,
    ):
        self.backend = backend
        self.worker_id = worker_id
        # The processor's name, written in each done flag (None: none is).
        self.processor = processor
        self.lease_seconds = lease_seconds
        self.foreign_lock_timeout = foreign_lock_timeout
        self.clock_resolution = getattr(backend, "clock_resolution_seconds", 0.0)
        # Until the store answers a conditional DELETE with 501 (see release).
        self.conditional_delete = True

    def _new_body(self, attempt: int, budget: float | None, previous: LockBody | None = None, behind: Claim | None = None) -> LockBody:
        return LockBody(
            behind=None if behind is None else behind.hash,
            behind_owner=None if behind is None else behind.owner,
            owner=f"{self.worker_id}:{uuid.uuid4().hex}",
            worker_id=self.worker_id,
            attempt=attempt,
            lease_seconds=self.lease_seconds,
            budget_seconds=None if budget is None else round(budget, 3),
            needs_seconds=None if previous is None else previous.needs_seconds,
            error=None if previous is None else previous.error,
        )

    def _stale_in(self, lease: float, age: float) -> float:
        # age is a lower bound with the store's clock resolution; waiting this
        # long guarantees the store's own reading exceeds the lease.
        return max(0.0, lease - age) + self.clock_resolution + _STALE_EPSILON_SECONDS

    def claim(
        self, hash_: str, *, budget: float | None = None, full_budget: float | None = None, behind: Claim | None = None
    ) -> Claim | Held | Finished | NotEnoughTime:
        """Take the group's lock if it is free, released or stale; otherwise say why not.

        ``budget`` is how long this worker can give the run it would start now
        (None: unlimited), ``full_budget`` the most it can give any run;
        ``behind`` is the claim the worker is still running, for a claim made
        ahead of its run.
        """
        key = layout.lock_key(hash_)
        # One body for both rounds, so that a create of ours applied late is
        # still recognised as ours -- and its lease counted from the first send.
        body = self._new_body(1, budget, behind=behind)
        sent_at = clock.now()
        # Two rounds: the lock can vanish between our failed create and our read.
        created = writes.create(self.backend, key, body.encode(), is_ours=lambda found: _lock_owner(found) == body.owner, rounds=2)
        if created is None:
            return Held(stale_in=_RECHECK_SECONDS)
        if isinstance(created, writes.Refused):
            return self._claim_existing(hash_, created, budget=budget, full_budget=full_budget, behind=behind)
        # Read back, the lock is ours: our create was applied and its response lost; the SDK's retry lost to it.
        mine = body if created.found is None else LockBody.decode(created.found.body)
        assert mine is not None  # is_ours judged it ours by the owner its body names
        return Claim(hash_, created.etag, mine, sent_at, created=True)

    def _claim_existing(
        self, hash_: str, refused: writes.Refused, *, budget: float | None, full_budget: float | None, behind: Claim | None
    ) -> Claim | Held | Finished | NotEnoughTime:
        """Take over the lock another wrote if it is released or stale; otherwise say why not."""
        lock = LockReading.of(refused.found, foreign_lock_timeout=self.foreign_lock_timeout)
        existing, stale = lock.body, lock.stale
        if lock.failed:
            return Finished()
        if lock.live:
            return Held(stale_in=self._stale_in(lock.lease_seconds, lock.age_seconds))
        if existing is not None and not enough_time(existing.needs_seconds, budget, full_budget):
            return NotEnoughTime(needs_seconds=existing.needs_seconds or 0.0)
        # An unparseable (olmocr) lock carries no count; its run is presumed lost.
        attempt = 2 if existing is None else existing.next_attempt
        if (
            stale
            and existing is not None
            and existing.behind is not None
            and not flags.finished_by(self.backend, existing.behind, existing.behind_owner)
        ):
            # Claimed ahead by a holder that vanished while the group in
            # front was still running: this one never ran, so its claim
            # used no attempt (the group in front pays for the loss).
            attempt = existing.attempt
        takeover = self._new_body(attempt, budget, existing, behind)
        sent_at = clock.now()
        etag = writes.replace(self.backend, layout.lock_key(hash_), takeover.encode(), lock.etag)
        if etag is None:
            return Held(stale_in=_RECHECK_SECONDS)
        claim = Claim(hash_, etag, takeover, sent_at, reclaimed=stale)
        if existing is None:
            return self._take_foreign(claim, refused.read_sent_at)
        return claim

    def _take_foreign(self, claim: Claim, read_sent_at: float) -> Claim | Held:
        """Keep a takeover of an unparseable lock only if no fresh olmocr lock can have been overwritten.

        Every empty lock has the same ETag, so our If-Match also matches an
        empty lock an olmocr worker wrote *after* our read. An olmocr worker
        writes one only when it too judged the lock stale, so the danger is a
        write landing between our read and ours. If our write came back within
        FOREIGN_TAKEOVER_WINDOW_SECONDS of sending the read, the window was
        that short; if not (a pause, an SDK retry), we cannot tell, and we put
        a fresh empty lock back -- honoured as olmocr would honour its own --
        instead of processing. Then, a moment later, we renew the lock: an
        olmocr worker that judged the lock stale just before our write lands
        its own PUT just after it, and then holds the group -- our renewal's
        If-Match fails on it. (A renewal rather than a read, so that the pause
        does not come out of our lease.)
        """
        key = layout.lock_key(claim.hash)
        if clock.now() - read_sent_at > FOREIGN_TAKEOVER_WINDOW_SECONDS:
            try:
                self.backend.replace(key, b"", claim.etag)
            except (ObjectChanged, ObjectNotFound):
                pass  # someone else wrote it since: it is theirs either way
            return Held(stale_in=self._stale_in(self.foreign_lock_timeout, 0.0))
        time.sleep(FOREIGN_RECHECK_SECONDS)
        renewed = self.renew(claim)
        return Held(stale_in=_RECHECK_SECONDS) if renewed is None else renewed

    def _rewrite(self, claim: Claim, body: LockBody) -> Claim | None:
        """Replace our own lock with ``body``; the new claim, or None if the lock is no longer ours.

        Raises StorageError if the store cannot be reached: the caller decides
        whether to retry (a renewal does, until its lease runs out).
        """
        sent_at = clock.now()
        etag = writes.replace(self.backend, layout.lock_key(claim.hash), body.encode(), claim.etag)
        return None if etag is None else Claim(claim.hash, etag, body, sent_at, claim.reclaimed, claim.created)

    def renew(self, claim: Claim) -> Claim | None:
        """Extend our lease: the same claim written again, which restarts its age; None if we had lost it."""
        return self._rewrite(claim, claim.body.rewritten())

    def next_attempt(self, claim: Claim, error: str, *, budget: float | None) -> Claim | None:
        """Keep the lock for another attempt, recording the count first so a crash still uses it up."""
        body = claim.body.rewritten(attempt=claim.attempt + 1, claimed_at=now_iso(), budget_seconds=_rounded(budget), error=error)
        return self._rewrite(claim, body)

    def hand_back(self, claim: Claim, outcome: str, *, counted: bool, error: str | None = None, needs_seconds: float | None = None) -> bool:
        """Release the lock for anyone to take at once, recording why this run ended; False if we had lost it."""
        body = claim.body.rewritten(
            state=LockState.RELEASED,
            outcome=outcome,
            counted=counted,
            error=error if error is not None else claim.body.error,
            needs_seconds=_rounded(needs_seconds) if needs_seconds is not None else claim.body.needs_seconds,
        )
        return self._rewrite(claim, body) is not None

    def is_done(self, hash_: str) -> bool:
        return self.backend.exists(layout.done_key(hash_))

    def is_failed(self, hash_: str) -> bool:
        return self.backend.exists(layout.failed_key(hash_))

    def record_input_errors(self, claim: Claim, count: int, inputs: tuple[dict[str, str], ...] = ()) -> None:
        """List the inputs the run could not use under ``input_errors/``, before its done flag; or clear an earlier run's list.

        Written by the holder while its lease holds, so the list is this
        run's. A lock the claim created had no run before it (a reset
        deletes the list with the done flag), so only a claim that took over
        an existing lock costs a DELETE when its run had no input errors.
        """
        if count:
            flags.write_input_errors(self.backend, claim.hash, owner=claim.owner, attempt=claim.attempt, inputs=inputs, count=count)
        elif not claim.created:
            self.backend.delete(layout.input_errors_key(claim.hash))

    def mark_done(self, claim: Claim, *, input_errors: int = 0, pages: int | None = None) -> bool:
        """Write the done flag; False if another completion had written it first.

        The flag names the claim's owner, so that our own write whose response
        was lost (the SDK's retry then finds the flag) still counts as ours.
        """
        return flags.write_done(
            self.backend,
            claim.hash,
            owner=claim.owner,
            worker_id=self.worker_id,
            attempt=claim.attempt,
            input_errors=input_errors,
            processor=self.processor,
            pages=pages,
        )

    def finalize_failed(
        self,
        claim: Claim,
        group: Group,
        error: str,
        *,
        outcome: str = Outcome.ERROR,
        attempts: int | None = None,
        traceback: str | None = None,
        error_frame: ErrorFrame | None = None,
    ) -> bool:
        """Record that the group used up its attempts; False if we had lost the lock meanwhile.

        The failed flag is written first and the lock is then marked failed,
        both while we hold the lock: a requeue that reads the lock in between
        sees a live holder and leaves the group alone, so it can never clear
        the flag of a failure that is still being recorded. The lock is kept,
        marked failed, rather than deleted: a worker whose listing of failed
        flags predates this failure would otherwise find the lock free and
        start the group over.
        """
        flags.write_failed(
            self.backend,
            claim.hash,
            group,
            owner=claim.owner,
            worker_id=self.worker_id,
            attempts=claim.attempt if attempts is None else attempts,
            kind=outcome,
            error=error,
            traceback=traceback,
            error_frame=error_frame,
        )
        body = claim.body.rewritten(state=LockState.FAILED, outcome=outcome, counted=True, error=error)
        return self._rewrite(claim, body) is not None

    def release(self, claim: Claim) -> bool:
        """Delete our lock on a finished group (done or failed flag written) if still ours; False if it was taken over or removed.

        On a store that cannot delete on a condition (LocalStack's S3 answers
        501), the lock is instead rewritten as released, outcome finished, on
        our ETag, which keeps the one guarantee that matters: nothing written
        after a taker's write. A released lock is claimable at once, like a
        missing one; the next claimant of a done group finds its done flag and
        releases it again. A worker learns which before its first claim
        (probe.probe_store); a protocol used without the probe switches to
        rewriting for good at its first 501.
        """
        deleted = self._delete_own(claim)
        if deleted is not None:
            return deleted
        body = claim.body.rewritten(state=LockState.RELEASED, outcome=Outcome.FINISHED, counted=False, needs_seconds=None)
        try:
            return self._rewrite(claim, body) is not None
        except ObjectNotFound:
            return True

    def give_back_unrun(self, claim: Claim, why: str) -> bool:
        """Give up a claim whose group never ran under it; False if we had lost it.

        A lock the claim created, at attempt 1, is deleted where the store can
        delete on a condition: as if it had never been claimed. Any other (one
        taken over, or any lock where the store cannot delete on a condition)
        is handed back as it was, outcome interrupted with ``why``, uncounted:
        never outcome finished, which says that the group is done.
        """
        if claim.created and claim.attempt == 1:
            deleted = self._delete_own(claim)
            if deleted is not None:
                return deleted
        return self.hand_back(claim, Outcome.INTERRUPTED, counted=False, error=why)

    def _delete_own(self, claim: Claim) -> bool | None:
        """Delete our lock on our ETag: whether it was still ours; None if the store cannot delete on a condition."""
        if not self.conditional_delete:
            return None
        try:
            return writes.delete(self.backend, layout.lock_key(claim.hash), claim.etag)
        except ConditionalDeleteUnsupported:
            log.warning("the store cannot delete on a condition: locks are released by rewriting them instead")
            self.conditional_delete = False
            return None


def _lock_owner(found: StoredObject) -> str | None:
    body = LockBody.decode(found.body)
    return None if body is None else body.owner


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 3)

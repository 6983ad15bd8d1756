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
write; reading the body back and finding our exact bytes tells us it was ours.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from s3wq.config import FOREIGN_LOCK_TIMEOUT_SECONDS
from s3wq.errors import ConditionalDeleteUnsupported, ObjectChanged, ObjectExists, ObjectNotFound, UnsupportedStore, WriteConflict
from s3wq.model import Group
from s3wq.protocol import clock
from s3wq.protocol.bodies import ERROR, FAILED, FINISHED, INTERRUPTED, MAX_TRACEBACK_CHARS, RELEASED, LockBody, load_object, now_iso
from s3wq.protocol.tracebacks import ErrorFrame
from s3wq.store import Backend, layout

log = logging.getLogger("s3wq")


# Every empty lock has the same ETag, so an If-Match takeover of one could
# land on a *fresh* empty lock that an olmocr worker wrote after our read.
# The takeover is trusted only if our write was acknowledged this soon after
# we sent the read that showed the lock stale; see ClaimProtocol._take_foreign.
FOREIGN_TAKEOVER_WINDOW_SECONDS = 1.0
# olmocr checks a lock and writes its own in one step after the other; a
# write of that kind racing our takeover lands within this long of ours.
FOREIGN_RECHECK_SECONDS = 2.0
# A run "had the worker's full time" when it was claimed with at least this
# share of the most the worker can give any run (its time at its first claim,
# so that its first claim always has it). Only such a run counts as an
# attempt when it is stopped at its deadline; see enough_time.
FULL_SHARE = 0.95
# After losing a takeover race we do not know the winner's lease yet: look again soon.
_RECHECK_SECONDS = 1.0
_STALE_EPSILON_SECONDS = 0.05
_CONFLICT_SETTLE_SECONDS = 1.0
_CONFLICT_ROUNDS = 3


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


def enough_time(needs_seconds: float | None, budget: float | None, full_budget: float | None) -> bool:
    """Whether a worker that can give a run ``budget`` seconds now (at most ``full_budget``) should start a group.

    A group that never ran out of time (no ``needs_seconds``) may go to anyone.
    One that did goes only to a worker that can give it twice what it had, or
    nearly its full time if that is less. Each uncounted timeout therefore at
    least doubles the time the next run gets, and a run given nearly a
    worker's full time counts as an attempt (see ``timeout_counts``): a group
    that fits in FULL_SHARE of a worker's time never fails by unlucky pickups,
    and one that fits no worker fails after its attempts rather than waiting
    forever for a worker that may never come. (Workers' full times differ by
    their start-up, so "the group had more than this worker could give" is
    not a safe reason to leave it.) The worker passes ``budget`` equal to
    ``full_budget`` on its first claim (``Worker.full_budget`` is set there),
    so a worker's first claim always passes, and a run of it stopped at its
    deadline always counts: however slow each start-up, a hung group fails
    after ``max_attempts`` first claims.
    """
    if needs_seconds is None or budget is None:
        return True
    if full_budget is None:
        return budget >= 2 * needs_seconds
    return budget >= min(2 * needs_seconds, FULL_SHARE * full_budget)


def timeout_counts(budget: float | None, full_budget: float | None) -> bool:
    """A run stopped at its deadline used up an attempt only if it had (nearly) the worker's full time."""
    return budget is None or full_budget is None or budget >= FULL_SHARE * full_budget


class ClaimProtocol:
    """Lock, keep, complete and give back one group at a time; every step is one conditional request."""

    def __init__(
        self,
        backend: Backend,
        *,
        worker_id: str,
        lease_seconds: float,
        foreign_lock_timeout: float = FOREIGN_LOCK_TIMEOUT_SECONDS,
    ):
        self.backend = backend
        self.worker_id = worker_id
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
        first_sent_at = None
        # Two rounds: the lock can vanish between our failed create and our read.
        for _ in range(2):
            sent_at = clock.now()
            first_sent_at = first_sent_at or sent_at
            try:
                return Claim(hash_, self.backend.create(key, body.encode()), body, first_sent_at, created=True)
            except WriteConflict:
                # Perhaps our own first try, not yet applied: give it a moment before reading.
                time.sleep(_CONFLICT_SETTLE_SECONDS)
            except ObjectExists:
                pass
            read_sent_at = clock.now()
            try:
                current = self.backend.read(key)
            except ObjectNotFound:
                continue
            existing = LockBody.decode(current.body)
            if existing is not None and existing.owner == body.owner:
                # Our create was applied and its response lost; the SDK's retry lost to it.
                return Claim(hash_, current.etag, existing, first_sent_at, created=True)
            if existing is not None and existing.state == FAILED:
                return Finished()
            lease = self.foreign_lock_timeout if existing is None else existing.lease_seconds
            stale = (existing is None or existing.held) and current.age_seconds > lease
            if (existing is None or existing.held) and not stale:
                return Held(stale_in=self._stale_in(lease, current.age_seconds))
            if existing is not None and not enough_time(existing.needs_seconds, budget, full_budget):
                return NotEnoughTime(needs_seconds=existing.needs_seconds or 0.0)
            # An unparseable (olmocr) lock carries no count; its run is presumed lost.
            attempt = 2 if existing is None else existing.next_attempt
            if (
                stale
                and existing is not None
                and existing.behind is not None
                and not self._finished_by(existing.behind, existing.behind_owner)
            ):
                # Claimed ahead by a holder that vanished while the group in
                # front was still running: this one never ran, so its claim
                # used no attempt (the group in front pays for the loss).
                attempt = existing.attempt
            takeover = self._new_body(attempt, budget, existing, behind)
            sent_at = clock.now()
            etag = self._write_over(key, takeover, current.etag)
            if etag is None:
                return Held(stale_in=_RECHECK_SECONDS)
            claim = Claim(hash_, etag, takeover, sent_at, reclaimed=stale)
            if existing is None:
                return self._take_foreign(claim, read_sent_at)
            return claim
        return Held(stale_in=_RECHECK_SECONDS)

    def _finished_by(self, hash_: str, owner: str | None) -> bool:
        """Whether the claim ``owner`` on group ``hash_`` finished it (its done or failed flag names that claim)."""
        for key in (layout.done_key(hash_), layout.failed_key(hash_)):
            try:
                doc = load_object(self.backend.read(key).body)
            except ObjectNotFound:
                continue
            if doc is not None and doc.get("owner") == owner:
                return True
        return False

    def _write_over(self, key: str, body: LockBody, etag: str) -> str | None:
        """Replace the lock we read with ``body``; the new ETag, or None if another write got there first."""
        data = body.encode()
        for _ in range(_CONFLICT_ROUNDS):
            try:
                return self.backend.replace(key, data, etag)
            except WriteConflict:
                time.sleep(_CONFLICT_SETTLE_SECONDS)
            except (ObjectChanged, ObjectNotFound):
                pass
            # The SDK retries a request whose response was lost; if the first try
            # was applied, the retry fails its If-Match against our own write.
            try:
                current = self.backend.read(key)
            except ObjectNotFound:
                return None
            if current.body == data:
                return current.etag
            if current.etag != etag:
                return None
            # Unchanged: the 409 was a write of ours still in flight that did not apply. Again.
        return None

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
        etag = self._write_over(layout.lock_key(claim.hash), body, claim.etag)
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
            state=RELEASED,
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

    def record_input_errors(self, claim: Claim, count: int, inputs: tuple = ()) -> None:
        """List the inputs the run could not use under ``input_errors/``, before its done flag; or clear an earlier run's list.

        Written by the holder while its lease holds, so the list is this
        run's. A lock the claim created had no run before it (a reset
        deletes the list with the done flag), so only a claim that took over
        an existing lock costs a DELETE when its run had no input errors.
        """
        key = layout.input_errors_key(claim.hash)
        if count:
            doc = {"hash": claim.hash, "owner": claim.owner, "attempt": claim.attempt, "input_errors": count, "inputs": list(inputs)}
            self.backend.write(key, json.dumps(doc, ensure_ascii=False).encode("utf-8"))
        elif not claim.created:
            self.backend.delete(key)

    def mark_done(self, claim: Claim, *, input_errors: int = 0) -> bool:
        """Write the done flag; False if another completion had written it first.

        The flag names the claim's owner, so that our own write whose response
        was lost (the SDK's retry then finds the flag) still counts as ours.
        """
        key = layout.done_key(claim.hash)
        doc = {"worker_id": self.worker_id, "attempt": claim.attempt, "owner": claim.owner, "finished_at": now_iso()}
        if input_errors:
            doc["input_errors"] = input_errors
        data = json.dumps(doc).encode("utf-8")
        # Three rounds: a flag that exists but cannot be read was deleted
        # meanwhile, or is our own conflicting write not yet applied.
        for _ in range(3):
            try:
                self.backend.create(key, data)
                return True
            except WriteConflict:
                time.sleep(_CONFLICT_SETTLE_SECONDS)
            except ObjectExists:
                pass
            try:
                existing = load_object(self.backend.read(key).body)
            except ObjectNotFound:
                continue
            return existing is not None and existing.get("owner") == claim.owner
        return False

    def finalize_failed(
        self,
        claim: Claim,
        group: Group,
        error: str,
        *,
        outcome: str = ERROR,
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
        doc = {
            "hash": group.hash,
            "paths": list(group.paths),
            "attempts": claim.attempt if attempts is None else attempts,
            "kind": outcome,
            "error": error,
            "owner": claim.owner,
            "worker_id": self.worker_id,
            "failed_at": now_iso(),
        }
        if traceback:
            # The end of it: where the error was raised, which is what a debugger wants.
            doc["traceback"] = traceback[-MAX_TRACEBACK_CHARS:]
        if error_frame is not None:
            # Picked from the frame records when the error was caught: the line of the user's own code to show first.
            doc["error_frame"] = error_frame.to_dict()
        try:
            self.backend.create(layout.failed_key(claim.hash), json.dumps(doc, ensure_ascii=False).encode("utf-8"))
        except ObjectExists:
            pass  # a previous holder recorded it and died before marking the lock
        body = claim.body.rewritten(state=FAILED, outcome=outcome, counted=True, error=error)
        return self._rewrite(claim, body) is not None

    def release(self, claim: Claim) -> bool:
        """Delete our lock on a finished group (done or failed flag written) if still ours; False if it was taken over or removed.

        On a store that cannot delete on a condition (LocalStack's S3 answers
        501), the lock is instead rewritten as released, outcome finished, on
        our ETag, which keeps the one guarantee that matters: nothing written
        after a taker's write. A released lock is claimable at once, like a
        missing one; the next claimant of a done group finds its done flag and
        releases it again. A worker learns which before its first claim
        (probe_store); a protocol used without the probe switches to
        rewriting for good at its first 501.
        """
        deleted = self._delete_own(claim)
        if deleted is not None:
            return deleted
        body = claim.body.rewritten(state=RELEASED, outcome=FINISHED, counted=False, needs_seconds=None)
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
        return self.hand_back(claim, INTERRUPTED, counted=False, error=why)

    def _delete_own(self, claim: Claim) -> bool | None:
        """Delete our lock on our ETag: whether it was still ours; None if the store cannot delete on a condition."""
        if not self.conditional_delete:
            return None
        try:
            self.backend.delete(layout.lock_key(claim.hash), claim.etag)
            return True
        except ConditionalDeleteUnsupported:
            log.warning("the store cannot delete on a condition: locks are released by rewriting them instead")
            self.conditional_delete = False
            return None
        except ObjectChanged:
            return False
        except ObjectNotFound:
            # Our own earlier delete whose response was lost, or an operator's cleanup.
            return True


# An ETag no object has.
_NO_SUCH_ETAG = '"00000000000000000000000000000000"'
# What each backend's store was found to do, for as long as the backend lives:
# a Lambda execution environment keeps its backend from one warm invocation
# to the next, and probes once.
_store_verdicts: weakref.WeakKeyDictionary[Backend, bool] = weakref.WeakKeyDictionary()


def probe_store(backend: Backend) -> bool:
    """Whether ``backend``'s store deletes on a condition, probed the first time it is asked (see _probe_store)."""
    if backend.conditions_are_our_own:
        return True
    if backend not in _store_verdicts:
        _store_verdicts[backend] = _probe_store(backend)
    return _store_verdicts[backend]


def _probe_store(backend: Backend) -> bool:
    """Learn what the store's conditional writes do, once, before any claim; whether it deletes on a condition.

    Four round trips on a probe object of one's own: a create; then, side
    by side, a second create (If-None-Match) and a replace on an ETag it does
    not have (If-Match), both of which must fail; then a delete on that
    wrong ETag (after them: a store that ignores its condition deletes the
    probe, which would let a second create running beside it through); then
    the probe is deleted. A store that lets the second create or the replace through
    would let two workers hold one lock: UnsupportedStore, and no claim is
    ever made (never a silent fall back to check-then-put). One that answers
    the delete with 501 (LocalStack), or deletes regardless, cannot delete on
    a condition: locks are then released by rewriting them (see release).
    """
    key = layout.probe_key(uuid.uuid4().hex)
    try:
        backend.create(key, b'{"probe": "s3wq"}')
    except ObjectExists:
        pass  # the key is ours alone: our own create, whose response was lost and whose retry met it

    def second_create() -> str | None:
        try:
            backend.create(key, b"second")
        except ObjectExists:
            return None
        return "If-None-Match on PUT (a second create of an existing key succeeded)"

    def wrong_replace() -> str | None:
        try:
            backend.replace(key, b"replaced", _NO_SUCH_ETAG)
        except (ObjectChanged, ObjectNotFound):
            return None
        return "If-Match on PUT (a replace on a wrong ETag succeeded)"

    def wrong_delete() -> bool:
        try:
            backend.delete(key, _NO_SUCH_ETAG)
        except ObjectChanged:
            return True
        except (ConditionalDeleteUnsupported, ObjectNotFound):
            return False
        return False  # deleted on a wrong ETag: the condition is ignored

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="s3wq-probe") as pool:
        ignored = [problem for problem in pool.map(lambda check: check(), (second_create, wrong_replace)) if problem]
    deletes_on_a_condition = wrong_delete()
    backend.delete(key)
    if ignored:
        raise UnsupportedStore(f"the store at {backend.uri} ignores {ignored[0]}: s3wq's claims need conditional writes")
    if not deletes_on_a_condition:
        log.warning("the store at %s cannot delete on a condition: locks are released by rewriting them", backend.uri)
    return deletes_on_a_condition


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 3)

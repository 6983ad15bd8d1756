"""``requeue-failed`` racing a worker that is failing the same group, every interleaving, on S3 over HTTP.

A worker ``W`` holds a group's lock at its last attempt and records the
failure (:meth:`ClaimProtocol.finalize_failed`: the failed flag, then the lock
marked failed). An operator's ``R`` (:func:`operations.requeue_failed`) puts
every failed group back at the same time. Each actor's storage calls go
through a gate, and a deterministic scheduler decides which actor makes its
next call; a depth-first search over the scheduler's choices runs every
interleaving of the two actors' calls, each on a fresh workspace in the moto
bucket, and asserts on the objects left behind:

* never stuck, and consistent: the group is either failed (flag and a lock
  marked failed) or requeued (no flag, a released lock at attempt 1), and
  ``status`` counts it so; it is requeued exactly when R reported it so;
* a requeue that reads the lock while W still holds it leaves it alone (it
  reports it in ``skipped_live`` and writes nothing);
* whatever happened, a later requeue (if it is still failed) and a worker
  finish the group: processed once more, at attempt 1, no lock left.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from support import assert_no_lock_left

from s3wq import Worker, WorkerSettings, WorkIndex
from s3wq.model import Group, LockState, Outcome
from s3wq.ops.repairs import RequeueResult, requeue_failed
from s3wq.ops.status import queue_status
from s3wq.protocol import clock
from s3wq.protocol.bodies import LockBody
from s3wq.protocol.claims import Claim, ClaimProtocol
from s3wq.store import S3Backend, layout

PATH = "s3://inputs/reports/report-00.pdf"
MAX_ATTEMPTS = 3
LEASE = 60.0  # W's lease: live for the whole of any interleaving
W, R = "W", "R"
ACTORS = (W, R)
ERROR_TEXT = "RuntimeError: poisoned input"
LOST_TEXT = "worker lost (killed, or its lease ran out) on every attempt"


@dataclass(frozen=True)
class Scenario:
    """What W is recording when R runs."""

    name: str
    w_attempt: int  # the attempt W holds the lock at
    outcome: str  # the failure W records
    error: str
    flag_already_written: bool  # by a holder that died before marking the lock


SCENARIOS = [
    # W's last attempt raised: W writes the flag, then marks the lock.
    Scenario("last-attempt-raised", MAX_ATTEMPTS, Outcome.ERROR, ERROR_TEXT, flag_already_written=False),
    # A holder wrote the flag at the last attempt and died; W took its lock over
    # (attempt MAX_ATTEMPTS + 1) and, as Worker._attempt does, records it lost:
    # its flag create finds the flag, then it marks the lock.
    Scenario("took-over-after-holder-died", MAX_ATTEMPTS + 1, Outcome.LOST, LOST_TEXT, flag_already_written=True),
]

# A gate waiting for the scheduler, or the scheduler waiting for an actor to
# reach its next call, this long means a bug: fail instead of hanging.
GATE_TIMEOUT_SECONDS = 30.0
STEP_TIMEOUT_SECONDS = 20.0
JOIN_TIMEOUT_SECONDS = 10.0
# Far above the few dozen interleavings there are: a runaway search fails.
MAX_INTERLEAVINGS = 300


# --- a store that forwards every call through a hook --------------------------------------------------


class ForwardingBackend:
    """The real backend's contract, every call passed through :meth:`_call` first."""

    def __init__(self, inner: S3Backend):
        self.inner = inner

    @property
    def uri(self) -> str:
        return self.inner.uri

    @property
    def clock_resolution_seconds(self) -> float:
        return self.inner.clock_resolution_seconds

    def _call(self, op: str, key: str, fn: Callable[[], Any]) -> Any:
        return fn()

    def read(self, key):
        return self._call("read", key, lambda: self.inner.read(key))

    def exists(self, key):
        return self._call("exists", key, lambda: self.inner.exists(key))

    def create(self, key, body):
        return self._call("create", key, lambda: self.inner.create(key, body))

    def replace(self, key, body, etag):
        return self._call("replace", key, lambda: self.inner.replace(key, body, etag))

    def delete(self, key, etag=None):
        return self._call("delete", key, lambda: self.inner.delete(key, etag))

    def write(self, key, body):
        return self._call("write", key, lambda: self.inner.write(key, body))

    def list_keys(self, prefix):
        # Listed in full inside the call, so that the listing is one scheduled step, not a lazy generator.
        return iter(self._call("list", prefix, lambda: list(self.inner.list_keys(prefix))))


class HolderDied(Exception):
    """The holder's process died here."""


class DiesBeforeMarkingTheLock(ForwardingBackend):
    """A holder that dies after writing the failed flag, before it rewrites the lock as failed."""

    def _call(self, op, key, fn):
        if op == "replace" and key.startswith(layout.LOCKS_PREFIX):
            raise HolderDied(key)
        return fn()


# --- the deterministic scheduler ----------------------------------------------------------------------


class SchedulerAborted(Exception):
    """The scheduler gave up (an assertion or a timeout elsewhere): the actor stops here."""


@dataclass(eq=False)
class Ticket:
    """One storage call of one actor: asked for, granted, made."""

    actor: str
    op: str
    key: str
    granted: bool = False
    completed: bool = False
    result: Any = None
    error: str | None = None

    def describe(self) -> str:
        if self.error is not None:
            outcome = self.error
        elif self.op == "read" and self.key.startswith(layout.LOCKS_PREFIX):
            body = LockBody.decode(self.result.body)
            outcome = f"lock {body.state} attempt {body.attempt}" if body else "lock unparsable"
        elif self.op == "list":
            outcome = f"{len(self.result)} key(s)"
        else:
            outcome = "ok"
        return f"{self.actor}:{self.op} {short_key(self.key)} -> {outcome}"


def short_key(key: str) -> str:
    for prefix, name in ((layout.LOCKS_PREFIX, "lock"), (layout.FAILED_PREFIX, "failed-flag"), (layout.DONE_PREFIX, "done-flag")):
        if key == prefix:
            return f"{name}s/"
        if key.startswith(prefix):
            return name
    return key


class Scheduler:
    """Lets one storage call happen at a time, choosing the actor whenever both are waiting to make one.

    ``choices`` says, at each point where both actors are waiting, which one
    goes; past its end the first actor in ACTORS order goes. ``decisions``
    records every such point (who was waiting, who went): a run with the same
    choices makes the same calls in the same order.
    """

    def __init__(self, choices: Sequence[str]):
        self.choices = list(choices)
        self.cond = threading.Condition()
        self.pending: dict[str, deque[Ticket]] = {a: deque() for a in ACTORS}
        self.finished: set[str] = set()
        self.current: Ticket | None = None
        self.aborted = False
        self.decisions: list[tuple[tuple[str, ...], str]] = []
        self.trace: list[Ticket] = []

    # Called in the actors' threads (and in threads they start: an actor's calls are its backend's).

    def gate(self, actor: str, op: str, key: str) -> Ticket:
        ticket = Ticket(actor, op, key)
        with self.cond:
            if self.aborted:
                raise SchedulerAborted(f"{actor}:{op} {key}")
            self.pending[actor].append(ticket)
            self.cond.notify_all()
            if not self.cond.wait_for(lambda: ticket.granted or self.aborted, timeout=GATE_TIMEOUT_SECONDS):
                self.aborted = True
                self.cond.notify_all()
                raise SchedulerAborted(f"{actor}:{op} {key} was never allowed to go")
            if not ticket.granted:
                raise SchedulerAborted(f"{actor}:{op} {key}")
        return ticket

    def completed(self, ticket: Ticket) -> None:
        with self.cond:
            ticket.completed = True
            self.cond.notify_all()

    def finish(self, actor: str) -> None:
        with self.cond:
            self.finished.add(actor)
            self.cond.notify_all()

    # Called in the test's thread.

    def _settled(self) -> bool:
        """No call in flight, and every actor either waits at its gate or has finished."""
        return (self.current is None or self.current.completed) and all(a in self.finished or self.pending[a] for a in ACTORS)

    def drive(self) -> None:
        """Grant calls one at a time until both actors have finished."""
        while True:
            with self.cond:
                if not self.cond.wait_for(self._settled, timeout=STEP_TIMEOUT_SECONDS):
                    stuck = [a for a in ACTORS if a not in self.finished and not self.pending[a]]
                    raise AssertionError(
                        f"actor(s) {stuck} neither made a storage call nor finished within {STEP_TIMEOUT_SECONDS:.0f} s; "
                        f"calls so far: {self.describe()}"
                    )
                enabled = tuple(a for a in ACTORS if self.pending[a])
                if not enabled:
                    return
                if len(enabled) == 1:
                    chosen = enabled[0]
                else:
                    point = len(self.decisions)
                    chosen = self.choices[point] if point < len(self.choices) else enabled[0]
                    assert chosen in enabled, f"replay diverged at choice {point}: {chosen} is not waiting (calls: {self.describe()})"
                    self.decisions.append((enabled, chosen))
                ticket = self.pending[chosen].popleft()
                ticket.granted = True
                self.current = ticket
                self.trace.append(ticket)
                self.cond.notify_all()

    def abort(self) -> None:
        with self.cond:
            self.aborted = True
            self.cond.notify_all()

    def describe(self) -> str:
        return "; ".join(t.describe() for t in self.trace)


class GatedBackend(ForwardingBackend):
    """One actor's view of the store: each call first waits for the scheduler to let this actor go."""

    def __init__(self, inner: S3Backend, scheduler: Scheduler, actor: str):
        super().__init__(inner)
        self.scheduler = scheduler
        self.actor = actor

    def _call(self, op, key, fn):
        ticket = self.scheduler.gate(self.actor, op, key)
        try:
            ticket.result = fn()
            return ticket.result
        except Exception as exc:
            ticket.error = type(exc).__name__
            raise
        finally:
            self.scheduler.completed(ticket)


def run_actors(scheduler: Scheduler, actors: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """Run each actor in its own thread under ``scheduler``; what each returned (an exception is returned, not raised)."""
    results: dict[str, Any] = {}

    def body(name: str, fn: Callable[[], Any]) -> None:
        try:
            results[name] = fn()
        except BaseException as exc:  # noqa: BLE001 -- reported by the test, not lost in a thread
            results[name] = exc
        finally:
            scheduler.finish(name)

    threads = [threading.Thread(target=body, args=(name, fn), daemon=True, name=f"actor-{name}") for name, fn in actors.items()]
    for thread in threads:
        thread.start()
    try:
        scheduler.drive()
    finally:
        scheduler.abort()  # no-op once both finished; frees any actor still at its gate after a failure
        for thread in threads:
            thread.join(JOIN_TIMEOUT_SECONDS)
    alive = [t.name for t in threads if t.is_alive()]
    assert not alive, f"{alive} still running after the scheduler stopped; calls: {scheduler.describe()}"
    return results


# --- the scenario -------------------------------------------------------------------------------------


def recorder(attempts: list[int]) -> Callable:
    def process(group, ctx) -> None:
        attempts.append(ctx.attempt)

    return process


def one_group(backend: S3Backend) -> Group:
    WorkIndex(backend).populate([PATH], 1)
    groups = list(WorkIndex(backend).iter_groups())
    assert [g.paths for g in groups] == [(PATH,)]
    return groups[0]


def claim_at_last_attempt(backend: S3Backend, group: Group, *, lease: float) -> tuple[ClaimProtocol, Claim]:
    """W's claim after MAX_ATTEMPTS - 1 failed runs: the lock held at attempt MAX_ATTEMPTS."""
    protocol = ClaimProtocol(backend, worker_id="w", lease_seconds=lease)
    claim = protocol.claim(group.hash)
    assert isinstance(claim, Claim) and claim.attempt == 1
    while claim.attempt < MAX_ATTEMPTS:
        claim = protocol.next_attempt(claim, f"{ERROR_TEXT} (attempt {claim.attempt})", budget=None)
        assert claim is not None
    stored = LockBody.decode(backend.read(layout.lock_key(group.hash)).body)
    assert (stored.state, stored.attempt, stored.owner) == (LockState.HELD, MAX_ATTEMPTS, claim.owner)
    return protocol, claim


@dataclass
class SettledState:
    kind: str  # "failed" or "requeued"
    lock: LockBody
    status: dict


def settled_state(backend: S3Backend, group: Group, scenario: Scenario, context: str) -> SettledState:
    """Exactly one of: failed (flag and a failed lock) or requeued (no flag, a released lock at attempt 1); never stuck."""
    flagged = backend.exists(layout.failed_key(group.hash))
    stored = backend.read(layout.lock_key(group.hash))  # never deleted: a failed lock is kept, a requeued one is released
    lock = LockBody.decode(stored.body)
    status = queue_status(backend)
    assert lock is not None, f"unparsable lock {stored.body!r}; {context}"
    assert list(backend.list_keys("done_flags/")) == [], context
    failed = flagged and lock.state == LockState.FAILED
    requeued = not flagged and (lock.state, lock.outcome, lock.attempt, lock.next_attempt) == (LockState.RELEASED, Outcome.REQUEUED, 1, 1)
    assert failed != requeued, f"neither failed nor requeued: flag={flagged}, lock={lock}; {context}"
    if failed:
        assert (lock.attempt, lock.outcome, lock.counted, lock.error) == (scenario.w_attempt, scenario.outcome, True, scenario.error), (
            context
        )
        flag = json.loads(backend.read(layout.failed_key(group.hash)).body)
        assert (flag["hash"], flag["attempts"], flag["kind"], flag["error"]) == (group.hash, MAX_ATTEMPTS, Outcome.ERROR, ERROR_TEXT), (
            f"{flag}; {context}"
        )
        assert (status["failed"], status["locked"], status["pending"], status["done"]) == (1, 0, 0, 0), f"{status}; {context}"
        return SettledState("failed", lock, status)
    assert lock.counted is False and lock.worker_id == "requeue-failed", context
    assert (status["pending"], status["failed"], status["locked"], status["done"]) == (1, 0, 0, 0), f"{status}; {context}"
    return SettledState("requeued", lock, status)


@dataclass
class Interleaving:
    decisions: list[tuple[tuple[str, ...], str]]
    signature: tuple[str, ...]
    kind: str
    skipped_live: bool
    r_saw_failed_lock: bool


def requeue_lock_reads(trace: list[Ticket], hash_: str) -> list[Ticket]:
    """R's reads of the lock made by ``_requeue_one`` (not the read by which ``failed_groups`` looked for failed locks).

    ``failed_groups`` reads the lock only if its listing of failed flags did
    not show the group's flag; that read then comes first.
    """
    lists = [t for t in trace if t.actor == R and t.op == "list" and t.key == layout.FAILED_PREFIX]
    assert len(lists) == 1
    flag_listed = layout.failed_key(hash_) in lists[0].result
    reads = [t for t in trace if t.actor == R and t.op == "read" and t.key == layout.lock_key(hash_)]
    return reads if flag_listed else reads[1:]


def w_claim(backend: S3Backend, group: Group, scenario: Scenario) -> Claim:
    """The claim W holds, live, when the race starts."""
    _, claim = claim_at_last_attempt(backend, group, lease=LEASE)
    if not scenario.flag_already_written:
        return claim
    dying = ClaimProtocol(DiesBeforeMarkingTheLock(backend), worker_id="dead", lease_seconds=LEASE)
    with pytest.raises(HolderDied):
        dying.finalize_failed(claim, group, ERROR_TEXT)
    # W's takeover of the (by then stale) lock: the replace a ClaimProtocol.claim makes,
    # written here directly so that the race need not wait for S3 to call the lock stale.
    body = LockBody(owner="w:takeover", worker_id="w", attempt=claim.attempt + 1, lease_seconds=LEASE, error=claim.body.error)
    sent_at = clock.now()
    etag = backend.replace(layout.lock_key(group.hash), body.encode(), claim.etag)
    return Claim(group.hash, etag, body, sent_at, reclaimed=True)


def run_interleaving(s3_client, bucket: str, scenario: Scenario, number: int, choices: Sequence[str]) -> Interleaving:
    backend = S3Backend(s3_client=s3_client, bucket=bucket, prefix=f"{scenario.name}-{number:03d}")
    group = one_group(backend)
    claim = w_claim(backend, group, scenario)
    assert claim.attempt == scenario.w_attempt
    assert backend.exists(layout.failed_key(group.hash)) == scenario.flag_already_written

    scheduler = Scheduler(choices)
    w_protocol = ClaimProtocol(GatedBackend(backend, scheduler, W), worker_id="w", lease_seconds=LEASE)
    r_backend = GatedBackend(backend, scheduler, R)
    results = run_actors(
        scheduler,
        {
            W: lambda: w_protocol.finalize_failed(
                claim, group, scenario.error, outcome=scenario.outcome, attempts=None if scenario.outcome == Outcome.ERROR else MAX_ATTEMPTS
            ),
            R: lambda: requeue_failed(r_backend),
        },
    )
    calls = scheduler.describe()
    context = f"{scenario.name} interleaving {number} (choices {list(choices)}): {calls}"
    assert results[W] is True, f"W lost its lock while recording the failure: {results[W]!r}; {context}"
    result = results[R]
    assert isinstance(result, RequeueResult), f"requeue raised {result!r}; {context}"
    assert not set(result.requeued) & set(result.skipped_live) and set(result.requeued + result.skipped_live) <= {group.hash}, context

    outcome = settled_state(backend, group, scenario, context)
    # Requeued exactly when R said so.
    assert (outcome.kind == "requeued") == (result.requeued == [group.hash]), f"{outcome.kind} but R reported {result}; {context}"

    # A requeue that finds W still holding the lock leaves the group alone.
    r_writes = [t for t in scheduler.trace if t.actor == R and t.op in ("create", "replace", "delete", "write")]
    held_reads = [
        t
        for t in requeue_lock_reads(scheduler.trace, group.hash)
        if t.error is None and LockBody.decode(t.result.body).state == LockState.HELD
    ]
    if held_reads:
        assert result.skipped_live == [group.hash] and result.requeued == [], f"R read W's live lock but reported {result}; {context}"
        assert r_writes == [], f"R read W's live lock, yet wrote: {[t.describe() for t in r_writes]}; {context}"
        assert outcome.kind == "failed", context
    else:
        assert result.skipped_live == [], f"R skipped a group it never saw held: {result}; {context}"
    # R wrote (deleted the flag, released the lock) only after W's last write: it never undoes a failure still being recorded.
    w_last = max(i for i, t in enumerate(scheduler.trace) if t.actor == W)
    assert all(scheduler.trace.index(t) > w_last for t in r_writes), context
    r_saw_failed_lock = any(
        t.actor == R
        and t.op == "read"
        and t.key == layout.lock_key(group.hash)
        and t.error is None
        and LockBody.decode(t.result.body).state == LockState.FAILED
        for t in scheduler.trace
    )

    # Finish the story: still failed, a second requeue puts it back; then a worker completes it, from attempt 1.
    if outcome.kind == "failed":
        again = requeue_failed(backend)
        assert (again.requeued, again.skipped_live) == ([group.hash], []), f"{again}; {context}"
        assert settled_state(backend, group, scenario, context).kind == "requeued"
    attempts: list[int] = []
    report = Worker(backend, recorder(attempts), WorkerSettings(time_limit=30), worker_id=f"finisher-{number}").run()
    assert attempts == [1], f"processed at attempts {attempts}; {report}; {context}"
    assert (report.processed, report.failed) == (1, 0), f"{report}; {context}"
    assert backend.exists(layout.done_key(group.hash)), context
    assert_no_lock_left(backend, f"s3://{bucket}", context)
    assert list(backend.list_keys("failed_flags/")) == [], context
    status = queue_status(backend)
    assert (status["done"], status["failed"], status["locked"], status["pending"]) == (1, 0, 0, 0), f"{status}; {context}"

    signature = tuple(f"{t.actor}:{t.op}:{short_key(t.key)}" for t in scheduler.trace)
    return Interleaving(scheduler.decisions, signature, outcome.kind, bool(result.skipped_live), r_saw_failed_lock)


def explore(run: Callable[[int, Sequence[str]], Interleaving]) -> list[Interleaving]:
    """Every interleaving, by depth-first search over choice prefixes.

    A run replays its prefix, then takes the first waiting actor at each
    later choice point; each other actor waiting at such a point starts a new
    prefix. Every schedule is thus run exactly once.
    """
    runs: list[Interleaving] = []
    stack: list[tuple[str, ...]] = [()]
    while stack:
        prefix = stack.pop()
        assert len(runs) < MAX_INTERLEAVINGS, f"more than {MAX_INTERLEAVINGS} interleavings: the search does not terminate"
        done = run(len(runs), prefix)
        chosen = [c for _, c in done.decisions]
        assert chosen[: len(prefix)] == list(prefix), f"replay of {prefix} made choices {chosen}"
        for point in range(len(done.decisions) - 1, len(prefix) - 1, -1):
            enabled, taken = done.decisions[point]
            stack.extend((*tuple(chosen[:point]), other) for other in enabled if other != taken)
        runs.append(done)
    return runs


# --- tests --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_requeue_racing_a_failing_worker_is_consistent_in_every_interleaving(s3_client, bucket, scenario):
    started = time.monotonic()

    runs = explore(lambda number, choices: run_interleaving(s3_client, bucket, scenario, number, choices))

    kinds = Counter(r.kind for r in runs)
    skipped = sum(r.skipped_live for r in runs)
    print(
        f"\nrequeue vs finalize_failed ({scenario.name}): {len(runs)} interleavings explored in {time.monotonic() - started:.1f} s; "
        f"outcomes: failed={kinds['failed']} (then requeued again), requeued={kinds['requeued']}; "
        f"R skipped W's live lock in {skipped}; R requeued off a lock it read as failed in {sum(r.r_saw_failed_lock for r in runs)}"
    )
    # Each interleaving ran once, and the search reached every kind of ending.
    assert len({r.signature for r in runs}) == len(runs)
    assert len(runs) >= 10
    assert kinds["failed"] > 0 and kinds["requeued"] > 0 and skipped > 0
    # W's calls first, then R: R requeues. R's calls first, then W: the group stays failed.
    assert any(r.signature[:2] == ("W:create:failed-flag", "W:replace:lock") and r.kind == "requeued" for r in runs)
    assert any(r.signature[-2:] == ("W:create:failed-flag", "W:replace:lock") and r.kind == "failed" for r in runs)


def test_a_stale_lock_left_at_the_last_attempt_is_requeued_and_run_again_from_attempt_one(s3_client, bucket):
    backend = S3Backend(s3_client=s3_client, bucket=bucket, prefix="stale")
    group = one_group(backend)
    _, claim = claim_at_last_attempt(backend, group, lease=1)
    dying = ClaimProtocol(DiesBeforeMarkingTheLock(backend), worker_id="w", lease_seconds=1)
    with pytest.raises(HolderDied):
        dying.finalize_failed(claim, group, ERROR_TEXT)
    assert backend.exists(layout.failed_key(group.hash))
    lock_key = layout.lock_key(group.hash)
    assert LockBody.decode(backend.read(lock_key).body).state == LockState.HELD
    deadline = time.monotonic() + 15
    while backend.read(lock_key).age_seconds <= 1:
        assert time.monotonic() < deadline, "S3 never called the lock stale"
        time.sleep(0.25)
    stale = backend.read(lock_key)
    assert (LockBody.decode(stale.body).state, LockBody.decode(stale.body).attempt) == (LockState.HELD, MAX_ATTEMPTS)
    status = queue_status(backend)
    assert (status["failed"], status["locked"]) == (1, 0), status

    result = requeue_failed(backend)

    assert (result.requeued, result.skipped_live) == ([group.hash], [])
    assert list(backend.list_keys("failed_flags/")) == []
    lock = LockBody.decode(backend.read(lock_key).body)
    assert (lock.state, lock.outcome, lock.attempt, lock.next_attempt) == (LockState.RELEASED, Outcome.REQUEUED, 1, 1)
    status = queue_status(backend)
    assert (status["pending"], status["failed"], status["locked"]) == (1, 0, 0), status

    attempts: list[int] = []
    report = Worker(backend, recorder(attempts), WorkerSettings(time_limit=30, max_attempts=MAX_ATTEMPTS), worker_id="after-requeue").run()

    # Run from attempt 1, not failed at once as a lost run past its last attempt.
    assert attempts == [1], report
    assert (report.processed, report.failed) == (1, 0), report
    assert backend.exists(layout.done_key(group.hash))
    assert_no_lock_left(backend, f"s3://{bucket}")
    assert list(backend.list_keys("failed_flags/")) == []
    status = queue_status(backend)
    assert (status["done"], status["failed"], status["locked"], status["pending"]) == (1, 0, 0, 0), status

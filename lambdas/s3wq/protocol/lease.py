"""Keeping a claim's lease while its processor runs, and knowing when the processor must stop.

The holder's rule, as Chubby's and etcd's clients keep it: the lease is good
until ``lease`` seconds after the holder *sent* its last successful write of
the lock, measured on its own clock (:mod:`s3wq.protocol.clock`), less a margin for
stopping the processor and for the two clocks' drift. S3 stamps the write's
Last-Modified no earlier than we sent it, and a taker calls the lock stale
only once S3's own clock says it is older than the lease, so no taker can
start before that moment. The strictest judge decides: an olmocr worker
calls a lock stale once it is older than the foreign timeout, whatever our
lease, so a lease longer than that is good only as long as the foreign
timeout (``hold_seconds``).

While the run would otherwise outlive that lease, the keeper renews it every
third of a lease (a conditional write on our own ETag), so a group may run
for hours on a short lease. A run that ends before its lease does -- on
Lambda, where the lease is the function's timeout -- never renews: no extra
request. A renewal that finds the lock changed means the lock was taken from
us: stop at once. One that cannot reach the store is retried until the lease
runs out: stop then.
"""

from __future__ import annotations

import logging
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass

from s3wq.errors import StorageError
from s3wq.model import RunStop
from s3wq.protocol import clock
from s3wq.protocol.claims import Claim, ClaimProtocol

log = logging.getLogger("s3wq")

# Renew when a third of the lease has passed: two more tries fit before it ends.
RENEW_FRACTION = 1 / 3
_MIN_MARGIN_SECONDS = 0.5
_MARGIN_SHARE = 0.02
# Killing a process takes milliseconds and clocks drift by parts per
# million; the cap also keeps the margin within a Lambda worker's safety
# margin (10 s at 900 s), so that its run always ends inside its lease.
_MAX_MARGIN_SECONDS = 5.0
_RETRY_SECONDS = 1.0
# How often to look whether a renewal in flight has come back.
_POLL_SECONDS = 0.1


def lease_margin(lease_seconds: float) -> float:
    """How long before its lease ends a holder stops its processor: time to kill it, and clock drift."""
    return min(_MAX_MARGIN_SECONDS, max(_MIN_MARGIN_SECONDS, _MARGIN_SHARE * lease_seconds))


@dataclass
class LeaseState:
    """What the processor may ask: is the claim still certainly held?"""

    valid_until: float
    lost: bool = False

    def held(self) -> bool:
        return not self.lost and clock.now() < self.valid_until


class LeaseKeeper:
    """Keeps one claim's lease while its processor runs; ``tick`` says when to stop it.

    ``stop_at`` (on :mod:`s3wq.protocol.clock`) is when the worker's own time is up, or
    None for no limit. The lock is rewritten only while the run may outlive
    what the last write covers: our lease for s3wq takers, and the foreign
    timeout for olmocr workers, which judge a lock by its age alone.

    A renewal runs in a thread of its own: a request to a store that does not
    answer can take the SDK's retries and timeouts -- minutes -- and the
    processor must still be stopped the moment the lease runs out.
    """

    def __init__(self, protocol: ClaimProtocol, claim: Claim, *, stop_at: float | None, executor: Executor | None = None):
        self.protocol = protocol
        self.stop_at = stop_at
        # The longest a write of our lock keeps every kind of taker off it.
        self.hold_seconds = min(claim.lease_seconds, protocol.foreign_lock_timeout)
        # Sized from what one write holds, not from the lease: a margin of a long lease could exceed a short foreign timeout.
        self.margin = lease_margin(self.hold_seconds)
        self.state = LeaseState(valid_until=0.0)
        self.renewals = 0
        self.renewal_errors = 0
        self._renewal: Future[Claim | None] | None = None
        self._executor = executor
        self._own_pool: ThreadPoolExecutor | None = None
        self._written(claim)

    def _written(self, claim: Claim) -> None:
        self.claim = claim
        self.state.valid_until = claim.sent_at + self.hold_seconds - self.margin
        self._next_renewal = claim.sent_at + self.hold_seconds * RENEW_FRACTION

    def renewal_due(self) -> bool:
        """Whether the lock should be written before the run starts: its lease is over, or a renewal is due.

        The worker asks before the processor starts (a claim made ahead of a
        long run, a slow store since), and renews then, synchronously. The
        keeper's own renewals go out once the run is under way: one due at
        the start would leave the run's first moments to a lock that a taker
        may judge stale before the renewal lands.
        """
        now = clock.now()
        return now >= self.state.valid_until or (self._renewing() and now >= self._next_renewal)

    def _renewing(self) -> bool:
        return self.stop_at is None or self.stop_at > self.state.valid_until

    def stop_by(self) -> float:
        """The latest moment the processor may still run, if nothing changes."""
        return self.state.valid_until if self.stop_at is None else min(self.stop_at, self.state.valid_until)

    def next_wakeup(self) -> float:
        """When to call ``tick`` next. Waits must be sliced (``wait_slice``): timeouts stop during suspend, this clock does not."""
        if self._renewal is not None:
            return min(self.stop_by(), clock.now() + _POLL_SECONDS)
        return min(self.stop_by(), self._next_renewal) if self._renewing() else self.stop_by()

    @property
    def wait_slice(self) -> float:
        """The longest single wait: a wait's own timer stands still while the machine sleeps."""
        return self.margin / 2

    def _collect(self) -> RunStop | None:
        """Take in a finished renewal; LOST if it found the lock taken."""
        renewal, self._renewal = self._renewal, None
        assert renewal is not None
        try:
            renewed = renewal.result()
        except StorageError as exc:
            self.renewal_errors += 1
            log.warning("lease renewal of %s failed, retrying: %s", self.claim.hash, exc)
            self._next_renewal = clock.now() + min(_RETRY_SECONDS, self.hold_seconds * RENEW_FRACTION)
            return None
        if renewed is None:
            self.state.lost = True
            return RunStop.LOST
        self.renewals += 1
        self._written(renewed)
        return None

    def tick(self) -> RunStop | None:
        """Renew if due; None while the processor may go on, else why it must stop now."""
        if self.stop_at is not None and clock.now() >= self.stop_at:
            return RunStop.TIMEOUT
        if self._renewal is not None and self._renewal.done() and self._collect() == RunStop.LOST:
            return RunStop.LOST
        if clock.now() >= self.state.valid_until:
            self.state.lost = True
            return RunStop.EXPIRED
        if self._renewal is None and self._renewing() and clock.now() >= self._next_renewal:
            if self._executor is None:
                self._executor = self._own_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="s3wq-renew")
            self._renewal = self._executor.submit(self.protocol.renew, self.claim)
            if self._renewal.done() and self._collect() == RunStop.LOST:
                return RunStop.LOST
        return None

    def settle(self) -> None:
        """Once the processor has stopped: wait for a renewal in flight, so ``claim`` has the lock's current ETag."""
        if self._renewal is not None:
            self._collect()
        if self._own_pool is not None:
            self._own_pool.shutdown(wait=False)
            self._own_pool = None

"""The worker: walk the index, claim groups, run the processor under a lease, record the outcome.

Workers spread out over the index instead of all starting at the top (see
``walk``), so each mostly finds groups nobody else has touched.

How a run ends, and what it costs the group:

* the processor returns: done flag, lock deleted;
* it raises (or its host dies): one attempt used; retried here while time
  allows, else handed back with its count; failed after the last attempt;
* it is stopped at the worker's deadline, or at its group timeout: handed
  back with how long it ran, so that only a worker with enough time takes it
  next; the run counts as an attempt only if it had (nearly) the worker's
  full run budget -- its time at its first claim, cut to the group timeout
  (see ``time_rules.enough_time``); a worker's first claim always has it;
* it is stopped by SIGINT or SIGTERM: handed back, no attempt used;
* the lock was lost or the lease could not be renewed: stopped, nothing
  written but the hand-back of a lease that lapsed unclaimed.

Whatever the reason, a group handed back unfinished is not dropped: the
worker comes back to it after its walk, under the same rules as any claim
(enough time, attempts, the retry's pause), and it reports ``queue_empty``
only when nothing is pending that it could take.

The package's modules: ``loop`` (the Worker: its walk, the drain after it,
the claim ahead of each run), ``claiming`` (claims along the walk),
``running`` (one group's runs and retries), ``finish`` (writing how a group
ended), ``walk`` (the index walk and the gap jump), ``ahead`` (claiming
ahead and its timing), ``breaker`` (how a run failed; the breaker),
``budget`` (the worker's time) and ``report`` (the report, the observer).
"""

from __future__ import annotations

from s3wq.worker.loop import Worker
from s3wq.worker.report import WorkerObserver, WorkerReport

__all__ = ["Worker", "WorkerObserver", "WorkerReport"]

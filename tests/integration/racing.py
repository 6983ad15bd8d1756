"""Real processes racing on one workspace: they meet at a barrier, then each makes one call.

The racers are spawned once per session and reused, because a spawned child
pays for importing boto3 and s3wq; on a two-core machine that start-up would
otherwise dominate the tier. A racer opens each workspace once (one S3 client
per process) and sends a warm-up request *before* the barrier, so that after
it every racer's next request is the racing one, not a TCP handshake.

Racing calls are module-level functions so that the spawn context can pickle
them by name. Each returns a picklable outcome: the name of the exception a
loser got, or what the store handed the winner.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from typing import Any

import s3wq
from s3wq.errors import ConditionalDeleteUnsupported, ConditionFailed, ObjectNotFound
from s3wq.index import WorkIndex
from s3wq.protocol.claims import ClaimProtocol
from s3wq.store import make_s3_client

WON = "won"
# Long enough for eight cold processes on two busy cores; a racer that dies
# before the barrier breaks it for everyone instead of hanging the session.
BARRIER_TIMEOUT_SECONDS = 90.0
RACE_TIMEOUT_SECONDS = 180.0

_barrier: Any = None
_s3_client: Any = None
_backends: dict[str, Any] = {}


def _init_racer(barrier: Any) -> None:
    global _barrier
    _barrier = barrier


def _backend(uri: str) -> Any:
    global _s3_client
    if uri not in _backends:
        if uri.startswith("s3://") and _s3_client is None:
            _s3_client = make_s3_client()  # AWS_ENDPOINT_URL was inherited from the test session
        _backends[uri] = s3wq.open_backend(uri, s3_client=_s3_client)
    return _backends[uri]


def _run_one(task: tuple[Callable, str, tuple]) -> Any:
    call, uri, args = task
    backend = _backend(uri)
    backend.exists("racing-warm-up")
    _barrier.wait(timeout=BARRIER_TIMEOUT_SECONDS)
    return call(backend, *args)


# --- racing calls ------------------------------------------------------------


def create(backend: Any, key: str, body: bytes) -> str:
    try:
        backend.create(key, body)
    except ConditionFailed as exc:
        return type(exc).__name__
    return WON


def replace(backend: Any, key: str, body: bytes, etag: str) -> str:
    try:
        backend.replace(key, body, etag)
    except (ConditionFailed, ObjectNotFound) as exc:
        return type(exc).__name__
    return WON


def delete(backend: Any, key: str, etag: str) -> str:
    try:
        backend.delete(key, etag)
    except (ConditionFailed, ObjectNotFound, ConditionalDeleteUnsupported) as exc:
        return type(exc).__name__
    return WON


def claim(backend: Any, hash_: str, worker_id: str, lock_timeout: float) -> Any:
    return ClaimProtocol(backend, worker_id=worker_id, lease_seconds=lock_timeout).claim(hash_)


def populate(backend: Any, paths: list[str], group_size: int) -> Any:
    return WorkIndex(backend).populate(paths, group_size)


# --- the pool ----------------------------------------------------------------


class Racers:
    """``size`` spawned processes; :meth:`race` gives each one call and releases them together."""

    def __init__(self, size: int):
        context = multiprocessing.get_context("spawn")
        self.size = size
        self._barrier = context.Barrier(size)
        self._pool = context.Pool(size, initializer=_init_racer, initargs=(self._barrier,))

    def race(self, call: Callable, uri: str, args_per_racer: Sequence[tuple]) -> list[Any]:
        """Outcomes in the order of ``args_per_racer``, which must hold one tuple per racer.

        With one task per racer and every racer blocked at the barrier until
        all have taken theirs, no racer can take two tasks of one race.
        """
        if len(args_per_racer) != self.size:
            raise ValueError(f"a race needs exactly {self.size} sets of arguments, got {len(args_per_racer)}")
        self._barrier.reset()  # a previous failed race may have broken it
        tasks = [(call, uri, tuple(args)) for args in args_per_racer]
        return self._pool.map_async(_run_one, tasks, chunksize=1).get(timeout=RACE_TIMEOUT_SECONDS)

    def close(self) -> None:
        self._pool.terminate()
        self._pool.join()

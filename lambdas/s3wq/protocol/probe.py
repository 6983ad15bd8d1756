"""The store probe: what a store's conditional writes really do, learnt once before any claim.

A store that ignored If-None-Match or If-Match on PUT would let two workers
hold one lock, so s3wq refuses to claim on it. One that cannot delete on a
condition (LocalStack's S3 answers 501) is usable: its locks are released
by rewriting them (see ClaimProtocol.release).
"""

from __future__ import annotations

import logging
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor

from s3wq.errors import ConditionalDeleteUnsupported, ObjectChanged, ObjectExists, ObjectNotFound, UnsupportedStore
from s3wq.store import Backend, layout

log = logging.getLogger("s3wq")

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

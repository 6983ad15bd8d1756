"""The flags a lock's holder writes beside it: done, failed, and the inputs its run could not use.

Each names the claim that wrote it (its owner token), so that a holder whose
write landed but whose response was lost still knows the flag for its own
(see :mod:`s3wq.protocol.writes`), and a claimant can tell which claim
finished a group. ClaimProtocol writes them while it holds the lock, in the
order its docstrings give.
"""

from __future__ import annotations

import json

from s3wq.errors import ObjectExists, ObjectNotFound
from s3wq.model import Group
from s3wq.protocol import writes
from s3wq.protocol.bodies import MAX_TRACEBACK_CHARS, load_object, now_iso
from s3wq.protocol.tracebacks import ErrorFrame
from s3wq.store import Backend, StoredObject, layout


def _owner(found: StoredObject) -> object:
    doc = load_object(found.body)
    return None if doc is None else doc.get("owner")


def finished_by(backend: Backend, hash_: str, owner: str | None) -> bool:
    """Whether the claim ``owner`` on group ``hash_`` finished it (its done or failed flag names that claim)."""
    for key in (layout.done_key(hash_), layout.failed_key(hash_)):
        try:
            doc = load_object(backend.read(key).body)
        except ObjectNotFound:
            continue
        if doc is not None and doc.get("owner") == owner:
            return True
    return False


def write_done(
    backend: Backend,
    hash_: str,
    *,
    owner: str,
    worker_id: str,
    attempt: int,
    input_errors: int,
    processor: str | None = None,
    pages: int | None = None,
) -> bool:
    """Create the done flag; whether it is ours (False: another completion wrote it first).

    ``processor`` is the name the worker was given (``text``, ``ocr``,
    ``module:function``): what ``work`` tells a user who asks another
    processor of a workspace already done. None (a worker embedded with a
    callable) writes no such field, as the flags from before it had none.
    ``pages``: the pages the run reported done, kept so that ``status`` can
    sum them; a flag without (an older s3wq's, olmocr's, a processor that
    reports none) reads as a group of unknown pages (:func:`pages_of`).
    """
    doc: dict[str, object] = {"worker_id": worker_id, "attempt": attempt, "owner": owner, "finished_at": now_iso()}
    if input_errors:
        doc["input_errors"] = input_errors
    if processor is not None:
        doc["processor"] = processor
    if pages is not None:
        doc["pages"] = pages
    data = json.dumps(doc).encode("utf-8")
    # Three rounds: a flag that exists but cannot be read was deleted
    # meanwhile, or is our own conflicting write not yet applied.
    created = writes.create(backend, layout.done_key(hash_), data, is_ours=lambda found: _owner(found) == owner, rounds=3)
    return isinstance(created, writes.Landed)


def done_by(backend: Backend, hash_: str) -> str | None:
    """The processor a group's done flag names; None when it names none (an older s3wq's, olmocr's empty flag) or is gone."""
    try:
        doc = load_object(backend.read(layout.done_key(hash_)).body)
    except ObjectNotFound:
        return None
    processor = None if doc is None else doc.get("processor")
    return processor if isinstance(processor, str) else None


def pages_of(body: bytes) -> int | None:
    """The pages a done flag records; None for a flag that records none, or that is not s3wq's JSON (olmocr's is empty)."""
    doc = load_object(body)
    pages = None if doc is None else doc.get("pages")
    # bool is an int to Python, and a flag is anyone's to write: only a count of 0 or more is one.
    return pages if isinstance(pages, int) and not isinstance(pages, bool) and pages >= 0 else None


def write_input_errors(backend: Backend, hash_: str, *, owner: str, attempt: int, inputs: tuple[dict[str, str], ...], count: int) -> None:
    """List the ``count`` inputs a run could not use (``inputs``: those named) under ``input_errors/``."""
    doc = {"hash": hash_, "owner": owner, "attempt": attempt, "input_errors": count, "inputs": list(inputs)}
    backend.write(layout.input_errors_key(hash_), json.dumps(doc, ensure_ascii=False).encode("utf-8"))


def write_failed(
    backend: Backend,
    hash_: str,
    group: Group,
    *,
    owner: str,
    worker_id: str,
    attempts: int,
    kind: str,
    error: str,
    traceback: str | None,
    error_frame: ErrorFrame | None,
) -> None:
    """Create the failed flag, unless a previous holder of the lock created it and died before marking the lock."""
    doc = {
        "hash": group.hash,
        "paths": list(group.paths),
        "attempts": attempts,
        "kind": kind,
        "error": error,
        "owner": owner,
        "worker_id": worker_id,
        "failed_at": now_iso(),
    }
    if traceback:
        # The end of it: where the error was raised, which is what a debugger wants.
        doc["traceback"] = traceback[-MAX_TRACEBACK_CHARS:]
    if error_frame is not None:
        # Picked from the frame records when the error was caught: the line of the user's own code to show first.
        doc["error_frame"] = error_frame.to_dict()
    try:
        backend.create(layout.failed_key(hash_), json.dumps(doc, ensure_ascii=False).encode("utf-8"))
    except ObjectExists:
        pass

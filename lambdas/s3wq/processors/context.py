"""The processor contract: ``fn(group, ctx)`` and the context a run gets (its inputs, its result, its lease)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from s3wq.errors import BadSource, BadWorkspace, InputNotFound, InputRefused, LeaseLost, StorageError
from s3wq.inputs import ANYTHING, InputPolicy
from s3wq.model import Group
from s3wq.store import Backend, S3Backend, layout, make_s3_client, parse_s3_uri

Processor = Callable[[Group, "ProcessorContext"], Any]
MAX_INPUT_ERRORS_KEPT = 100
_MISSING_INPUT_CODES = {"NoSuchKey", "404", "NoSuchBucket", "AccessDenied", "403"}


def _always_held() -> bool:
    return True


class RunStore:
    """The workspace's store as a run sees it through ``ctx.backend``: reads as the store answers them; writes only while the claim is held.

    A thread or process the run handed ``ctx`` to (a module's writer thread,
    a callback that fires late) must not write for a group once its run has
    ended: the group may be done, or another worker's, by then. Every write
    checks the claim first and raises LeaseLost, writing nothing, when the
    run has ended or its claim is not certainly held.
    """

    def __init__(self, store: Backend, ctx: ProcessorContext):
        self._store = store
        self._ctx = ctx

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)  # reads, and the store's attributes (uri, atomic_writes...)

    def create(self, key: str, body: bytes) -> str:
        self._ctx.check_held(f"{key} not created")
        return self._store.create(key, body)

    def replace(self, key: str, body: bytes, etag: str) -> str:
        self._ctx.check_held(f"{key} not replaced")
        return self._store.replace(key, body, etag)

    def delete(self, key: str, etag: str | None = None) -> None:
        self._ctx.check_held(f"{key} not deleted")
        self._store.delete(key, etag)

    def write(self, key: str, body: bytes) -> str:
        self._ctx.check_held(f"{key} not written")
        return self._store.write(key, body)


@dataclass
class ProcessorContext:
    """What a processor knows of its run.

    ``owner`` (unique to this claim) and ``attempt`` are what a processor
    passes along to fence its own side effects; ``claim_is_held()`` is True
    while the worker certainly still holds the group's lock, and False from
    the moment the run ends (the processor returned or raised), so that a
    thread it left behind can tell. The worker stops a processor before its
    lease can end, but a store a processor writes to itself can refuse a
    write that carries an out-of-date owner.
    """

    worker_id: str
    attempt: int
    deadline: float  # epoch seconds
    group: Group
    backend: Backend
    owner: str = ""
    _held: Callable[[], bool] = field(default=_always_held, repr=False)
    _s3: Any = field(default=None, repr=False)
    _run_over: bool = field(default=False, repr=False)
    # What read_input may read: on Lambda, s3:// inputs in the deployment's locations only.
    input_policy: InputPolicy = ANYTHING
    # Inputs the processor could not use, as it reported them; the first
    # MAX_INPUT_ERRORS_KEPT are kept, all are counted.
    input_errors: list[dict[str, str]] = field(default_factory=list)
    input_error_count: int = 0
    # Pages the processor reported done (None: it reports none, as a processor of plain records may not).
    pages: int | None = None

    def __post_init__(self) -> None:
        # The store itself stays the context's own (write_result checks the claim itself); the processor gets the checked view.
        self._store = self.backend
        self.backend = RunStore(self.backend, self)

    def record_input_error(self, path: str, error: str) -> None:
        """Report an input this processor could not use, while the group as a whole succeeds.

        When the processor returns, the worker counts them in the group's
        done flag and lists them under ``input_errors/``, so ``s3wq status``
        and ``s3wq failures --inputs`` show them without reading any result.
        """
        if self._run_over:  # a count the worker has already written to the done flag: a late one would be lost unseen
            raise LeaseLost(f"the run on group {self.group.hash} has ended: input error of {path} not recorded")
        self.input_error_count += 1
        if len(self.input_errors) < MAX_INPUT_ERRORS_KEPT:
            self.input_errors.append({"path": path, "error": str(error)[:500]})

    def pages_done(self, n: int = 1) -> None:
        """Report ``n`` more pages of the group done: the done flag, the worker's report and ``status`` count them.

        Pages are a unit of progress beside groups (a 20-page group is not one
        step): the built-ins report each page read. Called as the run goes,
        or once at its end; like an input error, only while the run goes on.
        """
        if n < 0:
            raise ValueError(f"pages_done takes a count of 0 or more, got {n}")
        if self._run_over:  # the worker has already written the group's pages to its done flag
            raise LeaseLost(f"the run on group {self.group.hash} has ended: {n} pages not counted")
        self.pages = (self.pages or 0) + n

    def remaining_seconds(self) -> float:
        return max(0.0, self.deadline - time.time())

    def claim_is_held(self) -> bool:
        """True while the run goes on and its claim is certainly held; False once the run has ended, whatever the lease says."""
        return not self._run_over and self._held()

    def end_run(self) -> None:
        """The runner's, as the processor returns or raises: the claim is the worker's alone from now on."""
        self._run_over = True

    def check_held(self, what: str) -> None:
        """Raise LeaseLost (``what``: what is then not done) unless the run goes on and its claim is certainly held."""
        if self._run_over:
            raise LeaseLost(f"the run on group {self.group.hash} has ended: {what}")
        if not self._held():
            raise LeaseLost(f"the claim on group {self.group.hash} is no longer held: {what}")

    def _s3_client(self) -> Any:
        if self._s3 is None:
            self._s3 = self._store.s3 if isinstance(self._store, S3Backend) else make_s3_client()
        return self._s3

    def read_input(self, path: str) -> bytes:
        """The bytes of one input: an ``s3://`` URI or a local file path.

        Raises InputRefused (an InputNotFound), reading nothing, for a path
        the input policy does not allow: on Lambda, a local path or another
        bucket, whatever the index says; and InputTooLarge (an InputRefused)
        for an input over the policy's size cap, told from its size before
        its bytes are read.
        """
        self.input_policy.check_read(path)
        if path.startswith("s3://"):
            try:
                bucket, key = parse_s3_uri(path)
            except BadWorkspace as exc:
                # A malformed row of the index is that input's error, not the whole group's failure.
                raise InputRefused(f"input refused: {exc}") from exc
            try:
                response = self._s3_client().get_object(Bucket=bucket, Key=key)
                # Closed unread when too large: the size is in the response's headers, before its body.
                with closing(response["Body"]) as body:
                    return self.input_policy.read_capped(path, body, response.get("ContentLength"))
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in _MISSING_INPUT_CODES:
                    raise InputNotFound(f"input {path} does not exist or is not readable") from exc
                raise StorageError(f"cannot read input {path}: {exc}") from exc
            except BotoCoreError as exc:
                raise StorageError(f"cannot read input {path}: {exc}") from exc
        if "://" in path:
            raise BadSource(f"unsupported input scheme in {path!r}")
        try:
            with open(path, "rb") as file:
                return self.input_policy.read_capped(path, file, os.fstat(file.fileno()).st_size)
        except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
            raise InputNotFound(f"input {path} does not exist or is not readable") from exc

    @property
    def result_key(self) -> str:
        return layout.result_key(self.group.hash)

    def write_result(self, records: Iterable[dict]) -> str:
        """Write the group's result as JSON Lines to ``results/output_<hash>.jsonl``; return its URI.

        Raises LeaseLost, writing nothing, once the claim is no longer certainly held.
        """
        body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
        self.check_held("result not written")
        self._store.write(self.result_key, body)
        return f"{self._store.uri.rstrip('/')}/{self.result_key}"

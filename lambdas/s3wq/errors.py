"""The one exception tree of s3wq.

Callers catch ``S3wqError`` for anything the queue raises on purpose.
``BadInput`` and its subclasses are the user's mistake (the CLI exits 2 and
has changed nothing); ``StorageError`` is the store failing (it propagates so
that Lambda / Step Functions retry); the precondition errors are the expected
outcomes of conditional writes and are mapped from 412/409 at the backend
boundary.
"""


class S3wqError(Exception):
    """Root of every error s3wq raises on purpose."""


class BadInput(S3wqError):
    """The user gave something s3wq cannot use; nothing was changed."""


class BadWorkspace(BadInput):
    """The workspace URI is malformed, has an unknown scheme, or its bucket does not exist."""


class NoIndex(BadWorkspace):
    """The workspace has no index: nothing was populated there (or the URI has a typo)."""

    def __init__(self, uri: str):
        super().__init__(f"no index at {uri}: run s3wq populate first (is the workspace spelt right?)")


class NothingIndexed(S3wqError):
    """The workspace has no index, and the deployed populate recorded bad lines there: what was uploaded had no usable line.

    A failed run, not bad input to the command that found it: ``problems``
    holds the records (as ``status --json`` shows them).
    """

    def __init__(self, message: str, problems: dict):
        super().__init__(message)
        self.problems = problems


class BadSource(BadInput):
    """A source (S3 URI, glob, local path or @manifest) cannot be expanded."""


class BadManifestLine(BadSource):
    """A manifest line is not a usable source; carries its line number."""

    def __init__(self, manifest: str, line_number: int, reason: str):
        self.manifest = manifest
        self.line_number = line_number
        self.reason = reason
        super().__init__(f"{manifest}:{line_number}: {reason}")


class BadManifestLines(BadSource):
    """Manifests hold bad lines: the first of them, numbered, and how many in all; the message lists the first SHOWN, one a line."""

    SHOWN = 20

    def __init__(self, bad_lines: list[BadManifestLine], hint: str = "", *, count: int | None = None):
        # ``count``: all the bad lines, when only the first of them were kept (``bad_lines``).
        self.bad_lines = list(bad_lines)
        self.count = len(self.bad_lines) if count is None else count
        if self.count == 1:  # one problem, one line
            super().__init__(str(self.bad_lines[0]))
            return
        manifests = list(dict.fromkeys(b.manifest for b in self.bad_lines))
        where = manifests[0] if len(manifests) == 1 else f"{len(manifests)} manifests"
        lines = [f"{self.count} bad lines in {where}, nothing indexed{hint}:"]
        lines += [f"  {b}" for b in self.bad_lines[: self.SHOWN]]
        if self.count > self.SHOWN:
            lines.append(f"  ... and {self.count - self.SHOWN} more")
        super().__init__("\n".join(lines))


class ExpansionLimitReached(BadSource):
    """Sources hold more than populate may read, list or index, or took longer than it had: nothing is indexed."""


class BucketNotFound(BadWorkspace):
    """The workspace's bucket does not exist."""


class BadGroupHash(BadInput):
    """A group hash is not 40 lowercase hex characters, so no key may be built from it."""


class BadKey(BadInput):
    """A storage key would escape the workspace or is otherwise unsafe."""


class ConfigError(BadInput):
    """A setting (flag or environment variable) is missing or invalid."""


class UnsupportedStore(ConfigError):
    """The store ignores a condition s3wq's claims rest on (If-None-Match or If-Match on PUT): it would let two workers run one group."""


class MissingExtra(BadInput):
    """An optional part of s3wq needs packages that only its extra installs (``pip install 's3wq[local]'``)."""

    def __init__(self, what: str, needs: str, *, extra: str):
        super().__init__(f"{what} needs {needs}: pip install 's3wq[{extra}]'")


class BadProcessorFolder(BadInput):
    """A processor folder holds, or links to, a file that may not ship; the message names the file and the rule."""


class ProcessorNotFound(ConfigError):
    """The processor name is neither built in nor an importable ``module:function``."""


class InputNotFound(S3wqError):
    """An input named in a group does not exist or may not be read."""


class InputRefused(InputNotFound):
    """An input lies outside what this deployment may read (a local path on Lambda, another bucket); it was not read."""


class InputTooLarge(InputRefused):
    """An input holds more bytes than the input size cap; it was not read whole."""


class IndexCorrupt(S3wqError):
    """An index object exists but cannot be decoded (not zstd, bad CSV, bad catalog)."""


class IndexContention(S3wqError):
    """An index object kept changing while it was read, or the catalog under a populate; it gave up (a populate without writing)."""


class ServiceUnavailable(S3wqError):
    """A service the processor needs is unavailable: raise it (or a subclass) from a processor to hand the group back unrun.

    The group goes back pending, no attempt used, and the worker that ran it
    stops claiming (stop reason ``service_unavailable``) rather than use up
    the attempts of every group it would run while the service is down. The
    message, in one line, is what the lock and the operator are told:
    ``raise ServiceUnavailable(f"model endpoint {url}: circuit open after 5 errors")``.
    Raised in a thread of the processor's and re-raised by it (``future.result()``) counts the same.
    """


class LeaseLost(S3wqError):
    """The worker no longer certainly holds the group's lock; a processor must not act for it."""


class StorageError(S3wqError):
    """The store failed for a reason other than a precondition (network, 5xx, access denied)."""


class ConditionalDeleteUnsupported(StorageError):
    """The store answers a DELETE with If-Match with 501 NotImplemented (LocalStack's S3, for one)."""


class ObjectNotFound(S3wqError):
    """The object does not exist (404)."""


class ConditionFailed(S3wqError):
    """A conditional write lost: the expected outcome of a race, not a fault."""


class ObjectExists(ConditionFailed):
    """A create-if-absent found the key already present (412/409 on If-None-Match)."""


class ObjectChanged(ConditionFailed):
    """A conditional replace/delete found a different ETag than expected (412/409 on If-Match)."""


class WriteConflict(ObjectExists, ObjectChanged):
    """Another conditional write to the key was in flight (S3's 409): possibly our own earlier try, not yet applied."""

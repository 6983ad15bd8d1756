"""How a run ended: returned, raised (or its host died), or not known to be over.

Both runners end a run with one of these: the in-process runner as the
processor returns, the processor host's from what its runner process
reported (:class:`s3wq.host.wire.RunCleanedUp`).
"""

from __future__ import annotations

from dataclasses import dataclass

from s3wq.errors import ServiceUnavailable
from s3wq.protocol.bodies import MAX_ERROR_CHARS
from s3wq.protocol.tracebacks import ErrorFrame


@dataclass(frozen=True)
class Returned:
    """The processor returned; ``input_errors``: how many inputs it reported it could not use, and the first of them."""

    input_errors: int = 0
    inputs: tuple[dict[str, str], ...] = ()
    # What the run left running behind it, that had to be killed ("" if nothing): the run is then not done.
    leftovers: str = ""
    # The pages it reported done (ProcessorContext.pages_done); None if it reported none.
    pages: int | None = None


@dataclass(frozen=True)
class Raised:
    """The processor raised (or its host died): one attempt used; ``frame``: the deepest line of the processor's own code."""

    error: str
    traceback: str = ""
    frame: ErrorFrame | None = None
    # What the run left running behind it, that had to be killed ("" if nothing).
    leftovers: str = ""
    # Whether the host died (``error`` says how) rather than the processor raising.
    host_died: bool = False
    # The processor raised ServiceUnavailable (``error`` is its message): the group goes back unrun, and the worker stops.
    unavailable: bool = False


@dataclass(frozen=True)
class Unkillable:
    """A process of the host would not die, or the host could not show that it did: the run is not known to be over."""


def unavailable_service(exc: BaseException) -> str | None:
    """The message of a processor's ServiceUnavailable (or of its subclass), in one line; None for any other exception.

    Judged by the exception's class where it is caught, in the process that
    ran the processor: the runner's reply carries the verdict, never text for
    the worker to match. One line, as a lock's error is shown: the class's
    name where the message is empty.
    """
    if not isinstance(exc, ServiceUnavailable):
        return None
    return (" ".join(str(exc).split()) or type(exc).__name__)[:MAX_ERROR_CHARS]

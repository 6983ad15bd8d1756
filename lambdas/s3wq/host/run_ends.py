"""How a run ended: returned, raised (or its host died), or not known to be over.

Both runners end a run with one of these: the in-process runner as the
processor returns, the processor host's from what its runner process
reported (:class:`s3wq.host.wire.RunCleanedUp`).
"""

from __future__ import annotations

from dataclasses import dataclass

from s3wq.protocol.tracebacks import ErrorFrame


@dataclass(frozen=True)
class Returned:
    """The processor returned; ``input_errors``: how many inputs it reported it could not use, and the first of them."""

    input_errors: int = 0
    inputs: tuple[dict[str, str], ...] = ()
    # What the run left running behind it, that had to be killed ("" if nothing): the run is then not done.
    leftovers: str = ""


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


@dataclass(frozen=True)
class Unkillable:
    """A process of the host would not die, or the host could not show that it did: the run is not known to be over."""

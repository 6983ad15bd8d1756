"""Which inputs may be named and read: the input policy that populate and the worker apply.

A deployment reads ``s3://`` inputs in its workspace bucket and the stack's
``inputBuckets``, and never its own disk: on Lambda, a manifest line or an
index row naming ``/proc/self/environ`` would otherwise be a read of the
function's AWS credentials, and ``s3://another-bucket/...`` a read of whatever
the role may read. The command line on a local workspace takes local paths
(its quick start), and on an S3 workspace only when asked to.

One policy object answers both questions -- may populate index this source,
may a processor read this path -- so the two cannot drift apart. It also
caps what one read may take: an input too large to hold is that input's
error, told from its size before its bytes are read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from typing import BinaryIO

from s3wq.errors import BadWorkspace, ConfigError, InputRefused, InputTooLarge
from s3wq.store import layout, parse_s3_uri

_GLOB_CHARS = "*?["
# The S3 naming rules for general purpose buckets, as backends.parse_s3_uri checks them.
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
# The largest input ctx.read_input reads, in bytes, unless the policy says
# otherwise (max_bytes): 64 MiB, sized for the smallest worker the stack
# deploys by default (1,769 MB, text's and ocr's). text holds about five copies of a text input (its bytes, the decoded text,
# its JSON line, the result's body: 320 MiB); ocr holds one copy of the bytes
# beside its engine, which peaks at about 1.3 GB. A larger input is that
# input's error, not the worker's death by out-of-memory, which would cost
# the group an attempt at every retry.
DEFAULT_MAX_INPUT_BYTES = 64 * 1024 * 1024
# A reason quotes at most this much of the source: a refused 8 KB line must not make an 8 KB record.
_SHOWN_CHARS = 200
# Where an operator raises the input size cap, named in every refusal.
_RAISE_CAP = "raise it with s3wq work --max-input-bytes, or -c maxInputBytes on the stack"


def shown(source: str) -> str:
    """``source`` quoted for a one-line reason, cut short if long."""
    return repr(source) if len(source) <= _SHOWN_CHARS else repr(source[:_SHOWN_CHARS]) + f"... ({len(source)} characters)"


@dataclass(frozen=True)
class InputLocation:
    """A bucket, or a folder of one: ``prefix`` without slashes around it, "" for the whole bucket.

    A key is inside when it lies under ``prefix/``, which is what the stack's
    grant ``arn:aws:s3:::bucket/prefix/*`` lets the functions read.
    """

    bucket: str
    prefix: str = ""

    def __post_init__(self) -> None:
        if not _BUCKET_RE.fullmatch(self.bucket):
            raise ConfigError(f"input location: {self.bucket!r} is not a valid bucket name")
        if self.prefix != self.prefix.strip("/") or any(c in self.prefix for c in _GLOB_CHARS):
            raise ConfigError(
                f"input location: prefix {self.prefix!r} must be a plain folder, without leading or trailing '/' or glob characters"
            )
        if self.prefix and not all(segment not in ("", ".", "..") for segment in self.prefix.split("/")):
            raise ConfigError(f"input location: prefix {self.prefix!r} may not hold empty, '.' or '..' segments")

    @classmethod
    def parse(cls, text: str) -> InputLocation:
        """``s3://bucket``, ``s3://bucket/prefix`` (a trailing slash is allowed), or the same without ``s3://``."""
        bucket, _, prefix = text.strip().removeprefix("s3://").partition("/")
        return cls(bucket, prefix.rstrip("/"))

    def holds(self, bucket: str, key: str) -> bool:
        return bucket == self.bucket and (not self.prefix or key.startswith(self.prefix + "/"))

    def __str__(self) -> str:
        return location_uri(self.bucket, self.prefix)


def location_uri(bucket: str, prefix: str) -> str:
    """``s3://bucket/`` or ``s3://bucket/prefix/``: a location as S3WQ_INPUT_LOCATIONS names it.

    Also what the stack writes, from the same list it makes its grants from
    (where the bucket may be a CloudFormation reference, not yet a name).
    """
    return f"s3://{bucket}/{prefix + '/' if prefix else ''}"


def parse_locations(text: str) -> tuple[InputLocation, ...]:
    """A comma-separated list of locations (the form of ``S3WQ_INPUT_LOCATIONS``); empty items are skipped."""
    return tuple(InputLocation.parse(item) for item in text.split(",") if item.strip())


def format_locations(locations) -> str:
    """The value of ``S3WQ_INPUT_LOCATIONS`` for ``locations`` (anything with ``bucket`` and ``prefix``)."""
    return ",".join(location_uri(location.bucket, location.prefix) for location in locations)


def default_locations(workspace: str) -> tuple[InputLocation, ...]:
    """Where a deployment told no other place reads inputs: the ``inputs/`` folder of its own workspace.

    Never the whole bucket: the workspace may be one prefix of a bucket
    shared with other data, which whoever may upload a manifest must not be
    able to have extracted into results/.
    """
    if not workspace.startswith("s3://"):
        return ()
    bucket, prefix = parse_s3_uri(workspace)
    return (InputLocation(bucket, "/".join(part for part in (prefix.strip("/"), layout.INPUTS_DIR.rstrip("/")) if part)),)


@dataclass(frozen=True)
class InputPolicy:
    """What may be indexed and read.

    ``locations``: the S3 locations inputs must lie in (None: any bucket, as
    the caller's own credentials allow). ``local``: whether local paths may be
    named at all; ``local_refusal`` says why not, and what to do instead.
    ``max_bytes``: the most one input may hold to be read.
    """

    locations: tuple[InputLocation, ...] | None = None
    local: bool = True
    local_refusal: str = "only s3:// inputs are allowed here"
    # A local manifest is read by the command line itself, not by a worker: its lines are the inputs.
    local_manifests: bool = True
    max_bytes: int = DEFAULT_MAX_INPUT_BYTES

    @classmethod
    def deployed(cls, input_locations: tuple[InputLocation, ...], *, max_bytes: int = DEFAULT_MAX_INPUT_BYTES) -> InputPolicy:
        """The deployed functions' policy: S3 only, in ``input_locations`` and nothing else.

        The stack writes them from the list it grants the roles from, so the
        policy reaches exactly as far as the roles do (nothing implicit, not
        even the workspace bucket).
        """
        return cls(
            locations=tuple(input_locations),
            local=False,
            local_refusal="a deployment reads s3:// inputs only (in its input locations), never the function's own disk",
            local_manifests=False,
            max_bytes=max_bytes,
        )

    @classmethod
    def s3_workspace(cls, *, allow_local: bool, locations: tuple[InputLocation, ...] | None = None) -> InputPolicy:
        """The command line's policy for a workspace on S3: s3:// in ``locations`` (None: any bucket); local paths only when asked for."""
        return cls(
            locations=locations,
            local=allow_local,
            local_refusal="a workspace on S3 takes s3:// inputs (a worker on Lambda refuses local ones); "
            "--allow-local-inputs allows them for workers on this machine",
        )

    def manifest_refusal(self, name: str) -> str | None:
        """Why the manifest ``name`` may not be read, or None."""
        if name.startswith("s3://"):
            return self.refusal(name, literal=True)
        return None if self.local_manifests else f"manifest {shown(name)} is not an s3:// URI: {self.local_refusal}"

    def refusal(self, source: str, *, literal: bool = False) -> str | None:
        """Why ``source`` may not be named (or, ``literal``, read as it is: no glob), or None if it may.

        For a glob, the part before its first glob character is checked: a
        listing starts there, so every match lies inside with it.
        """
        if not source.startswith("s3://"):
            return None if self.local else f"{shown(source)} is not an s3:// URI: {self.local_refusal}"
        if self.locations is None:
            return None
        try:
            bucket, key = parse_s3_uri(source)
        except BadWorkspace as exc:
            return str(exc)
        # S3 keys are literal, but a '..' segment is what a proxy, a mount or an
        # SDK that tidies paths would resolve; such a key is never worth the doubt.
        if any(segment in (".", "..") for segment in key.split("/")):
            return f"{shown(source)}: a key with a '.' or '..' segment is not accepted as an input"
        head = key if literal else key[: min((key.find(c) for c in _GLOB_CHARS if c in key), default=len(key))]
        if any(location.holds(bucket, head) for location in self.locations):
            return None
        allowed = ", ".join(str(location) for location in self.locations) or "none"
        return f"{shown(source)} is outside the allowed input locations ({allowed})"

    def check_read(self, path: str) -> None:
        """Raise InputRefused, naming why, unless ``path`` may be read."""
        reason = self.refusal(path, literal=True)
        if reason:
            raise InputRefused(f"input refused: {reason}")

    def read_capped(self, path: str, stream: BinaryIO, size: int | None) -> bytes:
        """The bytes of ``stream``, the input ``path``, which says it holds ``size`` bytes (None: unknown).

        Raises InputTooLarge without reading when ``size`` is over the cap, and
        after reading at most one byte past it when the stream holds more than
        it said (a file that grew, a device). Reads on to the end otherwise, so
        that a stream that checks its length (botocore's) sees it end.
        """
        if size is not None and size > self.max_bytes:
            raise InputTooLarge(
                f"input too large: {path} is {size:,} bytes, over the input size cap of {self.max_bytes:,} bytes ({_RAISE_CAP})"
            )
        chunks: list[bytes] = []
        got = 0
        while got <= self.max_bytes:
            chunk = stream.read(self.max_bytes + 1 - got)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            got += len(chunk)
        raise InputTooLarge(f"input too large: {path} holds more than the input size cap of {self.max_bytes:,} bytes ({_RAISE_CAP})")


# The command line on a local workspace: anything the user's shell can name.
ANYTHING = InputPolicy()


def policy_to_json(policy: InputPolicy) -> str:
    """The policy as the processor host receives it on its command line: every field, the locations as URIs."""
    doc = {f.name: getattr(policy, f.name) for f in fields(policy)}
    doc["locations"] = None if policy.locations is None else [str(location) for location in policy.locations]
    return json.dumps(doc)


def policy_from_json(text: str) -> InputPolicy:
    doc = json.loads(text)
    locations = None if doc["locations"] is None else tuple(InputLocation.parse(item) for item in doc["locations"])
    return InputPolicy(**{**doc, "locations": locations})

"""The processor contract, the built-in processors and how a processor is named.

A processor is ``fn(group, ctx)``. ``group`` has ``hash`` and ``paths``;
``ctx`` tells the worker id, the attempt number and the deadline, and reads
inputs and writes the group's result object. A processor that raises has
used one attempt; s3wq catches it, never the other way round.
"""

from __future__ import annotations

import importlib
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from botocore.exceptions import BotoCoreError, ClientError

from . import layout
from .backends import Backend, S3Backend, make_s3_client, parse_s3_uri
from .errors import BadSource, ProcessorNotFound, StorageError
from .index import Group

Processor = Callable[[Group, "ProcessorContext"], Any]


@dataclass
class ProcessorContext:
    worker_id: str
    attempt: int
    deadline: float  # epoch seconds
    group: Group
    backend: Backend
    _s3: Any = field(default=None, repr=False)

    def remaining_seconds(self) -> float:
        return max(0.0, self.deadline - time.time())

    def _s3_client(self) -> Any:
        if self._s3 is None:
            self._s3 = self.backend.s3 if isinstance(self.backend, S3Backend) else make_s3_client()
        return self._s3

    def read_input(self, path: str) -> bytes:
        """The bytes of one input: an ``s3://`` URI or a local file path."""
        if path.startswith("s3://"):
            bucket, key = parse_s3_uri(path)
            try:
                return self._s3_client().get_object(Bucket=bucket, Key=key)["Body"].read()
            except (ClientError, BotoCoreError) as exc:
                raise StorageError(f"cannot read input {path}: {exc}") from exc
        if "://" in path:
            raise BadSource(f"unsupported input scheme in {path!r}")
        return Path(path).read_bytes()

    @property
    def result_key(self) -> str:
        return layout.result_key(self.group.hash)

    def write_result(self, records: Iterable[dict]) -> str:
        """Write the group's result as JSON Lines to ``results/output_<hash>.jsonl``; return its URI."""
        body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
        self.backend.write(self.result_key, body)
        return f"{self.backend.uri.rstrip('/')}/{self.result_key}"


def noop(group: Group, ctx: ProcessorContext) -> None:
    """Do nothing: measures the queue itself."""


def extract_text(group: Group, ctx: ProcessorContext) -> None:
    """Decode each input as UTF-8 text and write one JSON line per input."""
    records = []
    for path in group.paths:
        text = ctx.read_input(path).decode("utf-8", errors="replace")
        records.append({"path": path, "text": text, "chars": len(text)})
    ctx.write_result(records)


BUILTIN_PROCESSORS: dict[str, Processor] = {"noop": noop, "extract_text": extract_text}
_SPEC_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$")


def load_processor(spec: str) -> Processor:
    """A built-in name or ``module:function``; raise ProcessorNotFound naming the problem."""
    if spec in BUILTIN_PROCESSORS:
        return BUILTIN_PROCESSORS[spec]
    if not _SPEC_RE.match(spec or ""):
        names = ", ".join(sorted(BUILTIN_PROCESSORS))
        raise ProcessorNotFound(f"processor {spec!r} is neither built in ({names}) nor module:function")
    module_name, function_name = spec.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ProcessorNotFound(f"processor module {module_name!r} cannot be imported: {exc}") from exc
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ProcessorNotFound(f"processor {spec!r}: {module_name} has no function {function_name!r}")
    return function

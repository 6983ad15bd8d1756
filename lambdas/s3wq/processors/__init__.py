"""The processor contract, the built-in processors and how a processor is named.

A processor is ``fn(group, ctx)``. ``group`` has ``hash`` and ``paths``;
``ctx`` tells the worker id, the attempt number and the deadline, and reads
inputs and writes the group's result object. A processor that raises has
used one attempt; s3wq catches it, never the other way round.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import mimetypes
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from s3wq.errors import BadSource, BadWorkspace, InputNotFound, InputRefused, LeaseLost, ProcessorNotFound, StorageError
from s3wq.inputs import ANYTHING, InputPolicy
from s3wq.model import Group
from s3wq.store import Backend, S3Backend, layout, make_s3_client, parse_s3_uri

Processor = Callable[[Group, "ProcessorContext"], Any]
MAX_INPUT_ERRORS_KEPT = 100
_MISSING_INPUT_CODES = {"NoSuchKey", "404", "NoSuchBucket", "AccessDenied", "403"}


def _always_held() -> bool:
    return True


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
    input_errors: list[dict] = field(default_factory=list)
    input_error_count: int = 0

    def record_input_error(self, path: str, error: str) -> None:
        """Report an input this processor could not use, while the group as a whole succeeds.

        When the processor returns, the worker counts them in the group's
        done flag and lists them under ``input_errors/``, so ``s3wq status``
        and ``s3wq failures --inputs`` show them without reading any result.
        """
        self.input_error_count += 1
        if len(self.input_errors) < MAX_INPUT_ERRORS_KEPT:
            self.input_errors.append({"path": path, "error": str(error)[:500]})

    def remaining_seconds(self) -> float:
        return max(0.0, self.deadline - time.time())

    def claim_is_held(self) -> bool:
        """True while the run goes on and its claim is certainly held; False once the run has ended, whatever the lease says."""
        return not self._run_over and self._held()

    def end_run(self) -> None:
        """The runner's, as the processor returns or raises: the claim is the worker's alone from now on."""
        self._run_over = True

    def _s3_client(self) -> Any:
        if self._s3 is None:
            self._s3 = self.backend.s3 if isinstance(self.backend, S3Backend) else make_s3_client()
        return self._s3

    def read_input(self, path: str) -> bytes:
        """The bytes of one input: an ``s3://`` URI or a local file path.

        Raises InputRefused (an InputNotFound), reading nothing, for a path
        the input policy does not allow: on Lambda, a local path or another
        bucket, whatever the index says.
        """
        self.input_policy.check_read(path)
        if path.startswith("s3://"):
            try:
                bucket, key = parse_s3_uri(path)
            except BadWorkspace as exc:
                # A malformed row of the index is that input's error, not the whole group's failure.
                raise InputRefused(f"input refused: {exc}") from exc
            try:
                return self._s3_client().get_object(Bucket=bucket, Key=key)["Body"].read()
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in _MISSING_INPUT_CODES:
                    raise InputNotFound(f"input {path} does not exist or is not readable") from exc
                raise StorageError(f"cannot read input {path}: {exc}") from exc
            except BotoCoreError as exc:
                raise StorageError(f"cannot read input {path}: {exc}") from exc
        if "://" in path:
            raise BadSource(f"unsupported input scheme in {path!r}")
        try:
            return Path(path).read_bytes()
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
        if not self.claim_is_held():
            raise LeaseLost(f"the claim on group {self.group.hash} is no longer held; result not written")
        self.backend.write(self.result_key, body)
        return f"{self.backend.uri.rstrip('/')}/{self.result_key}"


def noop(group: Group, ctx: ProcessorContext) -> None:
    """Do nothing: measures the queue itself."""


_TEXT_SUFFIXES = {".txt", ".md", ".csv", ".json", ".jsonl", ".tsv", ".html", ".xml"}


def _content_type(path: str, data: bytes) -> str:
    if data.startswith(b"%PDF-") or path.lower().endswith(".pdf"):
        return "application/pdf"
    guessed, _ = mimetypes.guess_type(path, strict=False)
    if Path(path).suffix.lower() in _TEXT_SUFFIXES and not (guessed or "").startswith("text/"):
        return "text/plain"
    return guessed or "application/octet-stream"


def _pdf_text(data: bytes) -> tuple[str, int]:
    import pypdf  # imported on first use: it is most of a cold start otherwise
    from pypdf.errors import PyPdfError

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ExtractionFailed(f"not a readable PDF: {type(exc).__name__}: {exc}") from exc
    return "\n".join(pages), len(pages)


class ExtractionFailed(Exception):
    """One input could not be turned into text; it becomes an error record, not a failed group."""


def text(group: Group, ctx: ProcessorContext) -> None:
    """Extract the text of each input (PDF, or UTF-8 text) into one JSON line per input.

    A missing, corrupt or unsupported input gets a record with ``error``, is
    reported as an input error, and the group still completes; a storage
    failure raises, so the attempt is retried.
    """
    records = []
    for position, path in enumerate(group.paths):
        record: dict[str, Any] = {"id": f"{group.hash}:{position}", "source": path, "text": None}
        try:
            data = ctx.read_input(path)
        except InputNotFound as exc:
            ctx.record_input_error(path, str(exc))
            records.append({**record, "metadata": {}, "error": str(exc)})
            continue
        content_type = _content_type(path, data)
        metadata = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "content_type": content_type, "pages": None}
        try:
            if content_type == "application/pdf":
                record["text"], metadata["pages"] = _pdf_text(data)
            elif content_type.startswith("text/") or content_type == "application/json":
                try:
                    record["text"] = data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise ExtractionFailed(f"not UTF-8 text: {exc}") from exc
            else:
                raise ExtractionFailed(f"unsupported content type {content_type}")
        except ExtractionFailed as exc:
            ctx.record_input_error(path, str(exc))
            record["error"] = str(exc)
        records.append({**record, "metadata": metadata})
    ctx.write_result(records)


BUILTIN_PROCESSORS: dict[str, Processor] = {"noop": noop, "text": text}
_SPEC_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$")


def load_processor(spec: str) -> Processor:
    """A built-in name or ``module:function``; raise ProcessorNotFound naming the problem in one line.

    A module that fails to import (a syntax error, an import of its own that
    is missing, an exception at import) is named by file and line, the way a
    compiler would, not by a traceback through importlib.
    """
    if spec in BUILTIN_PROCESSORS:
        return BUILTIN_PROCESSORS[spec]
    if not _SPEC_RE.match(spec or ""):
        names = ", ".join(sorted(BUILTIN_PROCESSORS))
        raise ProcessorNotFound(f"processor {spec!r} is neither built in ({names}) nor module:function")
    module_name, function_name = spec.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.split(".")[0] == exc.name.split(".")[0] and module_name.startswith(exc.name):
            raise ProcessorNotFound(
                f"processor module {module_name!r} not found (looked in the current directory and on sys.path; "
                f"run from the folder that holds it, or add that folder to PYTHONPATH)"
            ) from None
        raise ProcessorNotFound(f"processor module {module_name!r} cannot be imported: {_where(exc)}{exc}") from None
    except SyntaxError as exc:
        raise ProcessorNotFound(f"{exc.filename}:{exc.lineno}: {type(exc).__name__}: {exc.msg}") from None
    except Exception as exc:  # noqa: BLE001 -- anything the module raises as it is imported is the user's to fix
        raise ProcessorNotFound(f"processor module {module_name!r} failed to import: {_where(exc)}{type(exc).__name__}: {exc}") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ProcessorNotFound(f"processor {spec!r}: {module_name} has no function {function_name!r}")
    return function


def _where(exc: BaseException) -> str:
    """``file:line: `` of the innermost frame of the user's code that raised, or nothing."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "importlib" not in f.filename]
    return f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""


def importable_from_current_directory() -> None:
    """Put the current directory first on ``sys.path``, as ``python -m`` does.

    A console script starts with its own bin directory there instead, so
    ``--processor myproc:fn`` run beside ``myproc.py`` would not be found.
    The processor host inherits this through PYTHONPATH.
    """
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)

"""What a count of groups does not show: groups done with input errors, and manifests with bad lines.

The deployed populate records each manifest it read with bad lines under
manifest_errors/, and a group's completion records the inputs its processor
could not use under input_errors/; these read those records, strictly as data.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from s3wq.ops.inspection import read_record
from s3wq.ops.status import listed_hashes
from s3wq.store import MAX_PARALLEL_REQUESTS, Backend, layout


def list_input_errors(backend: Backend) -> list[dict]:
    """Every group done with inputs its processor could not use: hash, how many, and the inputs with their errors."""
    hashes = sorted(listed_hashes(backend, layout.INPUT_ERRORS_PREFIX, layout.INPUT_ERRORS_SUFFIX))
    with ThreadPoolExecutor(max_workers=MAX_PARALLEL_REQUESTS, thread_name_prefix="s3wq-inputs") as pool:
        docs = pool.map(lambda h: read_record(backend, layout.input_errors_key(h)) or {}, hashes)
        return [{"hash": h, "input_errors": d.get("input_errors"), "inputs": d.get("inputs", [])} for h, d in zip(hashes, docs)]


# The status function's event ``{"input_errors": true}`` asks for these counts instead of the queue's (the state
# machine's CountInputErrors); the execution's output carries them under their names.
INPUT_ERRORS_EVENT_KEY = "input_errors"
INPUT_ERROR_COUNTS = ("input_error_groups", "input_errors")


def input_error_counts(backend: Backend) -> dict[str, int]:
    """``{input_error_groups, input_errors}``: the groups done with inputs their processor could not use, and those inputs.

    One listing, and one GET a group listed (MAX_PARALLEL_REQUESTS at a time), each record read strictly as data: a
    count that is not a whole number is taken from the inputs the record names. A record deleted between the listing
    and its read (a retry of its group read every input) counts for nothing.
    """
    hashes = listed_hashes(backend, layout.INPUT_ERRORS_PREFIX, layout.INPUT_ERRORS_SUFFIX)
    with ThreadPoolExecutor(max_workers=MAX_PARALLEL_REQUESTS, thread_name_prefix="s3wq-inputs") as pool:
        records = pool.map(lambda h: read_record(backend, layout.input_errors_key(h)), hashes)
        counts = [_input_error_count(record) for record in records if record is not None]
    return dict(zip(INPUT_ERROR_COUNTS, (len(counts), sum(counts)), strict=True))


def _input_error_count(record: dict) -> int:
    count = record.get("input_errors")
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        return count
    inputs = record.get("inputs")
    return len(inputs) if isinstance(inputs, list) else 0


# Manifests whose bad lines status reads and shows, at most.
_MANIFEST_ERRORS_SHOWN = 20
# Bad lines of each of them shown (its record lists up to a thousand), and how much of each reason.
BAD_LINES_SHOWN = 3
_REASON_CHARS = 200


def manifest_error_keys(backend: Backend) -> list[str]:
    """The keys of the records the deployed populate wrote under manifest_errors/, sorted: one LIST a thousand records."""
    return sorted(k for k in backend.list_keys(layout.MANIFEST_ERRORS_PREFIX) if k.endswith(".json"))


def read_manifest_errors(backend: Backend, key: str) -> dict:
    """One manifest's error record: its manifest, how many bad lines, the first BAD_LINES_SHOWN of them, the record's URI.

    The record is read strictly as data: anything else than populate's
    shape (written by hand, cut short) leaves the fields it lacks None.
    """
    doc = read_record(backend, key) or {}
    listed = doc.get("bad_lines")
    first = [
        {"line": b.get("line"), "reason": str(b.get("reason"))[:_REASON_CHARS]}
        for b in (listed if isinstance(listed, list) else [])[:BAD_LINES_SHOWN]
        if isinstance(b, dict)
    ]
    return {
        "manifest": doc.get("manifest"),
        "bad_lines": doc.get("bad_line_count"),
        "first_bad_lines": first,
        "record": f"{backend.uri.rstrip('/')}/{key}",
    }


def manifest_problems(backend: Backend, keys: list[str] | None = None) -> dict:
    """How many manifests have bad lines, and the first _MANIFEST_ERRORS_SHOWN records (one GET each)."""
    keys = manifest_error_keys(backend) if keys is None else keys
    shown = [read_manifest_errors(backend, k) for k in keys[:_MANIFEST_ERRORS_SHOWN]]
    return {"manifests_with_bad_lines": len(keys), "manifest_errors": shown}


class ManifestErrorWatch:
    """The manifest-error records as a watch finds them: one LIST a poll, and one GET for each record not seen yet.

    A record rewritten under the same name while watching (the manifest
    uploaded again, still with bad lines) is not read again; one that goes
    (an upload with no bad line clears it) is forgotten, so that a later one
    under its name is shown.
    """

    def __init__(self, backend: Backend):
        self.backend = backend
        self.count = 0
        self._records: dict[str, dict] = {}

    def poll(self) -> list[dict]:
        """The records that appeared since the last poll."""
        keys = manifest_error_keys(self.backend)
        self.count = len(keys)
        shown = keys[:_MANIFEST_ERRORS_SHOWN]
        for gone in set(self._records) - set(shown):
            del self._records[gone]
        new = [k for k in shown if k not in self._records]
        for key in new:
            self._records[key] = read_manifest_errors(self.backend, key)
        return [self._records[k] for k in new]

    def problems(self) -> dict:
        """As :func:`manifest_problems`, from what the polls found."""
        return {"manifests_with_bad_lines": self.count, "manifest_errors": [self._records[k] for k in sorted(self._records)]}


def workspace_problems(backend: Backend) -> dict:
    """What a count of groups does not show: groups done with input errors, manifests with bad lines.

    Two listings, and a read of each manifest's error record (the first
    _MANIFEST_ERRORS_SHOWN).
    """
    input_error_groups = sum(1 for _ in listed_hashes(backend, layout.INPUT_ERRORS_PREFIX, layout.INPUT_ERRORS_SUFFIX))
    return {"input_error_groups": input_error_groups, **manifest_problems(backend)}

"""The status a count returns, typed: its document is the status Lambda's answer, and the state machine reads its fields by path.

The state machine's code (the CDK construct under infra/) names status fields
in JSONPaths such as ``$.status.remaining``; each must be a field of
QueueStatus, or a renamed field would leave the drain loop reading nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from s3wq.index import WorkIndex
from s3wq.ops.status import STATUS_RESULT_PATH, QueueStatus, queue_status, status_path
from s3wq.store import LocalBackend

INFRA_DIR = Path(__file__).resolve().parents[2] / "infra"
# The keys of the status Lambda's answer, in its order, as deployed state machines read it.
DOCUMENT_KEYS = [
    "groups",
    "paths",
    "done",
    "failed",
    "locked",
    "claimed_ahead",
    "pending",
    "remaining",
    "finished",
    "released",
    "wait_seconds",
]


def state_machine_sources() -> dict[Path, str]:
    """The infra modules that name a status path, wherever the construct's package sits under infra/."""
    found = {path: path.read_text() for path in sorted(INFRA_DIR.rglob("*.py")) if STATUS_RESULT_PATH in path.read_text()}
    assert found, f"no module under {INFRA_DIR} names {STATUS_RESULT_PATH}: has the state machine moved?"
    return found


def test_every_status_path_of_the_state_machine_names_a_field_of_queue_status():
    named = {
        (path.name, field)
        for path, source in state_machine_sources().items()
        for field in re.findall(re.escape(STATUS_RESULT_PATH) + r"\.(\w+)", source)
    }
    assert named, "the state machine reads no status field"
    unknown = sorted((where, field) for where, field in named if field not in QueueStatus.names())
    assert not unknown, f"status paths that name no field of QueueStatus: {unknown}"
    assert all(status_path(field) == f"$.status.{field}" for _, field in named)


def test_the_status_task_puts_its_answer_where_the_paths_look():
    sources = "\n".join(state_machine_sources().values())
    assert f'result_path="{STATUS_RESULT_PATH}"' in sources


def test_a_path_of_a_field_that_does_not_exist_is_refused():
    assert status_path("remaining") == "$.status.remaining"
    with pytest.raises(KeyError, match="no status field 'remainder'"):
        status_path("remainder")


def test_the_document_has_the_keys_of_the_status_lambda_in_their_order(tmp_path):
    backend = LocalBackend(str(tmp_path / "ws"))
    WorkIndex(backend).populate([f"/in/{n}" for n in range(5)], 2)

    status = queue_status(backend)

    assert list(status.as_document()) == DOCUMENT_KEYS == list(QueueStatus.names())
    assert json.loads(json.dumps(status.as_document())) == {
        **dict.fromkeys(DOCUMENT_KEYS, 0),
        "groups": 3,
        "paths": 5,
        "pending": 3,
        "remaining": 3,
    }
    # Read as the document, by key and as a whole, as callers of the dict it was do.
    assert status["pending"] == status.pending == 3 and status == status.as_document()
    with pytest.raises(FrozenInstanceError):
        status.done = 1  # type: ignore[misc]


def test_a_document_read_back_is_the_status_and_missing_counts_are_none():
    status = QueueStatus.read(dict(zip(DOCUMENT_KEYS, range(11))))
    assert status.as_document() == dict(zip(DOCUMENT_KEYS, range(11)))
    partial = QueueStatus.read({"groups": 4, "paths": 8, "done": 1, "failed": 1, "locked": 1, "pending": 1, "remaining": 2})
    assert (partial.finished, partial.claimed_ahead, partial.released, partial.wait_seconds) == (2, 0, 0, 0)

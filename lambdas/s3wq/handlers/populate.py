"""Populate Lambda: index a manifest uploaded under ``WORKSPACE/manifests/``, then start the workers.

Events:

* S3 ``ObjectCreated:*`` notifications (several records per event; keys
  arrive URL-encoded, ``+`` for a space); ``s3:TestEvent`` is ignored.
* A direct invocation: ``{"sources": ["s3://b/pdfs/*.pdf", "@s3://b/list.txt"], "group_size": 10}``.

S3 delivers events at least once. Populating is idempotent per path, and the
execution started for a manifest is named from the manifest's key and ETag,
so a repeated event adds nothing and starts nothing new.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools.utilities.data_classes import S3Event
from botocore.exceptions import ClientError

from s3wq.errors import BadInput, BadSource, StorageError
from s3wq.handlers.runtime import Runtime, logger, metrics, runtime, tracer
from s3wq.index import WorkIndex
from s3wq.index.manifests import deployed_limits
from s3wq.index.sources import MAX_BAD_LINES_KEPT, SourceExpander
from s3wq.store import layout

MANIFESTS_DIR = layout.MANIFESTS_DIR
# Step Functions execution names: 1-80 characters of [A-Za-z0-9_-].
_EXECUTION_NAME_PREFIX = "manifest-"


def execution_name(bucket: str, key: str, etag: str) -> str:
    """The same manifest version always maps to the same execution name."""
    digest = hashlib.sha1(f"{bucket}\0{key}\0{etag.strip(chr(34))}".encode()).hexdigest()
    return _EXECUTION_NAME_PREFIX + digest


def start_workers(rt: Runtime, name: str) -> dict:
    """Start the state machine once per name; a repeat reports the existing execution."""
    config = rt.config
    if not (config.state_machine_arn and config.auto_start):
        return {"execution_arn": None, "execution_started": False}
    arn = config.state_machine_arn.replace(":stateMachine:", ":execution:", 1) + f":{name}"
    # StartExecution with a running execution's name and input returns that
    # execution as if it had started it; ask first so a redelivered event
    # says truthfully that it started nothing.
    try:
        rt.stepfunctions.describe_execution(executionArn=arn)
        logger.info("execution already started for this manifest version", extra={"execution_arn": arn})
        return {"execution_arn": arn, "execution_started": False}
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ExecutionDoesNotExist":
            raise
    try:
        response = rt.stepfunctions.start_execution(
            stateMachineArn=config.state_machine_arn, name=name, input=json.dumps({"workers": config.workers})
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
            raise
        return {"execution_arn": arn, "execution_started": False}
    return {"execution_arn": response["executionArn"], "execution_started": True}


# A manifest's error record lists this many bad lines at most (all are counted): as many as expanding keeps.
MAX_BAD_LINES_RECORDED = MAX_BAD_LINES_KEPT
# The share of the invocation's remaining time that expanding a manifest may take; the rest is for
# indexing what it found and writing the record. Past it populate stops with a reason (line 0)
# instead of being killed at its timeout with nothing recorded (and retried twice by S3).
EXPAND_SHARE_OF_REMAINING_TIME = 0.7


def expand_deadline(context: Any) -> float:
    """The time.monotonic() by which expanding must be done, from the Lambda context's remaining time."""
    return time.monotonic() + EXPAND_SHARE_OF_REMAINING_TIME * context.get_remaining_time_in_millis() / 1000


def record_manifest_errors(
    rt: Runtime, manifest_name: str, manifest_uri: str, bad_lines: list[dict], count: int | None = None
) -> str | None:
    """Write the manifest's bad lines to ``manifest_errors/<name>.json`` (where ``s3wq status`` finds them); its URI.

    ``count``: how many bad lines in all, when ``bad_lines`` holds only the first of them.
    A manifest with none clears the record of an earlier upload under the same name.
    """
    try:
        key = layout.manifest_errors_key(manifest_name)
    except BadInput as exc:  # a name S3 allows and a local workspace could not hold
        logger.warning("manifest errors not recorded", extra={"manifest": manifest_uri, "error": str(exc)})
        return None
    if not bad_lines:
        rt.backend.delete(key)
        return None
    count = len(bad_lines) if count is None else count
    doc = {"manifest": manifest_uri, "bad_line_count": count, "bad_lines": bad_lines[:MAX_BAD_LINES_RECORDED]}
    rt.backend.write(key, json.dumps(doc, ensure_ascii=False).encode("utf-8"))
    return f"{rt.backend.uri.rstrip('/')}/{key}"


def populate_sources(rt: Runtime, sources: list[str], group_size: int, *, deadline: float | None = None) -> dict:
    """Index ``sources`` (all-or-nothing past a limit: ExpansionLimitReached, a BadSource, and nothing indexed).

    ``deadline``: the time.monotonic() by which expanding must be done (expand_deadline).
    """
    # The deployment's input policy: S3 only, in the workspace bucket and inputBuckets; a manifest
    # line naming a local path or another bucket is a bad line, and nothing it names is looked at.
    # A glob over the workspace bucket never matches the workspace's own keys.
    expander = SourceExpander(
        rt.s3,
        check=rt.config.check_inputs,
        policy=rt.config.input_policy,
        exclude_s3=rt.workspace_bucket_and_prefix,
        limits=deployed_limits(deadline),
    )
    expansion = expander.expand(sources, strict=False)
    bad_lines = [{"manifest": b.manifest, "line": b.line_number, "reason": b.reason} for b in expansion.bad_lines]
    for bad in bad_lines:
        logger.warning("bad manifest line", extra=bad)
    result = WorkIndex(rt.backend).populate(expansion.paths, group_size) if expansion.paths else None
    return {
        "added_paths": result.added_paths if result else 0,
        "added_groups": result.added_groups if result else 0,
        "already_indexed": result.already_indexed if result else 0,
        "bad_lines": bad_lines,
        "bad_line_count": expansion.bad_line_count,
    }


def _manifest_record(rt: Runtime, record: Any, context: Any) -> dict:
    bucket = record.s3.bucket.name
    # S3 URL-encodes keys in events ("+" for a space); Powertools' record
    # accessor hands the key over as sent.
    key = unquote_plus(record.s3.get_object.key)
    etag = record.s3.get_object.etag or ""
    uri = f"s3://{bucket}/{key}"
    workspace = rt.workspace_bucket_and_prefix
    manifests_prefix = f"{workspace[1]}/{MANIFESTS_DIR}" if workspace and workspace[1] else MANIFESTS_DIR
    if not record.event_name.startswith("ObjectCreated:"):
        return {"manifest": uri, "ignored": f"event {record.event_name}"}
    if workspace is None or bucket != workspace[0] or not key.startswith(manifests_prefix) or key.endswith("/"):
        return {"manifest": uri, "ignored": f"not under s3://{workspace[0] if workspace else '?'}/{manifests_prefix}"}
    try:
        outcome = populate_sources(rt, [f"@{uri}"], rt.config.group_size, deadline=expand_deadline(context))
    except BadSource as exc:
        # e.g. the manifest was deleted before we read it: report, do not retry forever
        logger.error("manifest unreadable", extra={"manifest": uri, "error": str(exc)})
        record_manifest_errors(rt, key[len(manifests_prefix) :], uri, [{"manifest": uri, "line": 0, "reason": str(exc)}])
        return {"manifest": uri, "error": str(exc)}
    # Before the execution starts: `s3wq status` shows these from the first poll.
    try:
        errors_uri = record_manifest_errors(rt, key[len(manifests_prefix) :], uri, outcome["bad_lines"], outcome["bad_line_count"])
    except StorageError as exc:
        # The lines are in this log; the paths indexed must still be run.
        logger.error("bad manifest lines not recorded", extra={"manifest": uri, "error": str(exc)})
        errors_uri = None
    if errors_uri:
        outcome["bad_lines_recorded_in"] = errors_uri
    metrics.add_metric(name="PathsIndexed", unit="Count", value=outcome["added_paths"])
    return {"manifest": uri, **outcome, **start_workers(rt, execution_name(bucket, key, etag))}


def s3_records(event: dict) -> list[dict]:
    """The S3 notification records of an event, unwrapping S3 -> SNS -> Lambda; BadInput for anything else."""
    records = event["Records"]
    if not isinstance(records, list):
        raise BadInput("'Records' must be a list of S3 event records")
    found = []
    for position, record in enumerate(records):
        if not isinstance(record, dict):
            raise BadInput(f"record {position} is not an object")
        if record.get("EventSource") == "aws:sns":
            try:
                message = json.loads(record["Sns"]["Message"])
            except (KeyError, TypeError, ValueError):
                raise BadInput(f"record {position}: an SNS record whose Message is not JSON") from None
            if isinstance(message, dict) and message.get("Event") == "s3:TestEvent":
                continue
            if not isinstance(message, dict) or "Records" not in message:
                raise BadInput(f"record {position}: an SNS message that does not carry S3 event records")
            found.extend(s3_records(message))
            continue
        if record.get("eventSource") != "aws:s3" or not isinstance(record.get("s3"), dict):
            source = record.get("eventSource") or record.get("EventSource") or "unknown"
            raise BadInput(f"record {position} comes from {source!r}, not an S3 notification (aws:s3)")
        found.append(record)
    return found


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: Any, context: Any) -> dict:
    rt = runtime()
    if not isinstance(event, dict):
        raise BadInput(f"populate event must be an object, got {type(event).__name__}")
    if event.get("Event") == "s3:TestEvent":
        logger.info("ignoring s3:TestEvent")
        return {"ignored": "s3:TestEvent"}
    if "Records" in event:
        return {"manifests": [_manifest_record(rt, record, context) for record in S3Event({"Records": s3_records(event)}).records]}
    if "sources" in event:
        sources = event["sources"]
        if not isinstance(sources, list) or not sources or not all(isinstance(s, str) for s in sources):
            raise BadInput("'sources' must be a non-empty list of strings")
        group_size = event.get("group_size", rt.config.group_size)
        if not isinstance(group_size, int) or isinstance(group_size, bool) or group_size < 1:
            raise BadInput(f"'group_size' must be a positive integer, got {group_size!r}")
        outcome = populate_sources(rt, sources, group_size, deadline=expand_deadline(context))
        name = "sources-" + hashlib.sha1(json.dumps(sorted(sources)).encode("utf-8")).hexdigest()
        return (
            {**outcome, **start_workers(rt, name)}
            if outcome["added_paths"]
            else {**outcome, "execution_arn": None, "execution_started": False}
        )
    raise BadInput(f"unrecognised populate event (keys: {sorted(event)[:5]}); expected S3 event Records or 'sources'")

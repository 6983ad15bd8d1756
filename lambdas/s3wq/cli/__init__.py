"""The ``s3wq`` command line: populate, status, work, requeue-failed, and the local cloud.

Exit codes: 0 success, 1 the store or the run failed, 2 bad input (nothing changed).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from botocore.exceptions import NoCredentialsError, NoRegionError

from s3wq import __version__
from s3wq.cli.execution import DEFAULT_STACK_NAME, concurrency_warning, find_stack, follow_execution, start_execution, workspace_backend
from s3wq.cli.progress import RunProgress
from s3wq.config import (
    DEFAULT_BREAKER_GROUPS,
    DEFAULT_GROUP_SIZE,
    DEFAULT_GROUP_TIMEOUT_SECONDS,
    DEFAULT_LEASE_SECONDS,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PROCESSOR,
    DEFAULT_TIME_LIMIT_SECONDS,
    FOREIGN_LOCK_TIMEOUT_SECONDS,
    MAX_RETRY_BACKOFF_SECONDS,
    RETRY_BACKOFF_SECONDS,
    WorkerSettings,
)
from s3wq.errors import BadInput, BadSource, ConfigError, NothingIndexed, S3wqError
from s3wq.host.runners import HostRunner
from s3wq.host.sandbox import ProcessorHost
from s3wq.host.stopping import GracefulStop
from s3wq.index import WorkIndex
from s3wq.inputs import ANYTHING, InputLocation, InputPolicy, parse_locations
from s3wq.ops.operations import (
    ManifestErrorWatch,
    ResetResult,
    done_groups,
    failed_groups,
    inspect_group,
    list_failures,
    list_input_errors,
    manifest_error_keys,
    manifest_problems,
    release_locks,
    requeue_failed,
    reset_groups,
    workspace_problems,
)
from s3wq.ops.sources import SourceExpander
from s3wq.ops.status import queue_status
from s3wq.processors import BUILTIN_PROCESSORS, importable_from_current_directory, load_processor
from s3wq.store import S3Backend, layout, open_backend, request_counts, uri_mistake
from s3wq.wording import plural as _plural
from s3wq.worker import Worker

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2

WORKSPACE_HELP = "s3://bucket/prefix, or a local directory"


def _backend(uri: str):
    backend = open_backend(uri)
    backend.check()
    return backend


def _printable(value: object) -> str:
    """``value`` as text with every character a terminal would act on escaped (``\\x1b``, ``\\x9b``, ``\\n``).

    Paths, errors, worker ids and tracebacks come from the workspace, which
    anyone who may write an index, a manifest or a record fills: none of
    their escape sequences may reach the screen. JSON needs none of this
    (json.dumps escapes control characters itself), so --json stays exact.
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(value))


def _printable_lines(text: str) -> str:
    """``text``'s lines, each made printable: the newlines between them are the command's own."""
    return "\n".join(_printable(line) for line in text.split("\n"))


def _emit(args: argparse.Namespace, doc: dict, human: Callable[[dict], str]) -> None:
    print(json.dumps(doc, ensure_ascii=False) if args.json else _printable_lines(human(doc)))


def _with_requests(backend, doc: dict) -> dict:
    if isinstance(backend, S3Backend):
        doc["s3_requests"] = request_counts(backend.s3)
    return doc


def _input_policy(args: argparse.Namespace, backend) -> InputPolicy:
    """What populate may index and a worker of this command line may read.

    On S3 the workers may be Lambdas, which read no local file, and the index
    is shared with whoever may write the workspace: local inputs only when
    asked for, and only the buckets of --input-locations when it is given
    (without it, any bucket this machine's credentials may read). A local
    workspace is the user's own: anything their shell can name.
    """
    if isinstance(backend, S3Backend):
        return InputPolicy.s3_workspace(allow_local=args.allow_local_inputs, locations=args.input_locations)
    return ANYTHING if args.input_locations is None else InputPolicy(locations=args.input_locations)


def cmd_populate(args: argparse.Namespace) -> int:
    backend = _backend(args.workspace)
    s3_client = backend.s3 if isinstance(backend, S3Backend) else None
    # A local workspace inside a folder being indexed must not index its own files.
    exclude = None if isinstance(backend, S3Backend) else backend.uri
    policy = _input_policy(args, backend)
    for source in args.sources:
        # A manifest's own name, mistyped (@s3:/b/list.txt), must not read as a local file that is missing.
        mistake = uri_mistake(source[1:]) if source.startswith("@") else None
        if mistake:
            raise BadSource(f"manifest {source[1:]!r}: {mistake}")
    # strict: every bad line of every manifest is reported at once (BadManifestLines), and nothing is written.
    expansion = SourceExpander(s3_client, check=not args.no_check, exclude=exclude, policy=policy).expand(args.sources, strict=True)
    if not expansion.paths:
        raise BadInput("the sources name no paths")
    progress = None if args.json or not sys.stderr.isatty() else (lambda msg: print(f"s3wq: {msg}", file=sys.stderr))
    result = WorkIndex(backend).populate(expansion.paths, args.group_size, progress=progress)
    doc = _with_requests(backend, asdict(result))
    _emit(
        args,
        doc,
        lambda d: (
            f"added {_plural(d['added_paths'], 'path')} in {_plural(d['added_groups'], 'group')} "
            f"({d['already_indexed']} already indexed); index now holds {_plural(d['paths'], 'path')} in {_plural(d['groups'], 'group')}"
        ),
    )
    return EXIT_OK


def _counts_line(status: dict) -> str:
    # finished and wait_seconds are for scripts and the state machine (--json).
    counts = {k: str(status[k]) for k in ("groups", "paths", "done", "failed", "locked", "pending", "remaining")}
    if status.get("claimed_ahead"):
        # One worker, two locks: the group it runs (or waits to retry), and the next, claimed ahead of it and not started.
        counts["locked"] += f" ({status['claimed_ahead']} claimed ahead, not started)"
    return "  ".join(f"{k}={v}" for k, v in counts.items())


def _status_text(doc: dict, workspace: str) -> str:
    lines = [_counts_line(doc)]
    if doc.get("input_error_groups"):
        lines.append(
            f"{_plural(doc['input_error_groups'], 'done group')} had inputs the processor could not use: s3wq failures {workspace} --inputs"
        )
    lines.extend(_manifest_problems_lines(doc))
    return "\n".join(lines)


def _manifest_errors_lines(m: dict) -> list[str]:
    """One manifest's record: where it is, how many bad lines, and the first few with their reasons."""
    count = m["bad_lines"] or 0
    lines = [f"manifest {_printable(m['manifest'])}: {_plural(count, 'bad line')} skipped, listed in {_printable(m['record'])}"]
    lines.extend(f"  line {_printable(b['line'])}: {_printable(b['reason'])}" for b in m.get("first_bad_lines", []))
    if count > len(m.get("first_bad_lines", [])):
        lines.append(f"  ... and {_plural(count - len(m.get('first_bad_lines', [])), 'more bad line')} in the record")
    return lines


def _manifest_problems_lines(doc: dict) -> list[str]:
    lines = [line for m in doc.get("manifest_errors", []) for line in _manifest_errors_lines(m)]
    hidden = doc.get("manifests_with_bad_lines", 0) - len(doc.get("manifest_errors", []))
    if hidden > 0:
        lines.append(f"... and {_plural(hidden, 'more manifest')} with bad lines")
    return lines


def _nothing_indexed(backend, problems: dict) -> NothingIndexed:
    lines = [
        f"no index at {backend.uri}: populate indexed nothing, and rejected lines of "
        f"{_plural(problems['manifests_with_bad_lines'], 'manifest')}:",
        *(f"  {line}" for line in _manifest_problems_lines(problems)),
        "fix the manifest and upload it again (an upload with no bad line clears its record)",
    ]
    return NothingIndexed("\n".join(lines), problems)


def _require_index(backend) -> None:
    """NoIndex (exit 2) if nothing was populated; NothingIndexed (exit 1) if populate ran and rejected every line it read.

    Costs one or two HEADs with an index; without one, a LIST of
    manifest_errors/ and a GET per record.
    """
    index = WorkIndex(backend)
    if index.exists():
        return
    keys = manifest_error_keys(backend)
    # The deployed populate writes the index before a manifest's record, so
    # a record found with no index after it is a manifest none of whose lines was usable.
    if keys and not index.exists():
        raise _nothing_indexed(backend, manifest_problems(backend, keys))
    index.require()


def _indexed_backend(uri: str):
    """The workspace's backend; NoIndex (exit 2) if nothing was populated there."""
    backend = _backend(uri)
    WorkIndex(backend).require()
    return backend


def _counted(backend) -> dict:
    doc = queue_status(backend)
    if doc["groups"] == 0:
        # Only an empty count pays for the check: a typo must not read as a finished run.
        _require_index(backend)
    return doc


def _wait_for_index(backend, interval: float, errors: ManifestErrorWatch) -> None:
    """Poll until an index exists; NothingIndexed once a record shows that populate indexed nothing.

    A poll costs a HEAD or two and a LIST of manifest_errors/.
    """
    announced = False
    index = WorkIndex(backend)
    while not index.exists():
        if errors.poll() and not index.exists():  # the index goes first: see _require_index
            raise _nothing_indexed(backend, errors.problems())
        if not announced:
            print(f"s3wq: waiting for an index at {backend.uri} (populate has not run yet)", file=sys.stderr, flush=True)
            announced = True
        time.sleep(interval)


def cmd_status(args: argparse.Namespace) -> int:
    backend = _backend(args.workspace)
    if args.wait_for_index and not args.watch:
        raise BadInput("--wait-for-index goes with --watch")
    try:
        return _status(args, backend)
    except NothingIndexed as exc:
        if args.json:
            print(json.dumps({"workspace": backend.uri, "indexed": False, **exc.problems}, ensure_ascii=False), flush=True)
        raise


def _status(args: argparse.Namespace, backend) -> int:
    if not args.watch:
        doc = _counted(backend)
        doc.update(workspace_problems(backend))
        _emit(args, doc, lambda d: _status_text(d, args.workspace))
        return EXIT_OK
    # Manifest errors are shown as they appear: a LIST of manifest_errors/ a
    # poll, and a GET for each record not seen before.
    errors = ManifestErrorWatch(backend)
    if args.wait_for_index:
        _wait_for_index(backend, args.interval, errors)
    # --json --watch: one JSON line per poll, for scripts; otherwise the progress display.
    progress = None if args.json else RunProgress()
    try:
        while True:
            doc = _counted(backend)
            appeared = errors.poll()
            if progress:
                progress.update(doc)
                for m in appeared:
                    progress.note("\n".join(_manifest_errors_lines(m)))
            else:
                print(json.dumps({**doc, **errors.problems()}, ensure_ascii=False), flush=True)
            if doc["remaining"] == 0 and doc["locked"] == 0:
                break
            time.sleep(args.interval)
    finally:
        if progress:
            progress.stop()
    if not args.json:
        doc.update(workspace_problems(backend))
        print(_printable_lines(_status_text(doc, args.workspace)))
    return EXIT_OK if doc["failed"] == 0 else EXIT_FAILED


def cmd_start(args: argparse.Namespace) -> int:
    import boto3

    from s3wq.store import make_s3_client

    stack = find_stack(boto3.client("cloudformation"), args.stack)
    sfn = boto3.client("stepfunctions")
    if stack.max_workers is not None and args.workers > stack.max_workers:
        print(
            f"s3wq: warning: --workers {args.workers} is more than the stack's maxWorkers ({stack.max_workers}); "
            f"the execution runs {stack.max_workers} (redeploy with -c maxWorkers=N for more)",
            file=sys.stderr,
        )
    runs = min(args.workers, stack.max_workers or args.workers)
    warning = concurrency_warning(boto3.client("lambda"), runs)
    if warning:
        print(f"s3wq: warning: {warning}", file=sys.stderr)
    execution_arn = start_execution(sfn, stack.state_machine_arn, workers=args.workers, failure_tolerance=args.failure_tolerance)
    if not args.wait:
        _emit(args, {"execution_arn": execution_arn, "workspace": stack.workspace}, lambda d: f"started {d['execution_arn']}")
        return EXIT_OK
    if not args.json:
        print(f"started {execution_arn}", flush=True)
    backend = workspace_backend(stack.workspace, make_s3_client())
    description, status = follow_execution(sfn, execution_arn, backend, show=not args.json)
    output = json.loads(description.get("output") or "null")
    doc = {
        "execution_arn": execution_arn,
        "execution_status": description["status"],
        "error": description.get("error"),
        "cause": description.get("cause"),
        "output": output,
        "status": status,
    }
    _emit(
        args,
        doc,
        lambda d: (
            f"{d['execution_status']}"
            + (f" ({d['error']}: {d['cause']})" if d["error"] else "")
            + f"; done {status['done']}/{status['groups']}, failed {status['failed']}, remaining {status['remaining']}"
        ),
    )
    return EXIT_OK if description["status"] == "SUCCEEDED" else EXIT_FAILED


# Lines of a failure's traceback shown without --json or -v: where it was raised.
_TRACEBACK_TAIL_LINES = 6


def _frame_line(frame: dict | None) -> str | None:
    """``at failproc.py:12 in process: data = json.loads(raw)``: the processor's own line that the error came through."""
    if not frame:
        return None
    return _printable(f"at {frame['file']}:{frame['line']} in {frame['function']}" + (f": {frame['code']}" if frame.get("code") else ""))


def cmd_failures(args: argparse.Namespace) -> int:
    backend = _indexed_backend(args.workspace)
    if args.inputs:
        groups = list_input_errors(backend)

        def inputs_text(d: dict) -> str:
            lines = [f"{_plural(len(d['groups']), 'done group')} with inputs the processor could not use"]
            for g in d["groups"]:
                lines.append(f"{g['hash']}  {_plural(g['input_errors'] or 0, 'input')}:")
                lines.extend(f"    {_printable(i.get('path'))}: {_printable(i.get('error'))}" for i in g["inputs"])
            return "\n".join(lines)

        _emit(args, {"groups": groups}, inputs_text)
        return EXIT_OK
    failures = list_failures(backend)
    verbose = getattr(args, "verbose", False)

    def human(d: dict) -> str:
        lines = [_plural(len(d["failures"]), "failed group")]
        for f in d["failures"]:
            lines.append(f"{f['hash']}  attempts={f['attempts']}  kind={_printable(f['kind'])}  {_printable(f['error'])}")
            lines.extend(f"    {_printable(p)}" for p in f["paths"])
            # The user's own line first: the end of the stack is often all library code (json/decoder.py).
            at = _frame_line(f.get("error_frame"))
            if at:
                lines.append(f"    {at}")
            if f.get("traceback"):
                tb = f["traceback"].rstrip().splitlines()
                shown = tb if verbose else tb[-_TRACEBACK_TAIL_LINES:]
                lines.append(
                    "    traceback" + ("" if verbose or len(tb) <= len(shown) else f" (last {len(shown)} lines; -v for all)") + ":"
                )
                lines.extend(f"      {t}" for t in shown)
        return "\n".join(lines)

    _emit(args, {"failures": failures}, human)
    return EXIT_OK


def cmd_inspect(args: argparse.Namespace) -> int:
    doc = inspect_group(_indexed_backend(args.workspace), args.hash)

    def human(d: dict) -> str:
        ahead_of = (d["lock"] or {}).get("claimed_ahead_of")
        state = d["state"] + (f" (claimed ahead of group {ahead_of}, which its worker still holds: not started)" if ahead_of else "")
        lines = [f"group {d['hash']}: {_printable(state)}", "paths:", *(f"  {_printable(p)}" for p in d["paths"])]
        lock = d["lock"]
        lines.append(
            "lock: none"
            if lock is None
            else "lock: " + ", ".join(f"{k}={_printable(v)}" for k, v in lock.items() if v is not None and v is not False)
        )
        for name in ("done", "failed"):
            if d[name] is not None:
                lines.append(
                    f"{name}: "
                    + ", ".join(f"{k}={_printable(v)}" for k, v in d[name].items() if k not in ("paths", "traceback", "error_frame"))
                )
        at = _frame_line((d["failed"] or {}).get("error_frame"))
        if at:
            lines.append(at)
        if d["failed"] and d["failed"].get("traceback"):
            lines.append("traceback:")
            lines.extend(f"  {t}" for t in d["failed"]["traceback"].rstrip().splitlines())
        if d.get("input_errors"):
            lines.append(f"input errors: {d['input_errors'].get('input_errors')}")
            lines.extend(f"  {_printable(i.get('path'))}: {_printable(i.get('error'))}" for i in d["input_errors"].get("inputs", []))
        result = d["result"]
        lines.append(
            "result: none"
            if result is None
            else f"result: {result['uri']} ({_plural(result['records'], 'record')}, {_plural(result['bytes'], 'byte')})"
        )
        return "\n".join(lines)

    _emit(args, doc, human)
    return EXIT_OK


def cmd_work(args: argparse.Namespace) -> int:
    settings = WorkerSettings(
        time_limit=args.time_limit,
        lease=args.lease,
        foreign_lock_timeout=args.foreign_lock_timeout,
        max_attempts=args.max_attempts,
        safety_margin=args.safety_margin,
        retry_backoff=args.retry_backoff,
        breaker_groups=args.breaker,
        group_timeout=args.group_timeout,
    )
    if (args.worker_index is None) != (args.workers is None):
        raise BadInput("--worker-index and --workers go together")
    if args.workers is not None and not 0 <= args.worker_index < args.workers:
        raise BadInput(f"--worker-index must be in [0, {args.workers}), got {args.worker_index}")
    position = None if args.workers is None else args.worker_index / args.workers
    backend = _backend(args.workspace)
    worker_id = args.worker_id or f"w-{uuid.uuid4().hex[:8]}"
    importable_from_current_directory()
    # Whatever the index names (anyone who may write the workspace writes it), the processor reads only what the policy allows.
    host = ProcessorHost(args.processor, backend.uri, input_policy=_input_policy(args, backend), adopt_orphans=True)
    with GracefulStop() as stop:
        try:
            worker = Worker(
                backend,
                None,
                settings,
                runner=HostRunner(host, stop=stop),
                worker_id=worker_id,
                position=position,
                stop=stop,
                require_index=True,
            )
            report = worker.run()
        finally:
            host.close()
    doc = _with_requests(backend, report.to_dict())
    _emit(
        args,
        doc,
        lambda d: (
            f"{d['worker_id']}: processed {d['processed']}"
            + (f" ({_plural(d['input_errors'], 'input error')}: s3wq failures {args.workspace} --inputs)" if d["input_errors"] else "")
            + f", failed {d['failed']}, conflicts {d['conflicts']}, "
            f"reclaimed {d['reclaimed']}; stopped: {d['stopped_reason']}"
        ),
    )
    if stop.requested:
        print(f"s3wq: stopped by {signal.Signals(stop.signum).name}; the group in hand was handed back", file=sys.stderr)
        return stop.exit_code
    if report.stopped_reason == "processor_failing":
        print(
            f"s3wq: processor {args.processor} failed the first {_plural(settings.breaker_groups, 'group')} it ran "
            f"with the same error, so this worker stopped: {_printable(report.breaker_error)}\n"
            f"s3wq: fix it (see s3wq failures {args.workspace}, or run with -v), then run s3wq requeue-failed {args.workspace}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if report.failed:
        # A script or a CI job must not read a run that failed groups as a success.
        print(f"s3wq: {_plural(report.failed, 'group')} failed here; see s3wq failures {args.workspace}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _repaired(line: str, d: dict) -> str:
    if d["skipped_live"]:
        line += f"; {_plural(len(d['skipped_live']), 'group')} held by a live worker left alone (run again once it is done)"
    return line


def cmd_requeue_failed(args: argparse.Namespace) -> int:
    for hash_ in args.hash or []:
        layout.check_hash(hash_)
    result = requeue_failed(_backend(args.workspace), hashes=args.hash)

    _emit(args, asdict(result), lambda d: _repaired(f"requeued {_plural(len(d['requeued']), 'failed group')}", d))
    return EXIT_OK


def cmd_reset(args: argparse.Namespace) -> int:
    if bool(args.hash) == args.all:
        raise BadInput("name the groups to reset: --hash H (repeatable) or --all")
    for hash_ in args.hash or []:
        layout.check_hash(hash_)
    backend = _indexed_backend(args.workspace)
    hashes = args.hash or sorted(done_groups(backend) | failed_groups(backend))
    if not hashes:
        _emit(args, asdict(ResetResult()), lambda d: "nothing to reset: no group is done or failed")
        return EXIT_OK
    if not args.yes and sys.stdin.isatty():
        try:
            answer = input(
                f"reset {_plural(len(hashes), 'group')} of {backend.uri}, to run again (each result replaced when it does)? [y/N] "
            )
        except EOFError:  # Ctrl-D: no
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            print("s3wq: nothing reset", file=sys.stderr)
            return EXIT_BAD_INPUT
    result = reset_groups(backend, hashes, named=bool(args.hash))

    _emit(args, asdict(result), lambda d: _repaired(f"reset {_plural(len(d['reset']), 'group')}: pending again", d))
    return EXIT_OK


def cmd_release_locks(args: argparse.Namespace) -> int:
    released = release_locks(_backend(args.workspace), worker_id=args.worker_id, owner=args.owner, force=args.force)
    holder = f"worker id {args.worker_id}" if args.owner is None else f"owner {args.owner}"
    _emit(args, {"released": released}, lambda d: f"released {_plural(len(d['released']), 'lock')} held by {holder}")
    return EXIT_OK


def cmd_local_demo(args: argparse.Namespace) -> int:
    from s3wq.dev.localcloud.demo import run_demo

    path = _processor_path()
    load_processor(args.processor)  # a typo fails here, not inside a Lambda
    return run_demo(
        workers=args.workers,
        inputs=args.inputs,
        group_size=args.group_size,
        processor=args.processor,
        as_json=args.json,
        extra_pythonpath=path,
        **_kept_logs(args.keep_logs),
    )


def _kept_logs(keep_logs: str | None) -> dict[str, Any]:
    """``--keep-logs``: absent, the logs go with the local cloud; without DIR, they are kept in a new folder of the temp directory."""
    from pathlib import Path

    if keep_logs is None:
        return {"keep_logs": False, "log_dir": None}
    if not keep_logs:
        return {"keep_logs": True, "log_dir": None}
    folder = Path(os.path.abspath(keep_logs))  # printed when it stops: absolute, without ".."
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise BadInput(f"--keep-logs {keep_logs}: is a file, not a folder") from None
    except OSError as exc:
        raise BadInput(f"--keep-logs {keep_logs}: cannot create the folder ({exc.strerror})") from None
    return {"keep_logs": True, "log_dir": folder}


def _processor_path() -> tuple[str, ...]:
    """The current directory, importable here and by the local cloud's Lambdas, as ``python -m`` makes it."""
    importable_from_current_directory()
    return (os.getcwd(),)


def cmd_local_up(args: argparse.Namespace) -> int:
    from s3wq.dev.localcloud.demo import run_up

    path = _processor_path()
    load_processor(args.processor)
    return run_up(
        port=args.port,
        workers=args.workers,
        group_size=args.group_size,
        processor=args.processor,
        extra_pythonpath=path,
        **_kept_logs(args.keep_logs),
    )


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r:.40}") from None


def _finite_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r:.40}") from None
    if not math.isfinite(value):
        # inf would run forever and nan compares false with everything: neither is a setting.
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r:.40}")
    return value


def _locations(text: str) -> tuple[InputLocation, ...]:
    try:
        locations = parse_locations(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    if not locations:
        raise argparse.ArgumentTypeError("name at least one s3://bucket or s3://bucket/prefix")
    return locations


def _add_input_locations(p: argparse.ArgumentParser, verb: str) -> None:
    p.add_argument(
        "--input-locations",
        type=_locations,
        metavar="S3_URIS",
        help=f"{verb} s3:// inputs only in these buckets or folders, comma-separated (s3://bucket,s3://bucket/prefix) "
        "(default: any bucket this machine's credentials may read)",
    )


def _positive_int(text: str) -> int:
    value = _whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    value = _whole_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = _finite_number(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value:g}")
    return value


def _non_negative_float(text: str) -> float:
    value = _finite_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value:g}")
    return value


def _port(text: str) -> int:
    value = _whole_number(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port, 1 to 65535, got {value}")
    return value


class _OneLineErrors(argparse.ArgumentParser):
    """Usage errors as one line naming the problem, like every other bad input."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = _OneLineErrors(
        prog="s3wq",
        description="A distributed work queue whose state lives in S3 (olmocr-compatible workspace).",
        epilog="examples:\n"
        "  s3wq local demo                                 # the whole app on an embedded local cloud\n"
        "  s3wq populate s3://my-bucket/run1 's3://my-bucket/pdfs/*.pdf' --group-size 10\n"
        "  s3wq work s3://my-bucket/run1 --processor text --time-limit 900\n"
        "  s3wq status s3://my-bucket/run1 --json\n"
        "Any S3-compatible endpoint works through AWS_ENDPOINT_URL.",
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"s3wq {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the worker does")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_OneLineErrors)

    def add(name: str, help_: str, *examples: str) -> argparse.ArgumentParser:
        epilog = ("example:" if len(examples) == 1 else "examples:") + "".join(f"\n  {e}" for e in examples)
        p = sub.add_parser(name, help=help_, description=help_, epilog=epilog, formatter_class=formatter)
        p.add_argument("--json", action="store_true", help="print one JSON object")
        # -v after the command too (SUPPRESS: absent here, the one before the command stands).
        p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log what the worker does")
        return p

    p = add(
        "populate",
        "Index input paths into groups (idempotent: paths already indexed are skipped).",
        "s3wq populate s3://my-bucket/run1 s3://my-bucket/a.pdf 's3://my-bucket/pdfs/*.pdf' @manifest.txt.gz",
    )
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="S3 URI, S3 glob, local path or glob, or @FILE: a manifest with one source per line "
        "(# comments and blank lines ignored; .gz and .zst accepted; FILE may be an s3:// URI)",
    )
    p.add_argument("--group-size", type=_positive_int, default=DEFAULT_GROUP_SIZE, help=f"paths per group (default {DEFAULT_GROUP_SIZE})")
    p.add_argument(
        "--no-check",
        action="store_true",
        help="do not check that each s3:// path exists (a HEAD, or a LIST page per 1,000 keys of its folder): for huge manifests",
    )
    p.add_argument(
        "--allow-local-inputs",
        action="store_true",
        help="on an S3 workspace, index local paths too (only workers on this machine can read them; a worker on Lambda refuses them)",
    )
    _add_input_locations(p, "index")
    p.set_defaults(func=cmd_populate)

    p = add("status", "Count groups: done, failed, locked and pending; --watch follows a run.", "s3wq status s3://my-bucket/run1 --watch")
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument("--watch", action="store_true", help="follow until nothing is pending or locked (a progress bar on a terminal)")
    p.add_argument("--interval", type=_positive_float, default=2.0, help="seconds between polls with --watch (default 2)")
    p.add_argument(
        "--wait-for-index",
        action="store_true",
        help="with --watch: wait for an index to appear (a manifest just uploaded, populate still to run) instead of failing",
    )
    p.set_defaults(func=cmd_status)

    p = add(
        "start",
        "Start an execution of the deployed stack's state machine (found through CloudFormation).",
        "s3wq start --workers 200 --wait",
    )
    p.add_argument("--stack", default=DEFAULT_STACK_NAME, help=f"CloudFormation stack name (default {DEFAULT_STACK_NAME})")
    p.add_argument("--workers", type=_positive_int, required=True, help="worker Lambdas per round")
    p.add_argument("--failure-tolerance", type=_non_negative_int, default=0, help="failed groups the execution tolerates (default 0)")
    p.add_argument("--wait", action="store_true", help="follow the execution to its end; the exit code is its result")
    p.set_defaults(func=cmd_start)

    p = add(
        "failures",
        "List failed groups with their paths, attempts, last error and where it was raised; --inputs: inputs the processor could not use.",
        "s3wq failures s3://my-bucket/run1 --json",
    )
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument("--inputs", action="store_true", help="list the inputs of done groups that the processor reported it could not use")
    p.set_defaults(func=cmd_failures)

    p = add(
        "inspect",
        "Show one group: paths, lock (owner, attempt, age), done/failed state, result.",
        "s3wq inspect s3://my-bucket/run1 3f2a...e9",
    )
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument("hash", help="the group's 40-character hash")
    p.set_defaults(func=cmd_inspect)

    p = add(
        "work",
        "Run one worker until the queue is empty or its time budget is spent.",
        "s3wq work s3://my-bucket/run1 --processor mypkg.ocr:process_group --time-limit 900",
    )
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument("--worker-id", help="name recorded in locks and flags (default: random)")
    p.add_argument(
        "--worker-index", type=_non_negative_int, metavar="I", help="this worker's number, 0..N-1, when N start together (spreads them out)"
    )
    p.add_argument("--workers", type=_positive_int, metavar="N", help="how many workers start together (with --worker-index)")
    p.add_argument(
        "--time-limit",
        type=_positive_float,
        default=DEFAULT_TIME_LIMIT_SECONDS,
        help=f"seconds this worker may run (default {DEFAULT_TIME_LIMIT_SECONDS:.0f}, the Lambda maximum)",
    )
    p.add_argument(
        "--lease",
        "--lock-timeout",
        dest="lease",
        type=_positive_float,
        metavar="SECONDS",
        help=f"how long this worker's lock stays valid without renewal; longer runs renew it every third of it "
        f"(default: the time limit, up to {DEFAULT_LEASE_SECONDS:.0f})",
    )
    p.add_argument(
        "--foreign-lock-timeout",
        type=_positive_float,
        default=FOREIGN_LOCK_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help=f"how long a lock s3wq cannot read (olmocr's) is honoured (default {FOREIGN_LOCK_TIMEOUT_SECONDS:.0f}, olmocr's own)",
    )
    p.add_argument(
        "--max-attempts",
        type=_positive_int,
        default=DEFAULT_MAX_ATTEMPTS,
        help=f"attempts before a group fails (default {DEFAULT_MAX_ATTEMPTS})",
    )
    p.add_argument(
        "--group-timeout",
        type=_positive_float,
        default=DEFAULT_GROUP_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help="stop a run of a group that lasts longer (kind timeout; it counts as an attempt, and the worker moves on) "
        "(default: none, a run may take what the time limit leaves)",
    )
    p.add_argument(
        "--safety-margin", type=_non_negative_float, help="seconds kept free before the deadline (default: 5%% of the limit, 0.2-10 s)"
    )
    p.add_argument(
        "--retry-backoff",
        type=_non_negative_float,
        default=RETRY_BACKOFF_SECONDS,
        metavar="SECONDS",
        help=f"wait before retrying a group whose processor raised, doubled each attempt up to {MAX_RETRY_BACKOFF_SECONDS:.0f} s "
        f"(default {RETRY_BACKOFF_SECONDS:g}; 0: at once)",
    )
    p.add_argument(
        "--breaker",
        type=_non_negative_int,
        default=DEFAULT_BREAKER_GROUPS,
        metavar="N",
        help=f"stop when the first N groups all fail with the same error: a broken processor (default {DEFAULT_BREAKER_GROUPS}; 0: off)",
    )
    p.add_argument(
        "--processor",
        default=DEFAULT_PROCESSOR,
        help=f"built-in ({', '.join(sorted(BUILTIN_PROCESSORS))}) or module:function (default {DEFAULT_PROCESSOR})",
    )
    p.add_argument(
        "--allow-local-inputs",
        action="store_true",
        help="on an S3 workspace, read local paths the index names (refused by default: anyone who may write the workspace writes its index)",
    )
    _add_input_locations(p, "read")
    p.set_defaults(func=cmd_work)

    p = add("requeue-failed", "Put failed groups back in the queue with their attempts reset.", "s3wq requeue-failed s3://my-bucket/run1")
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument("--hash", action="append", help="requeue only this group (repeatable)")
    p.set_defaults(func=cmd_requeue_failed)

    p = add(
        "reset",
        "Make done (and failed) groups pending again, to run them again: after changing the processor, say. Asks first on a terminal.",
        "s3wq reset ./ws --all --yes",
    )
    p.add_argument("workspace", help=WORKSPACE_HELP)
    p.add_argument("--hash", action="append", help="reset this group (repeatable)")
    p.add_argument("--all", action="store_true", help="reset every done and failed group")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask")
    p.set_defaults(func=cmd_reset)

    p = add(
        "release-locks",
        "Hand back the groups a dead worker holds, so others take them now instead of when its leases end. "
        "Only for a worker known to be dead: a live one keeps running until its next renewal.",
        "s3wq inspect s3://my-bucket/run1 HASH          # the lock's owner: gpu-box-3:5f0c...",
        "s3wq release-locks s3://my-bucket/run1 --owner gpu-box-3:5f0c...",
        "s3wq release-locks s3://my-bucket/run1 --worker-id gpu-box-3 --force",
    )
    p.add_argument("workspace", help=WORKSPACE_HELP)
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument(
        "--owner", metavar="TOKEN", help="one dead worker instance: a lock's owner token, as `s3wq inspect` shows it (live leases too)"
    )
    who.add_argument(
        "--worker-id",
        metavar="ID",
        help="every worker of this id; live leases refused without --force (a restarted worker has the same id)",
    )
    p.add_argument("--force", action="store_true", help="with --worker-id: release live leases too")
    p.set_defaults(func=cmd_release_locks)

    local = sub.add_parser(
        "local",
        help="The deployed app on this machine: an embedded local cloud (no AWS account, no Docker).",
        description="The synthesized CDK stack deployed into an embedded local cloud (moto: S3, Lambda, IAM, Step Functions).",
        formatter_class=formatter,
        epilog="examples:\n  s3wq local demo --workers 8 --inputs 80\n  s3wq local up --port 4566",
    )
    local_sub = local.add_subparsers(dest="local_command", required=True, metavar="COMMAND", parser_class=_OneLineErrors)

    def add_local(name: str, help_: str, example: str) -> argparse.ArgumentParser:
        p = local_sub.add_parser(name, help=help_, description=help_, epilog=f"example:\n  {example}", formatter_class=formatter)
        p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log what the local cloud does")
        p.add_argument("--workers", type=_positive_int, default=4, help="worker Lambdas the execution runs (default 4)")
        p.add_argument("--group-size", type=_positive_int, default=2, help="paths per group (default 2)")
        p.add_argument("--processor", default="text", help="processor (default text)")
        p.add_argument(
            "--keep-logs",
            nargs="?",
            const="",
            metavar="DIR",
            help="keep the server's and the Lambdas' logs when it stops: in DIR, or in a new folder of the temp directory"
            " (default: removed with the local cloud, which leaves nothing behind)",
        )
        return p

    p = add_local(
        "demo",
        "Deploy into a local cloud, upload samples and a manifest, and let the S3 event run the job end to end.",
        "s3wq local demo --workers 8 --inputs 80 --group-size 2",
    )
    p.add_argument("--inputs", type=_positive_int, default=40, help="sample inputs, text files and PDFs (default 40)")
    p.add_argument("--json", action="store_true", help="print one JSON summary")
    p.set_defaults(func=cmd_local_demo)
    p = add_local("up", "Start a local cloud with the stack deployed and keep it running.", "s3wq local up --port 4566")
    p.add_argument("--port", type=_port, help="loopback port, 1-65535 (default: a free one)")
    p.set_defaults(func=cmd_local_up)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    try:
        return args.func(args)
    except BadInput as exc:
        # A bad line or a stored record's text may be quoted in the message.
        print(_printable_lines(f"s3wq: error: {exc}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    except (NoRegionError, NoCredentialsError) as exc:
        print(f"s3wq: error: {exc} (set AWS_REGION and credentials, or AWS_PROFILE)", file=sys.stderr)
        return EXIT_BAD_INPUT
    except S3wqError as exc:
        print(_printable_lines(f"s3wq: failed: {exc}"), file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("s3wq: interrupted", file=sys.stderr)
        return 130


def entry_point() -> Any:
    sys.exit(main())

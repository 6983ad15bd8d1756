"""``populate``, ``work`` and ``start``: put work in a workspace, and get it done here or on the deployed stack."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import uuid
from dataclasses import asdict, replace
from pathlib import Path

from s3wq.cli.execution import concurrency_warning, find_stack, follow_showing_progress, start_execution
from s3wq.cli.jobs import job_count, run_jobs
from s3wq.cli.output import EXIT_FAILED, EXIT_OK, EXIT_SERVICE_UNAVAILABLE, emit, printable, with_requests
from s3wq.cli.processor_flags import set_ocr_settings, set_vlm_settings
from s3wq.cli.work_ends import stop_advice, time_limit_of, time_limit_shown
from s3wq.cli.workspace import input_policy, open_workspace
from s3wq.config import WorkerSettings
from s3wq.errors import BadInput, BadProcessorFolder, BadSource
from s3wq.host.runners import HostRunner
from s3wq.host.sandbox import ProcessorHost
from s3wq.host.stopping import GracefulStop
from s3wq.index import WorkIndex
from s3wq.index.sources import SourceExpander
from s3wq.model import StopReason
from s3wq.processors import importable_from_current_directory
from s3wq.processors.folder import holds_module, shipped_files, top_module
from s3wq.store import S3Backend, open_backend, uri_mistake
from s3wq.wording import CONFLICTS_MEANING
from s3wq.wording import plural as _plural
from s3wq.worker import Worker


def cmd_populate(args: argparse.Namespace) -> int:
    backend = open_workspace(args.workspace)
    s3_client = backend.s3 if isinstance(backend, S3Backend) else None
    # A local workspace inside a folder being indexed must not index its own files.
    exclude = None if isinstance(backend, S3Backend) else backend.uri
    policy = input_policy(args, backend)
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
    doc = with_requests(backend, asdict(result))
    emit(
        args,
        doc,
        lambda d: (
            f"added {_plural(d['added_paths'], 'path')} in {_plural(d['added_groups'], 'group')} "
            f"({d['already_indexed']} already indexed); index now holds {_plural(d['paths'], 'path')} in {_plural(d['groups'], 'group')}"
        ),
    )
    return EXIT_OK


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
        emit(args, {"execution_arn": execution_arn, "workspace": stack.workspace}, lambda d: f"started {d['execution_arn']}")
        return EXIT_OK
    if not args.json:
        print(f"started {execution_arn}", flush=True)
    backend = open_backend(stack.workspace, s3_client=make_s3_client())
    description, status = follow_showing_progress(sfn, execution_arn, backend, show=not args.json)
    output = json.loads(description.get("output") or "null")
    doc = {
        "execution_arn": execution_arn,
        "execution_status": description["status"],
        "error": description.get("error"),
        "cause": description.get("cause"),
        "output": output,
        "status": status.as_document(),
    }
    emit(
        args,
        doc,
        lambda d: (
            f"{d['execution_status']}"
            + (f" ({d['error']}: {d['cause']})" if d["error"] else "")
            + f"; done {status.done}/{status.groups}, failed {status.failed}, remaining {status.remaining}"
        ),
    )
    return EXIT_OK if description["status"] == "SUCCEEDED" else EXIT_FAILED


def _worker_settings(args: argparse.Namespace) -> WorkerSettings:
    return WorkerSettings(
        time_limit=time_limit_of(args),
        lease=args.lease,
        foreign_lock_timeout=args.foreign_lock_timeout,
        max_attempts=args.max_attempts,
        safety_margin=args.safety_margin,
        retry_backoff=args.retry_backoff,
        breaker_groups=args.breaker,
        group_timeout=args.group_timeout,
    )


def _position(args: argparse.Namespace) -> float | None:
    """Where this worker starts in the index, 0 to 1, when ``--workers`` start together (None: a random place)."""
    if (args.worker_index is None) != (args.workers is None):
        raise BadInput("--worker-index and --workers go together")
    if args.workers is not None and not 0 <= args.worker_index < args.workers:
        raise BadInput(f"--worker-index must be in [0, {args.workers}), got {args.worker_index}")
    return None if args.workers is None else args.worker_index / args.workers


def processor_in_folder(spec: str, folder: Path) -> None:
    """Raise BadInput unless ``spec``'s module is in ``folder`` and it ships nothing it may not, as processorDir requires."""
    if ":" not in spec:
        raise BadInput(f"--processor {spec!r} must be module:function when --processor-dir is given")
    if not holds_module(folder, spec):
        top = top_module(spec)
        raise BadInput(f"--processor-dir {str(folder)!r} holds no module {top!r} ({top}.py or {top}/) for --processor {spec!r}")
    try:
        shipped_files(folder)
    except BadProcessorFolder as exc:
        raise BadProcessorFolder(f"--processor-dir {str(folder)!r}: {exc}") from None


def cmd_work(args: argparse.Namespace) -> int:
    if args.processor_dir is not None:  # before the workspace is opened: a folder refused changes nothing and starts nothing
        processor_in_folder(args.processor, args.processor_dir)
    set_ocr_settings(args)
    set_vlm_settings(args)
    settings = _worker_settings(args)
    count = job_count(args.jobs)
    if count > 1:  # checked above, once, before any of them starts
        return run_jobs(args, count)
    position = _position(args)
    started = time.monotonic()
    backend = open_workspace(args.workspace)
    worker_id = args.worker_id or f"w-{uuid.uuid4().hex[:8]}"
    importable_from_current_directory()
    if args.processor_dir is not None:  # first, as the folder's files are at the root of the Lambda asset
        sys.path.insert(0, str(args.processor_dir))
    # Whatever the index names (anyone who may write the workspace writes it), the processor reads only what the policy allows.
    policy = replace(input_policy(args, backend), max_bytes=args.max_input_bytes)
    host = ProcessorHost(args.processor, backend.uri, input_policy=policy)
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
                processor_name=args.processor,
            )
            report = worker.run()
        finally:
            host.close()
    doc = with_requests(backend, {**report.to_dict(), "time_limit": time_limit_shown(settings)})
    seconds = time.monotonic() - started
    doc.update(seconds=round(seconds, 2), pages_per_second=round(report.pages / seconds, 2) if seconds > 0 else None)
    emit(
        args,
        doc,
        lambda d: (
            f"{d['worker_id']}: processed {d['processed']}"
            + (f" ({d['pages']} pages in {d['seconds']:.1f} s, {d['pages_per_second']} pages/s)" if d["pages"] else "")
            + (f" ({_plural(d['input_errors'], 'input error')}: s3wq failures {args.workspace} --inputs)" if d["input_errors"] else "")
            + f", failed {d['failed']}, conflicts {d['conflicts']}"
            + (f" ({CONFLICTS_MEANING})" if d["conflicts"] else "")
            + f", reclaimed {d['reclaimed']}; stopped: {d['stopped_reason']}"
        ),
    )
    if not stop.requested:
        for line in stop_advice(args, backend, settings, report):
            print(f"s3wq: {printable(line)}", file=sys.stderr)
    return _work_exit_code(args, settings, report, stop)


def _work_exit_code(args: argparse.Namespace, settings: WorkerSettings, report, stop: GracefulStop) -> int:
    """The worker's exit code, after a line on stderr for each way a run may end that is not a success."""
    if stop.requested:
        assert stop.signum is not None
        print(f"s3wq: stopped by {signal.Signals(stop.signum).name}; the group in hand was handed back", file=sys.stderr)
        return stop.exit_code
    if report.stopped_reason == StopReason.PROCESSOR_FAILING:
        print(
            f"s3wq: processor {args.processor} failed the first {_plural(settings.breaker_groups, 'group')} it ran "
            f"with the same error, so this worker stopped: {printable(report.breaker_error)}\n"
            f"s3wq: fix it (see s3wq failures {args.workspace}, or run with -v), then run s3wq requeue-failed {args.workspace}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if report.stopped_reason == StopReason.SERVICE_UNAVAILABLE:
        print(_unavailable_line(args, report), file=sys.stderr)
        return EXIT_SERVICE_UNAVAILABLE
    if report.failed:
        # A script or a CI job must not read a run that failed groups as a success.
        print(f"s3wq: {_plural(report.failed, 'group')} failed here; see s3wq failures {args.workspace}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _unavailable_line(args: argparse.Namespace, report) -> str:
    """What `work` says when the processor raised ServiceUnavailable: the service's error, what became of the group, what to do."""
    failed = (
        "nothing failed"
        if not report.failed
        else f"{_plural(report.failed, 'group')} failed here before it (see s3wq failures {args.workspace})"
    )
    return (
        f"s3wq: a service processor {args.processor} needs is unavailable: {printable(report.service_error)}; "
        f"its group was handed back unrun (no attempt used), {failed}, and this worker stopped: run again when it is up"
    )

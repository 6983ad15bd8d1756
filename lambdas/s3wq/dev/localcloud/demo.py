"""``s3wq local demo`` and ``s3wq local up``: the deployed app, on this machine.

The demo deploys the synthesized stack into the local cloud, uploads sample
inputs (text files and PDFs, and scans for ``--processor ocr``:
:mod:`s3wq.dev.localcloud.demo_inputs`) and a manifest whose key needs
URL-encoding, and lets the S3 upload event do the rest, as it would on AWS:
populate indexes the manifest and starts the state machine, whose Distributed
Map runs the worker Lambdas. It shows progress until the execution ends, then
a summary; with scans, the text OCR read from one of them.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self, TextIO

from s3wq.dev.localcloud.asset import AssetSource
from s3wq.dev.localcloud.cloud import LocalCloud
from s3wq.dev.localcloud.demo_inputs import OCR_PROCESSORS, Results, manifest_sources, upload_samples
from s3wq.host.stopping import STOP_SIGNALS
from s3wq.ops.executions import follow_execution
from s3wq.ops.pages import PageTally
from s3wq.ops.status import QueueStatus
from s3wq.store import open_backend
from s3wq.wording import plural

# How the demo follows its execution: ops' follower, or the command line's, which shows its progress.
Follower = Callable[..., tuple[dict, QueueStatus]]

MANIFEST_NAME = "demo run, part 1.txt"  # a space and a comma: S3 sends the key URL-encoded


def _wait_for_execution(sfn: Any, state_machine_arn: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        executions = sfn.list_executions(stateMachineArn=state_machine_arn)["executions"]
        if executions:
            return executions[0]["executionArn"]
        time.sleep(0.2)
    raise RuntimeError("populate did not start an execution; see the populate log")


class Stopped(BaseException):
    """A stop signal arrived (a BaseException, as KeyboardInterrupt is: no ``except Exception`` on the way may take it for an error)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StopSignals:
    """SIGINT (Ctrl-C), SIGTERM (a service manager) and SIGHUP (the terminal closed) all stop the local cloud the same way.

    The first one raises :class:`Stopped` wherever the program is, and the
    ``with`` blocks it leaves stop the server and remove its folder. Later
    ones are ignored: they would cut that cleanup short, and leave the server
    running or its folder behind.
    """

    def __enter__(self) -> Self:
        self._previous = {sig: signal.signal(sig, self._stop) for sig in STOP_SIGNALS}
        return self

    def _stop(self, signum: int, frame: Any) -> None:
        self.ignore()
        raise Stopped(signum)

    def ignore(self) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)

    @contextmanager
    def ignored_on_leaving(self) -> Iterator[None]:
        """Entered after the local cloud: whatever way the block ends, no signal interrupts the cloud's cleanup that follows."""
        try:
            yield
        finally:
            self.ignore()

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def logs_fate(cloud: LocalCloud) -> str | None:
    """Where the Lambdas' logs are, or were; None for a cloud whose server never started, which wrote none."""
    if cloud.process is None:
        return None
    if cloud.keeps_logs:
        return f"the Lambdas' logs are kept in {cloud.log_dir}"
    return f"the Lambdas' logs were in {cloud.log_dir}, removed with the local cloud (--keep-logs keeps them)"


def _tell(line: str | None, *, file: TextIO) -> None:
    if line is not None:
        print(line, file=file, flush=True)


def run_demo(
    *,
    workers: int,
    inputs: int,
    group_size: int,
    processor: str,
    as_json: bool,
    extra_pythonpath: tuple[str, ...] = (),
    asset_source: AssetSource | None = None,
    log_dir: Path | None = None,
    keep_logs: bool = False,
    follow: Follower = follow_execution,
    vlm_endpoint: str | None = None,
) -> int:
    cloud = LocalCloud(
        extra_pythonpath=extra_pythonpath,
        processor=asset_source,
        log_dir=log_dir,
        keep_logs=keep_logs,
        check_processor=True,
        vlm_endpoint=vlm_endpoint,
    )
    with StopSignals() as signals:
        try:
            return _demo(
                cloud, signals, follow, workers=workers, inputs=inputs, group_size=group_size, processor=processor, as_json=as_json
            )
        except Stopped as stop:
            print(f"s3wq: stopped by {stop}", file=sys.stderr)
            return 128 + stop.signum
        finally:
            # --json: stdout holds the one summary object.
            _tell(logs_fate(cloud), file=sys.stderr if as_json else sys.stdout)


def _demo(
    cloud: LocalCloud, signals: StopSignals, follow: Follower, *, workers: int, inputs: int, group_size: int, processor: str, as_json: bool
) -> int:
    say = (lambda *a: None) if as_json else (lambda *a: print(*a, flush=True))
    started = time.monotonic()
    if cloud.processor is not None:
        # pip is quiet and, on a cold cache, downloads the OCR stack (~145 MB): say so before the wait.
        say("building the worker's asset for this machine (pip; reused from S3WQ_LOCAL_ASSET_CACHE when set) ...")
    with cloud, signals.ignored_on_leaving():
        say(f"local cloud (S3, Lambda, IAM, Step Functions) on {cloud.endpoint}")
        stack = cloud.deploy({"defaultWorkers": workers, "groupSize": group_size, "processor": processor, "maxWorkers": max(workers, 1)})
        say(f"deployed the synthesized stack: {stack.outputs['StateMachineArn'].rsplit(':', 1)[-1]}, bucket {stack.bucket}")
        s3, sfn = cloud.client("s3"), cloud.client("stepfunctions")
        # An OCR processor's worker runs from its asset, whose interpreter has Pillow to draw the scans.
        scans_with = cloud.asset if processor in OCR_PROCESSORS else None
        scan_keys = upload_samples(s3, stack.bucket, inputs, draw_scans_with=scans_with)
        manifest_key = f"{stack.outputs['ManifestPrefix'].split('/', 3)[3]}{MANIFEST_NAME}"
        manifest = "# demo manifest: one source per line\n" + "".join(
            f"{source}\n" for source in manifest_sources(stack.bucket, bool(scans_with))
        )
        s3.put_object(Bucket=stack.bucket, Key=manifest_key, Body=manifest.encode())
        scans = f", {plural(len(scan_keys), 'scan')} among them," if scans_with else ""
        say(f"uploaded {plural(inputs, 'input')}{scans} and s3://{stack.bucket}/{manifest_key}; the upload event triggers populate")

        execution_arn = _wait_for_execution(sfn, stack.state_machine_arn, timeout=60)
        say(f"populate started execution {execution_arn.rsplit(':', 1)[-1]} with {plural(workers, 'worker')}")
        backend = open_backend(stack.workspace, s3_client=s3)
        run_started = time.monotonic()
        # A small workspace: poll often, so the run time measured is the run's.
        description, status = follow(sfn, execution_arn, backend, interval=0.25)
        run_seconds = time.monotonic() - run_started
        pages = PageTally(backend).count()
        result_keys = list(backend.list_keys("results/"))
        results = Results.read(backend, result_keys)
        worker_invocations = _count_invocations(cloud, "Worker")

    summary = {
        "execution_status": description["status"],
        "error": description.get("error"),
        "execution_output": json.loads(description.get("output") or "{}"),
        "status": status.as_document(),
        "workers": workers,
        "worker_invocations": worker_invocations,
        "run_seconds": round(run_seconds, 2),
        "groups_per_second": round(status.done / run_seconds, 2) if run_seconds else None,
        # The pages the done flags record (each processor reports its own): text counts a PDF's pages, a text file none.
        "pages": pages.as_document(),
        "pages_per_second": round(pages.pages / run_seconds, 2) if run_seconds else None,
        "total_seconds": round(time.monotonic() - started, 2),
        "results": len(result_keys),
        "results_prefix": f"{stack.workspace}/results/",
        "sample_result": results.pdf_sample(),
    }
    ok = description["status"] == "SUCCEEDED" and status.remaining == 0 and status.failed == 0
    if scans_with:
        # A scan OCR reads nothing from is the silent failure the demo is there to show does not happen.
        summary.update(ocr_sample=results.ocr_sample(), unread_scans=results.unread_scans(scan_keys, stack.bucket))
        ok = ok and summary["ocr_sample"] is not None and not summary["unread_scans"]
    return _report(summary, ok, as_json=as_json)


def _report(summary: dict, ok: bool, *, as_json: bool) -> int:
    """Print the summary, as one JSON object or as a table; the demo's exit code."""
    if as_json:
        print(json.dumps(summary))
        for problem in summary.get("unread_scans", []):  # stdout is the summary's: why it failed goes to stderr too
            print(f"s3wq: demo failed: a scan was not read: {problem}", file=sys.stderr)
    else:
        _print_summary(summary, ok)
    return 0 if ok else 1


def _count_invocations(cloud: LocalCloud, kind: str) -> int:
    logs = list((cloud.log_dir / "lambda").glob(f"*{kind}*.log"))
    return sum(p.read_text(errors="replace").count("--- invocation ") for p in logs)


def _print_summary(summary: dict, ok: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    status = QueueStatus.read(summary["status"])
    table = Table(title="s3wq local demo", show_header=False)
    for label, value in [
        ("execution", f"{summary['execution_status']}" + (f" ({summary['error']})" if summary["error"] else "")),
        ("groups", f"{status.groups} ({plural(status.paths, 'input')})"),
        ("done / failed / remaining", f"{status.done} / {status.failed} / {status.remaining}"),
        ("rounds", str(summary["execution_output"].get("rounds", "?"))),
        ("workers (Map items) / invocations", f"{summary['workers']} / {summary['worker_invocations']}"),
        ("pages done", f"{summary['pages']['pages']} ({summary['pages_per_second']} pages/s)"),
        ("run time", f"{summary['run_seconds']:.1f} s ({summary['groups_per_second']} groups/s); {summary['total_seconds']:.1f} s in all"),
        ("results", f"{plural(summary['results'], 'object')} under {summary['results_prefix']}"),
    ]:
        table.add_row(label, value)
    console.print(table)
    sample = summary["sample_result"]
    if sample:
        console.print(f"text extracted from [bold]{sample['source']}[/] ({sample['pages']} pages), in {sample['result']}:")
        console.print(f"  {sample['text']!r}")
    if "ocr_sample" in summary:
        _print_ocr(console, summary)
    console.print("[green]demo succeeded[/]" if ok else "[red]demo FAILED[/]")
    console.print("The local cloud is gone with the demo; `s3wq local up` keeps one running.")


def _print_ocr(console: Any, summary: dict) -> None:
    scan = summary["ocr_sample"]
    if scan:
        console.print(
            f"text OCR'd from the scan [bold]{scan['source']}[/] ({plural(scan['pages'], 'page')}, confidence {scan['confidence']},"
            f" {scan['seconds']} s), in {scan['result']}:",
            highlight=False,
        )
        for line in scan["text"].splitlines():
            console.print(f"  {line}", markup=False, highlight=False)
    else:
        console.print("[red]no scan was read by OCR[/]")
    for problem in summary["unread_scans"]:
        console.print(f"[red]scan not read:[/] {problem}")


def run_up(
    *,
    port: int | None,
    workers: int,
    group_size: int,
    processor: str,
    extra_pythonpath: tuple[str, ...] = (),
    asset_source: AssetSource | None = None,
    log_dir: Path | None = None,
    keep_logs: bool = False,
    vlm_endpoint: str | None = None,
) -> int:
    """Keep the local cloud running until a stop signal (exit 0) or until its server dies (exit 1); say where the logs are either way."""
    cloud = LocalCloud(
        port=port,
        log_dir=log_dir,
        keep_logs=keep_logs,
        extra_pythonpath=extra_pythonpath,
        processor=asset_source,
        check_processor=True,
        vlm_endpoint=vlm_endpoint,
    )
    with StopSignals() as signals:
        try:
            with cloud, signals.ignored_on_leaving():
                try:
                    _serve(cloud, workers=workers, group_size=group_size, processor=processor)
                except Stopped as stop:
                    print(f"stopping ({stop})", flush=True)
                    return 0
                assert cloud.process is not None
                print(
                    f"s3wq: error: the local cloud's server exited with code {cloud.process.returncode}; the end of its log:",
                    file=sys.stderr,
                )
                print(_tail(cloud.log_dir / "server.log"), file=sys.stderr, flush=True)
                return 1
        except Stopped as stop:  # before it answered
            print(f"stopping ({stop})", flush=True)
            return 0
        finally:
            _tell(logs_fate(cloud), file=sys.stdout)


def _serve(cloud: LocalCloud, *, workers: int, group_size: int, processor: str) -> None:
    """Deploy, print how to drive it, and return when the server is gone."""
    stack = cloud.deploy({"defaultWorkers": workers, "groupSize": group_size, "processor": processor})
    kept = "" if cloud.keeps_logs else " (removed when it stops; --keep-logs keeps them)"
    print(f"local cloud on {cloud.endpoint}, logs in {cloud.log_dir}{kept}")
    for name, value in stack.outputs.items():
        print(f"  {name:<16} {value}")
    print("\nDrive it from another shell:")
    for key, value in cloud.env().items():
        print(f"  export {key}={value}")
    print(f"  aws s3 cp my-manifest.txt {stack.outputs['ManifestPrefix']}my-manifest.txt")
    # Populate runs when the upload's event arrives: wait for its index rather than count an empty workspace.
    print(f"  s3wq status {stack.workspace} --watch --wait-for-index")
    print(f"  s3wq start --stack {stack.stack_name} --workers {workers} --wait")
    print("Ctrl-C stops it.", flush=True)
    while cloud.process is not None and cloud.process.poll() is None:
        time.sleep(0.5)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return f"({path} was not written)"

"""The processor host's runner: the process the warden forks, which loads the processor once and runs groups.

It hears of runs and of the lease from the warden (:mod:`s3wq.host.warden`),
calls the processor, and replies with how the run ended and the threads it
left at work; the warden alone ends processes. Its own kernel timer kills
it at the lease's end (plus a grace), even while the processor holds the
GIL in native code, and ``ctx.claim_is_held()`` is true only while a run
is in progress.
"""

from __future__ import annotations

import os
import sys
import threading
from multiprocessing.connection import Connection
from typing import cast

from s3wq.errors import S3wqError
from s3wq.host.killtimer import KillTimer
from s3wq.host.threads import ModuleThreads, leftover_threads, track_pool_jobs
from s3wq.host.wire import (
    HOST_PATH_ENV,
    SELF_STOP_GRACE_SECONDS,
    Exit,
    Lease,
    Loaded,
    LoadFailed,
    ProcessorEnd,
    Reap,
    Run,
    RunEnded,
    receive,
    send,
)
from s3wq.inputs import InputPolicy
from s3wq.protocol import clock
from s3wq.protocol.tracebacks import one_line_error, own_frame, processor_roots, processor_traceback


class _RunnerState:
    def __init__(self) -> None:
        self.kill_timer = KillTimer()
        self.lock = threading.Lock()
        self.held_until = 0.0
        self.running = False
        self.runs: list[Run | Exit] = []
        self.arrived = threading.Condition(self.lock)

    def held(self) -> bool:
        """ctx.claim_is_held(): only while a run is in progress, so that a thread a run left behind sees False."""
        return self.running and clock.now() < self.held_until

    def arm(self) -> None:
        """Have the kernel end the runner at the lease's end; never while idle."""
        if self.running:
            self.kill_timer.arm(self.held_until + SELF_STOP_GRACE_SECONDS)
        else:
            self.kill_timer.disarm()


def _listen(conn: Connection, state: _RunnerState) -> None:
    """The runner's ear: lease updates and runs from the warden; exit when the warden is gone."""
    while True:
        try:
            message = receive(conn)
        except (EOFError, OSError):
            os._exit(0)
        if isinstance(message, Reap):
            _reap_killed(message.pids)
            continue
        with state.lock:
            if isinstance(message, Lease):
                state.held_until = message.held_until
            else:
                if isinstance(message, Run):
                    state.held_until = message.held_until
                    state.running = True
                state.runs.append(cast("Run | Exit", message))  # what the warden sends a runner
                state.arrived.notify()
            state.arm()


def _reap_killed(pids: tuple[int, ...]) -> None:
    """Wait for the runner's children that the warden killed: a long-lived runner would keep each as a zombie.

    Only those: a child the module started and still owns is its to wait for
    (a multiprocessing Process whose pid another wait took reads as alive).
    A killed child is a zombie until waited for, so its pid names it still.
    """
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass  # the processor waited for it itself


def multiprocessing_helpers() -> list[int]:
    """The pids of the processes multiprocessing keeps for this process between uses: its forkserver and its resource tracker.

    Read from the modules' own singletons, only if a processor imported
    them; None until they are started. Private names, unchanged from 3.8 to 3.14.
    """
    holders = (
        (getattr(sys.modules.get("multiprocessing.forkserver"), "_forkserver", None), "_forkserver_pid"),
        (getattr(sys.modules.get("multiprocessing.resource_tracker"), "_resource_tracker", None), "_pid"),
    )
    return [pid for holder, name in holders if isinstance(pid := getattr(holder, name, None), int)]


def _take_the_worker_path() -> None:
    """Import as the worker does, and give the processor's own children the same path (PYTHONPATH), as before the host existed."""
    path = os.environ.pop(HOST_PATH_ENV, None)
    if path is not None:
        sys.path[:] = [entry for entry in path.split(os.pathsep) if entry]
        os.environ["PYTHONPATH"] = path


def runner_main(conn: Connection, processor_spec: str, workspace_uri: str, input_policy: InputPolicy) -> None:
    from s3wq.host.run_ends import unavailable_service
    from s3wq.model import Group
    from s3wq.processors import ProcessorContext, load_processor
    from s3wq.protocol.bodies import MAX_TRACEBACK_CHARS
    from s3wq.store import open_backend

    _take_the_worker_path()
    track_pool_jobs()  # before the module's import: a pool job it starts there is its own
    try:
        processor = load_processor(processor_spec)
        backend = open_backend(workspace_uri)
    except S3wqError as exc:
        send(conn, LoadFailed(str(exc)))
        return
    except Exception as exc:  # noqa: BLE001 -- the user's module failed to import: report it, the worker names it
        send(conn, LoadFailed(f"processor {processor_spec!r} failed to load: {one_line_error(exc)}"))
        return
    roots = processor_roots(processor)
    state = _RunnerState()
    # What runs from the module's import on (a warm pool, an SDK's thread) is the module's, never a run's leftover.
    own_threads = ModuleThreads()
    listener = threading.Thread(target=_listen, args=(conn, state), daemon=True, name="s3wq-host-listener")
    own_threads.add(listener)
    listener.start()
    send(conn, Loaded())
    while True:
        with state.lock:
            while not state.runs:
                state.arrived.wait()
            run = state.runs.pop(0)
            if isinstance(run, Exit):
                return
            state.arm()  # before the processor starts, not only when the listener gets round to it
        group = Group(run.hash, tuple(run.paths))
        ctx = ProcessorContext(
            worker_id=run.worker_id,
            attempt=run.attempt,
            deadline=run.deadline_epoch,
            group=group,
            backend=backend,
            owner=run.owner,
            _held=state.held,
            input_policy=input_policy,
        )
        try:
            processor(group, ctx)
            end = ProcessorEnd(ctx.input_error_count, tuple(ctx.input_errors), pages=ctx.pages)
        except Exception as exc:  # noqa: BLE001 -- a processor failure is an attempt, reported to the worker
            traceback = "".join(processor_traceback(exc))[-MAX_TRACEBACK_CHARS:]
            # Its kind crosses to the worker, not only its text: a ServiceUnavailable (or a subclass) hands the group back.
            service = unavailable_service(exc)
            error = one_line_error(exc) if service is None else service
            end = ProcessorEnd(error=error, traceback=traceback, frame=own_frame(exc, roots), unavailable=service is not None)
        finally:
            ctx.end_run()  # a thread that holds this ctx must not go on writing for the group, in this run or a later one
        with state.lock:
            state.running = False
            state.arm()
        send(conn, RunEnded(end, tuple(multiprocessing_helpers()), tuple(leftover_threads(own_threads))))

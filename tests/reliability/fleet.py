"""A fleet of worker processes, a killer that SIGKILLs some of them mid-group, and replacements.

Like a Step Functions Map round after Lambdas were killed, a replacement is
started whenever a worker ends (killed, out of time, or out of claimable
work) until the queue is finished. The killer watches the markers the
processor leaves (see :mod:`marking_processor`) and kills a doomed worker a
moment into one of its groups, so the kill lands mid-group.

Each worker is a process running ``s3wq.Worker`` exactly as ``s3wq work``
does, forked from a forkserver that has already imported s3wq and boto3: on
two cores, starting dozens of fresh interpreters would otherwise take more
of the run than the work.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .marking_processor import read_calls

POLL_SECONDS = 0.01
# A worker that stopped because every group left was held (by a dead holder,
# until its lock goes stale) is replaced a little later, as the next Map round
# would be, rather than in a tight loop of process start-ups.
NEXT_ROUND_PAUSE_SECONDS = 1.0


_FORKSERVER = multiprocessing.get_context("forkserver")
_FORKSERVER.set_forkserver_preload(["boto3", "botocore.session", "s3wq", "s3wq.store", "s3wq.cli", "reliability.marking_processor"])


def work(workspace: str, worker_id: str, settings: dict[str, Any], env: dict[str, str], report_path: str) -> None:
    """What ``s3wq work WORKSPACE --worker-id ID --processor reliability.marking_processor:process`` does."""
    os.environ.update(env)
    from s3wq import Worker, WorkerSettings, open_backend

    from .marking_processor import process

    try:
        backend = open_backend(workspace)
        report = Worker(backend, process, WorkerSettings(**settings), worker_id=worker_id).run()
    except BaseException:
        Path(report_path).with_suffix(".err").write_text(traceback.format_exc())
        raise
    Path(report_path).write_text(json.dumps(asdict(report)))


@dataclass
class Member:
    worker_id: str
    process: Any  # a multiprocessing Process
    doomed: bool
    kill_on_call: int  # killed during its n-th group...
    kill_after_seconds: float  # ...this long after the group started
    killed_ns: int | None = None
    killed_call: str | None = None  # the call that was running when it was killed
    report: dict | None = None
    exit_code: int | None = None


@dataclass
class FleetRun:
    members: list[Member] = field(default_factory=list)

    @property
    def killed(self) -> list[Member]:
        return [m for m in self.members if m.killed_ns is not None]

    @property
    def survivors(self) -> list[Member]:
        return [m for m in self.members if m.killed_ns is None]

    def reports(self) -> list[dict]:
        return [m.report for m in self.survivors if m.report is not None]


class Fleet:
    def __init__(
        self,
        workspace: str,
        settings: dict[str, Any],
        *,
        env: Mapping[str, str],
        log_dir: Path,
        mark_dir: Path,
        size: int,
        seed: int,
        doom_share: float,
        kill_after_seconds: tuple[float, float],
    ):
        self.workspace = workspace
        self.settings = settings
        self.env = dict(env)
        self.log_dir = log_dir
        self.mark_dir = mark_dir
        self.size = size
        self.rng = random.Random(seed)
        self.doom_share = doom_share
        self.kill_after_seconds = kill_after_seconds
        self.run_state = FleetRun()

    def _spawn(self) -> Member:
        worker_id = f"w{len(self.run_state.members):03d}"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        report_path = str(self.log_dir / f"{worker_id}.json")
        process = _FORKSERVER.Process(target=work, args=(self.workspace, worker_id, self.settings, self.env, report_path), name=worker_id)
        process.start()
        # Doom workers while kills (done, or planned for a worker still running) stay
        # under doom_share of those started: random which ones, but the share holds
        # however many replacements the run needs and however many doomed workers
        # ran out of groups before their kill came.
        planned = sum(1 for m in self.run_state.members if m.doomed and (m.killed_ns is not None or m.exit_code is None))
        member = Member(
            worker_id,
            process,
            doomed=planned < self.doom_share * (len(self.run_state.members) + 1) and self.rng.random() < 2 * self.doom_share,
            kill_on_call=self.rng.randint(1, 2),
            kill_after_seconds=self.rng.uniform(*self.kill_after_seconds),
        )
        self.run_state.members.append(member)
        return member

    def _ended(self, member: Member, code: int) -> None:
        member.exit_code = code
        if member.killed_ns is None and code == 0:
            member.report = json.loads((self.log_dir / f"{member.worker_id}.json").read_text())

    def _kill_mid_group(self, live: list[Member]) -> None:
        doomed = {m.worker_id: m for m in live if m.doomed and m.killed_ns is None}
        if not doomed:
            return
        calls_by_worker: dict[str, list] = {}
        for call in read_calls(self.mark_dir):
            if call.worker in doomed:
                calls_by_worker.setdefault(call.worker, []).append(call)
        now_ns = time.time_ns()
        for worker_id, calls in calls_by_worker.items():
            member = doomed[worker_id]
            running = calls[-1]
            if (
                len(calls) >= member.kill_on_call
                and running.outcome is None
                and now_ns - running.start_ns >= member.kill_after_seconds * 1e9
            ):
                member.process.kill()  # SIGKILL: no handler, no cleanup, like a Lambda killed at its timeout
                member.process.join()
                member.killed_ns = time.time_ns()
                member.killed_call = running.call

    def run(self, finished: Callable[[], bool], *, deadline_seconds: float) -> FleetRun:
        """Keep ``size`` workers running until ``finished()``; then let the last ones end by themselves."""
        deadline = time.monotonic() + deadline_seconds
        live: list[Member] = []
        next_spawn = 0.0
        done = False
        last_check = 0.0
        try:
            while True:
                now = time.monotonic()
                if now > deadline:
                    raise AssertionError(f"the fleet did not finish within {deadline_seconds:.0f}s")
                ended = [m for m in live if m.process.exitcode is not None]
                for member in ended:
                    live.remove(member)
                    self._ended(member, member.process.exitcode)
                    if member.report and member.report.get("stopped_reason") != "time_limit":
                        next_spawn = max(next_spawn, now + NEXT_ROUND_PAUSE_SECONDS)
                if not done and (ended or now - last_check > 0.5):
                    done, last_check = finished(), now
                if done and not live:
                    return self.run_state
                while not done and len(live) < self.size and now >= next_spawn:
                    live.append(self._spawn())
                self._kill_mid_group(live)
                for member in [m for m in live if m.killed_ns is not None]:
                    live.remove(member)
                    self._ended(member, member.process.exitcode)
                time.sleep(POLL_SECONDS)
        finally:
            for member in live:
                if member.process.exitcode is None:
                    member.process.kill()
                    member.process.join()

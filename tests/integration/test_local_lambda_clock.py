"""The local cloud's Lambda runner times an invocation as Lambda does: from the end of its init.

A handler's context and the runner's kill share one clock, so a handler that
stops when its context says so is never killed, however slow its init was
(a loaded machine, a heavy import), and one that runs past it is.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from support import REPO_ROOT

from s3wq.dev.localcloud.runner import Invocation, LambdaRunner

TESTS_DIR = REPO_ROOT / "tests"


def _runner(tmp_path: Path) -> LambdaRunner:
    return LambdaRunner(
        endpoint="http://127.0.0.1:9", lambdas_dir=REPO_ROOT / "lambdas", log_dir=tmp_path / "logs", extra_pythonpath=(str(TESTS_DIR),)
    )


def _invocation(handler: str, timeout: float, **environment: str) -> Invocation:
    return Invocation(
        function_name="clock", handler=f"helpers.slow_init_handler.{handler}", timeout=timeout, memory_mb=128, environment=environment
    )


def test_a_slow_init_does_not_eat_into_the_invocations_time(tmp_path):
    # The init alone outlasts the timeout: timed from the process's start, the
    # handler would be killed while its context still said it had time.
    outcome = _runner(tmp_path).invoke(_invocation("handler", 2.0, S3WQ_TEST_INIT_SECONDS="2.5"), b"{}")
    assert not outcome.function_error, outcome.payload
    # Its clock started at the end of the init: nearly the whole timeout was left.
    assert json.loads(outcome.payload)["remaining_at_start_ms"] > 1000


def test_a_handler_that_runs_past_its_deadline_is_killed(tmp_path):
    started = time.monotonic()
    outcome = _runner(tmp_path).invoke(_invocation("overrun", 1.0), b"{}")
    error = json.loads(outcome.payload)
    assert outcome.function_error and error["errorType"] == "Sandbox.Timedout"
    assert "Task timed out after 1.00 seconds" in error["errorMessage"]
    assert time.monotonic() - started < 25  # killed, not left to sleep its 30 s out
    assert "Task timed out" in (tmp_path / "logs" / "clock.log").read_text()


def test_an_init_that_fails_is_the_invocations_error_not_a_timeout(tmp_path):
    outcome = _runner(tmp_path).invoke(_invocation("broken_init", 5.0, S3WQ_TEST_BREAK_INIT="1"), b"{}")
    error = json.loads(outcome.payload)
    assert outcome.function_error and error["errorType"] == "ImportError" and "on purpose" in error["errorMessage"]

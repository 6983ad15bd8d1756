"""Child side of a local Lambda invocation: ``python -m s3wq.dev.localcloud.invoke HANDLER TIMEOUT RESULT_FILE SERVER_PID READY_FD``.

Reads the event (JSON) on stdin, imports the handler (the init), reports the
init done with a byte on READY_FD (the server starts timing the invocation
then, as Lambda does), calls the handler with a Lambda-like context whose
clock started at the same moment, and writes ``{"result": ...}`` or ``{"error": {errorType,
errorMessage, stackTrace}}`` to RESULT_FILE: stdout and stderr stay the
function's log, as in Lambda.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import signal
import sys
import time
import traceback
import uuid


class LambdaContext:
    def __init__(self, deadline: float):
        """``deadline``: on ``time.monotonic()``'s clock, which is the system's and so the server's too."""
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "local")
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        region = os.environ.get("AWS_REGION", "us-east-1")
        self.invoked_function_arn = f"arn:aws:lambda:{region}:123456789012:function:{self.function_name}"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = "local"
        self._deadline = deadline

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


_PR_SET_PDEATHSIG = 1


def die_with_the_server(server_pid: int) -> None:
    """End this invocation when the server that started it is gone, however it went.

    Only the server times an invocation out: one that outlived it would run
    on, up to 900 s, with nothing to end it. On Linux the kernel sends the
    signal when the server's thread that started (and waits on) this process
    ends.
    """
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != server_pid:  # it was gone before the kernel could be asked
        os._exit(1)


def main() -> None:
    handler_path, timeout, result_file = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    die_with_the_server(int(sys.argv[4]))
    event = json.loads(sys.stdin.read() or "{}")
    try:
        module_name, function_name = handler_path.rsplit(".", 1)
        handler = getattr(importlib.import_module(module_name), function_name)
    except Exception as exc:  # noqa: BLE001 -- an init error: Lambda reports it as the invocation's error
        handler, outcome = None, _error(exc)
    # The clock starts before the server hears of it: the server's kill comes
    # no earlier than this context's deadline.
    deadline = time.monotonic() + timeout
    with os.fdopen(int(sys.argv[5]), "wb") as ready:
        ready.write(b"\n")
    if handler is not None:
        try:
            outcome = {"result": handler(event, LambdaContext(deadline))}
        except Exception as exc:  # noqa: BLE001 -- reported to the caller as Lambda reports an unhandled error
            outcome = _error(exc)
    with open(result_file, "w", encoding="utf-8") as f:
        json.dump(outcome, f, default=str)


def _error(exc: Exception) -> dict:
    return {
        "error": {
            "errorType": type(exc).__name__,
            "errorMessage": str(exc),
            "stackTrace": traceback.format_exception(type(exc), exc, exc.__traceback__),
        }
    }


if __name__ == "__main__":
    main()

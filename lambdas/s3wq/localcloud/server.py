"""The local cloud's server process: ``python -m s3wq.localcloud.server --port P --log-dir D``.

moto's S3, Lambda, IAM and Step Functions in one process, with Step
Functions executing state machines, and two hooks where an invocation
reaches Lambda:

* Step Functions' Lambda tasks (and any ``Invoke`` API call) go through
  moto's Lambda backend ``invoke``; without Docker that backend only echoes.
  It is replaced by a call to :class:`LambdaRunner`, which runs the real
  handler and reports errors and timeouts the way Lambda does.
* S3 event notifications call the function object's ``invoke`` directly,
  synchronously, inside the PUT that triggered them. AWS delivers them
  asynchronously, and so does the hook: the PUT returns at once.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from ..local_s3 import dispatch_without_rescanning, serialized_writes
from .runner import Invocation, LambdaRunner

REPO_LAMBDAS_DIR = Path(__file__).resolve().parents[2]


def _invocation(fn: Any) -> Invocation:
    return Invocation(
        function_name=fn.function_name,
        handler=fn.handler,
        timeout=float(fn.timeout),
        memory_mb=int(fn.memory_size),
        environment=dict(fn.environment_vars or {}),
    )


def _as_bytes(body: Any) -> bytes:
    if body is None:
        return b"{}"
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    return json.dumps(body).encode("utf-8")


def install_hooks(runner: LambdaRunner) -> None:
    from moto.awslambda_simple.models import LambdaSimpleBackend
    from moto.s3 import notifications

    def invoke(self: Any, function_name: str, qualifier: str | None, body: Any, headers: Any, response_headers: Any) -> bytes:
        fn = self.get_function(function_name, qualifier)
        invocation_type = {k.lower(): v for k, v in dict(headers or {}).items()}.get("x-amz-invocation-type", "RequestResponse")
        if invocation_type == "Event":
            runner.invoke_async(_invocation(fn), _as_bytes(body))
            return b""
        outcome = runner.invoke(_invocation(fn), _as_bytes(body))
        if outcome.function_error:
            response_headers["x-amz-function-error"] = "Unhandled"
        return outcome.payload

    def s3_notification(account_id: str, event_body: Any, fn_arn: str, region_name: str) -> None:
        from moto.awslambda.utils import get_backend

        fn = get_backend(account_id, region_name).get_function(fn_arn)
        runner.invoke_async(_invocation(fn), json.dumps(event_body).encode("utf-8"))

    LambdaSimpleBackend.invoke = invoke
    notifications._invoke_awslambda = s3_notification


# A new AWS account's Lambda concurrency quota, none of it reserved.
LOCAL_ACCOUNT_CONCURRENCY = 1000


def with_account_settings(app: Any) -> Any:
    """Answer Lambda's GetAccountSettings, which moto lacks, as a fresh account would: ``s3wq start`` reads it."""

    def application(environ: dict, start_response: Any) -> Any:
        if environ.get("REQUEST_METHOD") == "GET" and environ.get("PATH_INFO", "").rstrip("/") == "/2016-08-19/account-settings":
            body = json.dumps(
                {
                    "AccountLimit": {
                        "ConcurrentExecutions": LOCAL_ACCOUNT_CONCURRENCY,
                        "UnreservedConcurrentExecutions": LOCAL_ACCOUNT_CONCURRENCY,
                    },
                    "AccountUsage": {"TotalCodeSize": 0, "FunctionCount": 0},
                }
            ).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        return app(environ, start_response)

    return application


def serve(host: str, port: int, log_dir: Path, extra_pythonpath: tuple[str, ...] = ()) -> None:
    os.environ["MOTO_PORT"] = str(port)  # where moto's Step Functions engine calls Lambda
    from moto.core.config import default_user_config
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import run_simple

    default_user_config["lambda"] = {"use_docker": False}
    default_user_config["stepfunctions"] = {"execute_state_machine": True}
    install_hooks(LambdaRunner(endpoint=f"http://{host}:{port}", lambdas_dir=REPO_LAMBDAS_DIR, log_dir=log_dir, extra_pythonpath=extra_pythonpath))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    dispatch_without_rescanning()
    app = with_account_settings(serialized_writes(DomainDispatcherApplication(create_backend_app)))
    run_simple(host, port, app, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="s3wq local cloud server (moto with a Lambda runner)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log-dir", type=Path, required=True)
    parser.add_argument("--pythonpath", action="append", default=[], help="extra import path for handlers' processors")
    options = parser.parse_args()
    serve(options.host, options.port, options.log_dir, tuple(options.pythonpath))

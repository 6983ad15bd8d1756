"""The local cloud's server process: ``python -m s3wq.dev.localcloud.server --port P --log-dir D``.

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
import uuid
from pathlib import Path
from typing import Any

from s3wq.dev.local_s3 import dispatch_without_rescanning, serialized_writes
from s3wq.dev.localcloud.runner import Invocation, LambdaRunner, TaskAsset

REPO_LAMBDAS_DIR = Path(__file__).resolve().parents[3]


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

    LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign]  # moto patched on purpose
    notifications._invoke_awslambda = s3_notification


def answer_as_step_functions_does() -> None:
    """Make moto 5.2's Step Functions engine answer as AWS does where it does not.

    * The engine's errors (``moto/stepfunctions/parser/api.py``) carry their
      code in an attribute moto's error response never reads: each reached
      the client with an empty code (input that is not JSON answered ``""``,
      not ``InvalidExecutionInput``), and those raised without a message
      could not even be built (DescribeMapRun of an unknown ARN: a 500).
    * StartExecution without a name named the execution ``None``: its ARN
      ended in ``:None``, the second such call collided with the first
      (ExecutionAlreadyExists), and ListExecutions listed an execution
      without a name (boto3: ``KeyError: 'name'``). AWS generates a UUID
      ("If you don't provide a name for the execution, Step Functions
      automatically generates a universally unique identifier", StartExecution
      in the API reference), and checks a name it is given: InvalidName for a
      character it refuses, ValidationException outside 1 to 80 characters.
    * A malformed execution ARN was answered InvalidArn with the message of a
      missing execution.
    """
    from moto.core.exceptions import AWSError
    from moto.stepfunctions.exceptions import ValidationException
    from moto.stepfunctions.models import StepFunctionBackend
    from moto.stepfunctions.parser import api
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    def with_default_message(error_type: type) -> Any:
        def __init__(self: Any, message: str = "", exception_type: str | None = None, status: int | None = None) -> None:
            AWSError.__init__(self, message or error_type.__name__, exception_type, status)

        return __init__

    for error_type in vars(api).values():
        if isinstance(error_type, type) and issubclass(error_type, AWSError) and error_type.TYPE is None:
            code = error_type.__dict__.get("code")
            if isinstance(code, str):
                error_type.TYPE, error_type.STATUS = code, error_type.status_code  # type: ignore[attr-defined]  # set by each subclass
                if "__init__" not in error_type.__dict__:
                    error_type.__init__ = with_default_message(error_type)  # type: ignore[method-assign]  # moto patched on purpose

    start_execution = StepFunctionsParserBackend.start_execution

    def start_execution_named(
        self: Any, state_machine_arn: str, name: str | None = None, execution_input: Any = None, trace_header: Any = None
    ) -> Any:
        if name is None:
            name = str(uuid.uuid4())
        elif not name:
            raise ValidationException(
                "1 validation error detected: Value '' at 'name' failed to satisfy constraint: Member must have length greater than or equal to 1"
            )
        else:
            self._validate_name(name)
        return start_execution(self, state_machine_arn, name, execution_input, trace_header)

    def validate_execution_arn(self: Any, execution_arn: str) -> None:
        self._validate_arn(arn=execution_arn, regex=self.accepted_exec_arn_format, invalid_msg=f"Invalid Arn: '{execution_arn}'")

    StepFunctionsParserBackend.start_execution = start_execution_named  # type: ignore[method-assign]  # moto patched on purpose
    StepFunctionBackend._validate_execution_arn = validate_execution_arn  # type: ignore[method-assign]  # moto patched on purpose


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


def serve(
    host: str,
    port: int,
    log_dir: Path,
    extra_pythonpath: tuple[str, ...] = (),
    scratch_dir: Path | None = None,
    asset: TaskAsset | None = None,
) -> None:
    os.environ["MOTO_PORT"] = str(port)  # where moto's Step Functions engine calls Lambda
    from moto.core.config import default_user_config
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import run_simple

    default_user_config["lambda"] = {"use_docker": False}
    default_user_config["stepfunctions"] = {"execute_state_machine": True}
    install_hooks(
        LambdaRunner(
            endpoint=f"http://{host}:{port}",
            lambdas_dir=REPO_LAMBDAS_DIR,
            log_dir=log_dir,
            extra_pythonpath=extra_pythonpath,
            scratch_dir=scratch_dir,
            asset=asset,
        )
    )
    answer_as_step_functions_does()
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
    parser.add_argument("--scratch-dir", type=Path, help="where invocations get their working folders (default: the temp directory)")
    parser.add_argument("--task-python", help="run the functions with this interpreter, from --task-path alone (an asset)")
    parser.add_argument("--task-path", action="append", default=[], help="a folder of the asset, in import order (repeatable)")
    options = parser.parse_args()
    asset = TaskAsset(options.task_python, tuple(options.task_path)) if options.task_python else None
    serve(options.host, options.port, options.log_dir, tuple(options.pythonpath), options.scratch_dir, asset)

"""The three Lambda functions: runtime, architecture, handlers, and the settings each one is given."""

from __future__ import annotations

import pytest
from stack_under_test import HANDLERS, TUNED

from s3wq import config

KINDS = sorted(HANDLERS)


def test_one_function_per_handler(stack):
    for kind in KINDS:
        stack.function(kind)  # exactly one each


@pytest.mark.parametrize("kind", KINDS)
def test_function_runs_python_3_14_on_arm64_with_active_tracing(stack, kind):
    stack.template.has_resource_properties(
        "AWS::Lambda::Function",
        {"Handler": HANDLERS[kind], "Runtime": "python3.14", "Architectures": ["arm64"], "TracingConfig": {"Mode": "Active"}},
    )


@pytest.mark.parametrize("kind", KINDS)
def test_architecture_from_context(synth, kind):
    synth(TUNED).template.has_resource_properties("AWS::Lambda::Function", {"Handler": HANDLERS[kind], "Architectures": ["x86_64"]})


@pytest.mark.parametrize("overrides, seconds", [({}, 900), (TUNED, 300)], ids=["default", "workerTimeoutSeconds=300"])
def test_worker_timeout_is_its_lease(synth, overrides, seconds):
    """One source for both: the lease covers the invocation (no renewals), and a lock goes stale only once it has certainly ended."""
    stack = synth(overrides)
    _, worker = stack.function("worker")
    assert worker["Properties"]["Timeout"] == seconds
    assert stack.environment("worker")[config.ENV_LEASE] == str(seconds)


@pytest.mark.parametrize(
    "overrides, worker_mb, populate_mb",
    [({}, 1769, 3008), (TUNED, 2048, 1024)],
    ids=["cdk.json", "workerMemoryMb=2048,populateMemoryMb=1024"],
)
def test_memory_from_context(synth, overrides, worker_mb, populate_mb):
    template = synth(overrides).template
    template.has_resource_properties("AWS::Lambda::Function", {"Handler": HANDLERS["worker"], "MemorySize": worker_mb})
    template.has_resource_properties("AWS::Lambda::Function", {"Handler": HANDLERS["populate"], "MemorySize": populate_mb})


@pytest.mark.parametrize("overrides, prefix", [({}, "s3wq"), (TUNED, "data/run1")], ids=["default", "workspacePrefix=data/run1"])
@pytest.mark.parametrize("kind", KINDS)
def test_workspace_is_the_bucket_and_prefix(synth, overrides, prefix, kind):
    stack = synth(overrides)
    assert stack.environment(kind)[config.ENV_WORKSPACE] == f"s3://{stack.bucket_name}/{prefix}"


def test_populate_knows_the_state_machine(stack):
    state_machine_id, _ = stack.state_machine()
    # Ref of a state machine is its ARN.
    assert stack.environment("populate")[config.ENV_STATE_MACHINE_ARN] == "${%s}" % state_machine_id
    assert config.ENV_STATE_MACHINE_ARN not in stack.environment("worker")


def test_environment_names_are_the_librarys(stack):
    """The stack sets variables the handlers read, under the names s3wq.config defines."""
    for kind in KINDS:
        s3wq_names = {name for name in stack.environment(kind) if name.startswith("S3WQ_")}
        known = {value for name, value in vars(config).items() if name.startswith("ENV_")}
        assert s3wq_names <= known, f"{kind}: unknown variables {sorted(s3wq_names - known)}"


def test_each_function_has_its_own_role_and_log_group(stack):
    roles = {kind: stack.role_id(kind) for kind in KINDS}
    assert len(set(roles.values())) == len(KINDS)
    log_groups = {stack.arn(stack.function(kind)[1]["Properties"]["LoggingConfig"]["LogGroup"]) for kind in KINDS}
    assert len(log_groups) == len(KINDS)
    for role_id in roles.values():
        trust = stack.resources[role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        trusted = [(statement["Action"], statement["Principal"]) for statement in trust]
        assert trusted == [("sts:AssumeRole", {"Service": "lambda.amazonaws.com"})]
        # Inline grants only: no AWS-managed policy with rights beyond this function's log group.
        assert "ManagedPolicyArns" not in stack.resources[role_id]["Properties"]


@pytest.mark.parametrize("tracing", [True, False])
@pytest.mark.parametrize("kind", KINDS)
def test_tracing_setting_switches_lambda_and_powertools_together(synth, kind, tracing):
    stack = synth({} if tracing else {"tracing": False})
    mode = stack.function(kind)[1]["Properties"].get("TracingConfig", {}).get("Mode", "PassThrough")
    assert mode == ("Active" if tracing else "PassThrough")
    assert stack.environment(kind)["POWERTOOLS_TRACE_DISABLED"] == ("false" if tracing else "true")


@pytest.mark.parametrize("check", [True, False])
def test_check_inputs_setting_reaches_populate_alone(synth, check):
    stack = synth({} if check else {"checkInputs": False})
    assert stack.environment("populate")[config.ENV_CHECK_INPUTS] == ("true" if check else "false")
    assert config.ENV_CHECK_INPUTS not in stack.environment("worker")


def test_worker_reserved_concurrency_is_optional_and_set_on_the_worker_alone(synth, stack):
    assert all("ReservedConcurrentExecutions" not in stack.function(kind)[1]["Properties"] for kind in KINDS)
    reserved = synth({"workerReservedConcurrency": 300, "maxWorkers": 300})
    assert reserved.function("worker")[1]["Properties"]["ReservedConcurrentExecutions"] == 300
    assert all("ReservedConcurrentExecutions" not in reserved.function(kind)[1]["Properties"] for kind in ("populate", "status"))


def test_up_to_ten_thousand_workers_may_be_allowed(synth):
    stack = synth({"maxWorkers": 10_000})
    assert stack.context["maxWorkers"] == 10_000
    assert "States.ArrayRange" not in str(stack.definition())

"""The three Lambda functions: runtime, architecture, handlers, and the settings each one is given."""

from __future__ import annotations

import re

import pytest
from aws_cdk.assertions import Match
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
    ids=["defaults", "workerMemoryMb=2048,populateMemoryMb=1024"],
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
    assert stack.settings.max_workers == 10_000
    assert "States.ArrayRange" not in str(stack.definition())


GROUP_TIMEOUT = {"groupTimeoutSeconds": 120}


def test_group_timeout_reaches_the_worker_alone(synth):
    """groupTimeoutSeconds is the worker's: no other function runs a group."""
    template = synth(GROUP_TIMEOUT).template
    template.has_resource_properties(
        "AWS::Lambda::Function",
        {"Handler": HANDLERS["worker"], "Environment": {"Variables": Match.object_like({config.ENV_GROUP_TIMEOUT: "120.0"})}},
    )
    for kind in ("populate", "status"):
        template.has_resource_properties(
            "AWS::Lambda::Function",
            {"Handler": HANDLERS[kind], "Environment": {"Variables": Match.object_like({config.ENV_GROUP_TIMEOUT: Match.absent()})}},
        )


def test_without_a_group_timeout_the_worker_gets_none(stack):
    stack.template.has_resource_properties(
        "AWS::Lambda::Function",
        {"Handler": HANDLERS["worker"], "Environment": {"Variables": Match.object_like({config.ENV_GROUP_TIMEOUT: Match.absent()})}},
    )


def test_the_stack_group_timeout_is_what_the_worker_reads(synth):
    """One path from the setting to the worker: the variable the stack writes parses, in LambdaConfig, to the same number."""
    environment = synth(GROUP_TIMEOUT).environment("worker")
    assert config.LambdaConfig.from_env(deployable({**environment, config.ENV_WORKSPACE: "s3://a-bucket/s3wq"})).group_timeout == 120.0


@pytest.mark.parametrize("context, cap", [({}, config.DEFAULT_MAX_INPUT_BYTES), ({"maxInputBytes": 1000}, 1000)])
def test_the_input_size_cap_reaches_the_worker_alone_and_is_what_it_reads(synth, context, cap):
    """maxInputBytes, or the runtime's one default, in S3WQ_MAX_INPUT_BYTES of the worker: the function that reads inputs."""
    stack = synth(context)
    environment = stack.environment("worker")
    assert config.LambdaConfig.from_env(deployable({**environment, config.ENV_WORKSPACE: "s3://a-bucket/s3wq"})).max_input_bytes == cap
    for kind in ("populate", "status"):
        assert config.ENV_MAX_INPUT_BYTES not in stack.environment(kind)


def deployable(environment: dict[str, str]) -> dict[str, str]:
    """The variables as the functions get them: the state machine's ARN and a created bucket's name are references until deployed."""
    deployed = {name: re.sub(r"\$\{[A-Za-z0-9]+\}", "created-bucket", value) for name, value in environment.items()}
    return {**deployed, config.ENV_STATE_MACHINE_ARN: "arn:aws:states:us-east-1:123456789012:stateMachine:s3wq"}


@pytest.mark.parametrize("kind", ["worker", "populate"])
def test_populate_and_worker_are_given_the_input_locations_they_may_read(synth, kind):
    """The runtime refuses every input outside these, whatever a manifest or the index names: nothing implicit, not even the workspace bucket."""
    stack = synth({"inputBuckets": "scans-in/2024,archive-in", "bucketName": "my-workspace"})
    locations = config.LambdaConfig.from_env(deployable(stack.environment(kind))).input_locations
    assert [str(location) for location in locations] == ["s3://scans-in/2024/", "s3://archive-in/"]


@pytest.mark.parametrize("kind", ["worker", "populate"])
def test_in_an_existing_bucket_without_input_buckets_only_the_workspace_inputs_folder_is_allowed(synth, kind):
    """A shared bucket's other keys are not inputs: a manifest naming one is refused, and the roles may not read it either."""
    stack = synth({"bucketName": "my-workspace"})
    policy = config.LambdaConfig.from_env(deployable(stack.environment(kind))).input_policy
    assert [str(location) for location in policy.locations] == ["s3://my-workspace/s3wq/inputs/"] and not policy.local
    assert policy.refusal("s3://my-workspace/s3wq/inputs/scan-1.pdf") is None
    assert "outside the allowed input locations" in policy.refusal("s3://my-workspace/payroll/2026.csv")
    assert "arn:${AWS::Partition}:s3:::my-workspace/*" not in stack.allowed(kind, "s3:GetObject")


INPUT_VARIANTS = {
    "created-bucket": {},
    "existing-bucket": {"bucketName": "my-workspace"},
    "input-buckets": {"inputBuckets": ["scans-in/2024", "archive-in"]},
    "existing-bucket-and-input-buckets": {"bucketName": "my-workspace", "inputBuckets": ["my-workspace/in", "archive-in"]},
}


@pytest.mark.parametrize("kind", ["worker", "populate"])
@pytest.mark.parametrize("overrides", list(INPUT_VARIANTS.values()), ids=list(INPUT_VARIANTS))
def test_the_input_locations_variable_and_the_roles_input_grants_name_the_same_places(synth, overrides, kind):
    """One list makes both: every location the runtime allows is granted, and the role reads nothing else outside its workspace."""
    stack = synth(overrides)
    named = stack.environment(kind)[config.ENV_INPUT_LOCATIONS].split(",")
    assert named and all(location.startswith("s3://") and location.endswith("/") for location in named)
    granted_inputs = {"arn:${AWS::Partition}:s3:::" + location.removeprefix("s3://") + "*" for location in named}
    readable = stack.allowed(kind, "s3:GetObject")
    workspace = f"{stack.bucket_arn}/{stack.prefix}/"
    assert granted_inputs <= readable
    assert {arn for arn in readable - granted_inputs if not arn.startswith(workspace)} == set()
    # And the runtime reads the variable as written (a created bucket's reference stands for its name).
    locations = config.LambdaConfig.from_env(deployable(stack.environment(kind))).input_locations
    assert [str(location) for location in locations] == [re.sub(r"\$\{[A-Za-z0-9]+\}", "created-bucket", location) for location in named]

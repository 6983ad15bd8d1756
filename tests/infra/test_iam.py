"""Least privilege: each function's role may do its own actions on its own prefixes, and nothing with a wildcard action."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match
from stack_under_test import EXISTING_BUCKET, INPUT_BUCKETS, KMS_KEY, TUNED, VARIANTS, folder_of, render

from s3wq.store import layout

# Actions that support no resource-level permissions, so Resource "*" is the only choice.
NO_RESOURCE_LEVEL_PERMISSIONS = {
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
    # CloudWatch Logs delivery, which Step Functions logging uses.
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
}
WORKSPACES = pytest.mark.parametrize(
    "overrides, prefix",
    [({}, "s3wq"), (EXISTING_BUCKET, "s3wq"), (INPUT_BUCKETS, "s3wq"), (TUNED, "data/run1")],
    ids=["default", "existing-bucket", "input-buckets", "workspacePrefix=data/run1"],
)


def _all_role_statements(stack):
    for role_id in stack.template.find_resources("AWS::IAM::Role"):
        for statement in stack.statements(role_id):
            yield role_id, statement


@pytest.mark.parametrize("overrides", VARIANTS.values(), ids=VARIANTS.keys())
def test_no_role_statement_has_a_wildcard_action(synth, overrides):
    stack = synth(overrides)
    wildcards = [(role_id, action) for role_id, statement in _all_role_statements(stack) for action in statement.actions if "*" in action]
    assert not wildcards
    stack.template.resource_count_is("AWS::IAM::ManagedPolicy", 0)


@pytest.mark.parametrize("overrides", VARIANTS.values(), ids=VARIANTS.keys())
def test_resource_star_only_for_actions_without_resource_level_permissions(synth, overrides):
    stack = synth(overrides)
    too_broad = [
        (role_id, sorted(set(statement.actions) - NO_RESOURCE_LEVEL_PERMISSIONS))
        for role_id, statement in _all_role_statements(stack)
        if "*" in statement.resources and set(statement.actions) - NO_RESOURCE_LEVEL_PERMISSIONS
    ]
    assert not too_broad


@WORKSPACES
def test_worker_writes_only_locks_flags_results_and_input_errors(synth, overrides, prefix):
    stack = synth(overrides)
    workspace = f"{stack.bucket_arn}/{prefix}"
    expected = {
        f"{workspace}/worker_locks/*",
        f"{workspace}/done_flags/*",
        f"{workspace}/failed_flags/*",
        f"{workspace}/results/*",
        f"{workspace}/input_errors/*",
    }
    assert stack.allowed("worker", "s3:PutObject") == expected
    # ... which are the folders the library writes its locks, flags, results and input-error lists to.
    folders = (layout.LOCKS_PREFIX, layout.DONE_PREFIX, layout.FAILED_PREFIX, layout.RESULTS_PREFIX, layout.INPUT_ERRORS_PREFIX)
    assert expected == {f"{workspace}/{folder_of(folder)}*" for folder in folders}
    assert stack.allowed("worker", "s3:DeleteObject") == {f"{workspace}/worker_locks/*", f"{workspace}/input_errors/*"}


@WORKSPACES
def test_populate_writes_only_the_index_and_its_manifest_error_records(synth, overrides, prefix):
    stack = synth(overrides)
    workspace = f"{stack.bucket_arn}/{prefix}"
    assert stack.allowed("populate", "s3:PutObject") == {f"{workspace}/index/*", f"{workspace}/{layout.MANIFEST_ERRORS_PREFIX}*"}
    assert stack.allowed("populate", "s3:DeleteObject") == {f"{workspace}/manifest_errors/*"}
    # Never under manifests/: a write there would trigger populate again.
    assert not layout.MANIFEST_ERRORS_PREFIX.startswith(layout.MANIFESTS_DIR)


@pytest.mark.parametrize("overrides", VARIANTS.values(), ids=VARIANTS.keys())
def test_status_writes_nothing(synth, overrides):
    stack = synth(overrides)
    actions = {action for statement in stack.statements(stack.role_id("status")) for action in statement.actions}
    # Its own log stream and traces are all it may write.
    assert {action for action in actions if "Put" in action or "Delete" in action} <= {
        "logs:PutLogEvents",
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
    }
    assert {action for action in actions if action.startswith("s3:")} == {"s3:GetObject", "s3:ListBucket"}


@WORKSPACES
def test_status_may_read_the_index_the_locks_and_the_done_flags_it_counts(synth, overrides, prefix):
    # Without the locks and flags, a count of a workspace with a handed-back or held lock is AccessDenied on AWS.
    stack = synth(overrides)
    workspace = f"{stack.bucket_arn}/{prefix}"
    assert stack.allowed("status", "s3:GetObject") == {
        f"{workspace}/index/*",
        f"{workspace}/{layout.LEGACY_INDEX_KEY}",
        f"{workspace}/{folder_of(layout.LOCKS_PREFIX)}*",
        f"{workspace}/{folder_of(layout.DONE_PREFIX)}*",
    }


def test_populate_starts_only_this_state_machine(stack):
    state_machine_id, _ = stack.state_machine()
    assert stack.allowed("populate", "states:StartExecution") == {"${%s}" % state_machine_id}
    for kind in ("worker", "status"):
        actions = {action for statement in stack.statements(stack.role_id(kind)) for action in statement.actions}
        assert not {action for action in actions if action.startswith("states:")}, kind


def test_state_machine_invokes_only_the_worker_and_status(stack):
    _, machine = stack.state_machine()
    role_id = machine["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    invoked = {
        resource.removesuffix(":*")
        for statement in stack.statements(role_id)
        if "lambda:InvokeFunction" in statement.actions
        for resource in statement.resources
    }
    assert invoked == {"${%s.Arn}" % stack.function_id(kind) for kind in ("worker", "status")}


def test_function_policies_belong_to_one_role_each(stack):
    function_roles = {stack.role_id(kind) for kind in ("populate", "worker", "status")}
    for policy_id, policy in stack.template.find_resources("AWS::IAM::Policy").items():
        attached = {reference["Ref"] for reference in policy["Properties"].get("Roles", [])} & function_roles
        assert len(attached) <= 1, f"{policy_id} is shared by {sorted(attached)}"


def test_input_buckets_are_readable_under_their_prefix(synth):
    stack = synth(INPUT_BUCKETS)
    in_bucket = "arn:${AWS::Partition}:s3:::in-bucket"
    assert f"{in_bucket}/scans/*" in stack.allowed("worker", "s3:GetObject")
    assert f"{in_bucket}/scans/*" in stack.allowed("populate", "s3:GetObject")
    # Nothing else of that bucket, and no writes to it.
    for kind in ("worker", "populate", "status"):
        for statement in stack.statements(stack.role_id(kind)):
            for resource in statement.resources:
                if resource.startswith(in_bucket + "/"):
                    assert statement.actions == ("s3:GetObject",) and resource == f"{in_bucket}/scans/*", (kind, statement)


def test_populate_lists_input_buckets_only_under_their_prefix(synth):
    stack = synth(INPUT_BUCKETS)
    in_bucket = "arn:${AWS::Partition}:s3:::in-bucket"
    listings = [
        statement
        for statement in stack.statements(stack.role_id("populate"))
        if "s3:ListBucket" in statement.actions and in_bucket in statement.resources
    ]
    assert len(listings) == 1
    (listing,) = listings
    assert listing.resources == (in_bucket,)
    assert set(listing.condition) == {"StringLike"} and set(listing.condition["StringLike"]) == {"s3:prefix"}
    assert set(listing.condition["StringLike"]["s3:prefix"]) <= {"scans", "scans/", "scans/*"}
    stack.template.has_resource_properties(
        "AWS::IAM::Policy",
        {
            "Roles": Match.array_with([{"Ref": stack.role_id("populate")}]),
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {"Action": "s3:ListBucket", "Condition": {"StringLike": {"s3:prefix": Match.array_with(["scans/*"])}}}
                        )
                    ]
                )
            },
        },
    )
    assert in_bucket not in stack.allowed("worker", "s3:ListBucket")


def test_sse_kms_keys_are_granted_through_s3_only_and_only_as_each_function_needs(synth):
    stack = synth(INPUT_BUCKETS)
    for kind, actions in {
        "worker": {"kms:Decrypt", "kms:GenerateDataKey"},
        "populate": {"kms:Decrypt", "kms:GenerateDataKey"},
        "status": {"kms:Decrypt"},
    }.items():
        statements = [s for s in stack.statements(stack.role_id(kind)) if any(a.startswith("kms:") for a in s.actions)]
        assert len(statements) == 1, (kind, statements)
        [statement] = statements
        assert set(statement.actions) == actions
        assert statement.resources == (KMS_KEY,)
        assert json.dumps(statement.condition) == json.dumps(
            {"StringEquals": {"kms:ViaService": statement.condition["StringEquals"]["kms:ViaService"]}}
        )
        assert render(statement.condition["StringEquals"]["kms:ViaService"]) == "s3.${AWS::Region}.amazonaws.com"


def test_without_kms_keys_no_function_may_use_kms(stack):
    for kind in ("worker", "populate", "status"):
        assert not [a for s in stack.statements(stack.role_id(kind)) for a in s.actions if a.startswith("kms:")]

"""The workspace bucket: locked down when the stack creates it, referenced by name when it already exists."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match
from stack_under_test import EXISTING_BUCKET, TUNED, folder_of

from s3wq.store import layout


def test_bucket_blocks_all_public_access(stack):
    stack.template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            }
        },
    )


def test_bucket_encrypts_with_s3_managed_keys(stack):
    stack.template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": Match.array_with(
                    [Match.object_like({"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}})]
                )
            }
        },
    )


def test_bucket_outlives_the_stack(stack):
    # It holds the results; deleting the stack must not take them along.
    stack.template.has_resource("AWS::S3::Bucket", {"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"})


def test_bucket_policy_denies_requests_without_tls_to_bucket_and_objects(stack):
    stack.template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "Bucket": {"Ref": stack.bucket_id},
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Principal": {"AWS": "*"},
                                "Action": "s3:*",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        )
                    ]
                )
            },
        },
    )
    _, policy = stack.one("AWS::S3::BucketPolicy")
    denials = [
        statement
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement["Effect"] == "Deny" and statement.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
    ]
    covered = {stack.arn(resource) for statement in denials for resource in statement["Resource"]}
    assert {stack.bucket_arn, stack.bucket_arn + "/*"} <= covered


@pytest.mark.parametrize("overrides, prefix", [({}, "s3wq"), (TUNED, "data/run1")], ids=["default", "workspacePrefix=data/run1"])
def test_lifecycle_expires_only_worker_locks_after_one_day(synth, overrides, prefix):
    stack = synth(overrides)
    locks = f"{prefix}/{folder_of(layout.LOCKS_PREFIX)}"
    stack.template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "LifecycleConfiguration": {
                "Rules": Match.array_with([Match.object_like({"Prefix": locks, "ExpirationInDays": 1, "Status": "Enabled"})])
            }
        },
    )
    # Done flags, failed flags, results and the index are the queue's state:
    # no rule may expire them.
    _, bucket = stack.one("AWS::S3::Bucket")
    expiring = [
        rule
        for rule in bucket["Properties"]["LifecycleConfiguration"]["Rules"]
        if any(key in rule for key in ("ExpirationInDays", "ExpirationDate", "NoncurrentVersionExpiration"))
    ]
    assert [rule.get("Prefix") for rule in expiring] == [locks]


def test_existing_bucket_is_not_created(synth):
    stack = synth(EXISTING_BUCKET)
    stack.template.resource_count_is("AWS::S3::Bucket", 0)
    stack.template.resource_count_is("AWS::S3::BucketPolicy", 0)
    assert stack.bucket_id is None
    assert stack.bucket_arn == "arn:${AWS::Partition}:s3:::my-existing-bucket"


def test_existing_bucket_is_the_workspace_and_gets_the_notification(synth):
    stack = synth(EXISTING_BUCKET)
    for kind in ("populate", "worker", "status"):
        assert stack.environment(kind)["S3WQ_WORKSPACE"] == "s3://my-existing-bucket/s3wq"
    stack.template.has_resource_properties("Custom::S3BucketNotifications", {"BucketName": "my-existing-bucket"})
    _, permission = stack.one("AWS::Lambda::Permission", {"Principal": "s3.amazonaws.com"})
    assert stack.arn(permission["Properties"]["SourceArn"]) == "arn:${AWS::Partition}:s3:::my-existing-bucket"


def test_existing_bucket_grants_name_that_bucket(synth):
    stack = synth(EXISTING_BUCKET)
    bucket = "arn:${AWS::Partition}:s3:::my-existing-bucket"
    assert stack.allowed("worker", "s3:DeleteObject") == {f"{bucket}/s3wq/worker_locks/*", f"{bucket}/s3wq/input_errors/*"}
    assert stack.allowed("populate", "s3:PutObject") == {f"{bucket}/s3wq/index/*", f"{bucket}/s3wq/manifest_errors/*"}
    for kind in ("populate", "worker", "status"):
        assert bucket in stack.allowed(kind, "s3:ListBucket")

"""Uploading a manifest starts the populate function: the bucket's notification and the permission behind it."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match
from stack_under_test import EXISTING_BUCKET, TUNED


@pytest.mark.parametrize(
    "overrides, manifests",
    [({}, "s3wq/manifests/"), (TUNED, "data/run1/manifests/"), (EXISTING_BUCKET, "s3wq/manifests/")],
    ids=["default", "workspacePrefix=data/run1", "existing-bucket"],
)
def test_object_created_under_manifests_invokes_populate(synth, overrides, manifests):
    stack = synth(overrides)
    bucket = {"Ref": stack.bucket_id} if stack.bucket_id else stack.bucket_name
    stack.template.has_resource_properties(
        "Custom::S3BucketNotifications",
        {
            "BucketName": bucket,
            "NotificationConfiguration": {
                "LambdaFunctionConfigurations": [
                    {
                        "Events": ["s3:ObjectCreated:*"],
                        "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": manifests}]}},
                        "LambdaFunctionArn": {"Fn::GetAtt": [stack.function_id("populate"), "Arn"]},
                    }
                ]
            },
        },
    )


def test_only_s3_of_this_account_and_bucket_may_invoke_populate(stack):
    stack.template.has_resource_properties(
        "AWS::Lambda::Permission",
        {
            "Action": "lambda:InvokeFunction",
            "FunctionName": {"Fn::GetAtt": [stack.function_id("populate"), "Arn"]},
            "Principal": "s3.amazonaws.com",
            "SourceAccount": {"Ref": "AWS::AccountId"},
            "SourceArn": Match.any_value(),
        },
    )
    _, permission = stack.one("AWS::Lambda::Permission", {"Principal": "s3.amazonaws.com"})
    assert stack.arn(permission["Properties"]["SourceArn"]) == stack.bucket_arn

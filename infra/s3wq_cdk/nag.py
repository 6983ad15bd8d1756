"""cdk-nag: the findings of an s3wq queue that are suppressed, each with its reason, and only where they arise.

Given the resources, not the queue construct: the queue calls this module, never the other way round.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from aws_cdk import Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_stepfunctions as sfn
from cdk_nag import NagPackSuppression, NagSuppressions, RegexAppliesTo
from constructs import Construct, IConstruct

if TYPE_CHECKING:
    from .model_endpoint import ModelEndpoint


def _js_regex(text: str) -> str:
    """``text`` matched literally inside cdk-nag's ``/.../`` (a JavaScript regex)."""
    return re.sub(r"([\\^$.|?*+()\[\]{}/])", r"\\\1", text)


def suppress_findings(
    queue: Construct,
    *,
    functions: Sequence[lambda_.Function],
    state_machine: sfn.StateMachine,
    created_bucket: s3.IBucket | None,
    workspace_prefix: str,
) -> None:
    """Every suppression of the queue, on the resource it concerns; ``created_bucket`` only when the queue made it."""
    _roles(functions, workspace_prefix)
    _state_machine(state_machine)
    if created_bucket is not None:
        _bucket(created_bucket)
    _notifications_handler(queue)


def _roles(functions: Sequence[lambda_.Function], prefix: str) -> None:
    NagSuppressions.add_resource_suppressions(
        cast("list[IConstruct]", [fn.role for fn in functions]),  # each function is made with its own role
        [
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason=f"Object keys under the workspace prefix ({prefix}/...) and under the input prefixes are created at "
                "run time, one per group, so they are granted by prefix, one action per statement. Populate may describe "
                "only the executions it names itself (manifest-* and sources-*). X-Ray's PutTraceSegments and "
                "PutTelemetryRecords support no resource-level permissions, nor do the network-interface actions a worker "
                "in a VPC needs (those of AWSLambdaVPCAccessExecutionRole, inline).",
                applies_to=[
                    # <bucket>.Arn/<prefix>/<folder>/* (the bucket's logical ID is the user's when S3wqQueue gets one)
                    # and arn:...:s3:::<bucket>[/<prefix>]/*
                    RegexAppliesTo(regex=f"/^Resource::<[A-Za-z0-9]+\\.Arn>\\/{_js_regex(prefix)}\\/.*\\*$/"),
                    RegexAppliesTo(regex="/^Resource::arn:<AWS::Partition>:s3:::.*\\/\\*$/"),
                    RegexAppliesTo(
                        regex="/^Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:.*:(manifest|sources)-\\*$/"
                    ),
                    "Resource::*",
                ],
            )
        ],
        apply_to_children=True,
    )


def _state_machine(state_machine: sfn.StateMachine) -> None:
    NagSuppressions.add_resource_suppressions(
        state_machine,
        [
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason="Invoking a Lambda by its ARN with :* covers its versions and aliases; the Distributed Map starts and "
                "describes its own child executions, whose names it generates; CloudWatch Logs delivery, X-Ray and "
                "the model endpoint's DescribeTargetHealth (vlmServe=ecs) support no resource-level permissions.",
                applies_to=[
                    RegexAppliesTo(regex="/^Resource::<.*\\.Arn>:\\*$/"),
                    RegexAppliesTo(regex="/^Resource::\\*$/"),
                    RegexAppliesTo(regex="/^Resource::arn:<AWS::Partition>:states:.*$/"),
                ],
            )
        ],
        apply_to_children=True,
    )


def _bucket(bucket: s3.IBucket) -> None:
    NagSuppressions.add_resource_suppressions(
        bucket,
        [
            NagPackSuppression(
                id="AwsSolutions-S1",
                reason="The workspace holds queue state written several times per group; server access logs would "
                "roughly double its request volume. Audit access with CloudTrail S3 data events where required.",
            )
        ],
    )


def _notifications_handler(queue: Construct) -> None:
    # The custom resource CDK adds to configure bucket notifications: its
    # code and role are CDK's own, so its findings are suppressed there only.
    for handler in (c for c in Stack.of(queue).node.children if c.node.id.startswith("BucketNotificationsHandler")):
        NagSuppressions.add_resource_suppressions(
            handler,
            [
                NagPackSuppression(
                    id="AwsSolutions-IAM4",
                    reason="CDK's BucketNotificationsHandler, which sets the bucket's notification configuration at "
                    "deploy time, uses the AWS-managed basic execution role; our functions use inline roles.",
                    applies_to=["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"],
                ),
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="CDK's BucketNotificationsHandler calls s3:PutBucketNotification while deploying; CDK writes "
                    "its policy with Resource * and the function runs only during stack updates.",
                    applies_to=["Resource::*"],
                ),
            ],
            apply_to_children=True,
        )


def suppress_endpoint_findings(endpoint: ModelEndpoint) -> None:
    """The model endpoint's findings (model_endpoint.py), each on the resource it concerns."""
    findings: list[tuple[IConstruct, str, str, list[str] | None]] = [
        (
            endpoint.auto_scaling_group,
            "AwsSolutions-AS3",
            "The GPU instances start and stop with the queue's backlog, managed by the cluster's capacity provider; each "
            "scaling shows in the ECS service's events and the cluster's Container Insights, and no one acts on a "
            "notification per instance.",
            None,
        ),
        (
            endpoint.task_definition,
            "AwsSolutions-ECS2",
            "The container's one environment variable is AWS_REGION, which CDK adds; the model and its settings are "
            "command-line arguments, and nothing secret is passed to it.",
            None,
        ),
        (
            endpoint.load_balancer,
            "AwsSolutions-ELB2",
            "An internal load balancer that only the workers' security group may reach; each request is one page whose "
            "outcome the worker records in its result, and the target group's CloudWatch metrics show requests, errors and "
            "latency. Access logs would need a log bucket of their own for no one to read.",
            None,
        ),
        (
            endpoint.instance_role,
            "AwsSolutions-IAM5",
            "The ECS container agent's actions that take no narrower resource: ecs:Poll and StartTelemetrySession act on "
            "container instances that exist only once they register (conditioned on this cluster), and "
            "ecs:DiscoverPollEndpoint supports no resource-level permissions.",
            ["Resource::*"],
        ),
    ]
    execution_role = endpoint.task_definition.execution_role
    if endpoint.pulls_from_ecr and execution_role is not None:
        findings.append(
            (
                execution_role,
                "AwsSolutions-IAM5",
                "The task pulls its image from the ECR repository vlmImage names, granted by name; "
                "ecr:GetAuthorizationToken, which every pull starts with, supports no resource-level permissions.",
                ["Resource::*"],
            )
        )
    for construct, rule, reason, applies_to in findings:
        suppression = (
            NagPackSuppression(id=rule, reason=reason, applies_to=applies_to) if applies_to else NagPackSuppression(id=rule, reason=reason)
        )
        NagSuppressions.add_resource_suppressions(construct, [suppression], apply_to_children=True)

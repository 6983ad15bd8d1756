"""The three Lambda functions, each with its own role and log group; the Stack grants what each may touch."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from s3wq import config as s3wq_config

from .network import WorkerNetwork
from .runtime import RUNTIME, WORKER_HANDLER
from .settings import DeploySettings

ARCHITECTURES = {"arm64": lambda_.Architecture.ARM_64, "x86_64": lambda_.Architecture.X86_64}
STATUS_TIMEOUT_SECONDS = 300
STATUS_MEMORY_MB = 1024
VPC_ACCESS_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
)


def _common_environment(settings: DeploySettings, workspace_uri: str) -> dict[str, str]:
    """What every function reads: the workspace, the attempts, the processor, and Powertools' names."""
    return {
        s3wq_config.ENV_WORKSPACE: workspace_uri,
        s3wq_config.ENV_MAX_ATTEMPTS: str(settings.max_attempts),
        s3wq_config.ENV_PROCESSOR: settings.processor,
        "POWERTOOLS_SERVICE_NAME": "s3wq",
        "POWERTOOLS_METRICS_NAMESPACE": "s3wq",
        "POWERTOOLS_TRACE_DISABLED": "false" if settings.tracing else "true",
    }


def _worker_environment(settings: DeploySettings, model_endpoint: str | None) -> dict[str, str]:
    """The worker's own variables, beside the common ones."""
    return {
        # One source for both: the lease outlasts the invocation, so a
        # worker never renews, and its lock goes stale only after its
        # invocation has certainly ended.
        s3wq_config.ENV_LEASE: str(settings.worker_timeout_seconds),
        # The worker's alone: populate reads manifests, not inputs.
        s3wq_config.ENV_MAX_INPUT_BYTES: str(settings.max_input_bytes),
        # The worker's alone: no other function runs a group. Unset: no group timeout.
        **({} if settings.group_timeout_seconds is None else {s3wq_config.ENV_GROUP_TIMEOUT: str(settings.group_timeout_seconds)}),
        # The processor's own settings (ocrMode, ocrLang; vlm*): its host inherits the worker's environment.
        **settings.processor_environment(model_endpoint=model_endpoint),
    }


class QueueFunctions(Construct):
    """Exposes ``populate``, ``worker`` and ``status`` (``lambda_.Function``)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        settings: DeploySettings,
        workspace_uri: str,
        worker_code: lambda_.Code | lambda_.DockerImageCode | None = None,
        network: WorkerNetwork | None = None,
        model_endpoint: str | None = None,
    ):
        """``code`` for every function; ``worker_code`` (a zip with the processor, or an image) for the worker alone.

        ``network``: the VPC the worker runs in (its model is private); ``model_endpoint``: the URL of the one the stack starts.
        """
        super().__init__(scope, construct_id)
        self._code = code
        self._settings = settings
        self._network = network
        common = _common_environment(settings, workspace_uri)
        self.worker = self._function(
            "Worker",
            handler=WORKER_HANDLER,
            timeout=settings.worker_timeout_seconds,
            memory=settings.effective_worker_memory_mb,
            environment={**common, **_worker_environment(settings, model_endpoint)},
            description="s3wq worker: claims and processes groups until the queue is empty or time runs out",
            reserved_concurrency=settings.worker_reserved_concurrency,
            code=worker_code,
            network=network,
        )
        self.populate = self._function(
            "Populate",
            handler="s3wq.handlers.populate.handler",
            timeout=settings.populate_timeout_seconds,
            memory=settings.populate_memory_mb,
            environment={
                **common,
                s3wq_config.ENV_GROUP_SIZE: str(settings.effective_group_size),
                s3wq_config.ENV_CHECK_INPUTS: "true" if settings.check_inputs else "false",
                s3wq_config.ENV_WORKERS: str(settings.effective_default_workers),
                s3wq_config.ENV_AUTO_START: "true",
            },
            description="s3wq populate: indexes uploaded manifests and starts the workers",
        )
        self.status = self._function(
            "Status",
            handler="s3wq.handlers.status.handler",
            timeout=STATUS_TIMEOUT_SECONDS,
            memory=STATUS_MEMORY_MB,
            environment=common,
            description="s3wq status: counts done, failed, locked and pending groups",
        )

    def _function(
        self,
        name: str,
        *,
        handler: str,
        timeout: int,
        memory: int,
        environment: dict,
        description: str,
        reserved_concurrency: int | None = None,
        code: lambda_.Code | lambda_.DockerImageCode | None = None,
        network: WorkerNetwork | None = None,
    ) -> lambda_.Function:
        log_group = logs.LogGroup(self, f"{name}Logs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY)
        # Our own role instead of the AWS-managed basic execution policy: it
        # may write to this function's log group and nothing else.
        role = iam.Role(
            self, f"{name}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description=f"s3wq {name.lower()} function"
        )
        role.add_to_policy(iam.PolicyStatement(actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_group.log_group_arn]))
        placement: dict[str, Any] = {}
        if network is not None:
            # What AWSLambdaVPCAccessExecutionRole grants, inline on our own role (which CDK leaves alone): Lambda makes the
            # function's network interfaces in its subnets with the function's role. These actions take no resource narrower.
            role.add_to_policy(iam.PolicyStatement(actions=list(VPC_ACCESS_ACTIONS), resources=["*"]))
            placement = {"vpc": network.vpc, "vpc_subnets": network.subnets, "security_groups": network.worker_security_groups}
        # The same function either way: an image differs only in its code, and names its handler in its CMD.
        kind: type[lambda_.Function]
        packaging: dict[str, Any]
        if isinstance(code, lambda_.DockerImageCode):
            kind, packaging = lambda_.DockerImageFunction, {"code": code}
        else:
            kind, packaging = lambda_.Function, {"runtime": RUNTIME, "code": code or self._code, "handler": handler}
        return kind(
            self,
            name,
            **packaging,
            architecture=ARCHITECTURES[self._settings.architecture],
            timeout=Duration.seconds(timeout),
            memory_size=memory,
            role=role,
            log_group=log_group,
            tracing=lambda_.Tracing.ACTIVE if self._settings.tracing else lambda_.Tracing.DISABLED,
            environment=environment,
            description=description,
            reserved_concurrent_executions=reserved_concurrency,
            **placement,
        )

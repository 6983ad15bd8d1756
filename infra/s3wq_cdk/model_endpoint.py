"""The model the ``vlm`` and ``auto`` workers ask, started by the stack (``vlmServe=ecs``): vLLM on ECS GPU instances, none while idle.

    workers (Lambda, in the VPC) --80--> internal load balancer --8000--> vLLM task (1 GPU) on an instance of the ASG

An Auto Scaling group of GPU instances (``vlmInstanceType``, g6.xlarge: one
L4) on the ECS GPU-optimised AMI, from none up to ``vlmMaxInstances``, is the
cluster's capacity provider with managed scaling: ECS starts an instance for
each task it cannot place and ends the instance a task left. The service's
desired count follows the queue:

* **out** when a count finds groups remaining (the status function publishes
  ``GroupsRemaining`` for the workspace at every count; the drain loop counts
  before its first round): every instance at once, because the execution's
  workers (``defaultWorkers``: one instance's worth each) all start then;
* **in to none** after IDLE_MINUTES in which no count found groups remaining
  and no worker ran. A missing datapoint is idle: a run ended, a stack whose
  status never counted, a metric that stopped.

A task takes minutes to serve (an instance, the image pull, the weights'
download, the model's load): the drain loop's first round waits until the
load balancer has a healthy target (``serving_wait``, up to SERVING_WAIT),
so that its workers do not meet a 503, hand their groups back unavailable
and end the execution ServiceUnavailable.
"""

from __future__ import annotations

import re

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from .network import WorkerNetwork
from .settings import DeploySettings
from .vlm_settings import ENDPOINT_PORT, MAX_MODEL_LEN, VLLM_PORT, model_image, model_instance_type, model_instances, model_name

# Longer than any quiet stretch of a run: a round (a worker invocation, at most the 900 s Lambda allows) or the wait
# for a lock to go stale (at most the worker's lease, the same 900 s); during a round the workers' concurrency shows.
IDLE_MINUTES = 20
# The image (~10 GB), the weights (~9 GB) and a model's load and warm-up (CUDA graphs) before /health answers.
STARTUP_GRACE = Duration.minutes(20)
# Root volume: the AMI, the image unpacked, the Hugging Face cache of the weights.
ROOT_VOLUME_GIB = 100
# vLLM's host memory: the weights pass through it while loading. Every g and p instance of xlarge or more has 16 GiB.
TASK_MEMORY_RESERVATION_MIB = 12 * 1024
# /dev/shm for vLLM's processes (Docker's default of 64 MB is too small for its inputs).
SHARED_MEMORY_MIB = 2048
# An answer comes whole, after up to S3WQ_VLM_REQUEST_TIMEOUT (at most 900 s) of silence on the connection.
IDLE_TIMEOUT = Duration.seconds(900)
HEALTH_PATH = "/health"  # vLLM's: 200 once the model is loaded
# How long the drain loop's first round waits for the endpoint to serve, asking every SERVING_POLL: an instance's start
# (GPU capacity may take a few tries), the image, the weights, the model's load, then the load balancer's two checks.
SERVING_WAIT = Duration.minutes(30)
SERVING_POLL = Duration.seconds(30)
NOT_SERVING = "ModelNotServing"
# Between whole counts: a threshold on an integer at its half has no boundary case to read (a step's bounds are
# inclusive on one side only, and which side depends on the alarm's direction).
_HALF = 0.5
# An image in an ECR registry: pulled with the task's execution role, which is granted that repository.
_ECR_IMAGE_RE = re.compile(
    r"(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?/(?P<name>[a-z0-9._/-]+)"
    r"(:(?P<tag>[A-Za-z0-9._-]+)|@(?P<digest>sha256:[0-9a-f]{64}))"
)
# The ECS container agent's actions on its cluster, and those on its container instances (unknown until they register).
AGENT_CLUSTER_ACTIONS = (
    "ecs:RegisterContainerInstance",
    "ecs:DeregisterContainerInstance",
    "ecs:SubmitContainerStateChange",
    "ecs:SubmitTaskStateChange",
    "ecs:SubmitAttachmentStateChanges",
)
AGENT_POLL_ACTIONS = ("ecs:Poll", "ecs:StartTelemetrySession")
# The service-linked role ECS scaling uses; Application Auto Scaling creates it on first use.
_SCALING_ROLE = "aws-service-role/ecs.application-autoscaling.amazonaws.com/AWSServiceRoleForApplicationAutoScaling_ECSService"


class ModelEndpoint(Construct):
    """Exposes ``url`` (S3WQ_VLM_ENDPOINT), ``load_balancer``, ``target_group``, ``cluster``, ``auto_scaling_group``,
    ``capacity_provider``, ``task_definition`` and ``service``; ``allow_from`` opens the endpoint to the workers,
    ``scale_with`` sets its scaling, ``serving_wait`` is the drain loop's wait for it.
    """

    def __init__(self, scope: Construct, construct_id: str, *, settings: DeploySettings, network: WorkerNetwork):
        super().__init__(scope, construct_id)
        self._settings = settings
        self._network = network
        self.cluster = ecs.Cluster(self, "Cluster", vpc=network.vpc, container_insights_v2=ecs.ContainerInsights.ENABLED)
        self.auto_scaling_group = self._instances()
        self.capacity_provider = ecs.AsgCapacityProvider(
            self,
            "Capacity",
            auto_scaling_group=self.auto_scaling_group,
            enable_managed_scaling=True,
            # Each instance runs one task (it has one GPU): an instance per task, none spare.
            target_capacity_percent=100,
            enable_managed_termination_protection=True,
        )
        self.cluster.add_asg_capacity_provider(self.capacity_provider)
        self.task_definition = self._task()
        self.service = self._service()
        self.load_balancer = self._load_balancer()
        self.url = f"http://{self.load_balancer.load_balancer_dns_name}/v1"

    def _instances(self) -> autoscaling.AutoScalingGroup:
        settings = self._settings
        user_data = ec2.UserData.for_linux()
        # A task of awsvpc mode may not read the instance's metadata (and so its role's credentials).
        user_data.add_commands("echo ECS_AWSVPC_BLOCK_IMDS=true >> /etc/ecs/ecs.config")
        security_group = ec2.SecurityGroup(
            self, "InstanceSecurityGroup", vpc=self._network.vpc, description="s3wq model instances: no ingress", allow_all_outbound=True
        )
        template = ec2.LaunchTemplate(
            self,
            "LaunchTemplate",
            instance_type=ec2.InstanceType(model_instance_type(settings)),
            # The GPU variant: NVIDIA's driver and container toolkit, and the agent's GPU support on.
            machine_image=ecs.EcsOptimizedImage.amazon_linux2023(ecs.AmiHardwareType.GPU),
            user_data=user_data,
            # The agent's permissions are ours (_agent_role), so CDK's own grants to the group's role are refused.
            role=self._agent_role().without_policy_updates(),
            security_group=security_group,
            require_imdsv2=True,
            block_devices=[
                ec2.BlockDevice(
                    device_name="/dev/xvda",
                    volume=ec2.BlockDeviceVolume.ebs(ROOT_VOLUME_GIB, volume_type=ec2.EbsDeviceVolumeType.GP3, encrypted=True),
                )
            ],
        )
        return autoscaling.AutoScalingGroup(
            self,
            "Instances",
            vpc=self._network.vpc,
            vpc_subnets=self._network.subnets,
            launch_template=template,
            min_capacity=0,
            max_capacity=model_instances(settings),
        )

    def _agent_role(self) -> iam.Role:
        """The instances' role: what the ECS container agent needs on this cluster, each action by its name.

        CDK would grant its own list, with ``ecs:Submit*``; this is that list spelled out, less what the task's
        execution role does here (the image pull and the task's logs).
        """
        role = iam.Role(self, "InstanceRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"), description="s3wq model instances")
        self.instance_role = role
        cluster = self.cluster.cluster_arn
        role.add_to_policy(iam.PolicyStatement(actions=list(AGENT_CLUSTER_ACTIONS), resources=[cluster]))
        role.add_to_policy(
            iam.PolicyStatement(actions=list(AGENT_POLL_ACTIONS), resources=["*"], conditions={"ArnEquals": {"ecs:cluster": cluster}})
        )
        role.add_to_policy(iam.PolicyStatement(actions=["ecs:DiscoverPollEndpoint"], resources=["*"]))
        return role

    def _task(self) -> ecs.Ec2TaskDefinition:
        settings = self._settings
        model = model_name(settings)
        task = ecs.Ec2TaskDefinition(self, "Task", network_mode=ecs.NetworkMode.AWS_VPC)
        log_group = logs.LogGroup(self, "Logs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY)
        container = task.add_container(
            "Vllm",
            image=self._image(model_image(settings)),
            # `vllm serve MODEL` whatever the image's own entry point; served under the name the workers ask for.
            entry_point=["vllm", "serve"],
            command=[
                model,
                "--served-model-name",
                model,
                "--port",
                str(VLLM_PORT),
                "--max-model-len",
                str(MAX_MODEL_LEN),
                # As olmocr serves it: no video encoder, its memory left to the KV cache.
                "--limit-mm-per-prompt",
                '{"video": 0}',
            ],
            gpu_count=1,
            memory_reservation_mib=TASK_MEMORY_RESERVATION_MIB,
            linux_parameters=ecs.LinuxParameters(self, "Linux", shared_memory_size=SHARED_MEMORY_MIB),
            logging=ecs.LogDrivers.aws_logs(stream_prefix="vllm", log_group=log_group),
            port_mappings=[ecs.PortMapping(container_port=VLLM_PORT, protocol=ecs.Protocol.TCP)],
        )
        self._container = container
        return task

    def _image(self, reference: str) -> ecs.ContainerImage:
        """A public image (Docker Hub's vLLM) by its reference; a copy in ECR of the account's with the task's right to pull it."""
        private = _ECR_IMAGE_RE.fullmatch(reference)
        self.pulls_from_ecr = private is not None
        if private is None:
            return ecs.ContainerImage.from_registry(reference)
        account, region, name, tag, digest = private.group("account", "region", "name", "tag", "digest")
        repository = ecr.Repository.from_repository_attributes(
            self,
            "Repository",
            repository_name=name,
            repository_arn=f"arn:{Stack.of(self).partition}:ecr:{region}:{account}:repository/{name}",
        )
        return ecs.ContainerImage.from_ecr_repository(repository, tag=tag or digest)

    def _service(self) -> ecs.Ec2Service:
        self.task_security_group = ec2.SecurityGroup(
            self,
            "TaskSecurityGroup",
            vpc=self._network.vpc,
            description="s3wq model tasks: the load balancer in, out to the image registry and the weights host",
            allow_all_outbound=True,
        )
        return ecs.Ec2Service(
            self,
            "Service",
            cluster=self.cluster,
            task_definition=self.task_definition,
            # None until a count finds work (scale_with); the template never sets it again.
            desired_count=0,
            capacity_provider_strategies=[
                ecs.CapacityProviderStrategy(capacity_provider=self.capacity_provider.capacity_provider_name, weight=1)
            ],
            vpc_subnets=self._network.subnets,
            security_groups=[self.task_security_group],
            # One GPU an instance: a new task definition replaces a task, it cannot start beside it.
            min_healthy_percent=0,
            max_healthy_percent=100,
            health_check_grace_period=STARTUP_GRACE,
        )

    def _load_balancer(self) -> elbv2.ApplicationLoadBalancer:
        security_group = ec2.SecurityGroup(
            self,
            "LoadBalancerSecurityGroup",
            vpc=self._network.vpc,
            description="s3wq model endpoint: the workers in",
            allow_all_outbound=False,
        )
        load_balancer = elbv2.ApplicationLoadBalancer(
            self,
            "LoadBalancer",
            vpc=self._network.vpc,
            vpc_subnets=self._network.subnets,
            internet_facing=False,
            security_group=security_group,
            idle_timeout=IDLE_TIMEOUT,
            drop_invalid_header_fields=True,
        )
        # open=False: no 0.0.0.0/0 rule; allow_from opens it to the workers alone.
        listener = load_balancer.add_listener("Http", port=ENDPOINT_PORT, protocol=elbv2.ApplicationProtocol.HTTP, open=False)
        self.target_group = listener.add_targets(
            "Vllm",
            port=VLLM_PORT,
            protocol=elbv2.ApplicationProtocol.HTTP,
            targets=[self.service.load_balancer_target(container_name=self._container.container_name, container_port=VLLM_PORT)],
            health_check=elbv2.HealthCheck(path=HEALTH_PATH, interval=Duration.seconds(15), healthy_threshold_count=2),
            # Pages are spread by who has the fewest in flight, not in turn: an answer takes seconds to minutes.
            load_balancing_algorithm_type=elbv2.TargetGroupLoadBalancingAlgorithmType.LEAST_OUTSTANDING_REQUESTS,
            deregistration_delay=Duration.seconds(30),
        )
        return load_balancer

    def serving_wait(self) -> sfn.Parallel:
        """WaitForModel, for the drain loop before its first round: until the load balancer has a healthy target, or SERVING_WAIT.

        A count with groups remaining has just set the service going; workers started before a task serves would
        meet a 503, hand their groups back unavailable, and end the execution ServiceUnavailable (orchestration.py).
        A poll of DescribeTargetHealth that finds no healthy target fails the branch, and the retry is the loop: no
        counter in the state, no function in the VPC.
        """
        describe = tasks.CallAwsService(
            self,
            "DescribeModelTargets",
            service="elasticloadbalancingv2",
            action="describeTargetHealth",
            parameters={"TargetGroupArn": self.target_group.target_group_arn},
            iam_action="elasticloadbalancing:DescribeTargetHealth",
            iam_resources=["*"],  # DescribeTargetHealth supports no resource-level permissions
            result_selector={"targets.$": "$.TargetHealthDescriptions"},  # always there, [] before a task registers
            result_path="$.model",
        )
        # No JSONPath filter and no path that may be missing: either would be a States.Runtime error, which no Catch
        # takes and which would end the execution. One check at a time: a target, then its state. At a start from
        # none the first target is one of the new tasks, and the others start with it.
        not_yet = sfn.Fail(self, "NotServingYet", error=NOT_SERVING, cause="The model endpoint has no healthy target yet")
        healthy = (
            sfn.Choice(self, "TargetHealthy")
            .when(sfn.Condition.string_equals("$.model.targets[0].TargetHealth.State", "healthy"), sfn.Succeed(self, "Serving"))
            .otherwise(not_yet)
        )
        serving = sfn.Choice(self, "ModelServing").when(sfn.Condition.is_present("$.model.targets[0]"), healthy).otherwise(not_yet)
        wait = sfn.Parallel(
            self,
            "WaitForModel",
            comment=f"Until the model endpoint serves (a healthy target), polled every {SERVING_POLL.to_seconds()} s for "
            f"{SERVING_WAIT.to_minutes()} min",
            result_path=sfn.JsonPath.DISCARD,
        )
        wait.branch(describe.next(serving))
        wait.add_retry(
            errors=[NOT_SERVING],
            interval=SERVING_POLL,
            max_attempts=int(SERVING_WAIT.to_seconds() // SERVING_POLL.to_seconds()),
            backoff_rate=1,
        )
        return wait

    def allow_from(self, workers: ec2.ISecurityGroup) -> None:
        """The workers may reach the endpoint's port, and nothing else of it."""
        self.load_balancer.connections.allow_from(workers, ec2.Port.tcp(ENDPOINT_PORT), "s3wq workers to the model endpoint")

    def scale_with(self, *, backlog: cloudwatch.IMetric, workers_running: cloudwatch.IMetric) -> None:
        """Out to every instance when a count finds groups remaining; in to none after IDLE_MINUTES of neither groups nor workers."""
        stack = Stack.of(self)
        target = appscaling.ScalableTarget(
            self,
            "Scaling",
            service_namespace=appscaling.ServiceNamespace.ECS,
            resource_id=f"service/{self.cluster.cluster_name}/{self.service.service_name}",
            scalable_dimension="ecs:service:DesiredCount",
            min_capacity=0,
            max_capacity=model_instances(self._settings),
            role=iam.Role.from_role_arn(self, "ScalingRole", f"arn:{stack.partition}:iam::{stack.account}:role/{_SCALING_ROLE}"),
        )
        scale_out = appscaling.StepScalingAction(
            self, "ScaleOutOnBacklog", scaling_target=target, adjustment_type=appscaling.AdjustmentType.EXACT_CAPACITY
        )
        scale_out.add_adjustment(adjustment=model_instances(self._settings), lower_bound=0)
        cloudwatch.Alarm(
            self,
            "Backlog",
            alarm_description="s3wq: a count found groups remaining; the model endpoint runs every instance",
            metric=backlog,
            threshold=_HALF,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        ).add_alarm_action(cw_actions.ApplicationScalingAction(scale_out))
        scale_in = appscaling.StepScalingAction(
            self, "ScaleInWhenIdle", scaling_target=target, adjustment_type=appscaling.AdjustmentType.EXACT_CAPACITY
        )
        scale_in.add_adjustment(adjustment=0, upper_bound=0)
        demand = cloudwatch.MathExpression(
            expression="MAX([FILL(backlog, 0), FILL(workers, 0)])",
            using_metrics={"backlog": backlog, "workers": workers_running},
            label="groups remaining or workers running",
            period=Duration.minutes(1),
        )
        cloudwatch.Alarm(
            self,
            "Idle",
            alarm_description=f"s3wq: no groups remaining and no worker running for {IDLE_MINUTES} minutes; the model endpoint runs none",
            metric=demand,
            threshold=_HALF,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=IDLE_MINUTES,
            # No datapoint at all is idle too: FILL cannot fill a range without one.
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
        ).add_alarm_action(cw_actions.ApplicationScalingAction(scale_in))

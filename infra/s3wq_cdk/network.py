"""The VPC the worker Lambdas run in when their model is private: the user's, built from its IDs, or one made for the endpoint the stack starts.

No lookup: a VPC, its subnets and security groups are built from the IDs the
settings name (``vlmVpcId``, ``vlmSubnetIds``, ``vlmSecurityGroupIds``), so
the synth needs no AWS account. Such a VPC must already have what the workers
need (docs/deploy.md): an S3 gateway endpoint (the workspace and the inputs),
and a route to Secrets Manager (an interface endpoint, or a NAT gateway) when
the API key is a secret. The VPC made here (``vlmServe=ecs`` without
``vlmVpcId``) has them: private subnets behind one NAT gateway (Docker Hub and
Hugging Face for the model's image and weights, AWS APIs for the workers) and
an S3 gateway endpoint, so the workers' S3 traffic never crosses the NAT.
"""

from __future__ import annotations

from aws_cdk import Fn, RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from .settings import DeploySettings

# Two Availability Zones: what an internal load balancer needs at least, and a second chance at GPU capacity.
MAX_AZS = 2
HTTPS = ec2.Port.tcp(443)


class WorkerNetwork(Construct):
    """Exposes ``vpc``, ``subnets`` (the workers' and the endpoint's), ``worker_security_groups`` and ``created``.

    ``worker_security_group`` is the group made here for the workers (None when the user gave theirs and the
    stack starts no endpoint): with an endpoint of the stack's, it may reach AWS over HTTPS and the endpoint's
    port alone (``ModelEndpoint.allow_from``).
    """

    def __init__(self, scope: Construct, construct_id: str, *, settings: DeploySettings):
        super().__init__(scope, construct_id)
        self.created = settings.vlm_vpc_id is None
        given: list[ec2.ISecurityGroup] = []
        self.vpc: ec2.IVpc
        if settings.vlm_vpc_id is None:
            self.vpc = self._new_vpc()
            self.subnets = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
        else:
            # The AZs are unknown without a lookup and unused: every consumer is given the subnets themselves.
            self.vpc = ec2.Vpc.from_vpc_attributes(self, "Vpc", vpc_id=settings.vlm_vpc_id, availability_zones=Fn.get_azs())
            self.subnets = ec2.SubnetSelection(
                subnets=[ec2.Subnet.from_subnet_id(self, f"Subnet{n}", subnet) for n, subnet in enumerate(settings.vlm_subnet_ids)]
            )
            given = [
                ec2.SecurityGroup.from_security_group_id(self, f"SecurityGroup{n}", group, mutable=False)
                for n, group in enumerate(settings.vlm_security_group_ids)
            ]
        self.worker_security_group: ec2.SecurityGroup | None = None
        if settings.vlm_serve is not None:
            self.worker_security_group = ec2.SecurityGroup(
                self,
                "WorkerSecurityGroup",
                vpc=self.vpc,
                description="s3wq workers: HTTPS to AWS, and the model endpoint port",
                allow_all_outbound=False,
            )
            # S3 (through the gateway endpoint: its prefix list is known only in the account), Secrets Manager, X-Ray.
            self.worker_security_group.add_egress_rule(ec2.Peer.any_ipv4(), HTTPS, "AWS APIs over HTTPS")
        elif not given:
            # An endpoint of the user's, at a port only they know: the workers may reach any.
            self.worker_security_group = ec2.SecurityGroup(
                self, "WorkerSecurityGroup", vpc=self.vpc, description="s3wq workers: the model endpoint and AWS", allow_all_outbound=True
            )
        self.worker_security_groups: list[ec2.ISecurityGroup] = [
            *([self.worker_security_group] if self.worker_security_group else []),
            *given,
        ]

    def _new_vpc(self) -> ec2.Vpc:
        flow_logs = logs.LogGroup(self, "FlowLogs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY)
        return ec2.Vpc(
            self,
            "Vpc",
            max_azs=MAX_AZS,
            nat_gateways=1,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                ec2.SubnetConfiguration(name="Private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=20),
            ],
            gateway_endpoints={"S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)},
            # Rejected traffic only: what explains a worker that cannot reach its endpoint, at a fraction of ALL's volume.
            flow_logs={
                "Rejected": ec2.FlowLogOptions(
                    traffic_type=ec2.FlowLogTrafficType.REJECT, destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs)
                )
            },
        )

"""The vlm and auto processors deployed: their settings on the worker, the secret's grant, a VPC, and the endpoint the stack starts.

Four configurations (stack_under_test.VLM_VARIANTS), each synthesized once a
session and shared by the tests that read it; resources are found by what
they are, never by logical ID.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import aws_cdk as cdk
import pytest
from stack_under_test import (
    ECR_IMAGE,
    SECRET_ARN,
    SECURITY_GROUP_ID,
    SUBNET_IDS,
    VLM_ENDPOINT,
    VLM_PRIVATE,
    VLM_SERVED,
    VLM_SERVED_IN_VPC,
    VLM_VARIANTS,
    StackUnderTest,
    aws_solutions_findings,
    cfn_lint_errors,
    nag_reason,
    nag_suppressions,
)
from support import REPO_ROOT

from s3wq import config
from s3wq.processors.profiles import PROCESSOR_PROFILES
from s3wq.processors.vlm import settings as vlm
from s3wq_cdk.model_endpoint import IDLE_MINUTES, SERVING_WAIT
from s3wq_cdk.settings import CONTEXT_KEYS, DeploySettings
from s3wq_cdk.vlm_settings import MAX_MODEL_LEN, VLLM_IMAGE

# --- settings: one line each -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "context, problem",
    [
        ({"processor": "vlm"}, "processor 'vlm' needs its model's endpoint: -c vlmEndpoint=URL"),
        ({"processor": "auto", "vlmEndpoint": "ftp://models/v1"}, "vlmEndpoint='ftp://models/v1' is not an http(s) URL"),
        (
            {"processor": "vlm", "vlmEndpoint": "http://me:pw@models/v1"},
            "vlmEndpoint holds credentials: store the API key in Secrets Manager",
        ),
        ({"processor": "vlm", "vlmEndpoint": "http://models/v1", "vlmServe": "ecs"}, "vlmEndpoint and vlmServe=ecs are two endpoints"),
        ({"processor": "vlm", "vlmServe": "k8s"}, "vlmServe must be ecs, got 'k8s'"),
        ({"processor": "vlm", "vlmServe": "ecs", "vlmInFlight": "0"}, "vlmInFlight=0 is out of range (1 to 1024)"),
        ({"processor": "vlm", "vlmServe": "ecs", "vlmInFlight": "many"}, "context 'vlmInFlight'"),
        ({"processor": "vlm", "vlmServe": "ecs", "vlmMaxModelPages": "-1"}, "vlmMaxModelPages=-1 is out of range"),
        ({"processor": "vlm", "vlmServe": "ecs", "vlmModel": "my model"}, "vlmModel='my model' is not a model name"),
        (
            {"processor": "vlm", "vlmServe": "ecs", "vlmApiKeySecret": "sk-live"},
            "vlmApiKeySecret='sk-live' is not a Secrets Manager secret ARN",
        ),
        (
            {"processor": "vlm", "vlmServe": "ecs", "vlmApiKeySecret": "arn:aws:secretsmanager:us-east-1:123456789012:secret:key"},
            "is a partial ARN: give the complete one",
        ),
        ({"processor": "vlm", "vlmServe": "ecs", "vlmApiKey": "sk-live"}, "context 'vlmApiKey': the API key is never a setting"),
        (
            {"processor": "text", "vlmEndpoint": "http://models/v1"},
            "vlmEndpoint is the vlm and auto processors' settings; processor is 'text'",
        ),
        ({"processor": "vlm", "vlmEndpoint": "http://models/v1", "vlmVpcId": "vpc-0a1b2c3d"}, "vlmVpcId and vlmSubnetIds go together"),
        (
            {"processor": "vlm", "vlmEndpoint": "http://models/v1", "vlmSecurityGroupIds": SECURITY_GROUP_ID},
            "vlmSecurityGroupIds are the workers' in a VPC",
        ),
        (
            {"processor": "vlm", "vlmEndpoint": "http://models/v1", "vlmVpcId": "vpc-1", "vlmSubnetIds": SUBNET_IDS[0]},
            "vlmVpcId entry 'vpc-1' is not a VPC ID",
        ),
        (
            {"processor": "vlm", "vlmServe": "ecs", "vlmVpcId": "vpc-0a1b2c3d", "vlmSubnetIds": SUBNET_IDS[0]},
            "vlmServe=ecs in your VPC needs two vlmSubnetIds at least",
        ),
        ({"processor": "vlm", "vlmEndpoint": "http://models/v1", "vlmMaxInstances": "2"}, "vlmMaxInstances: only with vlmServe=ecs"),
        ({"processor": "vlm", "vlmServe": "ecs", "vlmInstanceType": "m7i.xlarge"}, "vlmInstanceType 'm7i.xlarge' is not an x86_64 GPU"),
        ({"processor": "vlm", "vlmServe": "ecs", "vlmInstanceType": "g5g.xlarge"}, "vlmInstanceType 'g5g.xlarge' is not an x86_64 GPU"),
        ({"processor": "vlm", "vlmServe": "ecs", "vlmMaxInstances": "21"}, "vlmMaxInstances must be between 1 and 20, got 21"),
        ({"processor": "vlm", "vlmServe": "ecs", "vlmImage": "vllm/vllm-openai"}, "vlmImage 'vllm/vllm-openai' is not an image reference"),
        (
            {"processor": "vlm", "vlmServe": "ecs", "vlmMaxInstances": "20", "maxWorkers": "50"},
            "processor 'vlm' runs 80 workers by default (4 per model instance), more than maxWorkers (50)",
        ),
    ],
)
def test_a_bad_vlm_setting_stops_the_synth_in_one_line(context, problem):
    with pytest.raises(ValueError) as caught:
        DeploySettings.from_context(cdk.App(context=context))
    assert problem in str(caught.value) and "\n" not in str(caught.value)


def test_app_py_stops_vlm_without_an_endpoint_in_one_line_with_exit_2(tmp_path):
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps({"processor": "vlm"}), "CDK_OUTDIR": str(tmp_path)}
    synth = subprocess.run([sys.executable, str(REPO_ROOT / "app.py")], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)

    assert synth.returncode == 2, synth.stderr
    [error] = [line for line in synth.stderr.splitlines() if line.startswith("s3wq: error: ")]
    assert error.startswith("s3wq: error: processor 'vlm' needs its model's endpoint"), synth.stderr


def test_every_vlm_setting_is_in_deploy_mds_table():
    table = (REPO_ROOT / "docs" / "deploy.md").read_text(encoding="utf-8").split("## Settings", 1)[1].split("\n## ", 1)[0]
    vlm_keys = [key for key in CONTEXT_KEYS if key.startswith("vlm")]
    assert len(vlm_keys) == 12 and [key for key in vlm_keys if f"`{key}`" not in table] == []


def test_the_sizes_are_for_waiting_on_the_model_and_a_fallback_page():
    """The profiles' arithmetic (processors/profiles.py): the fallback's ~1.3 GB peak and the pages in flight fit; a group is a fraction of a run."""
    for name in ("vlm", "auto"):
        profile = PROCESSOR_PROFILES[name]
        in_flight_mb = vlm.DEFAULT_IN_FLIGHT * 0.6 * (1 + 4 / 3)  # a page's PNG and its base64 body
        assert 1300 + in_flight_mb + 200 <= profile.worker_memory_mb == 1769  # one vCPU for the fallback's OCR
        assert profile.group_size * 20 * 10 / vlm.DEFAULT_IN_FLIGHT <= 890 / 3  # 20-page documents at ~10 s a model page
    # One instance batches ~50 pages: vlm's workers keep it full, auto's (mostly on their CPUs) send it far fewer.
    assert 48 <= PROCESSOR_PROFILES["vlm"].workers * vlm.DEFAULT_IN_FLIGHT <= 96


# --- the worker's settings and the secret -----------------------------------------------------------------


def _roles_allowed(stack: StackUnderTest, prefix: str) -> set[tuple[str, str]]:
    """(role, action) for every allowed action of any role in the template that starts with ``prefix``."""
    return {
        (role_id, action)
        for role_id in stack.template.find_resources("AWS::IAM::Role")
        for statement in stack.statements(role_id)
        if statement.effect == "Allow"
        for action in statement.actions
        if action.startswith(prefix)
    }


def test_the_worker_gets_the_vlm_settings_and_reads_its_key_from_that_one_secret(synth):
    stack = synth(VLM_ENDPOINT)
    environment = stack.environment("worker")
    assert {name: value for name, value in environment.items() if name.startswith("S3WQ_VLM_")} == {
        vlm.ENV_ENDPOINT: "https://models.example.com/v1",
        vlm.ENV_MODEL: "allenai/olmOCR-2-7B-1025-FP8",
        vlm.ENV_API_KEY_SECRET: SECRET_ARN,
        vlm.ENV_IN_FLIGHT: "8",
        vlm.ENV_MAX_MODEL_PAGES: "500",
    }
    # What the worker will read, it can: the processor's own settings accept the environment as the stack wrote it.
    assert vlm.VlmSettings.from_env(environment).api_key_secret == SECRET_ARN
    assert stack.allowed("worker", "secretsmanager:GetSecretValue") == {SECRET_ARN}
    assert _roles_allowed(stack, "secretsmanager:") == {(stack.role_id("worker"), "secretsmanager:GetSecretValue")}
    for kind in ("populate", "status"):
        assert not [name for name in stack.environment(kind) if name.startswith("S3WQ_VLM_")]
    # The key itself is nowhere: no variable for it, and a worker on Lambda outside any VPC (its endpoint is public).
    assert vlm.ENV_API_KEY not in environment
    assert "VpcConfig" not in stack.function("worker")[1]["Properties"]
    properties = stack.function("worker")[1]["Properties"]
    assert (properties["MemorySize"], properties["Timeout"]) == (PROCESSOR_PROFILES["vlm"].worker_memory_mb, 900)


@pytest.mark.parametrize("overrides", [VLM_PRIVATE, VLM_SERVED], ids=["vlm-private", "vlm-served"])
def test_without_a_secret_no_role_may_read_any(synth, overrides):
    stack = synth(overrides)
    assert _roles_allowed(stack, "secretsmanager:") == set()
    assert vlm.ENV_API_KEY_SECRET not in stack.environment("worker")


# --- a VPC of the user's --------------------------------------------------------------------------------


def test_a_private_endpoint_puts_the_worker_alone_in_the_given_subnets(synth):
    stack = synth(VLM_PRIVATE)
    vpc_config = stack.function("worker")[1]["Properties"]["VpcConfig"]
    assert vpc_config == {"SubnetIds": list(SUBNET_IDS), "SecurityGroupIds": [SECURITY_GROUP_ID]}
    for kind in ("populate", "status"):
        assert "VpcConfig" not in stack.function(kind)[1]["Properties"]
    # Nothing of the network is made (the user's VPC holds it), nor an endpoint.
    for kind in ("AWS::EC2::VPC", "AWS::EC2::SecurityGroup", "AWS::EC2::VPCEndpoint", "AWS::ECS::Cluster"):
        stack.template.resource_count_is(kind, 0)
    # Lambda makes the function's network interfaces with its role: ours, granted inline what the managed policy would.
    assert stack.allowed("worker", "ec2:CreateNetworkInterface") == {"*"}
    assert stack.allowed("populate", "ec2:CreateNetworkInterface") == set()
    assert stack.environment("worker")[vlm.ENV_ENDPOINT] == "http://10.0.3.7:8000/v1"
    assert stack.environment("worker")[config.ENV_PROCESSOR] == "auto"


# --- the endpoint the stack starts ---------------------------------------------------------------------


def _rules(stack: StackUnderTest, group_id: str, direction: str) -> list[dict]:
    """The group's ingress or egress rules ("Ingress", "Egress"), inline or as resources of their own."""
    group = {"Fn::GetAtt": [group_id, "GroupId"]}
    inline = stack.resources[group_id]["Properties"].get(f"SecurityGroup{direction}", [])
    separate = [
        r["Properties"]
        for r in stack.template.find_resources(f"AWS::EC2::SecurityGroup{direction}").values()
        if r["Properties"]["GroupId"] == group
    ]
    return [*inline, *separate]


def _load_balancer(stack: StackUnderTest) -> tuple[str, dict]:
    return stack.one("AWS::ElasticLoadBalancingV2::LoadBalancer", {"Scheme": "internal"})


def test_the_endpoint_is_a_gpu_fleet_from_none_with_a_capacity_provider(synth):
    stack = synth(VLM_SERVED)
    group_id, group = stack.one("AWS::AutoScaling::AutoScalingGroup")
    assert (group["Properties"]["MinSize"], group["Properties"]["MaxSize"]) == ("0", "2")
    assert group["Properties"]["NewInstancesProtectedFromScaleIn"] is True
    template_id = group["Properties"]["LaunchTemplate"]["LaunchTemplateId"]["Ref"]
    launch = stack.resources[template_id]["Properties"]["LaunchTemplateData"]
    assert launch["InstanceType"] == "g6.xlarge"
    image_parameter = launch["ImageId"]["Ref"]
    assert (
        stack.json["Parameters"][image_parameter]["Default"] == "/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/recommended/image_id"
    )
    assert launch["MetadataOptions"]["HttpTokens"] == "required"
    assert all(device["Ebs"]["Encrypted"] for device in launch["BlockDeviceMappings"])
    _, provider = stack.one("AWS::ECS::CapacityProvider")
    asg_provider = provider["Properties"]["AutoScalingGroupProvider"]
    assert asg_provider["AutoScalingGroupArn"] == {"Ref": group_id}
    assert asg_provider["ManagedScaling"]["Status"] == "ENABLED" and asg_provider["ManagedTerminationProtection"] == "ENABLED"
    _, association = stack.one("AWS::ECS::ClusterCapacityProviderAssociations")
    assert {"Ref": stack.one("AWS::ECS::CapacityProvider")[0]} in association["Properties"]["CapacityProviders"]


def test_the_task_serves_the_model_on_one_gpu_with_olmocrs_context(synth):
    stack = synth(VLM_SERVED)
    _, task = stack.one("AWS::ECS::TaskDefinition")
    [container] = task["Properties"]["ContainerDefinitions"]
    assert container["Image"] == VLLM_IMAGE
    assert container["ResourceRequirements"] == [{"Type": "GPU", "Value": "1"}]
    command = container["EntryPoint"] + container["Command"]
    assert command[:3] == ["vllm", "serve", vlm.DEFAULT_MODEL]
    assert command[command.index("--max-model-len") + 1] == str(MAX_MODEL_LEN) == "16384"
    # Served by the name the workers ask for.
    assert command[command.index("--served-model-name") + 1] == stack.environment("worker")[vlm.ENV_MODEL] == vlm.DEFAULT_MODEL
    assert task["Properties"]["NetworkMode"] == "awsvpc"
    _, service = stack.one("AWS::ECS::Service")
    assert service["Properties"]["DesiredCount"] == 0
    assert [s["CapacityProvider"] for s in service["Properties"]["CapacityProviderStrategy"]] == [
        {"Ref": stack.one("AWS::ECS::CapacityProvider")[0]}
    ]


def _alarm_of(stack: StackUnderTest, policy_id: str) -> dict:
    [alarm] = [
        a["Properties"]
        for a in stack.template.find_resources("AWS::CloudWatch::Alarm").values()
        if {"Ref": policy_id} in a["Properties"].get("AlarmActions", [])
    ]
    return alarm


def _metrics_of(alarm: dict) -> list[dict]:
    return [query["MetricStat"]["Metric"] for query in alarm["Metrics"] if "MetricStat" in query]


def test_the_service_scales_out_on_the_backlog_and_in_to_none_when_idle(synth):
    stack = synth(VLM_SERVED)
    _, target = stack.one("AWS::ApplicationAutoScaling::ScalableTarget")
    assert (target["Properties"]["MinCapacity"], target["Properties"]["MaxCapacity"]) == (0, 2)
    assert target["Properties"]["ScalableDimension"] == "ecs:service:DesiredCount"
    policies = stack.template.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy")
    by_size = {
        p["Properties"]["StepScalingPolicyConfiguration"]["StepAdjustments"][0]["ScalingAdjustment"]: policy_id
        for policy_id, p in policies.items()
    }
    assert set(by_size) == {0, 2} and all(
        p["Properties"]["StepScalingPolicyConfiguration"]["AdjustmentType"] == "ExactCapacity" for p in policies.values()
    )
    # The status function's metric, for the workspace it counts (S3WQ_WORKSPACE, as it publishes it).
    workspace = stack.environment("status")[config.ENV_WORKSPACE]

    def is_backlog(metric: dict) -> bool:
        dimensions = {d["Name"]: stack.arn(d["Value"]) for d in metric["Dimensions"]}
        return (metric["Namespace"], metric["MetricName"]) == ("s3wq", config.BACKLOG_METRIC) and dimensions == {
            "service": "s3wq",
            config.WORKSPACE_DIMENSION: workspace,
        }

    out = _alarm_of(stack, by_size[2])
    assert [is_backlog(metric) for metric in _metrics_of(out)] == [True]
    assert (out["ComparisonOperator"], out["Threshold"], out["EvaluationPeriods"]) == ("GreaterThanOrEqualToThreshold", 0.5, 1)
    idle = _alarm_of(stack, by_size[0])
    assert (idle["ComparisonOperator"], idle["Threshold"], idle["EvaluationPeriods"]) == ("LessThanOrEqualToThreshold", 0.5, IDLE_MINUTES)
    assert idle["TreatMissingData"] == "breaching"  # no count and no worker at all is idle
    workers, backlog_metric = sorted(_metrics_of(idle), key=lambda metric: metric["MetricName"])  # C < G
    assert is_backlog(backlog_metric)
    assert (workers["Namespace"], workers["MetricName"]) == ("AWS/Lambda", "ConcurrentExecutions")
    assert workers["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": stack.function_id("worker")}}]


def test_the_workers_reach_the_endpoint_on_its_port_alone_and_are_told_its_url(synth):
    stack = synth(VLM_SERVED)
    balancer_id, _ = _load_balancer(stack)
    assert stack.environment("worker")[vlm.ENV_ENDPOINT] == "http://${%s.DNSName}/v1" % balancer_id
    [balancer_group] = [g["Fn::GetAtt"][0] for g in _load_balancer(stack)[1]["Properties"]["SecurityGroups"]]
    [worker_group] = [g["Fn::GetAtt"][0] for g in stack.function("worker")[1]["Properties"]["VpcConfig"]["SecurityGroupIds"]]
    group = {"Fn::GetAtt": [worker_group, "GroupId"]}
    ingress = [
        (r.get("SourceSecurityGroupId"), r.get("CidrIp"), r["FromPort"], r["ToPort"]) for r in _rules(stack, balancer_group, "Ingress")
    ]
    assert ingress == [(group, None, 80, 80)]
    egress = [
        (r.get("DestinationSecurityGroupId"), r.get("CidrIp"), r["FromPort"], r["ToPort"]) for r in _rules(stack, worker_group, "Egress")
    ]
    assert sorted(egress, key=str) == sorted(
        [(None, "0.0.0.0/0", 443, 443), ({"Fn::GetAtt": [balancer_group, "GroupId"]}, None, 80, 80)], key=str
    )
    # The tasks take the load balancer alone, on vLLM's port.
    _, service = stack.one("AWS::ECS::Service")
    [task_group] = [g["Fn::GetAtt"][0] for g in service["Properties"]["NetworkConfiguration"]["AwsvpcConfiguration"]["SecurityGroups"]]
    assert [(r["SourceSecurityGroupId"], r["FromPort"]) for r in _rules(stack, task_group, "Ingress")] == [
        ({"Fn::GetAtt": [balancer_group, "GroupId"]}, 8000)
    ]


def test_the_first_round_waits_until_the_endpoint_serves_and_only_for_it(synth):
    """Workers started before a task serves would hand their groups back unavailable and end the execution ServiceUnavailable."""
    stack = synth(VLM_SERVED)
    states = stack.definition()["States"]
    wait_name = states["AnythingToDo"]["Default"]
    wait = states[wait_name]
    assert wait["Type"] == "Parallel" and wait["Next"] == "NextRound" and wait["ResultPath"] is None
    # Out of patience (or any error of the check), the round runs: the wait is never a stop.
    assert [(c["ErrorEquals"], c["Next"]) for c in wait["Catch"]] == [(["States.ALL"], "NextRound")]
    [retry] = wait["Retry"]
    assert retry["IntervalSeconds"] * retry["MaxAttempts"] == SERVING_WAIT.to_seconds() and retry["BackoffRate"] == 1
    [branch] = wait["Branches"]
    describe = branch["States"][branch["StartAt"]]
    assert describe["Resource"] == "arn:${AWS::Partition}:states:::aws-sdk:elasticloadbalancingv2:describeTargetHealth"
    target_group = stack.one("AWS::ElasticLoadBalancingV2::TargetGroup")[0]
    assert describe["Parameters"] == {"TargetGroupArn": "${%s}" % target_group}
    # Not serving is the error the retry takes; serving ends the branch.
    outcomes = {state["Type"]: state for state in branch["States"].values() if state["Type"] in ("Fail", "Succeed")}
    assert outcomes["Fail"]["Error"] in retry["ErrorEquals"] and set(outcomes) == {"Fail", "Succeed"}
    state_machine_role = stack.state_machine()[1]["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    assert {
        r for s in stack.statements(state_machine_role) if "elasticloadbalancing:DescribeTargetHealth" in s.actions for r in s.resources
    } == {"*"}
    # A stack that serves no model goes straight to its round.
    assert synth(VLM_ENDPOINT).definition()["States"]["AnythingToDo"]["Default"] == "NextRound"


def test_its_own_vpc_has_private_subnets_and_an_s3_gateway_endpoint(synth):
    stack = synth(VLM_SERVED)
    _, endpoint = stack.one("AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Gateway"})
    assert stack.arn(endpoint["Properties"]["ServiceName"]) == "com.amazonaws.${AWS::Region}.s3"
    subnets = stack.template.find_resources("AWS::EC2::Subnet")
    private = {subnet_id for subnet_id, subnet in subnets.items() if not subnet["Properties"]["MapPublicIpOnLaunch"]}
    worker_subnets = {s["Ref"] for s in stack.function("worker")[1]["Properties"]["VpcConfig"]["SubnetIds"]}
    assert worker_subnets == private and len(private) == 2
    _, group = stack.one("AWS::AutoScaling::AutoScalingGroup")
    assert {s["Ref"] for s in group["Properties"]["VPCZoneIdentifier"]} == private
    # One model instance's worth of workers per instance (profiles.py): the Map's concurrency and populate's start.
    workers = PROCESSOR_PROFILES["vlm"].workers * 2
    assert stack.environment("populate")[config.ENV_WORKERS] == str(workers)
    assert stack.definition()["States"]["Defaults"]["Result"]["workers"] == workers


def test_in_the_users_vpc_the_endpoint_uses_their_subnets_and_pulls_their_copy_of_the_image(synth):
    stack = synth(VLM_SERVED_IN_VPC)
    stack.template.resource_count_is("AWS::EC2::VPC", 0)
    assert stack.function("worker")[1]["Properties"]["VpcConfig"]["SubnetIds"] == list(SUBNET_IDS)
    assert _load_balancer(stack)[1]["Properties"]["Subnets"] == list(SUBNET_IDS)
    assert stack.one("AWS::AutoScaling::AutoScalingGroup")[1]["Properties"]["VPCZoneIdentifier"] == list(SUBNET_IDS)
    _, task = stack.one("AWS::ECS::TaskDefinition")
    assert "mirror/vllm-openai:v0.11.2" in stack.arn(task["Properties"]["ContainerDefinitions"][0]["Image"])
    execution_role = task["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0]
    pulls = {r for s in stack.statements(execution_role) if "ecr:BatchGetImage" in s.actions for r in s.resources}
    assert pulls == {"arn:${AWS::Partition}:ecr:us-east-1:123456789012:repository/mirror/vllm-openai"}
    assert ECR_IMAGE.startswith("123456789012.dkr.ecr.us-east-1")
    launch_id = stack.one("AWS::AutoScaling::AutoScalingGroup")[1]["Properties"]["LaunchTemplate"]["LaunchTemplateId"]["Ref"]
    assert stack.resources[launch_id]["Properties"]["LaunchTemplateData"]["InstanceType"] == "g6e.xlarge"


# --- cdk-nag and cfn-lint ------------------------------------------------------------------------------


@pytest.mark.parametrize("overrides", VLM_VARIANTS.values(), ids=VLM_VARIANTS.keys())
def test_no_aws_solutions_finding_and_every_suppression_says_why_and_names_what(synth, overrides):
    stack = synth(overrides)
    assert aws_solutions_findings(stack) == []
    for where, rule in nag_suppressions(stack):
        assert len(nag_reason(rule).strip()) >= 30, (where, rule["id"])
        if rule["id"] in ("AwsSolutions-IAM4", "AwsSolutions-IAM5"):
            patterns = [entry if isinstance(entry, str) else entry.get("regex", "") for entry in rule.get("applies_to", [])]
            assert patterns and not [pattern for pattern in patterns if "Action::" in pattern], where
    wildcards = [
        (role_id, action)
        for role_id in stack.template.find_resources("AWS::IAM::Role")
        for statement in stack.statements(role_id)
        for action in statement.actions
        if "*" in action
    ]
    assert wildcards == []


@pytest.mark.parametrize("overrides", VLM_VARIANTS.values(), ids=VLM_VARIANTS.keys())
def test_no_cfn_lint_errors(synth, overrides, tmp_path):
    assert cfn_lint_errors(synth(overrides), tmp_path) == []

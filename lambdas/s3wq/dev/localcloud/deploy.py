"""Deploy the synthesized stack into the local cloud.

The template comes from running the CDK app (``app.py``) exactly as ``cdk
synth`` runs it -- same code, same context mechanism -- so the local cloud
follows any change to the stack. This module reads the resources the app
declares (the bucket, the functions with their handler, timeout, memory and
environment, the state machine definition, the bucket notification) and
creates them in moto, resolving ``Ref``/``Fn::GetAtt``/``Fn::Join`` and
friends to the local names.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from s3wq.dev.local_s3 import FAKE_CREDENTIALS
from s3wq_cdk.sources import CHECKOUT_ROOT

# The CDK app (app.py) is the checkout's; an s3wq installed from a wheel has none to synthesize.
REPO_ROOT = CHECKOUT_ROOT
ACCOUNT = "123456789012"
REGION = "us-east-1"
PARTITION = "aws"
ROLE_NAME = "s3wq-local-execution"


class DeployError(Exception):
    """The template could not be synthesized or mapped onto the local cloud."""


def synthesize(context: dict[str, Any], *, stack_name: str = "S3wqLocal") -> dict:
    """Run the CDK app as ``cdk synth`` does (CDK_CONTEXT_JSON, CDK_OUTDIR) and return the template."""
    if REPO_ROOT is None:
        raise DeployError("the local cloud synthesizes the CDK app of a checkout of s3wq (app.py), and this s3wq is installed without one")
    with tempfile.TemporaryDirectory(prefix="s3wq-synth-") as outdir:
        env = {
            **os.environ,
            "CDK_CONTEXT_JSON": json.dumps({"bundling": False, "stackName": stack_name, **context}),
            "CDK_OUTDIR": outdir,
            "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
        }
        result = subprocess.run(
            [sys.executable, str(REPO_ROOT / "app.py")], check=False, cwd=REPO_ROOT, env=env, capture_output=True, text=True
        )
        if result.returncode != 0:
            raise DeployError(f"the CDK app failed to synthesize:\n{result.stderr[-3000:]}")
        template = Path(outdir) / f"{stack_name}.template.json"
        return json.loads(template.read_text())


@dataclass
class LocalStack:
    """What was deployed: physical names by logical id, and the stack's outputs."""

    stack_name: str
    names: dict[str, str] = field(default_factory=dict)
    arns: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)
    functions: dict[str, str] = field(default_factory=dict)  # logical id -> function name

    @property
    def bucket(self) -> str:
        return self.outputs["BucketName"]

    @property
    def workspace(self) -> str:
        return self.outputs["WorkspaceUri"]

    @property
    def state_machine_arn(self) -> str:
        return self.outputs["StateMachineArn"]


class _Resolver:
    def __init__(self, template: dict, stack: LocalStack):
        self.template = template
        self.stack = stack

    def __call__(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::GetAtt":
                logical, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
                return self.get_att(logical, attribute)
            if key == "Fn::Join":
                separator, parts = arg
                return separator.join(str(self(p)) for p in parts)
            if key == "Fn::Select":
                index, items = arg
                return self(items)[int(self(index))]
            if key == "Fn::Split":
                separator, text = arg
                return str(self(text)).split(separator)
            if key == "Fn::Sub":
                text = arg if isinstance(arg, str) else arg[0]
                return re.sub(
                    r"\$\{([^}]+)\}",
                    lambda m: str(self.ref(m.group(1)) if "." not in m.group(1) else self.get_att(*m.group(1).split(".", 1))),
                    text,
                )
        return {k: self(v) for k, v in value.items()}

    def ref(self, name: str) -> str:
        pseudo = {
            "AWS::Partition": PARTITION,
            "AWS::Region": REGION,
            "AWS::AccountId": ACCOUNT,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": self.stack.stack_name,
        }
        if name in pseudo:
            return pseudo[name]
        resource_type = self.template["Resources"].get(name, {}).get("Type")
        if resource_type == "AWS::StepFunctions::StateMachine":
            return self.stack.arns[name]
        if name in self.stack.names:
            return self.stack.names[name]
        raise DeployError(f"cannot resolve Ref {name} ({resource_type}) locally")

    def get_att(self, logical: str, attribute: str) -> str:
        if attribute == "Arn" and logical in self.stack.arns:
            return self.stack.arns[logical]
        if attribute == "Name" and logical in self.stack.names:
            return self.stack.names[logical]
        raise DeployError(f"cannot resolve Fn::GetAtt {logical}.{attribute} locally")


def _physical_names(template: dict, stack: LocalStack, bucket_name: str) -> None:
    """Name everything first: functions and the state machine refer to each other's ARNs."""
    for logical, resource in template["Resources"].items():
        kind = resource["Type"]
        if kind == "AWS::S3::Bucket":
            stack.names[logical] = bucket_name
            stack.arns[logical] = f"arn:{PARTITION}:s3:::{bucket_name}"
        elif kind == "AWS::Lambda::Function":
            name = f"{stack.stack_name}-{logical}"[:64]
            stack.names[logical] = name
            stack.arns[logical] = f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:function:{name}"
        elif kind == "AWS::StepFunctions::StateMachine":
            name = f"{stack.stack_name}-{logical}"[:80]
            stack.names[logical] = name
            stack.arns[logical] = f"arn:{PARTITION}:states:{REGION}:{ACCOUNT}:stateMachine:{name}"
        elif kind == "AWS::IAM::Role":
            stack.names[logical] = ROLE_NAME
            stack.arns[logical] = f"arn:{PARTITION}:iam::{ACCOUNT}:role/{ROLE_NAME}"
        elif kind == "AWS::Logs::LogGroup":
            stack.names[logical] = f"/local/{logical}"
            stack.arns[logical] = f"arn:{PARTITION}:logs:{REGION}:{ACCOUNT}:log-group:/local/{logical}:*"
        else:
            # Not created locally (dashboards, alarms, policies): a name so that
            # references to them resolve.
            stack.names[logical] = f"{stack.stack_name}-{logical}"


def _placeholder_zip() -> bytes:
    # moto stores function code; the runner runs lambdas/ from the repository instead.
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("README.txt", "The local cloud runs the handlers from lambdas/.\n")
    return buffer.getvalue()


# Lambda and Step Functions assume one role here; moto does not enforce what it allows.
_TRUST_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": ["lambda.amazonaws.com", "states.amazonaws.com"]}, "Action": "sts:AssumeRole"}
    ],
}


def deploy(template: dict, *, endpoint: str, bucket_name: str, stack_name: str = "S3wqLocal") -> LocalStack:
    """Create the template's bucket, functions, state machine and notification in the local cloud."""
    import boto3

    credentials = {
        "aws_access_key_id": FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    }
    clients = {
        name: boto3.client(name, endpoint_url=endpoint, region_name=REGION, **credentials)
        for name in ("s3", "lambda", "iam", "stepfunctions")
    }
    stack = LocalStack(stack_name=stack_name)
    _physical_names(template, stack, bucket_name)
    resolve = _Resolver(template, stack)
    resources = template["Resources"]
    role_arn = clients["iam"].create_role(RoleName=ROLE_NAME, AssumeRolePolicyDocument=json.dumps(_TRUST_POLICY))["Role"]["Arn"]
    for logical, resource in resources.items():
        if resource["Type"] == "AWS::S3::Bucket":
            clients["s3"].create_bucket(Bucket=stack.names[logical])
    _create_functions(clients["lambda"], resources, stack, resolve, role_arn)
    _create_state_machines(clients["stepfunctions"], resources, stack, resolve, role_arn)
    for resource in resources.values():
        if resource["Type"] == "Custom::S3BucketNotifications":
            props = resource["Properties"]
            configuration = resolve(props["NotificationConfiguration"])
            clients["s3"].put_bucket_notification_configuration(
                Bucket=resolve(props["BucketName"]), NotificationConfiguration=configuration
            )
    stack.outputs = {name: str(resolve(output["Value"])) for name, output in template.get("Outputs", {}).items()}
    _register_stack(boto3.client("cloudformation", endpoint_url=endpoint, region_name=REGION, **credentials), stack)
    return stack


def _handler_of(props: dict) -> str | None:
    """The s3wq handler a function runs: its Handler, or for a container-image function its ImageConfig's Command."""
    handler = props.get("Handler") or next(iter(props.get("ImageConfig", {}).get("Command") or []), None)
    return handler if handler and str(handler).startswith("s3wq.handlers.") else None


def _create_functions(lambda_client: Any, resources: dict, stack: LocalStack, resolve: _Resolver, role_arn: str) -> None:
    functions = {logical: r["Properties"] for logical, r in resources.items() if r["Type"] == "AWS::Lambda::Function"}
    # An image function names no runtime: its base image is the one the zip functions name (s3wq_cdk/image_recipe.py).
    runtime = next(props["Runtime"] for props in functions.values() if "Runtime" in props and _handler_of(props))
    for logical, props in functions.items():
        handler = _handler_of(props)
        if handler is None:
            continue  # CDK's own helpers (the notifications handler): their work is done here directly
        # A container-image worker runs here as the zip it would be: its handler from lambdas/, or from the
        # processor folder's asset (asset.py), which holds the files its image recipe copies.
        lambda_client.create_function(
            FunctionName=stack.names[logical],
            Runtime=props.get("Runtime", runtime),
            Role=role_arn,
            Handler=handler,
            Code={"ZipFile": _placeholder_zip()},
            Timeout=int(props.get("Timeout", 3)),
            MemorySize=int(props.get("MemorySize", 128)),
            Environment={"Variables": {k: str(resolve(v)) for k, v in props.get("Environment", {}).get("Variables", {}).items()}},
            Architectures=props.get("Architectures", ["x86_64"]),
        )
        stack.functions[logical] = stack.names[logical]


def _create_state_machines(sfn: Any, resources: dict, stack: LocalStack, resolve: _Resolver, role_arn: str) -> None:
    for logical, resource in resources.items():
        if resource["Type"] == "AWS::StepFunctions::StateMachine":
            props = resource["Properties"]
            definition = resolve(props["DefinitionString"])
            sfn.create_state_machine(
                name=stack.names[logical], definition=definition, roleArn=role_arn, type=props.get("StateMachineType", "STANDARD")
            )


def _register_stack(cloudformation: Any, stack: LocalStack) -> None:
    """A CloudFormation stack carrying the outputs, so tools that look the stack up (``s3wq start``) work here too.

    The resources were created directly above; this stack holds only a no-op
    resource and the resolved outputs.
    """
    template = {
        "Resources": {"Deployed": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {name: {"Value": value} for name, value in stack.outputs.items()},
    }
    cloudformation.create_stack(StackName=stack.stack_name, TemplateBody=json.dumps(template))

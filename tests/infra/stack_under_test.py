"""The s3wq stack synthesized in-process, and a reading of its template by what things are, not by logical IDs.

Resources are found by their properties (a function by its handler, a role
by the function that uses it); the logical IDs this yields are only used to
follow references between resources. CloudFormation values are rendered to
strings with :func:`render` so that an ARN can be compared whole, whatever
mix of ``Fn::Join``, ``Ref`` and ``Fn::GetAtt`` CDK chose to build it from.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Annotations, Match, Template
from cdk_nag import AwsSolutionsChecks
from cfnlint.api import ManualArgs, lint_file
from support import REPO_ROOT

from s3wq_cdk.settings import DeploySettings
from s3wq_cdk.stack import S3wqStack

STACK_NAME = "S3wq"

HANDLERS = {
    "populate": "s3wq.handlers.populate.handler",
    "worker": "s3wq.handlers.worker.handler",
    "status": "s3wq.handlers.status.handler",
}

# Context variants; each is synthesized once per session.
EXISTING_BUCKET = {"bucketName": "my-existing-bucket"}
KMS_KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
# Inputs elsewhere, encrypted (as the workspace may be) with a customer managed key.
INPUT_BUCKETS = {"inputBuckets": ["in-bucket/scans"], "kmsKeyArns": [KMS_KEY]}
TUNED = {
    "workerTimeoutSeconds": 300,
    "workerMemoryMb": 2048,
    "populateMemoryMb": 1024,
    "architecture": "x86_64",
    "workspacePrefix": "data/run1",
    "maxRounds": 3,
    "maxWorkers": 50,
}
VARIANTS = {"default": {}, "existing-bucket": EXISTING_BUCKET, "input-buckets": INPUT_BUCKETS, "tuned": TUNED}
# A processor folder of the tests' own (a module and a third-party requirement), and the worker variants it deploys as.
PROCESSOR_DIR = Path(__file__).resolve().parent / "fixtures" / "processor"
PROCESSOR_SPEC = "wordcount:process_group"
PROCESSOR_ZIP = {"processor": PROCESSOR_SPEC, "processorDir": str(PROCESSOR_DIR)}
PROCESSOR_IMAGE = {**PROCESSOR_ZIP, "workerImage": True}
OCR = {"processor": "ocr"}
WORKER_VARIANTS = {"processor-zip": PROCESSOR_ZIP, "processor-image": PROCESSOR_IMAGE, "ocr": OCR}
# The vlm processors' model: an endpoint of the user's (its key in a secret), one in a VPC of theirs, one the stack starts.
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:s3wq/vlm-key-AbC123"
VPC_ID = "vpc-0a1b2c3d4e5f60718"
SUBNET_IDS = ("subnet-0a1b2c3d4e5f60001", "subnet-0a1b2c3d4e5f60002")
SECURITY_GROUP_ID = "sg-0a1b2c3d4e5f60003"
ECR_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/mirror/vllm-openai:v0.11.2"
VLM_ENDPOINT = {
    "processor": "vlm",
    "vlmEndpoint": "https://models.example.com/v1",
    "vlmModel": "allenai/olmOCR-2-7B-1025-FP8",
    "vlmApiKeySecret": SECRET_ARN,
    "vlmInFlight": "8",
    "vlmMaxModelPages": "500",
}
VLM_PRIVATE = {
    "processor": "auto",
    "vlmEndpoint": "http://10.0.3.7:8000/v1",
    "vlmVpcId": VPC_ID,
    "vlmSubnetIds": ",".join(SUBNET_IDS),
    "vlmSecurityGroupIds": SECURITY_GROUP_ID,
}
VLM_SERVED = {"processor": "vlm", "vlmServe": "ecs", "vlmMaxInstances": "2"}
# Served in the user's VPC, from their copy of the image in ECR, on another GPU type.
VLM_SERVED_IN_VPC = {
    "processor": "auto",
    "vlmServe": "ecs",
    "vlmVpcId": VPC_ID,
    "vlmSubnetIds": list(SUBNET_IDS),
    "vlmImage": ECR_IMAGE,
    "vlmInstanceType": "g6e.xlarge",
}
VLM_VARIANTS = {"vlm-endpoint": VLM_ENDPOINT, "vlm-private": VLM_PRIVATE, "vlm-served": VLM_SERVED, "vlm-served-in-vpc": VLM_SERVED_IN_VPC}


def cdk_json_context() -> dict:
    """The context `cdk synth` runs with: feature flags alone (they change the template: minimizePolicies merges statements).

    The settings' defaults live in infra/settings.py only, so what a test
    expects of a setting it reads from ``StackUnderTest.settings``.
    """
    return json.loads((REPO_ROOT / "cdk.json").read_text())["context"]


def build(overrides: dict) -> StackUnderTest:
    """The stack as app.py builds it, with the plain ``lambdas/`` asset (no pip) unless ``overrides`` says otherwise."""
    context = {**cdk_json_context(), "bundling": False, **overrides}
    app = cdk.App(context=context)
    stack = S3wqStack(app, STACK_NAME, settings=DeploySettings.from_context(app), description="s3wq: an S3-only distributed work queue")
    cdk.Aspects.of(app).add(AwsSolutionsChecks(verbose=True))
    return StackUnderTest(stack=stack, context=context, template=Template.from_stack(stack))


def render(value: Any) -> str:
    """A CloudFormation value as one string: ``{"Ref": "X"}`` -> ``${X}``, ``{"Fn::GetAtt": ["X", "Arn"]}`` -> ``${X.Arn}``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref":
            return "${%s}" % argument
        if function == "Fn::GetAtt":
            return "${%s}" % (".".join(argument) if isinstance(argument, list) else argument)
        if function == "Fn::Join":
            separator, parts = argument
            return separator.join(render(part) for part in parts)
    return json.dumps(value, sort_keys=True)


def folder_of(key_prefix: str) -> str:
    """A layout key prefix's folder, which grants and lifecycle rules name: ``worker_locks/worker_`` -> ``worker_locks/``."""
    return key_prefix.rsplit("/", 1)[0] + "/"


def as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


def nag_reason(rule: dict) -> str:
    """cdk-nag stores a reason with non-ASCII characters base64-encoded and says so."""
    reason = rule.get("reason", "")
    return base64.b64decode(reason).decode("utf-8") if rule.get("is_reason_encoded") else reason


def aws_solutions_findings(stack: StackUnderTest) -> list[str]:
    """cdk-nag's AwsSolutions errors and warnings left unsuppressed: ``id: message`` each."""
    annotations = Annotations.from_stack(stack.stack)
    rule = Match.string_like_regexp("AwsSolutions-.*")
    return [f"{message.id}: {message.entry.data}" for message in [*annotations.find_error("*", rule), *annotations.find_warning("*", rule)]]


def nag_suppressions(stack: StackUnderTest) -> list[tuple[str, dict]]:
    """(where, rule) for every cdk-nag suppression in the template's metadata."""
    found = [("stack", rule) for rule in stack.json.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])]
    for logical_id, resource in stack.resources.items():
        found += [(logical_id, rule) for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])]
    return found


def cfn_lint_errors(stack: StackUnderTest, folder: Path) -> list[str]:
    """cfn-lint's errors on the template (written into ``folder``); its warnings are allowed."""
    path = folder / "template.json"
    path.write_text(json.dumps(stack.json, indent=1))
    matches = lint_file(path, config=ManualArgs(regions=["us-east-1"]))
    return [f"{match.rule.id} {'/'.join(map(str, match.path))}: {match.message}" for match in matches if match.rule.severity == "error"]


@dataclass(frozen=True)
class Statement:
    effect: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]  # rendered; see StackUnderTest.arn
    condition: dict | None


@dataclass
class StackUnderTest:
    stack: S3wqStack
    context: dict
    template: Template

    @cached_property
    def json(self) -> dict:
        return self.template.to_json()

    @property
    def resources(self) -> dict:
        return self.json["Resources"]

    def one(self, resource_type: str, properties: dict | None = None) -> tuple[str, dict]:
        """The only resource of this type (with these properties, matched deep-partially): (logical ID, resource)."""
        found = self.template.find_resources(resource_type, {"Properties": properties} if properties else None)
        assert len(found) == 1, f"expected exactly one {resource_type} with {properties}, found {len(found)}"
        return next(iter(found.items()))

    # --- the workspace ---------------------------------------------------------------------------

    @property
    def settings(self) -> DeploySettings:
        """What the stack was built with: the context over infra/settings.py's defaults."""
        return self.stack.settings

    @property
    def prefix(self) -> str:
        return self.settings.workspace_prefix

    @cached_property
    def bucket_id(self) -> str | None:
        """The logical ID of the bucket this stack creates, or None when it uses an existing one."""
        buckets = self.template.find_resources("AWS::S3::Bucket")
        assert len(buckets) <= 1, f"more than one bucket: {sorted(buckets)}"
        return next(iter(buckets), None)

    @property
    def bucket_name(self) -> str:
        return "${%s}" % self.bucket_id if self.bucket_id else self.settings.bucket_name

    @property
    def bucket_arn(self) -> str:
        return "arn:${AWS::Partition}:s3:::" + self.bucket_name

    def arn(self, value: Any) -> str:
        """:func:`render`, with the created bucket's ``.Arn`` in the ``arn:${AWS::Partition}:s3:::name`` form.

        CDK writes a bucket's ARN either way depending on who asked; written
        one way, a grant reads the same for a created and an imported bucket.
        """
        text = render(value)
        if self.bucket_id:
            text = text.replace("${%s.Arn}" % self.bucket_id, self.bucket_arn)
        return text

    # --- functions and roles ---------------------------------------------------------------------

    def function(self, kind: str) -> tuple[str, dict]:
        """The function of this kind, by its handler: a zip's Handler, or a container image's command (ImageConfig)."""
        found = {
            **self.template.find_resources("AWS::Lambda::Function", {"Properties": {"Handler": HANDLERS[kind]}}),
            **self.template.find_resources("AWS::Lambda::Function", {"Properties": {"ImageConfig": {"Command": [HANDLERS[kind]]}}}),
        }
        assert len(found) == 1, f"expected exactly one {kind} function, found {len(found)}"
        return next(iter(found.items()))

    def function_id(self, kind: str) -> str:
        return self.function(kind)[0]

    def environment(self, kind: str) -> dict[str, str]:
        variables = self.function(kind)[1]["Properties"].get("Environment", {}).get("Variables", {})
        return {name: self.arn(value) for name, value in variables.items()}

    def role_id(self, kind: str) -> str:
        role = self.function(kind)[1]["Properties"]["Role"]
        assert set(role) == {"Fn::GetAtt"} and role["Fn::GetAtt"][1] == "Arn", f"{kind} role is not a role of this stack: {role}"
        return role["Fn::GetAtt"][0]

    def policy_documents(self, role_id: str) -> Iterator[dict]:
        """Every identity policy of the role: inline ones and the AWS::IAM::Policy resources attached to it."""
        for policy in self.resources[role_id]["Properties"].get("Policies", []):
            yield policy["PolicyDocument"]
        for resource in self.template.find_resources("AWS::IAM::Policy").values():
            if {"Ref": role_id} in resource["Properties"].get("Roles", []):
                yield resource["Properties"]["PolicyDocument"]

    def statements(self, role_id: str) -> list[Statement]:
        return [
            Statement(
                effect=statement["Effect"],
                actions=tuple(as_list(statement.get("Action", []))),
                resources=tuple(self.arn(resource) for resource in as_list(statement.get("Resource", []))),
                condition=statement.get("Condition"),
            )
            for document in self.policy_documents(role_id)
            for statement in document["Statement"]
        ]

    def allowed(self, kind: str, action: str) -> set[str]:
        """The resources the function's role may perform ``action`` on (an exact action name, as granted)."""
        return {
            resource
            for statement in self.statements(self.role_id(kind))
            if statement.effect == "Allow" and action in statement.actions
            for resource in statement.resources
        }

    # --- the state machine -----------------------------------------------------------------------

    def state_machine(self) -> tuple[str, dict]:
        return self.one("AWS::StepFunctions::StateMachine")

    def definition(self) -> dict:
        """The state machine's definition as JSON, each token replaced by its rendering (e.g. ``${Worker.Arn}``)."""
        properties = self.state_machine()[1]["Properties"]
        body = properties["DefinitionString"]

        def quoted(value: Any) -> str:  # tokens sit inside JSON strings
            return json.dumps(self.arn(value))[1:-1]

        if isinstance(body, dict):
            separator, parts = body["Fn::Join"]
            body = separator.join(part if isinstance(part, str) else quoted(part) for part in parts)
        for name, value in properties.get("DefinitionSubstitutions", {}).items():
            body = body.replace("${%s}" % name, quoted(value))
        return json.loads(body)

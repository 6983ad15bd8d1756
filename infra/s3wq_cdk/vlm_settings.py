"""The ``vlm`` and ``auto`` processors' deployment: where their model is, the worker's S3WQ_VLM_* environment, and the checks.

The model is either an endpoint of the user's (``vlmEndpoint``, in a VPC of theirs with ``vlmVpcId`` and
``vlmSubnetIds`` when it is private) or one the stack starts (``vlmServe=ecs``: vLLM on ECS, model_endpoint.py).
The processor's own settings are checked by the processor's own code: the worker's environment is built and read
as the worker reads it (``VlmSettings.from_env``), and a problem is told by its context key instead of its variable.
Plain data and checks: no CDK.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import TYPE_CHECKING

from s3wq.processors.vlm.settings import (
    DEFAULT_MODEL,
    ENV_API_KEY,
    ENV_API_KEY_SECRET,
    ENV_ENDPOINT,
    ENV_IN_FLIGHT,
    ENV_MAX_MODEL_PAGES,
    ENV_MODEL,
    BadVlmSetting,
    VlmSettings,
)

if TYPE_CHECKING:
    from .settings import DeploySettings

VLM_PROCESSORS = ("vlm", "auto")


class ModelServing(StrEnum):
    """Who runs the model when the user names no endpoint (``vlmServe``)."""

    ECS = "ecs"  # vLLM on an ECS cluster of GPU instances, scaled with the queue's backlog down to none


# One NVIDIA L4 (24 GB), 4 vCPUs, 16 GiB: the smallest current GPU instance that holds olmOCR's 7B model in FP8 with a
# 16,384-token context.
DEFAULT_INSTANCE_TYPE = "g6.xlarge"
DEFAULT_MAX_INSTANCES = 1
# A step-scaling policy's steps and a first quota request's size: past this, a fleet is better sized by hand.
MAX_INSTANCES_LIMIT = 20
# olmocr 0.4.27's own pin (its gpu extra: vllm==0.11.2), so that the model is served as olmocr serves it.
VLLM_IMAGE = "vllm/vllm-openai:v0.11.2"
# olmocr's pipeline default (--max_model_len): a page's image, its prompt and an answer of up to 8,000 tokens.
MAX_MODEL_LEN = 16384
# What vLLM listens on inside the task, and what the internal load balancer answers on.
VLLM_PORT = 8000
ENDPOINT_PORT = 80

# Context key of each variable the worker gets from a setting, for messages in the deployer's words.
CONTEXT_NAMES = {
    ENV_ENDPOINT: "vlmEndpoint",
    ENV_MODEL: "vlmModel",
    ENV_API_KEY_SECRET: "vlmApiKeySecret",
    ENV_IN_FLIGHT: "vlmInFlight",
    ENV_MAX_MODEL_PAGES: "vlmMaxModelPages",
}
# A stand-in for the endpoint the stack starts, whose URL is known only at deploy: the other settings are checked with it.
_SERVED_STAND_IN = "http://model-endpoint.invalid/v1"
# A complete ARN ends in the six random characters Secrets Manager adds to the name; IAM matches a partial one to nothing.
_COMPLETE_SECRET_ARN_RE = re.compile(r".*:secret:.+-[A-Za-z0-9]{6}")
_VPC_ID_RE = re.compile(r"vpc-[0-9a-f]{8}([0-9a-f]{9})?")
_SUBNET_ID_RE = re.compile(r"subnet-[0-9a-f]{8}([0-9a-f]{9})?")
_SECURITY_GROUP_ID_RE = re.compile(r"sg-[0-9a-f]{8}([0-9a-f]{9})?")
# GPU families the ECS GPU-optimised AMI (x86_64) runs: g4dn, g5, g6, g6e, p4d, p5, ...; not g5g (Graviton).
_GPU_INSTANCE_RE = re.compile(r"(g|p)[0-9][a-z0-9-]*\.[a-z0-9]+")
_IMAGE_RE = re.compile(r"[a-z0-9][a-z0-9._/:-]*(:[A-Za-z0-9._-]+|@sha256:[0-9a-f]{64})")


def model_name(settings: DeploySettings) -> str:
    """The model the worker asks for, and the one the stack serves: vlmModel, else olmocr's."""
    return settings.vlm_model or DEFAULT_MODEL


def model_instances(settings: DeploySettings) -> int:
    """The most GPU instances the endpoint the stack starts runs at once."""
    return settings.vlm_max_instances if settings.vlm_max_instances is not None else DEFAULT_MAX_INSTANCES


def model_instance_type(settings: DeploySettings) -> str:
    return settings.vlm_instance_type or DEFAULT_INSTANCE_TYPE


def model_image(settings: DeploySettings) -> str:
    return settings.vlm_image or VLLM_IMAGE


def worker_environment(settings: DeploySettings, endpoint: str | None) -> dict[str, str]:
    """The worker's S3WQ_VLM_* variables (none for another processor); ``endpoint``: the URL, the stack's own when it serves one.

    The API key itself is never here: only the ARN of the secret the worker reads it from when it starts.
    """
    if settings.processor not in VLM_PROCESSORS:
        return {}
    named = {
        ENV_ENDPOINT: endpoint,
        ENV_MODEL: model_name(settings),
        ENV_API_KEY_SECRET: settings.vlm_api_key_secret,
        ENV_IN_FLIGHT: None if settings.vlm_in_flight is None else str(settings.vlm_in_flight),
        ENV_MAX_MODEL_PAGES: None if settings.vlm_max_model_pages is None else str(settings.vlm_max_model_pages),
    }
    return {name: value for name, value in named.items() if value is not None}


def _given(settings: DeploySettings) -> list[str]:
    """The context keys of the vlm settings that are set."""
    values = {
        "vlmEndpoint": settings.vlm_endpoint,
        "vlmModel": settings.vlm_model,
        "vlmApiKeySecret": settings.vlm_api_key_secret,
        "vlmInFlight": settings.vlm_in_flight,
        "vlmMaxModelPages": settings.vlm_max_model_pages,
        "vlmVpcId": settings.vlm_vpc_id,
        "vlmSubnetIds": settings.vlm_subnet_ids or None,
        "vlmSecurityGroupIds": settings.vlm_security_group_ids or None,
        "vlmServe": settings.vlm_serve,
        **_serving_settings(settings),
    }
    return [key for key, value in values.items() if value is not None]


def _serving_settings(settings: DeploySettings) -> dict[str, object]:
    return {"vlmInstanceType": settings.vlm_instance_type, "vlmMaxInstances": settings.vlm_max_instances, "vlmImage": settings.vlm_image}


def vlm_problems(settings: DeploySettings) -> list[str]:
    """Each problem of the vlm settings in one phrase naming its context key; none for a processor that has none set."""
    given = _given(settings)
    if settings.processor not in VLM_PROCESSORS:
        if not given:
            return []
        verb = "is" if len(given) == 1 else "are"
        return [f"{', '.join(given)} {verb} the vlm and auto processors' settings; processor is {settings.processor!r}"]
    return _endpoint_problems(settings) + _network_problems(settings) + _serving_problems(settings)


def _endpoint_problems(settings: DeploySettings) -> list[str]:
    processor = settings.processor
    if settings.vlm_serve is not None and settings.vlm_serve not in set(ModelServing):
        return [f"vlmServe must be {', '.join(ModelServing)}, got {settings.vlm_serve!r}"]
    if settings.vlm_endpoint is None and settings.vlm_serve is None:
        return [
            f"processor {processor!r} needs its model's endpoint: -c vlmEndpoint=URL (OpenAI-compatible, e.g. http://host:8000/v1), "
            "or -c vlmServe=ecs for one the stack starts"
        ]
    if settings.vlm_endpoint is not None and settings.vlm_serve is not None:
        return [f"vlmEndpoint and vlmServe={settings.vlm_serve} are two endpoints: give one"]
    try:
        VlmSettings.from_env(worker_environment(settings, settings.vlm_endpoint or _SERVED_STAND_IN))
    except BadVlmSetting as exc:
        return [_in_context_words(str(exc))]
    secret = settings.vlm_api_key_secret
    if secret is not None and not _COMPLETE_SECRET_ARN_RE.fullmatch(secret):
        return [
            f"vlmApiKeySecret {secret!r} is a partial ARN: give the complete one, ending in the six characters Secrets Manager "
            "added to the name (aws secretsmanager describe-secret prints it), so that the worker's grant covers it"
        ]
    return []


def _in_context_words(message: str) -> str:
    # On Lambda the key is a secret's: the processor's advice for a shell would read as a setting the stack does not have.
    message = message.replace(
        f"put the API key in {ENV_API_KEY} (or {ENV_API_KEY_SECRET} on Lambda)",
        "store the API key in Secrets Manager and give vlmApiKeySecret",
    )
    for name in sorted(CONTEXT_NAMES, key=len, reverse=True):  # S3WQ_VLM_API_KEY_SECRET before any name it starts with
        message = message.replace(name, CONTEXT_NAMES[name])
    return message


def _network_problems(settings: DeploySettings) -> list[str]:
    problems = [
        f"{key} entry {value!r} is not a {kind} ID"
        for key, values, pattern, kind in (
            ("vlmVpcId", (settings.vlm_vpc_id,) if settings.vlm_vpc_id else (), _VPC_ID_RE, "VPC"),
            ("vlmSubnetIds", settings.vlm_subnet_ids, _SUBNET_ID_RE, "subnet"),
            ("vlmSecurityGroupIds", settings.vlm_security_group_ids, _SECURITY_GROUP_ID_RE, "security group"),
        )
        for value in values
        if not pattern.fullmatch(value)
    ]
    if (settings.vlm_vpc_id is None) != (not settings.vlm_subnet_ids):
        problems.append("vlmVpcId and vlmSubnetIds go together: the VPC, and the subnets of it the workers run in")
    elif settings.vlm_security_group_ids and settings.vlm_vpc_id is None:
        problems.append("vlmSecurityGroupIds are the workers' in a VPC: give vlmVpcId and vlmSubnetIds too")
    elif settings.vlm_serve is not None and settings.vlm_vpc_id is not None and len(set(settings.vlm_subnet_ids)) < 2:
        # An internal Application Load Balancer needs subnets in two Availability Zones at least.
        problems.append("vlmServe=ecs in your VPC needs two vlmSubnetIds at least, in two Availability Zones (its load balancer's)")
    return problems


def _serving_problems(settings: DeploySettings) -> list[str]:
    if settings.vlm_serve is None:
        given = [key for key, value in _serving_settings(settings).items() if value is not None]
        return [f"{', '.join(given)}: only with vlmServe=ecs (the endpoint the stack starts)"] if given else []
    problems = []
    instance_type = settings.vlm_instance_type
    if instance_type is not None and (not _GPU_INSTANCE_RE.fullmatch(instance_type) or instance_type.startswith("g5g.")):
        problems.append(f"vlmInstanceType {instance_type!r} is not an x86_64 GPU instance type (g6.xlarge, g5.xlarge, g6e.xlarge, ...)")
    instances = settings.vlm_max_instances
    if instances is not None and not 1 <= instances <= MAX_INSTANCES_LIMIT:
        problems.append(f"vlmMaxInstances must be between 1 and {MAX_INSTANCES_LIMIT}, got {instances}")
    if settings.vlm_image is not None and not _IMAGE_RE.fullmatch(settings.vlm_image):
        problems.append(f"vlmImage {settings.vlm_image!r} is not an image reference with a tag or a digest (repository:tag)")
    return problems

"""Deployment settings, read once from CDK context (or built as the props of :class:`s3wq_cdk.queue.S3wqQueue`), each default defined once.

A default the runtime shares (attempts, workers, group size, the processor,
the input checks, the input cap, the group timeout) is read from
:mod:`s3wq.config`, where the handlers get it when the variable is unset;
those only a deployment has (memory, timeouts, the worker cap) are here.

Set any of them with ``cdk deploy -c name=value`` or in ``cdk.json``; cdk.json
holds feature flags only, so a setting left out there is one the user did not
set, and a processor may choose it (``PROCESSOR_PROFILES``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from constructs import Construct

from s3wq import config as s3wq_config
from s3wq.processors.ocr.settings import ENV_LANG, ENV_MODE, BadOcrSetting, OcrSettings
from s3wq.processors.profiles import PROCESSOR_PROFILES, ProcessorProfile

from .context_values import boolean, id_list, string_list
from .errors import SettingsError, tell_in_one_line
from .processor_source import ProcessorSource, ProcessorSourceError
from .vlm_settings import VLM_PROCESSORS, model_instances, vlm_problems, worker_environment

# A Distributed Map runs up to 10,000 children at once (the worker items come
# from the status function, not from States.ArrayRange, which stops at 1,000).
MAX_WORKERS_LIMIT = s3wq_config.MAX_WORKERS_PER_EXECUTION
# The default cap: the most a function scales to in its first 10 s is 1,000
# environments; more workers are worth it only with that much concurrency to spare.
DEFAULT_MAX_WORKERS = 1000
# Lambda's hard limit.
LAMBDA_MAX_TIMEOUT_SECONDS = 900

DEFAULT_WORKER_MEMORY_MB = 1769  # one full vCPU
DEFAULT_GROUP_SIZE = s3wq_config.DEFAULT_GROUP_SIZE

_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
# No "*" (or "?"): in an IAM resource ARN it is a wildcard and would widen every grant.
_PREFIX_RE = re.compile(r"[A-Za-z0-9!_.'()-]+(/[A-Za-z0-9!_.'()-]+)*")


@dataclass(frozen=True)
class InputLocation:
    bucket: str
    prefix: str  # "" for the whole bucket


@dataclass(frozen=True)
class DeploySettings:
    bucket_name: str | None = None
    workspace_prefix: str = "s3wq"
    worker_timeout_seconds: int = LAMBDA_MAX_TIMEOUT_SECONDS
    # None: chosen for the processor (PROCESSOR_PROFILES), else DEFAULT_WORKER_MEMORY_MB (effective_worker_memory_mb).
    worker_memory_mb: int | None = None
    populate_timeout_seconds: int = LAMBDA_MAX_TIMEOUT_SECONDS
    populate_memory_mb: int = 3008
    max_workers: int = DEFAULT_MAX_WORKERS
    # Reserved concurrency for the worker function: a run cannot take the
    # account's whole pool, and is guaranteed this much. None: unreserved.
    worker_reserved_concurrency: int | None = None
    # None: chosen for the processor (PROCESSOR_PROFILES), else s3wq's default (effective_default_workers).
    default_workers: int | None = None
    max_rounds: int = 10
    max_attempts: int = s3wq_config.DEFAULT_MAX_ATTEMPTS
    # None: chosen for the processor (PROCESSOR_PROFILES), else DEFAULT_GROUP_SIZE (effective_group_size).
    group_size: int | None = None
    # The longest one run of a group may last on a worker Lambda (None: what the invocation leaves it).
    group_timeout_seconds: float | None = s3wq_config.DEFAULT_GROUP_TIMEOUT_SECONDS
    # The most bytes one input may hold for the worker's ctx.read_input (S3WQ_MAX_INPUT_BYTES).
    max_input_bytes: int = s3wq_config.DEFAULT_MAX_INPUT_BYTES
    # Populate checks that each s3:// path of a manifest exists (a HEAD, or a
    # LIST page per 1,000 keys of its folder); off for manifests too big to check in its time.
    check_inputs: bool = s3wq_config.LambdaConfig.check_inputs  # the handlers' own default, unset
    processor: str = s3wq_config.DEFAULT_PROCESSOR
    # A folder of the user's modules (and an optional requirements.txt) shipped
    # with the worker; processor then names module:function in it.
    processor_dir: str | None = None
    # The worker as a container image even when its asset would fit a zip.
    worker_image: bool = False
    architecture: str = "arm64"
    tracing: bool = True
    bundling: bool = True
    input_buckets: tuple[InputLocation, ...] = field(default_factory=tuple)
    # Customer managed KMS keys that encrypt the inputs or the workspace (SSE-KMS).
    kms_key_arns: tuple[str, ...] = field(default_factory=tuple)
    alarm_topic_arn: str | None = None
    # The ocr processor's routing and scripts (S3WQ_OCR_MODE, S3WQ_OCR_LANG on the worker); None: its defaults.
    ocr_mode: str | None = None
    ocr_lang: str | None = None
    # The vlm and auto processors' model (vlm_settings.py): an endpoint of the user's, or one the stack starts
    # (vlm_serve="ecs"); the worker gets them as S3WQ_VLM_*. The API key is never a setting: the ARN of its secret is.
    vlm_endpoint: str | None = None
    vlm_model: str | None = None  # None: olmocr's (s3wq.processors.vlm.settings.DEFAULT_MODEL)
    vlm_api_key_secret: str | None = None
    vlm_in_flight: int | None = None
    vlm_max_model_pages: int | None = None
    # A VPC of the user's for the worker Lambdas (a private endpoint), or for the endpoint the stack starts.
    vlm_vpc_id: str | None = None
    vlm_subnet_ids: tuple[str, ...] = field(default_factory=tuple)
    vlm_security_group_ids: tuple[str, ...] = field(default_factory=tuple)
    vlm_serve: str | None = None
    # The endpoint the stack starts; None: vlm_settings' DEFAULT_INSTANCE_TYPE, DEFAULT_MAX_INSTANCES, VLLM_IMAGE.
    vlm_instance_type: str | None = None
    vlm_max_instances: int | None = None
    vlm_image: str | None = None

    # "Not set" stays None in the fields, so that dataclasses.replace(settings, processor="ocr")
    # still gets the new processor's sizes; everything that builds reads these two.
    @property
    def effective_worker_memory_mb(self) -> int:
        """The worker's memory: as set, else the processor's profile, else DEFAULT_WORKER_MEMORY_MB."""
        if self.worker_memory_mb is not None:
            return self.worker_memory_mb
        return self.profile.worker_memory_mb if self.profile else DEFAULT_WORKER_MEMORY_MB

    @property
    def effective_group_size(self) -> int:
        """Paths per group: as set, else the processor's profile, else DEFAULT_GROUP_SIZE."""
        if self.group_size is not None:
            return self.group_size
        return self.profile.group_size if self.profile else DEFAULT_GROUP_SIZE

    @property
    def effective_default_workers(self) -> int:
        """An execution's workers when its input names none: as set, else the processor's, else s3wq's default.

        A processor whose pages wait on a model names one model instance's worth; the endpoint the stack starts runs
        ``vlm_max_instances`` of them, and so that many times the workers.
        """
        if self.default_workers is not None:
            return self.default_workers
        if self.profile is None or self.profile.workers is None:
            return s3wq_config.DEFAULT_WORKERS
        return self.profile.workers * (model_instances(self) if self.vlm_serve is not None else 1)

    @property
    def worker_in_vpc(self) -> bool:
        """Whether the worker Lambdas run in a VPC: the user's (vlmVpcId), or the one the endpoint the stack starts makes."""
        return self.vlm_vpc_id is not None or self.vlm_serve is not None

    @property
    def profile(self) -> ProcessorProfile | None:
        """The built-in processor's needs on Lambda, when it has any beyond s3wq's own asset."""
        return PROCESSOR_PROFILES.get(self.processor)

    def processor_source(self) -> ProcessorSource | None:
        """The checked processor folder (``processorDir``), or None; raises ProcessorSourceError naming the problem."""
        return None if self.processor_dir is None else ProcessorSource.open(self.processor_dir, spec=self.processor)

    @property
    def needs_image(self) -> bool:
        """Whether the worker is a container image whatever its size: asked for, or a built-in whose extra needs one."""
        return self.worker_image or self.profile is not None

    @classmethod
    def from_context(cls, scope: Construct, **props: Any) -> DeploySettings:
        """The settings of ``scope``'s CDK context (``-c name=value``, cdk.json), checked.

        ``props`` (field names) are an app's own values; a context key that is
        given overrides them, and what neither sets keeps this class's default.
        A ``-c processor`` takes with the app's processor the props that came
        with it and the new one does not take (its folder, its ocr or vlm
        settings: :func:`_kept_for`). Raises SettingsError naming the key.
        """
        tell_in_one_line()
        for key, problem in REFUSED_CONTEXT_KEYS.items():
            if scope.node.try_get_context(key) is not None:
                raise SettingsError(f"context {key!r}: {problem}")
        given = {}
        for key, (name, parse) in CONTEXT_KEYS.items():
            raw = scope.node.try_get_context(key)
            if raw is None or raw == "":
                continue
            try:
                given[name] = parse(raw)
            except (TypeError, ValueError) as exc:
                raise SettingsError(f"context {key!r}: {exc}") from None
        settings = cls(**{**_kept_for(given.get("processor"), props), **given})
        settings.validate()
        return settings

    def validate(self) -> None:
        problems = []
        top_module = self.processor.split(":", 1)[0].split(".", 1)[0]
        if self.bundling and ":" in self.processor and self.processor_dir is None and top_module != "s3wq":
            # The asset ships s3wq alone: without the folder, the worker could not import it on Lambda.
            problems.append(
                f"processor {self.processor!r} is not in the worker's asset: put {top_module} in a folder and add -c processorDir=FOLDER"
            )
        if self.bucket_name is not None and not _BUCKET_RE.fullmatch(self.bucket_name):
            problems.append(f"bucketName {self.bucket_name!r} is not a valid bucket name")
        if not _PREFIX_RE.fullmatch(self.workspace_prefix):
            problems.append(f"workspacePrefix {self.workspace_prefix!r} must be a non-empty key prefix without spaces or '..'")
        if ".." in self.workspace_prefix.split("/"):
            problems.append("workspacePrefix may not contain '..'")
        for name, value in (
            ("workerTimeoutSeconds", self.worker_timeout_seconds),
            ("populateTimeoutSeconds", self.populate_timeout_seconds),
        ):
            if not 10 <= value <= LAMBDA_MAX_TIMEOUT_SECONDS:
                problems.append(f"{name} must be between 10 and {LAMBDA_MAX_TIMEOUT_SECONDS}, got {value}")
        for name, value in (("workerMemoryMb", self.effective_worker_memory_mb), ("populateMemoryMb", self.populate_memory_mb)):
            if not 128 <= value <= 10240:
                problems.append(f"{name} must be between 128 and 10240, got {value}")
        if not 1 <= self.max_workers <= MAX_WORKERS_LIMIT:
            problems.append(f"maxWorkers must be between 1 and {MAX_WORKERS_LIMIT}, got {self.max_workers}")
        if self.worker_reserved_concurrency is not None and not 1 <= self.worker_reserved_concurrency <= MAX_WORKERS_LIMIT:
            problems.append(f"workerReservedConcurrency must be between 1 and {MAX_WORKERS_LIMIT}, got {self.worker_reserved_concurrency}")
        if self.default_workers is not None and not 1 <= self.default_workers <= self.max_workers:
            problems.append(f"defaultWorkers must be between 1 and maxWorkers ({self.max_workers}), got {self.default_workers}")
        elif self.default_workers is None and self.effective_default_workers > self.max_workers:
            per_instance = f" ({self.profile.workers} per model instance)" if self.profile and self.profile.workers else ""
            problems.append(
                f"processor {self.processor!r} runs {self.effective_default_workers} workers by default{per_instance}, "
                f"more than maxWorkers ({self.max_workers}): raise maxWorkers, or set defaultWorkers"
            )
        for name, value in (("maxRounds", self.max_rounds), ("maxAttempts", self.max_attempts), ("groupSize", self.effective_group_size)):
            if value < 1:
                problems.append(f"{name} must be at least 1, got {value}")
        problems += self._run_problems()
        if self.architecture not in ("arm64", "x86_64"):
            problems.append(f"architecture must be arm64 or x86_64, got {self.architecture!r}")
        if self.alarm_topic_arn is not None and not re.fullmatch(
            r"arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}", self.alarm_topic_arn
        ):
            problems.append(f"alarmTopicArn {self.alarm_topic_arn!r} is not an SNS topic ARN")
        for arn in self.kms_key_arns:
            if not _KMS_KEY_ARN_RE.fullmatch(arn):
                problems.append(f"kmsKeyArns entry {arn!r} is not a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/KEY-ID; not an alias)")
        manifests = f"{self.workspace_prefix}/manifests/"
        for location in self.input_buckets:
            if location.bucket == self.bucket_name and (not location.prefix or manifests.startswith(location.prefix.rstrip("/") + "/")):
                # Populate would index the manifests as inputs, and a glob over the
                # prefix would pick up each new manifest as one more input.
                problems.append(
                    f"inputBuckets entry {location.bucket}/{location.prefix} contains the manifest prefix {manifests}: "
                    "name an input prefix beside the workspace, not above it"
                )
        problems += self._processor_problems()
        if problems:
            raise SettingsError("; ".join(problems))

    def _run_problems(self) -> list[str]:
        """What one run of a group on the worker may have: its time, and the bytes of one input."""
        problems = []
        if self.group_timeout_seconds is not None:
            # At most what a run can have in an invocation: the function's timeout less the worker's safety margin.
            most = self.worker_timeout_seconds - s3wq_config.lambda_safety_margin(self.worker_timeout_seconds)
            if not (math.isfinite(self.group_timeout_seconds) and s3wq_config.MIN_RUN_SECONDS <= self.group_timeout_seconds <= most):
                problems.append(
                    f"groupTimeoutSeconds must be from {s3wq_config.MIN_RUN_SECONDS:g} to {most:g} "
                    f"(workerTimeoutSeconds {self.worker_timeout_seconds} less the worker's safety margin), got {self.group_timeout_seconds:g}"
                )
        memory_bytes = self.effective_worker_memory_mb * 1024 * 1024
        if not 1 <= self.max_input_bytes <= memory_bytes:
            # An input larger than the worker's memory could never be held: the cap would not guard anything.
            problems.append(f"maxInputBytes must be from 1 to the worker's memory ({memory_bytes} bytes), got {self.max_input_bytes}")
        return problems

    @property
    def ocr_environment(self) -> dict[str, str]:
        """The worker's variables for the ocr processor's settings: the ones set, by their S3WQ_OCR_* names."""
        named = {ENV_MODE: self.ocr_mode, ENV_LANG: self.ocr_lang}
        return {name: value for name, value in named.items() if value is not None}

    def processor_environment(self, *, model_endpoint: str | None = None) -> dict[str, str]:
        """The worker's variables for the processor's own settings (S3WQ_OCR_*, S3WQ_VLM_*); ``model_endpoint``: the stack's own."""
        return {**self.ocr_environment, **worker_environment(self, self.vlm_endpoint or model_endpoint)}

    def _processor_problems(self) -> list[str]:
        problems = []
        if self.ocr_environment:
            if self.processor != "ocr":
                problems.append(f"ocrMode and ocrLang are the ocr processor's settings; processor is {self.processor!r}")
            try:
                OcrSettings.from_env(self.ocr_environment)
            except BadOcrSetting as exc:
                problems.append(str(exc).replace(ENV_MODE, "ocrMode").replace(ENV_LANG, "ocrLang"))
        return problems + vlm_problems(self) + self._folder_problems()

    def _folder_problems(self) -> list[str]:
        if self.processor_dir is not None:
            if self.profile is not None:
                return [f"processor {self.processor!r} is built in: processorDir is for a module:function of your own"]
            try:
                self.processor_source()
            except ProcessorSourceError as exc:
                return [str(exc)]
        elif self.worker_image and ":" not in self.processor and self.profile is None:
            return [f"workerImage: the built-in processor {self.processor!r} runs from the zip; set processorDir, or processor=ocr"]
        return []


def _processor_takes(name: str, processor: str) -> bool:
    """Whether ``processor`` takes the field ``name``: no field belongs to one kind of processor but these."""
    if name in ("processor_dir", "worker_image"):
        # A folder holds a module:function; a built-in with a profile is an image anyway, so workerImage is no conflict.
        return ":" in processor or (name == "worker_image" and processor in PROCESSOR_PROFILES)
    if name.startswith("ocr_"):
        return processor == "ocr"
    if name.startswith("vlm_"):
        return processor in VLM_PROCESSORS
    return True


def _kept_for(processor: str | None, props: dict[str, Any]) -> dict[str, Any]:
    """An app's props that still apply once context names ``processor`` (None: it names none, and all of them do).

    The app's folder, image or ocr/vlm settings came with the app's processor: ``-c processor=ocr`` over
    ``processor_dir="myproc"`` means the ocr built-in, not ocr with a folder it cannot take. A -c setting is never dropped.
    """
    if processor is None:
        return props
    return {name: value for name, value in props.items() if _processor_takes(name, processor)}


# A key, not an alias: IAM grants on an alias ARN do not cover the key's use by S3.
_KMS_KEY_ARN_RE = re.compile(r"arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]{1,128}")


def _input_locations(value: Any) -> tuple[InputLocation, ...]:
    """``["bucket", "bucket/prefix"]``, as a JSON list or a comma-separated string."""
    if isinstance(value, str):
        value = json.loads(value) if value.strip().startswith("[") else [v for v in value.split(",") if v.strip()]
    locations = []
    for item in value:
        bucket, _, prefix = str(item).strip().removeprefix("s3://").partition("/")
        if not _BUCKET_RE.fullmatch(bucket):
            raise ValueError(f"input bucket {bucket!r} is not a valid bucket name")
        prefix = prefix.strip("/")
        if prefix and (not _PREFIX_RE.fullmatch(prefix) or ".." in prefix.split("/")):
            raise ValueError(f"input prefix {prefix!r} is not a plain key prefix")
        locations.append(InputLocation(bucket, prefix))
    return tuple(locations)


# Context key -> (field, parse): every setting `cdk deploy -c` takes (docs/deploy.md's table).
CONTEXT_KEYS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "bucketName": ("bucket_name", str),
    "workspacePrefix": ("workspace_prefix", lambda v: str(v).strip("/")),
    "workerTimeoutSeconds": ("worker_timeout_seconds", int),
    "workerMemoryMb": ("worker_memory_mb", int),
    "populateTimeoutSeconds": ("populate_timeout_seconds", int),
    "populateMemoryMb": ("populate_memory_mb", int),
    "maxWorkers": ("max_workers", int),
    "defaultWorkers": ("default_workers", int),
    "workerReservedConcurrency": ("worker_reserved_concurrency", int),
    "maxRounds": ("max_rounds", int),
    "maxAttempts": ("max_attempts", int),
    "groupSize": ("group_size", int),
    "groupTimeoutSeconds": ("group_timeout_seconds", float),
    "maxInputBytes": ("max_input_bytes", int),
    "checkInputs": ("check_inputs", boolean),
    "processor": ("processor", str),
    "processorDir": ("processor_dir", str),
    "workerImage": ("worker_image", boolean),
    "architecture": ("architecture", str),
    "tracing": ("tracing", boolean),
    "bundling": ("bundling", boolean),
    "inputBuckets": ("input_buckets", _input_locations),
    "kmsKeyArns": ("kms_key_arns", string_list),
    "alarmTopicArn": ("alarm_topic_arn", str),
    "ocrMode": ("ocr_mode", str),
    "ocrLang": ("ocr_lang", str),
    "vlmEndpoint": ("vlm_endpoint", str),
    "vlmModel": ("vlm_model", str),
    "vlmApiKeySecret": ("vlm_api_key_secret", str),
    "vlmInFlight": ("vlm_in_flight", int),
    "vlmMaxModelPages": ("vlm_max_model_pages", int),
    "vlmVpcId": ("vlm_vpc_id", str),
    "vlmSubnetIds": ("vlm_subnet_ids", id_list),
    "vlmSecurityGroupIds": ("vlm_security_group_ids", id_list),
    "vlmServe": ("vlm_serve", str),
    "vlmInstanceType": ("vlm_instance_type", str),
    "vlmMaxInstances": ("vlm_max_instances", int),
    "vlmImage": ("vlm_image", str),
}
# Context keys that must never be given: a secret in context ends up in cdk.context.json, the template and the shell's history.
REFUSED_CONTEXT_KEYS = {
    "vlmApiKey": "the API key is never a setting: store it in Secrets Manager and give -c vlmApiKeySecret=ARN (the worker reads it at start)",
}

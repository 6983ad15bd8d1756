"""Settings of a worker, validated once, with every default defined here and nowhere else."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import BadWorkspace, ConfigError

# The Lambda maximum; the CDK stack derives both the worker function's timeout
# and its lock timeout from one value, and so does the CLI.
DEFAULT_TIME_LIMIT_SECONDS = 900.0
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_GROUP_SIZE = 10
DEFAULT_PROCESSOR = "noop"


def default_safety_margin(time_limit: float) -> float:
    """Time kept free before the deadline: 5 % of the limit, between 0.2 s and 10 s."""
    return min(10.0, max(0.2, 0.05 * time_limit))


@dataclass(frozen=True)
class WorkerSettings:
    time_limit: float = DEFAULT_TIME_LIMIT_SECONDS
    # None means "equal to the time limit": a lock then goes stale only when
    # its holder's invocation has certainly ended.
    lock_timeout: float | None = None
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    safety_margin: float | None = None

    def __post_init__(self) -> None:
        if not self.time_limit > 0:
            raise ConfigError(f"time limit must be positive, got {self.time_limit}")
        if self.lock_timeout is not None and not self.lock_timeout > 0:
            raise ConfigError(f"lock timeout must be positive, got {self.lock_timeout}")
        if self.lock_timeout is not None and self.lock_timeout < self.time_limit:
            raise ConfigError(
                f"lock timeout ({self.lock_timeout}s) is shorter than the time limit ({self.time_limit}s): "
                "a live worker's lock could be taken over"
            )
        if self.max_attempts < 1:
            raise ConfigError(f"max attempts must be at least 1, got {self.max_attempts}")
        if self.safety_margin is not None and self.safety_margin < 0:
            raise ConfigError(f"safety margin must not be negative, got {self.safety_margin}")

    @property
    def effective_lock_timeout(self) -> float:
        return self.time_limit if self.lock_timeout is None else self.lock_timeout

    @property
    def effective_safety_margin(self) -> float:
        return default_safety_margin(self.time_limit) if self.safety_margin is None else self.safety_margin


# Environment variables of the Lambda functions; the CDK stack sets them by these names.
ENV_WORKSPACE = "S3WQ_WORKSPACE"
ENV_LOCK_TIMEOUT = "S3WQ_LOCK_TIMEOUT_SECONDS"
ENV_MAX_ATTEMPTS = "S3WQ_MAX_ATTEMPTS"
ENV_GROUP_SIZE = "S3WQ_GROUP_SIZE"
ENV_PROCESSOR = "S3WQ_PROCESSOR"
ENV_STATE_MACHINE_ARN = "S3WQ_STATE_MACHINE_ARN"
ENV_AUTO_START = "S3WQ_AUTO_START"
ENV_WORKERS = "S3WQ_WORKERS"

DEFAULT_WORKERS = 10
LAMBDA_DEFAULT_PROCESSOR = "text"
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def _number(environ: dict, name: str, default: float, kind: type, minimum: float) -> float:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a{'n integer' if kind is int else ' number'}, got {raw!r}") from None
    if not math.isfinite(value) or value < minimum:
        raise ConfigError(f"{name} must be a finite number of at least {minimum}, got {raw!r}")
    return value


@dataclass(frozen=True)
class LambdaConfig:
    """Everything the handlers read from their environment, parsed once at cold start."""

    workspace: str
    lock_timeout: float = DEFAULT_TIME_LIMIT_SECONDS
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    group_size: int = DEFAULT_GROUP_SIZE
    processor: str = LAMBDA_DEFAULT_PROCESSOR
    state_machine_arn: str | None = None
    auto_start: bool = True
    workers: int = DEFAULT_WORKERS

    @classmethod
    def from_env(cls, environ: dict) -> "LambdaConfig":
        from .backends import parse_s3_uri

        workspace = environ.get(ENV_WORKSPACE, "")
        if not workspace:
            raise ConfigError(f"{ENV_WORKSPACE} is not set (expected s3://bucket/prefix)")
        if workspace.startswith("s3://"):
            try:
                parse_s3_uri(workspace)
            except BadWorkspace as exc:
                raise ConfigError(f"{ENV_WORKSPACE}: {exc}") from exc
        elif "://" in workspace:
            raise ConfigError(f"{ENV_WORKSPACE} must be s3://bucket/prefix or a local directory, got {workspace!r}")
        auto_start_raw = (environ.get(ENV_AUTO_START) or "true").strip().lower()
        if auto_start_raw not in _TRUE | _FALSE:
            raise ConfigError(f"{ENV_AUTO_START} must be true or false, got {environ.get(ENV_AUTO_START)!r}")
        arn = environ.get(ENV_STATE_MACHINE_ARN) or None
        if arn is not None and not (arn.startswith("arn:") and ":stateMachine:" in arn):
            raise ConfigError(f"{ENV_STATE_MACHINE_ARN} is not a state machine ARN: {arn!r}")
        return cls(
            workspace=workspace,
            lock_timeout=_number(environ, ENV_LOCK_TIMEOUT, DEFAULT_TIME_LIMIT_SECONDS, float, 1),
            max_attempts=int(_number(environ, ENV_MAX_ATTEMPTS, DEFAULT_MAX_ATTEMPTS, int, 1)),
            group_size=int(_number(environ, ENV_GROUP_SIZE, DEFAULT_GROUP_SIZE, int, 1)),
            processor=environ.get(ENV_PROCESSOR) or LAMBDA_DEFAULT_PROCESSOR,
            state_machine_arn=arn,
            auto_start=auto_start_raw in _TRUE,
            workers=int(_number(environ, ENV_WORKERS, DEFAULT_WORKERS, int, 1)),
        )

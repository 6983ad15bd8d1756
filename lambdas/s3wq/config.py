"""Settings of a worker, validated once, with every default defined here and nowhere else (the input size cap with the input policy)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeVar

from s3wq.errors import BadWorkspace, ConfigError

# The input size cap is the input policy's default, defined with the policy
# (which imports no settings: no circle); the settings take it from there.
from s3wq.inputs import DEFAULT_MAX_INPUT_BYTES, InputLocation, InputPolicy, default_locations, parse_locations
from s3wq.store import parse_s3_uri, uri_mistake

# The Lambda maximum. The CDK stack gives the worker function this timeout
# and the same value as its lease, so a Lambda worker never renews its lease.
DEFAULT_TIME_LIMIT_SECONDS = 900.0
# `s3wq work` with no time limit (--time-limit 0, and its default on a terminal): a year. A number, not
# infinity, so that every deadline, budget and lock body derived from it stays one (JSON has no Infinity).
UNLIMITED_TIME_SECONDS = 366 * 86400.0
# A command-line worker's lease, when its time limit is longer: a worker
# that dies holds its group this long at most, and a run that lasts longer
# renews the lease every third of it.
DEFAULT_LEASE_SECONDS = 300.0
MIN_LEASE_SECONDS = 1.0
# The bucket's lifecycle rule expires locks a day after their last write; a
# lease must end well before that, and renewals make longer ones unneeded.
MAX_LEASE_SECONDS = 12 * 3600.0
# olmocr holds its (empty, unparseable) locks for 1,800 s, its
# worker_lock_timeout_secs default; s3wq honours a lock it cannot parse as long.
FOREIGN_LOCK_TIMEOUT_SECONDS = 1800.0
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_GROUP_SIZE = 10
# The least time a run is started with, and so the least a timeout records:
# a run stopped after nothing would teach the next taker nothing.
MIN_RUN_SECONDS = 0.5
# A group whose processor raised is retried after RETRY_BACKOFF_SECONDS,
# doubling with each attempt up to MAX_RETRY_BACKOFF_SECONDS: an input a
# flaky service chokes on gets a moment, not three tries in a millisecond.
RETRY_BACKOFF_SECONDS = 0.5
MAX_RETRY_BACKOFF_SECONDS = 30.0
# A worker stops when the first this many groups it runs all fail with the
# same error: a broken processor, not bad inputs, which fail each their own way.
DEFAULT_BREAKER_GROUPS = 3
# What a worker runs unless told otherwise, on the command line as on Lambda:
# a default that writes results, never one that marks groups done and drops them.
DEFAULT_PROCESSOR = "text"


# The longest one run of a group may last, whatever time the worker has
# left. None: no limit of its own -- a run may take what the worker's time
# limit leaves it. A hung processor then holds the worker for that long (900 s
# on Lambda), but there is no single length that suits every processor: an
# OCR of a big PDF takes minutes, a text extraction milliseconds.
DEFAULT_GROUP_TIMEOUT_SECONDS: float | None = None
# After the processor is stopped, a Lambda invocation still hands the group
# back, releases, and flushes its metrics before Lambda's hard kill: a second
# at least, however short the function's timeout.
MIN_LAMBDA_SAFETY_MARGIN_SECONDS = 1.0


def default_safety_margin(time_limit: float) -> float:
    """Time kept free before the deadline: 5 % of the limit, between 0.2 s and 10 s."""
    return min(10.0, max(0.2, 0.05 * time_limit))


def lambda_safety_margin(time_limit: float) -> float:
    """A Lambda worker's safety margin: the default, and never less than MIN_LAMBDA_SAFETY_MARGIN_SECONDS."""
    return max(MIN_LAMBDA_SAFETY_MARGIN_SECONDS, default_safety_margin(time_limit))


def _finite_positive(name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ConfigError(f"{name} must be a positive number of seconds, got {value}")


@dataclass(frozen=True)
class WorkerSettings:
    time_limit: float = DEFAULT_TIME_LIMIT_SECONDS
    # None: the time limit, up to DEFAULT_LEASE_SECONDS.
    lease: float | None = None
    foreign_lock_timeout: float = FOREIGN_LOCK_TIMEOUT_SECONDS
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    safety_margin: float | None = None
    retry_backoff: float = RETRY_BACKOFF_SECONDS
    # 0: never stop for a processor that keeps failing.
    breaker_groups: int = DEFAULT_BREAKER_GROUPS
    # A run is stopped at whichever comes first: this, or the time limit less the safety margin.
    group_timeout: float | None = DEFAULT_GROUP_TIMEOUT_SECONDS

    def __post_init__(self) -> None:
        _finite_positive("time limit", self.time_limit)
        _finite_positive("foreign lock timeout", self.foreign_lock_timeout)
        if self.lease is not None:
            _finite_positive("lease", self.lease)
            if not MIN_LEASE_SECONDS <= self.lease <= MAX_LEASE_SECONDS:
                raise ConfigError(f"lease must be from {MIN_LEASE_SECONDS:.0f} to {MAX_LEASE_SECONDS:.0f} s, got {self.lease:g}")
        if self.max_attempts < 1:
            raise ConfigError(f"max attempts must be at least 1, got {self.max_attempts}")
        if self.safety_margin is not None and not (math.isfinite(self.safety_margin) and self.safety_margin >= 0):
            raise ConfigError(f"safety margin must be 0 or more seconds, got {self.safety_margin}")
        if self.time_limit - self.effective_safety_margin < MIN_RUN_SECONDS:
            # Otherwise the worker starts, finds no time for any group, and ends having done nothing.
            raise ConfigError(
                f"a safety margin of {self.effective_safety_margin:g} s leaves no time to run a group "
                f"in a time limit of {self.time_limit:g} s (at least {MIN_RUN_SECONDS:g} s must be left)"
            )
        if not (math.isfinite(self.retry_backoff) and 0 <= self.retry_backoff <= MAX_RETRY_BACKOFF_SECONDS):
            raise ConfigError(f"retry backoff must be from 0 to {MAX_RETRY_BACKOFF_SECONDS:g} s, got {self.retry_backoff}")
        if self.breaker_groups < 0:
            raise ConfigError(f"breaker groups must be 0 (off) or more, got {self.breaker_groups}")
        if self.group_timeout is not None:
            _finite_positive("group timeout", self.group_timeout)
            most = self.time_limit - self.effective_safety_margin
            if self.group_timeout < MIN_RUN_SECONDS:
                raise ConfigError(f"group timeout must be at least {MIN_RUN_SECONDS:g} s, got {self.group_timeout:g}")
            if self.group_timeout > most:
                # It would never act: the worker's own deadline stops every run first.
                raise ConfigError(
                    f"group timeout of {self.group_timeout:g} s is longer than any run can last: at most {most:g} s "
                    f"(the time limit of {self.time_limit:g} s less the safety margin of {self.effective_safety_margin:g} s)"
                )

    def backoff_before(self, attempt: int) -> float:
        """Seconds to wait before running ``attempt`` (2 or later) of a group whose last run raised.

        A third of the lease at most, or of the foreign timeout if shorter (olmocr's workers judge a lock
        by its age alone): the lock is not renewed while the worker waits.
        """
        if attempt < 2 or self.retry_backoff == 0:
            return 0.0
        held_without_renewal = min(self.effective_lease, self.foreign_lock_timeout)
        return min(self.retry_backoff * 2 ** (attempt - 2), MAX_RETRY_BACKOFF_SECONDS, held_without_renewal / 3)

    def run_budget(self, seconds: float) -> float:
        """What a run may be given of ``seconds`` the worker has left: no more than the group timeout."""
        return seconds if self.group_timeout is None else min(seconds, self.group_timeout)

    @property
    def effective_lease(self) -> float:
        return max(MIN_LEASE_SECONDS, min(self.time_limit, DEFAULT_LEASE_SECONDS)) if self.lease is None else self.lease

    @property
    def effective_safety_margin(self) -> float:
        return default_safety_margin(self.time_limit) if self.safety_margin is None else self.safety_margin


# Environment variables of the Lambda functions; the CDK stack sets them by these names.
ENV_WORKSPACE = "S3WQ_WORKSPACE"
ENV_LEASE = "S3WQ_LEASE_SECONDS"
ENV_FOREIGN_LOCK_TIMEOUT = "S3WQ_FOREIGN_LOCK_TIMEOUT_SECONDS"
ENV_MAX_ATTEMPTS = "S3WQ_MAX_ATTEMPTS"
ENV_GROUP_SIZE = "S3WQ_GROUP_SIZE"
ENV_PROCESSOR = "S3WQ_PROCESSOR"
ENV_STATE_MACHINE_ARN = "S3WQ_STATE_MACHINE_ARN"
ENV_AUTO_START = "S3WQ_AUTO_START"
ENV_CHECK_INPUTS = "S3WQ_CHECK_INPUTS"
ENV_WORKERS = "S3WQ_WORKERS"
# The worker's group timeout (the stack's groupTimeoutSeconds); unset: none.
ENV_GROUP_TIMEOUT = "S3WQ_GROUP_TIMEOUT_SECONDS"
# Where inputs may lie besides the workspace bucket: comma-separated s3://bucket[/prefix]
# (the stack's inputBuckets). Populate and the worker refuse anything else, local paths first.
ENV_INPUT_LOCATIONS = "S3WQ_INPUT_LOCATIONS"
# The worker's input size cap, in bytes (the stack's maxInputBytes); unset: DEFAULT_MAX_INPUT_BYTES.
ENV_MAX_INPUT_BYTES = "S3WQ_MAX_INPUT_BYTES"

DEFAULT_WORKERS = 10
# The status function publishes each count's groups remaining (not done, not failed: pending or running) as this metric,
# in the s3wq namespace with the dimensions service=s3wq and workspace=S3WQ_WORKSPACE: the backlog a model endpoint the
# stack starts scales on (s3wq_cdk.model_endpoint), one workspace's apart from another's.
BACKLOG_METRIC = "GroupsRemaining"
WORKSPACE_DIMENSION = "workspace"
# A Distributed Map runs up to 10,000 child executions at once.
MAX_WORKERS_PER_EXECUTION = 10_000
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


_Default = TypeVar("_Default", bound=float | None)


def _number(environ: dict, name: str, default: _Default, kind: type, minimum: float, maximum: float = math.inf) -> float | _Default:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a{'n integer' if kind is int else ' number'}, got {raw!r}") from None
    if not math.isfinite(value) or not minimum <= value <= maximum:
        bound = f"from {minimum:g} to {maximum:g}" if math.isfinite(maximum) else f"of at least {minimum:g}"
        raise ConfigError(f"{name} must be a finite number {bound}, got {raw!r}")
    return value


@dataclass(frozen=True)
class LambdaConfig:
    """Everything the handlers read from their environment, parsed once at cold start."""

    workspace: str
    lease: float = DEFAULT_TIME_LIMIT_SECONDS
    foreign_lock_timeout: float = FOREIGN_LOCK_TIMEOUT_SECONDS
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    group_size: int = DEFAULT_GROUP_SIZE
    processor: str = DEFAULT_PROCESSOR
    state_machine_arn: str | None = None
    auto_start: bool = True
    check_inputs: bool = True
    workers: int = DEFAULT_WORKERS
    # The only places inputs are read from; None (S3WQ_INPUT_LOCATIONS unset): the workspace's inputs/ folder.
    input_locations: tuple[InputLocation, ...] | None = None
    group_timeout: float | None = DEFAULT_GROUP_TIMEOUT_SECONDS
    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES

    @property
    def input_policy(self) -> InputPolicy:
        """What populate may index and the worker may read: S3 only, in ``input_locations`` (unset: the workspace's inputs/ folder).

        A read takes at most ``max_input_bytes`` of one input.
        """
        locations = default_locations(self.workspace) if self.input_locations is None else self.input_locations
        return InputPolicy.deployed(locations, max_bytes=self.max_input_bytes)

    @classmethod
    def from_env(cls, environ: dict) -> LambdaConfig:
        workspace = environ.get(ENV_WORKSPACE, "")
        if not workspace:
            raise ConfigError(f"{ENV_WORKSPACE} is not set (expected s3://bucket/prefix)")
        if workspace.startswith("s3://"):
            try:
                parse_s3_uri(workspace)
            except BadWorkspace as exc:
                raise ConfigError(f"{ENV_WORKSPACE}: {exc}") from exc
        elif uri_mistake(workspace):
            # Any other scheme, and a mistyped s3:// (s3:/b), which would read as a local directory.
            raise ConfigError(
                f"{ENV_WORKSPACE} must be s3://bucket/prefix or a local directory, got {workspace!r}: {uri_mistake(workspace)}"
            )
        auto_start_raw, check_inputs_raw = ((environ.get(name) or "true").strip().lower() for name in (ENV_AUTO_START, ENV_CHECK_INPUTS))
        for name, raw in ((ENV_AUTO_START, auto_start_raw), (ENV_CHECK_INPUTS, check_inputs_raw)):
            if raw not in _TRUE | _FALSE:
                raise ConfigError(f"{name} must be true or false, got {environ.get(name)!r}")
        arn = environ.get(ENV_STATE_MACHINE_ARN) or None
        if arn is not None and not (arn.startswith("arn:") and ":stateMachine:" in arn):
            raise ConfigError(f"{ENV_STATE_MACHINE_ARN} is not a state machine ARN: {arn!r}")
        try:
            # Unset or empty alike: a deployment is never told "anywhere".
            input_locations = parse_locations(environ.get(ENV_INPUT_LOCATIONS) or "") or None
        except ConfigError as exc:
            raise ConfigError(f"{ENV_INPUT_LOCATIONS}: {exc}") from exc
        return cls(
            workspace=workspace,
            lease=_number(environ, ENV_LEASE, DEFAULT_TIME_LIMIT_SECONDS, float, MIN_LEASE_SECONDS, MAX_LEASE_SECONDS),
            foreign_lock_timeout=_number(environ, ENV_FOREIGN_LOCK_TIMEOUT, FOREIGN_LOCK_TIMEOUT_SECONDS, float, MIN_LEASE_SECONDS),
            max_attempts=int(_number(environ, ENV_MAX_ATTEMPTS, DEFAULT_MAX_ATTEMPTS, int, 1)),
            group_size=int(_number(environ, ENV_GROUP_SIZE, DEFAULT_GROUP_SIZE, int, 1)),
            processor=environ.get(ENV_PROCESSOR) or DEFAULT_PROCESSOR,
            state_machine_arn=arn,
            auto_start=auto_start_raw in _TRUE,
            check_inputs=check_inputs_raw in _TRUE,
            workers=int(_number(environ, ENV_WORKERS, DEFAULT_WORKERS, int, 1)),
            input_locations=input_locations,
            # At most the Lambda maximum; the handler cuts it to what each invocation has (handlers/worker.py).
            group_timeout=_number(
                environ, ENV_GROUP_TIMEOUT, DEFAULT_GROUP_TIMEOUT_SECONDS, float, MIN_RUN_SECONDS, DEFAULT_TIME_LIMIT_SECONDS
            ),
            max_input_bytes=int(_number(environ, ENV_MAX_INPUT_BYTES, DEFAULT_MAX_INPUT_BYTES, int, 1)),
        )

"""Settings of a worker, validated once, with every default defined here and nowhere else."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError

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

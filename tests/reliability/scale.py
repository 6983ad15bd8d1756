"""How big the reliability tests run: CI size by default, ``S3WQ_RELIABILITY_SCALE=10`` for ten times the groups."""

from __future__ import annotations

import os

SCALE_ENV = "S3WQ_RELIABILITY_SCALE"


def scale() -> int:
    raw = os.environ.get(SCALE_ENV, "1")
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{SCALE_ENV} must be a positive integer, got {raw!r}") from None
    if value < 1:
        raise ValueError(f"{SCALE_ENV} must be a positive integer, got {raw!r}")
    return value

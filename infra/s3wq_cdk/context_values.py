"""How a ``-c`` value is read: the parsers of settings.CONTEXT_KEYS that hold no setting's own rule.

On the command line every value is a string (``-c tracing=false``, ``-c kmsKeyArns='["arn:..."]'``); in
cdk.json it is JSON (``false``, a list). Each parser takes both, and raises ValueError saying what it expected.
"""

from __future__ import annotations

import json
from typing import Any


def string_list(value: Any) -> tuple[str, ...]:
    # `-c kmsKeyArns='["arn:..."]'` arrives as a JSON string; cdk.json as a list.
    if isinstance(value, str):
        value = json.loads(value) if value.strip().startswith("[") else [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("expected a list of strings")
    return tuple(value)


def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def id_list(value: Any) -> tuple[str, ...]:
    """``subnet-a,subnet-b``, or a JSON list (cdk.json's, or ``-c 'vlmSubnetIds=["subnet-a"]'``)."""
    if isinstance(value, str) and not value.strip().startswith("["):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return string_list(value)

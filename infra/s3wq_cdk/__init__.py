"""The CDK app's constructs: one per concern, all of them held by :class:`s3wq_cdk.queue.S3wqQueue`.

What a user's own CDK app imports (``from s3wq_cdk import S3wqQueue,
DeploySettings`` once this checkout is installed, see docs/deploy.md). The
names load on first use, so ``python -m s3wq_cdk.asset_files`` does not import its
own module twice.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"DeploySettings": "settings", "InputLocation": "settings", "S3wqQueue": "queue", "S3wqStack": "stack"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)

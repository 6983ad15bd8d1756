"""Fixtures of the infra tier: the CDK stack, synthesized in-process as app.py does.

Each context variant is synthesized once per session (``synth``); ``stack``
is the default one, with cdk.json's context and the plain ``lambdas/`` asset.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from support import REPO_ROOT

TESTS_DIR = Path(__file__).resolve().parent.parent

# The stack imports `s3wq_cdk` from infra/ and the library's layout and
# environment-variable names from `lambdas/`, as app.py arranges; the helper
# modules next to this file are imported by name.
for _path in (Path(__file__).resolve().parent, REPO_ROOT / "lambdas", REPO_ROOT / "infra"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

# Read by the jsii runtime when it starts (on the first `import aws_cdk`):
# an unsupported-Node banner on every run is noise, not a finding.
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "18,20")

from stack_under_test import StackUnderTest, build  # noqa: E402


@pytest.fixture(scope="session")
def synth():
    """``synth(context_overrides)``: the stack for cdk.json's context plus the overrides, synthesized once per session."""
    cache: dict[str, StackUnderTest] = {}

    def get(overrides: dict | None = None) -> StackUnderTest:
        key = repr(sorted((overrides or {}).items()))
        if key not in cache:
            cache[key] = build(overrides or {})
        return cache[key]

    return get


@pytest.fixture(scope="session")
def stack(synth) -> StackUnderTest:
    return synth()

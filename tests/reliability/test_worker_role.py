"""What the functions' roles let them touch, asked as questions of the synthesized policies: may this role do that action on that ARN?

tests/infra/test_iam.py pins the exact resources of s3:PutObject and
s3:DeleteObject, no wildcard action, Resource "*" only where no resource-level
permission exists, and the input buckets' read grants; tests/infra/test_storage.py
public access, TLS and encryption; tests/infra/test_cdk_nag.py the documented
suppressions. Here every S3 write action and every read is probed against ARNs
just outside what a role should reach: a sibling prefix, the bucket root,
another bucket, an input bucket's neighbouring prefix.

Policies are evaluated the way IAM matches them (``*`` and ``?`` wildcards,
actions case-insensitive), counting an Allow with a condition as allowed, so
every "cannot" here holds whatever the condition says.
"""

from __future__ import annotations

import os
import re
import sys
from functools import cache

import pytest
from support import REPO_ROOT

# Build the stack as tests/infra does (its helper module, the CDK app's imports).
for _path in (REPO_ROOT / "tests" / "infra", REPO_ROOT / "lambdas", REPO_ROOT / "infra"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "18,20")

pytest.importorskip("aws_cdk")
from stack_under_test import build  # noqa: E402

S3 = "arn:${AWS::Partition}:s3:::"
WORKSPACE_BUCKET = "my-existing-bucket"
PREFIX = "data/run1"
DEPLOYMENT = {"bucketName": WORKSPACE_BUCKET, "workspacePrefix": PREFIX, "inputBuckets": ["in-bucket/scans", "whole-in-bucket"]}
FUNCTIONS = ("worker", "populate", "status")

# Every S3 action that changes an object or a bucket; none may reach outside the workspace prefix.
S3_WRITE_ACTIONS = [
    "s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion", "s3:PutObjectAcl", "s3:PutObjectVersionAcl",
    "s3:PutObjectTagging", "s3:DeleteObjectTagging", "s3:PutObjectRetention", "s3:PutObjectLegalHold",
    "s3:AbortMultipartUpload", "s3:RestoreObject", "s3:ReplicateObject", "s3:ReplicateDelete",
    "s3:PutBucketPolicy", "s3:DeleteBucketPolicy", "s3:PutBucketAcl", "s3:PutLifecycleConfiguration",
    "s3:PutBucketNotification", "s3:PutBucketVersioning", "s3:PutEncryptionConfiguration", "s3:DeleteBucket",
]  # fmt: skip
OUTSIDE_THE_WORKSPACE = [
    f"{S3}{WORKSPACE_BUCKET}/{PREFIX}0/done_flags/done_x.flag",  # a sibling prefix sharing the name's start
    f"{S3}{WORKSPACE_BUCKET}/data/other/worker_locks/worker_x.lock",
    f"{S3}{WORKSPACE_BUCKET}/data/done_flags/done_x.flag",
    f"{S3}{WORKSPACE_BUCKET}/done_flags/done_x.flag",
    f"{S3}{WORKSPACE_BUCKET}/secrets.txt",
    f"{S3}{WORKSPACE_BUCKET}",
    f"{S3}in-bucket/scans/page-1.pdf",
    f"{S3}whole-in-bucket/page-1.pdf",
    f"{S3}elsewhere/{PREFIX}/done_flags/done_x.flag",
]


@cache
def _pattern(text: str) -> re.Pattern:
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in text), re.DOTALL)


_STATEMENTS: dict[tuple[int, str], list] = {}


def may(stack, function: str, action: str, resource: str) -> bool:
    """Whether any Allow statement of the function's role matches the action and the resource."""
    key = (id(stack), function)
    if key not in _STATEMENTS:
        _STATEMENTS[key] = stack.statements(stack.role_id(function))
    statements = _STATEMENTS[key]
    return any(
        statement.effect == "Allow"
        and any(re.fullmatch(_pattern(a.lower()), action.lower()) for a in statement.actions)
        and any(re.fullmatch(_pattern(r), resource) for r in statement.resources)
        for statement in statements
    )


@pytest.fixture(scope="module")
def stack():
    return build(DEPLOYMENT)


def test_the_probes_see_what_the_roles_are_granted(stack):
    workspace = f"{S3}{WORKSPACE_BUCKET}/{PREFIX}"
    assert may(stack, "worker", "s3:PutObject", f"{workspace}/done_flags/done_x.flag")
    assert may(stack, "worker", "s3:DeleteObject", f"{workspace}/worker_locks/worker_x.lock")
    assert may(stack, "worker", "s3:GetObject", f"{S3}in-bucket/scans/page-1.pdf")
    assert may(stack, "populate", "s3:PutObject", f"{workspace}/index/catalog.json")
    assert may(stack, "worker", "s3:PutObject", f"{workspace}/input_errors/input_errors_x.json")
    assert may(stack, "populate", "s3:PutObject", f"{workspace}/manifest_errors/nightly/batch.txt.json")


@pytest.mark.parametrize("function", FUNCTIONS)
def test_no_function_may_change_anything_outside_the_workspace_prefix(stack, function):
    allowed = [
        (action, resource) for action in S3_WRITE_ACTIONS for resource in OUTSIDE_THE_WORKSPACE if may(stack, function, action, resource)
    ]
    assert allowed == []


def test_the_worker_reads_only_its_workspace_and_the_input_buckets_under_their_prefixes(stack):
    workspace = f"{S3}{WORKSPACE_BUCKET}/{PREFIX}"
    for readable in [f"{workspace}/index/catalog.json", f"{S3}in-bucket/scans/2026/page-1.pdf", f"{S3}whole-in-bucket/any/page-1.pdf"]:
        assert may(stack, "worker", "s3:GetObject", readable), readable
    unreadable = [
        f"{S3}in-bucket/scans-private/page-1.pdf",  # shares the input prefix's first characters
        f"{S3}in-bucket/page-1.pdf",
        f"{S3}other-bucket/scans/page-1.pdf",
        f"{S3}{WORKSPACE_BUCKET}/{PREFIX}0/index/catalog.json",
        f"{S3}{WORKSPACE_BUCKET}/secrets.txt",
    ]
    read_actions = ["s3:GetObject", "s3:GetObjectVersion", "s3:GetObjectAcl", "s3:GetObjectAttributes", "s3:GetObjectTagging"]
    assert [(a, r) for a in read_actions for r in unreadable if may(stack, "worker", a, r)] == []
    assert [b for b in ("other-bucket", "in-bucket", "whole-in-bucket") if may(stack, "worker", "s3:ListBucket", f"{S3}{b}")] == []


def test_a_wildcard_character_in_a_prefix_cannot_widen_what_the_worker_may_touch():
    try:
        wild = build({"workspacePrefix": "run*", "inputBuckets": ["in-bucket/scans*"]})
    except ValueError:
        return  # refused when the stack is built: nothing is deployed
    bucket_arn = wild.bucket_arn
    assert not may(wild, "worker", "s3:PutObject", f"{bucket_arn}/run-of-another-team/done_flags/done_x.flag")
    assert not may(wild, "worker", "s3:GetObject", f"{S3}in-bucket/scans-private/page-1.pdf")

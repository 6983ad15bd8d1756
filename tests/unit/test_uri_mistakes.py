"""Which texts look like a mistyped or unsupported URI, and which are local paths; the Lambda's workspace setting too."""

from __future__ import annotations

import pytest

from s3wq.config import ENV_WORKSPACE, LambdaConfig
from s3wq.errors import ConfigError
from s3wq.store import uri_mistake


@pytest.mark.parametrize(
    "text, suggestion",
    [
        ("s3:/b/k", "did you mean s3://b/k?"),
        ("s3:b/k", "did you mean s3://b/k?"),
        ("s3//b/k", "did you mean s3://b/k?"),
        ("s3:\\\\b\\k", "did you mean s3://b/k?"),
        ("s3\\\\b\\k", "did you mean s3://b/k?"),
        ("S3://b/k", "did you mean s3://b/k?"),
        ("S3:/b/k", "did you mean s3://b/k?"),
        ("s3a://b/k", "did you mean s3://b/k?"),
        ("s3n://b/k", "did you mean s3://b/k?"),
        ("s3:://b/k", "did you mean s3://b/k?"),
        ("s3:", "did you mean s3://BUCKET/...?"),
        ("https://b.s3.amazonaws.com/k", "did you mean s3://b/k?"),
        ("https://b.s3.eu-west-1.amazonaws.com/k", "did you mean s3://b/k?"),
        ("https://s3.us-east-2.amazonaws.com/b/k", "did you mean s3://b/k?"),
        ("http://example.com/k", "unsupported scheme 'http'"),
        ("gs://b/k", "unsupported scheme 'gs'"),
        ("file:///etc/hostname", "name the path itself, /etc/hostname"),
        ("gs:/b/k", "looks like a gs:// URI"),
        ("./a://b", "not a scheme"),
    ],
)
def test_a_mistyped_or_unsupported_uri_is_named_with_a_suggestion(text, suggestion):
    assert suggestion in (uri_mistake(text) or "")


@pytest.mark.parametrize(
    "text",
    ["s3://b/k", "s3://", "s3", "s3/x", "s3s/x", "./s3:/x", "/data/s3:/x", "C:\\data", "notes:2024.txt", "a b/c.pdf", "s3-inputs/x"],
)
def test_s3_uris_and_local_paths_are_not_mistakes(text):
    assert uri_mistake(text) is None


@pytest.mark.parametrize("workspace", ["s3:/bucket/ws", "S3://bucket/ws", "gs://bucket/ws", "file:///tmp/ws"])
def test_the_lambda_refuses_a_mistyped_workspace_setting(workspace):
    with pytest.raises(ConfigError, match=ENV_WORKSPACE):
        LambdaConfig.from_env({ENV_WORKSPACE: workspace})

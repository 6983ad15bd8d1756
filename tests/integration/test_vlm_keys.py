"""The vlm processor's API key: from the environment, or from a Secrets Manager secret (the moto server over HTTP,
as Lambda's worker reads it), never shown: not in the settings' repr, not in an error."""

from __future__ import annotations

import json

import boto3
import pytest

from s3wq.errors import ConfigError
from s3wq.processors.vlm.keys import BadApiKeySecret, api_key_of
from s3wq.processors.vlm.settings import VlmSettings

KEY = "sk-test-0123456789abcdef"


@pytest.fixture
def secrets(s3_server):
    return boto3.client("secretsmanager", endpoint_url=s3_server.endpoint, region_name="us-east-1")


def _settings(**env: str) -> VlmSettings:
    return VlmSettings.from_env({"S3WQ_VLM_ENDPOINT": "http://127.0.0.1:8000/v1", **env})


def test_the_key_in_the_environment_is_taken_and_never_in_the_settings_repr():
    settings = _settings(S3WQ_VLM_API_KEY=KEY)
    assert api_key_of(settings) == KEY
    assert KEY not in repr(settings)


@pytest.mark.parametrize("stored", [KEY, json.dumps({"api_key": KEY}), f"  {KEY}\n"])
def test_the_key_is_read_from_a_secret_as_a_string_or_a_json_object(secrets, stored):
    arn = secrets.create_secret(Name=f"s3wq-key-{abs(hash(stored))}", SecretString=stored)["ARN"]
    assert api_key_of(_settings(S3WQ_VLM_API_KEY_SECRET=arn), secrets) == KEY


@pytest.mark.parametrize("stored, why", [(json.dumps({"token": KEY}), "no 'api_key'"), ("{not json", "not JSON")])
def test_a_secret_without_a_key_is_a_one_line_config_error_that_does_not_show_it(secrets, stored, why):
    arn = secrets.create_secret(Name=f"s3wq-bad-{abs(hash(stored))}", SecretString=stored)["ARN"]
    with pytest.raises(BadApiKeySecret) as caught:
        api_key_of(_settings(S3WQ_VLM_API_KEY_SECRET=arn), secrets)
    assert why in str(caught.value) and KEY not in str(caught.value) and "\n" not in str(caught.value)
    assert isinstance(caught.value, ConfigError)


def test_a_secret_that_does_not_exist_is_a_config_error_naming_it(secrets):
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:s3wq-missing-AbCdEf"
    with pytest.raises(BadApiKeySecret, match=r"cannot be read \(ResourceNotFoundException\)"):
        api_key_of(_settings(S3WQ_VLM_API_KEY_SECRET=arn), secrets)


def test_no_key_and_no_secret_sends_none():
    assert api_key_of(_settings()) is None

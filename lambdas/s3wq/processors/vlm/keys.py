"""The endpoint's API key: from the environment, or on Lambda from a Secrets Manager secret; never logged.

A deployment names the secret (``S3WQ_VLM_API_KEY_SECRET``, an ARN the worker's role may read and nothing else), so the
key is never in the template, the function's environment or a log. The secret holds the key as its string, or a JSON
object with an ``api_key`` field (the shape the console's "other type of secret" gives a key-value pair).
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from s3wq.errors import ConfigError, StorageError
from s3wq.processors.vlm.settings import ENV_API_KEY_SECRET, VlmSettings

_KEY_FIELD = "api_key"
# The secret's own problems: the user's to fix (a name, a policy), not the store's weather.
_CONFIG_CODES = {"ResourceNotFoundException", "AccessDeniedException", "DecryptionFailure", "InvalidRequestException"}


class BadApiKeySecret(ConfigError):
    """The API key's secret cannot be read, or holds no key."""


def api_key_of(settings: VlmSettings, client: Any = None) -> str | None:
    """The key to send: ``settings.api_key``, else the secret's (read once per call: the caller caches it), else None."""
    if settings.api_key:
        return settings.api_key
    if not settings.api_key_secret:
        return None
    arn = settings.api_key_secret
    client = client or _secrets_client()
    try:
        value = client.get_secret_value(SecretId=arn).get("SecretString")
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in _CONFIG_CODES:
            raise BadApiKeySecret(f"{ENV_API_KEY_SECRET}: the secret {arn} cannot be read ({code})") from None
        raise StorageError(f"{ENV_API_KEY_SECRET}: reading the secret {arn} failed: {code or exc}") from None
    except BotoCoreError as exc:
        raise StorageError(f"{ENV_API_KEY_SECRET}: reading the secret {arn} failed: {type(exc).__name__}") from None
    return _key_in(value, arn)


def _secrets_client() -> Any:
    import boto3  # here, not at import: a worker with its key in the environment never builds one
    from botocore.config import Config

    return boto3.client("secretsmanager", config=Config(retries={"mode": "standard", "max_attempts": 5}))


def _key_in(value: str | None, arn: str) -> str:
    if not value or not value.strip():
        raise BadApiKeySecret(f"{ENV_API_KEY_SECRET}: the secret {arn} holds no string (a binary secret?)")
    value = value.strip()
    if value.startswith("{"):
        try:
            fields = json.loads(value)
        except ValueError:
            raise BadApiKeySecret(f"{ENV_API_KEY_SECRET}: the secret {arn} starts with {{ but is not JSON") from None
        key = fields.get(_KEY_FIELD) if isinstance(fields, dict) else None
        if not isinstance(key, str) or not key.strip():
            raise BadApiKeySecret(f"{ENV_API_KEY_SECRET}: the secret {arn} is JSON with no {_KEY_FIELD!r} string in it")
        return key.strip()
    return value

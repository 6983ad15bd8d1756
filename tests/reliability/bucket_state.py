"""What a bucket holds, read with the test's own client (not through the fault proxy)."""

from __future__ import annotations


def listed(s3_client, bucket: str, prefix: str = "") -> list[str]:
    """Every key under ``prefix``, in S3's (ascending) order."""
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


def objects(s3_client, bucket: str) -> dict[str, str]:
    """Key -> ETag of everything in the bucket: equal before and after means nothing was written or deleted."""
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return {item["Key"]: item["ETag"] for page in pages for item in page.get("Contents", [])}

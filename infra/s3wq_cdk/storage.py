"""The workspace bucket: created here with every guard on, an existing one named in context, or a bucket of the user's CDK app."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_s3 as s3
from constructs import Construct

LOCK_EXPIRY_DAYS = 1


class WorkspaceStorage(Construct):
    """Exposes ``bucket``, ``prefix`` and ``workspace_uri``; ``created`` tells whether this stack owns the bucket."""

    def __init__(self, scope: Construct, construct_id: str, *, bucket_name: str | None, prefix: str, bucket: s3.IBucket | None = None):
        super().__init__(scope, construct_id)
        self.prefix = prefix
        self.created = bucket_name is None and bucket is None
        if bucket is not None:
            # The user's own bucket (S3wqQueue's ``bucket``): its settings are the user's, as for bucketName.
            self.bucket = bucket
        elif bucket_name is not None:
            # An existing bucket keeps its own settings; see docs/deploy.md.
            self.bucket = s3.Bucket.from_bucket_name(self, "Bucket", bucket_name)
        else:
            self.bucket = s3.Bucket(
                self,
                "Bucket",
                block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                encryption=s3.BucketEncryption.S3_MANAGED,
                enforce_ssl=True,
                versioned=False,
                object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
                removal_policy=RemovalPolicy.RETAIN,
                lifecycle_rules=[
                    s3.LifecycleRule(
                        id="expire-stale-locks",
                        # A lock older than the longest Lambda run (15 min) is
                        # always stale; a day leaves failed-marked locks in place
                        # long enough for every worker to have re-listed.
                        prefix=f"{prefix}/worker_locks/",
                        expiration=Duration.days(LOCK_EXPIRY_DAYS),
                    ),
                    s3.LifecycleRule(id="abort-incomplete-uploads", abort_incomplete_multipart_upload_after=Duration.days(7)),
                ],
            )
        self.workspace_uri = f"s3://{self.bucket.bucket_name}/{prefix}"

    def objects(self, subpath: str) -> str:
        """The ARN of the workspace's objects under ``subpath`` (e.g. ``"worker_locks/*"``)."""
        return self.bucket.arn_for_objects(f"{self.prefix}/{subpath}")

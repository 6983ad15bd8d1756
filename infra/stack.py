"""The s3wq stack: wires storage, functions and orchestration together with least-privilege grants."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from cdk_nag import NagPackSuppression, NagSuppressions, RegexAppliesTo
from constructs import Construct

from s3wq import config as s3wq_config
from s3wq import inputs as s3wq_inputs
from s3wq.store import layout

from .bundling import lambda_code
from .functions import RUNTIME, QueueFunctions
from .monitoring import QueueMonitoring
from .orchestration import WorkerStateMachine
from .settings import DeploySettings, InputLocation
from .storage import WorkspaceStorage

MANIFESTS_DIR = layout.MANIFESTS_DIR


def _dir(key_prefix: str) -> str:
    """``worker_locks/worker_`` -> ``worker_locks/``: grants are per folder."""
    return key_prefix.rsplit("/", 1)[0] + "/"


class S3wqStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, settings: DeploySettings, **kwargs):
        super().__init__(scope, construct_id, **kwargs)
        self.settings = settings
        self.storage = WorkspaceStorage(self, "Storage", bucket_name=settings.bucket_name, prefix=settings.workspace_prefix)
        code = lambda_code(runtime=RUNTIME, architecture=settings.architecture, bundle=settings.bundling)
        self.functions = QueueFunctions(self, "Functions", code=code, settings=settings, workspace_uri=self.storage.workspace_uri)
        self.orchestration = WorkerStateMachine(
            self, "Orchestration", worker=self.functions.worker, status=self.functions.status, settings=settings
        )
        state_machine = self.orchestration.state_machine
        self.functions.populate.add_environment(s3wq_config.ENV_STATE_MACHINE_ARN, state_machine.state_machine_arn)

        self.monitoring = QueueMonitoring(
            self,
            "Monitoring",
            worker=self.functions.worker,
            populate=self.functions.populate,
            state_machine=state_machine,
            alarm_topic_arn=settings.alarm_topic_arn,
        )

        # One list for both: the roles may read inputs exactly where the runtime's policy allows them, no wider.
        locations = s3wq_inputs.format_locations(self._inputs())
        for function in (self.functions.worker, self.functions.populate):
            function.add_environment(s3wq_config.ENV_INPUT_LOCATIONS, locations)
        self._grant_worker()
        self._grant_populate()
        self._grant_status()
        self._grant_kms()

        manifests_prefix = f"{settings.workspace_prefix}/{MANIFESTS_DIR}"
        self.storage.bucket.add_event_notification(
            s3.EventType.OBJECT_CREATED, s3n.LambdaDestination(self.functions.populate), s3.NotificationKeyFilter(prefix=manifests_prefix)
        )

        CfnOutput(self, "BucketName", value=self.storage.bucket.bucket_name, description="The workspace bucket")
        CfnOutput(self, "WorkspaceUri", value=self.storage.workspace_uri, description="Give this to s3wq status / populate / work")
        CfnOutput(
            self,
            "ManifestPrefix",
            value=f"s3://{self.storage.bucket.bucket_name}/{manifests_prefix}",
            description="Upload a manifest here to index it and start the workers",
        )
        CfnOutput(self, "StateMachineArn", value=state_machine.state_machine_arn, description='Start an execution with {"workers": N}')
        CfnOutput(self, "MaxWorkers", value=str(settings.max_workers), description="Workers an execution runs at most (more are capped)")
        CfnOutput(self, "DashboardName", value=self.monitoring.dashboard.dashboard_name, description="The CloudWatch dashboard of runs")
        self._suppress_findings()

    # --- grants: each function gets its own actions on its own prefixes ---------------------------

    def _inputs(self) -> tuple[InputLocation, ...]:
        """Where populate and the worker read inputs: what the roles are granted and S3WQ_INPUT_LOCATIONS names.

        ``inputBuckets`` when set. Otherwise a bucket the stack created is the
        stack's own, the whole of it; an existing bucket (``bucketName``) may
        hold other data, so only the workspace's ``inputs/`` folder, as the
        runtime reads when told no place (inputs.default_locations).
        """
        if self.settings.input_buckets:
            return self.settings.input_buckets
        if self.storage.created:
            return (InputLocation(self.storage.bucket.bucket_name, ""),)
        defaults = s3wq_inputs.default_locations(self.storage.workspace_uri)
        return tuple(InputLocation(location.bucket, location.prefix) for location in defaults)

    def _read_inputs(self, role: iam.IGrantable, *, list_objects: bool) -> None:
        for location in self._inputs():
            bucket_arn = f"arn:{self.partition}:s3:::{location.bucket}"
            objects = f"{bucket_arn}/{location.prefix}/*" if location.prefix else f"{bucket_arn}/*"
            role.grant_principal.add_to_principal_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[objects]))
            if list_objects:
                # Globs are expanded by listing.
                listing = iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket_arn])
                if location.prefix:
                    listing.add_condition("StringLike", {"s3:prefix": [f"{location.prefix}/*", location.prefix]})
                role.grant_principal.add_to_principal_policy(listing)

    def _workspace(self, role: iam.IGrantable, *, read: list[str], write: list[str] = (), delete: list[str] = ()) -> None:
        storage = self.storage
        # ListBucket on the workspace bucket: S3 answers a missing key with 404
        # only to callers that may list the bucket (403 otherwise), and the
        # claim protocol must tell "no done flag" from "access denied".
        role.grant_principal.add_to_principal_policy(iam.PolicyStatement(actions=["s3:ListBucket"], resources=[storage.bucket.bucket_arn]))
        role.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[storage.objects(p) for p in read])
        )
        if write:
            role.grant_principal.add_to_principal_policy(
                iam.PolicyStatement(actions=["s3:PutObject"], resources=[storage.objects(p) for p in write])
            )
        if delete:
            role.grant_principal.add_to_principal_policy(
                iam.PolicyStatement(actions=["s3:DeleteObject"], resources=[storage.objects(p) for p in delete])
            )

    def _grant_worker(self) -> None:
        locks, done, failed, results, input_errors = (
            _dir(p) + "*"
            for p in (layout.LOCKS_PREFIX, layout.DONE_PREFIX, layout.FAILED_PREFIX, layout.RESULTS_PREFIX, layout.INPUT_ERRORS_PREFIX)
        )
        self._workspace(
            self.functions.worker,
            read=["*"],
            write=[locks, done, failed, results, input_errors],
            # An input-error list is deleted when a retry of its group read every input.
            delete=[locks, input_errors],
        )
        self._read_inputs(self.functions.worker, list_objects=False)

    def _grant_populate(self) -> None:
        index = _dir(layout.INDEX_CATALOG_KEY) + "*"
        manifest_errors = layout.MANIFEST_ERRORS_PREFIX + "*"
        self._workspace(
            self.functions.populate,
            read=[MANIFESTS_DIR + "*", index, layout.LEGACY_INDEX_KEY],
            write=[index, manifest_errors],
            # A manifest uploaded again without its bad lines clears their record.
            delete=[manifest_errors],
        )
        self._read_inputs(self.functions.populate, list_objects=True)
        state_machine = self.orchestration.state_machine
        state_machine.grant_start_execution(self.functions.populate)
        # To tell a redelivered event from a new one (see s3wq.handlers.populate).
        self.functions.populate.add_to_role_policy(
            iam.PolicyStatement(
                actions=["states:DescribeExecution"],
                resources=[
                    f"arn:{self.partition}:states:{self.region}:{self.account}:execution:{state_machine.state_machine_name}:manifest-*",
                    f"arn:{self.partition}:states:{self.region}:{self.account}:execution:{state_machine.state_machine_name}:sources-*",
                ],
            )
        )

    def _grant_kms(self) -> None:
        """SSE-KMS inputs or workspace: every function decrypts what it reads; worker and populate encrypt what they write.

        Only through S3 (kms:ViaService), only the named keys.
        """
        keys = list(self.settings.kms_key_arns)
        if not keys:
            return
        via_s3 = {"StringEquals": {"kms:ViaService": f"s3.{self.region}.amazonaws.com"}}
        for function, actions in (
            (self.functions.worker, ["kms:Decrypt", "kms:GenerateDataKey"]),
            (self.functions.populate, ["kms:Decrypt", "kms:GenerateDataKey"]),
            (self.functions.status, ["kms:Decrypt"]),
        ):
            function.add_to_role_policy(iam.PolicyStatement(actions=actions, resources=keys, conditions=via_s3))

    def _grant_status(self) -> None:
        index, locks, done = (_dir(p) + "*" for p in (layout.INDEX_CATALOG_KEY, layout.LOCKS_PREFIX, layout.DONE_PREFIX))
        # A count lists the flags, then reads each lock whose group has no
        # flag (how long its lease has left) and HEADs the done flag of a lock
        # that vanished meanwhile (status.scan_flags).
        self._workspace(self.functions.status, read=[index, layout.LEGACY_INDEX_KEY, locks, done])

    # --- cdk-nag ------------------------------------------------------------------------------------

    def _suppress_findings(self) -> None:
        prefix = self.settings.workspace_prefix
        NagSuppressions.add_resource_suppressions(
            [fn.role for fn in (self.functions.worker, self.functions.populate, self.functions.status)],
            [
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason=f"Object keys under the workspace prefix ({prefix}/...) and under the input prefixes are created at "
                    "run time, one per group, so they are granted by prefix, one action per statement. Populate may describe "
                    "only the executions it names itself (manifest-* and sources-*). X-Ray's PutTraceSegments and "
                    "PutTelemetryRecords support no resource-level permissions.",
                    applies_to=[
                        # <bucket>.Arn/<prefix>/<folder>/* and arn:...:s3:::<bucket>[/<prefix>]/*
                        RegexAppliesTo(regex="/^Resource::<Storage[A-Za-z0-9]*\\.Arn>\\/.*\\*$/"),
                        RegexAppliesTo(regex="/^Resource::arn:<AWS::Partition>:s3:::.*\\/\\*$/"),
                        RegexAppliesTo(
                            regex="/^Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:.*:(manifest|sources)-\\*$/"
                        ),
                        "Resource::*",
                    ],
                )
            ],
            apply_to_children=True,
        )
        NagSuppressions.add_resource_suppressions(
            self.orchestration.state_machine,
            [
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="Invoking a Lambda by its ARN with :* covers its versions and aliases; the Distributed Map starts and "
                    "describes its own child executions, whose names it generates; CloudWatch Logs delivery and X-Ray "
                    "support no resource-level permissions.",
                    applies_to=[
                        RegexAppliesTo(regex="/^Resource::<.*\\.Arn>:\\*$/"),
                        RegexAppliesTo(regex="/^Resource::\\*$/"),
                        RegexAppliesTo(regex="/^Resource::arn:<AWS::Partition>:states:.*$/"),
                    ],
                )
            ],
            apply_to_children=True,
        )
        if self.storage.created:
            NagSuppressions.add_resource_suppressions(
                self.storage.bucket,
                [
                    NagPackSuppression(
                        id="AwsSolutions-S1",
                        reason="The workspace holds queue state written several times per group; server access logs would "
                        "roughly double its request volume. Audit access with CloudTrail S3 data events where required.",
                    )
                ],
            )
        # The custom resource CDK adds to configure bucket notifications: its
        # code and role are CDK's own, so its findings are suppressed there only.
        for handler in (c for c in self.node.children if c.node.id.startswith("BucketNotificationsHandler")):
            NagSuppressions.add_resource_suppressions(
                handler,
                [
                    NagPackSuppression(
                        id="AwsSolutions-IAM4",
                        reason="CDK's BucketNotificationsHandler, which sets the bucket's notification configuration at "
                        "deploy time, uses the AWS-managed basic execution role; our functions use inline roles.",
                        applies_to=["Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"],
                    ),
                    NagPackSuppression(
                        id="AwsSolutions-IAM5",
                        reason="CDK's BucketNotificationsHandler calls s3:PutBucketNotification while deploying; CDK writes "
                        "its policy with Resource * and the function runs only during stack updates.",
                        applies_to=["Resource::*"],
                    ),
                ],
                apply_to_children=True,
            )

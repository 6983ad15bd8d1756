"""The whole s3wq deployment as one construct: workspace bucket, functions, state machine, dashboard, alarms, grants, outputs.

``S3wqQueue(scope, "Queue", settings=DeploySettings(...))`` in a user's own
CDK app, or inside this repository's :class:`s3wq_cdk.stack.S3wqStack` (with the
id ``Default``, which CDK leaves out of logical IDs, so deployments made
before the construct keep every resource). Its props are
:class:`s3wq_cdk.settings.DeploySettings`, checked here in one place; ``bucket``
puts the workspace in a bucket of the user's app.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from constructs import Construct

from s3wq import config as s3wq_config
from s3wq import inputs as s3wq_inputs
from s3wq.store import layout

from .bundling import lambda_code
from .errors import SettingsError, tell_in_one_line
from .functions import QueueFunctions
from .model_endpoint import ModelEndpoint
from .monitoring import PERIOD, QueueMonitoring, backlog_metric
from .nag import suppress_endpoint_findings, suppress_findings
from .network import WorkerNetwork
from .orchestration import WorkerStateMachine
from .runtime import PYTHON_VERSION, RUNTIME
from .settings import DeploySettings, InputLocation
from .storage import WorkspaceStorage
from .worker_code import worker_code

MANIFESTS_DIR = layout.MANIFESTS_DIR
# `s3wq start --stack NAME` reads these outputs by their plain keys.
_STAND_IN_BUCKET = "bucket"
OUTPUT_KEYS = ("BucketName", "WorkspaceUri", "ManifestPrefix", "StateMachineArn", "MaxWorkers", "DashboardName")


def _dir(key_prefix: str) -> str:
    """``worker_locks/worker_`` -> ``worker_locks/``: grants are per folder."""
    return key_prefix.rsplit("/", 1)[0] + "/"


class S3wqQueue(Construct):
    """Exposes ``storage``, ``functions``, ``orchestration`` and ``monitoring``; one per stack (its outputs have plain keys).

    With the vlm processors, ``network`` (the workers' VPC, or None) and ``model_endpoint`` (the stack's own, or None).
    """

    def __init__(self, scope: Construct, construct_id: str, *, settings: DeploySettings, bucket: s3.IBucket | None = None):
        super().__init__(scope, construct_id)
        tell_in_one_line()  # what the construct raises, building too (a processor folder, pip), in one line in any app
        _check(self, settings, bucket)
        self.settings = settings
        self.storage = WorkspaceStorage(self, "Storage", bucket_name=settings.bucket_name, prefix=settings.workspace_prefix, bucket=bucket)
        self.network, self.model_endpoint = self._model_network(settings)
        code = lambda_code(runtime=RUNTIME, architecture=settings.architecture, bundle=settings.bundling)
        self.functions = QueueFunctions(
            self,
            "Functions",
            code=code,
            worker_code=worker_code(self, settings, shared=code, python_version=PYTHON_VERSION),
            settings=settings,
            workspace_uri=self.storage.workspace_uri,
            network=self.network,
            model_endpoint=self.model_endpoint.url if self.model_endpoint else None,
        )
        if self.model_endpoint is not None:
            self._serve_the_workers(self.model_endpoint)
        self.orchestration = WorkerStateMachine(
            self,
            "Orchestration",
            worker=self.functions.worker,
            status=self.functions.status,
            settings=settings,
            before_rounds=self.model_endpoint.serving_wait() if self.model_endpoint else None,
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
        self._grants()

        manifests_prefix = f"{settings.workspace_prefix}/{MANIFESTS_DIR}"
        self.storage.bucket.add_event_notification(
            s3.EventType.OBJECT_CREATED, s3n.LambdaDestination(self.functions.populate), s3.NotificationKeyFilter(prefix=manifests_prefix)
        )

        self._outputs(manifests_prefix)
        suppress_findings(
            self,
            functions=(self.functions.worker, self.functions.populate, self.functions.status),
            state_machine=state_machine,
            created_bucket=self.storage.bucket if self.storage.created else None,
            workspace_prefix=settings.workspace_prefix,
        )

    def _model_network(self, settings: DeploySettings) -> tuple[WorkerNetwork | None, ModelEndpoint | None]:
        """The vlm processors' model, when it is private (a VPC for the workers) or the stack's own (vLLM on ECS)."""
        network = WorkerNetwork(self, "Network", settings=settings) if settings.worker_in_vpc else None
        if settings.vlm_serve is None or network is None:
            return network, None
        return network, ModelEndpoint(self, "ModelEndpoint", settings=settings, network=network)

    def _serve_the_workers(self, endpoint: ModelEndpoint) -> None:
        """The workers reach the endpoint's port alone; it scales with the workspace's backlog and the workers' concurrency; its nag findings."""
        assert self.network is not None and self.network.worker_security_group is not None  # made with vlmServe
        endpoint.allow_from(self.network.worker_security_group)
        endpoint.scale_with(
            backlog=backlog_metric(self.storage.workspace_uri),
            workers_running=self.functions.worker.metric("ConcurrentExecutions", statistic="Maximum", period=PERIOD),
        )
        suppress_endpoint_findings(endpoint)

    def _outputs(self, manifests_prefix: str) -> None:
        """What `s3wq start --stack NAME` and a user read, under plain keys (OUTPUT_KEYS)."""
        state_machine = self.orchestration.state_machine
        CfnOutput(self, "BucketName", value=self.storage.bucket.bucket_name, description="The workspace bucket")
        CfnOutput(self, "WorkspaceUri", value=self.storage.workspace_uri, description="Give this to s3wq status / populate / work")
        CfnOutput(
            self,
            "ManifestPrefix",
            value=f"s3://{self.storage.bucket.bucket_name}/{manifests_prefix}",
            description="Upload a manifest here to index it and start the workers",
        )
        CfnOutput(self, "StateMachineArn", value=state_machine.state_machine_arn, description='Start an execution with {"workers": N}')
        CfnOutput(
            self, "MaxWorkers", value=str(self.settings.max_workers), description="Workers an execution runs at most (more are capped)"
        )
        CfnOutput(self, "DashboardName", value=self.monitoring.dashboard.dashboard_name, description="The CloudWatch dashboard of runs")
        for output in self.node.children:
            if isinstance(output, CfnOutput) and output.node.id in OUTPUT_KEYS:
                output.override_logical_id(output.node.id)

    # --- grants: each function gets its own actions on its own prefixes ---------------------------

    def _grants(self) -> None:
        self._grant_worker()
        self._grant_populate()
        self._grant_status()
        self._grant_kms()
        self._grant_api_key_secret()

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
        # The runtime's own rule, on a stand-in name: a bucket of the user's app has a token for a name until deploy.
        defaults = s3wq_inputs.default_locations(f"s3://{_STAND_IN_BUCKET}/{self.settings.workspace_prefix}")
        return tuple(InputLocation(self.storage.bucket.bucket_name, location.prefix) for location in defaults)

    def _read_inputs(self, role: iam.IGrantable, *, list_objects: bool) -> None:
        for location in self._inputs():
            bucket_arn = f"arn:{Stack.of(self).partition}:s3:::{location.bucket}"
            objects = f"{bucket_arn}/{location.prefix}/*" if location.prefix else f"{bucket_arn}/*"
            role.grant_principal.add_to_principal_policy(iam.PolicyStatement(actions=["s3:GetObject"], resources=[objects]))
            if list_objects:
                # Globs are expanded by listing.
                listing = iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket_arn])
                if location.prefix:
                    listing.add_condition("StringLike", {"s3:prefix": [f"{location.prefix}/*", location.prefix]})
                role.grant_principal.add_to_principal_policy(listing)

    def _workspace(self, role: iam.IGrantable, *, read: Sequence[str], write: Sequence[str] = (), delete: Sequence[str] = ()) -> None:
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
                    f"arn:{Stack.of(self).partition}:states:{Stack.of(self).region}:{Stack.of(self).account}:execution:{state_machine.state_machine_name}:manifest-*",
                    f"arn:{Stack.of(self).partition}:states:{Stack.of(self).region}:{Stack.of(self).account}:execution:{state_machine.state_machine_name}:sources-*",
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
        via_s3 = {"StringEquals": {"kms:ViaService": f"s3.{Stack.of(self).region}.amazonaws.com"}}
        for function, actions in (
            (self.functions.worker, ["kms:Decrypt", "kms:GenerateDataKey"]),
            (self.functions.populate, ["kms:Decrypt", "kms:GenerateDataKey"]),
            (self.functions.status, ["kms:Decrypt"]),
        ):
            function.add_to_role_policy(iam.PolicyStatement(actions=actions, resources=keys, conditions=via_s3))

    def _grant_api_key_secret(self) -> None:
        """The worker reads the model's API key from its secret when it starts: that one secret, and nothing without one."""
        secret = self.settings.vlm_api_key_secret
        if secret is not None:
            self.functions.worker.add_to_role_policy(iam.PolicyStatement(actions=["secretsmanager:GetSecretValue"], resources=[secret]))

    def _grant_status(self) -> None:
        index, locks, done = (_dir(p) + "*" for p in (layout.INDEX_CATALOG_KEY, layout.LOCKS_PREFIX, layout.DONE_PREFIX))
        # A count lists the flags, then reads each lock whose group has no
        # flag (how long its lease has left) and HEADs the done flag of a lock
        # that vanished meanwhile (status.scan_flags).
        self._workspace(self.functions.status, read=[index, layout.LEGACY_INDEX_KEY, locks, done])


def _check(queue: S3wqQueue, settings: DeploySettings, bucket: s3.IBucket | None) -> None:
    """The props, in one place: the settings' own checks, and what only the construct can see."""
    problems = []
    try:
        settings.validate()
    except SettingsError as exc:
        problems.append(str(exc))
    if bucket is not None and settings.bucket_name is not None:
        problems.append("S3wqQueue: give bucket or settings.bucket_name, not both")
    others = [c.node.path for c in Stack.of(queue).node.find_all() if isinstance(c, S3wqQueue) and c is not queue]
    if others:
        problems.append(f"S3wqQueue: one per stack (its outputs have plain keys for `s3wq start`); {others[0]} is already in this one")
    if problems:
        raise SettingsError("; ".join(problems))

"""A CloudWatch dashboard of a run and alarms on failed groups and failed executions."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from s3wq import config as s3wq_config

# Powertools' EMF metrics: namespace and the "service" dimension it adds.
NAMESPACE = "s3wq"
SERVICE_DIMENSION = {"service": "s3wq"}
PERIOD = Duration.minutes(1)


def _queue_metric(name: str, statistic: str = "Sum", label: str | None = None) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace=NAMESPACE, metric_name=name, dimensions_map=SERVICE_DIMENSION, statistic=statistic, period=PERIOD, label=label or name
    )


def backlog_metric(workspace_uri: str) -> cloudwatch.Metric:
    """The groups remaining at each count of the workspace (the status function's, s3wq.config.BACKLOG_METRIC): the most a minute."""
    return cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=s3wq_config.BACKLOG_METRIC,
        dimensions_map={**SERVICE_DIMENSION, s3wq_config.WORKSPACE_DIMENSION: workspace_uri},
        statistic="Maximum",
        period=PERIOD,
        label="groups remaining",
    )


class QueueMonitoring(Construct):
    """Exposes ``dashboard``, ``failed_groups_alarm`` and ``failed_executions_alarm``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        worker: lambda_.Function,
        populate: lambda_.Function,
        state_machine: sfn.StateMachine,
        alarm_topic_arn: str | None = None,
    ):
        super().__init__(scope, construct_id)
        self.dashboard = self._dashboard(worker=worker, populate=populate, state_machine=state_machine)
        self.failed_groups_alarm, self.failed_executions_alarm = self._alarms(state_machine, alarm_topic_arn)

    def _dashboard(self, *, worker: lambda_.Function, populate: lambda_.Function, state_machine: sfn.StateMachine) -> cloudwatch.Dashboard:
        """Three rows: the groups, then claims, the worker and the executions, then populate."""
        dashboard = cloudwatch.Dashboard(self, "Dashboard", default_interval=Duration.hours(3))
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Groups per minute",
                left=[_queue_metric("GroupsProcessed", label="processed"), _queue_metric("GroupsFailed", label="failed")],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Group duration (ms)",
                left=[_queue_metric("GroupDuration", "p50", "p50"), _queue_metric("GroupDuration", "p99", "p99")],
                width=12,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Claims",
                left=[_queue_metric("ClaimConflicts", label="claim conflicts"), _queue_metric("LocksReclaimed", label="locks reclaimed")],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Worker Lambda",
                left=[worker.metric_errors(period=PERIOD, label="errors"), worker.metric_throttles(period=PERIOD, label="throttles")],
                right=[worker.metric_invocations(period=PERIOD, label="invocations")],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title="Executions",
                left=[
                    state_machine.metric_started(period=PERIOD, label="started"),
                    state_machine.metric_succeeded(period=PERIOD, label="succeeded"),
                    state_machine.metric_failed(period=PERIOD, label="failed"),
                    state_machine.metric_timed_out(period=PERIOD, label="timed out"),
                ],
                width=8,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Populate",
                left=[_queue_metric("PathsIndexed", label="paths indexed")],
                right=[populate.metric_errors(period=PERIOD, label="errors")],
                width=24,
            )
        )
        return dashboard

    def _alarms(self, state_machine: sfn.StateMachine, alarm_topic_arn: str | None) -> tuple[cloudwatch.Alarm, cloudwatch.Alarm]:
        """On failed groups and on failed executions, each sent to the topic when one is named."""
        failed_groups = cloudwatch.Alarm(
            self,
            "FailedGroups",
            alarm_description="A group used up its attempts: see `s3wq failures WORKSPACE`, fix, then `s3wq requeue-failed`.",
            metric=_queue_metric("GroupsFailed", label="failed groups").with_(period=Duration.minutes(5)),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        failed_executions = cloudwatch.Alarm(
            self,
            "FailedExecutions",
            alarm_description="An s3wq execution failed (too many failed groups, work remaining, or bad input).",
            metric=state_machine.metric_failed(period=Duration.minutes(5)),
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        if alarm_topic_arn:
            topic = sns.Topic.from_topic_arn(self, "AlarmTopic", alarm_topic_arn)
            for alarm in (failed_groups, failed_executions):
                alarm.add_alarm_action(cw_actions.SnsAction(topic))
        return failed_groups, failed_executions

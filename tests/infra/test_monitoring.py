"""The run's CloudWatch dashboard and its alarms: which metrics they read, and where an alarm goes."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from aws_cdk.assertions import Annotations, Match
from stack_under_test import render

TOPIC = "arn:aws:sns:us-east-1:123456789012:ops"
WITH_TOPIC = {"alarmTopicArn": TOPIC}
# What the worker's Powertools Metrics emits: its namespace and the "service" dimension it adds.
QUEUE = "s3wq"
QUEUE_DIMENSIONS = {"service": "s3wq"}


@dataclass(frozen=True)
class Graphed:
    namespace: str
    name: str
    dimensions: tuple[tuple[str, str], ...]
    stat: str
    period: int


def dashboard_body(stack) -> dict:
    [dashboard] = stack.template.find_resources("AWS::CloudWatch::Dashboard").values()
    # The body is JSON with references spliced in; rendered, a reference reads ${LogicalId}.
    return json.loads(render(dashboard["Properties"]["DashboardBody"]))


def graphed(stack) -> set[Graphed]:
    """Every metric of every graph on the dashboard."""
    found = set()
    for widget in dashboard_body(stack)["widgets"]:
        for entry in widget.get("properties", {}).get("metrics", []):
            options = entry[-1] if isinstance(entry[-1], dict) else {}
            namespace, name, *pairs = [e for e in entry if not isinstance(e, dict)]
            dimensions = tuple(zip(pairs[::2], pairs[1::2]))
            found.add(Graphed(namespace, name, dimensions, options.get("stat", "Average"), options.get("period", 300)))
    return found


def ref(logical_id: str) -> str:
    return "${%s}" % logical_id


@pytest.mark.parametrize(
    ("name", "stat"),
    [
        ("GroupsProcessed", "Sum"),
        ("GroupsFailed", "Sum"),
        ("ClaimConflicts", "Sum"),
        ("LocksReclaimed", "Sum"),
        ("GroupDuration", "p50"),
        ("GroupDuration", "p99"),
    ],
)
def test_dashboard_graphs_the_queue_metrics_per_minute(stack, name, stat):
    expected = Graphed(QUEUE, name, tuple(QUEUE_DIMENSIONS.items()), stat, 60)
    assert expected in graphed(stack)


def test_the_dashboard_reads_the_namespace_and_service_the_worker_is_configured_with(stack):
    environment = stack.environment("worker")
    assert (environment["POWERTOOLS_METRICS_NAMESPACE"], environment["POWERTOOLS_SERVICE_NAME"]) == (QUEUE, QUEUE_DIMENSIONS["service"])


@pytest.mark.parametrize("name", ["Errors", "Throttles"])
def test_dashboard_graphs_the_worker_functions_errors_and_throttles(stack, name):
    worker = Graphed("AWS/Lambda", name, (("FunctionName", ref(stack.function_id("worker"))),), "Sum", 60)
    assert worker in graphed(stack)


@pytest.mark.parametrize("name", ["ExecutionsStarted", "ExecutionsSucceeded", "ExecutionsFailed", "ExecutionsTimedOut"])
def test_dashboard_graphs_the_state_machines_executions(stack, name):
    state_machine_id, _ = stack.state_machine()
    assert Graphed("AWS/States", name, (("StateMachineArn", ref(state_machine_id)),), "Sum", 60) in graphed(stack)


def test_the_dashboard_name_is_a_stack_output(stack):
    [dashboard_id] = stack.template.find_resources("AWS::CloudWatch::Dashboard")
    outputs = stack.json["Outputs"]
    assert outputs["DashboardName"]["Value"] == {"Ref": dashboard_id}


# --- alarms ---------------------------------------------------------------------------------------


def alarms(stack) -> list[dict]:
    return [resource["Properties"] for resource in stack.template.find_resources("AWS::CloudWatch::Alarm").values()]


def alarm_metric(alarm: dict) -> Graphed:
    """The one metric an alarm watches, whether CDK wrote it flat or as a MetricStat (it does when the metric has a label)."""
    if "MetricName" in alarm:
        namespace, name, dims = alarm["Namespace"], alarm["MetricName"], alarm.get("Dimensions", [])
        stat, period = alarm["Statistic"], alarm["Period"]
    else:
        [query] = alarm["Metrics"]
        metric = query["MetricStat"]["Metric"]
        namespace, name, dims = metric["Namespace"], metric["MetricName"], metric.get("Dimensions", [])
        stat, period = query["MetricStat"]["Stat"], query["MetricStat"]["Period"]
    return Graphed(namespace, name, tuple((d["Name"], render(d["Value"])) for d in dims), stat, period)


def alarm_on(stack, namespace: str, name: str) -> tuple[dict, Graphed]:
    found = [(alarm, metric) for alarm in alarms(stack) if (metric := alarm_metric(alarm)).namespace == namespace and metric.name == name]
    assert len(found) == 1, f"expected one alarm on {namespace} {name}, found {len(found)}"
    return found[0]


def test_an_alarm_fires_on_the_first_failed_group(stack):
    alarm, metric = alarm_on(stack, QUEUE, "GroupsFailed")

    assert metric.dimensions == tuple(QUEUE_DIMENSIONS.items())
    assert metric.stat == "Sum"
    assert (alarm["Threshold"], alarm["ComparisonOperator"], alarm["EvaluationPeriods"]) == (1, "GreaterThanOrEqualToThreshold", 1)
    assert alarm["TreatMissingData"] == "notBreaching"  # no metric at all means nothing failed
    assert "s3wq failures" in alarm["AlarmDescription"]


def test_an_alarm_fires_on_a_failed_execution(stack):
    alarm, metric = alarm_on(stack, "AWS/States", "ExecutionsFailed")

    state_machine_id, _ = stack.state_machine()
    assert metric.dimensions == (("StateMachineArn", ref(state_machine_id)),)
    assert metric.stat == "Sum"
    assert (alarm["Threshold"], alarm["ComparisonOperator"], alarm["EvaluationPeriods"]) == (1, "GreaterThanOrEqualToThreshold", 1)
    assert alarm["TreatMissingData"] == "notBreaching"


def test_without_a_topic_the_alarms_notify_nobody(stack):
    assert len(alarms(stack)) == 2
    assert [alarm.get("AlarmActions") for alarm in alarms(stack)] == [None, None]


def test_with_an_alarm_topic_both_alarms_notify_it(synth):
    stack = synth(WITH_TOPIC)

    alarm_on(stack, QUEUE, "GroupsFailed")
    alarm_on(stack, "AWS/States", "ExecutionsFailed")
    assert [alarm["AlarmActions"] for alarm in alarms(stack)] == [[TOPIC], [TOPIC]]
    # The topic is referenced, not created.
    assert stack.template.find_resources("AWS::SNS::Topic") == {}


def test_an_alarm_topic_adds_no_aws_solutions_findings(synth):
    annotations = Annotations.from_stack(synth(WITH_TOPIC).stack)
    rule = Match.string_like_regexp("AwsSolutions-.*")
    assert [m.entry.data for m in annotations.find_error("*", rule)] == []
    assert [m.entry.data for m in annotations.find_warning("*", rule)] == []


@pytest.mark.parametrize(
    "arn",
    [
        "ops",  # a topic name, not its ARN
        "arn:aws:sns:us-east-1:1234:ops",  # the account is twelve digits
        "arn:aws:sqs:us-east-1:123456789012:ops",  # a queue, not a topic
    ],
)
def test_a_malformed_alarm_topic_arn_is_refused_naming_it(synth, arn):
    with pytest.raises(ValueError, match=f"alarmTopicArn '{arn}' is not an SNS topic ARN"):
        synth({"alarmTopicArn": arn})

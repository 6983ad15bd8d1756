"""The Standard state machine: a Distributed Map of worker Lambdas in a bounded loop of rounds.

The definition is read back from the template (tokens rendered, e.g.
``${<worker>.Arn}``) and walked as a graph; see state_graph.py.
"""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match
from stack_under_test import TUNED
from state_graph import StateGraph, all_states

from s3wq.ops.problems import INPUT_ERROR_COUNTS, INPUT_ERRORS_EVENT_KEY

# The errors AWS recommends retrying for every Lambda task.
LAMBDA_TRANSIENT_ERRORS = {
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
}
DEFAULT_AND_TUNED = pytest.mark.parametrize("overrides", [{}, TUNED], ids=["default", "maxRounds=3,maxWorkers=50,workerTimeoutSeconds=300"])


def graph_of(stack) -> StateGraph:
    return StateGraph(stack.definition())


def the_distributed_map(graph: StateGraph) -> str:
    maps = [
        name
        for name in graph.of_type("Map")
        if graph.states[name].get("ItemProcessor", {}).get("ProcessorConfig", {}).get("Mode") == "DISTRIBUTED"
    ]
    assert len(maps) == 1, f"expected one Distributed Map, found {maps}"
    return maps[0]


def the_summary(graph: StateGraph) -> str:
    """The Pass state that makes the execution's output: the one that reads the queue's done count."""
    [summary] = [name for name in graph.of_type("Pass") if graph.states[name].get("Parameters", {}).get("done.$") == "$.status.done"]
    return summary


def loop_choices(graph: StateGraph, target: str) -> list[str]:
    """The Choice states on a cycle through ``target``."""
    return [name for name in graph.of_type("Choice") if graph.reaches(name, target) and graph.reaches(target, name)]


def test_standard_with_all_events_logged_and_tracing(stack):
    _, machine = stack.state_machine()
    stack.template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {
            "StateMachineType": "STANDARD",
            "LoggingConfiguration": Match.object_like(
                {"Level": "ALL", "Destinations": [{"CloudWatchLogsLogGroup": {"LogGroupArn": Match.any_value()}}]}
            ),
            "TracingConfiguration": {"Enabled": True},
        },
    )
    destination = machine["Properties"]["LoggingConfiguration"]["Destinations"][0]["CloudWatchLogsLogGroup"]["LogGroupArn"]
    log_groups = {"${%s.Arn}" % logical_id for logical_id in stack.template.find_resources("AWS::Logs::LogGroup")}
    assert stack.arn(destination) in log_groups


def test_every_state_is_reachable_and_can_finish(stack):
    graph = graph_of(stack)
    assert graph.reachable() == set(graph.states), f"unreachable: {sorted(set(graph.states) - graph.reachable())}"
    for name in graph.states:
        assert any(graph.is_terminal(end) for end in graph.reachable(name)), f"{name} can never finish"


def test_distributed_map_runs_one_worker_per_item(stack):
    graph = graph_of(stack)
    run_workers = graph.states[the_distributed_map(graph)]
    processor = run_workers["ItemProcessor"]
    [task] = [state for state in processor["States"].values() if state["Type"] == "Task"]
    invoked = task.get("Parameters", {}).get("FunctionName", task["Resource"])
    assert invoked == "${%s.Arn}" % stack.function_id("worker")
    # All items at once: as many concurrent children as workers requested.
    assert run_workers["MaxConcurrencyPath"] == "$.workers"


def test_every_child_of_the_map_ends_in_an_empty_object_so_the_maps_output_is_bounded(stack):
    graph = graph_of(stack)
    run_workers = graph.states[the_distributed_map(graph)]
    child = StateGraph(run_workers["ItemProcessor"])
    [task_name] = child.of_type("Task")
    task = child.states[task_name]
    # A failure, whatever its cause, is caught and ends the child like a report does.
    [catch] = task["Catch"]
    assert catch["ErrorEquals"] == ["States.ALL"] and catch["ResultPath"] is None
    ends = {name for name in child.reachable(task_name) if child.is_terminal(name)}
    assert ends == {catch["Next"]} == {task["Next"]}
    [end] = ends
    assert child.states[end] == {"Type": "Pass", "Result": {}, "End": True}
    # So the Map's output is at most "{}," a child: for maxWorkers children that all fail with the longest cause,
    max_workers = stack.context.get("maxWorkers", 1000)
    assert 3 * 10_000 < 256 * 1024 and 3 * max_workers < 256 * 1024
    assert run_workers["ResultPath"] is None


def test_worker_items_come_from_the_status_function_not_array_range(stack):
    graph = graph_of(stack)
    run_workers = the_distributed_map(graph)
    planners = [name for name in graph.of_type("Task") if graph.states[name].get("Parameters") == {"worker_items.$": "$.workers"}]
    assert len(planners) == 1
    planner = graph.states[planners[0]]
    assert planner["Resource"] == "${%s.Arn}" % stack.function_id("status")
    assert planner["ResultPath"] == "$.items" and graph.states[run_workers]["ItemsPath"] == "$.items"
    assert "States.ArrayRange" not in json.dumps(stack.definition())
    assert graph.reaches(planners[0], run_workers) and run_workers not in graph.reachable(avoiding={planners[0]})


def test_every_lambda_task_retries_transient_errors_with_jittered_backoff(stack):
    lambda_arns = {"${%s.Arn}" % stack.function_id(kind) for kind in ("populate", "worker", "status")}
    tasks = {name: state for name, state in all_states(stack.definition()) if state["Type"] == "Task"}
    assert tasks
    for name, task in tasks.items():
        invoked = task.get("Parameters", {}).get("FunctionName", task["Resource"])
        assert invoked in lambda_arns, f"{name} invokes {invoked}"
        retriers = [retry for retry in task.get("Retry", []) if LAMBDA_TRANSIENT_ERRORS <= set(retry["ErrorEquals"])]
        assert retriers, f"{name} does not retry {sorted(LAMBDA_TRANSIENT_ERRORS)}"
        for retry in retriers:
            assert retry.get("BackoffRate", 2.0) > 1, name
            assert retry.get("JitterStrategy") == "FULL", name
            assert retry.get("MaxAttempts", 3) >= 2, name


def test_a_choice_loops_back_to_another_round(stack):
    graph = graph_of(stack)
    run_workers = the_distributed_map(graph)
    assert loop_choices(graph, run_workers), "no Choice leads back to the Distributed Map"


@DEFAULT_AND_TUNED
def test_rounds_are_counted_and_capped_at_max_rounds(synth, overrides):
    stack = synth(overrides)
    graph = graph_of(stack)
    run_workers = the_distributed_map(graph)
    # The round counter: a Pass on the loop that adds 1 to a field.
    increments = {
        name: key.removesuffix(".$")
        for name in graph.of_type("Pass")
        for key, value in graph.states[name].get("Parameters", {}).items()
        if value == f"States.MathAdd($.{key.removesuffix('.$')}, 1)"
    }
    on_loop = {
        name: counter for name, counter in increments.items() if graph.reaches(run_workers, name) and graph.reaches(name, run_workers)
    }
    assert len(set(on_loop.values())) == 1, f"expected one round counter on the loop, found {on_loop}"
    (counter,) = set(on_loop.values())
    # No way back to the Map skips the increment ...
    for choice in loop_choices(graph, run_workers):
        assert run_workers not in graph.reachable(choice, avoiding=set(on_loop)), f"{choice} reaches the Map without counting a round"
    # ... and, whatever the queue reports, at most maxRounds rounds run.
    assert graph.most_entries(run_workers, counter) == stack.settings.max_rounds


@DEFAULT_AND_TUNED
def test_a_round_without_progress_waits_as_long_as_the_status_says_live_locks_last(synth, overrides):
    stack = synth(overrides)
    graph = graph_of(stack)
    run_workers = the_distributed_map(graph)
    waits = [name for name in graph.of_type("Wait") if graph.reaches(run_workers, name) and graph.reaches(name, run_workers)]
    assert waits, "no round waits for the locks of dead workers to go stale"
    for name in waits:
        # The status function's reading of the live locks' leases, not a constant.
        assert graph.states[name].get("SecondsPath") == "$.status.wait_seconds", graph.states[name]


def test_progress_is_judged_by_groups_finished_not_groups_remaining(stack):
    graph = graph_of(stack)
    run_workers = the_distributed_map(graph)
    progress = [
        rule
        for name in loop_choices(graph, run_workers)
        for rule in graph.states[name]["Choices"]
        if rule.get("Variable") == "$.status.finished" and rule.get("NumericGreaterThanPath") == "$.lastFinished"
    ]
    assert len(progress) == 1, "expected one rule comparing groups finished with the last round's"
    assert graph.reaches(progress[0]["Next"], run_workers)
    # A populate mid-round raises "remaining"; no rule may read a stall from it.
    for name in graph.of_type("Choice"):
        for rule in graph.states[name]["Choices"]:
            assert "lastRemaining" not in str(rule), (name, rule)
    [next_round] = [n for n in graph.of_type("Pass") if "lastFinished.$" in graph.states[n].get("Parameters", {})]
    assert graph.states[next_round]["Parameters"]["lastFinished.$"] == "$.status.finished"


@DEFAULT_AND_TUNED
def test_workers_are_capped_at_max_workers(synth, overrides):
    stack = synth(overrides)
    graph = graph_of(stack)
    run_workers = the_distributed_map(graph)
    max_workers = stack.settings.max_workers
    caps = [
        (name, rule)
        for name in graph.of_type("Choice")
        for rule in graph.states[name]["Choices"]
        if rule.get("Variable", "").endswith(".workers") and rule.get("NumericGreaterThan") == max_workers
    ]
    assert len(caps) == 1, f"expected one check of workers > {max_workers}, found {caps}"
    ((check, rule),) = caps
    cap = graph.states[rule["Next"]]
    assert cap["Type"] == "Pass" and cap["Parameters"]["workers"] == max_workers
    assert graph.reaches(rule["Next"], run_workers)
    # Every path to the Map passes the check.
    assert run_workers not in graph.reachable(avoiding={check})


def test_too_many_failed_groups_fails_the_execution(stack):
    graph = graph_of(stack)
    run_workers = the_distributed_map(graph)
    verdicts = [
        rule["Next"]
        for name in graph.of_type("Choice")
        for rule in graph.states[name]["Choices"]
        if graph.states[rule["Next"]]["Type"] == "Fail"
        and rule.get("Variable", "").endswith(".failed")
        and any(key.startswith("NumericGreaterThan") for key in rule)
    ]
    assert verdicts, "no Choice fails the execution when groups failed"
    for fail in verdicts:
        assert graph.reaches(run_workers, fail), f"{fail} cannot follow a round"
    assert any(graph.states[name]["Type"] == "Succeed" for name in graph.reachable(run_workers)), "a drained queue cannot succeed"
    for fail in verdicts:
        # What an operator runs next, named: not a prefix of the bucket to list by hand.
        assert "s3wq failures" in graph.states[fail]["Cause"] and "failed_flags/" not in graph.states[fail]["Cause"]


def test_groups_handed_back_in_a_round_without_progress_get_another_round_not_a_verdict(stack):
    # A group stopped at a worker's deadline is handed back for a worker with more time: a fresh round.
    graph = graph_of(stack)
    run_workers = the_distributed_map(graph)
    rules = [
        rule
        for name in loop_choices(graph, run_workers)
        for rule in graph.states[name]["Choices"]
        if rule.get("Variable") == "$.status.released" and rule.get("NumericGreaterThan") == 0
    ]
    assert len(rules) == 1 and graph.reaches(rules[0]["Next"], run_workers)


def test_the_log_group_is_a_vended_one(stack):
    # Outside /aws/vendedlogs/, CreateStateMachine adds to the account's CloudWatch Logs resource policy,
    # which fails once that policy nears its 5,120 characters.
    _, machine = stack.state_machine()
    destination = machine["Properties"]["LoggingConfiguration"]["Destinations"][0]["CloudWatchLogsLogGroup"]["LogGroupArn"]
    logical_id = stack.arn(destination).removeprefix("${").removesuffix(".Arn}")
    name = stack.resources[logical_id]["Properties"]["LogGroupName"]
    assert name.startswith("/aws/vendedlogs/states/") and "S3wq" in name


def test_workers_and_failure_tolerance_must_print_as_whole_numbers_before_any_range_is_built(stack):
    graph = graph_of(stack)
    [bad_input] = [name for name in graph.of_type("Fail") if graph.states[name]["Error"] == "BadInput"]
    texts = [n for n in graph.of_type("Pass") if "States.JsonToString($.args.workers)" in str(graph.states[n].get("Parameters", {}))]
    assert len(texts) == 1
    patterns = {
        (rule["Variable"], rule["StringMatches"])
        for name in graph.of_type("Choice")
        for choice in graph.states[name]["Choices"]
        if choice["Next"] == bad_input
        for rule in choice.get("Or", [choice])
        if "StringMatches" in rule
    }
    for name in ("workers", "failureTolerance"):
        assert {(f"$.asText.{name}", p) for p in ("*.*", "*e*", "*E*")} <= patterns
    # No path reaches the Map without the check.
    assert the_distributed_map(graph) not in graph.reachable(avoiding={texts[0]})


def test_a_round_that_finished_nothing_and_left_groups_handed_back_for_a_service_down_ends_failed_naming_it(stack):
    # Another round would meet the same dead service: every worker would hand its group back and stop again.
    graph = graph_of(stack)
    run_workers = the_distributed_map(graph)
    [(choice, rule)] = [
        (name, rule)
        for name in loop_choices(graph, run_workers)
        for rule in graph.states[name]["Choices"]
        if rule.get("Variable") == "$.status.unavailable" and rule.get("NumericGreaterThan") == 0
    ]
    assert not graph.reaches(rule["Next"], run_workers) and run_workers not in graph.reachable(rule["Next"])
    # After the progress rule (a round that finished groups is no spin, whatever it handed back), before the
    # released rule (which would otherwise run another round for these groups).
    rules = graph.states[choice]["Choices"]
    order = {r.get("Variable"): i for i, r in enumerate(rules)}
    assert order["$.status.finished"] < rules.index(rule) < order["$.status.released"]
    # The verdict names it, with the count it read (the Summary, after the input errors are counted).
    summary = graph.states[the_summary(graph)]
    assert graph.reaches(rule["Next"], the_summary(graph))
    assert summary["Parameters"]["unavailable.$"] == "$.status.unavailable"
    [fail] = [name for name in graph.reachable(rule["Next"]) if graph.states[name].get("Error") == "ServiceUnavailable"]
    assert graph.states[fail]["Type"] == "Fail" and "unavailable" in graph.states[fail]["Cause"]
    [verdict] = [r for name in graph.of_type("Choice") for r in graph.states[name]["Choices"] if r["Next"] == fail]
    assert (verdict["Variable"], verdict["NumericGreaterThan"]) == ("$.unavailable", 0)


def test_the_executions_output_carries_the_input_errors_counted_once_before_it(stack):
    """Beside done and failed, the groups done with input errors and those inputs, as `s3wq failures --inputs` lists them."""
    graph = graph_of(stack)
    summary = the_summary(graph)
    [counter] = [name for name in graph.of_type("Task") if graph.states[name].get("Parameters") == {INPUT_ERRORS_EVENT_KEY: True}]
    task = graph.states[counter]
    assert task["Resource"] == "${%s.Arn}" % stack.function_id("status") and task["Next"] == summary
    parameters = graph.states[summary]["Parameters"]
    assert {name: parameters[f"{name}.$"] for name in INPUT_ERROR_COUNTS} == {
        name: f"{task['ResultPath']}.{name}" for name in INPUT_ERROR_COUNTS
    }
    assert {"groups.$", "done.$", "failed.$", "remaining.$", "rounds.$"} <= set(parameters)
    # Every way to the output passes the count (once an execution: never inside the loop of rounds).
    assert summary not in graph.reachable(avoiding={counter})
    assert not graph.reaches(counter, the_distributed_map(graph))

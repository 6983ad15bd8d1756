"""The Standard state machine: a Distributed Map of worker Lambdas in a bounded drain loop.

    Defaults -> ReadInput -> CheckInput -> Init -> CountBefore -+-> NextRound -> RunWorkers -> CountAfter -> MoreRounds?
                                                     |        ^                                     |  |  |
                                                     |        +---------- progress -----------------+  |  |
                                                     |        +-- WaitForLocks <- locks still held ----+  |
                                                     +-> CountInputErrors <- drained / stalled / rounds --+
                                                          -> Summary -> Verdict: Succeed | TooManyFailedGroups | ServiceUnavailable | WorkRemaining

Input ``{"workers": N, "failureTolerance": F}``, both optional. The Map gets
N items ``{"worker_index": i, "workers": N}`` and runs them all at once
(MaxConcurrencyPath). A round that leaves groups behind is followed by another
while it finished groups; when it finished none but live locks are held (a
worker died holding one, or a long group runs elsewhere), the loop first waits
until the status function says the last of them would go stale. A round that
finished nothing and left groups handed back by a processor that raised
ServiceUnavailable ends the execution, failed ServiceUnavailable.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from s3wq.ops.problems import INPUT_ERROR_COUNTS, INPUT_ERRORS_EVENT_KEY
from s3wq.ops.status import STATUS_RESULT_PATH, status_path

from .settings import DeploySettings

# Lambda's own transient errors, retried with exponential backoff and full
# jitter so that hundreds of Map children do not retry in lockstep.
LAMBDA_TRANSIENT_ERRORS = [
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
    "Lambda.ClientExecutionTimeoutException",
]
# Where CountInputErrors puts the status function's input-error counts (problems.input_error_counts), which the Summary reads.
INPUT_ERRORS_RESULT_PATH = "$.inputErrors"
# A worker that hit a storage failure (S3 5xx after the SDK's own retries)
# raises StorageError; the invocation is worth another go.
WORKER_RETRYABLE_ERRORS = ["StorageError"]


def _retry_lambda_errors(task: tasks.LambdaInvoke) -> tasks.LambdaInvoke:
    task.add_retry(
        errors=LAMBDA_TRANSIENT_ERRORS,
        interval=Duration.seconds(2),
        max_attempts=6,
        backoff_rate=2,
        max_delay=Duration.seconds(60),
        jitter_strategy=sfn.JitterType.FULL,
    )
    return task


class WorkerStateMachine(Construct):
    """Exposes ``state_machine`` and its ``log_group``.

    Built in the order of the diagram above, one part per method; each state
    keeps its construct id, so the definition and its logical IDs stay as
    they were when this was one function.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        worker: lambda_.IFunction,
        status: lambda_.IFunction,
        settings: DeploySettings,
        before_rounds: sfn.Parallel | None = None,
    ):
        """``before_rounds``: what the first round waits for (the model endpoint the stack starts, to serve); its failure is no stop."""
        super().__init__(scope, construct_id)
        self._status = status
        self._settings = settings
        defaults, read_input, bad_input, cap_workers, init = self._input_states()
        # [0, 1, ..., workers - 1] from the status function: States.ArrayRange
        # stops at 1,000 items, a Distributed Map runs 10,000 children.
        plan_workers = _retry_lambda_errors(
            tasks.LambdaInvoke(
                self,
                "PlanWorkers",
                lambda_function=status,
                payload=sfn.TaskInput.from_object({"worker_items": sfn.JsonPath.number_at("$.workers")}),
                payload_response_only=True,
                retry_on_service_exceptions=False,
                result_path="$.items",
            )
        )
        count_before = self._count("CountBefore")
        next_round = self._next_round()
        run_workers = self._run_workers(worker)
        count_after = self._count("CountAfter")
        wait_for_locks = sfn.Wait(
            self,
            "WaitForLocks",
            comment="No progress, but live locks are held: wait until the last of them would go stale (status.wait_seconds)",
            time=sfn.WaitTime.seconds_path(status_path("wait_seconds")),
        )
        summary = self._summary()
        self._rounds(next_round, run_workers, count_after, wait_for_locks, summary)
        first_round: sfn.IChainable = next_round
        if before_rounds is not None:
            # Waited for, never required: out of patience, the round runs and its outcome says what the workers met.
            before_rounds.add_catch(next_round, errors=["States.ALL"], result_path=sfn.JsonPath.DISCARD)
            first_round = before_rounds.next(next_round)
        anything_to_do = (
            sfn.Choice(self, "AnythingToDo").when(sfn.Condition.number_equals(status_path("remaining"), 0), summary).otherwise(first_round)
        )
        check_input = self._check_input(bad_input, cap_workers, init)
        init.next(plan_workers).next(count_before).next(anything_to_do)
        definition = defaults.next(read_input).next(check_input)
        self._build(definition)

    def _input_states(self) -> tuple[sfn.Pass, sfn.Pass, sfn.Fail, sfn.Pass, sfn.Pass]:
        """Defaults, ReadInput, BadInput, CapWorkers and Init: the execution input over the defaults, capped, as the loop's state."""
        settings = self._settings
        defaults = sfn.Pass(
            self,
            "Defaults",
            result=sfn.Result.from_object({"workers": settings.effective_default_workers, "failureTolerance": 0}),
            result_path="$.defaults",
        )
        read_input = sfn.Pass(
            self,
            "ReadInput",
            comment="The execution input over the defaults",
            parameters={
                "args": sfn.JsonPath.json_merge(sfn.JsonPath.object_at("$.defaults"), sfn.JsonPath.object_at("$$.Execution.Input"))
            },
        )
        bad_input = sfn.Fail(
            self,
            "BadInput",
            error="BadInput",
            cause=f"'workers' must be a whole number from 1 up (more than maxWorkers, {settings.max_workers}, run {settings.max_workers}) "
            "and 'failureTolerance' a whole number of 0 or more",
        )
        cap_workers = sfn.Pass(
            self,
            "CapWorkers",
            comment=f"At most maxWorkers ({settings.max_workers}) workers",
            parameters={"workers": settings.max_workers, "failureTolerance": sfn.JsonPath.number_at("$.args.failureTolerance")},
            result_path="$.args",
        )
        init = sfn.Pass(
            self,
            "Init",
            parameters={
                "workers": sfn.JsonPath.number_at("$.args.workers"),
                "failureTolerance": sfn.JsonPath.number_at("$.args.failureTolerance"),
                "round": 0,
            },
        )
        return defaults, read_input, bad_input, cap_workers, init

    def _count(self, name: str) -> tasks.LambdaInvoke:
        """Invoke the status function; its counts land in $.status."""
        invoke = tasks.LambdaInvoke(
            self,
            name,
            lambda_function=self._status,
            payload_response_only=True,
            retry_on_service_exceptions=False,
            result_path=STATUS_RESULT_PATH,
        )
        return _retry_lambda_errors(invoke)

    def _next_round(self) -> sfn.Pass:
        return sfn.Pass(
            self,
            "NextRound",
            parameters={
                "workers": sfn.JsonPath.number_at("$.workers"),
                "failureTolerance": sfn.JsonPath.number_at("$.failureTolerance"),
                "items": sfn.JsonPath.list_at("$.items"),
                "round": sfn.JsonPath.math_add(sfn.JsonPath.number_at("$.round"), 1),
                "lastFinished": sfn.JsonPath.number_at(status_path("finished")),
            },
        )

    def _run_workers(self, worker: lambda_.IFunction) -> sfn.DistributedMap:
        """RunWorkers: the Distributed Map of worker invocations, each child ending in WorkerEnded."""
        work = _retry_lambda_errors(
            tasks.LambdaInvoke(
                self,
                "Work",
                lambda_function=worker,
                payload_response_only=True,
                retry_on_service_exceptions=False,
            )
        )
        work.add_retry(
            errors=WORKER_RETRYABLE_ERRORS,
            interval=Duration.seconds(5),
            max_attempts=3,
            backoff_rate=2,
            jitter_strategy=sfn.JitterType.FULL,
        )
        # Each child ends in an empty object, whether its worker reported or
        # failed (a failure's cause can carry a stack trace): the Map's output
        # is at most 3 bytes a child, 30 KB for 10,000, whatever the workers
        # return, under the 256 KiB a state may pass on. A worker's failure
        # leaves its groups to the next round, which the loop judges by the
        # counts; the error stays in the execution history and the worker's log.
        ended = sfn.Pass(self, "WorkerEnded", result=sfn.Result.from_object({}))
        work.add_catch(ended, errors=["States.ALL"], result_path=sfn.JsonPath.DISCARD)
        child = work.next(ended)
        return sfn.DistributedMap(
            self,
            "RunWorkers",
            comment="One worker Lambda per item, all at once",
            items_path="$.items",
            item_selector={"worker_index": sfn.JsonPath.number_at("$$.Map.Item.Value"), "workers": sfn.JsonPath.number_at("$.workers")},
            max_concurrency_path="$.workers",
            # A failed worker leaves its groups to the next round (their locks
            # go stale); the loop below judges the round by what got done. As a
            # count (every item may fail) rather than a percentage of 100: the
            # local cloud's ASL parser takes only a decimal percentage.
            tolerated_failure_count=self._settings.max_workers,
            result_path=sfn.JsonPath.DISCARD,
        ).item_processor(child)

    def _count_input_errors(self) -> tasks.LambdaInvoke:
        """CountInputErrors: once an execution, not each round, as a count of input errors reads every record of them."""
        invoke = tasks.LambdaInvoke(
            self,
            "CountInputErrors",
            lambda_function=self._status,
            payload=sfn.TaskInput.from_object({INPUT_ERRORS_EVENT_KEY: True}),
            payload_response_only=True,
            retry_on_service_exceptions=False,
            result_path=INPUT_ERRORS_RESULT_PATH,
        )
        return _retry_lambda_errors(invoke)

    def _summary(self) -> tasks.LambdaInvoke:
        """CountInputErrors, then the Summary (the execution's output) and the Verdict: Drained, TooManyFailedGroups or WorkRemaining."""
        count_input_errors = self._count_input_errors()
        summary = sfn.Pass(
            self,
            "Summary",
            parameters={
                "groups": sfn.JsonPath.number_at(status_path("groups")),
                "done": sfn.JsonPath.number_at(status_path("done")),
                "failed": sfn.JsonPath.number_at(status_path("failed")),
                # Done groups with inputs their processor could not use, and those inputs (s3wq failures WS --inputs).
                **{name: sfn.JsonPath.number_at(f"{INPUT_ERRORS_RESULT_PATH}.{name}") for name in INPUT_ERROR_COUNTS},
                "remaining": sfn.JsonPath.number_at(status_path("remaining")),
                "unavailable": sfn.JsonPath.number_at(status_path("unavailable")),
                "rounds": sfn.JsonPath.number_at("$.round"),
                "failureTolerance": sfn.JsonPath.number_at("$.failureTolerance"),
            },
        )
        verdict = (
            sfn.Choice(self, "Verdict")
            .when(
                sfn.Condition.number_greater_than_json_path("$.failed", "$.failureTolerance"),
                sfn.Fail(
                    self,
                    "TooManyFailedGroups",
                    error="TooManyFailedGroups",
                    cause="More groups failed than failureTolerance allows; list them with: s3wq failures WORKSPACE (the stack's WorkspaceUri output)",
                ),
            )
            .when(
                sfn.Condition.number_greater_than("$.unavailable", 0),
                sfn.Fail(
                    self,
                    "ServiceUnavailable",
                    error="ServiceUnavailable",
                    cause="A service the processor needs is unavailable: workers handed their groups back unrun (no attempt used) "
                    "and stopped, and a round finished nothing; start the execution again when it is up (the workers' log names it)",
                ),
            )
            .when(
                sfn.Condition.number_greater_than("$.remaining", 0),
                sfn.Fail(
                    self,
                    "WorkRemaining",
                    error="WorkRemaining",
                    cause="Groups remain after the last round made no progress or maxRounds was reached",
                ),
            )
            .otherwise(sfn.Succeed(self, "Drained"))
        )
        count_input_errors.next(summary).next(verdict)
        return count_input_errors

    def _rounds(
        self,
        next_round: sfn.Pass,
        run_workers: sfn.DistributedMap,
        count_after: tasks.LambdaInvoke,
        wait_for_locks: sfn.Wait,
        summary: tasks.LambdaInvoke,
    ) -> None:
        """The loop: NextRound -> RunWorkers -> CountAfter -> MoreRounds, which goes round again, waits for locks, or sums up."""
        more_rounds = (
            sfn.Choice(self, "MoreRounds")
            .when(sfn.Condition.number_equals(status_path("remaining"), 0), summary)
            .when(sfn.Condition.number_greater_than_equals("$.round", self._settings.max_rounds), summary)
            # Progress is groups finished (done or failed), not groups remaining:
            # a populate that adds groups mid-round must not look like a stall.
            .when(sfn.Condition.number_greater_than_json_path(status_path("finished"), "$.lastFinished"), next_round)
            # A round that finished nothing and left groups handed back by a processor that raised ServiceUnavailable:
            # another round would only meet the same dead service, so the execution ends (Verdict: ServiceUnavailable)
            # rather than wait and retry. How long an outage lasts (a model server to restart, a quota to raise) is the
            # operator's to know, not the loop's to guess, and those groups cost nothing to leave: pending, no attempt
            # used, claimable at once by the next execution. Checked after progress: a round that finished groups is no
            # spin (the service answered during it, and progress is bounded by the queue), and an old hand-back that no
            # worker reached this round does not end an execution that works.
            .when(sfn.Condition.number_greater_than(status_path("unavailable"), 0), summary)
            # Groups handed back (out of time: for a worker with more; a signal) need a fresh round, not a wait.
            .when(sfn.Condition.number_greater_than(status_path("released"), 0), next_round)
            .when(sfn.Condition.number_greater_than(status_path("locked"), 0), wait_for_locks.next(next_round))
            .otherwise(summary)
        )
        next_round.next(run_workers).next(count_after).next(more_rounds)

    def _check_input(self, bad_input: sfn.Fail, cap_workers: sfn.Pass, init: sfn.Pass) -> sfn.Choice:
        """CheckInput -> NumbersAsText -> WholeNumbers: numbers, in range, whole; too many workers are capped, not refused."""
        # ASL has no integer test, but a whole number prints without a point or
        # an exponent ("3"; 2.5 prints "2.5", 3.0 "3.0", 1e3 "1000.0"), and
        # States.ArrayRange fails on anything else with an intrinsic-function
        # error instead of BadInput.
        as_text = sfn.Pass(
            self,
            "NumbersAsText",
            parameters={
                "workers": sfn.JsonPath.json_to_string(sfn.JsonPath.number_at("$.args.workers")),
                "failureTolerance": sfn.JsonPath.json_to_string(sfn.JsonPath.number_at("$.args.failureTolerance")),
            },
            result_path="$.asText",
        )
        fraction = [
            sfn.Condition.string_matches(f"$.asText.{name}", pattern)
            for name in ("workers", "failureTolerance")
            for pattern in ("*.*", "*e*", "*E*")
        ]
        whole_numbers = (
            sfn.Choice(self, "WholeNumbers")
            .when(sfn.Condition.or_(*fraction), bad_input)
            .when(sfn.Condition.number_greater_than("$.args.workers", self._settings.max_workers), cap_workers.next(init))
            .otherwise(init)
        )
        return (
            sfn.Choice(self, "CheckInput")
            .when(
                sfn.Condition.or_(
                    sfn.Condition.not_(sfn.Condition.is_numeric("$.args.workers")),
                    sfn.Condition.not_(sfn.Condition.is_numeric("$.args.failureTolerance")),
                    sfn.Condition.number_less_than("$.args.workers", 1),
                    sfn.Condition.number_less_than("$.args.failureTolerance", 0),
                ),
                bad_input,
            )
            .otherwise(as_text.next(whole_numbers))
        )

    def _build(self, definition: sfn.IChainable) -> None:
        """The log group and the state machine of ``definition``."""
        # Under /aws/vendedlogs/: CloudWatch Logs then needs no resource-policy
        # entry per log group, and an account whose policy is near its 5,120
        # characters cannot make CreateStateMachine fail (and the stack roll back).
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=f"/aws/vendedlogs/states/{Stack.of(self).stack_name}-drain-loop",
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_type=sfn.StateMachineType.STANDARD,
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            logs=sfn.LogOptions(destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=True),
            tracing_enabled=True,
            comment="s3wq: run worker Lambdas until the queue is drained",
        )

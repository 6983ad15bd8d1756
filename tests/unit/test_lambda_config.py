"""LambdaConfig.from_env: the defaults, every value parsed, and each bad setting refused with its variable's name."""

from __future__ import annotations

import dataclasses

import pytest

from s3wq import config
from s3wq.config import (
    ENV_AUTO_START,
    ENV_CHECK_INPUTS,
    ENV_FOREIGN_LOCK_TIMEOUT,
    ENV_GROUP_SIZE,
    ENV_LEASE,
    ENV_MAX_ATTEMPTS,
    ENV_PROCESSOR,
    ENV_STATE_MACHINE_ARN,
    ENV_WORKERS,
    ENV_WORKSPACE,
    LambdaConfig,
)
from s3wq.errors import ConfigError

WORKSPACE = "s3://s3wq-data/ws"
STATE_MACHINE_ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:s3wq-drain"


def test_only_the_workspace_is_required_and_everything_else_has_its_one_default():
    parsed = LambdaConfig.from_env({ENV_WORKSPACE: WORKSPACE})

    assert parsed == LambdaConfig(
        workspace=WORKSPACE,
        lease=config.DEFAULT_TIME_LIMIT_SECONDS,
        foreign_lock_timeout=config.FOREIGN_LOCK_TIMEOUT_SECONDS,
        max_attempts=config.DEFAULT_MAX_ATTEMPTS,
        group_size=config.DEFAULT_GROUP_SIZE,
        processor=config.DEFAULT_PROCESSOR,
        state_machine_arn=None,
        auto_start=True,
        workers=config.DEFAULT_WORKERS,
    )
    # The Lambda maximum, and the built-in processor the Lambda ships for.
    assert (parsed.lease, parsed.processor) == (900.0, "text")


def test_empty_values_mean_the_default():
    names = [ENV_LEASE, ENV_FOREIGN_LOCK_TIMEOUT, ENV_MAX_ATTEMPTS, ENV_GROUP_SIZE, ENV_PROCESSOR, ENV_STATE_MACHINE_ARN, ENV_WORKERS]

    parsed = LambdaConfig.from_env({ENV_WORKSPACE: WORKSPACE, **dict.fromkeys(names, "")})

    assert parsed == LambdaConfig.from_env({ENV_WORKSPACE: WORKSPACE})


def test_an_empty_auto_start_means_the_default():
    # As for every other variable: an empty value is an unset one.
    assert LambdaConfig.from_env({ENV_WORKSPACE: WORKSPACE, ENV_AUTO_START: ""}).auto_start is True


def test_every_variable_is_parsed_to_its_type():
    parsed = LambdaConfig.from_env(
        {
            ENV_WORKSPACE: WORKSPACE,
            ENV_LEASE: "1800.5",
            ENV_FOREIGN_LOCK_TIMEOUT: "60",
            ENV_MAX_ATTEMPTS: "5",
            ENV_GROUP_SIZE: "25",
            ENV_PROCESSOR: "mypkg.ocr:process",
            ENV_STATE_MACHINE_ARN: STATE_MACHINE_ARN,
            ENV_AUTO_START: " Off ",
            ENV_CHECK_INPUTS: "no",
            ENV_WORKERS: "50",
        }
    )

    assert parsed == LambdaConfig(
        workspace=WORKSPACE,
        lease=1800.5,
        foreign_lock_timeout=60.0,
        max_attempts=5,
        group_size=25,
        processor="mypkg.ocr:process",
        state_machine_arn=STATE_MACHINE_ARN,
        auto_start=False,
        check_inputs=False,
        workers=50,
    )
    assert all(type(v) is int for v in (parsed.max_attempts, parsed.group_size, parsed.workers))


@pytest.mark.parametrize("raw", ["1", "true", "TRUE", "yes", " on "])
def test_auto_start_accepts_the_usual_spellings_of_true(raw):
    assert LambdaConfig.from_env({ENV_WORKSPACE: WORKSPACE, ENV_AUTO_START: raw}).auto_start is True


@pytest.mark.parametrize("raw", ["0", "false", "False", "no", "off"])
def test_auto_start_accepts_the_usual_spellings_of_false(raw):
    assert LambdaConfig.from_env({ENV_WORKSPACE: WORKSPACE, ENV_AUTO_START: raw}).auto_start is False


def test_check_inputs_is_on_unless_switched_off_and_refuses_other_words():
    assert LambdaConfig.from_env({ENV_WORKSPACE: WORKSPACE}).check_inputs is True
    with pytest.raises(ConfigError, match="S3WQ_CHECK_INPUTS must be true or false, got 'maybe'"):
        LambdaConfig.from_env({ENV_WORKSPACE: WORKSPACE, ENV_CHECK_INPUTS: "maybe"})


def test_a_local_directory_is_a_workspace_too():
    assert LambdaConfig.from_env({ENV_WORKSPACE: "data/ws"}).workspace == "data/ws"


@pytest.mark.parametrize(
    "environ, variable",
    [
        pytest.param({ENV_WORKSPACE: None}, ENV_WORKSPACE, id="workspace-missing"),
        pytest.param({ENV_WORKSPACE: ""}, ENV_WORKSPACE, id="workspace-empty"),
        pytest.param({ENV_WORKSPACE: "gs://s3wq-data/ws"}, ENV_WORKSPACE, id="workspace-gs"),
        pytest.param({ENV_WORKSPACE: "s3://S3WQ_Data/ws"}, ENV_WORKSPACE, id="workspace-bad-bucket"),
        pytest.param({ENV_WORKSPACE: "s3://ab/ws"}, ENV_WORKSPACE, id="workspace-short-bucket"),
        pytest.param({ENV_MAX_ATTEMPTS: "three"}, ENV_MAX_ATTEMPTS, id="max-attempts-word"),
        pytest.param({ENV_MAX_ATTEMPTS: "2.5"}, ENV_MAX_ATTEMPTS, id="max-attempts-fraction"),
        pytest.param({ENV_MAX_ATTEMPTS: "0"}, ENV_MAX_ATTEMPTS, id="max-attempts-zero"),
        pytest.param({ENV_GROUP_SIZE: "0"}, ENV_GROUP_SIZE, id="group-size-zero"),
        pytest.param({ENV_GROUP_SIZE: "-4"}, ENV_GROUP_SIZE, id="group-size-negative"),
        pytest.param({ENV_LEASE: "abc"}, ENV_LEASE, id="lease-word"),
        pytest.param({ENV_LEASE: "0"}, ENV_LEASE, id="lease-zero"),
        pytest.param({ENV_LEASE: "50000"}, ENV_LEASE, id="lease-over-12-hours"),
        pytest.param({ENV_FOREIGN_LOCK_TIMEOUT: "-1"}, ENV_FOREIGN_LOCK_TIMEOUT, id="foreign-lock-timeout-negative"),
        pytest.param({ENV_AUTO_START: "maybe"}, ENV_AUTO_START, id="auto-start-maybe"),
        pytest.param({ENV_STATE_MACHINE_ARN: "s3wq-drain"}, ENV_STATE_MACHINE_ARN, id="arn-bare-name"),
        pytest.param(
            {ENV_STATE_MACHINE_ARN: "arn:aws:lambda:us-east-1:123456789012:function:s3wq-worker"},
            ENV_STATE_MACHINE_ARN,
            id="arn-of-a-lambda",
        ),
        pytest.param({ENV_WORKERS: "0"}, ENV_WORKERS, id="workers-zero"),
    ],
)
def test_a_bad_setting_raises_config_error_naming_the_variable(environ, variable):
    # None removes the variable.
    full = {name: value for name, value in {ENV_WORKSPACE: WORKSPACE, **environ}.items() if value is not None}

    with pytest.raises(ConfigError) as raised:
        LambdaConfig.from_env(full)

    assert variable in str(raised.value)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_lock_timeout_that_is_not_a_number_of_seconds_is_refused_at_start(value):
    with pytest.raises(ConfigError) as raised:
        LambdaConfig.from_env({ENV_WORKSPACE: WORKSPACE, ENV_LEASE: value})

    assert ENV_LEASE in str(raised.value)


def test_the_config_is_frozen():
    parsed = LambdaConfig.from_env({ENV_WORKSPACE: WORKSPACE})

    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.group_size = 1  # type: ignore[misc]

    assert parsed.group_size == config.DEFAULT_GROUP_SIZE


@pytest.mark.parametrize("raw, seconds", [(None, None), ("", None), ("30", 30.0), ("0.5", 0.5), ("900", 900.0)])
def test_the_group_timeout_is_read_from_its_variable(raw, seconds):
    environ = {ENV_WORKSPACE: WORKSPACE} | ({} if raw is None else {config.ENV_GROUP_TIMEOUT: raw})
    assert LambdaConfig.from_env(environ).group_timeout == seconds


@pytest.mark.parametrize("raw", ["0", "-1", "0.1", "901", "nan", "inf", "1e999", "soon"])
def test_a_bad_group_timeout_names_its_variable(raw):
    with pytest.raises(ConfigError, match=config.ENV_GROUP_TIMEOUT):
        LambdaConfig.from_env({ENV_WORKSPACE: WORKSPACE, config.ENV_GROUP_TIMEOUT: raw})


@pytest.mark.parametrize(
    "settings, problem",
    [
        (dict(group_timeout=0.0), "group timeout must be a positive number"),
        (dict(group_timeout=float("nan")), "group timeout must be a positive number"),
        (dict(group_timeout=0.2), "group timeout must be at least 0.5 s"),
        (dict(time_limit=60.0, group_timeout=60.0), "group timeout of 60 s is longer than any run can last: at most 57 s"),
        (dict(time_limit=60.0, safety_margin=0.0, group_timeout=60.5), "at most 60 s"),
    ],
)
def test_worker_settings_refuse_a_group_timeout_that_could_never_act(settings, problem):
    with pytest.raises(ConfigError, match=problem):
        config.WorkerSettings(**settings)


def test_a_run_is_given_the_shorter_of_the_worker_time_and_the_group_timeout():
    assert config.WorkerSettings(time_limit=60.0, group_timeout=5.0).run_budget(30.0) == 5.0
    assert config.WorkerSettings(time_limit=60.0, group_timeout=5.0).run_budget(2.0) == 2.0
    assert config.WorkerSettings(time_limit=60.0).run_budget(30.0) == 30.0


@pytest.mark.parametrize(
    "raw, cap", [(None, config.DEFAULT_MAX_INPUT_BYTES), ("", config.DEFAULT_MAX_INPUT_BYTES), ("1", 1), ("1000000", 10**6)]
)
def test_the_input_size_cap_is_read_from_its_variable_and_reaches_the_input_policy(raw, cap):
    environ = {ENV_WORKSPACE: WORKSPACE} | ({} if raw is None else {config.ENV_MAX_INPUT_BYTES: raw})
    parsed = LambdaConfig.from_env(environ)
    assert parsed.max_input_bytes == cap
    # What the processor host is given: read_input refuses past it.
    assert parsed.input_policy.max_bytes == cap


@pytest.mark.parametrize("raw", ["0", "-1", "1.5", "64M", "1e6", "nan"])
def test_a_bad_input_size_cap_names_its_variable(raw):
    with pytest.raises(ConfigError, match=config.ENV_MAX_INPUT_BYTES):
        LambdaConfig.from_env({ENV_WORKSPACE: WORKSPACE, config.ENV_MAX_INPUT_BYTES: raw})

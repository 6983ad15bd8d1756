"""Settings, key building and workspace opening: the places untrusted input meets the store."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from s3wq.config import (
    DEFAULT_LEASE_SECONDS,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_TIME_LIMIT_SECONDS,
    FOREIGN_LOCK_TIMEOUT_SECONDS,
    MIN_LEASE_SECONDS,
    WorkerSettings,
    default_safety_margin,
)
from s3wq.errors import BadGroupHash, BadKey, BadWorkspace, ConfigError, ProcessorNotFound, StorageError
from s3wq.processors import BUILTIN_PROCESSORS, load_processor, noop, text
from s3wq.store import LocalBackend, layout, open_backend

HEX = "0123456789abcdef"
VALID = "0123456789abcdef0123456789abcdef01234567"
KEY_BUILDERS = [layout.lock_key, layout.done_key, layout.failed_key, layout.result_key, layout.segment_key]

# --- WorkerSettings -----------------------------------------------------------------------------------


def test_settings_default_lease_is_the_time_limit_up_to_five_minutes():
    default = WorkerSettings()
    assert (default.time_limit, default.max_attempts) == (DEFAULT_TIME_LIMIT_SECONDS, DEFAULT_MAX_ATTEMPTS)
    assert default.effective_lease == DEFAULT_LEASE_SECONDS == 300
    assert WorkerSettings(time_limit=120).effective_lease == 120
    assert WorkerSettings(time_limit=0.8).effective_lease == MIN_LEASE_SECONDS
    assert WorkerSettings(time_limit=120, lease=3600).effective_lease == 3600
    assert default.foreign_lock_timeout == FOREIGN_LOCK_TIMEOUT_SECONDS == 1800


@given(st.floats(min_value=0.75, max_value=1e6))
def test_settings_default_safety_margin_is_bounded(time_limit):
    margin = WorkerSettings(time_limit=time_limit).effective_safety_margin
    assert margin == default_safety_margin(time_limit)
    assert 0.2 <= margin <= 10.0


@pytest.mark.parametrize(
    "kwargs, mentions",
    [
        ({"time_limit": 0}, "time limit"),
        ({"time_limit": -5}, "time limit"),
        ({"time_limit": float("nan")}, "time limit"),
        ({"time_limit": float("inf")}, "time limit"),
        ({"lease": 0}, "lease"),
        ({"lease": -1}, "lease"),
        ({"lease": 0.5}, "lease"),
        ({"lease": 13 * 3600}, "lease"),
        ({"lease": float("inf")}, "lease"),
        ({"foreign_lock_timeout": 0}, "foreign lock timeout"),
        ({"time_limit": 60, "safety_margin": 60}, "leaves no time"),
        ({"time_limit": 0.5}, "leaves no time"),
        ({"retry_backoff": -1}, "retry backoff"),
        ({"breaker_groups": -1}, "breaker"),
        ({"max_attempts": 0}, "max attempts"),
        ({"max_attempts": -3}, "max attempts"),
        ({"safety_margin": -0.1}, "safety margin"),
    ],
)
def test_settings_reject_invalid_values(kwargs, mentions):
    with pytest.raises(ConfigError, match=mentions):
        WorkerSettings(**kwargs)


def test_settings_accept_zero_safety_margin():
    assert WorkerSettings(time_limit=10, safety_margin=0).effective_safety_margin == 0


# --- group hashes and keys ----------------------------------------------------------------------------


def is_hash(value: str) -> bool:
    return re.fullmatch(r"[0-9a-f]{40}", value) is not None


# Strings that are nearly hashes are where a checker goes wrong: draw them on purpose.
near_hashes = st.one_of(
    st.text(),
    st.text(alphabet=HEX + "ABCDEFgx./\\ \x00", min_size=38, max_size=42),
    st.tuples(st.text(max_size=3), st.text(alphabet=HEX, min_size=40, max_size=40), st.text(max_size=3)).map("".join),
    st.text(alphabet=HEX, min_size=40, max_size=40).map(str.upper),
)


@given(near_hashes.filter(lambda s: not is_hash(s) and not (s.endswith("\n") and is_hash(s[:-1]))))
@example("")
@example(VALID[:-1])
@example(VALID + "0")
@example(VALID.upper())
@example("../" + VALID[3:])
@example("../../etc/passwd")
@example(VALID[:20] + "/" + VALID[21:])
@example(" " + VALID[1:])
def test_check_hash_rejects_everything_but_40_lowercase_hex(value):
    with pytest.raises(BadGroupHash):
        layout.check_hash(value)
    for build in KEY_BUILDERS:
        with pytest.raises(BadGroupHash):
            build(value)


@given(st.text(alphabet=HEX, min_size=40, max_size=40))
def test_check_hash_accepts_40_lowercase_hex(value):
    assert layout.check_hash(value) == value
    assert layout.lock_key(value) == f"worker_locks/worker_{value}.lock"
    assert layout.done_key(value) == f"done_flags/done_{value}.flag"
    assert layout.hash_from_key(layout.lock_key(value), layout.LOCKS_PREFIX, layout.LOCK_SUFFIX) == value


@pytest.mark.parametrize("value", [None, 12345, b"0" * 40])
def test_check_hash_rejects_non_strings(value):
    with pytest.raises(BadGroupHash):
        layout.check_hash(value)


def test_check_hash_rejects_hash_with_trailing_newline():
    bad = VALID + "\n"
    with pytest.raises(BadGroupHash):
        layout.check_hash(bad)
    for build in KEY_BUILDERS:
        with pytest.raises(BadGroupHash):
            build(bad)
    assert layout.hash_from_key(f"done_flags/done_{bad}.flag", layout.DONE_PREFIX, layout.DONE_SUFFIX) is None


@pytest.mark.parametrize(
    "key",
    [
        "worker_locks/worker_" + VALID[:-1] + ".lock",
        "worker_locks/worker_" + VALID.upper() + ".lock",
        "worker_locks/worker_" + VALID + ".lock.bak",
        "worker_locks/other_" + VALID + ".lock",
        "done_flags/done_" + VALID + ".flag",
    ],
)
def test_hash_from_key_ignores_foreign_objects(key):
    assert layout.hash_from_key(key, layout.LOCKS_PREFIX, layout.LOCK_SUFFIX) is None


# --- LocalBackend keys --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    ["", "/etc/passwd", "../outside", "a/../../outside", "a/..", "..", ".", "a/./b", "a//b", "a/", "/", "done_flags/\x00x"],
)
def test_local_backend_refuses_unsafe_keys(tmp_path, key):
    backend = LocalBackend(tmp_path / "ws")
    for attempt in (
        lambda: backend.write(key, b"x"),
        lambda: backend.create(key, b"x"),
        lambda: backend.replace(key, b"x", '"etag"'),
        lambda: backend.delete(key),
        lambda: backend.read(key),
        lambda: backend.exists(key),
    ):
        with pytest.raises(BadKey):
            attempt()
    assert list(tmp_path.iterdir()) == []


def test_local_backend_refuses_key_through_symlink_out_of_root(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "ws"
    root.mkdir()
    (root / "results").symlink_to(outside)
    backend = LocalBackend(root)

    with pytest.raises(BadKey):
        backend.write("results/output.jsonl", b"x")
    assert list(outside.iterdir()) == []


@settings(max_examples=150)
@given(st.lists(st.sampled_from(["a", "b", "/", ".", "..", "\\", "~", " ", "\x00", "é"]), max_size=12).map("".join))
@example("../x")
@example("a/../../x")
def test_local_backend_never_writes_outside_root(key):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        backend = LocalBackend(root)
        try:
            backend.write(key, b"payload")
        except (BadKey, StorageError):
            pass
        else:
            assert backend.read(key).body == b"payload"
            assert (root / key).resolve().is_relative_to(root.resolve())
        assert [p.name for p in Path(tmp).iterdir()] in ([], ["ws"])


# --- opening a workspace ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "uri",
    ["gs://x/y", "http://bucket/ws", "s3://", "s3:///ws", "s3://Bad_Bucket/x", "s3://ab/x", "s3://bucket/../ws", ""],
)
def test_open_backend_rejects_bad_workspace(uri):
    with pytest.raises(BadWorkspace):
        open_backend(uri)


def test_open_backend_local_directory_and_file_uri(tmp_path):
    assert isinstance(open_backend(str(tmp_path / "ws")), LocalBackend)
    backend = open_backend(f"file://{tmp_path / 'ws'}")
    assert isinstance(backend, LocalBackend)
    assert backend.root == (tmp_path / "ws").resolve()


# --- processors ---------------------------------------------------------------------------------------


def test_load_processor_builtins():
    assert load_processor("noop") is noop
    assert load_processor("text") is text
    assert set(BUILTIN_PROCESSORS) == {"noop", "text"}


def test_load_processor_module_function():
    import os.path

    assert load_processor("os.path:join") is os.path.join
    assert load_processor("s3wq.processors:noop") is noop


@pytest.mark.parametrize(
    "spec, mentions",
    [
        ("", "neither built in"),
        ("nope", "neither built in"),
        ("os.path.join", "neither built in"),
        ("a:b:c", "neither built in"),
        (":join", "neither built in"),
        ("os.path:", "neither built in"),
        ("os; rm -rf /:x", "neither built in"),
        ("no_such_module_for_s3wq_tests:fn", "not found .*run from the folder that holds it"),
        ("os.path:no_such_function", "no function"),
        ("os:sep", "no function"),
    ],
)
def test_load_processor_rejects_bad_specs(spec, mentions):
    with pytest.raises(ProcessorNotFound, match=mentions):
        load_processor(spec)

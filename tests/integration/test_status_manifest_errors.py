"""`s3wq status` and a manifest the deployed populate rejected: an answer, never a silent wait.

The records are written by the populate Lambda's own code (its handler,
called as Lambda calls it, against the local S3 server); `status` runs as a
user runs it, in a child process.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time

import pytest
from helpers.lambda_context import LambdaContext
from support import run_cli

from s3wq.config import ENV_AUTO_START, ENV_GROUP_SIZE
from s3wq.handlers import populate

from .test_handlers import manifest_event, objects, put_manifest

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

# Generous: the guarantee is that the watch ends, not how fast on a loaded machine.
ENDS_WITHIN_SECONDS = 60


def all_bad_manifest(s3_client, bucket: str, key: str = "ws/manifests/allbad.txt") -> tuple[str, str]:
    """Upload a manifest with no usable line and let the populate handler read it; (manifest URI, record URI)."""
    lines = ["ftp://nope/x", "gs://other/y.pdf", f"s3://{bucket}/inputs/never-uploaded.txt", "http://example.com/z.pdf"]
    put_manifest(s3_client, bucket, key, lines, inputs_exist=False)
    [entry] = populate.handler(manifest_event(bucket, key), LambdaContext(30))["manifests"]
    assert entry["added_paths"] == 0
    name = key.split("/manifests/", 1)[1]
    return f"s3://{bucket}/{key}", f"s3://{bucket}/ws/manifest_errors/{name}.json"


class Output:
    """A child's stdout and stderr, read line by line on threads, so a test can wait for a line with a deadline."""

    def __init__(self, process: subprocess.Popen):
        self.process = process
        self.lines: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        self.seen: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self.readers = [threading.Thread(target=self._read, args=(n, getattr(process, n)), daemon=True) for n in self.seen]
        for reader in self.readers:
            reader.start()

    def _read(self, name: str, stream) -> None:
        for line in stream:
            self.lines.put((name, line.rstrip("\n")))

    def _take(self, timeout: float) -> bool:
        try:
            name, line = self.lines.get(timeout=timeout)
        except queue.Empty:
            return False
        self.seen[name].append(line)
        return True

    def wait_for(self, name: str, predicate, timeout: float = ENDS_WITHIN_SECONDS) -> str:
        deadline = time.monotonic() + timeout
        checked = 0
        while True:
            for line in self.seen[name][checked:]:
                if predicate(line):
                    return line
            checked = len(self.seen[name])
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no such line on {name} within {timeout} s; seen: {self.seen}")
            self._take(left)

    def rest(self) -> dict[str, list[str]]:
        """Everything the child printed, once it has exited (it must, within ENDS_WITHIN_SECONDS)."""
        self.process.wait(timeout=ENDS_WITHIN_SECONDS)
        for reader in self.readers:
            reader.join(timeout=ENDS_WITHIN_SECONDS)
        while self._take(0):
            pass
        return self.seen


def watch(*args: str) -> tuple[subprocess.Popen, Output]:
    process = subprocess.Popen(
        [sys.executable, "-m", "s3wq", "status", *args, "--watch", "--interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return process, Output(process)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()


def assert_names_the_record(text: str, manifest: str, record: str) -> None:
    assert f"manifest {manifest}: 4 bad lines skipped, listed in {record}" in text
    assert "  line 1: " in text and "ftp" in text.split("  line 1: ", 1)[1].splitlines()[0]
    assert "  line 2: " in text and "  line 3: " in text
    assert "... and 1 more bad line in the record" in text


def test_status_of_a_workspace_whose_manifest_had_no_good_line_exits_1_naming_the_record(lambda_env, s3_client, bucket, s3_workspace):
    lambda_env(**{ENV_AUTO_START: "false"})
    manifest, record = all_bad_manifest(s3_client, bucket)
    before = objects(s3_client, bucket)

    shown = run_cli("status", s3_workspace)
    as_json = run_cli("status", s3_workspace, "--json")

    assert shown.returncode == 1, shown.stderr
    assert "run s3wq populate first" not in shown.stderr
    assert shown.stderr.startswith(f"s3wq: failed: no index at {s3_workspace}: populate indexed nothing")
    assert_names_the_record(shown.stderr, manifest, record)
    assert as_json.returncode == 1, as_json.stderr
    doc = json.loads(as_json.stdout)
    assert (doc["indexed"], doc["manifests_with_bad_lines"]) == (False, 1)
    [entry] = doc["manifest_errors"]
    assert (entry["manifest"], entry["record"], entry["bad_lines"]) == (manifest, record, 4)
    assert [b["line"] for b in entry["first_bad_lines"]] == [1, 2, 3]
    assert objects(s3_client, bucket) == before  # status changes nothing


def test_a_workspace_with_neither_index_nor_record_still_says_run_populate_first(s3_workspace, s3_client, bucket):
    s3_client.put_object(Bucket=bucket, Key="ws/manifest_errors/notes.txt", Body=b"not a record")  # foreign: not .json

    shown = run_cli("status", s3_workspace)

    assert shown.returncode == 2
    assert "run s3wq populate first" in shown.stderr


def test_watch_wait_for_index_ends_at_once_with_exit_1_when_the_record_is_already_there(lambda_env, s3_client, bucket, s3_workspace):
    lambda_env(**{ENV_AUTO_START: "false"})
    manifest, record = all_bad_manifest(s3_client, bucket)

    process, output = watch(s3_workspace, "--wait-for-index")
    try:
        seen = output.rest()
    finally:
        stop(process)

    assert process.returncode == 1, seen
    assert_names_the_record("\n".join(seen["stderr"]), manifest, record)


def test_watch_wait_for_index_stops_with_exit_1_when_the_record_appears_after_it_started(lambda_env, s3_client, bucket, s3_workspace):
    lambda_env(**{ENV_AUTO_START: "false"})
    process, output = watch(s3_workspace, "--wait-for-index", "--json")
    try:
        output.wait_for("stderr", lambda line: "waiting for an index" in line)
        manifest, record = all_bad_manifest(s3_client, bucket)
        seen = output.rest()
    finally:
        stop(process)

    assert process.returncode == 1, seen
    assert_names_the_record("\n".join(seen["stderr"]), manifest, record)
    last = json.loads(seen["stdout"][-1])
    assert (last["indexed"], [m["record"] for m in last["manifest_errors"]]) == (False, [record])


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_watch_following_a_run_shows_a_record_as_it_appears(lambda_env, s3_client, bucket, s3_workspace, as_json):
    lambda_env(**{ENV_AUTO_START: "false", ENV_GROUP_SIZE: 1})
    put_manifest(s3_client, bucket, "ws/manifests/good.txt", [f"s3://{bucket}/inputs/a.pdf", f"s3://{bucket}/inputs/b.pdf"])
    populate.handler(manifest_event(bucket, "ws/manifests/good.txt"), LambdaContext(30))
    process, output = watch(s3_workspace, *(["--json"] if as_json else []))
    try:
        if as_json:
            first = json.loads(output.wait_for("stdout", lambda line: line.startswith("{")))
            assert (first["remaining"], first["manifests_with_bad_lines"], first["manifest_errors"]) == (2, 0, [])
        else:
            output.wait_for("stdout", lambda line: "done 0/2" in line)

        # A second manifest, one good line and one bad, while the watch runs: nothing has been worked yet.
        key = "ws/manifests/second.txt"
        put_manifest(s3_client, bucket, key, [f"s3://{bucket}/inputs/c.pdf", "ftp://nope/x"])
        populate.handler(manifest_event(bucket, key), LambdaContext(30))
        record = f"s3://{bucket}/ws/manifest_errors/second.txt.json"
        if as_json:
            shown = json.loads(output.wait_for("stdout", lambda line: record in line))
            assert (shown["remaining"], shown["manifests_with_bad_lines"]) == (3, 1)
            assert [(m["record"], m["bad_lines"], [b["line"] for b in m["first_bad_lines"]]) for m in shown["manifest_errors"]] == [
                (record, 1, [2])
            ]
        else:
            output.wait_for("stdout", lambda line: line == f"manifest s3://{bucket}/{key}: 1 bad line skipped, listed in {record}")
            output.wait_for("stdout", lambda line: line.startswith("  line 2: ") and "ftp" in line)

        assert run_cli("work", s3_workspace, "--processor", "noop").returncode == 0
        seen = output.rest()
    finally:
        stop(process)

    assert process.returncode == 0, seen
    if not as_json:
        assert "groups=3  paths=3  done=3  failed=0  locked=0  pending=0  remaining=0" in seen["stdout"]


def test_status_of_a_populated_workspace_shows_the_first_bad_lines_of_each_record(lambda_env, s3_client, bucket, s3_workspace):
    lambda_env(**{ENV_AUTO_START: "false"})
    key = "ws/manifests/mixed.txt"
    put_manifest(s3_client, bucket, key, [f"s3://{bucket}/inputs/a.pdf", "ftp://nope/x", f"s3://{bucket}/inputs/b.pdf"])
    populate.handler(manifest_event(bucket, key), LambdaContext(30))

    shown = run_cli("status", s3_workspace)

    assert shown.returncode == 0, shown.stderr
    record = f"s3://{bucket}/ws/manifest_errors/mixed.txt.json"
    lines = shown.stdout.splitlines()
    at = lines.index(f"manifest s3://{bucket}/{key}: 1 bad line skipped, listed in {record}")
    assert lines[at + 1].startswith("  line 2: ") and "ftp" in lines[at + 1]

"""The input policy: what populate may index and a processor may read, deployed and on the command line.

Deployed, only s3:// inputs in the configured input locations (the stack
names the workspace bucket there when it created it); a processor's ``ctx.read_input`` refuses anything else as an input
error, whatever the index names, and reads nothing.
"""

from __future__ import annotations

import io
import json
import os
import threading
from pathlib import Path

import pytest

from s3wq.config import ENV_INPUT_LOCATIONS, ENV_WORKSPACE, LambdaConfig
from s3wq.errors import BadManifestLines, BadSource, ConfigError, InputNotFound, InputRefused, InputTooLarge
from s3wq.index.sources import SourceExpander
from s3wq.inputs import ANYTHING, InputLocation, InputPolicy, parse_locations, policy_from_json, policy_to_json
from s3wq.model import Group
from s3wq.processors import ProcessorContext, text
from s3wq.store import LocalBackend, layout

WORKSPACE = "s3://ws-bucket/s3wq"
# As the stack writes them for a bucket it created, with inputBuckets naming it and two others.
LOCATIONS = "s3://ws-bucket,s3://in-bucket/scans, archive-bucket"
DEPLOYED = LambdaConfig.from_env({ENV_WORKSPACE: WORKSPACE, ENV_INPUT_LOCATIONS: LOCATIONS}).input_policy

REFUSED = {
    "/etc/passwd": "is not an s3:// URI",
    "/etc/hostname": "is not an s3:// URI",
    "/proc/self/environ": "is not an s3:// URI",
    "../../etc/passwd": "is not an s3:// URI",
    "relative/file.txt": "is not an s3:// URI",
    "/proc/self/*": "is not an s3:// URI",
    "file:///etc/passwd": "is not an s3:// URI",
    "%2Fetc%2Fpasswd": "is not an s3:// URI",
    "s3:%2F%2Fother-bucket/x": "is not an s3:// URI",
    "s3://other-bucket/x": "outside the allowed input locations (s3://ws-bucket/, s3://in-bucket/scans/, s3://archive-bucket/)",
    "s3://other-bucket/*": "outside the allowed input locations",
    "s3://in-bucket/secret.txt": "outside the allowed input locations",
    "s3://in-bucket/scansx/a.pdf": "outside the allowed input locations",
    "s3://in-bucket/scans": "outside the allowed input locations",
    "s3://in-bucket/sc*": "outside the allowed input locations",
    "s3://in-bucket/*": "outside the allowed input locations",
    "s3://in-bucket/scans/../secret.txt": "'..' segment",
    "s3://ws-bucket/s3wq/./x": "'.' or '..' segment",
    "s3://ws-bucket/..": "'..' segment",
}
ALLOWED = [
    "s3://ws-bucket/anything/at/all.pdf",
    "s3://ws-bucket/%2e%2e/%2e%2e/etc/passwd",  # S3 keys are literal: an object of the workspace bucket (if there is one)
    "s3://ws-bucket/inputs/*.pdf",
    "s3://in-bucket/scans/a.pdf",
    "s3://in-bucket/scans/2024/*.pdf",
    "s3://in-bucket/scans/*",
    "s3://archive-bucket/x",
]


@pytest.mark.parametrize("source", list(REFUSED))
def test_the_deployed_policy_refuses_local_paths_other_buckets_and_dot_segments(source):
    assert REFUSED[source] in (DEPLOYED.refusal(source) or "")


@pytest.mark.parametrize("source", ALLOWED)
def test_the_deployed_policy_allows_the_workspace_bucket_and_the_input_locations(source):
    assert DEPLOYED.refusal(source) is None


def test_a_glob_is_judged_by_where_its_listing_starts_a_read_by_its_whole_key():
    assert DEPLOYED.refusal("s3://in-bucket/scans/*") is None
    # Read literally, "scans*" is one key, and not under scans/.
    assert DEPLOYED.refusal("s3://in-bucket/scans*", literal=True) is not None
    assert DEPLOYED.refusal("s3://in-bucket/scans/a*", literal=True) is None


def test_a_long_refused_source_is_quoted_cut_short():
    reason = DEPLOYED.refusal("/" + "a" * 100_000)
    assert reason is not None and len(reason) < 500 and "100001 characters" in reason


def test_the_command_line_takes_local_paths_on_a_local_workspace_and_on_s3_only_when_asked():
    assert ANYTHING.refusal("/etc/hostname") is None and ANYTHING.refusal("s3://any-bucket/x") is None
    strict = InputPolicy.s3_workspace(allow_local=False)
    reason = strict.refusal("./inputs")
    assert reason is not None and "--allow-local-inputs" in reason and "Lambda" in reason
    assert strict.refusal("s3://any-bucket/x") is None
    assert strict.manifest_refusal("./manifest.txt") is None  # read by the command line itself
    assert InputPolicy.s3_workspace(allow_local=True).refusal("./inputs") is None


def test_a_deployment_reads_no_local_manifest_and_none_outside_its_locations():
    assert "is not an s3:// URI" in DEPLOYED.manifest_refusal("/etc/passwd")
    assert "outside" in DEPLOYED.manifest_refusal("s3://other-bucket/list.txt")
    assert DEPLOYED.manifest_refusal("s3://ws-bucket/s3wq/manifests/a.txt") is None


def test_the_policy_reaches_the_processor_host_unchanged():
    for policy in (DEPLOYED, ANYTHING, InputPolicy.s3_workspace(allow_local=False), InputPolicy.deployed((), max_bytes=1000)):
        assert policy_from_json(policy_to_json(policy)) == policy


# --- the setting ----------------------------------------------------------------------------------------------


def test_input_locations_are_parsed_once_from_the_environment():
    config = LambdaConfig.from_env({ENV_WORKSPACE: WORKSPACE, ENV_INPUT_LOCATIONS: "s3://in-bucket/scans/,archive-bucket,, "})
    assert config.input_locations == (InputLocation("in-bucket", "scans"), InputLocation("archive-bucket"))
    assert LambdaConfig.from_env({ENV_WORKSPACE: WORKSPACE}).input_locations is None


@pytest.mark.parametrize("value", [None, "", " , "])
def test_a_deployment_told_no_locations_reads_its_workspace_inputs_folder_alone(value):
    """Never "anything", nor the whole bucket: the workspace may be one prefix of a bucket shared with other data."""
    environ = {ENV_WORKSPACE: WORKSPACE, **({} if value is None else {ENV_INPUT_LOCATIONS: value})}
    policy = LambdaConfig.from_env(environ).input_policy
    assert policy.locations == (InputLocation("ws-bucket", "s3wq/inputs"),) and not policy.local
    assert policy.refusal("s3://ws-bucket/s3wq/inputs/scan-1.pdf") is None
    for elsewhere in ("s3://ws-bucket/payroll.csv", "s3://ws-bucket/s3wq/results/output_x.jsonl", "s3://other-bucket/x"):
        assert "outside the allowed input locations" in policy.refusal(elsewhere)


def test_with_input_locations_the_workspace_bucket_is_not_allowed_besides_them():
    """The policy reaches as far as the roles, which with inputBuckets read only the workspace's own prefix of its bucket."""
    policy = LambdaConfig.from_env({ENV_WORKSPACE: WORKSPACE, ENV_INPUT_LOCATIONS: "s3://in-bucket/scans"}).input_policy
    assert policy.refusal("s3://in-bucket/scans/a.pdf") is None
    assert "outside the allowed input locations (s3://in-bucket/scans/)" in policy.refusal("s3://ws-bucket/inputs/a.pdf")


@pytest.mark.parametrize("value", ["s3://Bad_Bucket/x", "s3://in-bucket/a*", "in-bucket/../etc", "in-bucket//x", "s3:///x"])
def test_a_bad_input_location_is_refused_naming_the_variable(value):
    with pytest.raises(ConfigError, match=ENV_INPUT_LOCATIONS):
        LambdaConfig.from_env({ENV_WORKSPACE: WORKSPACE, ENV_INPUT_LOCATIONS: value})


def test_locations_read_back_as_written():
    assert parse_locations("s3://a-bucket/p/q,b-bucket") == (InputLocation("a-bucket", "p/q"), InputLocation("b-bucket"))


# --- read_input, whatever the index says ---------------------------------------------------------------------


@pytest.fixture
def secret_file(tmp_path) -> Path:
    path = tmp_path / "host-secret.txt"
    path.write_text("AWS_SECRET_ACCESS_KEY=the-function-s-own-key\n")
    return path


def context(tmp_path, paths: tuple[str, ...], policy: InputPolicy) -> ProcessorContext:
    group = Group(layout.group_hash(list(paths)), paths)
    backend = LocalBackend(str(tmp_path / "ws"))
    return ProcessorContext(worker_id="w", attempt=1, deadline=2e9, group=group, backend=backend, input_policy=policy)


@pytest.mark.parametrize("path", ["{secret}", "file://{secret}", "s3://other-bucket/secret.txt", "s3://ws-bucket/a/../b"])
def test_read_input_under_the_deployed_policy_refuses_and_reads_nothing(tmp_path, secret_file, path):
    ctx = context(tmp_path, (path.format(secret=secret_file),), DEPLOYED)

    with pytest.raises(InputRefused, match="input refused") as caught:
        ctx.read_input(ctx.group.paths[0])

    assert isinstance(caught.value, InputNotFound)  # what every processor already handles as "cannot use this input"
    assert "the-function-s-own-key" not in str(caught.value)


def test_the_text_processor_records_a_refused_input_as_an_input_error_and_writes_none_of_it(tmp_path, secret_file):
    readable = tmp_path / "fine.txt"
    readable.write_text("fine\n")
    ctx = context(tmp_path, (str(secret_file), "/proc/self/environ"), DEPLOYED)

    text(ctx.group, ctx)

    assert ctx.input_error_count == 2
    assert [e["path"] for e in ctx.input_errors] == list(ctx.group.paths)
    result = ctx.backend.read(ctx.result_key).body.decode()
    assert "the-function-s-own-key" not in result and "AWS_" not in result
    assert all(json.loads(line)["text"] is None for line in result.splitlines())


def test_the_command_line_worker_still_reads_local_files(tmp_path, secret_file):
    ctx = context(tmp_path, (str(secret_file),), ANYTHING)
    assert ctx.read_input(str(secret_file)) == secret_file.read_bytes()


# --- populate under a policy ---------------------------------------------------------------------------------


def test_refused_manifest_lines_are_bad_lines_and_are_never_looked_at(tmp_path, secret_file):
    manifest = tmp_path / "m.txt"
    manifest.write_text(f"s3://any-bucket/a.pdf\n{secret_file}\n{tmp_path}/*\ns3://any-bucket/b.pdf\n")
    policy = InputPolicy.s3_workspace(allow_local=False)

    expansion = SourceExpander(check=False, policy=policy).expand([f"@{manifest}"], strict=False)

    assert expansion.paths == ["s3://any-bucket/a.pdf", "s3://any-bucket/b.pdf"]
    assert [(b.line_number, "--allow-local-inputs" in b.reason) for b in expansion.bad_lines] == [(2, True), (3, True)]
    with pytest.raises(BadManifestLines):
        SourceExpander(check=False, policy=policy).expand([f"@{manifest}"])


def test_a_refused_source_named_directly_is_one_bad_source(tmp_path, secret_file):
    with pytest.raises(BadSource, match="is not an s3:// URI") as caught:
        SourceExpander(check=False, policy=InputPolicy.s3_workspace(allow_local=False)).expand([str(secret_file)])
    assert "\n" not in str(caught.value)
    with pytest.raises(BadSource, match=r"manifest .* is not an s3:// URI"):
        SourceExpander(check=False, policy=DEPLOYED).expand([f"@{tmp_path / 'm.txt'}"])


# --- the size cap: told from the size before reading, and no read past it -----------------------------------

CAPPED = InputPolicy(max_bytes=1000)


def test_an_input_over_the_cap_by_its_size_is_refused_before_a_byte_is_read():
    stream = io.BytesIO(b"x" * 5000)

    with pytest.raises(InputTooLarge) as caught:
        CAPPED.read_capped("s3://in-bucket/big.pdf", stream, 5000)

    assert stream.tell() == 0
    assert str(caught.value) == (
        "input too large: s3://in-bucket/big.pdf is 5,000 bytes, over the input size cap of 1,000 bytes "
        "(raise it with s3wq work --max-input-bytes, or -c maxInputBytes on the stack)"
    )
    assert isinstance(caught.value, InputNotFound)  # what every processor already handles as "cannot use this input"


def test_an_input_that_holds_more_than_its_size_said_is_read_one_byte_past_the_cap_and_no_further():
    stream = io.BytesIO(b"x" * 5000)  # a file that grew since it was measured

    with pytest.raises(InputTooLarge, match=r"^input too large: /data/grown.txt holds more than the input size cap of 1,000 bytes \(raise"):
        CAPPED.read_capped("/data/grown.txt", stream, 10)

    assert stream.tell() == 1001


@pytest.mark.parametrize("size", [0, 999, 1000])
def test_an_input_up_to_the_cap_is_read_whole(size):
    assert CAPPED.read_capped("s3://in-bucket/a.txt", io.BytesIO(b"y" * size), size) == b"y" * size


def test_a_local_input_that_says_nothing_of_its_size_is_cut_off_at_the_cap(tmp_path):
    """A FIFO (st_size 0, as /dev/zero's) holding more than the cap: the read stops one byte past it, and the input is refused."""
    fifo = tmp_path / "endless.txt"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=(b"z" * 4000,), daemon=True)
    writer.start()
    ctx = context(tmp_path, (str(fifo),), CAPPED)

    with pytest.raises(InputTooLarge, match="holds more than the input size cap of 1,000 bytes"):
        ctx.read_input(str(fifo))
    writer.join(timeout=10)


def test_a_local_input_over_the_cap_is_refused_from_its_size(tmp_path):
    big = tmp_path / "big.txt"
    big.write_bytes(b"w" * 1001)
    ctx = context(tmp_path, (str(big),), CAPPED)

    with pytest.raises(InputTooLarge, match=f"^input too large: {big} is 1,001 bytes, over the input size cap of 1,000 bytes"):
        ctx.read_input(str(big))

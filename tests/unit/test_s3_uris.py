"""parse_s3_uri: the path shown is the object read, and bad input is BadWorkspace, never another exception.

Every check of an input (the policy, populate's, the worker's read) goes
through it, so an exception of another type, or a bucket that is not what
the text says, would be an input that fails a whole invocation, or one
displayed as something other than what was read.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from s3wq.errors import BadManifestLines, BadSource, BadWorkspace
from s3wq.index.sources import SourceExpander
from s3wq.inputs import ANYTHING
from s3wq.store import parse_s3_uri

BUCKET_RULES = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
# Characters near the rules' edges: separators urlsplit treats specially, controls, look-alikes of "/".
TRICKY = st.sampled_from([*list("/:?#@[]%\\\t\n\r\x00\x1b\x7f\x9b .-_aZ0"), "\uff0f", "\u2215", "\u00e9", "s3://"])
TEXT = st.lists(st.one_of(TRICKY, st.characters()), max_size=40).map("".join)


def check(uri: str) -> None:
    try:
        bucket, key = parse_s3_uri(uri)
    except BadWorkspace:
        return
    assert BUCKET_RULES.fullmatch(bucket), bucket
    assert uri in (f"s3://{bucket}/{key}", f"s3://{bucket}") and (key or uri.endswith("/") or uri == f"s3://{bucket}")


@given(TEXT)
def test_any_text_is_refused_or_round_trips(text):
    check(text)


@given(TEXT, TEXT)
def test_any_s3_looking_text_is_refused_or_round_trips(bucket, key):
    check(f"s3://{bucket}/{key}")
    check(f"s3://{bucket}")


@pytest.mark.parametrize(
    "uri",
    [
        "s3://[ws-bucket/x",  # urlsplit: ValueError "Invalid IPv6 URL"
        "s3://ws-bucket]/x",
        "s3://ws-bucket\uff0fx/y",  # urlsplit: ValueError from its NFKC check
        "s3://ws-buc\tket/x",  # urlsplit dropped the tab: bucket ws-bucket, key t/x
        "s3://ws-bucket#@other/x",  # urlsplit ended the bucket at "#"
        "s3://ws-bucket?/x",
        "s3://ws-bucket\n/x",  # "$" matched before a trailing newline
        "s3://ws-bucket\x1b/x",
    ],
)
def test_what_urlsplit_misread_is_a_bad_bucket(uri):
    with pytest.raises(BadWorkspace, match="invalid bucket name"):
        parse_s3_uri(uri)


def test_the_key_is_taken_as_written():
    assert parse_s3_uri("s3://ws-bucket/a\tb?c#d") == ("ws-bucket", "a\tb?c#d")
    assert parse_s3_uri("s3://ws-bucket//x") == ("ws-bucket", "/x")
    assert parse_s3_uri("s3://ws-bucket") == ("ws-bucket", "")


@pytest.mark.parametrize("control", ["\x7f", "\x85", "\x9b", "\x9f"])
def test_del_and_c1_controls_are_bad_manifest_lines(tmp_path, control):
    """U+009B is a terminal's CSI, as ESC [ is: such a line would reach a screen through status and failures."""
    manifest = tmp_path / "m.txt"
    manifest.write_bytes(f"{tmp_path}/good.txt\n{tmp_path}/bad{control}31m.txt\n".encode())
    (tmp_path / "good.txt").write_text("x")
    with pytest.raises(BadManifestLines) as caught:
        SourceExpander(None, policy=ANYTHING).expand([f"@{manifest}"], strict=True)
    [bad] = caught.value.bad_lines
    assert bad.line_number == 2 and f"U+{ord(control):04X}" in bad.reason


@pytest.mark.parametrize("control", ["\x7f", "\x9b"])
def test_del_and_c1_controls_are_refused_in_a_named_source(tmp_path, control):
    with pytest.raises(BadSource, match="control character"):
        SourceExpander(None, policy=ANYTHING).expand([f"{tmp_path}/bad{control}.txt"], strict=True)

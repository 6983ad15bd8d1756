"""S3Backend.list_keys' own reading of a ListObjectsV2 page, against botocore's parser of the same page.

The keys taken out must be exactly the keys botocore would have parsed, and
what is left must parse to the same pagination fields; a page in any other
shape must be left to botocore.
"""

from __future__ import annotations

from urllib.parse import quote

import botocore.session
import pytest
from botocore.parsers import create_parser
from hypothesis import given, settings
from hypothesis import strategies as st

from s3wq.store.s3 import _keys_and_rest

LIST_OBJECTS_V2 = botocore.session.get_session().get_service_model("s3").operation_model("ListObjectsV2")
NS = "http://s3.amazonaws.com/doc/2006-03-01/"


def botocore_parse(body: bytes) -> dict:
    parsed = create_parser("rest-xml").parse({"headers": {}, "status_code": 200, "body": body}, LIST_OBJECTS_V2.output_shape)
    parsed.pop("ResponseMetadata", None)
    return parsed


def contents(key: str) -> str:
    return (
        f"<Contents><Key>{key}</Key><LastModified>2026-11-30T10:00:00.000Z</LastModified>"
        '<ETag>"9dd4e461268c8034f5c8564e155c67a6"</ETag><ChecksumAlgorithm>CRC64NVME</ChecksumAlgorithm>'
        "<ChecksumType>FULL_OBJECT</ChecksumType><Size>2</Size><StorageClass>STANDARD</StorageClass></Contents>"
    )


def page(keys: list[str], *, key_count: int | None = None, between: str = "", token: str | None = "bmV4dA==") -> bytes:
    """A page as S3 sends it: its fields in S3's order, keys URL-encoded, ``between`` the <Contents> elements."""
    truncated = f"<IsTruncated>{'true' if token else 'false'}</IsTruncated>"
    tail = (
        f"<Name>bucket</Name><Prefix>ws/done_flags/</Prefix><MaxKeys>1000</MaxKeys><EncodingType>url</EncodingType>"
        f"<KeyCount>{len(keys) if key_count is None else key_count}</KeyCount>"
        + (f"<NextContinuationToken>{token}</NextContinuationToken>" if token else "")
    )
    body = between.join(contents(quote(k, safe="/")) for k in keys)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="{NS}">{truncated}{body}{tail}</ListBucketResult>'.encode()


def assert_same_as_botocore(body: bytes) -> list[str]:
    split = _keys_and_rest(body)
    assert split is not None
    keys, rest = split
    whole = botocore_parse(body)
    assert keys == [item["Key"] for item in whole.pop("Contents")]
    assert botocore_parse(rest) == whole
    return keys


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=30), min_size=1, max_size=40),
    between=st.sampled_from(["", "\n", "\n  ", " \t"]),
    truncated=st.booleans(),
)
def test_keys_taken_out_of_a_page_are_the_keys_botocore_parses_and_the_rest_parses_the_same(keys, between, truncated):
    assert_same_as_botocore(page(keys, between=between, token="bmV4dA==" if truncated else None))


def test_a_full_page_of_done_flags():
    keys = [f"ws/done_flags/done_{n:040x}.flag" for n in range(1000)]

    assert assert_same_as_botocore(page(keys)) == keys


@pytest.mark.parametrize(
    "body",
    [
        page([]),  # no keys: nothing to take out
        page(["a", "b"], key_count=3),  # not the count the page states
        page(["a", "b"], between="<NextContinuationToken>x</NextContinuationToken>"),  # another element between the keys
        page(["a"]).replace(b"<Key>a</Key>", b"<Key>a&amp;b</Key>"),  # an escaped character: botocore decodes it
        page(["a"])
        .replace(b"<Contents><Key>a</Key><LastModified>", b"<Contents><LastModified>")
        .replace(b"</LastModified>", b"</LastModified><Key>a</Key>", 1),
        page(["a"]).replace(b"<KeyCount>1</KeyCount>", b""),
    ],
    ids=["empty", "count-differs", "element-between", "escaped-key", "key-not-first", "no-key-count"],
)
def test_a_page_in_any_other_shape_is_left_to_botocore(body):
    assert _keys_and_rest(body) is None

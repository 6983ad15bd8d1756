"""The vlm processor's olmocr-exact parts held to olmocr 0.4.27's own code (the published package, ``published_olmocr``).

vlm_olmocr.py runs olmocr's pipeline beside ours in the OCR venv (its
rendering needs Pillow and poppler's pdftoppm): the prompt, each page's
request and image, the turned images, replies over HTTP judged by olmocr's
try_single_page and by judge_reply, Dolma documents and Markdown paths. The
answers' parsing is checked here, in this process, on generated answers:
olmocr's parser needs only PyYAML.

The images are not the same bytes: olmocr renders with poppler, we with
pdfium. They are held to the same size (the longest side exactly, the other
within a pixel) and to nearly the same pixels: on pages of text and colour
set in an embedded font (each renderer substitutes its own for a base-14
font), a pixel differs by at most MEAN_DIFFERENCE levels of 255 on average,
the mean of each 4 x 4 block by BLOCK_DIFFERENCE (what antialiasing moves,
the text does not), and the ink (pixels darker than mid grey) covers the same
share of the page within INK_RATIO.
"""

from __future__ import annotations

import datetime
import logging
import posixpath
import sys
from dataclasses import asdict

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from s3wq.errors import BadKey
from s3wq.processors.vlm import dolma
from s3wq.processors.vlm.answer import MalformedAnswer, PageAnswer, judge_reply, parse_answer
from s3wq.processors.vlm.dolma import DolmaPage, dolma_document, markdown_path
from s3wq.store.local import LocalBackend

from .conftest import once_per_session, run_in_ocr_venv

LONGEST_SIDE = 1288
MEAN_DIFFERENCE = 12.0
BLOCK_DIFFERENCE = 8.0
INK_RATIO = 0.15
FIELDS = ["primary_language", "is_rotation_valid", "rotation_correction", "is_table", "is_diagram"]
VALID = "---\nprimary_language: en\nis_rotation_valid: true\nrotation_correction: 0\nis_table: false\nis_diagram: false\n---\nText"


@pytest.fixture(scope="session")
def beside(ocr_python, published_olmocr, tmp_path_factory) -> dict:
    return once_per_session(
        tmp_path_factory, "vlm-olmocr", lambda folder: run_in_ocr_venv(ocr_python, "vlm_olmocr.py", str(published_olmocr), str(folder))
    )


@pytest.fixture(scope="module")
def olmocr_parse(published_olmocr):
    """olmocr's reading of an answer, as try_single_page reads it: its PageResponse, or None where it raises."""
    if str(published_olmocr) not in sys.path:
        sys.path.insert(0, str(published_olmocr))
    from olmocr.prompts import PageResponse
    from olmocr.train.front_matter import FrontMatterParser

    logging.getLogger("olmocr.train.front_matter").setLevel(logging.CRITICAL)
    parser = FrontMatterParser(front_matter_class=PageResponse)

    def parse(content: str):
        try:
            front, text = parser._extract_front_matter_and_text(content)
            return parser._parse_front_matter(front, text)
        except Exception:  # noqa: BLE001 -- try_single_page's own: whatever olmocr raises fails the attempt
            return None

    return parse


def test_the_prompt_temperatures_and_version_are_olmocrs(beside):
    assert beside["prompt_equal"] and beside["temperatures_equal"]
    assert beside["olmocr_version"] == dolma.OLMOCR_VERSION


def test_a_pages_request_is_olmocrs_but_for_its_image(beside):
    assert [page["same_body"] for page in beside["pages"]] == [True] * len(beside["pages"])
    # The temperature of each attempt too: the replies' bodies were posted at attempts 0 to 16.
    assert all(reply["same_body"] for reply in beside["replies"])


def test_a_pages_image_is_olmocrs_size_and_nearly_its_pixels(beside):
    for page in beside["pages"]:
        ours, theirs = page["our_size"], page["olmocr_size"]
        assert max(ours) == LONGEST_SIDE and abs(max(theirs) - LONGEST_SIDE) <= 1, page
        assert all(abs(a - b) <= 1 for a, b in zip(ours, theirs, strict=True)), page
        assert page["mean_difference"] <= MEAN_DIFFERENCE and page["block_difference"] <= BLOCK_DIFFERENCE, page
        ink_theirs, ink_ours = page["ink"]
        assert ink_theirs > 0.01 and abs(ink_ours / ink_theirs - 1) <= INK_RATIO, page


def test_a_turned_page_is_olmocrs_pixel_for_pixel(beside):
    rotations = beside["rotations"]
    assert all(rotations[str(turn)]["same_pixels"] for turn in (90, 180, 270)), rotations
    assert rotations["0"]["unchanged"]


def test_a_reply_is_judged_as_olmocrs_try_single_page_judges_it(beside):
    for reply in beside["replies"]:
        theirs, ours = reply["olmocr"], reply["ours"]
        if theirs is None:
            assert ours["answer"] is None and ours["why"], reply
            continue
        assert ours["answer"] == theirs["response"], reply
        assert ours["valid"] == theirs["is_valid"] and bool(ours["why"]) != theirs["is_valid"], reply
        assert (ours["input_tokens"], ours["output_tokens"]) == (int(theirs["input_tokens"]), int(theirs["output_tokens"])), reply
    judged = [reply["olmocr"] is not None for reply in beside["replies"]]
    assert 4 <= sum(judged) < len(judged)  # both kinds were sent


def test_the_decoder_renders_to_a_longest_side_under_its_pixel_cap(beside):
    found = beside["decoder"]
    height, width, _ = found["capped"]
    assert (height - 1) * (width - 1) <= 250_000 and max(height, width) < LONGEST_SIDE  # the cap won (a side rounds up)
    assert found["small-grey-grey"] == [859, 1288] and found["small-grey-colour"] == [859, 1288, 3]  # scaled up
    assert found["large-rgb-grey"] == found["large-rgb-colour"] == [1288, 859, 3]  # down; an RGB image stays RGB
    assert found["at_dpi"] == [2200, 1700]  # a letter page at the settings' 200 dpi, as before


def test_a_dolma_document_is_olmocrs_build_dolma_document(beside):
    cases = beside["dolma"]
    assert all(case["same"] for case in cases)
    assert all(case["dates"] == [case["today"]] * 2 for case in cases if not case["none"])
    assert 2 <= sum(case["none"] for case in cases) < len(cases)


def test_a_markdown_path_is_olmocrs_made_safe(beside):
    for case in beside["markdown"]:
        if case["olmocrs_own"]:
            assert case["ours"] == case["olmocr"], case
        else:  # olmocr keeps a "." part, which is a key of its own on S3; it is dropped here
            assert case["ours"] == posixpath.normpath(case["olmocr"]), case


def test_s3wqs_own_metadata_goes_beside_olmocrs_never_over_it():
    page = DolmaPage(1, PageAnswer("en", True, 0, False, False, "Text"), 10, 5)
    document = dolma_document("s3://b/a.pdf", [page], today=datetime.date(2025, 1, 2), extra_metadata={"s3wq-version": "1"})
    assert document is not None and document["metadata"]["s3wq-version"] == "1" and document["metadata"]["olmocr-version"] == "0.4.27"
    assert document["added"] == document["created"] == "2025-01-02"
    with pytest.raises(ValueError, match="Source-File"):
        dolma_document("s3://b/a.pdf", [page], today=datetime.date(2025, 1, 2), extra_metadata={"Source-File": "x"})


PIECES = ["/", "..", ".", "::", "s3://", "a", "b.pdf", ".tar", ".gz", "\x00", "\ud800", "é", " ", "?", "#", "\\", "~"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=10).map("".join))
@example("s3://bucket/../../etc/passwd.pdf")
@example("/data/t.tar::../../../x.pdf")
def test_a_markdown_path_is_a_safe_key_whatever_the_input_is_called(tmp_path_factory, name):
    path = markdown_path(name)

    assert path.endswith(".md") and not path.startswith("/") and "\x00" not in path
    assert all(part not in ("", ".", "..") for part in path.split("/")), path
    path.encode("utf-8")  # a store can take it
    try:
        LocalBackend(tmp_path_factory.getbasetemp()).exists("markdown/" + path)
    except BadKey as exc:
        pytest.fail(f"{name!r} gave {path!r}: {exc}")


# YAML values an answer's front matter may hold, for each key: olmocr's (the first four), their other spellings, wrong types.
LANGUAGES = ["en", "de", "zh-Hant", "null", "~", "", "'en'", "no", "yes", "'  '", "1", "0", "[en]", "[]", "{}", "1.5"]
BOOLEANS = ["true", "false", "True", "FALSE", "yes", "no", "off", "On", "'true'", "'TRUE'", "'false'", "'yes'", "''", "1", "null", "[]"]
ROTATIONS = ["0", "90", "180", "270", "45", "-90", "360", "90.0", "'90'", "' 90 '", "'+90'", "'9_0'", "'ninety'", "0x5A", "1_80"]
ROTATIONS += ["false", "true", "null", "'0'", "[]", "0o132"]
VALUES = {"primary_language": LANGUAGES, "rotation_correction": ROTATIONS} | dict.fromkeys(
    ("is_rotation_valid", "is_table", "is_diagram"), BOOLEANS
)
# Anything else: tags, dates, YAML errors.
OTHERS = ["2024-01-01", "2024-02-30", "!!binary aGVsbG8=", "!!set {a}", "!!str 90", "!!int '90'", "!!python/name:os.system"]
OTHERS += ["[1, 2", "'unclosed", "*alias", "&anchor 90", "|\n  block", "@reserved", "{]", "a: b: c", "- 1", ".nan"]
KEYS = [*FIELDS, *FIELDS, "natural_text", "extra", "1", "Is_table", "is_table "]
BODY = st.lists(st.sampled_from(["-", "---", "\n", "\n---\n", " ", "a", "é", "\r", "\t", "#", "*", "|"]), max_size=12).map("".join)
# As a model should wrap its answer, and as it should not.
GOOD_WRAPS = ["---\n{f}\n---\n{b}", "---\n{f}\n---{b}", "---\n{f}\n----\n{b}", "---\n{f}\n---\n\n\n{b}\n\n"]
BAD_WRAPS = ["---\r\n{f}\r\n---\r\n{b}", "\n---\n{f}\n---\n{b}", " ---\n{f}\n---\n{b}", "---\n{f}\n{b}", "---\n---\n{b}", "{b}"]
BAD_WRAPS += ["---\n{f}\n...\n---\n{b}", "\ufeff---\n{f}\n---\n{b}"]


@st.composite
def answers(draw) -> str:
    """An answer: olmocr's five keys with values of their kind (or, less often, keys missing, doubled or added, with
    any values, or any text at all), wrapped as a model might (or should not) wrap it, then text that may hold ---."""
    kind = draw(st.integers(0, 5))
    if kind < 3:
        keys = draw(st.permutations(FIELDS))
        # Each pool starts with four values olmocr takes: mostly one of them, so that most answers are read.
        values = [draw(st.sampled_from(VALUES[key][: 4 if draw(st.integers(0, 3)) else None])) for key in keys]
    else:
        keys = draw(st.lists(st.sampled_from(KEYS), min_size=3, max_size=8))
        values = [draw(st.sampled_from([*VALUES.get(key.strip(), BOOLEANS), *OTHERS])) for key in keys]
    front = "\n".join(f"{key}: {value}" for key, value in zip(keys, values, strict=True))
    if kind == 5:
        front = draw(st.text(max_size=40))  # anything at all: mostly not YAML's mapping
    wrap = draw(st.sampled_from(GOOD_WRAPS if kind < 2 else GOOD_WRAPS + BAD_WRAPS))
    return wrap.format(f=front, b=draw(BODY))


def assert_read_alike(olmocr_parse, content: str) -> None:
    theirs = olmocr_parse(content)
    try:
        ours: PageAnswer | None = parse_answer(content)
    except MalformedAnswer:
        ours = None
    if theirs is None:
        assert ours is None, f"olmocr refuses {content!r}; we read {ours}"
    else:
        assert ours is not None, f"olmocr reads {content!r} as {theirs}; we refuse it"
        assert asdict(ours) == asdict(theirs)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(answers())
@example(VALID)
@example(VALID.replace("rotation_correction: 0", "rotation_correction: 45"))
@example(VALID.replace("rotation_correction: 0", "rotation_correction: false"))
@example(VALID.replace("primary_language: en", "primary_language: no"))
@example(VALID.replace("is_table: false", "is_table: 'True'"))
@example(VALID.replace("---\nText", "---\nText\n---\nmore: text"))
@example(VALID.replace("---\nText", "---"))
@example(VALID.replace("is_diagram: false\n", ""))
@example(VALID.replace("is_diagram: false\n", "is_diagram: false\nnatural_text: x\n"))
def test_an_answer_is_read_as_olmocrs_front_matter_parser_reads_it(olmocr_parse, content):
    assert_read_alike(olmocr_parse, content)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=120))
def test_any_text_is_read_as_olmocr_reads_it(olmocr_parse, content):
    assert_read_alike(olmocr_parse, content)
    assert_read_alike(olmocr_parse, "---\n" + content)


def test_a_valid_answer_is_read_and_a_reply_that_is_no_completion_has_none(olmocr_parse):
    answer = parse_answer(VALID)
    assert answer == PageAnswer("en", True, 0, False, False, "Text") and asdict(answer) == asdict(olmocr_parse(VALID))
    assert parse_answer(VALID.replace("rotation_correction: 0", "rotation_correction: false")).rotation_correction == 0
    for data in (None, "text", [], {"choices": []}, {"usage": [], "choices": []}):
        judged = judge_reply(data)
        assert judged.answer is None and not judged.valid and not judged.usable and judged.why

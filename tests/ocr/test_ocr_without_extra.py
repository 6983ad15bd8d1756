"""Without the ocr extra (the main venv, as ``make install`` leaves it), ``--processor ocr`` says how to install it, and nothing runs.

Also the pure parts of the processor, which import without the extra: its settings and its reading order.
"""

from __future__ import annotations

import importlib.util

import pytest
from support import run_cli

from s3wq.processors.ocr.reading_order import printed_lines
from s3wq.processors.ocr.settings import DEFAULT_DPI, BadOcrSetting, OcrSettings


def test_the_main_venv_has_no_ocr_extra():
    assert importlib.util.find_spec("rapidocr") is None  # else the test below would test nothing


def test_work_with_the_ocr_processor_but_no_extra_exits_2_naming_the_install(tmp_path, inputs):
    workspace = str(tmp_path / "ws")
    assert run_cli("populate", workspace, str(inputs), "--allow-local-inputs").returncode == 0

    work = run_cli("work", workspace, "--processor", "ocr")

    assert work.returncode == 2
    assert work.stderr.strip() == "s3wq: error: the ocr processor needs its extra: pip install 's3wq[ocr]'"
    status = run_cli("status", workspace, "--json")
    assert '"done": 0' in status.stdout and '"failed": 0' in status.stdout


def test_settings_default_and_read_from_the_environment():
    assert OcrSettings.from_env({}) == OcrSettings()
    assert OcrSettings().dpi == DEFAULT_DPI == 200
    assert OcrSettings.from_env({"S3WQ_OCR_DPI": "300", "S3WQ_OCR_MAX_PIXELS": "4_000_000", "S3WQ_OCR_MAX_PAGES": " 7 "}) == OcrSettings(
        dpi=300, max_pixels=4_000_000, max_pages=7
    )


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("S3WQ_OCR_DPI", "high", "S3WQ_OCR_DPI='high': expected a whole number from 36 to 1200"),
        ("S3WQ_OCR_DPI", "20", "S3WQ_OCR_DPI=20: expected a whole number from 36 to 1200"),
        ("S3WQ_OCR_MAX_PAGES", "-1", "S3WQ_OCR_MAX_PAGES=-1: expected a whole number from 1 to 100000"),
        ("S3WQ_OCR_MAX_PIXELS", "1.5e6", "S3WQ_OCR_MAX_PIXELS='1.5e6': expected a whole number from 100000 to 200000000"),
    ],
)
def test_a_bad_setting_is_named_in_one_line(variable, value, says):
    with pytest.raises(BadOcrSetting) as caught:
        OcrSettings.from_env({variable: value})
    assert str(caught.value) == says


def box(left: float, top: float, width: float = 100, height: float = 20) -> list[list[float]]:
    return [[left, top], [left + width, top], [left + width, top + height], [left, top + height]]


def test_boxes_read_as_printed_lines_top_to_bottom_left_to_right():
    # The engine returns boxes in its own order; one printed line may come as several boxes at slightly different heights.
    boxes = [box(300, 52), box(10, 100), box(10, 50), box(160, 48), box(200, 101)]
    texts = ["c", "second line", "a", "b", "more"]

    assert printed_lines(boxes, texts) == ["a b c", "second line more"]
    assert printed_lines(None, None) == []


def test_two_columns_read_column_by_column_with_a_heading_over_both_in_its_place():
    heading = [box(10, 10, width=900)]
    left = [box(10, 60 + 30 * n, width=400) for n in range(4)]
    right = [box(500, 60 + 30 * n, width=380) for n in range(4)]
    footer = [box(10, 200, width=900)]
    texts = ["Heading", *(f"left {n}" for n in range(4)), *(f"right {n}" for n in range(4)), "Footer"]

    lines = printed_lines(heading + left + right + footer, texts)

    assert lines == ["Heading", *(f"left {n}" for n in range(4)), *(f"right {n}" for n in range(4)), "Footer"]


def test_a_table_with_a_narrow_column_of_figures_keeps_its_rows():
    # Labels on the left, amounts far to the right: a gutter, but the right side is no column of text.
    labels = [box(10, 10 + 30 * n, width=300) for n in range(5)]
    amounts = [box(800, 10 + 30 * n, width=60) for n in range(5)]

    lines = printed_lines(labels + amounts, [f"item {n}" for n in range(5)] + [f"{n}0" for n in range(5)])

    assert lines == [f"item {n} {n}0" for n in range(5)]

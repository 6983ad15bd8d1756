"""Without the ocr extra (the main venv, as ``make install`` leaves it), ``--processor ocr`` says how to install it, and nothing runs.

Also the pure parts of the processor, which import without the extra: its settings and its reading order.
"""

from __future__ import annotations

import importlib.util
import random
import statistics

import pytest
from support import run_cli

from s3wq.processors.ocr.reading_order import printed_lines
from s3wq.processors.ocr.settings import DEFAULT_DPI, DEFAULT_MAX_DECODE_MB, BadOcrSetting, OcrSettings
from s3wq.processors.ocr.time_shares import TimeShares, stopped


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
    assert OcrSettings.from_env({"S3WQ_OCR_MAX_DECODE_MB": "1024"}).max_decode_mb == 1024


def test_the_decoders_memory_cap_fits_beside_the_engine_in_the_ocr_workers_memory():
    from s3wq_cdk.settings import PROCESSOR_PROFILES

    # bench/ocr.py: the processor host peaks at ~1,282 MB with the engine; the worker and the host's warden ~40 MB each.
    engine_mb, worker_and_warden_mb = 1282, 80

    assert engine_mb + worker_and_warden_mb + DEFAULT_MAX_DECODE_MB <= PROCESSOR_PROFILES["ocr"].worker_memory_mb


def test_a_document_at_the_default_page_cap_fits_one_lambda_run():
    # bench/ocr.py: ~2.25 s of a core per scanned page; a Lambda run gets ~890 s of its 15 minutes.
    seconds_per_page, lambda_run_seconds = 2.25, 890

    assert OcrSettings().max_pages * seconds_per_page <= lambda_run_seconds


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("S3WQ_OCR_DPI", "high", "S3WQ_OCR_DPI='high': expected a whole number from 36 to 1200"),
        ("S3WQ_OCR_DPI", "20", "S3WQ_OCR_DPI=20: expected a whole number from 36 to 1200"),
        ("S3WQ_OCR_MAX_PAGES", "-1", "S3WQ_OCR_MAX_PAGES=-1: expected a whole number from 1 to 100000"),
        ("S3WQ_OCR_MAX_PIXELS", "1.5e6", "S3WQ_OCR_MAX_PIXELS='1.5e6': expected a whole number from 100000 to 200000000"),
        ("S3WQ_OCR_MAX_DECODE_MB", "64", "S3WQ_OCR_MAX_DECODE_MB=64: expected a whole number from 128 to 65536"),
    ],
)
def test_a_bad_setting_is_named_in_one_line(variable, value, says):
    with pytest.raises(BadOcrSetting) as caught:
        OcrSettings.from_env({variable: value})
    assert str(caught.value) == says


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_each_input_gets_an_even_share_of_what_is_left_and_what_one_leaves_goes_to_the_rest():
    clock = FakeClock()
    shares = TimeShares(100.0, 4, clock=clock)  # 5 s kept for the result: 95 s for four inputs

    first = shares.next()
    assert first.seconds == pytest.approx(95 / 4)
    clock.now += 1.0  # the first input, a text file, took a second
    second = shares.next()
    assert second.seconds == pytest.approx(94 / 3)
    clock.now = second.until + 10  # the second ran past its share (a page the engine took long on)
    assert shares.next().seconds == pytest.approx((95 - 1 - 94 / 3 - 10) / 2)


def test_a_short_run_keeps_a_tenth_of_its_time_for_the_result_and_nothing_is_shared_past_the_end():
    clock = FakeClock()
    shares = TimeShares(10.0, 2, clock=clock)

    assert shares.next().seconds == pytest.approx(4.5)
    clock.now += 30
    assert shares.next().seconds == 0


def test_a_page_starts_only_while_the_share_holds_one_as_long_as_the_longest_so_far():
    clock = FakeClock()
    shares = TimeShares(20.0, 1, clock=clock)  # 18 s
    share = shares.next()

    assert shares.page_fits(share)  # no page read yet: the first always starts while time is left
    shares.page_took(5.0)
    clock.now += 12.5
    assert shares.page_fits(share)  # 5.5 s left
    clock.now += 1.0
    assert not shares.page_fits(share)
    assert stopped(138, 100_000, share) == (
        "stopped after 138 of 100000 pages: its share of the run's time (18 s) ran out; use smaller groups or a longer run"
    )


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


def _gutter_by_brute_force(pieces):
    """The gutter as the first version found it, box by box for every candidate edge (cubic): the reference for the sweep."""
    from s3wq.processors.ocr import reading_order as ro

    if len(pieces) < 2 * ro._MIN_COLUMN_BOXES:
        return None
    start, end = min(p.left for p in pieces), max(p.right for p in pieces)
    width, line_height = end - start, statistics.median(p.height for p in pieces)
    low, high = start + ro._GUTTER_ZONE[0] * width, start + ro._GUTTER_ZONE[1] * width
    best = None
    for x in sorted({p.right for p in pieces if low <= p.right <= high} | {low}):
        crossing = [p for p in pieces if p.left < x + ro._GUTTER_LINE_HEIGHTS * line_height and p.right > x]
        if len(crossing) <= max(ro._CROSSING_FEW, ro._CROSSING_SHARE * len(pieces)):
            gap_end = min((p.left for p in pieces if p.left >= x and p not in crossing), default=end)
            if best is None or gap_end - x > best[1] - best[0]:
                best = (x, gap_end)
    if best is None or best[1] - best[0] < ro._GUTTER_LINE_HEIGHTS * line_height:
        return None
    gutter = (best[0] + best[1]) / 2
    return gutter if ro._columns_of_text(pieces, gutter, start, end) else None


def _random_boxes(rng: random.Random, count: int, grid: int) -> list[list[list[float]]]:
    # Edges on a coarse grid, so that boxes share edges, touch, and some have no width or height: the edge cases of the sweep.
    boxes = []
    for _ in range(count):
        left, top = rng.randrange(0, 100) * grid, rng.randrange(0, 200) * grid
        boxes.append(box(left, top, width=rng.choice([0, grid, 5 * grid, 40 * grid]), height=rng.choice([0, grid, 2 * grid])))
    return boxes


def test_the_gutter_is_the_one_box_by_box_search_finds():
    from s3wq.processors.ocr.reading_order import Piece, _gutter

    rng = random.Random(21)
    for trial in range(400):
        pieces = [Piece.of(b, "") for b in _random_boxes(rng, rng.randrange(6, 40), rng.choice([1, 10]))]
        if trial % 2:  # two columns with a gap between them, and a few boxes across it
            pieces += [Piece.of(box(10, 30 * n, width=400), "") for n in range(5)] + [
                Piece.of(box(600, 30 * n, width=380), "") for n in range(5)
            ]
        assert _gutter(pieces) == _gutter_by_brute_force(pieces)


@pytest.mark.timeout(60)
def test_a_page_of_thousands_of_words_is_ordered_in_well_under_a_minute():
    # Word-sized boxes all over the page: every right edge in the middle is a candidate gap that few boxes cross.
    # The box-by-box search compared each box with each crossing box at each edge (cubic: 13 s for 2000, ~100 s for 4000); the sweep takes milliseconds.
    rng = random.Random(7)
    boxes = [box(rng.uniform(0, 1000), rng.uniform(0, 8000), width=20, height=20) for _ in range(4000)]

    lines = printed_lines(boxes, [str(n) for n in range(len(boxes))])

    assert sorted(word for line in lines for word in line.split()) == sorted(str(n) for n in range(len(boxes)))

"""Without the ocr extra (the main venv, as ``make install`` leaves it), ``--processor ocr`` says how to install it, and nothing runs.

Also the pure parts of the processor, which import without the extra: its settings and its time shares.
"""

from __future__ import annotations

import importlib.util

import pytest
from support import run_cli

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

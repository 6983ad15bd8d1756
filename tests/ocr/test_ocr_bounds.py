"""The ocr processor's bounds, set through S3WQ_OCR_*: the page cap and the pixel cap hold, and a bad value stops the worker before any group."""

from __future__ import annotations

import subprocess

from .conftest import ocr_env, run_in_ocr_venv


def test_the_page_cap_and_the_pixel_cap_bound_what_is_read(ocr_python, scans, tmp_path):
    folder, known = scans

    run = run_in_ocr_venv(
        ocr_python,
        "run_group.py",
        str(tmp_path / "ws"),
        str(folder / "fax.tiff"),
        str(folder / "scan.pdf"),
        S3WQ_OCR_MAX_PAGES="1",
        S3WQ_OCR_MAX_PIXELS="1_000_000",
    )

    fax, scan = run["records"]
    # Page 2 of the fax is past the cap: not read, and the record says so; page 1 is kept.
    assert fax["error"] == "2 pages, more than S3WQ_OCR_MAX_PAGES=1: the first 1 read"
    assert [p["page"] for p in fax["metadata"]["pages"]] == [1]
    assert known["fax.tiff"][0][0] in fax["text"] and known["fax.tiff"][1][0] not in fax["text"]
    # A letter page at 200 dpi is 3.74 Mpx: rendered at the dpi that makes it 1 Mpx instead.
    [page] = scan["metadata"]["pages"]
    assert page["dpi"] == 103
    assert run["input_error_count"] == 1


def test_a_bad_setting_stops_the_worker_in_one_line_before_any_group(ocr_python, tmp_path):
    # Each variable's parsing is tested without the venv (test_ocr_without_extra.py); this is the path to the exit code.
    variable, value = "S3WQ_OCR_MAX_PAGES", "0"
    (tmp_path / "ws").mkdir()

    work = subprocess.run(
        [str(ocr_python), "-m", "s3wq", "work", str(tmp_path / "ws"), "--processor", "ocr"],
        capture_output=True,
        text=True,
        timeout=120,
        env=ocr_env(**{variable: value}),
    )

    assert work.returncode == 2
    assert work.stderr.strip().count("\n") == 0 and variable in work.stderr, work.stderr

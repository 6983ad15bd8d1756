"""``s3wq work --ocr-mode/--ocr-lang``: a bad value, or one for another processor, is one line, exit 2, and changes nothing."""

from __future__ import annotations

import pytest
from support import run_cli


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (["--processor", "ocr", "--ocr-lang", "klingon"], "--ocr-lang='klingon': expected language codes (en, fr, ru, zh, ...)"),
        (["--processor", "ocr", "--ocr-lang", "en,,xx"], "--ocr-lang='en,,xx'"),
        (["--ocr-mode", "force"], "--ocr-mode and --ocr-lang are the ocr processor's settings; --processor is 'text'"),
    ],
    ids=["unknown-language", "one-bad-among-good", "not-the-ocr-processor"],
)
def test_a_bad_ocr_flag_is_one_line_and_exit_2_before_the_workspace_is_touched(tmp_path, flags, problem):
    workspace = tmp_path / "ws"
    workspace.mkdir()

    result = run_cli("work", str(workspace), *flags)

    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("s3wq: error: ") and problem in line
    assert list(workspace.iterdir()) == []


def test_an_unknown_ocr_mode_is_refused_by_the_parser_with_the_choices(tmp_path):
    result = run_cli("work", str(tmp_path), "--processor", "ocr", "--ocr-mode", "fast")

    assert result.returncode == 2
    assert "argument --ocr-mode: invalid choice: 'fast' (choose from 'auto', 'force', 'text-layer')" in result.stderr

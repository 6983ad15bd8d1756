"""``s3wq failures`` and ``inspect`` show the processor's own line first, through the real CLI and the processor host.

The processor (tests/helpers/failproc.py) hands bad input to json.loads, so
the end of its traceback is all standard library; the user's own line,
``failproc.py:16``, is the one to fix.
"""

from __future__ import annotations

import json

import pytest
from support import run_cli

from s3wq.store import LocalBackend, layout

from .conftest import HELPERS_DIR

FRAME = {"file": "failproc.py", "line": 16, "function": "parse_inputs", "code": "data = json.loads(raw)"}
AT_LINE = "at failproc.py:16 in parse_inputs: data = json.loads(raw)"


@pytest.fixture
def failed_run(tmp_path, helper_env):
    """Two inputs, one not JSON: one group done, one failed after its single attempt."""
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    (inputs / "good.json").write_text('{"a": 1}\n')
    (inputs / "bad.json").write_text("not json\n")
    workspace = str(tmp_path / "ws")
    assert run_cli("populate", workspace, str(inputs), "--group-size", "1").returncode == 0
    work = run_cli("work", workspace, "--processor", "failproc:parse_inputs", "--max-attempts", "1", "--breaker", "0")
    assert work.returncode == 1, work.stderr
    return workspace


def test_the_helper_line_is_the_one_the_test_names():
    source = (HELPERS_DIR / "failproc.py").read_text().splitlines()
    assert source[FRAME["line"] - 1].strip() == FRAME["code"]


def test_failures_shows_the_processors_own_line_before_the_end_of_the_stack(failed_run):
    shown = run_cli("failures", failed_run)

    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "1 failed group"
    assert "kind=error  json.decoder.JSONDecodeError: Expecting value" in lines[1]
    assert lines[2].strip().endswith("bad.json")
    # The user's frame first, then the end of the stack, which is inside json/decoder.py.
    assert lines[3] == f"    {AT_LINE}"
    assert lines[4].startswith("    traceback (last ")
    tail = lines[5:]
    assert any("json/decoder.py" in line for line in tail) and not any("failproc.py" in line for line in tail)
    assert tail[-1].strip().startswith("json.decoder.JSONDecodeError")


def test_failures_json_and_inspect_carry_the_frame(failed_run):
    [failure] = json.loads(run_cli("failures", failed_run, "--json").stdout)["failures"]
    assert failure["error_frame"] == FRAME
    assert 'failproc.py", line 16, in parse_inputs' in failure["traceback"]  # the whole traceback, as before

    inspected = run_cli("inspect", failed_run, failure["hash"])
    assert inspected.returncode == 0, inspected.stderr
    lines = inspected.stdout.splitlines()
    assert AT_LINE in lines
    assert lines.index(AT_LINE) < lines.index("traceback:")
    assert "error_frame" not in inspected.stdout  # shown as its line, not as a dict
    assert json.loads(run_cli("inspect", failed_run, failure["hash"], "--json").stdout)["failed"]["error_frame"] == FRAME


def test_verbose_failures_keep_the_frame_first_and_the_whole_stack(failed_run):
    lines = run_cli("-v", "failures", failed_run).stdout.splitlines()
    assert lines[3] == f"    {AT_LINE}" and lines[4] == "    traceback:"
    assert any('failproc.py", line 16' in line for line in lines[5:])


def test_a_flag_written_before_frames_were_kept_is_shown_as_before(failed_run):
    backend = LocalBackend(failed_run)
    [failure] = json.loads(run_cli("failures", failed_run, "--json").stdout)["failures"]
    key = layout.failed_key(failure["hash"])
    doc = json.loads(backend.read(key).body)
    del doc["error_frame"]
    backend.write(key, json.dumps(doc).encode())

    shown = run_cli("failures", failed_run)

    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert not any(line.strip().startswith("at ") for line in lines)
    assert lines[3].startswith("    traceback (last ") and lines[-1].strip().startswith("json.decoder.JSONDecodeError")
    assert json.loads(run_cli("failures", failed_run, "--json").stdout)["failures"][0]["error_frame"] is None

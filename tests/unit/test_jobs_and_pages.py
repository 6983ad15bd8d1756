"""``work -j``'s exit codes and summed reports, the pages of done flags, ctx.pages_done, and what -v says it logs."""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout

import pytest
from hypothesis import given
from hypothesis import strategies as st

from s3wq.cli import build_parser
from s3wq.cli.jobs import job_count, summed, worst_exit_code
from s3wq.cli.progress import RunProgress
from s3wq.errors import LeaseLost
from s3wq.model import Group
from s3wq.ops.pages import PagesDone, PageTally
from s3wq.processors.context import ProcessorContext
from s3wq.protocol.flags import pages_of, write_done
from s3wq.store import LocalBackend, layout


def test_the_worst_exit_code_of_the_workers_is_the_parents():
    assert worst_exit_code([]) == 0
    assert worst_exit_code([0, 69, 0]) == 69
    assert worst_exit_code([0, 130, 69]) == 130
    assert worst_exit_code([130, 1, 0]) == 1
    assert worst_exit_code([1, 2, 130]) == 2
    assert worst_exit_code([0, -9]) == 1  # killed by a signal it could not handle: a failure


def test_j_0_is_one_worker_per_core_this_process_may_use():
    assert job_count(3) == 3
    assert job_count(0) >= 1


def test_the_reports_are_summed_counts_and_requests_alike():
    reports = [
        {"worker_id": "a", "processed": 2, "pages": 5, "overlapped_seconds": 0.5, "s3_requests": {"GET": 3}, "breaker_error": None},
        {"worker_id": "b", "processed": 1, "pages": 0, "overlapped_seconds": 0.25, "s3_requests": {"GET": 1, "PUT": 2}},
    ]
    assert summed(reports) == {"processed": 3, "pages": 5, "overlapped_seconds": 0.75, "s3_requests": {"GET": 4, "PUT": 2}}


@given(st.integers(min_value=0, max_value=10**9) | st.none())
def test_a_done_flag_reads_back_the_pages_it_was_written_with(tmp_path_factory, pages):
    backend = LocalBackend(tmp_path_factory.mktemp("ws"))
    assert write_done(backend, "a" * 40, owner="o", worker_id="w", attempt=1, input_errors=0, pages=pages)
    assert pages_of(backend.read(layout.done_key("a" * 40)).body) == pages


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=5,
)


@given(st.binary(max_size=200) | JSON_VALUES.map(lambda v: json.dumps({"pages": v}).encode()))
def test_any_flag_body_reads_as_a_count_of_pages_or_none(body):
    pages = pages_of(body)
    assert pages is None or (type(pages) is int and pages >= 0)


def test_an_olmocr_flag_and_one_of_an_older_s3wq_have_unknown_pages(tmp_path):
    backend = LocalBackend(tmp_path)
    backend.write(layout.done_key("a" * 40), b"")  # olmocr's
    backend.write(layout.done_key("b" * 40), json.dumps({"worker_id": "w", "attempt": 1}).encode())
    write_done(backend, "c" * 40, owner="o", worker_id="w", attempt=1, input_errors=0, pages=4)
    assert PageTally(backend).count() == PagesDone(pages=4, groups=1, unknown=2)


def test_a_tally_reads_each_flag_once_and_estimates_the_flags_it_has_not_read(tmp_path):
    backend = LocalBackend(tmp_path)
    for n in range(10):
        write_done(backend, f"{n:040x}", owner="o", worker_id="w", attempt=1, input_errors=0, pages=3)
    tally = PageTally(backend, max_reads=4)
    assert tally.count() == PagesDone(pages=30, groups=10, unknown=0, estimated=True)
    tally.count()
    assert tally.count() == PagesDone(pages=30, groups=10, unknown=0, estimated=False)
    backend.delete(layout.done_key(f"{0:040x}"))  # a reset: its pages are done no more
    assert tally.count().pages == 27
    assert PagesDone(pages=30, groups=10, unknown=0).remaining(5) == 15


def test_pages_done_adds_up_and_is_refused_once_the_run_is_over(tmp_path):
    ctx = ProcessorContext(worker_id="w", attempt=1, deadline=0.0, group=Group("a" * 40, ("x",)), backend=LocalBackend(tmp_path))
    assert ctx.pages is None
    ctx.pages_done(3)
    ctx.pages_done()
    assert ctx.pages == 4
    with pytest.raises(ValueError):
        ctx.pages_done(-1)
    ctx.end_run()
    with pytest.raises(LeaseLost):
        ctx.pages_done(1)


def test_the_progress_display_gives_pages_their_rate_and_an_eta_in_pages():
    stream = io.StringIO()
    progress = RunProgress(stream=stream, live=False)
    counts = {"groups": 10, "paths": 10, "done": 0, "failed": 0, "locked": 0, "pending": 10, "remaining": 10}
    progress.update(counts, PagesDone(pages=0, groups=0, unknown=0))
    progress.started -= 10  # ten seconds of watching
    progress._last_plain = 0.0
    progress.update({**counts, "done": 5, "pending": 5, "remaining": 5}, PagesDone(pages=20, groups=5, unknown=0))
    progress.stop()
    last = stream.getvalue().splitlines()[-1]
    assert re.search(r"pages 20  2\.0 pages/s  ETA 10s by pages \(~20 to go", last), last


def help_of(command: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    return re.search(r"-v, --verbose (.*?)(?: -|$)", " ".join(out.getvalue().split())).group(1)


def test_v_says_what_it_logs_for_each_command():
    commands = ("populate", "status", "start", "failures", "inspect", "work", "requeue-failed", "reset", "release-locks")
    helps = {command: help_of(command) for command in commands}
    assert len(set(helps.values())) == len(helps), helps
    assert not any("log what the worker does" in h for h in helps.values())
    assert "pages and seconds" in helps["work"] and "traceback" in helps["failures"]

"""The progress display of a run: rich on a terminal, plain lines elsewhere, and the rate and ETA they show.

The module's clock is replaced by one the test moves, so rates, ETAs and the
spacing of plain lines are exact, whatever the machine's speed.
"""

from __future__ import annotations

import io
import itertools
import re
import types

import pytest
from rich.console import Console

from s3wq.cli import progress
from s3wq.cli.progress import PLAIN_INTERVAL_SECONDS, RunProgress, rate_and_eta

ANSI_ESCAPE = "\x1b"


def status(*, groups: int, done: int, failed: int = 0, locked: int = 0) -> dict:
    """A queue_status document, consistent in itself."""
    remaining = groups - done - failed
    pending = remaining - locked
    return {
        "groups": groups,
        "paths": 2 * groups,
        "done": done,
        "failed": failed,
        "locked": locked,
        "pending": pending,
        "remaining": remaining,
    }


@pytest.fixture
def clock(monkeypatch):
    """The progress module's monotonic clock, at 1000 s; advance it with ``clock.now += seconds``."""
    fake = types.SimpleNamespace(now=1000.0)
    monkeypatch.setattr(progress, "time", types.SimpleNamespace(monotonic=lambda: fake.now))
    return fake


def recording_console() -> Console:
    # file=: the live display goes to the recording only, not to pytest's stdout.
    return Console(record=True, width=120, force_terminal=True, file=io.StringIO())


# --- rate_and_eta ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "elapsed", "finished_at_start", "expected"),
    [
        # 20 groups finished in 10 s since watching began (10 were finished before): 2/s, 20 left -> 10 s.
        (status(groups=50, done=28, failed=2), 10.0, 10, (2.0, 10.0)),
        # Failed groups are finished too: they count towards the rate.
        (status(groups=40, done=0, failed=8), 4.0, 0, (2.0, 16.0)),
        (status(groups=100, done=25), 50.0, 0, (0.5, 150.0)),
    ],
)
def test_rate_counts_groups_finished_since_watching_began_and_eta_is_remaining_over_rate(doc, elapsed, finished_at_start, expected):
    assert rate_and_eta(doc, elapsed, finished_at_start) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("doc", "elapsed", "finished_at_start"),
    [
        (status(groups=10, done=3), 0.0, 0),  # no time has passed
        (status(groups=10, done=3), 5.0, 3),  # nothing finished since watching began
    ],
)
def test_without_a_rate_there_is_no_eta(doc, elapsed, finished_at_start):
    assert rate_and_eta(doc, elapsed, finished_at_start) == (0.0, None)


def test_a_drained_queue_has_nothing_left_to_wait_for():
    assert rate_and_eta(status(groups=10, done=9, failed=1), 5.0, 10) == (0.0, 0.0)


# --- on a terminal: rich --------------------------------------------------------------------------


def test_terminal_display_shows_progress_failed_locked_pending_rate_and_eta(clock):
    console = recording_console()
    with RunProgress(console=console) as display:
        display.update(status(groups=50, done=10))
        clock.now += 10
        display.update(status(groups=50, done=28, failed=2, locked=5))

    text = console.export_text()
    final = text.rstrip("\n").rsplit("groups ", 1)[-1]  # the last frame the live display drew
    # The bar counts finished groups (done 28 + failed 2) of all 50.
    assert re.search(r"\b30/50\b", final), text
    for shown in ("failed 2", "locked 5", "pending 15", "2.0 groups/s", "ETA 10s"):
        assert shown in final, text


def test_terminal_display_without_a_rate_shows_an_unknown_eta(clock):
    console = recording_console()
    with RunProgress(console=console) as display:
        display.update(status(groups=8, done=0, locked=3))
        clock.now += 4
        display.update(status(groups=8, done=0, locked=3))

    final = console.export_text().rstrip("\n").rsplit("groups ", 1)[-1]
    assert re.search(r"\b0/8\b", final)
    assert "locked 3  pending 5  0.0 groups/s" in final and "ETA" not in final, final


def test_terminal_display_draws_a_bar_with_terminal_escapes(clock):
    console = recording_console()
    with RunProgress(console=console) as display:
        display.update(status(groups=4, done=4))

    assert ANSI_ESCAPE in console.export_text(styles=True, clear=False)
    assert "━" in console.export_text()


# --- elsewhere: plain lines -----------------------------------------------------------------------


def plain_lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def elapsed_of(line: str) -> float:
    return float(line.split("s", 1)[0])


def test_a_stream_that_is_not_a_terminal_gets_plain_lines(clock):
    stream = io.StringIO()
    with RunProgress(stream=stream) as display:
        display.update(status(groups=6, done=4, failed=2))

    assert ANSI_ESCAPE not in stream.getvalue()
    [line] = plain_lines(stream)
    assert re.fullmatch(r"\s*0\.0s  done 4/6  failed 2  locked 0  pending 0  0\.0 groups/s(  ETA \d+s)?", line), line


def test_plain_mode_writes_at_most_one_line_per_interval_and_the_final_state_on_stop(clock):
    stream = io.StringIO()
    display = RunProgress(stream=stream)
    polls = 0
    # A poll every half second for 9.5 s: done goes up by one each time.
    for done in range(20):
        display.update(status(groups=40, done=done))
        polls += 1
        clock.now += 0.5
    clock.now -= 0.5  # the clock as it was at the last poll
    printed_while_running = plain_lines(stream)

    display.stop()

    lines = plain_lines(stream)
    assert polls == 20
    times = [elapsed_of(line) for line in printed_while_running]
    assert times[0] == 0.0
    assert all(later - earlier >= PLAIN_INTERVAL_SECONDS for earlier, later in itertools.pairwise(times)), times
    assert len(printed_while_running) <= 9.5 / PLAIN_INTERVAL_SECONDS + 1
    # stop() adds the last state, which had not been printed yet.
    assert len(lines) == len(printed_while_running) + 1
    assert lines[-1].startswith("    9.5s  done 19/40  failed 0  locked 0  pending 21  ")
    assert "ETA" in lines[-1]


def test_plain_mode_stop_prints_nothing_more_when_the_last_state_was_printed(clock):
    stream = io.StringIO()
    display = RunProgress(stream=stream)
    display.update(status(groups=3, done=1))
    clock.now += PLAIN_INTERVAL_SECONDS
    display.update(status(groups=3, done=3))

    display.stop()

    lines = plain_lines(stream)
    assert len(lines) == 2
    assert lines[-1].startswith(f"{PLAIN_INTERVAL_SECONDS:7.1f}s  done 3/3  ")


# --- nothing finished lately: no ETA ------------------------------------------------------------


@pytest.mark.parametrize(
    ("elapsed", "finished", "quiet", "expected"),
    [
        (10.0, 0, 60.0, False),  # nothing ever finished: there is no ETA to blank
        (10.0, 10, 5.0, False),  # a group a second, the last 5 s ago: under MIN_STALL_SECONDS
        (10.0, 10, progress.MIN_STALL_SECONDS, True),
        # A group every 100 s: quiet for 299 s is its usual pace, for 300 s (3x) it has stopped.
        (1000.0, 10, 299.0, False),
        (1000.0, 10, 300.0, True),
    ],
)
def test_a_run_has_stalled_when_nothing_finished_for_three_times_its_pace(elapsed, finished, quiet, expected):
    assert progress.stalled(elapsed, finished, quiet) is expected


def test_eta_is_blank_once_nothing_has_finished_lately(clock):
    """Ten groups in ten seconds, then nothing moves: the ETA is a number while groups finish, then no number at all."""
    stream = io.StringIO()
    display = RunProgress(stream=stream)
    for done in range(11):  # one group a second, for 10 s
        display.update(status(groups=20, done=done, locked=1))
        clock.now += 1.0
    clock.now -= 1.0
    assert re.search(r"ETA \d+s$", plain_lines(stream)[-1]), plain_lines(stream)
    # Nothing finishes from here on; a poll every PLAIN_INTERVAL_SECONDS for a minute.
    etas = []
    for _ in range(int(60 / PLAIN_INTERVAL_SECONDS)):
        clock.now += PLAIN_INTERVAL_SECONDS
        display.update(status(groups=20, done=10, locked=1))
        shown = re.search(r"ETA (\S+)$", plain_lines(stream)[-1])
        etas.append(shown.group(1) if shown else "")
    quiet = [PLAIN_INTERVAL_SECONDS * (i + 1) for i in range(len(etas))]
    threshold = max(progress.MIN_STALL_SECONDS, progress.STALL_FACTOR * 1.0)
    assert all(re.fullmatch(r"\d+s", eta) for eta, q in zip(etas, quiet) if q < threshold), etas
    assert all(eta == "" for eta, q in zip(etas, quiet) if q >= threshold), etas
    # When groups finish again, so does the ETA come back.
    clock.now += PLAIN_INTERVAL_SECONDS
    display.update(status(groups=20, done=12, locked=1))
    assert re.search(r"ETA \d+s$", plain_lines(stream)[-1])


def test_terminal_display_blanks_the_eta_of_a_stalled_run(clock):
    console = recording_console()
    with RunProgress(console=console) as display:
        display.update(status(groups=10, done=0))
        clock.now += 5
        display.update(status(groups=10, done=5, locked=1))
        clock.now += 5 + progress.MIN_STALL_SECONDS * 10
        display.update(status(groups=10, done=5, locked=1))

    final = console.export_text().rstrip("\n").rsplit("groups ", 1)[-1]
    assert "pending 4" in final and "ETA" not in final, final

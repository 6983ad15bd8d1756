"""The vocabularies of s3wq.model: a word means one thing, and a stop becomes an outcome in one place."""

from __future__ import annotations

import pytest

from s3wq.model import Outcome, RunStop


@pytest.mark.parametrize(
    ("stop", "outcome"),
    [
        (RunStop.TIMEOUT, Outcome.TIMEOUT),
        (RunStop.INTERRUPTED, Outcome.INTERRUPTED),
        # A lease that ran out before anyone took it is handed back, no attempt used, as a signal's stop is.
        (RunStop.EXPIRED, Outcome.INTERRUPTED),
        # A lost lock is its taker's, an unkillable run's is left to its lease: nothing is written for either.
        (RunStop.LOST, None),
        (RunStop.UNKILLABLE, None),
    ],
)
def test_each_stop_is_recorded_as_one_outcome_or_nothing(stop, outcome):
    assert stop.recorded_as is outcome

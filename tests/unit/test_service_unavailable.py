"""ServiceUnavailable as the runners judge it: by its class, its message in one line, carried across the host's wire as its kind."""

from __future__ import annotations

from multiprocessing import Pipe

import pytest
from hypothesis import given
from hypothesis import strategies as st

from s3wq.errors import S3wqError, ServiceUnavailable
from s3wq.host.run_ends import Raised, Returned, unavailable_service
from s3wq.host.wire import ProcessorEnd, RunCleanedUp, RunEnded, receive, send
from s3wq.model import Outcome
from s3wq.protocol.bodies import MAX_ERROR_CHARS
from s3wq.protocol.tracebacks import ErrorFrame
from s3wq.worker.breaker import failure_of


class EndpointDown(ServiceUnavailable):
    """A processor's own subclass."""


def test_a_service_unavailable_is_an_s3wq_error_and_its_subclasses_count():
    assert issubclass(ServiceUnavailable, S3wqError)
    assert unavailable_service(ServiceUnavailable("endpoint down")) == "endpoint down"
    assert unavailable_service(EndpointDown("breaker open")) == "breaker open"


@pytest.mark.parametrize("exc", [RuntimeError("service unavailable"), ValueError("ServiceUnavailable: x"), S3wqError("down")])
def test_any_other_exception_is_not_judged_by_its_text(exc):
    assert unavailable_service(exc) is None


def test_an_empty_message_is_named_by_the_class():
    assert unavailable_service(EndpointDown()) == "EndpointDown"


@given(st.text())
def test_the_message_is_one_line_within_what_a_lock_keeps(message):
    said = unavailable_service(ServiceUnavailable(message))
    assert said and "\n" not in said and "\r" not in said and len(said) <= MAX_ERROR_CHARS


def test_a_run_that_raised_it_is_handed_back_not_failed_even_if_it_left_work_behind():
    plain = failure_of(Raised("endpoint down", "Traceback...", ErrorFrame("p.py", 3, "process"), unavailable=True))
    assert (plain.kind, plain.error, plain.frame.line) == (Outcome.UNAVAILABLE, "endpoint down", 3)
    left = failure_of(Raised("endpoint down", unavailable=True, leftovers="1 thread (poller)"))
    assert left.kind == Outcome.UNAVAILABLE and left.error.startswith("endpoint down") and "1 thread (poller)" in left.error
    # The same text without the kind is an ordinary error: the worker never reads it from the words.
    assert failure_of(Raised("ServiceUnavailable: endpoint down")).kind == Outcome.ERROR
    assert failure_of(Returned()) is None


def test_the_kind_crosses_the_hosts_wire_both_hops():
    here, there = Pipe()
    try:
        end = ProcessorEnd(error="endpoint down", traceback="Traceback...", unavailable=True)
        send(here, RunEnded(end, (), ()))
        send(here, RunCleanedUp(end, "", False))
        assert receive(there).end.unavailable is True
        assert receive(there).end == end
        send(here, RunEnded(ProcessorEnd(error="boom"), (), ()))
        assert receive(there).end.unavailable is False
    finally:
        here.close()
        there.close()

"""The fault proxy's own promise, which every fault test reads: an exchange is in the journal before its client hears back."""

from __future__ import annotations

import time

import pytest
from botocore.exceptions import ClientError

from s3wq.store import make_s3_client

from .fault_proxy import Journal

# Long enough that a journal written after the answer would still be empty when the client has it.
SLOW_JOURNAL_SECONDS = 0.5


@pytest.mark.parametrize("fault", [None, "lost-500", "500"])
def test_a_client_that_has_its_answer_finds_the_exchange_journaled(fault_proxy, bucket, monkeypatch, fault):
    recorded = Journal.add

    def slow_add(journal, exchange):
        time.sleep(SLOW_JOURNAL_SECONDS)
        recorded(journal, exchange)

    monkeypatch.setattr(Journal, "add", slow_add)
    fault_proxy.set_plan(lambda request: fault if request.method == "PUT" and request.occurrence == 1 else None)
    monkeypatch.setenv("AWS_ENDPOINT_URL", fault_proxy.endpoint)
    client = make_s3_client()
    try:
        client.put_object(Bucket=bucket, Key="journal/probe", Body=b"x", IfNoneMatch="*")
    except ClientError:
        pass  # a lost response's retry meets our own write (412): what matters is what the journal holds
    puts = [e for e in fault_proxy.journal.exchanges if e.request.method == "PUT"]
    # Every PUT the client sent, the lost one and its retry, was journaled before the client had the answer.
    assert len(puts) == (1 if fault is None else 2), puts

"""The memory store (tests/memory_store.py) keeps the storage contract: the contract suite's single-process tests, run on it.

The property tests that use it (tests/unit/test_lease.py) rely on it being
a store like the others. Its races are not run: they start processes,
which cannot share a memory store; its one lock makes each operation atomic
between threads.
"""

from __future__ import annotations

import inspect
import threading

import pytest
from integration import test_backend_contract as contract
from memory_store import MemoryBackend

from s3wq.errors import BadKey, ObjectExists
from s3wq.store import Backend

CONTRACT_TESTS = {
    name: test for name, test in vars(contract).items() if name.startswith("test_") and "racers" not in inspect.signature(test).parameters
}
globals().update(CONTRACT_TESTS)


@pytest.fixture
def backend() -> MemoryBackend:
    return MemoryBackend()


@pytest.fixture
def workspace(backend) -> str:
    return backend.uri


def test_the_contract_suite_is_run_here():
    assert len(CONTRACT_TESTS) >= 20 and isinstance(MemoryBackend(), Backend)


def test_racing_creates_in_threads_have_exactly_one_winner(backend):
    barrier, won, lost = threading.Barrier(8), [], []

    def race(i: int) -> None:
        barrier.wait()
        try:
            backend.create("contract/raced", f"racer {i}".encode())
            won.append(i)
        except ObjectExists:
            lost.append(i)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(won) == 1 and len(lost) == 7
    assert backend.read("contract/raced").body == f"racer {won[0]}".encode()


@pytest.mark.parametrize("key", ["", "/abs", "a//b", "a/../b", "./a", "a\x00b"])
def test_a_key_no_store_takes_is_refused(backend, key):
    with pytest.raises(BadKey):
        backend.write(key, b"x")

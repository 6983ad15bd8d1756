"""The work a processor's pool runs: a module of its own, so that a spawned child that imports it to unpickle a job writes no host marker."""

from __future__ import annotations


def square(x: int) -> int:
    return x * x

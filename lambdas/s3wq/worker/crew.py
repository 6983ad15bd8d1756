"""What a worker's two halves share: the ``Claimer`` that takes its groups and the ``GroupRunner`` that runs them."""

from __future__ import annotations

from dataclasses import dataclass

from s3wq.config import WorkerSettings
from s3wq.host.runners import Runner
from s3wq.protocol.claims import ClaimProtocol
from s3wq.worker.budget import Budget
from s3wq.worker.finish import Finisher
from s3wq.worker.report import WorkerObserver, WorkerReport


@dataclass(frozen=True)
class Crew:
    """One worker's runner, protocol, settings, time, finisher, observer and report, built once by ``Worker``."""

    runner: Runner
    protocol: ClaimProtocol
    settings: WorkerSettings
    budget: Budget
    finisher: Finisher
    observer: WorkerObserver
    report: WorkerReport


class CrewMember:
    """A part of the worker that works with its crew: each shared part is an attribute of the same name."""

    def __init__(self, crew: Crew):
        self.runner = crew.runner
        self.protocol = crew.protocol
        self.settings = crew.settings
        self.budget = crew.budget
        self.finisher = crew.finisher
        self.observer = crew.observer
        self.report = crew.report

"""How old a file of a local-directory workspace is, on a clock no wall-clock step can move.

A lock is stale once it is older than its holder's lease, and the holder
counts that lease on CLOCK_BOOTTIME (:mod:`s3wq.protocol.clock`). A file's mtime is on
the wall clock, which NTP, an operator or a VM resume can step by any amount:
a step forward makes every live lock look stale at once, and a taker then
runs beside the holder. So on Linux every write records, in a user extended
attribute of the file (never in its bytes, which are the object), the
writer's machine id, boot id and CLOCK_BOOTTIME reading, and the file's
mtime. A reader on the same boot takes the age on CLOCK_BOOTTIME, which only
counts forward, suspend included, as the holder's lease does. A record from
another boot of this same machine was written before the machine last
booted: every process of that boot is gone, its holder with them.

The wall clock (``time.time() - mtime``) is still the age where there is no
record to trust: off Linux, on a filesystem without user extended
attributes, for a file written by hand or by an s3wq before these records,
for a file rewritten in place since its record (its mtime no longer the
recorded one), and for a record of another machine or of an unknown one.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

log = logging.getLogger("s3wq")

# The attribute every write of a local workspace carries (the "user." namespace: no privilege needed).
WRITE_RECORD_ATTRIBUTE = "user.s3wq.written"
_RECORD_VERSION = "s3wq1"
BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")
# systemd's, then D-Bus's copy of it (older distributions).
MACHINE_ID_PATHS = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))
# A process in a time namespace (Linux 5.6+: CRIU, `unshare --time`) reads
# CLOCK_BOOTTIME shifted by its namespace's offset; records hold the
# unshifted reading, so that readers in any namespace of one boot agree.
TIMENS_OFFSETS_PATH = Path("/proc/self/timens_offsets")
# The errors of a filesystem that keeps no user extended attributes (ENOTSUP is EOPNOTSUPP on Linux).
_NO_ATTRIBUTES = frozenset({errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM})
_NO_RECORD = _NO_ATTRIBUTES | {errno.ENODATA}
_ID_RE = re.compile(r"[0-9a-f-]{16,64}")


class AgeSource(StrEnum):
    """Which clock an age was read on."""

    BOOT_CLOCK = "boot_clock"  # CLOCK_BOOTTIME of the boot that wrote the file: no wall-clock step moves it
    EARLIER_BOOT = "earlier_boot"  # written before this machine last booted: older than any lease
    WALL_CLOCK = "wall_clock"  # the file's mtime against time.time(): moved by every wall-clock step


@dataclass(frozen=True)
class FileAge:
    seconds: float  # math.inf for EARLIER_BOOT
    source: AgeSource


@dataclass(frozen=True)
class WriteRecord:
    """Who wrote a file, and when on its boot's clock; of the version whose mtime is ``mtime_ns``."""

    machine_id: str
    boot_id: str
    boottime_ns: int
    mtime_ns: int

    def encode(self) -> bytes:
        return f"{_RECORD_VERSION} {self.machine_id or '-'} {self.boot_id} {self.boottime_ns} {self.mtime_ns}".encode("ascii")

    @classmethod
    def decode(cls, data: bytes) -> WriteRecord | None:
        """The record, or None for anything this version did not write."""
        try:
            version, machine_id, boot_id, boottime_ns, mtime_ns = data.decode("ascii").split(" ")
            if version != _RECORD_VERSION or not _ID_RE.fullmatch(boot_id):
                return None
            if machine_id != "-" and not _ID_RE.fullmatch(machine_id):
                return None
            return cls("" if machine_id == "-" else machine_id, boot_id, int(boottime_ns), int(mtime_ns))
        except (UnicodeDecodeError, ValueError):
            return None


def _read_id(path: Path) -> str:
    try:
        text = path.read_text(encoding="ascii").strip().lower()
    except (OSError, UnicodeDecodeError):
        return ""
    return text if _ID_RE.fullmatch(text) else ""


def _boottime_offset_ns() -> int:
    try:
        for line in TIMENS_OFFSETS_PATH.read_text().splitlines():
            name, seconds, nanoseconds = line.split()
            if name == "boottime":
                return int(seconds) * 1_000_000_000 + int(nanoseconds)
    except (OSError, ValueError):
        pass  # no time namespaces (before Linux 5.6): no offset
    return 0


class WallClockAges:
    """Ages from mtimes against the wall clock: what every platform without a boot clock gets."""

    def stamp(self, fd: int) -> None:
        """Nothing to record: the mtime is the record."""

    def age(self, fd: int, stat: os.stat_result) -> FileAge:
        return FileAge(max(0.0, time.time() - stat.st_mtime), AgeSource.WALL_CLOCK)


class BootClockAges(WallClockAges):
    """Ages on the writer's CLOCK_BOOTTIME, recorded in a user extended attribute of every file written (Linux).

    ``boot_id``, ``machine_id`` and ``boottime_ns`` are this machine's unless
    given: a test passes its own to play the writer of another boot.
    """

    def __init__(self, *, boot_id: str | None = None, machine_id: str | None = None, boottime_ns: Callable[[], int] | None = None):
        self.boot_id = boot_id if boot_id is not None else _read_id(BOOT_ID_PATH)
        self.machine_id = machine_id if machine_id is not None else next(filter(None, map(_read_id, MACHINE_ID_PATHS)), "")
        offset = _boottime_offset_ns()
        self._boottime_ns = boottime_ns or (lambda: time.clock_gettime_ns(time.CLOCK_BOOTTIME) - offset)
        self._unsupported_told = False

    def stamp(self, fd: int) -> None:
        """Record this write in the file before it is published; its mtime must be final (all bytes written)."""
        record = WriteRecord(self.machine_id, self.boot_id, self._boottime_ns(), os.fstat(fd).st_mtime_ns)
        try:
            os.setxattr(fd, WRITE_RECORD_ATTRIBUTE, record.encode())
        except OSError as exc:
            if exc.errno not in _NO_ATTRIBUTES:
                raise
            # The object itself is whole; only its age falls back to the wall clock.
            if not self._unsupported_told:
                self._unsupported_told = True
                log.warning("this filesystem keeps no user extended attributes: local lock ages fall back to the wall clock")

    def age(self, fd: int, stat: os.stat_result) -> FileAge:
        record = self._record(fd)
        if record is None or record.mtime_ns != stat.st_mtime_ns:
            # None written, or the file rewritten in place since (an editor, a tool that is not s3wq).
            return super().age(fd, stat)
        if record.boot_id == self.boot_id:
            return FileAge(max(0.0, (self._boottime_ns() - record.boottime_ns) / 1e9), AgeSource.BOOT_CLOCK)
        if self.machine_id and record.machine_id == self.machine_id:
            return FileAge(math.inf, AgeSource.EARLIER_BOOT)
        # Another machine's, or one that cannot say which it is: nothing to compare but the wall clock.
        return super().age(fd, stat)

    def _record(self, fd: int) -> WriteRecord | None:
        try:
            return WriteRecord.decode(os.getxattr(fd, WRITE_RECORD_ATTRIBUTE))
        except OSError as exc:
            if exc.errno in _NO_RECORD:
                return None
            raise


def default_ages() -> WallClockAges:
    """The boot clock where the platform has one (Linux: CLOCK_BOOTTIME, extended attributes, a boot id), else the wall clock."""
    if hasattr(time, "CLOCK_BOOTTIME") and hasattr(os, "setxattr") and _read_id(BOOT_ID_PATH):
        return BootClockAges()
    return WallClockAges()

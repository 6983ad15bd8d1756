"""Pages done: the pages each done flag records, summed, for ``status``, ``--watch``, ``work -j`` and the demo.

A count of groups (:mod:`s3wq.ops.status`) lists the done flags and reads
none; the pages are in the flags' bodies, so a sum of them reads each done
flag once. A :class:`PageTally` remembers every flag it has read (a group
stays done until a reset deletes its flag), so that ``--watch`` reads each
group's flag once, as it finishes; and it reads at most
MAX_FLAGS_READ new flags a count, so that a first count of a large
workspace costs seconds, not a GET per group: the pages of the flags it has
not read yet are estimated from those it has (``estimated``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

from s3wq.errors import ObjectNotFound
from s3wq.ops.status import catalog_groups, flag_partitions, iter_hashes
from s3wq.protocol.flags import pages_of
from s3wq.store import MAX_PARALLEL_REQUESTS, Backend, layout

# New done flags read a count: about a second of GETs at MAX_PARALLEL_REQUESTS in flight.
MAX_FLAGS_READ = 2_000


@dataclass(frozen=True)
class PagesDone:
    """The pages of a workspace's done groups: summed over the flags read, and estimated for the rest when some were not."""

    pages: int  # the sum, with the estimate for the done flags not read yet
    groups: int  # done groups whose flag records its pages
    unknown: int  # done groups whose flag records none (an older s3wq's, olmocr's, a processor that reports no pages)
    estimated: bool = False  # some done flags were not read yet: their pages are the others' mean

    @property
    def per_group(self) -> float | None:
        """Pages per done group so far, of the groups whose flag records them; None before the first."""
        return self.pages / self.groups if self.groups else None

    def remaining(self, groups_remaining: int) -> int | None:
        """Pages still to do, as groups remaining x pages per group so far; None before a group's pages are known."""
        per_group = self.per_group
        return None if per_group is None else round(groups_remaining * per_group)

    @classmethod
    def read(cls, document: dict) -> PagesDone:
        """The pages a document of them holds (:meth:`as_document`, as ``status --json`` prints it)."""
        return cls(document["pages"], document["groups"], document["unknown"], bool(document.get("estimated")))

    def as_document(self) -> dict[str, object]:
        return {**asdict(self), "per_group": None if self.per_group is None else round(self.per_group, 2)}


class PageTally:
    """Sums the pages of a workspace's done flags, reading each flag once across counts."""

    def __init__(self, backend: Backend, *, max_reads: int = MAX_FLAGS_READ):
        self.backend = backend
        self.max_reads = max_reads
        self._read: dict[str, int | None] = {}  # hash -> the pages its done flag records

    def count(self) -> PagesDone:
        done = self._done_hashes()
        # A flag read before and gone now was reset: its pages are done no more.
        self._read = {h: p for h, p in self._read.items() if h in done}
        fresh = [h for h in done if h not in self._read][: self.max_reads]
        with ThreadPoolExecutor(max_workers=MAX_PARALLEL_REQUESTS, thread_name_prefix="s3wq-pages") as pool:
            for hash_, pages in zip(fresh, pool.map(self._pages, fresh)):
                if pages is not False:
                    self._read[hash_] = pages
        known = [p for p in self._read.values() if p is not None]
        unread = len(done) - len(self._read)
        total = sum(known)
        groups = len(known)
        if unread > 0 and known:
            # Hashes are uniform, so the flags read are a fair sample of those not read.
            share = groups / len(self._read)
            total += round(unread * share * total / groups)
            groups += round(unread * share)
        return PagesDone(total, groups, len(done) - groups, estimated=unread > 0)

    def _done_hashes(self) -> set[str]:
        partitions = flag_partitions(self.backend, catalog_groups(self.backend))

        def listed(partition: str) -> list[str]:
            return list(iter_hashes(self.backend, layout.DONE_PREFIX, layout.DONE_SUFFIX, partition))

        with ThreadPoolExecutor(max_workers=MAX_PARALLEL_REQUESTS, thread_name_prefix="s3wq-pages") as pool:
            return {h for hashes in pool.map(listed, partitions) for h in hashes}

    def _pages(self, hash_: str) -> int | bool | None:
        """The pages group ``hash_``'s done flag records (None: none); False if the flag is gone (a reset)."""
        try:
            return pages_of(self.backend.read(layout.done_key(hash_)).body)
        except ObjectNotFound:
            return False

"""The delay queue: buckets (not tasks) ordered by expiration.

The wheels make insertion O(1); what remains is to know *when* the next bucket
expires. A binary heap of ``(expiration_ms, seq, bucket)`` answers that. It holds
buckets, not tasks, so its size is bounded by the number of buckets with work
(at most ``wheel_size`` per level), and a bucket is offered once per rotation
however many tasks it takes: heap cost is per bucket, not per task.

A bucket's expiration may change while its old heap entry is still queued (only
when a wheel's time moved past it without flushing it). Such stale entries are
skipped when they surface: :meth:`DelayQueue.poll_expired` yields a bucket only
if its expiration still equals the queued one. That is lazy deletion; the
``seq`` field keeps comparisons off the buckets themselves.

A bucket whose tasks were all cancelled stays queued too (Kafka's reaper polls
such a bucket and finds nothing). :meth:`DelayQueue.earliest_with_work` drops
those it finds at the front, so a reaper asking it sleeps until the first bucket
that holds tasks: in a server whose operations mostly complete before their
timeouts, most buckets end empty, and each would otherwise cost a wake-up. A
dropped bucket's expiration is unset, as a flush leaves it, so a task added to it
later offers it again.

The queue reports a new earliest expiration through ``on_earlier`` so that the
reaper, sleeping until the previous earliest one, can wake sooner.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from itertools import count

from .timer_list import TimerTaskList

__all__ = ["DelayQueue"]


def _ignore(expiration_ms: int) -> None:
    return None


class DelayQueue:
    """A min-heap of buckets by expiration, with lazy deletion of stale entries."""

    __slots__ = ("_heap", "_seq", "on_earlier")

    def __init__(self) -> None:
        # invariant: a heap; every live bucket with entries has a heap entry whose
        # expiration equals the bucket's (stale entries may remain besides)
        self._heap: list[tuple[int, int, TimerTaskList]] = []
        self._seq = count()
        #: called with the new earliest expiration when an offer moves it earlier
        self.on_earlier: Callable[[int], None] = _ignore

    def __len__(self) -> int:
        """Queued entries, stale ones included. O(1)."""
        return len(self._heap)

    def offer(self, bucket: TimerTaskList) -> None:
        """Queue ``bucket`` under its current expiration. O(log buckets)."""
        heap = self._heap
        expiration_ms = bucket.expiration_ms
        earlier = not heap or expiration_ms < heap[0][0]
        heapq.heappush(heap, (expiration_ms, next(self._seq), bucket))
        if earlier:
            self.on_earlier(expiration_ms)

    def earliest_with_work(self) -> int | None:
        """The earliest expiration of a queued bucket that holds tasks, or None.

        First drops the entries in front of it: stale ones, and those of empty
        buckets (whose expiration it unsets; see the module doc). O(1) when the
        front bucket holds tasks; O(log buckets) for each entry dropped.
        """
        heap = self._heap
        while heap:
            expiration_ms, _, bucket = heap[0]
            if bucket.expiration_ms == expiration_ms:
                if bucket:
                    return expiration_ms
                bucket.expiration_ms = -1  # empty: dropped, as a flush would leave it
            heapq.heappop(heap)
        return None

    def poll_expired(self, now_ms: int) -> TimerTaskList | None:
        """Remove and return the earliest bucket expiring at or before ``now_ms``.

        Stale entries met on the way are dropped. Returns None when nothing has
        expired. O(log buckets) amortised.
        """
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            expiration_ms, _, bucket = heapq.heappop(heap)
            if bucket.expiration_ms == expiration_ms:
                return bucket
        return None

    def buckets(self) -> list[TimerTaskList]:
        """The live (non-stale) queued buckets, in no particular order. O(n)."""
        return [b for e, _, b in self._heap if b.expiration_ms == e]

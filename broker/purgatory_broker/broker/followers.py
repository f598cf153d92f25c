"""Simulated followers and the ISR check: replication with lag, on asyncio.

The broker leads every partition. Its followers (replica ids, e.g. ``1..n``) keep
no data: each is a task that fetches from the leader through
:meth:`~.broker.Broker.fetch` with its replica id (a DelayedFetch with
``min_bytes=1``: it waits in the fetch purgatory until there is something past
its offset), takes the offset after the last batch returned
(:func:`~.storage.records.next_offset`), sleeps ``lag_ms`` and fetches again.
That next fetch reports the new offset as the follower's log end, which moves
the high watermark, which completes the waiting DelayedProduces and consumer
DelayedFetches. So an acks=-1 produce is answered about ``lag_ms`` after its
append::

    t=0       produce appends at 10..14      leader LEO 15, HW 10 (DelayedProduce waits)
    t=0+      follower 1's DelayedFetch at 10 completes with the batch
    t=lag     follower 1 fetches at 15       HW 15 (one follower) -> produce answered

Groups. A follower fetches a group of partitions in one request, as a Kafka
follower fetches all it follows from one leader: :meth:`Followers.follow` starts
one task per follower for the group it is given. The simulation follows all its
partitions as one group; the wire example adds a group of one partition for each
partition it creates. A partition answered with an error keeps its offset, and
the follower then waits ``error_backoff_ms`` instead of ``lag_ms``.

Pausing. :meth:`Followers.pause` (one follower, or all) holds a follower before
its next fetch until :meth:`Followers.resume`: the simulation's stall, the wire
example's REQUEST_TIMED_OUT test.

The ISR check. One task calls :meth:`~.broker.Broker.maybe_shrink_isr` every
``replica_lag_time_max_ms / 2``, as Kafka schedules it, so a paused follower
leaves the ISR and the high watermark moves on without it; it rejoins when a
fetch of its reaches the high watermark again.

``on_high_watermark(tp, hw)``, if set, is called each time a follower fetch or
an ISR shrink raises a high watermark (the wire example measures wake-up
latency with it). Lifecycle: :meth:`Followers.stop` lets each task finish its
current round (a fetch, an ISR interval) and waits for them;
:meth:`Followers.close` cancels them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from purgatory import TopicPartition

from .broker import Broker
from .delayed import FetchPartitionStatus
from .storage.records import next_offset

__all__ = ["DEFAULT_ERROR_BACKOFF_MS", "DEFAULT_FETCH_MAX_BYTES", "Followers", "HighWatermarkHook"]

log = logging.getLogger("purgatory_broker.broker")

#: Called with (partition, new high watermark) whenever a high watermark rises.
HighWatermarkHook = Callable[[TopicPartition, int], None]

#: A follower's per-partition fetch limit (Kafka's replica.fetch.max.bytes: 1 MiB).
DEFAULT_FETCH_MAX_BYTES = 1024 * 1024
#: The wait after a fetch in which a partition errored (Kafka's replica.fetch.backoff.ms
#: is 1 s; short here, so a simulated follower catches up quickly).
DEFAULT_ERROR_BACKOFF_MS = 50


class Followers:
    """The follower tasks of a broker's partitions and its ISR check; see module doc.

    Not thread-safe; runs on the broker's event loop.
    """

    def __init__(
        self,
        broker: Broker,
        follower_ids: Iterable[int],
        *,
        lag_ms: int,
        max_wait_ms: int = 500,
        fetch_max_bytes: int = DEFAULT_FETCH_MAX_BYTES,
        replica_lag_time_max_ms: int = 30_000,
        error_backoff_ms: int = DEFAULT_ERROR_BACKOFF_MS,
        on_high_watermark: HighWatermarkHook | None = None,
    ) -> None:
        if min(lag_ms, max_wait_ms, error_backoff_ms) < 0:
            raise ValueError(
                f"lag_ms, max_wait_ms and error_backoff_ms must be >= 0, not "
                f"{lag_ms}, {max_wait_ms}, {error_backoff_ms}"
            )
        if fetch_max_bytes < 1 or replica_lag_time_max_ms < 1:
            raise ValueError(
                f"fetch_max_bytes and replica_lag_time_max_ms must be >= 1, not "
                f"{fetch_max_bytes}, {replica_lag_time_max_ms}"
            )
        self.broker = broker
        self.follower_ids = tuple(follower_ids)
        self.lag_ms = lag_ms
        self.max_wait_ms = max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.error_backoff_ms = error_backoff_ms
        self.on_high_watermark = on_high_watermark
        # invariant: one event per follower id, set while that follower may fetch
        self._running = {rid: asyncio.Event() for rid in self.follower_ids}
        for event in self._running.values():
            event.set()
        self._tasks: set[asyncio.Task[None]] = set()  # the follower tasks still running
        self._isr_task: asyncio.Task[None] | None = None
        self._stopping = False
        self._closed = False

    # -- control ---------------------------------------------------------------

    def follow(self, partitions: Iterable[TopicPartition]) -> None:
        """Start one task per follower fetching ``partitions`` (already created) as one
        group, from each follower's current log end; start the ISR check with the
        first group. O(followers x partitions)."""
        if self._closed or self._stopping:
            raise RuntimeError("the followers are stopped")
        group = tuple(partitions)
        if not group:
            raise ValueError("a follower needs at least one partition to follow")
        loop = asyncio.get_running_loop()
        name = str(group[0]) if len(group) == 1 else f"{len(group)}-partitions"
        for rid in self.follower_ids:
            task = loop.create_task(self._follow(rid, group), name=f"follower-{rid}-{name}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if self._isr_task is None and self.follower_ids:
            self._isr_task = loop.create_task(self._check_isr(), name="isr-checker")

    @property
    def paused(self) -> bool:
        """True when every follower is paused. O(followers)."""
        return not any(event.is_set() for event in self._running.values())

    def pause(self, replica_id: int | None = None) -> None:
        """Hold follower ``replica_id`` (all if None) before its next fetch. O(followers)."""
        for event in self._events(replica_id):
            event.clear()

    def resume(self, replica_id: int | None = None) -> None:
        """Let follower ``replica_id`` (all if None) fetch again. O(followers)."""
        for event in self._events(replica_id):
            event.set()

    def _events(self, replica_id: int | None) -> list[asyncio.Event]:
        if replica_id is None:
            return list(self._running.values())
        return [self._running[replica_id]]

    def notify_if_moved(self, tp: TopicPartition, before: int) -> None:
        """Call the hook if ``tp``'s high watermark is above ``before``. O(1)."""
        hook = self.on_high_watermark
        if hook is None:
            return
        partition = self.broker.partition(tp)
        if partition is not None and partition.high_watermark > before:
            hook(tp, partition.high_watermark)

    # -- the tasks ---------------------------------------------------------------

    async def _follow(self, rid: int, group: tuple[TopicPartition, ...]) -> None:
        broker = self.broker
        running = self._running[rid]
        offsets: dict[TopicPartition, int] = {}
        for tp in group:
            partition = broker.partition(tp)
            if partition is None:
                raise ValueError(f"{tp} is not led by this broker")
            offsets[tp] = partition.replica(rid).log_end_offset
        fetch_max_bytes = self.fetch_max_bytes
        while not self._stopping:
            if not running.is_set():
                await running.wait()
                continue  # stopped meanwhile?
            hook = self.on_high_watermark
            before = None if hook is None else self._high_watermarks(group)
            op = broker.fetch(
                {
                    tp: FetchPartitionStatus(offset, fetch_max_bytes)
                    for tp, offset in offsets.items()
                },
                min_bytes=1,
                max_wait_ms=self.max_wait_ms,
                replica_id=rid,
            )
            if before is not None:
                for tp, hw in before.items():
                    self.notify_if_moved(tp, hw)
            errored = False
            for tp, data in (await op).items():
                if data.error_code:  # not NONE (0)
                    errored = True
                    log.debug("follower %d of %s: error %d", rid, tp, data.error_code)
                elif data.records:
                    offset = next_offset(data.records)
                    if offset is not None:
                        offsets[tp] = offset
            await asyncio.sleep((self.error_backoff_ms if errored else self.lag_ms) / 1000)

    def _high_watermarks(self, group: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        partitions = self.broker.partitions
        return {tp: partitions[tp].high_watermark for tp in group}

    async def _check_isr(self) -> None:
        interval_s = self.replica_lag_time_max_ms / 2000
        broker = self.broker
        while not self._stopping:
            await asyncio.sleep(interval_s)
            hook = self.on_high_watermark
            before = None if hook is None else self._high_watermarks(broker.partitions)
            for tp, rid in broker.maybe_shrink_isr():
                log.info("follower %d left the ISR of %s", rid, tp)
            if before is not None:
                for tp, hw in before.items():
                    self.notify_if_moved(tp, hw)

    # -- lifecycle ---------------------------------------------------------------

    async def stop(self) -> None:
        """Let every task finish its current round (a paused follower ends at once),
        then return. Idempotent. O(tasks), plus the wait for their rounds."""
        self._stopping = True
        self.resume()
        tasks = list(self._tasks)
        if self._isr_task is not None:
            tasks.append(self._isr_task)
        await asyncio.gather(*tasks)

    async def close(self) -> None:
        """Cancel every task and wait for them. Idempotent. O(tasks)."""
        self._closed = True
        tasks = list(self._tasks)
        if self._isr_task is not None:
            tasks.append(self._isr_task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()

    def __repr__(self) -> str:
        paused = sorted(rid for rid, event in self._running.items() if not event.is_set())
        return (
            f"<Followers {list(self.follower_ids)} lag_ms={self.lag_ms} "
            f"tasks={len(self._tasks)} paused={paused}>"
        )

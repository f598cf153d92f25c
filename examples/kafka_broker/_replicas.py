"""Simulated followers: replication with lag, so acks=all produces wait in the purgatory.

The wire broker leads every partition; its followers (replica ids ``1..n``) are
simulated the way :mod:`purgatory.broker.simulation` does it, one task per
(partition, follower): fetch from the follower's offset through the broker's
follower fetch (a DelayedFetch with ``min_bytes=1``, ``replica_id >= 0``), take
the offset after the last batch returned, sleep ``lag_ms``, fetch again. The
next fetch reports the new offset, which moves the high watermark, which
completes the waiting DelayedProduces and consumer DelayedFetches. So an acks=all
produce is answered about ``lag_ms`` after its append::

    t=0       produce appends at 10..14      leader LEO 15, HW 10 (DelayedProduce waits)
    t=0+      follower 1's DelayedFetch at 10 completes with the batch
    t=lag     follower 1 fetches at 15       HW 15 (one follower) -> produce answered

:meth:`FollowerReplicas.pause` stops every follower before its next fetch (the
REQUEST_TIMED_OUT test); :meth:`resume` lets them go on. An ISR task calls
:meth:`~purgatory.broker.Broker.maybe_shrink_isr` every half
``replica_lag_time_max_ms``, as Kafka does, so a paused follower eventually
leaves the ISR and the high watermark moves on without it.

``on_high_watermark(tp, hw)`` is called each time a follower fetch or an ISR
shrink raises a high watermark (the wake-up latency measurement uses it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from purgatory import TopicPartition
from purgatory.broker import Broker, ErrorCode, FetchPartitionStatus, RecordBatchHeader

__all__ = ["FollowerReplicas", "HighWatermarkHook"]

log = logging.getLogger(__name__)

#: Called with (partition, new high watermark) whenever a high watermark rises.
HighWatermarkHook = Callable[[TopicPartition, int], None]

_FOLLOWER_FETCH_MAX_BYTES = 1024 * 1024
_ERROR_BACKOFF_S = 0.05


def next_offset(records: bytes, current: int) -> int:
    """The offset after the last batch in ``records`` (``current`` if none). O(batches)."""
    position = 0
    result = current
    end = len(records)
    while position < end:
        header = RecordBatchHeader.parse(records, position)
        result = header.next_offset
        position += header.size_bytes
    return result


class FollowerReplicas:
    """The follower tasks of every partition of one broker; see module doc."""

    def __init__(
        self,
        broker: Broker,
        follower_ids: Iterable[int],
        *,
        lag_ms: int,
        max_wait_ms: int = 500,
        replica_lag_time_max_ms: int = 10_000,
        on_high_watermark: HighWatermarkHook | None = None,
    ) -> None:
        if lag_ms < 0 or max_wait_ms < 0:
            raise ValueError(f"lag_ms and max_wait_ms must be >= 0, not {lag_ms}, {max_wait_ms}")
        self.broker = broker
        self.follower_ids = tuple(follower_ids)
        self.lag_ms = lag_ms
        self.max_wait_ms = max_wait_ms
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.on_high_watermark = on_high_watermark
        self._running = asyncio.Event()
        self._running.set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._isr_task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    def pause(self) -> None:
        """Stop replicating: each follower waits before its next fetch. O(1)."""
        self._running.clear()

    def resume(self) -> None:
        """Replicate again. O(1)."""
        self._running.set()

    def add_partition(self, tp: TopicPartition) -> None:
        """Start one follower task per follower id for ``tp`` (already created). O(followers)."""
        if self._closed:
            raise RuntimeError("the followers are closed")
        for rid in self.follower_ids:
            task = asyncio.get_running_loop().create_task(
                self._follow(tp, rid), name=f"follower-{rid}-{tp}"
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        if self._isr_task is None and self.follower_ids:
            self._isr_task = asyncio.get_running_loop().create_task(
                self._check_isr(), name="isr-checker"
            )

    def notify_if_moved(self, tp: TopicPartition, before: int) -> None:
        """Call the hook if ``tp``'s high watermark is above ``before``. O(1)."""
        hook = self.on_high_watermark
        if hook is None:
            return
        partition = self.broker.partition(tp)
        if partition is not None and partition.high_watermark > before:
            hook(tp, partition.high_watermark)

    async def _follow(self, tp: TopicPartition, rid: int) -> None:
        broker = self.broker
        partition = broker.partition(tp)
        assert partition is not None
        offset = partition.replica(rid).log_end_offset
        while True:
            await self._running.wait()
            before = partition.high_watermark
            op = broker.fetch(
                {tp: FetchPartitionStatus(offset, _FOLLOWER_FETCH_MAX_BYTES)},
                min_bytes=1,
                max_wait_ms=self.max_wait_ms,
                replica_id=rid,
            )
            self.notify_if_moved(tp, before)
            data = (await op)[tp]
            if data.error_code != ErrorCode.NONE:
                log.debug("follower %d of %s: error %d", rid, tp, data.error_code)
                await asyncio.sleep(_ERROR_BACKOFF_S)
                continue
            offset = next_offset(data.records, offset)
            if self.lag_ms:
                await asyncio.sleep(self.lag_ms / 1000)

    async def _check_isr(self) -> None:
        interval_s = self.replica_lag_time_max_ms / 2000
        broker = self.broker
        while True:
            await asyncio.sleep(interval_s)
            before = {tp: p.high_watermark for tp, p in broker.partitions.items()}
            for tp, rid in broker.maybe_shrink_isr():
                log.info("follower %d left the ISR of %s", rid, tp)
            for tp, hw in before.items():
                self.notify_if_moved(tp, hw)

    async def close(self) -> None:
        """Cancel every task and wait for them. Idempotent."""
        self._closed = True
        tasks = list(self._tasks)
        if self._isr_task is not None:
            tasks.append(self._isr_task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()

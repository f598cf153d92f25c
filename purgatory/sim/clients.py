"""The simulation's clients: open-loop producers and long-polling consumers.

Both talk to the broker only through its public API (:class:`~purgatory.broker.Broker`'s
``produce`` and ``fetch``), as a Kafka client talks to a broker.

:class:`Producer`: open loop, so the load does not slow down when the broker
does. Inter-arrival times are exponential (a Poisson process at ``produce_rate
/ producers`` requests per second, from its own seeded generator); each request
is one batch of ``records_per_batch`` records to a random partition, acks=-1
(a DelayedProduce of ``produce_timeout_ms``). A record's value names its
producer, sequence number and index (``p0:s17:r2:...``, :func:`record_values`),
so the read-back can rebuild and check values and order without keeping them.

Falling behind. A producer sleeps until its next arrival when it is ahead of
schedule; when it is behind (the loop cannot keep up with the offered rate) it
still yields to the loop once per request (``asyncio.sleep(0)``), so followers,
consumers, the purgatories' timers and a Ctrl-C get their turn, and the run
stops on time. Nothing queues up: a request that is late is simply sent late,
so the achieved rate is what the broker sustains, and :attr:`Producer.behind_s`
says how far behind schedule the producer was when it stopped.

Memory. Requests still waiting for their answer are kept with their operation
(at most ``produce_timeout_ms`` worth of them); once answered, a request is kept
as a small :class:`Ack` (offsets and error code, no values, no operation), in the
order it was sent.

:class:`Consumer`: fetches its share of the partitions (partition ``i`` goes to
consumer ``i % consumers``) up to the high watermark, waiting in a DelayedFetch
for ``fetch_min_bytes`` or ``fetch_max_wait_ms``, and counts the records it
gets by their batch headers; after an error (partition 0 during the leader
change) it waits 10 ms.
"""

from __future__ import annotations

import asyncio
import random
import struct
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from purgatory import TopicPartition
from purgatory.broker import (
    Broker,
    DelayedProduce,
    ErrorCode,
    FetchPartitionStatus,
    build_batch,
)

from .config import SimulationConfig

__all__ = ["CONSUMER_ERROR_BACKOFF_S", "Ack", "Consumer", "Producer", "record_values"]

#: a consumer's wait after a fetch in which a partition errored
CONSUMER_ERROR_BACKOFF_S = 0.01

# base offset, batch length (at 0 and 8); last offset delta (at 23); records count (at 57)
_BASE_AND_LENGTH = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_LOG_OVERHEAD_BYTES = 12


def _wake(waiter: asyncio.Future[None]) -> None:
    """A producer's arrival is due: resume it (unless it was cancelled meanwhile)."""
    if not waiter.done():
        waiter.set_result(None)


def record_values(producer: int, seq: int, records: int, record_bytes: int) -> list[bytes]:
    """The values of producer ``producer``'s request ``seq``: ``p0:s17:r2:`` padded
    with dots to ``record_bytes``. O(records x record_bytes)."""
    prefix = b"p%d:s%d:r" % (producer, seq)
    return [(b"%s%d:" % (prefix, i)).ljust(record_bytes, b".") for i in range(records)]


@dataclass(frozen=True, slots=True)
class Ack:
    """One answered produce request: where it went, what it held, and its answer."""

    tp: TopicPartition
    producer: int
    seq: int
    records: int
    record_bytes: int
    error_code: int
    base_offset: int  # -1 unless error_code is NONE

    @property
    def values(self) -> list[bytes]:
        """The record values it sent (rebuilt, see :func:`record_values`)."""
        return record_values(self.producer, self.seq, self.records, self.record_bytes)


class Producer:
    """One open-loop producer; see the module doc. Each request is O(batch bytes)."""

    def __init__(
        self,
        broker: Broker,
        config: SimulationConfig,
        producer_id: int,
        partitions: Sequence[TopicPartition],
    ) -> None:
        self.broker = broker
        self.config = config
        self.producer_id = producer_id
        self.partitions = partitions
        self.acks: list[Ack] = []  # answered requests, in the order sent
        # requests waiting for their answer, in the order sent: (partition, seq, op)
        self.in_flight: deque[tuple[TopicPartition, int, DelayedProduce]] = deque()
        self.unanswered = 0  # requests never answered (the broker closed first)
        self.sent = 0
        self.behind_s = 0.0  # how far behind schedule it was when it stopped

    async def run(self, start_s: float, stopping: Callable[[], bool]) -> None:
        """Produce from ``start_s`` (``time.monotonic()``) until ``stopping()``, or
        until cancelled: it is cancelled only while it waits for its next arrival,
        never inside a request."""
        cfg = self.config
        pid = self.producer_id
        tps = self.partitions
        rng = random.Random(cfg.seed * 1000 + pid)
        rate = cfg.produce_rate / cfg.producers
        records, record_bytes = cfg.records_per_batch, cfg.record_bytes
        produce = self.broker.produce
        timeout_ms = cfg.produce_timeout_ms
        in_flight = self.in_flight
        monotonic = time.monotonic
        loop = asyncio.get_running_loop()
        create_future, call_later = loop.create_future, loop.call_later
        seq = 0
        next_s = start_s
        try:
            while not stopping():
                next_s += rng.expovariate(rate)
                delay = next_s - monotonic()
                # ahead of schedule: wait; behind: yield all the same (see the module doc)
                if delay > 0:  # asyncio.sleep(delay) without looking the loop up each time
                    waiter = create_future()
                    timer = call_later(delay, _wake, waiter)
                    try:
                        await waiter
                    finally:
                        timer.cancel()
                else:
                    await asyncio.sleep(0)
                if stopping():
                    break
                tp = tps[rng.randrange(len(tps))]
                batch = build_batch(record_values(pid, seq, records, record_bytes))
                in_flight.append((tp, seq, produce({tp: batch}, acks=-1, timeout_ms=timeout_ms)))
                seq += 1
                while in_flight and in_flight[0][2].is_done:
                    self._settle(*in_flight.popleft())
        finally:  # stopped, or cancelled while it waited for its next arrival
            self.sent = seq
            self.behind_s = max(0.0, monotonic() - next_s)

    def settle_all(self) -> None:
        """Keep every answered request as an :class:`Ack`; count the rest as
        unanswered. After the broker closed. O(requests in flight)."""
        while self.in_flight:
            self._settle(*self.in_flight.popleft())

    def _settle(self, tp: TopicPartition, seq: int, op: DelayedProduce) -> None:
        if not op.is_completed:
            self.unanswered += 1  # cancelled: the broker closed before it was answered
            return
        answer = op.result()[tp]
        cfg = self.config
        self.acks.append(
            Ack(
                tp,
                self.producer_id,
                seq,
                cfg.records_per_batch,
                cfg.record_bytes,
                answer.error_code,
                answer.base_offset,
            )
        )

    def pending(self) -> list[DelayedProduce]:
        """The requests still waiting for their answer. O(requests in flight)."""
        return [op for _, _, op in self.in_flight if not op.is_done]


def count_records(records: bytes) -> tuple[int, int]:
    """(records, next offset) of the concatenated batches of a fetch answer, from
    their headers alone (the broker verified them). O(batches)."""
    count = 0
    next_offset = -1
    position = 0
    end = len(records)
    unpack = _BASE_AND_LENGTH.unpack_from
    unpack_int = _INT32.unpack_from
    while position < end:
        base_offset, batch_length = unpack(records, position)
        count += unpack_int(records, position + 57)[0]
        next_offset = base_offset + unpack_int(records, position + 23)[0] + 1
        position += batch_length + _LOG_OVERHEAD_BYTES
    return count, next_offset


class Consumer:
    """One long-polling consumer; see the module doc. Each fetch is O(batches returned)."""

    def __init__(
        self, broker: Broker, config: SimulationConfig, partitions: Sequence[TopicPartition]
    ) -> None:
        self.broker = broker
        self.config = config
        self.partitions = partitions
        self.consumed_records = 0

    async def run(self, finished: Callable[[], bool]) -> None:
        """Fetch from offset 0 until ``finished()``, one round at a time."""
        cfg = self.config
        if not self.partitions:
            return
        offsets = dict.fromkeys(self.partitions, 0)
        while not finished():
            requests = {
                tp: FetchPartitionStatus(offset, cfg.fetch_max_bytes)
                for tp, offset in offsets.items()
            }
            op = self.broker.fetch(
                requests, min_bytes=cfg.fetch_min_bytes, max_wait_ms=cfg.fetch_max_wait_ms
            )
            response = await op
            errored = False
            for tp, data in response.items():
                if data.error_code != ErrorCode.NONE:
                    errored = True
                elif data.records:
                    count, offsets[tp] = count_records(data.records)
                    self.consumed_records += count
            if errored:
                await asyncio.sleep(CONSUMER_ERROR_BACKOFF_S)

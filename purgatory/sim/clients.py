"""The simulation's clients: open-loop producers and long-polling consumers.

Both talk to the broker only through its public API (:class:`~purgatory.broker.Broker`'s
``produce`` and ``fetch``), as a Kafka client talks to a broker.

:class:`Producer`: open loop, so the load does not slow down when the broker
does. Inter-arrival times are exponential (a Poisson process at ``produce_rate
/ producers`` requests per second, from its own seeded generator); each request
is one batch of ``records_per_batch`` records to a random partition, acks=-1
(a DelayedProduce of ``produce_timeout_ms``). A record's value names its
producer, sequence number and index (``p0:s17:r2:...``), so the read-back can
check values and order. Every request is kept as an :class:`Ack`.

:class:`Consumer`: fetches its share of the partitions (partition ``i`` goes to
consumer ``i % consumers``) up to the high watermark, waiting in a DelayedFetch
for ``fetch_min_bytes`` or ``fetch_max_wait_ms``, and counts the records it
gets; after an error (partition 0 during the leader change) it waits 10 ms.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from purgatory import TopicPartition
from purgatory.broker import (
    Broker,
    DelayedProduce,
    ErrorCode,
    FetchPartitionStatus,
    RecordBatchHeader,
    build_batch,
    iter_batches,
)

from .config import SimulationConfig

__all__ = ["CONSUMER_ERROR_BACKOFF_S", "Ack", "Consumer", "Producer"]

#: a consumer's wait after a fetch in which a partition errored
CONSUMER_ERROR_BACKOFF_S = 0.01


@dataclass(slots=True)
class Ack:
    """One produce request: where it went, what it held, and its (maybe pending) answer."""

    tp: TopicPartition
    producer: int
    seq: int
    values: list[bytes]
    op: DelayedProduce


class Producer:
    """One open-loop producer; see the module doc. Each request is O(batch bytes)."""

    def __init__(
        self,
        broker: Broker,
        config: SimulationConfig,
        producer_id: int,
        partitions: Sequence[TopicPartition],
        acks: list[Ack],
    ) -> None:
        self.broker = broker
        self.config = config
        self.producer_id = producer_id
        self.partitions = partitions
        self.acks = acks  # shared by all producers, in request order

    async def run(self, start_s: float, stopping: Callable[[], bool]) -> None:
        """Produce from ``start_s`` (``time.monotonic()``) until ``stopping()``."""
        cfg = self.config
        pid = self.producer_id
        tps = self.partitions
        rng = random.Random(cfg.seed * 1000 + pid)
        rate = cfg.produce_rate / cfg.producers
        seq = 0
        next_s = start_s
        while not stopping():
            next_s += rng.expovariate(rate)
            delay = next_s - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if stopping():
                break
            tp = tps[rng.randrange(len(tps))]
            values = [
                f"p{pid}:s{seq}:r{i}:".encode().ljust(cfg.record_bytes, b".")
                for i in range(cfg.records_per_batch)
            ]
            batch = build_batch(values)
            op = self.broker.produce({tp: batch}, acks=-1, timeout_ms=cfg.produce_timeout_ms)
            self.acks.append(Ack(tp, pid, seq, values, op))
            seq += 1


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
                    for batch in iter_batches(data.records, check_crc=False):
                        header = RecordBatchHeader.parse(batch)
                        self.consumed_records += header.records_count
                        offsets[tp] = header.next_offset
            if errored:
                await asyncio.sleep(CONSUMER_ERROR_BACKOFF_S)

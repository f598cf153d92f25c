"""The simulation's clients: open-loop producers and long-polling consumers.

Both talk to the broker only through its public API (:class:`~purgatory_broker.broker.Broker`'s
``produce`` and ``fetch``), as a Kafka client talks to a broker.

:class:`Producer`: open loop, so the load does not slow down when the broker
does. Inter-arrival times are exponential (a Poisson process at ``produce_rate
/ producers`` requests per second, from its own seeded generator); each request
is one batch of ``records_per_batch`` records to a random partition, acks=-1
(a DelayedProduce of ``produce_timeout_ms``). A record's value names its
producer, sequence number and index (``p0:s17:r2:...``, :func:`record_values`),
so the read-back can rebuild and check values and order without keeping them.

One sender for all producers (:func:`run_producers`), as application threads
share one Kafka producer, with Kafka's ``linger.ms`` (``linger_ms``, 5 ms by
default as since Kafka 4.0): when the earliest unsent request arrives at ``t``,
the sender wakes at ``t + linger_ms`` and sends every request that has arrived
by then, in arrival order, each still its own produce request of one batch (so
the request rate is the offered rate; a Kafka producer would also merge records
of one partition into one batch, which this one does not). A request is thus
sent between its arrival and ``linger_ms`` after it, never before; the broker's
figures (latency, expiry) count from the moment it is sent. Two wake-ups are more
than ``linger_ms`` apart (the next one waits for an arrival after the previous
wake-up), so the sender wakes at most ``1000 / linger_ms`` times a second
whatever the rate: at the default 1,500 requests/s about 175 times, each
sending about 8 requests, instead of about 400 (``linger_ms`` 0: each wake-up
at the earliest arrival, sending what arrived by then). On a virtual machine
each timed wake-up costs tens of microseconds of CPU on cold caches
(BENCHMARKS.md), so fewer, fuller wake-ups are most of what the default run
costs less. After every :data:`SEND_CHUNK` requests of one wake-up the sender
yields to the loop (about 1 ms of work): the first wake-up of a saturated run
finds ``linger_ms`` of arrivals due at once (5,000 at 1,000,000 offered), and
sending them in one go would hold the loop for a quarter of a second (fetch
expiry lateness p99 15-35 ms measured, against 1 ms). Each producer keeps its
own generator, so its arrivals and partition choices are those of a task of its
own.

Falling behind. The sender sleeps while the producers are ahead of schedule;
when the earliest arrival is already more than ``linger_ms`` past (the loop
cannot keep up with the offered rate) it still yields to the loop before each such
request (``asyncio.sleep(0)``), so followers, consumers, the purgatories'
timers and a Ctrl-C get their turn, and the run stops on time.
Nothing queues up: a request that is late is simply sent late, so the achieved
rate is what the broker sustains, and :attr:`Producer.behind_s` says how far
behind schedule the producer was when it stopped.

Time. Arrival times are in seconds of the running loop's clock (``loop.time()``),
which its timers count in too: real time on asyncio's loop and on uvloop (whose
clock counts whole milliseconds), virtual time on
:class:`purgatory.testing.VirtualTimeLoop`, where sending takes no time and the
sender is never behind. Each batch carries a timestamp, as a Kafka producer's
records do (CreateTime): the wall clock by default (:func:`wall_clock_ms`), the
run's clock in virtual time, so that the logs written are the same every time.

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
import functools
import math
import random
import struct
import time
from collections import deque
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import NamedTuple

from purgatory import TopicPartition
from purgatory_broker.broker import (
    Broker,
    DelayedProduce,
    FetchPartitionStatus,
    build_batch,
)

from .config import SimulationConfig

__all__ = [
    "CONSUMER_ERROR_BACKOFF_S",
    "SEND_CHUNK",
    "Ack",
    "Consumer",
    "Producer",
    "record_values",
    "run_producers",
    "send_due",
    "wall_clock_ms",
]

#: a consumer's wait after a fetch in which a partition errored
CONSUMER_ERROR_BACKOFF_S = 0.01
#: requests the sender sends between two yields to the loop (about 1 ms of work)
SEND_CHUNK = 16

#: a producer's next arrival time (``Producer.next_s``), read in C by ``min``
_next_arrival = attrgetter("next_s")

# base offset, batch length (at 0 and 8); last offset delta (at 23); records count (at 57)
_BASE_AND_LENGTH = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_LOG_OVERHEAD_BYTES = 12


def wall_clock_ms() -> int:
    """The system's wall clock in milliseconds since the epoch: a Kafka producer's
    record timestamps (CreateTime). O(1)."""
    return time.time_ns() // 1_000_000


def _exponential_s(rng: random.Random, rate: float) -> float:
    """An exponential inter-arrival time at ``rate`` a second: what
    ``rng.expovariate(rate)`` returns, computed as it computes it (the same numbers
    from the same seed), without its Python frame. O(1)."""
    return -math.log(1.0 - rng.random()) / rate


def _index_below(rng: random.Random, n: int) -> int:
    """A uniform index in ``[0, n)``, ``n >= 1``: what ``rng.randrange(n)`` returns
    (the same numbers from the same seed: ``n``'s bit length of random bits, drawn
    again while out of range), without its two Python frames. O(1) expected."""
    bits = n.bit_length()
    index = rng.getrandbits(bits)
    while index >= n:
        index = rng.getrandbits(bits)
    return index


def _wake(waiter: asyncio.Future[None]) -> None:
    """A producer's arrival is due: resume it (unless it was cancelled meanwhile)."""
    if not waiter.done():
        waiter.set_result(None)


def record_values(producer: int, seq: int, records: int, record_bytes: int) -> list[bytes]:
    """The values of producer ``producer``'s request ``seq``: ``p0:s17:r2:`` padded
    with dots to ``record_bytes`` (longer if it does not fit). O(records x
    record_bytes): the request's prefix formatted once, each value that prefix and its
    index's tail, the tails shared by the requests whose prefixes are as long."""
    prefix = b"p%d:s%d:r" % (producer, seq)
    return [prefix + tail for tail in _record_tails(record_bytes - len(prefix), records)]


@functools.lru_cache(maxsize=64)
def _record_tails(width: int, records: int) -> tuple[bytes, ...]:
    """The ends of ``records`` values after a prefix: ``2:`` padded with dots to
    ``width`` bytes. A simulation asks for a handful (a prefix's length changes
    with its sequence number's digits). O(records x width) on a miss."""
    return tuple((b"%d:" % i).ljust(width, b".") for i in range(records))


class Ack(NamedTuple):
    """One answered produce request: where it went, what it held, and its answer.
    One is kept per request: a named tuple, as the broker's per-request values
    (why: :mod:`purgatory_broker.broker.delayed`)."""

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

    # an extension type in the compiled build (clients.pxd): its fields C struct members
    __slots__ = (
        "_rate",
        "_rng",
        "acks",
        "behind_s",
        "broker",
        "config",
        "in_flight",
        "next_s",
        "partitions",
        "producer_id",
        "sent",
        "timestamp_ms",
        "unanswered",
    )

    def __init__(
        self,
        broker: Broker,
        config: SimulationConfig,
        producer_id: int,
        partitions: Sequence[TopicPartition],
        *,
        timestamp_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.broker = broker
        self.timestamp_ms = timestamp_ms  # stamps each batch (Kafka's CreateTime)
        self.config = config
        self.producer_id = producer_id
        self.partitions = partitions
        self.acks: list[Ack] = []  # answered requests, in the order sent
        # requests waiting for their answer, in the order sent: (partition, seq, op)
        self.in_flight: deque[tuple[TopicPartition, int, DelayedProduce]] = deque()
        self.unanswered = 0  # requests never answered (the broker closed first)
        self.sent = 0
        self.behind_s = 0.0  # how far behind schedule it was when it stopped
        self._rng = random.Random(config.seed * 1000 + producer_id)
        self._rate = config.produce_rate / config.producers
        self.next_s = 0.0  # when its next request is due (the loop's time, seconds)

    def start(self, start_s: float) -> None:
        """Schedule the first arrival after ``start_s`` (the loop's time). O(1)."""
        self.next_s = start_s + _exponential_s(self._rng, self._rate)

    def send(self) -> None:
        """Send the request due at :attr:`next_s` and schedule the next one; keep the
        requests answered meanwhile as :class:`Ack`. O(batch bytes)."""
        cfg = self.config
        tps = self.partitions
        rng = self._rng
        seq = self.sent
        tp = tps[_index_below(rng, len(tps))]
        batch = build_batch(
            record_values(self.producer_id, seq, cfg.records_per_batch, cfg.record_bytes),
            base_timestamp_ms=self.timestamp_ms(),
        )
        in_flight = self.in_flight
        in_flight.append(
            (tp, seq, self.broker.produce({tp: batch}, acks=-1, timeout_ms=cfg.produce_timeout_ms))
        )
        self.sent = seq + 1
        self.next_s += _exponential_s(rng, self._rate)
        while in_flight and in_flight[0][2].is_done:
            self._settle(*in_flight.popleft())

    def stop(self, now_s: float) -> None:
        """Note how far behind schedule it is at ``now_s``. O(1)."""
        self.behind_s = max(0.0, now_s - self.next_s)

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
        # tuple.__new__: no Python frame (see the module doc of the broker's delayed)
        self.acks.append(
            tuple.__new__(
                Ack,
                (
                    tp,
                    self.producer_id,
                    seq,
                    cfg.records_per_batch,
                    cfg.record_bytes,
                    answer.error_code,
                    answer.base_offset,
                ),
            )
        )

    def pending(self) -> list[DelayedProduce]:
        """The requests still waiting for their answer. O(requests in flight)."""
        return [op for _, _, op in self.in_flight if not op.is_done]


def send_due(producers: Sequence[Producer], now_s: float, limit: int) -> int:
    """Send the requests that have arrived by ``now_s`` (the loop's time), in
    arrival order over all producers, at most ``limit``; how many were sent.
    O(producers) per request."""
    sent = 0
    while sent < limit:
        earliest = min(producers, key=_next_arrival)  # a C getter: no call per producer
        if earliest.next_s > now_s:
            break
        earliest.send()
        sent += 1
    return sent


async def run_producers(
    producers: Sequence[Producer],
    start_s: float,
    stopping: Callable[[], bool],
    linger_s: float = 0.0,
) -> int:
    """Drive every producer from ``start_s`` (the running loop's ``loop.time()``) until
    ``stopping()``, or until cancelled: it is cancelled only while it waits, never
    inside a request. See the module doc ("One sender for all producers").

    Each turn waits until ``linger_s`` after the earliest unsent arrival, then
    sends every request arrived by then (:func:`send_due`), yielding to the loop
    after every :data:`SEND_CHUNK` of them; when that moment is
    already past, the turn only yields and sends the earliest request. Returns the
    timed wake-ups it took (they are more than ``linger_s`` apart). O(producers)
    per request, plus the requests.
    """
    if linger_s < 0:
        raise ValueError(f"linger_s must be >= 0, not {linger_s}")
    loop = asyncio.get_running_loop()
    now = loop.time  # the clock call_later counts in: virtual on a virtual loop
    create_future, call_later = loop.create_future, loop.call_later
    wakeups = 0
    for producer in producers:
        producer.start(start_s)
    try:
        while not stopping():
            earliest = min(producers, key=_next_arrival)
            delay = earliest.next_s + linger_s - now()
            if delay <= 0:  # behind: yield all the same, once per request (module doc)
                await asyncio.sleep(0)
                if stopping():
                    break
                earliest.send()
                continue
            # ahead: asyncio.sleep(delay) without looking the loop up each time
            waiter = create_future()
            timer = call_later(delay, _wake, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
            wakeups += 1
            if stopping():
                break
            due_s = now()
            while send_due(producers, due_s, SEND_CHUNK) == SEND_CHUNK:
                await asyncio.sleep(0)  # more are due: let the loop breathe first
                if stopping():
                    break
    finally:  # stopped, or cancelled while it waited
        now_s = now()
        for producer in producers:
            producer.stop(now_s)
    return wakeups


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
                if data.error_code:  # not NONE (0)
                    errored = True
                elif data.records:
                    count, offsets[tp] = count_records(data.records)
                    self.consumed_records += count
            if errored:
                await asyncio.sleep(CONSUMER_ERROR_BACKOFF_S)

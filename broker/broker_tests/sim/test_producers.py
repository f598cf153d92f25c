"""The producers' shared task: each producer keeps the schedule it would have alone.

The runs are in virtual time (:func:`purgatory.testing.run_in_virtual_time`): sending
takes no time there, so what the sender does at each moment is exact, and a run
that stops after a number of requests is the same run on any machine. The time
limit in ``after`` is only a guard against a run that never gets there.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from purgatory_broker.broker import Broker, ErrorCode
from purgatory_broker.sim import SimulationConfig
from purgatory_broker.sim.clients import (
    SEND_CHUNK,
    Producer,
    _exponential_s,
    _index_below,
    record_values,
    run_producers,
    send_due,
)

from purgatory import TopicPartition
from purgatory.testing import run_in_virtual_time

HANG_GUARD_S = 60.0


def now_s() -> float:
    return asyncio.get_running_loop().time()


def after(producers: list[Producer], requests: int, start_s: float) -> Callable[[], bool]:
    """A ``stopping`` for run_producers: once ``requests`` are sent (or, as a guard,
    HANG_GUARD_S of the loop's time after ``start_s``: the test's count then fails)."""

    def stopping() -> bool:
        sent = sum(p.sent for p in producers)
        return sent >= requests or now_s() - start_s > HANG_GUARD_S

    return stopping


def in_virtual_time(test: Callable[[Path], Coroutine[Any, Any, None]]) -> Callable[[Path], None]:
    """Make an async test over ``tmp_path`` a plain one that runs in virtual time."""

    def virtual(tmp_path: Path) -> None:
        run_in_virtual_time(test(tmp_path))

    virtual.__name__ = test.__name__
    virtual.__doc__ = test.__doc__
    return virtual


def _broker(tmp_path: Path, tps: list[TopicPartition]) -> Broker:
    broker = Broker(tmp_path)
    for tp in tps:
        broker.create_partition(tp)  # no followers: an acks=-1 produce is answered at once
    return broker


@in_virtual_time
async def test_each_producer_keeps_its_own_schedule_in_the_shared_task(tmp_path: Path) -> None:
    config = SimulationConfig(seed=7, produce_rate=400.0, producers=3, records_per_batch=2)
    tps = [TopicPartition("sim", p) for p in range(4)]
    broker = _broker(tmp_path, tps)
    producers = [Producer(broker, config, pid, tps) for pid in range(config.producers)]
    start_s = now_s()
    async with broker:
        await run_producers(producers, start_s, after(producers, 60, start_s))
    for producer in producers:
        producer.settle_all()
    assert sum(p.sent for p in producers) >= 60
    rate = config.produce_rate / config.producers
    for producer in producers:
        # the draws of a producer running alone: its first arrival, then per request
        # the partition and the next arrival
        rng = random.Random(config.seed * 1000 + producer.producer_id)
        arrival_s = start_s + rng.expovariate(rate)
        expected = []
        for _ in range(producer.sent):
            expected.append(tps[rng.randrange(len(tps))])
            arrival_s += rng.expovariate(rate)
        assert [ack.tp for ack in producer.acks] == expected
        assert [ack.seq for ack in producer.acks] == list(range(producer.sent))
        assert all(ack.error_code == ErrorCode.NONE for ack in producer.acks)
        assert producer.unanswered == 0
        assert producer.next_s == arrival_s  # the next arrival, not yet sent


def _producers(
    tmp_path: Path, config: SimulationConfig, kind: type[Producer] = Producer
) -> tuple[Broker, list[Producer]]:
    tps = [TopicPartition("sim", p) for p in range(4)]
    broker = _broker(tmp_path, tps)
    return broker, [kind(broker, config, pid, tps) for pid in range(config.producers)]


#: what a _LoggedProducer sends: (arrival, moment sent, producer id), all producers
SendLog = list[tuple[float, float, int]]


class _LoggedProducer(Producer):
    """A producer that logs each send in its ``log`` (a subclass: the compiled
    ``Producer`` has no instance dictionary to wrap ``send`` in)."""

    log: SendLog

    def send(self) -> None:
        self.log.append((self.next_s, now_s(), self.producer_id))
        super().send()


def _logged_producers(
    tmp_path: Path, config: SimulationConfig, log: SendLog
) -> tuple[Broker, list[Producer]]:
    broker, producers = _producers(tmp_path, config, _LoggedProducer)
    for producer in producers:
        assert isinstance(producer, _LoggedProducer)
        producer.log = log
    return broker, producers


@in_virtual_time
async def test_send_due_sends_every_arrival_by_then_in_arrival_order(tmp_path: Path) -> None:
    config = SimulationConfig(seed=3, produce_rate=2000.0, producers=4, records_per_batch=1)
    log: SendLog = []
    broker, producers = _logged_producers(tmp_path, config, log)
    async with broker:
        for producer in producers:
            producer.start(100.0)  # a made-up clock: send_due only compares with now_s
        arrivals = sorted(
            (p.next_s, p.producer_id) for p in producers if p.next_s <= 100.01
        )  # the first arrival of each producer due by then; later ones are drawn as sent
        sent = send_due(producers, 100.01, 1000)
    assert sent == len(log) >= len(arrivals) >= 1
    assert [arrival for arrival, _, _ in log] == sorted(arrival for arrival, _, _ in log)
    assert all(arrival <= 100.01 for arrival, _, _ in log)
    assert all(p.next_s > 100.01 for p in producers)  # nothing due is left behind
    assert send_due(producers, 100.01, 1000) == 0


@in_virtual_time
async def test_the_sender_lingers_never_sends_early_and_wakes_linger_apart(
    tmp_path: Path,
) -> None:
    config = SimulationConfig(seed=5, produce_rate=1500.0, producers=4, records_per_batch=1)
    log: SendLog = []
    broker, producers = _logged_producers(tmp_path, config, log)
    linger_s = 0.02
    start_s = now_s()
    async with broker:
        wakeups = await run_producers(
            producers, start_s, after(producers, 200, start_s), linger_s=linger_s
        )
    elapsed_s = now_s() - start_s
    assert len(log) == sum(p.sent for p in producers) >= 200
    # never early, and (sending takes no virtual time) never later than the linger
    assert all(arrival_s <= sent_s <= arrival_s + linger_s for arrival_s, sent_s, _ in log)
    # each wake-up waits for an arrival after the previous one, plus the linger
    assert 1 <= wakeups <= elapsed_s / linger_s + 1
    assert wakeups == len({sent_s for _, sent_s, _ in log})  # one moment per wake-up
    assert wakeups < len(log) / 5  # about 30 requests a wake-up at this rate and linger


@in_virtual_time
async def test_send_due_stops_at_its_limit_and_the_rest_stays_due(tmp_path: Path) -> None:
    config = SimulationConfig(seed=4, produce_rate=4000.0, producers=2, records_per_batch=1)
    broker, producers = _producers(tmp_path, config)
    async with broker:
        for producer in producers:
            producer.start(0.0)
        assert send_due(producers, 0.05, 3) == 3  # 200 or so are due
        assert sum(p.sent for p in producers) == 3
        assert min(p.next_s for p in producers) <= 0.05
        rest = send_due(producers, 0.05, 10_000)
    assert rest > 100 and all(p.next_s > 0.05 for p in producers)


class Stepper:
    """Another task, stepping once per turn of the loop while requests are being sent,
    noting how many were sent by each step (``seen``).

    Between bursts it waits for the next send (:meth:`on_send` wakes it): a task that
    only yielded (``sleep(0)`` forever) would keep the loop busy, and virtual time
    moves only when the loop is idle, so the sender's timer would never come.
    """

    def __init__(self, sent: Callable[[], int]) -> None:
        self.sent = sent
        self.seen: list[int] = []  # requests sent so far, at each step
        self.stopped = False
        self._sending = asyncio.Event()

    def on_send(self) -> None:
        self._sending.set()

    async def run(self) -> None:
        while not self.stopped:
            self.seen.append(self.sent())
            await asyncio.sleep(0)
            if self.sent() == self.seen[-1] and not self.stopped:  # wait for a send
                self._sending.clear()
                await self._sending.wait()

    async def stop(self, task: asyncio.Task[None]) -> None:
        self.stopped = True
        self._sending.set()
        await task


@in_virtual_time
async def test_the_sender_lets_the_loop_breathe_every_chunk(tmp_path: Path) -> None:
    # far above what the loop sustains: the first wake-up finds hundreds due at once
    config = SimulationConfig(
        seed=2, produce_rate=200_000.0, producers=2, records_per_batch=1, record_bytes=16
    )

    class SteppedProducer(Producer):
        def send(self) -> None:
            super().send()
            stepper.on_send()

    broker, producers = _producers(tmp_path, config, SteppedProducer)
    stepper = Stepper(lambda: sum(p.sent for p in producers))
    start_s = now_s()
    async with broker:
        watcher = asyncio.create_task(stepper.run())
        await run_producers(
            producers, start_s, after(producers, 20 * SEND_CHUNK, start_s), linger_s=0.005
        )
        await stepper.stop(watcher)
    steps = [b - a for a, b in itertools.pairwise(stepper.seen)]
    assert sum(p.sent for p in producers) >= 20 * SEND_CHUNK
    assert max(steps) == SEND_CHUNK  # whole chunks, and never more between two steps


def test_linger_ms_is_a_setting() -> None:
    assert SimulationConfig().linger_ms == 5  # Kafka 4.0's linger.ms
    with pytest.raises(ValueError, match="linger_ms"):
        SimulationConfig(linger_ms=-1).validate()


@given(
    producer=st.integers(0, 10**4),
    seq=st.integers(0, 10**8),
    records=st.integers(1, 30),
    record_bytes=st.integers(1, 40),
)
def test_record_values_name_producer_request_and_index_padded_with_dots(
    producer: int, seq: int, records: int, record_bytes: int
) -> None:
    """Against the format itself, one value at a time (``p0:s17:r2:`` then dots up to
    ``record_bytes``, longer when it does not fit): the shared tails change nothing,
    whichever requests asked before."""
    model = [f"p{producer}:s{seq}:r{i}:".encode().ljust(record_bytes, b".") for i in range(records)]
    assert record_values(producer, seq, records, record_bytes) == model
    assert record_values(producer, seq, records, record_bytes) == model  # the tails cached


@given(seed=st.integers(0, 2**32), n=st.integers(1, 10**6), rate=st.floats(1e-3, 1e7))
def test_arrivals_and_partition_choices_are_the_standard_librarys(
    seed: int, n: int, rate: float
) -> None:
    """A producer draws its gaps and partitions without ``random``'s Python methods;
    from the same seed they are the numbers ``expovariate`` and ``randrange`` give,
    so a seed's run is what it was with them."""
    ours, model = random.Random(seed), random.Random(seed)
    for _ in range(20):
        assert _index_below(ours, n) == model.randrange(n)
        assert _exponential_s(ours, rate) == model.expovariate(rate)

"""The producers' shared task: each producer keeps the schedule it would have alone.

The real-time runs here stop after a number of requests, not after a time, so a
slow or stalled machine makes them longer, never different; the time is only a
hang guard.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from purgatory_broker.broker import Broker, ErrorCode
from purgatory_broker.sim import SimulationConfig
from purgatory_broker.sim.clients import SEND_CHUNK, Producer, run_producers, send_due

from purgatory import TopicPartition

HANG_GUARD_S = 60.0


def after(producers: list[Producer], requests: int, start_s: float) -> Callable[[], bool]:
    """A ``stopping`` for run_producers: once ``requests`` are sent (or, as a guard
    against a hang, HANG_GUARD_S after ``start_s``: the test's count then fails)."""

    def stopping() -> bool:
        sent = sum(p.sent for p in producers)
        return sent >= requests or time.monotonic() - start_s > HANG_GUARD_S

    return stopping


def _broker(tmp_path: Path, tps: list[TopicPartition]) -> Broker:
    broker = Broker(tmp_path)
    for tp in tps:
        broker.create_partition(tp)  # no followers: an acks=-1 produce is answered at once
    return broker


@pytest.mark.asyncio
async def test_each_producer_keeps_its_own_schedule_in_the_shared_task(tmp_path: Path) -> None:
    config = SimulationConfig(seed=7, produce_rate=400.0, producers=3, records_per_batch=2)
    tps = [TopicPartition("sim", p) for p in range(4)]
    broker = _broker(tmp_path, tps)
    producers = [Producer(broker, config, pid, tps) for pid in range(config.producers)]
    start_s = time.monotonic()
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


def _producers(tmp_path: Path, config: SimulationConfig) -> tuple[Broker, list[Producer]]:
    tps = [TopicPartition("sim", p) for p in range(4)]
    broker = _broker(tmp_path, tps)
    return broker, [Producer(broker, config, pid, tps) for pid in range(config.producers)]


def _record_sends(producers: list[Producer], log: list[tuple[float, float, int]]) -> None:
    """Wrap each producer's ``send``: log (arrival, moment sent, producer id)."""
    for producer in producers:

        def send(producer: Producer = producer, real: Any = producer.send) -> None:
            log.append((producer.next_s, time.monotonic(), producer.producer_id))
            real()

        producer.send = send  # type: ignore[method-assign]


@pytest.mark.asyncio
async def test_send_due_sends_every_arrival_by_then_in_arrival_order(tmp_path: Path) -> None:
    config = SimulationConfig(seed=3, produce_rate=2000.0, producers=4, records_per_batch=1)
    broker, producers = _producers(tmp_path, config)
    log: list[tuple[float, float, int]] = []
    async with broker:
        for producer in producers:
            producer.start(100.0)  # a made-up clock: send_due only compares with now_s
        _record_sends(producers, log)
        arrivals = sorted(
            (p.next_s, p.producer_id) for p in producers if p.next_s <= 100.01
        )  # the first arrival of each producer due by then; later ones are drawn as sent
        sent = send_due(producers, 100.01, 1000)
    assert sent == len(log) >= len(arrivals) >= 1
    assert [arrival for arrival, _, _ in log] == sorted(arrival for arrival, _, _ in log)
    assert all(arrival <= 100.01 for arrival, _, _ in log)
    assert all(p.next_s > 100.01 for p in producers)  # nothing due is left behind
    assert send_due(producers, 100.01, 1000) == 0


@pytest.mark.asyncio
async def test_the_sender_lingers_never_sends_early_and_wakes_linger_apart(
    tmp_path: Path,
) -> None:
    config = SimulationConfig(seed=5, produce_rate=1500.0, producers=4, records_per_batch=1)
    broker, producers = _producers(tmp_path, config)
    log: list[tuple[float, float, int]] = []
    _record_sends(producers, log)
    linger_s = 0.02
    start_s = time.monotonic()
    async with broker:
        wakeups = await run_producers(
            producers, start_s, after(producers, 200, start_s), linger_s=linger_s
        )
    elapsed_s = time.monotonic() - start_s
    assert len(log) == sum(p.sent for p in producers) >= 200
    assert all(sent_s >= arrival_s for arrival_s, sent_s, _ in log)  # never early
    # each wake-up waits for an arrival after the previous one, plus the linger
    assert 1 <= wakeups <= elapsed_s / linger_s + 1
    assert wakeups < len(log) / 5  # about 30 requests a wake-up at this rate and linger


@pytest.mark.asyncio
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


@pytest.mark.asyncio
async def test_the_sender_lets_the_loop_breathe_every_chunk(tmp_path: Path) -> None:
    # far above what the loop sustains: the first wake-up finds hundreds due at once
    config = SimulationConfig(
        seed=2, produce_rate=200_000.0, producers=2, records_per_batch=1, record_bytes=16
    )
    broker, producers = _producers(tmp_path, config)
    seen: list[int] = []  # requests sent so far, at each step of another task
    stop = False

    async def watch() -> None:
        while not stop:
            seen.append(sum(p.sent for p in producers))
            await asyncio.sleep(0)

    start_s = time.monotonic()
    async with broker:
        watcher = asyncio.create_task(watch())
        await run_producers(
            producers, start_s, after(producers, 20 * SEND_CHUNK, start_s), linger_s=0.005
        )
        stop = True
        await watcher
    steps = [b - a for a, b in itertools.pairwise(seen)]
    assert sum(p.sent for p in producers) > SEND_CHUNK
    assert max(steps) <= SEND_CHUNK


def test_linger_ms_is_a_setting() -> None:
    assert SimulationConfig().linger_ms == 5  # Kafka 4.0's linger.ms
    with pytest.raises(ValueError, match="linger_ms"):
        SimulationConfig(linger_ms=-1).validate()

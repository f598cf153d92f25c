"""The producers' shared task: each producer keeps the schedule it would have alone."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from purgatory import TopicPartition
from purgatory.broker import Broker, ErrorCode
from purgatory.sim import SimulationConfig
from purgatory.sim.clients import Producer, run_producers


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
        await run_producers(producers, start_s, lambda: time.monotonic() - start_s > 0.3)
    for producer in producers:
        producer.settle_all()
    assert sum(p.sent for p in producers) > 30
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

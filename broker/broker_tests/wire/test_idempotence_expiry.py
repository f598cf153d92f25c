"""Idempotent producer state expires (Kafka's ``producer.id.expiration.ms``): memory does
not grow with the producer ids ever seen, and a producer that keeps writing keeps its
state. Deterministic: a ManualClock drives the timer; ``poll`` runs what is due."""

from __future__ import annotations

import asyncio
import time

import pytest
from purgatory_broker.broker import build_batch
from purgatory_broker.broker.errors import KafkaError
from purgatory_broker.wire import KafkaWireBroker, ProducerIdAllocator, ProducerStateTable
from purgatory_broker.wire._idempotence import BatchMetadata

from purgatory import SystemTimer, TopicPartition
from purgatory.testing import ManualClock

from .conftest import fast_config
from .rawclient import RawClient, metadata_request, produce_partition, produce_request
from .test_purgatory_wire import init_producer_id

TP = TopicPartition("t", 0)
EXPIRATION_MS = 1000
TICK_MS = 10


def batch(first: int, last: int, offset: int) -> BatchMetadata:
    return BatchMetadata(first, last, offset, offset + last - first)


@pytest.fixture
def timer(clock: ManualClock) -> SystemTimer:
    return SystemTimer("wire", tick_ms=TICK_MS, clock=clock)


def advance(clock: ManualClock, timer: SystemTimer, ms: int) -> None:
    clock.advance(ms)
    timer.poll()


def test_state_expires_unless_the_producer_writes_again(
    clock: ManualClock, timer: SystemTimer
) -> None:
    table = ProducerStateTable(timer=timer, expiration_ms=EXPIRATION_MS)
    first = batch(0, 4, 0)
    table.record(TP, 7, 0, first)
    table.record(TP, 8, 0, batch(0, 0, 5))
    advance(clock, timer, EXPIRATION_MS - 1)
    assert table.check(TP, 7, 0, 0, 4) == first  # a retry is still a duplicate
    table.record(TP, 7, 0, batch(5, 9, 6))  # producer 7 writes again; 8 does not
    table._check_invariants()
    advance(clock, timer, TICK_MS + 1)  # 8's deadline (and a tick) has passed
    assert len(table) == 1 and table.expired == 1
    assert table.check(TP, 8, 0, 1, 1) is None  # unknown now: accepted, as after a restart
    advance(clock, timer, EXPIRATION_MS - TICK_MS - 2)  # 1 ms before 7's deadline
    assert table.check(TP, 7, 0, 10, 10) is None  # still known: the next sequence
    with pytest.raises(KafkaError) as refused:
        table.check(TP, 7, 0, 12, 12)
    assert refused.value.code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    table._check_invariants()
    advance(clock, timer, TICK_MS + 1)
    assert len(table) == 0 and table.expired == 2
    assert table.check(TP, 7, 0, 12, 12) is None
    assert len(timer) == 0  # nothing left behind in the timer
    table._check_invariants()


def test_memory_does_not_grow_with_the_producer_ids_ever_seen(
    clock: ManualClock, timer: SystemTimer
) -> None:
    table = ProducerStateTable(timer=timer, expiration_ms=EXPIRATION_MS)
    allocator = ProducerIdAllocator(timer=timer, expiration_ms=EXPIRATION_MS)
    for generation in range(5):
        for _ in range(2000):
            pid, epoch = allocator.init_producer_id()
            table.record(TopicPartition("t", pid % 3), pid, epoch, batch(0, 0, 0))
        assert len(table) == len(allocator) == 2000, generation
        advance(clock, timer, EXPIRATION_MS + TICK_MS)
        assert len(table) == len(allocator) == 0
        assert len(timer) == 0
    table._check_invariants()
    allocator._check_invariants()


def test_an_epoch_bump_works_within_the_window_and_gets_a_new_id_after(
    clock: ManualClock, timer: SystemTimer
) -> None:
    allocator = ProducerIdAllocator(timer=timer, expiration_ms=EXPIRATION_MS)
    pid, epoch = allocator.init_producer_id()
    advance(clock, timer, EXPIRATION_MS - 1)
    assert allocator.init_producer_id(pid, epoch) == (pid, epoch + 1)  # and touched
    advance(clock, timer, EXPIRATION_MS - 1)
    assert allocator.init_producer_id(pid, epoch + 1) == (pid, epoch + 2)
    advance(clock, timer, EXPIRATION_MS + TICK_MS)
    new_pid, new_epoch = allocator.init_producer_id(pid, epoch + 2)
    assert new_pid != pid and new_epoch == 0
    allocator._check_invariants()


@pytest.mark.asyncio(loop_factories=["asyncio"])
async def test_the_wire_broker_drops_a_silent_producer_after_the_expiration() -> None:
    async with KafkaWireBroker(fast_config(producer_id_expiration_ms=200)) as wire:
        client = await RawClient.connect(wire.bootstrap_servers)
        try:
            assert (await client.request(metadata_request("idem"))).topics[0].error_code == 0
            pid, epoch = await init_producer_id(client)
            records = build_batch([b"a"], producer_id=pid, producer_epoch=epoch, base_sequence=0)
            r = produce_partition(await client.request(produce_request("idem", 0, records)))
            assert (r.error_code, r.base_offset) == (0, 0)
            assert len(wire.handler.producer_states) == 1
            deadline = time.monotonic() + 60  # a hang guard
            while len(wire.handler.producer_states) or len(wire.handler.producer_ids):
                assert time.monotonic() < deadline, "the producer state never expired"
                await asyncio.sleep(0.01)
            # the same batch again is no longer recognised: appended as new
            r = produce_partition(await client.request(produce_request("idem", 0, records)))
            assert (r.error_code, r.base_offset) == (0, 1)
        finally:
            await client.close()

"""The request-level fetch ``max_bytes``: the answer holds at most that many bytes in
total, except the first batch of the first non-empty partition (Kafka's rule, so a
consumer always progresses); the per-partition limit still applies."""

from __future__ import annotations

from typing import Any

import pytest
from purgatory_broker.broker import build_batch, iter_batches
from purgatory_broker.wire import KafkaWireBroker

from .rawclient import (
    RawClient,
    fetch_partitions_request,
    produce_partition,
    produce_request,
)

TOPIC = "limited"
BATCHES = 4  # per partition
VALUE_BYTES = 3000


async def loaded_client(wire: KafkaWireBroker) -> tuple[RawClient, int]:
    """A client, and the size of one batch; every partition holds BATCHES batches."""
    client = await RawClient.connect(wire.bootstrap_servers, topic=TOPIC)
    size = 0
    for p in range(wire.config.partitions):
        for i in range(BATCHES):
            batch = build_batch([bytes([65 + p + i]) * VALUE_BYTES])
            size = len(batch)
            response = await client.request(produce_request(TOPIC, p, batch))
            assert produce_partition(response).error_code == 0
    return client, size


def batch_counts(response: Any) -> list[int]:
    """Batches returned per partition, in the request's order; checks they are whole."""
    counts = []
    for part in response.responses[0].partitions:
        assert part.error_code == 0
        counts.append(len(list(iter_batches(part.records or b""))))
    return counts


def total_bytes(response: Any) -> int:
    return sum(len(part.records or b"") for part in response.responses[0].partitions)


@pytest.mark.asyncio(loop_factories=["asyncio"])
async def test_fetch_answer_holds_at_most_the_request_max_bytes(wire: KafkaWireBroker) -> None:
    client, size = await loaded_client(wire)
    everything = {0: 0, 1: 0, 2: 0}
    try:
        # three and a half batches: three from partition 0, nothing more fits
        max_bytes = size * 7 // 2
        r = await client.request(
            fetch_partitions_request(TOPIC, everything, max_wait_ms=0, max_bytes=max_bytes)
        )
        assert batch_counts(r) == [3, 0, 0]
        assert total_bytes(r) <= max_bytes
        # the per-partition limit still holds: two batches from each partition
        max_bytes = size * 6
        r = await client.request(
            fetch_partitions_request(
                TOPIC, everything, max_wait_ms=0, max_bytes=max_bytes, partition_max_bytes=size * 2
            )
        )
        assert batch_counts(r) == [2, 2, 2]
        assert total_bytes(r) <= max_bytes
        # smaller than one batch: the first non-empty partition's first batch, whole
        r = await client.request(
            fetch_partitions_request(TOPIC, everything, max_wait_ms=0, max_bytes=100)
        )
        assert batch_counts(r) == [1, 0, 0]
        assert total_bytes(r) == size
        # partition 0 read to its end: the exception moves to partition 1
        r = await client.request(
            fetch_partitions_request(TOPIC, {0: BATCHES, 1: 0, 2: 0}, max_wait_ms=0, max_bytes=100)
        )
        assert batch_counts(r) == [0, 1, 0]
        # no limit to speak of: everything
        r = await client.request(
            fetch_partitions_request(TOPIC, everything, max_wait_ms=0, max_bytes=1 << 24)
        )
        assert batch_counts(r) == [BATCHES] * 3
    finally:
        await client.close()


@pytest.mark.asyncio(loop_factories=["asyncio"])
async def test_an_offset_out_of_range_is_reported_after_the_limit_is_used_up(
    wire: KafkaWireBroker,
) -> None:
    client, size = await loaded_client(wire)
    try:
        r = await client.request(
            fetch_partitions_request(TOPIC, {0: 0, 1: 99}, max_wait_ms=0, max_bytes=size)
        )
        codes = [part.error_code for part in r.responses[0].partitions]
        assert codes == [0, 1]  # OFFSET_OUT_OF_RANGE although nothing more would fit
    finally:
        await client.close()

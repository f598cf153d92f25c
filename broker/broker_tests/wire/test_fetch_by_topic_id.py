"""Fetch v13-16 name topics by id (KIP-516): the id Metadata gave fetches the topic's
records; an id the broker does not know is answered UNKNOWN_TOPIC_ID (100).
(@platformatic/kafka consumes with Fetch v13+ only.)"""

from __future__ import annotations

import uuid

import pytest
from purgatory_broker.broker import ErrorCode, build_batch, iter_records
from purgatory_broker.wire import KafkaWireBroker

from .rawclient import (
    RawClient,
    fetch_partitions_request,
    metadata_request,
    produce_partition,
    produce_request,
)


def fetch_by_id(topic_id: uuid.UUID, version: int) -> object:
    return fetch_partitions_request(
        None,
        {0: 0},
        topic_id=topic_id,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        version=version,
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("version", [13, 16])
async def test_fetch_by_topic_id(wire: KafkaWireBroker, version: int) -> None:
    client = await RawClient.connect(wire.bootstrap_servers)
    try:
        (topic,) = (await client.request(metadata_request("by-id"))).topics
        produced = await client.request(produce_request("by-id", 0, build_batch([b"hello"])))
        assert produce_partition(produced).error_code == 0
        response = await client.request(fetch_by_id(topic.topic_id, version))
        (answer,) = response.responses
        assert answer.topic_id == topic.topic_id
        (part,) = answer.partitions
        assert part.error_code == 0
        assert [r.value for r in iter_records(bytes(part.records))] == [b"hello"]
        unknown = await client.request(fetch_by_id(uuid.uuid4(), version))
        assert unknown.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    finally:
        await client.close()

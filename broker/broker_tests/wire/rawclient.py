"""A minimal async Kafka client over kafka-python's protocol classes, for tests that
need exact control of requests (versions, timeouts, bad frames)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import Mapping
from typing import Any

from purgatory_broker.wire import _codec as codec


class RawClient:
    """One connection; ``request`` sends a request object and returns the decoded answer."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self._ids = itertools.count(1)

    @classmethod
    async def connect(cls, bootstrap: str, *, topic: str | None = None) -> RawClient:
        """A connection; with ``topic``, one on which that topic exists (a Metadata
        request creates it)."""
        host, port = bootstrap.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        client = cls(reader, writer)
        if topic is not None:
            (answer,) = (await client.request(metadata_request(topic))).topics
            assert (answer.name, answer.error_code) == (topic, 0), answer
        return client

    async def send(self, request: Any) -> int:
        """Send without waiting; returns the correlation id."""
        cid = next(self._ids)
        request.with_header(correlation_id=cid, client_id="raw-test")
        self.writer.write(bytes(request.encode(header=True, framed=True)))
        await self.writer.drain()
        return cid

    async def receive(self, response_class: Any, version: int) -> Any:
        frame = await self.read_frame()
        return response_class.decode(frame, version=version, header=True)

    async def request(self, request: Any) -> Any:
        version = request.API_VERSION
        cid = await self.send(request)
        response = await self.receive(codec.SUPPORTED_APIS[request.API_KEY].response, version)
        assert response.header.correlation_id == cid
        return response

    async def write_raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_frame(self) -> bytes:
        size = int.from_bytes(await self.reader.readexactly(4), "big")
        return await self.reader.readexactly(size)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


def produce_request(
    topic: str,
    partition: int,
    records: bytes,
    *,
    acks: int = -1,
    timeout_ms: int = 5000,
    version: int = 9,
) -> Any:
    produce_request_class = codec.SUPPORTED_APIS[codec.PRODUCE].request
    data = produce_request_class.TopicProduceData(
        name=topic,
        partition_data=[
            produce_request_class.TopicProduceData.PartitionProduceData(
                index=partition, records=records
            )
        ],
    )
    return produce_request_class(
        version=version, transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[data]
    )


def fetch_request(topic: str, partition: int, offset: int, **options: Any) -> Any:
    """A fetch of one partition; ``options`` as :func:`fetch_partitions_request`'s."""
    return fetch_partitions_request(topic, {partition: offset}, **options)


def fetch_partitions_request(
    topic: str | None,
    offsets: Mapping[int, int],
    *,
    max_wait_ms: int,
    min_bytes: int = 1,
    max_bytes: int = 1 << 24,
    partition_max_bytes: int = 1 << 20,
    isolation_level: int = 0,
    topic_id: uuid.UUID | None = None,
    version: int = 12,
) -> Any:
    """A fetch of ``topic``'s partitions, each from its offset, in the mapping's order;
    from v13 on (KIP-516) the topic is named by ``topic_id`` (``topic`` None)."""
    fetch_request_class = codec.SUPPORTED_APIS[codec.FETCH].request
    parts = [
        fetch_request_class.FetchTopic.FetchPartition(
            partition=partition,
            current_leader_epoch=-1,
            fetch_offset=offset,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=partition_max_bytes,
        )
        for partition, offset in offsets.items()
    ]
    return fetch_request_class(
        version=version,
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=[fetch_request_class.FetchTopic(topic=topic, topic_id=topic_id, partitions=parts)],
        forgotten_topics_data=[],
        rack_id="",
    )


def metadata_request(*topics: str, version: int = 12) -> Any:
    metadata_request_class = codec.SUPPORTED_APIS[codec.METADATA].request
    return metadata_request_class(
        version=version,
        topics=[metadata_request_class.MetadataRequestTopic(topic_id=None, name=t) for t in topics],
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )


def produce_partition(response: Any) -> Any:
    """The single partition answer of a one-partition produce response."""
    return response.responses[0].partition_responses[0]


def fetch_partition(response: Any) -> Any:
    return response.responses[0].partitions[0]

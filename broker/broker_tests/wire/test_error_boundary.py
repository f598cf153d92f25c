"""Errors are raised where they happen and become Kafka codes at one boundary per answer.

The checks of a produce (the topic, the batch, the idempotent producer's sequence) raise;
the handler turns what it may answer into the partition's error code through
:func:`~purgatory_broker.broker.errors.error_code`, and lets anything else go on up,
where the connection closes as on any internal error (as before errors were raised).
Each test drives the handler with a request frame and reads the answer it builds.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from purgatory_broker.broker import CorruptRecordError, ErrorCode, build_batch
from purgatory_broker.broker.errors import KafkaError, NotLeaderError
from purgatory_broker.wire import KafkaWireBroker
from purgatory_broker.wire import _codec as codec

from purgatory import TopicPartition

from .conftest import fast_config
from .rawclient import RawClient, metadata_request, produce_partition, produce_request

TOPIC = "boundary"

#: the codes a produce's checks raise, and others a KafkaError may carry
CODES = [3, 5, 17, 21, 42, 45, 47, 87, 6, 100]
#: exceptions raised by a produce's checks, with the code their partition is answered
REFUSALS: list[tuple[Exception, int]] = [
    *((KafkaError(ErrorCode(code), "refused"), code) for code in CODES),
    (NotLeaderError("a subclass"), 6),
    (CorruptRecordError("CRC mismatch"), 2),
]


def _case_id(value: object) -> str:
    return str(value) if isinstance(value, int) else type(value).__name__


def answer(wire: KafkaWireBroker, request: Any) -> Any:
    """The handler's answer to ``request``, decoded (it must be ready at once)."""
    request.with_header(correlation_id=1, client_id="boundary")
    frame = bytes(request.encode(header=True, framed=False))
    reply = wire.handler.handle(frame)
    assert isinstance(reply, bytes)
    response_class = codec.SUPPORTED_APIS[request.API_KEY].response
    return response_class.decode(reply[4:], version=request.API_VERSION, header=True)


def raising(exc: BaseException) -> Any:
    def fail(*args: object, **kwargs: object) -> Any:
        raise exc

    return fail


class RefusingProducerStates:
    """A producer-state table whose check raises ``exc``."""

    def __init__(self, exc: Exception) -> None:
        self.check = raising(exc)


@pytest.mark.asyncio
@pytest.mark.parametrize(("exc", "code"), REFUSALS, ids=_case_id)
async def test_a_refused_topic_s_exception_becomes_its_partitions_code(
    wire: KafkaWireBroker, monkeypatch: pytest.MonkeyPatch, exc: Exception, code: int
) -> None:
    monkeypatch.setattr(wire.handler, "topic", raising(exc))
    request = produce_request(TOPIC, 0, build_batch([b"v"]), acks=1)
    assert produce_partition(answer(wire, request)).error_code == code


@pytest.mark.asyncio
@pytest.mark.parametrize(("exc", "code"), REFUSALS, ids=_case_id)
async def test_a_refused_batch_s_exception_becomes_its_code(
    wire: KafkaWireBroker, monkeypatch: pytest.MonkeyPatch, exc: Exception, code: int
) -> None:
    answer(wire, metadata_request(TOPIC))  # creates the topic
    monkeypatch.setattr(wire.handler, "producer_states", RefusingProducerStates(exc))
    records = build_batch([b"v"], producer_id=1000, producer_epoch=0, base_sequence=0)
    request = produce_request(TOPIC, 0, records, acks=1)
    assert produce_partition(answer(wire, request)).error_code == code
    assert wire.broker.partitions[TopicPartition(TOPIC, 0)].log_end_offset == 0  # not appended


@pytest.mark.asyncio
@pytest.mark.parametrize(("exc", "code"), REFUSALS[:3], ids=_case_id)
async def test_a_refused_topic_s_exception_becomes_its_metadata_code(
    wire: KafkaWireBroker, monkeypatch: pytest.MonkeyPatch, exc: KafkaError, code: int
) -> None:
    monkeypatch.setattr(wire.handler, "topic", raising(exc))
    topic = answer(wire, metadata_request(TOPIC)).topics[0]
    assert (topic.error_code, topic.partitions) == (code, [])


@pytest.mark.asyncio
async def test_an_unexpected_exception_is_not_answered_with_a_code(
    wire: KafkaWireBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As before: it leaves the handler, and the connection counts it and closes."""
    monkeypatch.setattr(wire.handler, "topic", raising(RuntimeError("a bug")))
    with pytest.raises(RuntimeError, match="a bug"):
        answer(wire, produce_request(TOPIC, 0, build_batch([b"v"])))
    with pytest.raises(RuntimeError, match="a bug"):
        answer(wire, metadata_request(TOPIC))


@pytest.mark.asyncio
async def test_an_unexpected_exception_closes_the_connection() -> None:
    async with KafkaWireBroker(fast_config()) as wire:
        client = await RawClient.connect(wire.bootstrap_servers)
        try:
            wire.handler.topic = raising(RuntimeError("a bug"))  # type: ignore[method-assign]
            await client.send(produce_request(TOPIC, 0, build_batch([b"v"])))
            with pytest.raises(asyncio.IncompleteReadError):
                await client.read_frame()
            assert wire.stats.internal_errors == 1
        finally:
            await client.close()

"""Malformed input on many connections while a well-behaved client keeps working.

Seeded: each case comes from ``random.Random(SEED)``. The cases: random bytes,
negative, tiny and oversized frame sizes, frames cut short by EOF, unknown API
keys, unsupported versions, garbage bodies, valid requests with bit flips, and
produce requests with corrupted batches. Meanwhile an aiokafka producer sends
acks=all and, at the end, a consumer reads everything back. Afterwards: the
broker closed connections for bad input, never hit an internal error, and every
acknowledged message is there once, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable

import pytest
from purgatory_broker.broker import build_batch
from purgatory_broker.wire import KafkaWireBroker

from .rawclient import fetch_request, metadata_request, produce_request
from .readback import Acked, Consumed, all_seen, check_read_back, value

SEED = 20_251_122
CASES = 400
CONCURRENCY = 16
MESSAGES = 200


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big", signed=True) + body


def _request_frame(request: object, correlation_id: int) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id="fuzz")  # type: ignore[attr-defined]
    return bytes(request.encode(header=True, framed=True))  # type: ignore[attr-defined]


def _valid_frames(rng: random.Random) -> list[bytes]:
    topic = "fuzz"
    batch = build_batch([rng.randbytes(rng.randrange(1, 40)) for _ in range(rng.randrange(1, 4))])
    return [
        _request_frame(metadata_request(topic), 1),
        _request_frame(produce_request(topic, rng.randrange(3), batch, timeout_ms=200), 2),
        _request_frame(fetch_request(topic, rng.randrange(3), 0, max_wait_ms=50), 3),
    ]


def _header(api_key: int, version: int) -> bytes:
    return (
        api_key.to_bytes(2, "big", signed=True)
        + version.to_bytes(2, "big", signed=True)
        + (b"\x00\x00\x00\x09\x00\x04fuzz")
    )


def make_case(rng: random.Random, max_frame: int) -> bytes:
    """One malformed (or mutated) byte string to send on its own connection."""
    kinds: list[Callable[[], bytes]] = [
        lambda: rng.randbytes(rng.randrange(0, 300)),
        lambda: (-rng.randrange(1, 2**31)).to_bytes(4, "big", signed=True) + b"x" * 10,
        lambda: rng.randrange(0, 8).to_bytes(4, "big") + rng.randbytes(8),
        lambda: (max_frame + rng.randrange(1, 1000)).to_bytes(4, "big") + rng.randbytes(64),
        lambda: _frame(rng.randbytes(rng.randrange(8, 200)))[: rng.randrange(1, 20)],
        lambda: rng.choice(_valid_frames(rng))[: -rng.randrange(1, 20)],  # EOF inside
        lambda: _frame(_header(rng.choice([-1, 4, 9, 50, 1000, 32767]), 0) + b"\x00" * 8),
        lambda: _frame(_header(rng.choice([0, 1, 2, 3, 10, 22]), rng.choice([-1, 50, 999]))),
        lambda: _frame(_header(18, rng.choice([4, 7, 99, 32767])) + rng.randbytes(5)),
        lambda: _frame(_header(rng.choice([0, 1, 3]), 9) + rng.randbytes(rng.randrange(0, 60))),
        lambda: _flip(rng, rng.choice(_valid_frames(rng)), header_ok=False),
        lambda: _flip(rng, _valid_frames(rng)[1], header_ok=True),
    ]
    return rng.choice(kinds)()


def _flip(rng: random.Random, frame: bytes, *, header_ok: bool) -> bytes:
    """Flip a few bits; with ``header_ok`` only past the size and request header."""
    data = bytearray(frame)
    low = 4 + 16 if header_ok else 0
    for _ in range(rng.randrange(1, 4)):
        i = rng.randrange(low, len(data))
        data[i] ^= 1 << rng.randrange(8)
    return bytes(data)


async def send_case(bootstrap: str, data: bytes) -> None:
    host, port = bootstrap.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(data)
        await writer.drain()
        writer.write_eof()
        await asyncio.wait_for(reader.read(), 5.0)  # until the broker closes
    except (ConnectionError, TimeoutError):
        pass
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()


async def well_behaved_client(wire: KafkaWireBroker, topic: str) -> tuple[Acked, Consumed]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATP

    producer = AIOKafkaProducer(
        bootstrap_servers=wire.bootstrap_servers, acks="all", enable_idempotence=True
    )
    await producer.start()
    acked: Acked = []
    try:
        for i in range(MESSAGES):
            meta = await producer.send_and_wait(topic, value("fuzz", i), partition=i % 3)
            acked.append((meta.partition, meta.offset, value("fuzz", i)))
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=wire.bootstrap_servers, enable_auto_commit=False, group_id=None
    )
    await consumer.start()
    consumed: Consumed = []
    try:
        consumer.assign([ATP(topic, p) for p in range(3)])
        await consumer.seek_to_beginning()
        deadline = time.monotonic() + 60  # a hang guard
        while not all_seen(acked, consumed) and time.monotonic() < deadline:
            for messages in (await consumer.getmany(timeout_ms=500)).values():
                consumed += [(m.partition, m.offset, m.value) for m in messages]
    finally:
        await consumer.stop()
    return acked, consumed


@pytest.mark.asyncio
async def test_fuzz_while_a_client_keeps_working(wire: KafkaWireBroker) -> None:
    rng = random.Random(SEED)
    cases = [make_case(rng, wire.config.max_frame_bytes) for _ in range(CASES)]
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(data: bytes) -> None:
        async with gate:
            await send_case(wire.bootstrap_servers, data)

    client = asyncio.create_task(well_behaved_client(wire, "steady"))
    await asyncio.gather(*(one(c) for c in cases))
    acked, consumed = await client
    check_read_back(acked, consumed, MESSAGES)
    assert wire.stats.internal_errors == 0
    assert wire.stats.closed_for_bad_input > CASES // 4
    assert wire.handler.requests_by_api.get("ApiVersions (unsupported version)", 0) > 0
    # the broker still serves new connections
    from .rawclient import RawClient

    probe = await RawClient.connect(wire.bootstrap_servers)
    try:
        assert (await probe.request(metadata_request("steady"))).topics[0].error_code == 0
    finally:
        await probe.close()

"""Per-connection limits: idle connections are closed (``connections_max_idle_ms``), a
request that stops arriving half-way is dropped (``max_frame_wait_ms``), and a client
that does not read its answers stops being read (``max_pending_response_bytes``).

The idle and frame-wait tests run in virtual time (:func:`purgatory.testing.
run_in_virtual_time`), the real sockets included: a stall of the machine moves no
deadline, so a busy connection cannot miss its turn and be closed as idle."""

from __future__ import annotations

import asyncio
import socket
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from purgatory_broker.broker import build_batch, iter_batches
from purgatory_broker.wire import KafkaWireBroker
from purgatory_broker.wire import _codec as codec

from purgatory.testing import VirtualTimeLoop, run_in_virtual_time

from .conftest import fast_config
from .rawclient import (
    RawClient,
    fetch_partition,
    fetch_request,
    metadata_request,
    produce_partition,
    produce_request,
)

T = TypeVar("T")
TOPIC = "limits"
DEADLINE_S = 60.0  # a hang guard of every wait, not a measure of speed


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"not {what} within {DEADLINE_S} s"
        await asyncio.sleep(0.005)


async def until_done(task: Awaitable[T], what: str, keep_busy: RawClient) -> T:
    """Await ``task`` while ``keep_busy`` sends a request every 20 ms (of the loop's time)."""
    future = asyncio.ensure_future(task)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while not future.done():
        assert loop.time() < deadline, f"not {what} within {DEADLINE_S} s"
        await keep_busy.request(metadata_request(TOPIC))
        await asyncio.wait([future], timeout=0.02)
    return future.result()


async def connect(wire: KafkaWireBroker) -> RawClient:
    return await RawClient.connect(wire.bootstrap_servers, topic=TOPIC)


def test_a_silent_connection_is_closed_and_busy_ones_are_not() -> None:
    run_in_virtual_time(_a_silent_connection_is_closed_and_busy_ones_are_not())


async def _a_silent_connection_is_closed_and_busy_ones_are_not() -> None:
    idle_ms = 500
    loop = asyncio.get_running_loop()
    assert isinstance(loop, VirtualTimeLoop)
    async with KafkaWireBroker(fast_config(connections_max_idle_ms=idle_ms)) as wire:
        started = loop.time()  # before the silent connection's last activity
        silent = await connect(wire)
        chatty = await connect(wire)
        parked = await connect(wire)
        try:
            # a long poll waits in the purgatory well past the idle timeout: not idle
            await parked.send(fetch_request(TOPIC, 0, 0, max_wait_ms=4 * idle_ms))
            eof = await until_done(silent.reader.read(), "closed the silent one", chatty)
            assert eof == b""  # the broker closed it
            assert loop.time() - started >= (idle_ms - 2) / 1000  # not before its time
            assert wire.stats.closed_idle == 1
            fetched: Any = await until_done(
                parked.receive(codec.FetchResponse, 12), "answered the long poll", chatty
            )
            assert fetch_partition(fetched).error_code == 0
            # both busy connections are still served
            await chatty.request(metadata_request(TOPIC))
            await parked.request(metadata_request(TOPIC))
            assert wire.stats.closed_idle == 1 and wire.stats.closed_for_bad_input == 0
        finally:
            for client in (silent, chatty, parked):
                await client.close()


def test_a_request_that_stops_half_way_is_dropped_after_max_frame_wait() -> None:
    run_in_virtual_time(_a_request_that_stops_half_way_is_dropped_after_max_frame_wait())


async def _a_request_that_stops_half_way_is_dropped_after_max_frame_wait() -> None:
    assert isinstance(asyncio.get_running_loop(), VirtualTimeLoop)
    async with KafkaWireBroker(fast_config(max_frame_wait_ms=300)) as wire:
        frame = metadata_request(TOPIC)
        frame.with_header(correlation_id=1, client_id="slow")
        data = bytes(frame.encode(header=True, framed=True))
        size_only = await connect(wire)
        half_body = await connect(wire)
        steady = await connect(wire)
        try:
            await size_only.write_raw(data[:2])  # two bytes of the size, then nothing
            await half_body.write_raw(data[: 4 + (len(data) - 4) // 2])
            for client in (size_only, half_body):
                eof = await until_done(client.reader.read(), "dropped", steady)
                assert eof == b""
            assert wire.stats.closed_frame_timeout == 2
            assert wire.stats.closed_for_bad_input == 0
            # a request sent in two parts within the limit is answered
            await steady.write_raw(data[:10])
            await asyncio.sleep(0.01)
            await steady.write_raw(data[10:])
            answer = codec.MetadataResponse.decode(
                await steady.read_frame(), version=12, header=True
            )
            assert answer.header.correlation_id == 1 and answer.topics[0].error_code == 0
        finally:
            for client in (size_only, half_body, steady):
                await client.close()
        assert wire.stats.closed_frame_timeout == 2


async def connect_small_window(wire: KafkaWireBroker) -> RawClient:
    """A client whose socket takes little before the kernel stops the broker's sends."""
    host, port = wire.bootstrap_servers.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
    reader, writer = await asyncio.open_connection(sock=sock)
    return RawClient(reader, writer)


@pytest.mark.asyncio
async def test_a_client_that_does_not_read_its_answers_stops_being_read() -> None:
    budget = 1 << 20
    fetches = 100
    async with KafkaWireBroker(fast_config(max_pending_response_bytes=budget)) as wire:
        producer = await connect(wire)
        for i in range(4):
            batch = build_batch([bytes([65 + i]) * 100_000])
            r = await producer.request(produce_request(TOPIC, 0, batch))
            assert produce_partition(r).error_code == 0
        consumer = await connect_small_window(wire)
        try:
            before = wire.stats.requests
            # 100 fetches of 400 KB each, pipelined, and no answer read
            ids = [
                await consumer.send(fetch_request(TOPIC, 0, 0, max_wait_ms=0))
                for _ in range(fetches)
            ]

            def stalled() -> bool:
                paused = getattr(wire.stats, "reads_paused", 0) > 0  # the broker's own word
                return paused or wire.stats.requests - before == fetches

            await until(stalled, "the broker stopped reading or read everything")
            assert wire.stats.requests - before < fetches  # it stopped reading
            response_bytes = 4 * 100_000 + 1000
            assert wire.stats.peak_pending_response_bytes <= budget + response_bytes
            # nothing is lost: every answer arrives, in order, once the client reads
            for cid in ids:
                answer = await asyncio.wait_for(
                    consumer.receive(codec.FetchResponse, 12), DEADLINE_S
                )
                assert answer.header.correlation_id == cid
                assert len(list(iter_batches(fetch_partition(answer).records))) == 4
            assert wire.stats.requests - before == fetches
        finally:
            await consumer.close()
            await producer.close()


def test_a_large_answer_leaves_no_encode_buffer_behind() -> None:
    """kafka-python keeps its encode buffer at the largest message it encoded; the codec
    drops it after a large one, so one big fetch answer is not held for ever."""
    fetch_response_class = codec.FetchResponse
    records = b"x" * (4 << 20)
    part = fetch_response_class.FetchableTopicResponse.PartitionData(
        partition_index=0,
        error_code=0,
        high_watermark=0,
        last_stable_offset=0,
        log_start_offset=0,
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=records,
    )
    response = fetch_response_class(
        version=12,
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[fetch_response_class.FetchableTopicResponse(topic=TOPIC, partitions=[part])],
    )
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        frame = codec.encode_response(response, 1)
        assert len(frame) > len(records)
        del frame
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < codec.ENCODE_BUFFER_KEEP_BYTES

"""The purgatory seen through the wire: REQUEST_TIMED_OUT, long-poll wake-up and expiry,
idempotent dedupe, per-partition errors, reply order, acks=0, ApiVersions fallback."""

from __future__ import annotations

import asyncio
import statistics
import time

import pytest
from purgatory_broker.broker import build_batch
from purgatory_broker.wire import KafkaWireBroker
from purgatory_broker.wire import _codec as codec

from purgatory import TopicPartition

from .rawclient import (
    RawClient,
    fetch_partition,
    fetch_request,
    metadata_request,
    produce_partition,
    produce_request,
)

TOPIC = "wire"
#: a hang guard, not a timing claim: what must happen at once fails only after this
HANG_GUARD_S = 60.0


async def connect(wire: KafkaWireBroker) -> RawClient:
    return await RawClient.connect(wire.bootstrap_servers, topic=TOPIC)


async def wait_until_parked(wire: KafkaWireBroker, consumer_fetches: int) -> None:
    """Until the fetch purgatory holds ``consumer_fetches`` more than the followers' polls."""
    followers = wire.config.followers * wire.config.partitions
    try:
        async with asyncio.timeout(HANG_GUARD_S):
            while wire.broker.fetch_purgatory.num_delayed < followers + consumer_fetches:
                await asyncio.sleep(0.002)
    except TimeoutError:
        raise AssertionError("the fetch never parked in the purgatory") from None


@pytest.mark.asyncio
async def test_produce_times_out_when_followers_never_catch_up(wire: KafkaWireBroker) -> None:
    client = await connect(wire)
    try:
        # no wait needed: a follower's log end is the offset of a fetch it sent, and
        # paused followers send none, so nothing can replicate the append below
        wire.pause_replication()
        started = time.perf_counter()
        response = await client.request(
            produce_request(TOPIC, 0, build_batch([b"never replicated"]), timeout_ms=200)
        )
        elapsed_s = time.perf_counter() - started
        assert produce_partition(response).error_code == 7  # REQUEST_TIMED_OUT
        assert 0.15 <= elapsed_s < HANG_GUARD_S  # never early (200 ms, the loop's clock)
        # Kafka's semantics: the append happened; once replicated it is readable (the
        # long poll answered by the high watermark's rise, under the hang guard)
        wire.resume_replication()
        async with asyncio.timeout(HANG_GUARD_S):
            fetched = await client.request(fetch_request(TOPIC, 0, 0, max_wait_ms=600_000))
        part = fetch_partition(fetched)
        assert part.error_code == 0 and part.high_watermark == 1 and part.records
    finally:
        await client.close()


@pytest.mark.asyncio
async def test_long_poll_wakes_up_when_the_high_watermark_rises(
    wire: KafkaWireBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each long poll is answered by the high watermark's rise, never by its max wait
    (ten minutes: only a hang guard ends the test if the wake-up is missing). The
    wake-up latency (from the rise, in the follower's fetch, to the consumer holding
    the decoded response, over loopback) is printed: a measurement, not asserted, as
    it depends on the machine's load."""
    risen: dict[int, float] = {}
    tp0 = TopicPartition(TOPIC, 0)

    def on_high_watermark(tp: TopicPartition, hw: int) -> None:
        if tp == tp0:
            risen.setdefault(hw, time.perf_counter())

    wire.replicas.on_high_watermark = on_high_watermark
    consumer = await connect(wire)
    producer = await connect(wire)
    latencies_ms: list[float] = []
    try:
        for i in range(20):
            await consumer.send(fetch_request(TOPIC, 0, i, max_wait_ms=600_000))
            await wait_until_parked(wire, 1)
            await producer.request(produce_request(TOPIC, 0, build_batch([b"x%d" % i])))
            try:
                async with asyncio.timeout(HANG_GUARD_S):
                    fetched = await consumer.receive(codec.FetchResponse, 12)
            except TimeoutError:
                pytest.fail(f"fetch {i} not woken by the high watermark in {HANG_GUARD_S} s")
            received = time.perf_counter()
            part = fetch_partition(fetched)
            assert part.error_code == 0 and part.records and part.high_watermark == i + 1
            latencies_ms.append((received - risen[i + 1]) * 1000)
    finally:
        await consumer.close()
        await producer.close()
    latencies_ms.sort()
    with capsys.disabled():
        print(
            f"\nlong-poll wake-up latency over {len(latencies_ms)} fetches: "
            f"p50 {statistics.median(latencies_ms):.3f} ms, max {latencies_ms[-1]:.3f} ms"
        )
    assert latencies_ms[0] >= 0  # answered after the rise, not before


@pytest.mark.asyncio
async def test_long_poll_answers_after_max_wait_when_nothing_arrives(
    wire: KafkaWireBroker,
) -> None:
    client = await connect(wire)
    try:
        started = time.perf_counter()
        fetched = await client.request(fetch_request(TOPIC, 1, 0, max_wait_ms=300))
        elapsed_s = time.perf_counter() - started
        part = fetch_partition(fetched)
        assert part.error_code == 0 and part.high_watermark == 0 and not part.records
        assert 0.25 <= elapsed_s < HANG_GUARD_S  # never early (300 ms, the loop's clock)
    finally:
        await client.close()


async def init_producer_id(client: RawClient) -> tuple[int, int]:
    req = codec.SUPPORTED_APIS[codec.INIT_PRODUCER_ID].request(
        version=4,
        transactional_id=None,
        transaction_timeout_ms=60_000,
        producer_id=-1,
        producer_epoch=-1,
    )
    response = await client.request(req)
    assert response.error_code == 0
    return response.producer_id, response.producer_epoch


@pytest.mark.asyncio
async def test_retried_batch_gets_its_original_offset(wire: KafkaWireBroker) -> None:
    client = await connect(wire)
    try:
        pid, epoch = await init_producer_id(client)

        def batch(seq: int, *values: bytes) -> bytes:
            return build_batch(
                list(values), producer_id=pid, producer_epoch=epoch, base_sequence=seq
            )

        first = batch(0, b"a", b"b")
        r = produce_partition(await client.request(produce_request(TOPIC, 2, first)))
        assert (r.error_code, r.base_offset) == (0, 0)
        r = produce_partition(await client.request(produce_request(TOPIC, 2, first)))
        assert (r.error_code, r.base_offset) == (0, 0)  # duplicate: not appended again
        # a retry after REQUEST_TIMED_OUT: the first append stays the only one
        wire.pause_replication()  # no wait needed: see the REQUEST_TIMED_OUT test above
        second = batch(2, b"c")
        r = produce_partition(
            await client.request(produce_request(TOPIC, 2, second, timeout_ms=100))
        )
        assert r.error_code == 7
        wire.resume_replication()
        r = produce_partition(await client.request(produce_request(TOPIC, 2, second)))
        assert (r.error_code, r.base_offset) == (0, 2)
        r = produce_partition(await client.request(produce_request(TOPIC, 2, batch(9, b"z"))))
        assert r.error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
        partition = wire.broker.partition(TopicPartition(TOPIC, 2))
        assert partition is not None and partition.log_end_offset == 3
        # both retries waited through the broker's own API, counted there
        assert wire.broker.counters.replication_waits == 2
    finally:
        await client.close()


@pytest.mark.asyncio(loop_factories=["asyncio"])
async def test_bad_batches_get_partition_errors_and_the_connection_lives(
    wire: KafkaWireBroker,
) -> None:
    client = await connect(wire)
    try:
        good = build_batch([b"ok"])
        corrupt = bytearray(good)
        corrupt[-1] ^= 0xFF  # inside the CRC's range
        old_magic = bytearray(good)
        old_magic[16] = 1
        cases = {
            bytes(corrupt): 2,  # CORRUPT_MESSAGE
            good + good: 87,  # INVALID_RECORD: two batches
            bytes(old_magic): 87,
            good[:-3]: 2,  # truncated batch
            b"": 87,
        }
        for records, code in cases.items():
            r = produce_partition(await client.request(produce_request(TOPIC, 0, records)))
            assert (r.error_code, r.base_offset) == (code, -1), records
        r = produce_partition(await client.request(produce_request(TOPIC, 0, good)))
        assert (r.error_code, r.base_offset) == (0, 0)
        r = produce_partition(await client.request(produce_request("bad/name", 0, good)))
        assert r.error_code == 17  # INVALID_TOPIC_EXCEPTION
        r = produce_partition(await client.request(produce_request(TOPIC, 99, good)))
        assert r.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        assert wire.stats.closed_for_bad_input == 0
    finally:
        await client.close()


@pytest.mark.asyncio(loop_factories=["asyncio"])
async def test_replies_keep_request_order_and_acks0_gets_none(wire: KafkaWireBroker) -> None:
    client = await connect(wire)
    try:
        # a pending acks=-1 produce, an acks=0 produce, then a metadata request
        slow = await client.send(produce_request(TOPIC, 0, build_batch([b"slow"])))
        await client.send(produce_request(TOPIC, 1, build_batch([b"fire"]), acks=0))
        fast = await client.send(metadata_request(TOPIC))
        first = await client.receive(codec.ProduceResponse, 9)
        second = await client.receive(codec.MetadataResponse, 12)
        assert (first.header.correlation_id, second.header.correlation_id) == (slow, fast)
        partition = wire.broker.partition(TopicPartition(TOPIC, 1))
        assert partition is not None and partition.log_end_offset == 1
    finally:
        await client.close()


@pytest.mark.asyncio(loop_factories=["asyncio"])
async def test_unsupported_api_versions_version_gets_error_35_in_a_v0_body(
    wire: KafkaWireBroker,
) -> None:
    client = await connect(wire)
    try:
        # an ApiVersions v99 request header: key 18, version 99, correlation 77, client "x"
        header = (18).to_bytes(2, "big") + (99).to_bytes(2, "big") + (77).to_bytes(4, "big")
        frame = header + (1).to_bytes(2, "big") + b"x" + b"\x00garbage-body"
        await client.write_raw(len(frame).to_bytes(4, "big") + frame)
        response = codec.ApiVersionsResponse.decode(
            await client.read_frame(), version=0, header=True
        )
        assert response.header.correlation_id == 77 and response.error_code == 35
        ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert ranges[18] == (0, 3) and ranges[0] == (0, 9)  # Produce: ADVERTISED_VERSIONS
        # the connection still works
        assert (await client.request(metadata_request(TOPIC))).topics[0].name == TOPIC
    finally:
        await client.close()

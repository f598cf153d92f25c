"""The wire broker keeps what it acknowledged: SIGKILL, restart, read back."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from purgatory_broker.broker import PartitionLog, build_batch, iter_batches, iter_records
from purgatory_broker.wire import KafkaWireBroker, WireConfig
from purgatory_broker.wire.__main__ import parse_args

from purgatory import TopicPartition

from ..broker.damage import Damage, bad_magic, damage_file, flip_payload
from ..childproc import Child
from .conftest import fast_config
from .rawclient import (
    RawClient,
    fetch_partition,
    fetch_request,
    metadata_request,
    produce_partition,
    produce_request,
)

TOPIC = "durable"
RECORDS = 100


def start_broker(data_dir: Path) -> tuple[Child, str]:
    """``python -m purgatory_broker.wire`` on a free port; returns it and its address."""
    child = Child(
        [
            "-m",
            "purgatory_broker.wire",
            "--port",
            "0",
            "--data-dir",
            str(data_dir),
            "--partitions",
            "1",
            "--follower-lag-ms",
            "1",
        ]
    )
    try:
        line = child.read_line(timeout_s=20)
    except TimeoutError:
        line = None
    if line is None or "listening on" not in line:
        child.kill()
        err = child.stderr()
        child.close()
        raise AssertionError(f"the broker did not start: {line!r}\n{err}")
    return child, line.rsplit(" ", 1)[1]


async def produce_acked(bootstrap: str) -> list[tuple[int, bytes]]:
    """RECORDS acks=all produces, one record each; (offset, value) of each acknowledged."""
    client = await RawClient.connect(bootstrap, topic=TOPIC)
    try:
        acked = []
        for i in range(RECORDS):
            value = b"acked-%03d" % i
            response = await client.request(produce_request(TOPIC, 0, build_batch([value])))
            part = produce_partition(response)
            assert part.error_code == 0
            acked.append((part.base_offset, value))
        return acked
    finally:
        await client.close()


async def read_all(bootstrap: str, count: int, timeout_s: float) -> dict[int, bytes]:
    """Fetch from offset 0 until ``count`` records are read or ``timeout_s`` passes."""
    client = await RawClient.connect(bootstrap, topic=TOPIC)
    records: dict[int, bytes] = {}
    deadline = time.monotonic() + timeout_s
    try:
        offset = 0
        while len(records) < count and time.monotonic() < deadline:
            part = fetch_partition(
                await client.request(fetch_request(TOPIC, 0, offset, max_wait_ms=500))
            )
            assert part.error_code == 0
            for batch in iter_batches(part.records or b""):
                for record in iter_records(batch):
                    records[record.offset] = record.value or b""
                    offset = record.offset + 1
        return records
    finally:
        await client.close()


def test_sigkill_after_acks_all_loses_nothing(tmp_path: Path) -> None:
    """100 acks=all records acknowledged, the broker SIGKILLed at once, restarted on
    the same data dir: every acknowledged record reads back at its offset."""
    data_dir = tmp_path / "data"
    child, bootstrap = start_broker(data_dir)
    with child:
        acked = asyncio.run(produce_acked(bootstrap))
        child.kill()
    child, bootstrap = start_broker(data_dir)
    with child:
        records = asyncio.run(read_all(bootstrap, len(acked), timeout_s=60))
        child.kill()
    lost = [(o, v) for o, v in acked if records.get(o) != v]
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged records lost"


@pytest.mark.asyncio
async def test_flush_options_reach_every_partition_log() -> None:
    config = parse_args(["--port", "0", "--flush-messages", "3", "--flush-ms", "250"]).config
    assert (config.flush_messages, config.flush_ms) == (3, 250)
    async with KafkaWireBroker(config) as wb:
        wb.handler.topic("flushed")
        log = wb.broker.partitions[TopicPartition("flushed", 0)].log
        assert (log.flush_messages, log.flush_ms) == (3, 250)
    with pytest.raises(ValueError, match="flush_ms"):
        WireConfig(flush_ms=0).validate()


@pytest.mark.asyncio
async def test_recovery_cut_is_logged_when_the_broker_starts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A partition left with a torn tail: the restarted wire broker opens it at start
    (before any client asks for the topic) and logs the cut as a WARNING."""
    data_dir = tmp_path / "data"
    with PartitionLog(data_dir / "torn-0") as log:
        log.append(build_batch([b"kept"]))
        active = log.segments[-1].log_path
    with active.open("ab") as f:
        f.write(build_batch([b"half written"])[:-3])
    with caplog.at_level(logging.WARNING, logger="purgatory_broker.broker"):
        async with KafkaWireBroker(WireConfig(port=0, data_dir=str(data_dir))) as wb:
            assert wb.handler.topics == {"torn": 1}
            log = wb.broker.partitions[TopicPartition("torn", 0)].log
            assert log.log_end_offset == 1 and log.recovery.truncated_at_offset == 1
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "torn-0" in record.getMessage() and "at offset 1" in record.getMessage()


async def until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``condition`` every 10 ms until it holds; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


@pytest.mark.asyncio
@pytest.mark.parametrize("damage", [flip_payload, bad_magic], ids=["crc", "magic"])
async def test_a_damaged_rolled_segment_is_never_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: Damage
) -> None:
    """A batch damaged on disk in a rolled segment of a running wire broker: the
    followers of that partition get errors but their tasks live on, the other
    partition's followers keep moving its high watermark, the stuck followers leave
    the ISR, and then a consumer fetch gets CORRUPT_MESSAGE (2). Logged once."""
    config = fast_config(partitions=2, replica_lag_time_max_ms=300, data_dir=str(tmp_path))
    damaged, healthy = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
    with caplog.at_level(logging.ERROR, logger="purgatory_broker.broker"):
        async with KafkaWireBroker(config) as wb:
            broker = wb.broker
            wb.handler.topic(TOPIC)
            wb.pause_replication()  # before the follower tasks first run: they fetch nothing
            for tp in (damaged, healthy):
                for i in range(3):
                    broker.produce({tp: build_batch([b"v%d" % i])}, acks=1, timeout_ms=1000)
                broker.partitions[tp].log.roll()
                broker.produce({tp: build_batch([b"active"])}, acks=1, timeout_ms=1000)
            damage_file(broker.partitions[damaged].log.segments[0].log_path, damage)
            wb.resume_replication()  # no await since the pause: no ISR check ran
            client = await RawClient.connect(wb.bootstrap_servers)
            try:
                response = await client.request(
                    produce_request(TOPIC, 1, build_batch([b"replicated"]), acks=-1)
                )
                assert produce_partition(response).error_code == 0
                assert broker.partitions[healthy].high_watermark == 5
                await until(
                    lambda: broker.partitions[damaged].isr == {0}, 60, "the stuck followers"
                )
                fetched = await client.request(fetch_request(TOPIC, 0, 0, max_wait_ms=100))
                part = fetch_partition(fetched)
                assert part.error_code == 2 and not part.records and part.high_watermark == 4
            finally:
                await client.close()
            tasks = wb.replicas._tasks
            assert len(tasks) == 4 and not any(t.done() for t in tasks)
            assert broker.counters.storage_errors >= 3  # two followers, one consumer
            assert wb.stats.internal_errors == 0
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "durable-0" in errors[0], errors


@pytest.mark.asyncio
async def test_a_metadata_request_for_many_new_topics_costs_one_descriptor_each(
    tmp_path: Path,
) -> None:
    """Each new partition holds its active log open; index maps (which hold a
    descriptor in CPython) are bounded by the broker's open-files set."""
    async with KafkaWireBroker(fast_config(partitions=1, followers=0)) as wb:
        client = await RawClient.connect(wb.bootstrap_servers)
        try:
            baseline = len(os.listdir("/proc/self/fd"))
            names = [f"many-{i}" for i in range(300)]
            for _ in range(10):  # the broker creates a share per request; clients ask again
                response = await client.request(metadata_request(*names))
                codes = [t.error_code for t in response.topics]
                if codes == [0] * len(names):
                    break
                assert set(codes) <= {0, 5}  # LEADER_NOT_AVAILABLE while being created
            assert codes == [0] * len(names)
            grown = len(os.listdir("/proc/self/fd")) - baseline
            assert len(names) <= grown <= len(names) + wb.broker.open_files.capacity
        finally:
            await client.close()

"""Kafka's O(1) fetch accounting: offset metadata kept current, checks that read nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from purgatory_broker.broker import Broker, FetchPartitionStatus
from purgatory_broker.broker.storage import segment
from purgatory_broker.broker.storage.log import (
    RECENT_BOUNDARIES,
    LogOffsetMetadata,
    OffsetOutOfRangeError,
    PartitionLog,
)

from purgatory import DelayedOperation
from purgatory.testing import ManualClock

from .partitions_kit import A, batch

SIZE = len(batch())


def completed(op: DelayedOperation[Any]) -> bool:
    """Whether ``op`` completed (a call: mypy would narrow the property)."""
    return op.is_completed


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    """Every read of log bytes, as (file name, position, size), through the hook."""
    seen: list[tuple[str, int, int]] = []
    monkeypatch.setattr(
        segment, "read_hook", lambda path, pos, size: seen.append((path.name, pos, size))
    )
    return seen


@pytest.fixture
def log(tmp_path: Path) -> Iterator[PartitionLog]:
    partition_log = PartitionLog(tmp_path / "log", segment_bytes=4 * SIZE)
    yield partition_log
    partition_log.close()


def test_log_end_metadata_follows_appends_rolls_and_truncation(log: PartitionLog) -> None:
    assert log.log_end_metadata == LogOffsetMetadata(0, 0, 0)
    log.append(batch(3))
    size3 = log.size_bytes
    assert log.log_end_metadata == LogOffsetMetadata(3, 0, size3)
    log.append(batch())
    log.roll()
    assert log.log_end_metadata == LogOffsetMetadata(4, 4, 0)  # re-based on the new segment
    assert log.offset_metadata(4) == LogOffsetMetadata(4, 4, 0)
    log.append(batch(2))
    end = log.log_end_metadata
    assert (end.offset, end.segment_base_offset) == (6, 4) and end.position == log.size_bytes - (
        size3 + SIZE
    )
    assert log.offset_metadata(3) == LogOffsetMetadata(3, 0, size3)
    log.truncate_to(4)
    assert log.log_end_metadata == log.offset_metadata(4)
    assert log.log_end_metadata.offset == 4
    with pytest.raises(OffsetOutOfRangeError):
        log.offset_metadata(5)  # forgotten with the bytes that held it
    log.truncate_to(1)  # straddles [0..2]: the log ends at 0 again
    assert log.log_end_metadata == LogOffsetMetadata(0, 0, 0)
    log._check_invariants()


def test_offset_metadata_of_recent_boundaries_reads_nothing(
    log: PartitionLog, reads: list[tuple[str, int, int]]
) -> None:
    for _ in range(3):
        log.append(batch())
    assert log.offset_metadata(2) == LogOffsetMetadata(2, 0, 2 * SIZE)
    assert reads == []
    # mid-batch: the place of the batch holding it, found by a walk of the headers
    log.append(batch(3))
    assert log.offset_metadata(4) == LogOffsetMetadata(4, 3, 0)  # rolled: 4 * SIZE is full
    assert reads, "a mid-batch offset is looked up in the file"


def test_recent_boundaries_are_bounded(tmp_path: Path) -> None:
    with PartitionLog(tmp_path / "log") as big:
        for _ in range(RECENT_BOUNDARIES + 10):
            big.append(batch())
        big._check_invariants(deep=False)
        assert big.offset_metadata(5) == LogOffsetMetadata(5, 0, 5 * SIZE)  # looked up again


@pytest.fixture
def broker(tmp_path: Path, clock: ManualClock) -> Iterator[Broker]:
    b = Broker(tmp_path, clock=clock, reaper_enabled=False, segment_bytes=8 * SIZE)
    b.create_partition(A, (1,), min_insync_replicas=1)
    yield b
    for p in b.partitions.values():
        p.log.close()


def test_a_waiting_fetch_check_reads_no_log_bytes(
    broker: Broker, reads: list[tuple[str, int, int]]
) -> None:
    consumer = broker.fetch({A: FetchPartitionStatus(0)}, min_bytes=3 * SIZE, max_wait_ms=500)
    follower = broker.fetch(
        {A: FetchPartitionStatus(0)}, min_bytes=3 * SIZE, max_wait_ms=500, replica_id=1
    )
    assert not completed(consumer) and not completed(follower)
    for _ in range(2):
        broker.produce({A: batch()}, acks=1, timeout_ms=100)  # each append checks both
    assert not completed(follower)
    assert broker.partitions[A].high_watermark == 0  # follower 1 has not fetched again
    assert reads == [], "checking waiting fetches read the log"
    assert consumer.accumulated_bytes() == 0 and follower.accumulated_bytes() == 2 * SIZE
    broker.produce({A: batch()}, acks=1, timeout_ms=100)
    assert completed(follower)  # 3 batches to the log end: read once, to answer
    assert len(follower.result()[A].records) == 3 * SIZE and len(reads) == 1
    # the follower fetches at 3: the high watermark moves there, the consumer counts it
    broker.fetch({A: FetchPartitionStatus(3)}, min_bytes=0, replica_id=1)
    assert broker.partitions[A].high_watermark == 3
    assert completed(consumer) and len(consumer.result()[A].records) == 3 * SIZE


def test_a_fetch_whose_end_reaches_a_newer_segment_completes(broker: Broker) -> None:
    for _ in range(7):
        broker.produce({A: batch()}, acks=1, timeout_ms=100)
    waiting = broker.fetch(
        {A: FetchPartitionStatus(7)}, min_bytes=10 * SIZE, max_wait_ms=500, replica_id=1
    )
    assert not completed(waiting)
    broker.produce({A: batch()}, acks=1, timeout_ms=100)  # fills the segment: 8 batches
    assert not completed(waiting) and waiting.accumulated_bytes() == SIZE
    broker.produce({A: batch()}, acks=1, timeout_ms=100)  # rolls: offset 8 in a new segment
    assert broker.partitions[A].log.segment_count == 2
    assert completed(waiting), "the rest of the older segment counts as enough"
    assert len(waiting.result()[A].records) == 2 * SIZE

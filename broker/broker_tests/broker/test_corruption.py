"""A damaged batch on disk is never served: fetches answer CORRUPT_MESSAGE (2) or
KAFKA_STORAGE_ERROR (56) for that partition, the broker never raises, logs each
damaged place once, and the other partitions carry on."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from purgatory_broker.broker import (
    Broker,
    CorruptRecordError,
    ErrorCode,
    FetchPartitionData,
    FetchPartitionStatus,
    PartitionLog,
    build_batch,
    iter_batches,
    iter_records,
)

from purgatory import TopicPartition
from purgatory.testing import ManualClock

from .damage import DAMAGES, bad_length, bad_magic, damage_file, flip_payload
from .partitions_kit import A, B

LAG_MS = 100


def batch(tag: int) -> bytes:
    return build_batch([b"%03d" % tag * 30], base_timestamp_ms=0)


def new_broker(tmp_path: Path, clock: ManualClock) -> Broker:
    """Partitions A and B, followers 1 and 2, small segments; A holds 12 batches in
    several segments, none replicated yet."""
    b = Broker(tmp_path, clock=clock, reaper_enabled=False, segment_bytes=500)
    for tp in (A, B):
        b.create_partition(tp, (1, 2), replica_lag_time_max_ms=LAG_MS)
    for i in range(12):
        b.produce({A: batch(i)}, acks=1, timeout_ms=1_000)
    assert b.partitions[A].log.segment_count >= 3
    return b


@pytest.fixture
def broker(tmp_path: Path, clock: ManualClock) -> Iterator[Broker]:
    """:func:`new_broker` where follower 1 replicated all of A and follower 2 nothing:
    follower 2 left the ISR, so A's high watermark is its log end."""
    b = new_broker(tmp_path, clock)
    end = b.partitions[A].log_end_offset
    fetch(b, {A: end, B: 0}, replica_id=1)
    clock.advance(LAG_MS + 1)
    fetch(b, {A: end, B: 0}, replica_id=1)
    assert b.maybe_shrink_isr() == [(A, 2)]  # B is empty: its followers are caught up
    assert b.partitions[A].high_watermark == end
    yield b
    close_logs(b)


def close_logs(broker: Broker) -> None:
    for p in broker.partitions.values():
        p.log.close()


def fetch(
    broker: Broker, offsets: dict[TopicPartition, int], *, replica_id: int = -1
) -> dict[TopicPartition, FetchPartitionData]:
    op = broker.fetch(
        {tp: FetchPartitionStatus(o) for tp, o in offsets.items()},
        min_bytes=1,
        max_wait_ms=0,
        replica_id=replica_id,
    )
    return op.result()


def offsets_of(records: bytes) -> list[int]:
    return [r.offset for b in iter_batches(records) for r in iter_records(b)]


@pytest.mark.parametrize("kind", DAMAGES)
def test_a_damaged_batch_in_a_rolled_segment_is_never_served(
    broker: Broker, clock: ManualClock, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    log = broker.partitions[A].log
    rolled = log.segments[0]
    assert rolled is not log.segments[-1]
    damage_file(rolled.log_path, DAMAGES[kind])
    with caplog.at_level(logging.ERROR, logger="purgatory_broker.broker"):
        for _ in range(3):
            consumer = fetch(broker, {A: 0, B: 0})
            assert consumer[A].error_code == ErrorCode.CORRUPT_MESSAGE
            assert consumer[A].records == b""
            assert consumer[A].high_watermark == log.log_end_offset  # follower 1 had it all
            assert consumer[B].error_code == ErrorCode.NONE
            follower = fetch(broker, {A: 0, B: 0}, replica_id=2)  # the lagging follower
            assert follower[A].error_code == ErrorCode.CORRUPT_MESSAGE
            assert follower[B].error_code == ErrorCode.NONE
        # a reader past the damage is served as usual
        later = log.segments[1].base_offset
        assert offsets_of(fetch(broker, {A: later})[A].records)[0] == later
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert "t-0" in errors[0].getMessage() and rolled.log_path.name in errors[0].getMessage()
    assert broker.counters.storage_errors == 6


def test_the_good_batches_before_the_damage_are_served(broker: Broker) -> None:
    log = broker.partitions[A].log
    first = log.segments[0]
    damage_file(first.log_path, flip_payload, batch_number=2)
    data = fetch(broker, {A: 0})[A]
    assert data.error_code == ErrorCode.NONE and offsets_of(data.records) == [0, 1]
    assert fetch(broker, {A: 2})[A].error_code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        log.read(2, 1 << 20)


def test_the_high_watermark_moves_on_without_the_stuck_follower(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Follower 2, in the ISR, cannot copy past the damage: it stays there, leaves the
    ISR after replica_lag_time_max_ms, and the high watermark (and the acks=-1
    produce waiting on it) moves on with follower 1. Partition B is untouched."""
    broker = new_broker(tmp_path, clock)
    try:
        log = broker.partitions[A].log
        middle = log.segments[1]
        stuck_at = middle.base_offset
        fetch(broker, {A: stuck_at}, replica_id=2)  # follower 2 has everything before
        damage_file(middle.log_path, bad_magic)
        op_b = broker.produce({B: batch(99)}, acks=-1, timeout_ms=1_000)
        for rid in (1, 2):
            fetch(broker, {B: 1}, replica_id=rid)
        assert op_b.is_done and op_b.result()[B].error_code == 0
        op_a = broker.produce({A: batch(100)}, acks=-1, timeout_ms=10_000)
        end = log.log_end_offset
        fetch(broker, {A: end}, replica_id=1)
        assert fetch(broker, {A: stuck_at}, replica_id=2)[A].error_code == 2
        assert broker.partitions[A].high_watermark == stuck_at and not op_a.is_done
        clock.advance(LAG_MS + 1)
        fetch(broker, {A: end, B: 1}, replica_id=1)  # follower 1 stays caught up
        fetch(broker, {B: 1}, replica_id=2)
        assert fetch(broker, {A: stuck_at}, replica_id=2)[A].error_code == 2
        assert broker.maybe_shrink_isr() == [(A, 2)]
        assert broker.partitions[A].high_watermark == end
        assert op_a.result()[A].error_code == 0  # done: result() raises while pending
    finally:
        close_logs(broker)


def test_an_io_error_answers_kafka_storage_error(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_pread(fd: int, size: int, offset: int) -> bytes:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "pread", failing_pread)
    answer = fetch(broker, {A: 0})
    assert answer[A].error_code == ErrorCode.KAFKA_STORAGE_ERROR
    monkeypatch.undo()
    assert fetch(broker, {A: 0})[A].error_code == ErrorCode.NONE


def test_a_waiting_fetch_completes_with_the_error(broker: Broker, clock: ManualClock) -> None:
    """A follower long-polling at the log end when nothing is damaged, then reading a
    damaged header further on: the header walk's error completes it, it does not raise."""
    log = broker.partitions[A].log
    damage_file(log.segments[1].log_path, bad_length)
    op = broker.fetch(
        {A: FetchPartitionStatus(log.segments[1].base_offset)},
        min_bytes=1,
        max_wait_ms=500,
        replica_id=2,
    )
    assert op.is_done and op.result()[A].error_code == ErrorCode.CORRUPT_MESSAGE


def test_read_path_checks_every_batch_of_a_clean_log(tmp_path: Path) -> None:
    """No false alarms: the verified read returns exactly what was appended."""
    with PartitionLog(tmp_path / "log", segment_bytes=700) as log:
        appended = [log.append(batch(i)) for i in range(40)]
        data = log.read(0, 1 << 20)
        assert [b[12:] for b in iter_batches(data)] == [batch(i)[12:] for i in range(40)]
        assert offsets_of(data) == [base for base, _ in appended]

"""DelayedProduce and DelayedFetch on their own: conditions, outcomes, expiry, trace rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from purgatory_broker.broker import (
    DelayedFetch,
    DelayedProduce,
    ErrorCode,
    FetchPartitionData,
    FetchPartitionStatus,
    LeaderPartition,
    PartitionLog,
    ProducePartitionResponse,
    ProducePartitionStatus,
)
from purgatory_broker.tracing import TraceRow, TraceWriter

from purgatory import DelayedOperationPurgatory, SystemTimer, TopicPartition
from purgatory.testing import ManualClock

from .partitions_kit import GONE, A, B, batch

Partitions = dict[TopicPartition, LeaderPartition]
Purgatory = DelayedOperationPurgatory[Any]


@pytest.fixture
def partitions(tmp_path: Path) -> Iterator[Partitions]:
    parts = {
        tp: LeaderPartition(
            tp,
            PartitionLog(tmp_path / str(tp)),
            (1,),
            min_insync_replicas=2,
            replica_lag_time_max_ms=100,
        )
        for tp in (A, B)
    }
    yield parts
    for p in parts.values():
        p.log.close()


@pytest.fixture
def purgatory(timer: SystemTimer) -> Purgatory:
    """A purgatory on the manual clock's timer, its reaper off: clock.advance + poll."""
    return DelayedOperationPurgatory("delayed", timer=timer, reaper_enabled=False)


@pytest.fixture
def writer() -> TraceWriter:
    return TraceWriter()


def pending_status(p: LeaderPartition, records: int = 1) -> ProducePartitionStatus:
    result = p.append_as_leader(batch(records), required_acks=-1)
    return ProducePartitionStatus(result.last_offset + 1, result.base_offset, result.size_bytes)


def test_produce_waits_for_every_partition_high_watermark(
    partitions: Partitions, purgatory: Purgatory
) -> None:
    statuses = {A: pending_status(partitions[A], 3), B: pending_status(partitions[B])}
    assert statuses[A].error_code == ErrorCode.REQUEST_TIMED_OUT
    op = DelayedProduce(1000, statuses, partitions.get)
    assert not purgatory.try_complete_else_watch(op, [A, B])
    partitions[A].update_follower_fetch(1, 3, 10)
    assert purgatory.check_and_complete(A) == 0  # B still pending
    assert not statuses[A].acks_pending and statuses[B].acks_pending
    partitions[B].update_follower_fetch(1, 1, 10)
    assert purgatory.check_and_complete(B) == 1
    assert op.result() == {
        A: ProducePartitionResponse(ErrorCode.NONE, 0),
        B: ProducePartitionResponse(ErrorCode.NONE, 0),
    }
    purgatory._check_invariants()


def test_produce_after_isr_shrink_below_min_isr_answers_not_enough_replicas_after_append(
    partitions: Partitions,
) -> None:
    p = partitions[A]
    op = DelayedProduce(1000, {A: pending_status(p)}, partitions.get)
    assert not op.try_complete()
    p.maybe_shrink_isr(1000)  # follower 1 dropped; HW = leader LEO
    assert op.try_complete()
    assert op.result()[A] == ProducePartitionResponse(
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, -1
    )


def test_a_produce_status_is_a_value_with_its_defaults() -> None:
    """Not a dataclass any more (its ``__init__`` would be a Python function on every
    produce), but it behaves as the dataclass did, on both builds: defaults, keywords,
    comparison by value, no hash (it is mutable), a repr naming every field."""
    status = ProducePartitionStatus(5, 3, 100)
    assert (status.acks_pending, status.error_code) == (True, ErrorCode.REQUEST_TIMED_OUT)
    same = ProducePartitionStatus(
        required_offset=5, base_offset=3, size_bytes=100, acks_pending=True, error_code=7
    )
    assert status == same
    same.acks_pending = False
    assert status != same
    assert status != (5, 3, 100, True, 7)
    with pytest.raises(TypeError, match="unhashable"):
        hash(status)
    assert repr(status) == (
        "ProducePartitionStatus(required_offset=5, base_offset=3, size_bytes=100, "
        f"acks_pending=True, error_code={ErrorCode.REQUEST_TIMED_OUT!r})"
    )
    with pytest.raises(AttributeError):
        status.extra = 1  # type: ignore[attr-defined]


def test_produce_leadership_lost_and_unknown_partition(partitions: Partitions) -> None:
    statuses = {A: pending_status(partitions[A]), GONE: ProducePartitionStatus(1, 0, 10)}
    op = DelayedProduce(1000, statuses, partitions.get)
    partitions[A].become_follower()
    assert op.try_complete()
    result = op.result()
    assert result[A].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert result[GONE].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_produce_expiry_keeps_request_timed_out_and_traces_expired(
    partitions: Partitions, clock: ManualClock, purgatory: Purgatory, writer: TraceWriter
) -> None:
    op = DelayedProduce(50, {A: pending_status(partitions[A])}, partitions.get)
    row = TraceRow(0, "produce", "produce", [str(A)], 0, 50)
    op.attach_trace(writer, row, clock.now_ms)
    purgatory.try_complete_else_watch(op, [A])
    clock.advance(49)
    purgatory.timer.poll()
    assert not op.is_done
    clock.advance(1)
    purgatory.timer.poll()
    assert op.result()[A] == ProducePartitionResponse(ErrorCode.REQUEST_TIMED_OUT, -1)
    assert writer.rows == [row]
    assert (row.outcome, row.completed_ms, row.error_codes) == ("expired", 50, [7])
    assert purgatory.statistics().expired == 1


def test_produce_needs_a_partition() -> None:
    with pytest.raises(ValueError, match="at least one partition"):
        DelayedProduce(10, {}, lambda tp: None)


def fetch_op(
    partitions: Partitions,
    offsets: dict[TopicPartition, int],
    *,
    min_bytes: int,
    replica_id: int = -1,
    max_bytes: int = 1 << 20,
) -> tuple[DelayedFetch, list[int]]:
    reads: list[int] = []
    statuses = {tp: FetchPartitionStatus(o, max_bytes) for tp, o in offsets.items()}

    def read() -> dict[TopicPartition, FetchPartitionData]:
        reads.append(1)
        out = {}
        for tp, s in statuses.items():
            p = partitions[tp]
            limit = None if replica_id >= 0 else p.high_watermark
            out[tp] = FetchPartitionData(
                ErrorCode.NONE,
                p.high_watermark,
                p.log_end_offset,
                p.log.read(s.fetch_offset, s.max_bytes, limit),
            )
        return out

    op = DelayedFetch(
        500, statuses, partitions.get, read, min_bytes=min_bytes, replica_id=replica_id
    )
    return op, reads


def test_consumer_fetch_counts_bytes_below_the_high_watermark_only(
    partitions: Partitions,
) -> None:
    size = len(batch())
    op, reads = fetch_op(partitions, {A: 0, B: 0}, min_bytes=2 * size)
    partitions[A].append_as_leader(batch(), required_acks=-1)
    partitions[B].append_as_leader(batch(), required_acks=-1)
    assert op.accumulated_bytes() == 0  # nothing committed yet
    assert not op.try_complete()
    partitions[A].update_follower_fetch(1, 1, 0)
    assert op.accumulated_bytes() == size
    assert not op.try_complete()
    partitions[B].update_follower_fetch(1, 1, 0)
    assert op.try_complete()
    assert reads == [1]  # read once, on completion
    assert {tp: len(d.records) for tp, d in op.result().items()} == {A: size, B: size}


def test_follower_fetch_counts_to_the_log_end_and_caps_at_max_bytes(
    partitions: Partitions,
) -> None:
    size = len(batch())
    partitions[A].append_as_leader(batch(), required_acks=-1)
    partitions[A].append_as_leader(batch(), required_acks=-1)
    op, _ = fetch_op(partitions, {A: 0}, min_bytes=2 * size, replica_id=1, max_bytes=size)
    assert op.accumulated_bytes() == size  # capped at the partition's max bytes
    op, _ = fetch_op(partitions, {A: 0}, min_bytes=2 * size, replica_id=1)
    assert op.try_complete()


def test_fetch_completes_at_once_on_a_partition_error(
    partitions: Partitions,
) -> None:
    beyond_end = {A: FetchPartitionStatus(5)}
    op = DelayedFetch(500, beyond_end, partitions.get, dict, min_bytes=1)
    assert op.accumulated_bytes() is None and op.try_complete()
    op2 = DelayedFetch(500, {GONE: FetchPartitionStatus(0)}, partitions.get, dict, min_bytes=1)
    assert op2.try_complete()
    op3, _ = fetch_op(partitions, {A: 0}, min_bytes=1)
    assert not op3.try_complete()
    partitions[A].become_follower()
    assert op3.try_complete()


def test_fetch_expiry_reads_again_and_traces_bytes(
    partitions: Partitions, clock: ManualClock, purgatory: Purgatory, writer: TraceWriter
) -> None:
    op, reads = fetch_op(partitions, {A: 0}, min_bytes=10_000)
    row = TraceRow(3, "fetch", "fetch_consumer", [str(A)], 0, 500)
    op.attach_trace(writer, row, clock.now_ms)
    assert not purgatory.try_complete_else_watch(op, [A])
    partitions[A].append_as_leader(batch(), required_acks=-1)
    partitions[A].update_follower_fetch(1, 1, 0)
    assert purgatory.check_and_complete(A) == 0
    clock.advance(500)
    purgatory.timer.poll()
    assert op.is_completed and reads == [1]
    assert len(op.result()[A].records) == len(batch())
    assert (row.outcome, row.bytes, row.error_codes) == ("expired", len(batch()), [0])
    purgatory._check_invariants()

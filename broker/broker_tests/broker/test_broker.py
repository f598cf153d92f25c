"""Broker: produce and fetch through both purgatories on a manual clock, traces, close."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from purgatory_broker.broker.broker import Broker
from purgatory_broker.broker.delayed import (
    DelayedFetch,
    FetchPartitionStatus,
    ProducePartitionResponse,
)
from purgatory_broker.broker.errors import ErrorCode
from purgatory_broker.broker.storage.records import iter_batches, iter_records
from purgatory_broker.tracing import TraceWriter, trace_schema

from purgatory import LoopClock, PurgatoryClosedError, TopicPartition
from purgatory.testing import ManualClock

from .partitions_kit import GONE, A, B, batch

LAG_MS = 100
SIZE = len(batch())


@pytest.fixture
def writer() -> TraceWriter:
    return TraceWriter()


@pytest.fixture
def broker(tmp_path: Path, clock: ManualClock, writer: TraceWriter) -> Iterator[Broker]:
    b = Broker(tmp_path, clock=clock, reaper_enabled=False, recorder=writer)
    for tp in (A, B):
        b.create_partition(tp, (1, 2), min_insync_replicas=2, replica_lag_time_max_ms=LAG_MS)
    yield b
    for p in b.partitions.values():
        if not p.log.closed:
            p.log.close()


def advance(broker: Broker, clock: ManualClock, ms: int) -> None:
    clock.advance(ms)
    broker.produce_purgatory.timer.poll()
    broker.fetch_purgatory.timer.poll()


def follow(broker: Broker, rid: int, offsets: dict[TopicPartition, int]) -> None:
    """One follower fetch that answers at once (min_bytes=0)."""
    op = broker.fetch(
        {tp: FetchPartitionStatus(o) for tp, o in offsets.items()},
        min_bytes=0,
        replica_id=rid,
    )
    assert op.is_completed


def test_acks_all_completes_when_followers_reach_the_required_offset(
    broker: Broker, clock: ManualClock, writer: TraceWriter
) -> None:
    op = broker.produce({A: batch(3)}, acks=-1, timeout_ms=1000)
    assert not op.is_done
    clock.advance(7)
    follow(broker, 1, {A: 3})
    assert not op.is_done
    follow(broker, 2, {A: 3})  # the HW moves: the broker checks the produce purgatory
    assert op.result() == {A: ProducePartitionResponse(ErrorCode.NONE, 0)}
    [row] = writer.rows
    assert (row.purgatory, row.kind, row.keys, row.outcome) == (
        "produce",
        "produce",
        ["t-0"],
        "completed",
    )
    assert (row.created_ms, row.deadline_ms, row.completed_ms, row.bytes) == (
        0,
        1000,
        7,
        len(batch(3)),
    )
    broker._check_invariants()


def test_acks_all_expires_with_request_timed_out(broker: Broker, clock: ManualClock) -> None:
    op = broker.produce({A: batch(), B: batch()}, acks=-1, timeout_ms=50)
    follow(broker, 1, {A: 1, B: 1})
    follow(broker, 2, {A: 1})  # A is committed, B is not
    advance(broker, clock, 50)
    result = op.result()
    assert result[A].error_code == ErrorCode.NONE
    assert result[B].error_code == ErrorCode.REQUEST_TIMED_OUT
    stats = broker.produce_purgatory.statistics()
    assert (stats.completed_early, stats.expired) == (0, 1)


def test_acks_zero_and_one_answer_after_the_append(broker: Broker) -> None:
    for acks in (0, 1):
        op = broker.produce({A: batch()}, acks=acks, timeout_ms=10)
        assert op.is_completed and op.result()[A].error_code == ErrorCode.NONE
    assert broker.produce_purgatory.statistics().watched == 0
    assert broker.partitions[A].log_end_offset == 2


def test_failures_before_the_wait_answer_at_once(broker: Broker, clock: ManualClock) -> None:
    broker.become_follower(B)
    op = broker.produce({GONE: batch(), B: batch()}, acks=-1, timeout_ms=1000)
    assert op.is_completed
    assert op.result()[GONE].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert op.result()[B].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    broker.produce({A: batch()}, acks=1, timeout_ms=1000)  # followers now behind
    clock.advance(LAG_MS + 1)
    follow(broker, 1, {A: 1})
    assert broker.maybe_shrink_isr() == [(A, 2)]
    follow(broker, 1, {A: 1})  # still fine: ISR {0, 1} == min ISR 2
    broker.produce({A: batch()}, acks=1, timeout_ms=1000)
    clock.advance(LAG_MS + 1)
    assert broker.maybe_shrink_isr() == [(A, 1)]
    op = broker.produce({A: batch()}, acks=-1, timeout_ms=1000)
    assert op.result()[A].error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert broker.partitions[A].log_end_offset == 2


def test_isr_shrink_releases_waiting_produces(broker: Broker, clock: ManualClock) -> None:
    op = broker.produce({A: batch()}, acks=-1, timeout_ms=1000)
    clock.advance(LAG_MS + 1)
    follow(broker, 1, {A: 1})
    assert not op.is_done  # follower 2 holds the HW back
    # B's followers are at its (empty) log end: caught up however idle, they stay
    assert broker.maybe_shrink_isr() == [(A, 2)]
    assert op.result()[A].error_code == ErrorCode.NONE


def test_leadership_loss_answers_waiting_produces_and_fetches(
    broker: Broker, clock: ManualClock
) -> None:
    produce = broker.produce({A: batch()}, acks=-1, timeout_ms=1000)
    fetch = broker.fetch({A: FetchPartitionStatus(1)}, min_bytes=1, max_wait_ms=500, replica_id=1)
    assert not produce.is_done and not fetch.is_done
    broker.become_follower(A)
    assert produce.result()[A].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert fetch.result()[A].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert broker.become_leader(A) == 1
    op = broker.produce({A: batch()}, acks=1, timeout_ms=10)
    assert op.result()[A].base_offset == 1
    data = broker.fetch({A: FetchPartitionStatus(1)}, replica_id=1, min_bytes=0).result()[A]
    [stored] = iter_batches(data.records)
    assert stored[12:16] == (1).to_bytes(4, "big")  # the new leader epoch


def test_follower_fetch_waits_for_an_append(broker: Broker, writer: TraceWriter) -> None:
    fetch = broker.fetch({A: FetchPartitionStatus(0)}, min_bytes=1, max_wait_ms=500, replica_id=1)
    assert not fetch.is_done
    broker.produce({A: batch()}, acks=1, timeout_ms=10)  # HW unchanged, still checks fetch
    data = fetch.result()[A]
    assert (data.error_code, data.high_watermark, data.log_end_offset) == (0, 0, 1)
    assert len(data.records) == SIZE
    assert writer.rows[-1].kind == "fetch_follower"
    assert writer.rows[-1].bytes == SIZE


def test_an_append_checks_only_the_fetches_it_can_complete(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[int] = []  # replica id of each waiting fetch checked
    check = DelayedFetch.try_complete

    def counting(op: DelayedFetch) -> bool:
        checked.append(op.replica_id)
        return check(op)

    monkeypatch.setattr(DelayedFetch, "try_complete", counting)
    consumer = broker.fetch({A: FetchPartitionStatus(0)}, min_bytes=10 * SIZE, max_wait_ms=300)
    follower = broker.fetch(
        {A: FetchPartitionStatus(0)}, min_bytes=1, max_wait_ms=500, replica_id=1
    )
    assert broker.fetch_purgatory.watched == 2
    checked.clear()
    broker.produce({A: batch()}, acks=1, timeout_ms=10)  # HW unchanged: the follower's only
    assert (checked, follower.is_done, consumer.is_done) == ([1], True, False)
    follower = broker.fetch(
        {A: FetchPartitionStatus(1)}, min_bytes=1, max_wait_ms=500, replica_id=1
    )
    checked.clear()
    follow(broker, 2, {A: 1})  # the HW moves to 1: the consumer's only
    assert (checked, follower.is_done, consumer.is_done) == ([-1], False, False)
    checked.clear()
    broker.become_follower(A)  # leadership lost: both
    assert (sorted(checked), follower.is_done, consumer.is_done) == ([-1, 1], True, True)
    broker._check_invariants()


def test_consumer_fetch_waits_for_the_high_watermark(broker: Broker, clock: ManualClock) -> None:
    consumer = broker.fetch({A: FetchPartitionStatus(0)}, min_bytes=2 * SIZE, max_wait_ms=300)
    broker.produce({A: batch(tag="x")}, acks=1, timeout_ms=10)
    broker.produce({A: batch(tag="y")}, acks=1, timeout_ms=10)
    assert not consumer.is_done  # appended, not committed
    follow(broker, 1, {A: 2})
    follow(broker, 2, {A: 1})
    assert not consumer.is_done  # HW 1: one batch readable
    follow(broker, 2, {A: 2})
    data = consumer.result()[A]
    assert data.high_watermark == 2
    values = [r.value for b in iter_batches(data.records) for r in iter_records(b)]
    assert values == [b"x" * 40, b"y" * 40]


def test_consumer_fetch_expires_with_what_is_committed(broker: Broker, clock: ManualClock) -> None:
    consumer = broker.fetch({A: FetchPartitionStatus(0)}, min_bytes=10_000, max_wait_ms=300)
    broker.produce({A: batch()}, acks=1, timeout_ms=10)
    follow(broker, 1, {A: 1})
    follow(broker, 2, {A: 1})
    advance(broker, clock, 299)
    assert not consumer.is_done
    advance(broker, clock, 1)
    assert len(consumer.result()[A].records) == SIZE
    assert broker.counters.bytes_out == SIZE  # the followers fetched from offset 1: nothing


def test_fetch_errors_answer_at_once(broker: Broker) -> None:
    result = broker.fetch(
        {GONE: FetchPartitionStatus(0), A: FetchPartitionStatus(9)}, min_bytes=1, max_wait_ms=500
    ).result()
    assert result[GONE].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert result[A].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    follower = broker.fetch({A: FetchPartitionStatus(9)}, replica_id=1, max_wait_ms=500)
    assert follower.result()[A].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert broker.fetch({A: FetchPartitionStatus(0)}, max_wait_ms=0).is_completed


def test_fetch_max_bytes_bounds_the_answer_but_the_first_batch(broker: Broker) -> None:
    for tp in (A, B):
        broker.produce({tp: batch()}, acks=1, timeout_ms=10)
        broker.produce({tp: batch()}, acks=1, timeout_ms=10)
    for rid in (1, 2):
        follow(broker, rid, {A: 2, B: 2})  # the high watermarks reach 2
    both = {A: FetchPartitionStatus(0), B: FetchPartitionStatus(0)}
    for max_bytes, sizes in [
        (None, (2 * SIZE, 2 * SIZE)),
        (4 * SIZE, (2 * SIZE, 2 * SIZE)),
        (3 * SIZE, (2 * SIZE, SIZE)),
        (2 * SIZE, (2 * SIZE, 0)),
        (0, (SIZE, 0)),  # the first non-empty partition's first batch, whatever the limit
    ]:
        result = broker.fetch(both, max_wait_ms=0, max_bytes=max_bytes).result()
        assert (len(result[A].records), len(result[B].records)) == sizes, max_bytes
    result = broker.fetch(
        {A: FetchPartitionStatus(2), B: FetchPartitionStatus(0)}, max_wait_ms=0, max_bytes=0
    ).result()
    assert (len(result[A].records), len(result[B].records)) == (0, SIZE)


def test_bad_input(broker: Broker) -> None:
    with pytest.raises(ValueError, match="acks"):
        broker.produce({A: batch()}, acks=2, timeout_ms=10)
    with pytest.raises(ValueError, match="at least one"):
        broker.produce({}, timeout_ms=10)
    with pytest.raises(ValueError, match="at least one"):
        broker.fetch({})
    with pytest.raises(ValueError, match="min_bytes"):
        broker.fetch({A: FetchPartitionStatus(0)}, min_bytes=-1)
    with pytest.raises(ValueError, match="max_bytes"):
        broker.fetch({A: FetchPartitionStatus(0)}, max_bytes=-1)
    with pytest.raises(ValueError, match="already exists"):
        broker.create_partition(A)
    with pytest.raises(KeyError):
        broker.become_follower(GONE)


@pytest.mark.asyncio
async def test_close_cancels_and_traces_pending_operations(
    tmp_path: Path, clock: ManualClock
) -> None:
    writer = TraceWriter()
    broker = Broker(tmp_path, clock=clock, reaper_enabled=False, recorder=writer)
    broker.create_partition(A, (1,))
    async with broker:
        produce = broker.produce({A: batch()}, acks=-1, timeout_ms=1000)
        done = broker.produce({A: batch()}, acks=-1, timeout_ms=1000)
        follow(broker, 1, {A: 2})
        assert (await done)[A].base_offset == 1
        assert produce.is_completed  # both committed by that fetch
        waiting = broker.fetch({A: FetchPartitionStatus(2)}, replica_id=1, max_wait_ms=500)
    with pytest.raises(PurgatoryClosedError):
        await waiting
    assert [r.outcome for r in writer.rows] == ["completed", "completed", "cancelled"]
    assert writer.rows[-1].error_codes == [ErrorCode.REQUEST_TIMED_OUT]
    assert broker.partitions[A].log.closed
    path = writer.write(tmp_path / "out" / "trace.parquet")
    table = pq.read_table(path)
    assert table.schema.equals(trace_schema())
    assert table.num_rows == 3
    assert table.column("keys").to_pylist() == [["t-0"]] * 3


def test_await_replication_answers_a_retried_batch_once_replicated(
    broker: Broker, clock: ManualClock, writer: TraceWriter
) -> None:
    """A batch already in the log (an idempotent producer's retry) waits for the same
    replication as a produce, with the first append's offsets, traced and counted."""
    broker.produce({A: batch(), B: batch(3)}, acks=1, timeout_ms=10)
    op = broker.await_replication({A: (0, 0), B: (0, 2)}, acks=-1, timeout_ms=1000)
    assert not op.is_done and broker.counters.replication_waits == 1
    assert broker.counters.produce_requests == 1  # the retry appended nothing
    clock.advance(4)
    follow(broker, 1, {A: 1, B: 3})
    follow(broker, 2, {A: 1, B: 3})
    assert op.result() == {
        A: ProducePartitionResponse(ErrorCode.NONE, 0),
        B: ProducePartitionResponse(ErrorCode.NONE, 0),
    }
    [row] = writer.rows
    assert (row.purgatory, row.kind, row.keys, row.outcome) == (
        "produce",
        "produce",
        ["t-0", "t-1"],
        "completed",
    )
    assert (row.created_ms, row.completed_ms, row.bytes, row.error_codes) == (0, 4, 0, [0, 0])
    assert broker.partitions[A].log_end_offset == 1  # nothing appended again
    broker._check_invariants()


def test_await_replication_times_out_and_answers_at_once_without_acks(
    broker: Broker, clock: ManualClock
) -> None:
    broker.produce({A: batch(2)}, acks=1, timeout_ms=10)
    for acks in (0, 1):
        now = broker.await_replication({A: (0, 1)}, acks=acks, timeout_ms=10)
        assert now.result() == {A: ProducePartitionResponse(ErrorCode.NONE, 0)}
    waiting = broker.await_replication({A: (0, 1)}, timeout_ms=50)
    advance(broker, clock, 50)
    assert waiting.result() == {A: ProducePartitionResponse(ErrorCode.REQUEST_TIMED_OUT, -1)}
    assert broker.produce_purgatory.statistics().expired == 1
    lost = broker.await_replication({GONE: (0, 0)}, timeout_ms=50)
    assert lost.result()[GONE].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(ValueError, match="acks"):
        broker.await_replication({A: (0, 1)}, acks=2, timeout_ms=10)
    with pytest.raises(ValueError, match="at least one"):
        broker.await_replication({}, timeout_ms=10)
    with pytest.raises(ValueError, match="base_offset <= last_offset"):
        broker.await_replication({A: (2, 1)}, timeout_ms=10)


@pytest.mark.asyncio
async def test_requests_are_refused_once_close_begins(tmp_path: Path, clock: ManualClock) -> None:
    """A follower fetching while the broker closes used to complete operations whose
    rows close had already recorded as cancelled (a KeyError in ``Broker.record``); now
    requests are refused from the start of the close, and each row is recorded once."""
    writer = TraceWriter()
    broker = Broker(tmp_path, clock=clock, reaper_enabled=False, recorder=writer)
    broker.create_partition(A, (1,))
    async with broker:
        waiting = broker.produce({A: batch()}, acks=-1, timeout_ms=1000)
        closing = asyncio.ensure_future(broker.close())
        await asyncio.sleep(0)  # close has begun
        with pytest.raises(RuntimeError, match="closed"):
            broker.fetch({A: FetchPartitionStatus(1)}, min_bytes=0, replica_id=1)
        with pytest.raises(RuntimeError, match="closed"):
            broker.produce({A: batch()}, acks=1, timeout_ms=1000)
        await closing
    assert waiting.is_cancelled
    assert [r.outcome for r in writer.rows] == ["cancelled"]


def test_the_brokers_age_counts_on_its_clock_from_its_making(tmp_path: Path) -> None:
    clock = ManualClock(start_ms=5_000)
    broker = Broker(tmp_path, clock=clock, reaper_enabled=False)
    assert broker.age_ms() == 0
    clock.advance(250)
    assert broker.age_ms() == 250


@pytest.mark.asyncio
async def test_on_the_loop_clock_the_age_is_read_through_the_libraries_bound_reader(
    tmp_path: Path,
) -> None:
    """The broker reads no clock its own way: through the produce timer, which reads
    the loop's clock through a reader bound to the loop while its reaper runs."""
    clock = LoopClock()
    before_made_ms = clock.now_ms()
    broker = Broker(tmp_path)  # the default clock: a LoopClock
    after_made_ms = clock.now_ms()
    timer = broker.produce_purgatory.timer
    assert timer.reader.kind == "clock"
    async with broker:
        assert timer.reader.kind != "clock"  # bound to this loop
        before_ms = clock.now_ms()
        age_ms = broker.age_ms()
        after_ms = clock.now_ms()
    # made between before_made_ms and after_made_ms; read between before and after
    assert before_ms - after_made_ms <= age_ms <= after_ms - before_made_ms
    assert timer.reader.kind == "clock"  # back to finding the running loop

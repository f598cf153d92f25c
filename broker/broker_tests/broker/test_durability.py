"""Acknowledged means written: what survives the broker process dying, flush policy,
and recovery that drops data saying so."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from purgatory_broker.broker import (
    Broker,
    ErrorCode,
    PartitionLog,
    build_batch,
    iter_batches,
    iter_records,
)

from purgatory import TopicPartition
from purgatory.testing import ManualClock

from ..childproc import Child
from .partitions_kit import A, B

ACKS_BEFORE_KILL = 200


def records_in(directory: Path) -> dict[int, bytes]:
    """Every record of the log in ``directory``, by offset (reopened, so recovered)."""
    with PartitionLog(directory) as log:
        data = log.read(log.log_start_offset, 1 << 30)
    return {r.offset: r.value or b"" for b in iter_batches(data) for r in iter_records(b)}


def test_sigkill_loses_no_acknowledged_record(tmp_path: Path) -> None:
    """A broker process killed with SIGKILL: every record it had acknowledged (acks=-1
    and acks=1) is in its partition's file when the logs are reopened."""
    acked: list[tuple[int, int, bytes]] = []
    with Child(["-m", "broker_tests.broker.crash_child", str(tmp_path)]) as child:
        lines: list[str] = []
        try:
            while len(lines) < ACKS_BEFORE_KILL:
                line = child.read_line(timeout_s=60)  # a hang guard (a loaded machine)
                assert line is not None, "the child exited"
                lines.append(line)
        finally:
            lines += child.kill()
        assert len(lines) >= ACKS_BEFORE_KILL, child.stderr()
    for line in lines:
        partition, offset, value = line.split(" ")
        acked.append((int(partition), int(offset), value.encode()))
    logs = {p: records_in(tmp_path / str(TopicPartition("crash", p))) for p in (0, 1)}
    missing = [(p, o) for p, o, v in acked if logs[p].get(o) != v]
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged records lost"


# ------------------------------------------------------------ the flush policy


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The log files ``os.fsync`` is called on, in order (the real fsync still runs).

    Index files are left out: a flush calls ``msync`` on a mapped index, and ``fsync``
    on one whose map the open-files set had closed.
    """
    calls: list[str] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        name = Path(os.readlink(f"/proc/self/fd/{fd}")).name
        if name.endswith(".log"):
            calls.append(name)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    return calls


def one(tag: int, records: int = 1) -> bytes:
    return build_batch([b"%d" % tag] * records, base_timestamp_ms=0)


def test_default_policy_never_fsyncs(tmp_path: Path, fsyncs: list[str]) -> None:
    """Kafka's default: no flush policy; appends, rolls and close make no fsync."""
    with PartitionLog(tmp_path / "log", segment_bytes=500) as log:
        for i in range(50):
            log.append(one(i))
        assert log.segment_count > 1
        assert log.unflushed_messages == 50 and log.flush_due_ms is None
    assert fsyncs == [] and log.flush_count == 0


def test_flush_messages_fsyncs_once_n_records_are_unflushed(
    tmp_path: Path, fsyncs: list[str]
) -> None:
    with PartitionLog(tmp_path / "log", flush_messages=3) as log:
        log.append(one(0, records=2))
        assert (log.unflushed_messages, fsyncs) == (2, [])
        log.append(one(1))  # offset 2: three unflushed -> fsync inside the append
        assert (log.unflushed_messages, fsyncs) == (0, ["00000000000000000000.log"])
        log.append(one(2, records=5))  # five at once: over the threshold
        assert (log.unflushed_messages, len(fsyncs), log.flush_count) == (0, 2, 2)
        log.append(one(3))
        assert len(fsyncs) == 2
    # close flushes what is left when a policy is set
    assert len(fsyncs) == 3 and log.flush_count == 3


def test_flush_ms_is_due_that_long_after_the_first_unflushed_write(
    tmp_path: Path, fsyncs: list[str]
) -> None:
    clock = ManualClock(start_ms=1_000)
    with PartitionLog(tmp_path / "log", flush_ms=100, clock=clock) as log:

        def due() -> int | None:
            return log.flush_due_ms

        assert due() is None and not log.maybe_flush(5_000)
        log.append(one(0))
        clock.advance(60)
        log.append(one(1))  # does not move the deadline: the first write counts
        assert due() == 1_100
        assert not log.maybe_flush(1_099) and fsyncs == []
        assert log.maybe_flush(1_100) and len(fsyncs) == 1
        assert due() is None and log.unflushed_messages == 0
        assert not log.maybe_flush(9_999)  # nothing unflushed: nothing to do
        clock.advance(2_000 - clock.now_ms())
        log.append(one(2))
        assert due() == 2_100
        log.flush()
        assert due() is None and len(fsyncs) == 2


def test_a_flush_syncs_every_segment_rolled_since_the_last(
    tmp_path: Path, fsyncs: list[str]
) -> None:
    with PartitionLog(tmp_path / "log", segment_bytes=300, flush_messages=1_000) as log:
        log.append(one(0))
        log.flush()
        fsyncs.clear()
        for i in range(1, 20):
            log.append(one(i))
        written = [s.log_path.name for s in log.segments]
        assert len(written) > 3
        log.flush()
        assert fsyncs == written  # the first was flushed, then appended to, then rolled
        fsyncs.clear()
        log.flush()
        assert fsyncs == []  # nothing written since
        log._check_invariants()


def test_truncation_then_flush(tmp_path: Path, fsyncs: list[str]) -> None:
    with PartitionLog(tmp_path / "log", segment_bytes=300, flush_messages=1_000) as log:
        for i in range(20):
            log.append(one(i))
        log.flush()
        log.truncate_to(3)
        assert log.unflushed_messages == 0
        fsyncs.clear()
        log.flush()  # the truncated segment is synced; the deleted ones are gone
        assert fsyncs == ["00000000000000000000.log"]
        log._check_invariants()


def test_bad_flush_settings_are_refused(tmp_path: Path) -> None:
    for bad in ({"flush_messages": 0}, {"flush_ms": -1}, {"flush_ms": 1.5}):
        with pytest.raises(ValueError, match="flush_"):
            PartitionLog(tmp_path / "log", **bad)


def manual_broker(tmp_path: Path, clock: ManualClock, **policy: int) -> Broker:
    broker = Broker(tmp_path, clock=clock, reaper_enabled=False, **policy)  # type: ignore[arg-type]
    for tp in (A, B):
        broker.create_partition(tp)
    return broker


def advance(broker: Broker, clock: ManualClock, ms: int) -> None:
    clock.advance(ms)
    broker.produce_purgatory.timer.poll()


@pytest.mark.asyncio
async def test_broker_flush_ms_fsyncs_on_its_timer(
    tmp_path: Path, clock: ManualClock, fsyncs: list[str]
) -> None:
    broker = manual_broker(tmp_path, clock, flush_ms=50)
    broker.produce({A: one(0)}, acks=1, timeout_ms=1_000)
    advance(broker, clock, 30)
    broker.produce({A: one(1)}, acks=1, timeout_ms=1_000)
    broker.produce({B: one(2)}, acks=1, timeout_ms=1_000)  # B is due at 80
    advance(broker, clock, 19)
    assert fsyncs == []
    advance(broker, clock, 1)  # t=50: A's first unflushed write was at 0
    assert len(fsyncs) == 1 and broker.partitions[A].log.unflushed_messages == 0
    advance(broker, clock, 30)  # t=80: B's
    assert len(fsyncs) == 2 and broker.log_flushes == 2
    advance(broker, clock, 10_000)  # nothing written since: no timer task, no fsync
    assert len(fsyncs) == 2 and len(broker.produce_purgatory.timer) == 0
    broker.produce({A: one(3)}, acks=1, timeout_ms=1_000)
    advance(broker, clock, 50)
    assert len(fsyncs) == 3
    await broker.close()
    assert len(fsyncs) == 3  # close found nothing unflushed


@pytest.mark.asyncio
async def test_broker_flush_messages_fsyncs_before_the_answer(
    tmp_path: Path, clock: ManualClock, fsyncs: list[str]
) -> None:
    broker = manual_broker(tmp_path, clock, flush_messages=2)
    assert broker.produce({A: one(0)}, acks=1, timeout_ms=1_000).is_done
    assert fsyncs == []
    op = broker.produce({A: one(1)}, acks=-1, timeout_ms=1_000)
    assert op.is_done and op.result()[A].error_code == 0
    assert len(fsyncs) == 1
    broker.produce({A: one(2)}, acks=1, timeout_ms=1_000)
    await broker.close()
    assert len(fsyncs) == 2  # close flushes the unflushed one


@pytest.mark.asyncio
async def test_broker_flush_failures_are_logged_not_raised(
    tmp_path: Path,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A failing fsync: the timer's flush logs and counts it; a produce whose policy
    flush fails answers KAFKA_STORAGE_ERROR (56)."""
    broker = manual_broker(tmp_path, clock, flush_ms=10, flush_messages=3)

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    broker.produce({A: one(0)}, acks=1, timeout_ms=1_000)
    with caplog.at_level(logging.ERROR, logger="purgatory_broker.broker"):
        advance(broker, clock, 10)
    assert broker.counters.flush_errors == 1
    assert "flushing t-0 failed" in caplog.text
    op = broker.produce({A: one(1, records=2)}, acks=1, timeout_ms=1_000)
    assert op.result()[A].error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert ErrorCode.KAFKA_STORAGE_ERROR.value == 56
    monkeypatch.undo()
    await broker.close()


# ------------------------------------------------------------ recovery is never silent


def test_recovery_that_cuts_data_logs_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A torn tail of the active segment: reopening cuts it and says so, once, naming
    the partition's directory, the offset the log now ends at and the bytes dropped."""
    directory = tmp_path / "orders-3"
    with PartitionLog(directory, segment_bytes=300) as log:
        for i in range(10):
            log.append(one(i))
        end, active = log.log_end_offset, log.segments[-1].log_path
    torn = one(99, records=3)[:-5]
    with active.open("ab") as f:
        f.write(torn)
    with caplog.at_level(logging.INFO, logger="purgatory_broker.broker"):
        reopened = PartitionLog(directory, segment_bytes=300)
    reopened.close()
    assert reopened.recovery.truncated_bytes == len(torn)
    assert reopened.recovery.truncated_at_offset == end == reopened.log_end_offset
    [record] = caplog.records
    assert (record.name, record.levelno) == ("purgatory_broker.broker", logging.WARNING)
    message = record.getMessage()
    assert str(directory) in message
    assert f"at offset {end}, dropping {len(torn)} bytes" in message
    assert "torn batch" in message


def test_clean_reopen_and_index_repairs_log_no_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "orders-0"
    with PartitionLog(directory, index_interval_bytes=50) as log:
        for i in range(10):
            log.append(one(i))
    with caplog.at_level(logging.INFO, logger="purgatory_broker.broker"):
        PartitionLog(directory).close()
    assert caplog.records == []
    (directory / "00000000000000000000.index").unlink()
    with caplog.at_level(logging.INFO, logger="purgatory_broker.broker"):
        PartitionLog(directory).close()
    [record] = caplog.records
    assert record.levelno == logging.INFO and "is missing" in record.getMessage()

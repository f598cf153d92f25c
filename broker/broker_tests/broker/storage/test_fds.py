"""File descriptors: one per partition (its active log), rolled segments through a
bounded LRU, indexes none."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from purgatory_broker.broker import Broker, PartitionLog, build_batch, iter_batches, iter_records
from purgatory_broker.broker.storage.open_files import OpenFiles
from purgatory_broker.broker.storage.segment import LOG_SUFFIX, LogSegment, SegmentSettings

from purgatory import TopicPartition
from purgatory.testing import ManualClock


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def offsets(data: bytes) -> list[int]:
    return [r.offset for b in iter_batches(data) for r in iter_records(b)]


def batch(tag: int) -> bytes:
    return build_batch([b"%04d" % tag * 25], base_timestamp_ms=0)


def test_a_log_with_many_rolled_segments_holds_one_descriptor(tmp_path: Path) -> None:
    files = OpenFiles(capacity=4)
    baseline = open_fds()
    log = PartitionLog(tmp_path / "log", segment_bytes=400, open_files=files)
    peak = 0
    for i in range(200):
        log.append(batch(i))
        peak = max(peak, open_fds() - baseline)
    assert log.segment_count >= 60
    assert peak <= 1 + files.capacity
    assert open_fds() - baseline <= 1 + files.capacity  # the rolled ones, bounded
    log.close()
    assert open_fds() == baseline
    reopened = PartitionLog(tmp_path / "log", segment_bytes=400, open_files=files)
    # opening checked every rolled segment through the set and closed them after:
    # the active log, and the active index's map (a descriptor in CPython)
    assert open_fds() - baseline == 2 and len(files) == 1
    files.close()  # the map too: only the active segment's log is open
    assert open_fds() - baseline == 1
    data = reopened.read(0, 1 << 30)  # every segment read
    assert len(data) == reopened.size_bytes
    assert open_fds() - baseline == 1 + len(files) <= 1 + files.capacity
    reopened._check_invariants()
    reopened.close()
    assert open_fds() == baseline and len(files) == 0


def test_truncating_into_a_rolled_segment_reactivates_it(tmp_path: Path) -> None:
    files = OpenFiles(capacity=2)
    baseline = open_fds()
    with PartitionLog(tmp_path / "log", segment_bytes=400, open_files=files) as log:
        for i in range(40):
            log.append(batch(i))
        target = log.segments[2]
        log.truncate_to(target.base_offset + 1)
        assert log.segments[-1] is target and target.is_active
        assert log.append(batch(99))[0] == target.base_offset + 1
        log._check_invariants()
        assert open_fds() - baseline <= 1 + files.capacity
    assert open_fds() == baseline


@pytest.mark.asyncio
async def test_many_partitions_cost_one_descriptor_each(tmp_path: Path) -> None:
    broker = Broker(
        tmp_path, clock=ManualClock(), reaper_enabled=False, segment_bytes=400,
        max_open_files=8,
    )  # fmt: skip
    baseline = open_fds()
    tps = [TopicPartition("many", p) for p in range(150)]
    for tp in tps:
        broker.create_partition(tp)
        for i in range(8):
            broker.produce({tp: batch(i)}, acks=1, timeout_ms=1_000)
    assert all(broker.partitions[tp].log.segment_count >= 3 for tp in tps)
    assert open_fds() - baseline <= len(tps) + 8
    broker.open_files.close()
    assert open_fds() - baseline == len(tps)
    await broker.close()
    assert open_fds() == baseline


def test_out_of_descriptors_leaves_the_log_consistent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EMFILE while a roll creates the next segment, or while an index map is made
    again: the append fails (roll) or skips one index entry, and the log stays whole."""
    files = OpenFiles(capacity=1)
    log = PartitionLog(tmp_path / "log", segment_bytes=400, index_interval_bytes=50,
                       open_files=files)  # fmt: skip
    for i in range(12):
        log.append(batch(i))
    real_open = os.open

    def emfile(*args: object, **kwargs: object) -> int:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(os, "open", emfile)
    with pytest.raises(OSError, match="Too many"):
        while True:  # until an append needs a new segment
            before = (log.log_end_offset, log.segment_count, log.size_bytes)
            log.append(batch(99))
    monkeypatch.setattr(os, "open", real_open)
    assert (log.log_end_offset, log.segment_count, log.size_bytes) == before
    log._check_invariants()
    assert len(log.read(0, 1 << 20)) == log.size_bytes
    end = log.log_end_offset
    log.roll()
    active = log.segments[-1]
    active.index.close_files()  # the active index's map is closed, then EMFILE
    monkeypatch.setattr(os, "open", emfile)
    for i in range(2):  # the second is due an index entry: the map cannot be made
        assert log.append(batch(200 + i)) == (end + i, end + i)
    monkeypatch.setattr(os, "open", real_open)
    assert log.segments[-1] is active and active.index.entries == 0
    log._check_invariants()
    assert offsets(log.read(end, 1 << 20)) == [end, end + 1]
    log.close()


@pytest.mark.parametrize("how", ["create", "open"])
def test_a_segment_whose_log_cannot_be_opened_leaves_nothing_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """EMFILE for the log after its index was opened: the index is closed again
    (``create`` used to leave its map open, and registered)."""
    files = OpenFiles(capacity=4)
    settings = SegmentSettings(index_interval_bytes=50, max_index_size_bytes=1024, files=files)
    LogSegment.create(tmp_path, 0, settings).close()
    real_open = os.open

    def emfile_for_the_log(path: str, *args: int) -> int:
        if str(path).endswith(LOG_SUFFIX):
            raise OSError(24, "Too many open files")
        return real_open(path, *args)

    baseline = open_fds()
    monkeypatch.setattr(os, "open", emfile_for_the_log)
    with pytest.raises(OSError, match="Too many"):
        if how == "create":
            LogSegment.create(tmp_path, 0, settings)
        else:
            LogSegment.open(tmp_path, 0, settings, active=True)
    monkeypatch.setattr(os, "open", real_open)
    assert len(files) == 0
    assert open_fds() == baseline

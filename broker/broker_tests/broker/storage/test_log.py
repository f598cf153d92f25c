"""PartitionLog and LogSegment: offsets, reads, rolls, truncation, crash recovery."""

from __future__ import annotations

import itertools
import os
import random
import shutil
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from purgatory_broker.broker.storage.log import (
    LogRecovery,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordBatchTooLargeError,
)
from purgatory_broker.broker.storage.offset_index import ENTRY_BYTES
from purgatory_broker.broker.storage.open_files import OpenFiles
from purgatory_broker.broker.storage.records import (
    CorruptRecordError,
    Record,
    RecordBatchHeader,
    build_batch,
    iter_batches,
    iter_records,
)

MakeLog = Callable[..., PartitionLog]

SMALL = {"segment_bytes": 2_000, "index_interval_bytes": 300, "max_index_size_bytes": 80}


def batch(records: int = 1, value_bytes: int = 20, tag: int = 0) -> bytes:
    """A batch of ``records`` records; ``tag`` makes the values distinct."""
    return build_batch(
        [
            Record(bytes([tag % 256]) * value_bytes, key=f"{tag}-{i}".encode())
            for i in range(records)
        ],
        base_timestamp_ms=1_700_000_000_000,
    )


@pytest.fixture
def make_log(tmp_path: Path) -> Iterator[MakeLog]:
    """Open logs in tmp_path (default directory ``log``); all closed at teardown."""
    opened: list[PartitionLog] = []

    def make(directory: str | Path = "log", **kwargs: Any) -> PartitionLog:
        log = PartitionLog(tmp_path / directory, **kwargs)
        opened.append(log)
        log._check_invariants()
        return log

    yield make
    for log in opened:
        log.close()


def fill(log: PartitionLog, count: int, seed: int = 0) -> list[tuple[int, int, bytes]]:
    """Append ``count`` random batches; return (base, last, original bytes) each."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        original = batch(rng.randint(1, 4), rng.randint(1, 120), tag=i)
        base, last = log.append(original)
        out.append((base, last, original))
    log._check_invariants()
    return out


def offsets_in(data: bytes) -> list[int]:
    return [r.offset for b in iter_batches(data) for r in iter_records(b)]


def bases_in(data: bytes) -> list[int]:
    return [RecordBatchHeader.parse(b).base_offset for b in iter_batches(data)]


def crash_copy(log: PartitionLog, tmp_path: Path, name: str = "crashed") -> Path:
    """The directory as a process crash would leave it: indexes untrimmed."""
    target = tmp_path / name
    shutil.copytree(log.directory, target)
    return target


# ------------------------------------------------------------ appending and reading


def test_empty_log(make_log: MakeLog) -> None:
    log = make_log()
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (0, 0, 0)
    assert log.read(0, 1000) == b""
    assert log.readable_bytes(0) == 0
    assert sorted(p.name for p in log.directory.iterdir()) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
    ]
    assert log.recovery == LogRecovery()


def test_append_assigns_offsets_and_round_trips(make_log: MakeLog) -> None:
    log = make_log()
    originals = [batch(3, tag=1), batch(1, tag=2), batch(2, tag=3)]
    results = []
    for original in originals:
        results.append(log.append(original))
        log._check_invariants()
    assert results == [(0, 2), (3, 3), (4, 5)]
    assert log.log_end_offset == 6
    assert log.size_bytes == sum(map(len, originals))
    data = log.read(0, 1 << 20)
    stored = list(iter_batches(data))  # CRCs still valid after the rewrite
    assert [RecordBatchHeader.parse(b).base_offset for b in stored] == [0, 3, 4]
    for original, kept in zip(originals, stored, strict=True):
        assert kept[8:] == original[8:]  # only the base offset changed
    assert offsets_in(data) == list(range(6))
    assert [r.value for r in iter_records(stored[1])] == [bytes([2]) * 20]


def test_append_stamps_leader_epoch(make_log: MakeLog) -> None:
    log = make_log()
    log.append(batch(), leader_epoch=7)
    assert RecordBatchHeader.parse(log.read(0, 1000)).partition_leader_epoch == 7


def test_follower_append_keeps_offsets(make_log: MakeLog) -> None:
    leader = make_log("leader")
    follower = make_log("follower")
    fill(leader, 20)
    for data in iter_batches(leader.read(0, 1 << 20)):
        follower.append(data, assign_offsets=False)
    assert follower.read(0, 1 << 20) == leader.read(0, 1 << 20)
    with pytest.raises(ValueError, match="not the log end offset"):
        follower.append(batch(), assign_offsets=False)  # base 0, log end is not
    follower._check_invariants()


def test_corrupt_and_oversized_batches_are_refused(make_log: MakeLog) -> None:
    log = make_log(**SMALL)
    fill(log, 3)
    size, end = log.size_bytes, log.log_end_offset
    bad = bytearray(batch())
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append(bytes(bad))
    with pytest.raises(CorruptRecordError, match="truncated"):
        log.append(batch()[:-3])
    with pytest.raises(RecordBatchTooLargeError):
        log.append(batch(1, 3_000))
    assert (log.size_bytes, log.log_end_offset) == (size, end)
    log._check_invariants()


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="segment_bytes"):
        PartitionLog(tmp_path, segment_bytes=0)
    with pytest.raises(ValueError, match="int32"):
        PartitionLog(tmp_path, segment_bytes=2**31)
    with pytest.raises(ValueError, match="max_index_size_bytes"):
        PartitionLog(tmp_path, max_index_size_bytes=4)


def test_every_offset_reads_from_its_batch(make_log: MakeLog) -> None:
    log = make_log(**SMALL)
    appended = fill(log, 120)
    assert log.segment_count > 5
    for base, last, original in appended:
        for offset in range(base, last + 1):
            data = log.read(offset, 1)  # max_bytes 1: just the first whole batch
            assert data[8:] == original[8:]
            assert RecordBatchHeader.parse(data).base_offset == base


def test_offsets_continue_across_segment_rolls(make_log: MakeLog) -> None:
    log = make_log(**SMALL)
    appended = fill(log, 150)
    segments = log.segments
    assert len(segments) > 5
    for before, after in itertools.pairwise(segments):
        assert before.next_offset == after.base_offset
        assert before.size_bytes <= SMALL["segment_bytes"]
    for segment in segments:
        assert segment.log_path.name == f"{segment.base_offset:020d}.log"
    whole = log.read(0, 1 << 20)
    assert offsets_in(whole) == list(range(log.log_end_offset))
    assert len(whole) == log.size_bytes
    assert bases_in(whole) == [base for base, _, _ in appended]


def test_roll_when_index_is_full(make_log: MakeLog) -> None:
    log = make_log(segment_bytes=1 << 20, index_interval_bytes=1, max_index_size_bytes=16)
    fill(log, 12)
    # interval 1 byte: every batch after a segment's first gets an entry; 2 slots
    assert [s.index.entries for s in log.segments] == [2, 2, 2, 2]
    assert all(s.size_bytes > 0 for s in log.segments)
    assert log.segment_count == 4


def test_read_max_offset_is_exclusive(make_log: MakeLog) -> None:
    log = make_log()
    for n in (3, 1, 2):  # offsets [0..2] [3] [4..5]
        log.append(batch(n))
    assert bases_in(log.read(0, 1 << 20, max_offset=6)) == [0, 3, 4]
    assert bases_in(log.read(0, 1 << 20, max_offset=4)) == [0, 3]
    assert bases_in(log.read(1, 1 << 20, max_offset=5)) == [0, 3]  # [4..5] straddles 5
    assert log.read(4, 1 << 20, max_offset=5) == b""  # nothing whole below 5
    assert log.read(3, 1 << 20, max_offset=3) == b""  # at the high watermark
    assert log.read(5, 1 << 20, max_offset=2) == b""  # beyond it (still in range)
    assert bases_in(log.read(0, 1 << 20, max_offset=100)) == [0, 3, 4]  # capped at end


def test_read_max_bytes_always_includes_the_first_batch(make_log: MakeLog) -> None:
    log = make_log()
    sizes = []
    for i in range(5):
        original = batch(1, 100 + 10 * i, tag=i)
        sizes.append(len(original))
        log.append(original)
    assert bases_in(log.read(0, 0)) == [0]
    assert bases_in(log.read(0, 1)) == [0]
    assert bases_in(log.read(0, sizes[0])) == [0]
    assert bases_in(log.read(0, sizes[0] + sizes[1] - 1)) == [0]
    assert bases_in(log.read(0, sizes[0] + sizes[1])) == [0, 1]
    assert bases_in(log.read(2, sum(sizes[2:]))) == [2, 3, 4]
    with pytest.raises(ValueError, match="max_bytes"):
        log.read(0, -1)


def test_read_across_segments_respects_limits(make_log: MakeLog) -> None:
    log = make_log(**SMALL)
    appended = fill(log, 100)
    first_roll = log.segments[1].base_offset
    data = log.read(0, 1 << 20, max_offset=first_roll + 3)
    assert offsets_in(data)[-1] < first_roll + 3
    assert max(offsets_in(data)) >= first_roll - 1
    budget = 3 * SMALL["segment_bytes"]
    data = log.read(0, budget)
    next_size = len(appended[len(list(iter_batches(data)))][2])
    assert budget - next_size < len(data) <= budget


def test_out_of_range(make_log: MakeLog) -> None:
    log = make_log()
    fill(log, 3)
    end = log.log_end_offset
    assert log.read(end, 100) == b""
    for offset in (-1, end + 1):
        with pytest.raises(OffsetOutOfRangeError) as info:
            log.read(offset, 100)
        assert (info.value.log_start_offset, info.value.log_end_offset) == (0, end)
        with pytest.raises(OffsetOutOfRangeError):
            log.readable_bytes(offset)
    log.truncate_to(0)
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)


def test_readable_bytes_matches_read(make_log: MakeLog) -> None:
    log = make_log(**SMALL)
    fill(log, 60, seed=4)
    end = log.log_end_offset
    rng = random.Random(5)
    for _ in range(300):
        offset = rng.randint(0, end)
        max_offset = rng.randint(0, end + 2)
        expected = len(log.read(offset, 1 << 30, max_offset))
        assert log.readable_bytes(offset, max_offset) == expected, (offset, max_offset)
    assert log.readable_bytes(0) == log.size_bytes


def test_each_append_is_in_the_file_when_it_returns(
    make_log: MakeLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Write-through: one pwrite per append, and the file holds the batch before
    append returns, so a process that dies right after loses nothing appended."""
    writes = 0
    real_pwrite = os.pwrite

    def counting_pwrite(fd: int, data: Any, offset: int) -> int:
        nonlocal writes
        writes += 1
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", counting_pwrite)
    log = make_log(**SMALL)
    for i in range(200):
        original = batch(1, 10, tag=i)
        log.append(original)
        active = log.segments[-1]
        assert active.log_path.stat().st_size == active.size_bytes
        assert active.log_path.read_bytes()[-len(original) :][12:] == original[12:]
        assert writes == i + 1
    assert log.segment_count > 1
    assert sum(s.log_path.stat().st_size for s in log.segments) == log.size_bytes


def test_a_failed_write_leaves_the_segment_as_it_was(
    make_log: MakeLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pwrite that writes part of the batch and then fails (ENOSPC): the part is
    cut again, the error reaches the caller, the next append lands where it should."""
    log = make_log()
    fill(log, 3)
    before = log.read(0, 1 << 20)
    real_pwrite = os.pwrite
    calls = 0

    def short_then_full(fd: int, data: Any, offset: int) -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            return real_pwrite(fd, bytes(data)[:10], offset)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", short_then_full)
    with pytest.raises(OSError, match="No space"):
        log.append(batch(2))
    monkeypatch.setattr(os, "pwrite", real_pwrite)
    log._check_invariants()
    assert log.read(0, 1 << 20) == before
    end = log.log_end_offset
    assert log.append(batch()) == (end, end)
    log._check_invariants()


# ------------------------------------------------------------ truncation


def test_truncate_to_batch_boundary_and_straddling(make_log: MakeLog) -> None:
    log = make_log()
    for n in (3, 1, 2, 4):  # [0..2] [3] [4..5] [6..9]
        log.append(batch(n))
    log.truncate_to(20)  # past the end: nothing
    assert log.log_end_offset == 10
    log.truncate_to(6)  # at a boundary
    log._check_invariants()
    assert (log.log_end_offset, bases_in(log.read(0, 1 << 20))) == (6, [0, 3, 4])
    log.truncate_to(5)  # straddles [4..5]: the whole batch goes
    log._check_invariants()
    assert log.log_end_offset == 4
    assert log.append(batch(2)) == (4, 5)
    log._check_invariants()


def test_truncate_across_segments(make_log: MakeLog) -> None:
    log = make_log(**SMALL)
    appended = fill(log, 120)
    names_before = {p.name for p in log.directory.iterdir()}
    target_base, _, _ = appended[50]
    log.truncate_to(target_base)
    log._check_invariants()
    assert log.log_end_offset == target_base
    assert offsets_in(log.read(0, 1 << 20)) == list(range(target_base))
    kept = {f"{s.base_offset:020d}{suffix}" for s in log.segments for suffix in (".log", ".index")}
    assert {p.name for p in log.directory.iterdir()} == kept
    assert kept < names_before
    more = fill(log, 30, seed=9)  # the truncated segment takes appends again
    assert more[0][0] == target_base
    assert offsets_in(log.read(0, 1 << 20)) == list(range(log.log_end_offset))


def test_truncate_below_the_start_restarts_the_log(make_log: MakeLog) -> None:
    log = make_log(**SMALL)
    fill(log, 40)
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (0, 0, 0)
    assert log.segment_count == 1
    assert [p.name for p in sorted(log.directory.iterdir())] == [
        "00000000000000000000.index",
        "00000000000000000000.log",
    ]
    log._check_invariants()
    with pytest.raises(ValueError, match=">= 0"):
        log.truncate_to(-1)


# ------------------------------------------------------------ reopening and recovery


def test_clean_reopen(make_log: MakeLog) -> None:
    log = make_log(**SMALL)
    fill(log, 80)
    content, end = log.read(0, 1 << 20), log.log_end_offset
    entries = [list(s.index.iter_entries()) for s in log.segments]
    log.close()
    for segment in log.segments:
        assert segment.index.path.stat().st_size == len(entries.pop(0)) * ENTRY_BYTES
    reopened = make_log(**SMALL)
    assert reopened.recovery == LogRecovery()
    assert (reopened.read(0, 1 << 20), reopened.log_end_offset) == (content, end)
    assert reopened.append(batch()) == (end, end)
    reopened._check_invariants()


def test_crash_with_untrimmed_index(make_log: MakeLog, tmp_path: Path) -> None:
    log = make_log(segment_bytes=1 << 20, index_interval_bytes=200, max_index_size_bytes=4096)
    fill(log, 60)
    crashed = crash_copy(log, tmp_path)
    active_index = crashed / "00000000000000000000.index"
    assert active_index.stat().st_size == 4096  # preallocated, never trimmed
    entries = list(log.segments[0].index.iter_entries())
    assert entries
    recovered = make_log(
        crashed, segment_bytes=1 << 20, index_interval_bytes=200, max_index_size_bytes=4096
    )
    assert recovered.recovery == LogRecovery()
    assert list(recovered.segments[0].index.iter_entries()) == entries
    assert recovered.read(0, 1 << 20) == log.read(0, 1 << 20)
    recovered.close()
    assert active_index.stat().st_size == len(entries) * ENTRY_BYTES


def test_index_entries_past_the_log_end_are_dropped(make_log: MakeLog, tmp_path: Path) -> None:
    """The index map can outlive log data (a machine crash that kept the index's
    pages but not the log's): entries past the log end go."""
    log = make_log(index_interval_bytes=100)
    fill(log, 10, seed=1)
    durable_end, durable_size = log.log_end_offset, log.size_bytes
    entries_before = log.segments[0].index.entries
    fill(log, 10, seed=2)
    assert log.segments[0].index.entries > entries_before
    crashed = crash_copy(log, tmp_path)
    os.truncate(crashed / log.segments[0].log_path.name, durable_size)
    recovered = make_log(crashed, index_interval_bytes=100)
    assert recovered.recovery.dropped_index_entries > 0
    assert recovered.recovery.truncated_bytes == 0
    assert recovered.log_end_offset == durable_end
    assert recovered.read(0, 1 << 20) == log.read(0, durable_size)


def test_torn_last_batch_is_cut(make_log: MakeLog, tmp_path: Path) -> None:
    log = make_log(**SMALL)
    fill(log, 50)
    content, end = log.read(0, 1 << 20), log.log_end_offset
    log.close()
    last = log.segments[-1].log_path
    torn = with_base(batch(3, 50), end)[:-7]
    with last.open("ab") as f:
        f.write(torn)
    recovered = make_log(**SMALL)
    assert recovered.recovery.truncated_bytes == len(torn)
    assert "torn batch" in recovered.recovery.reasons[0]
    assert (recovered.read(0, 1 << 20), recovered.log_end_offset) == (content, end)
    assert recovered.append(batch()) == (end, end)
    recovered._check_invariants()


def with_base(data: bytes, base_offset: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(">q", out, 0, base_offset)
    return bytes(out)


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda b: b[:30], "torn batch header"),
        (lambda b: b[:-1] + bytes([b[-1] ^ 1]), "CRC mismatch"),
        (lambda b: b[:16] + b"\x01" + b[17:], "bad magic"),
        (lambda b: with_base(b, 999), "base offset 999"),
    ],
)
def test_bad_last_batch_is_cut(
    make_log: MakeLog, damage: Callable[[bytes], bytes], reason: str
) -> None:
    log = make_log()
    fill(log, 5)
    end = log.log_end_offset
    log.close()
    with log.segments[-1].log_path.open("ab") as f:
        f.write(damage(with_base(batch(2), end)))
    recovered = make_log()
    assert recovered.log_end_offset == end
    assert recovered.recovery.truncated_bytes > 0
    assert reason in recovered.recovery.reasons[0]


def _rolled_index(log: PartitionLog, n: int = 1) -> tuple[Path, int, list[Any]]:
    segment = log.segments[n]
    return segment.index.path, segment.base_offset, list(segment.index.iter_entries())


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda p: p.write_bytes(p.read_bytes()[::-1]),  # not increasing
        lambda p: p.write_bytes(p.read_bytes() + b"\x00\x01\x02"),  # not a multiple of 8
        lambda p: p.unlink(),  # missing
        # in order, but the last entry names a position where no batch ends there
        lambda p: p.write_bytes(p.read_bytes()[:-4] + struct.pack(">i", 61)),
        # in order, but past the end of the log file
        lambda p: p.write_bytes(p.read_bytes()[:-4] + struct.pack(">i", 10**6)),
    ],
)
def test_corrupt_index_of_a_rolled_segment_is_rebuilt(
    make_log: MakeLog, corrupt: Callable[[Path], object]
) -> None:
    log = make_log(**SMALL)
    fill(log, 100)
    content = log.read(0, 1 << 20)
    path, base, entries = _rolled_index(log)
    assert len(entries) >= 2
    log.close()
    corrupt(path)
    recovered = make_log(**SMALL)
    assert recovered.recovery.rebuilt_indexes == (base,)
    assert list(recovered.segments[1].index.iter_entries()) == entries
    assert recovered.read(0, 1 << 20) == content


def test_corrupt_index_of_the_active_segment_is_rebuilt(make_log: MakeLog) -> None:
    log = make_log(index_interval_bytes=100)
    fill(log, 30)
    entries = list(log.segments[0].index.iter_entries())
    log.close()
    path = log.segments[0].index.path
    raw = bytearray(path.read_bytes())
    raw[4:8] = struct.pack(">i", 7)  # first entry's position: no batch starts there
    path.write_bytes(bytes(raw))
    recovered = make_log(index_interval_bytes=100)
    assert recovered.recovery.rebuilt_indexes == (0,)
    assert list(recovered.segments[0].index.iter_entries()) == entries


def test_damage_inside_a_rolled_segment_is_an_error(make_log: MakeLog) -> None:
    log = make_log(**SMALL)
    fill(log, 100)
    log.close()
    middle = log.segments[1].log_path
    middle.write_bytes(middle.read_bytes()[:-10])
    with pytest.raises(CorruptRecordError, match="not the last segment"):
        make_log(**SMALL)


def test_missing_segment_is_an_error(make_log: MakeLog) -> None:
    log = make_log(**SMALL)
    fill(log, 100)
    log.close()
    log.segments[2].log_path.unlink()
    with pytest.raises(OSError, match="ends at offset"):
        make_log(**SMALL)


def test_stale_index_without_log_is_removed(make_log: MakeLog) -> None:
    log = make_log()
    fill(log, 3)
    log.close()
    stale = log.directory / "00000000000000000099.index"
    stale.write_bytes(b"\x00" * 16)
    make_log()
    assert not stale.exists()


def test_closed_log_refuses_work(make_log: MakeLog) -> None:
    log = make_log()
    log.close()
    log.close()
    with pytest.raises(ValueError, match="closed"):
        log.append(batch())
    with pytest.raises(ValueError, match="closed"):
        log.read(0, 10)


# ------------------------------------------------------------ against a model


@pytest.mark.parametrize("open_files", [None, 1], ids=["own-files", "one-open-file"])
@pytest.mark.parametrize("seed", range(3))
def test_random_operation_mix_against_a_model(
    make_log: MakeLog, tmp_path: Path, seed: int, open_files: int | None
) -> None:
    """Appends, reads, truncations, rolls, clean and crash reopens, against a list;
    also with room for one open reopenable file, so every index map and rolled log
    is closed and opened again all the time."""
    rng = random.Random(seed)
    config: dict[str, Any] = {
        "segment_bytes": 1_500,
        "index_interval_bytes": 150,
        "max_index_size_bytes": 48,
    }
    if open_files is not None:
        config["open_files"] = OpenFiles(open_files)
    log = make_log(f"mix{seed}", **config)
    model: list[tuple[int, int, bytes]] = []  # (base, last, bytes after the base offset)
    crashes = 0
    for step in range(400):
        op = rng.random()
        end = model[-1][1] + 1 if model else log.log_start_offset
        if op < 0.6:
            original = batch(rng.randint(1, 5), rng.randint(0, 200), tag=step)
            base, last = log.append(original)
            assert base == end
            model.append((base, last, original[8:]))
        elif op < 0.7 and model:
            cut = rng.randint(model[0][0], end)
            log.truncate_to(cut)
            model = [m for m in model if m[1] < cut]
        elif op < 0.72:
            log.roll()
        elif op < 0.76:
            if rng.random() < 0.5:
                log.close()
                log = make_log(log.directory, **config)  # the crash copy, after a crash
            else:
                crashes += 1
                target = crash_copy(log, tmp_path, f"crash{seed}-{crashes}")
                log.close()
                log = make_log(target, **config)
            assert log.recovery.truncated_bytes == 0
        else:
            if not model:
                continue
            offset = rng.randint(model[0][0], end)
            max_offset = rng.randint(offset, end + 1)
            max_bytes = rng.randint(0, 2_000)
            expected: list[bytes] = []
            total = 0
            for _, last, tail in model:
                if last < offset:
                    continue
                if last >= max_offset or (expected and total + len(tail) + 8 > max_bytes):
                    break
                expected.append(tail)
                total += len(tail) + 8
            data = log.read(offset, max_bytes, max_offset)
            assert [b[8:] for b in iter_batches(data)] == expected
            continue
        log._check_invariants()
        assert log.log_end_offset == (model[-1][1] + 1 if model else log.log_start_offset)
    whole = log.read(log.log_start_offset, 1 << 30)
    assert [b[8:] for b in iter_batches(whole)] == [m[2] for m in model]

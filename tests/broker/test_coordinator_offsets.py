"""The committed-offset log: compaction keeps the file to the live offsets, a torn last
line (a crash inside a write) is cut at reopening, retention writes tombstones."""

from __future__ import annotations

from pathlib import Path

from purgatory import TopicPartition
from purgatory.broker import CommittedOffset, OffsetStore
from purgatory.testing import ManualClock

TP = TopicPartition("t", 0)


def lines(store: OffsetStore) -> int:
    return len(store.path.read_bytes().splitlines())


def test_compaction_keeps_the_live_offsets_only(tmp_path: Path) -> None:
    store = OffsetStore(tmp_path, compact_min_entries=10)
    try:
        for offset in range(100):
            store.commit("g", {TP: CommittedOffset(offset)})
            store.commit("h", {TP: CommittedOffset(offset * 2, 4, "x")})
        assert store.compactions > 0
        assert lines(store) <= 10
    finally:
        store.close()
    reopened = OffsetStore(tmp_path)
    try:
        assert reopened.fetch("g")[TP].offset == 99
        assert reopened.fetch("h")[TP] == CommittedOffset(
            198, 4, "x", reopened.fetch("h")[TP].commit_ms
        )
        assert not list(reopened.directory.glob("*.compacting"))
    finally:
        reopened.close()


def test_a_torn_last_line_is_cut_at_reopening(tmp_path: Path) -> None:
    store = OffsetStore(tmp_path)
    store.commit("g", {TP: CommittedOffset(5)})
    store.close()
    whole = store.path.read_bytes()
    with store.path.open("ab") as f:
        f.write(b'{"g":"g","ts":1,"o":[["t",0,9')  # the write a crash cut short
    reopened = OffsetStore(tmp_path)
    try:
        assert reopened.fetch("g")[TP].offset == 5
        assert reopened.path.read_bytes() == whole
        reopened.commit("g", {TP: CommittedOffset(6)})
    finally:
        reopened.close()
    again = OffsetStore(tmp_path)
    try:
        assert again.fetch("g")[TP].offset == 6
    finally:
        again.close()


def test_expiry_writes_tombstones(tmp_path: Path) -> None:
    clock = ManualClock(0)
    store = OffsetStore(tmp_path, wall_clock_ms=clock.now_ms)
    try:
        store.commit("g", {TP: CommittedOffset(5), TopicPartition("t", 1): CommittedOffset(1)})
        clock.advance(500)
        store.commit("g", {TP: CommittedOffset(6)})
        clock.advance(600)  # partition 1 was committed 1100 ms ago, partition 0 600
        assert store.expire({"g": 0}, retention_ms=1000) == 1
        assert store.expire({"g": 900}, retention_ms=1000) == 0  # the group emptied later
        assert list(store.fetch("g")) == [TP]
    finally:
        store.close()
    reopened = OffsetStore(tmp_path)
    try:
        assert list(reopened.fetch("g")) == [TP]
    finally:
        reopened.close()

"""The committed-offset log: compaction keeps the file to the live offsets, a torn last
line (a crash inside a write) is cut at reopening, retention writes tombstones; a
group's protocol type is kept with its offsets (ListGroups after a restart)."""

from __future__ import annotations

from pathlib import Path

from purgatory_broker.broker import (
    CommittedOffset,
    ErrorCode,
    GroupConfig,
    GroupCoordinator,
    OffsetStore,
)

from purgatory import TopicPartition
from purgatory.testing import ManualClock

from .test_coordinator import DELAY_MS, SESSION_MS, stable_group_of_two

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


# -- the protocol type of a group, kept with its offsets ---------------------------------


def test_the_protocol_type_is_kept_with_the_offsets(tmp_path: Path) -> None:
    clock = ManualClock(0)
    store = OffsetStore(tmp_path, wall_clock_ms=clock.now_ms, compact_min_entries=10)
    try:
        store.commit("g", {TP: CommittedOffset(1)}, protocol_type="consumer")
        store.commit("alone", {TP: CommittedOffset(2)})  # outside group management
        for offset in range(50):  # compaction rewrites the file: the type stays
            store.commit("g", {TP: CommittedOffset(offset)})
        store.commit("gone", {TP: CommittedOffset(3)}, protocol_type="consumer")
        assert store.compactions > 0
        assert (store.protocol_type("g"), store.protocol_type("alone")) == ("consumer", None)
        clock.advance(1000)
        assert store.expire({"gone": 0}, retention_ms=1000) == 1  # its last offset: forgotten
        assert store.protocol_type("gone") is None
    finally:
        store.close()
    reopened = OffsetStore(tmp_path)
    try:
        assert reopened.fetch("g")[TP].offset == 49
        assert [reopened.protocol_type(g) for g in ("g", "alone", "gone")] == [
            "consumer",
            None,
            None,
        ]
        reopened.commit("gone", {TP: CommittedOffset(4)})  # a new group of that name
        assert reopened.protocol_type("gone") is None
    finally:
        reopened.close()


def test_a_file_written_before_protocol_types_loads(tmp_path: Path) -> None:
    """Lines without the protocol type (older files) still load: no type."""
    path = tmp_path / "__consumer_offsets" / "commits.jsonl"
    path.parent.mkdir()
    path.write_bytes(b'{"g":"g","ts":5,"o":[["t",0,9,-1,"m"]]}\n')
    store = OffsetStore(tmp_path)
    try:
        assert store.fetch("g") == {TP: CommittedOffset(9, -1, "m", 5)}
        assert store.protocol_type("g") is None
        store.commit("g", {TP: CommittedOffset(10)}, protocol_type="consumer")
    finally:
        store.close()
    reopened = OffsetStore(tmp_path)
    try:
        assert (reopened.fetch("g")[TP].offset, reopened.protocol_type("g")) == (10, "consumer")
    finally:
        reopened.close()


def test_a_group_lists_its_protocol_type_after_a_restart(tmp_path: Path) -> None:
    """Kafka keeps a group's metadata in ``__consumer_offsets``: after a restart a group
    known by its offsets is still "consumer" (Empty); offsets committed outside group
    management (no protocol type) still list ""."""
    clock = ManualClock(1_000)
    config = GroupConfig(initial_rebalance_delay_ms=DELAY_MS, min_session_timeout_ms=SESSION_MS)

    def coordinator() -> GroupCoordinator:
        return GroupCoordinator(
            tmp_path, config, clock=clock, wall_clock_ms=clock.now_ms, reaper_enabled=False
        )

    c = coordinator()
    try:
        a, _, _, _ = stable_group_of_two(c, clock)
        assert c.commit_offsets("g", a, 1, {TP: CommittedOffset(5)}) == ErrorCode.NONE
        assert c.commit_offsets("alone", "", -1, {TP: CommittedOffset(7)}) == ErrorCode.NONE
    finally:
        c.offsets.close()
    restarted = coordinator()
    try:
        assert sorted(restarted.list_groups()) == [
            ("alone", "", "Empty"),
            ("g", "consumer", "Empty"),
        ]
        d = restarted.describe_group("g")
        assert (d.state, d.protocol_type, d.members) == ("Empty", "consumer", ())
        assert restarted.describe_group("alone").protocol_type == ""
        # a commit outside group management keeps the group's type (as in Kafka)
        assert restarted.commit_offsets("g", "", -1, {TP: CommittedOffset(6)}) == ErrorCode.NONE
        assert ("g", "consumer", "Empty") in restarted.list_groups()
    finally:
        restarted.offsets.close()

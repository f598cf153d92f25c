"""The group coordinator on a ManualClock: join, sync, heartbeat, expiry, rejoin,
generation checks, offsets; no real time passes and no event loop runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from purgatory_broker.broker import (
    CommittedOffset,
    ErrorCode,
    GroupConfig,
    GroupCoordinator,
    GroupState,
    JoinResult,
    SyncResult,
)

from purgatory import TopicPartition
from purgatory.testing import ManualClock

SESSION_MS = 6000
REBALANCE_MS = 20_000
DELAY_MS = 100
PROTOCOLS = [("range", b"sub-a"), ("roundrobin", b"sub-b")]
TP0 = TopicPartition("t", 0)


class Replies:
    """The answers a member's callbacks received, in order."""

    def __init__(self) -> None:
        self.joins: list[JoinResult] = []
        self.syncs: list[SyncResult] = []

    def join(self, r: JoinResult) -> None:
        self.joins.append(r)

    def sync(self, r: SyncResult) -> None:
        self.syncs.append(r)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000)


@pytest.fixture
def coordinator(tmp_path: Path, clock: ManualClock) -> Iterator[GroupCoordinator]:
    config = GroupConfig(initial_rebalance_delay_ms=DELAY_MS, min_session_timeout_ms=SESSION_MS)
    c = GroupCoordinator(
        tmp_path, config, clock=clock, wall_clock_ms=clock.now_ms, reaper_enabled=False
    )
    yield c
    c.check_invariants()
    c.offsets.close()


def advance(c: GroupCoordinator, clock: ManualClock, ms: int) -> None:
    """Move time in small steps, running what is due after each (the reapers' job)."""
    step = 10
    for _ in range(ms // step):
        clock.advance(step)
        c.poll()
    clock.advance(ms % step)
    c.poll()


def join(
    c: GroupCoordinator,
    replies: Replies,
    member_id: str = "",
    protocols: list[tuple[str, bytes]] = PROTOCOLS,
    *,
    session_ms: int = SESSION_MS,
    group: str = "g",
) -> None:
    c.join_group(
        group,
        member_id,
        client_id="client",
        client_host="/127.0.0.1",
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=REBALANCE_MS,
        protocol_type="consumer",
        protocols=protocols,
        on_join=replies.join,
    )


def new_member(c: GroupCoordinator, replies: Replies) -> str:
    """JoinGroup v4+: the first join is answered MEMBER_ID_REQUIRED with an id; rejoin."""
    join(c, replies)
    first = replies.joins.pop()
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id
    join(c, replies, first.member_id)
    return first.member_id


def stable_group_of_two(
    c: GroupCoordinator, clock: ManualClock
) -> tuple[str, str, Replies, Replies]:
    """Two members joined, leader synced: Stable, generation 1."""
    ra, rb = Replies(), Replies()
    a = new_member(c, ra)
    b = new_member(c, rb)
    assert not ra.joins and not rb.joins  # the initial delay holds the group
    advance(c, clock, DELAY_MS)  # a member arrived during the delay: one more wait
    assert not ra.joins
    advance(c, clock, DELAY_MS)
    (ja,), (jb,) = ra.joins, rb.joins
    assert ja.generation_id == jb.generation_id == 1
    assert ja.leader_id == jb.leader_id == a
    assert {m[0] for m in ja.members} == {a, b} and jb.members == ()
    assert ja.protocol_name == "range"
    group = c.group("g")
    assert group is not None and group.state is GroupState.COMPLETING_REBALANCE
    c.sync_group("g", 1, b, {}, rb.sync)
    assert not rb.syncs  # a follower waits for the leader
    c.sync_group("g", 1, a, {a: b"A", b: b"B"}, ra.sync)
    assert [s.assignment for s in ra.syncs + rb.syncs] == [b"A", b"B"]
    assert c.describe_group("g").state == "Stable"
    c.check_invariants()
    return a, b, ra, rb


def test_join_sync_and_heartbeats_keep_a_stable_group(
    coordinator: GroupCoordinator, clock: ManualClock
) -> None:
    a, b, _, _ = stable_group_of_two(coordinator, clock)
    for _ in range(5):  # three sessions long, heartbeats every 2 s: nobody expires
        advance(coordinator, clock, 2000)
        assert coordinator.heartbeat("g", a, 1) == ErrorCode.NONE
        assert coordinator.heartbeat("g", b, 1) == ErrorCode.NONE
    assert coordinator.expired_members == 0
    assert coordinator.heartbeat("g", a, 0) == ErrorCode.ILLEGAL_GENERATION
    assert coordinator.heartbeat("g", "nobody", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert coordinator.heartbeat("other", a, 1) == ErrorCode.UNKNOWN_MEMBER_ID


def test_an_expired_session_rebalances_the_rest_into_the_next_generation(
    coordinator: GroupCoordinator, clock: ManualClock
) -> None:
    a, b, ra, _ = stable_group_of_two(coordinator, clock)
    for _ in range(2):  # b falls silent; a heartbeats
        advance(coordinator, clock, 2000)
        assert coordinator.heartbeat("g", a, 1) == ErrorCode.NONE
    advance(coordinator, clock, 1990)
    assert coordinator.expired_members == 0  # 10 ms short of b's session
    advance(coordinator, clock, 10)
    group = coordinator.group("g")
    assert group is not None and b not in group.members
    assert coordinator.expired_members == 1
    assert group.state is GroupState.PREPARING_REBALANCE
    assert coordinator.heartbeat("g", a, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    join(coordinator, ra, a)  # everyone left has rejoined: completes at once
    (_, again) = ra.joins
    assert (again.generation_id, again.leader_id) == (2, a)
    assert [m[0] for m in again.members] == [a]
    assert coordinator.heartbeat("g", a, 1) == ErrorCode.ILLEGAL_GENERATION
    coordinator.sync_group("g", 2, a, {a: b"AB"}, ra.sync)
    assert ra.syncs[-1].assignment == b"AB"


def test_a_clean_leave_rebalances_at_once(
    coordinator: GroupCoordinator, clock: ManualClock
) -> None:
    a, b, _, rb = stable_group_of_two(coordinator, clock)
    assert coordinator.leave_group("g", [a, "ghost"]) == {
        a: ErrorCode.NONE,
        "ghost": ErrorCode.UNKNOWN_MEMBER_ID,
    }
    assert coordinator.heartbeat("g", b, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    join(coordinator, rb, b)
    assert (rb.joins[-1].generation_id, rb.joins[-1].leader_id) == (2, b)  # b now leads
    coordinator.leave_group("g", [b])
    group = coordinator.group("g")
    # the last member left while completing: the next generation, at once, is Empty
    assert group is not None
    assert group.state is GroupState.EMPTY and group.generation_id == 3


def test_join_timeout_drops_members_that_do_not_rejoin(
    coordinator: GroupCoordinator, clock: ManualClock
) -> None:
    a, b, ra, rb = stable_group_of_two(coordinator, clock)
    rc = Replies()
    c = new_member(coordinator, rc)  # a third member: rebalance, a and b must rejoin
    assert coordinator.heartbeat("g", a, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    join(coordinator, ra, a)
    for _ in range(REBALANCE_MS // 2000 - 1):  # b heartbeats but never rejoins
        advance(coordinator, clock, 2000)
        assert coordinator.heartbeat("g", b, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    assert not rc.joins
    advance(coordinator, clock, 2000)  # the rebalance timeout
    assert [j.generation_id for j in rc.joins] == [2]
    assert ra.joins[-1].generation_id == 2 and {m[0] for m in ra.joins[-1].members} == {a, c}
    assert coordinator.heartbeat("g", b, 2) == ErrorCode.UNKNOWN_MEMBER_ID
    coordinator.sync_group("g", 2, b, {}, rb.sync)
    assert rb.syncs[-1].error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_sync_checks_generation_and_state(
    coordinator: GroupCoordinator, clock: ManualClock
) -> None:
    a, b, ra, rb = stable_group_of_two(coordinator, clock)
    coordinator.sync_group("g", 7, a, {}, ra.sync)
    assert ra.syncs[-1].error_code == ErrorCode.ILLEGAL_GENERATION
    coordinator.sync_group("g", 1, b, {}, rb.sync)  # Stable: its assignment again
    assert (rb.syncs[-1].error_code, rb.syncs[-1].assignment) == (ErrorCode.NONE, b"B")
    # a follower rejoining unchanged in Stable: the same generation, no rebalance
    join(coordinator, rb, b)
    assert rb.joins[-1].generation_id == 1
    # changed subscription: a rebalance; a waiting sync learns of it
    join(coordinator, rb, b, [("range", b"sub-c")])
    coordinator.sync_group("g", 1, a, {}, ra.sync)
    assert ra.syncs[-1].error_code == ErrorCode.REBALANCE_IN_PROGRESS


def test_join_errors(coordinator: GroupCoordinator) -> None:
    r = Replies()
    join(coordinator, r, session_ms=SESSION_MS - 1)
    join(coordinator, r, member_id="unknown")
    join(coordinator, r, group="")
    new_member(coordinator, r)
    join(coordinator, r, protocols=[("sticky", b"")])
    assert [j.error_code for j in r.joins] == [
        ErrorCode.INVALID_SESSION_TIMEOUT,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.INVALID_GROUP_ID,
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
    ]


def test_a_pending_member_that_never_rejoins_expires(
    coordinator: GroupCoordinator, clock: ManualClock
) -> None:
    r = Replies()
    join(coordinator, r)
    group = coordinator.group("g")
    assert group is not None and list(group.pending) == [r.joins[0].member_id]
    advance(coordinator, clock, SESSION_MS)
    assert not group.pending


def test_offsets_commit_with_generation_and_survive_reopening(
    coordinator: GroupCoordinator, clock: ManualClock, tmp_path: Path
) -> None:
    a, _, _, _ = stable_group_of_two(coordinator, clock)
    offsets = {TP0: CommittedOffset(42, 3, "meta")}
    assert coordinator.commit_offsets("g", a, 0, offsets) == ErrorCode.ILLEGAL_GENERATION
    assert coordinator.commit_offsets("g", "x", 1, offsets) == ErrorCode.UNKNOWN_MEMBER_ID
    assert coordinator.commit_offsets("g", "", -1, offsets) == ErrorCode.UNKNOWN_MEMBER_ID
    assert coordinator.commit_offsets("g", a, 1, offsets) == ErrorCode.NONE
    assert coordinator.commit_offsets("solo", "", -1, {TP0: CommittedOffset(7)}) == 0
    reopened = GroupCoordinator(tmp_path, clock=clock, reaper_enabled=False)
    try:
        (got,) = reopened.fetch_offsets("g", [TP0, TopicPartition("t", 1)]).values()
        assert (got.offset, got.leader_epoch, got.metadata) == (42, 3, "meta")
        assert reopened.fetch_offsets("solo")[TP0].offset == 7
        assert sorted(g[0] for g in reopened.list_groups()) == ["g", "solo"]
    finally:
        reopened.offsets.close()


def test_offsets_of_an_empty_group_expire_after_the_retention(
    tmp_path: Path, clock: ManualClock
) -> None:
    config = GroupConfig(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1000)
    c = GroupCoordinator(
        tmp_path, config, clock=clock, wall_clock_ms=clock.now_ms, reaper_enabled=False
    )
    try:
        assert c.commit_offsets("solo", "", -1, {TP0: CommittedOffset(7)}) == ErrorCode.NONE
        clock.advance(59_999)
        assert c.expire_offsets() == 0
        clock.advance(1)
        assert c.expire_offsets() == 1
        assert c.fetch_offsets("solo") == {}
    finally:
        c.offsets.close()
    assert GroupCoordinator(tmp_path, clock=clock, reaper_enabled=False).fetch_offsets("solo") == {}


def test_a_leader_that_never_syncs_is_removed_at_the_rebalance_timeout(
    coordinator: GroupCoordinator, clock: ManualClock
) -> None:
    """DelayedSync (Kafka 3.x): the follower waits for an assignment that never comes;
    at the rebalance timeout the leader, who never sent SyncGroup, is removed."""
    ra, rb = Replies(), Replies()
    a = new_member(coordinator, ra)
    b = new_member(coordinator, rb)
    advance(coordinator, clock, 2 * DELAY_MS)
    assert ra.joins[-1].leader_id == a
    group = coordinator.group("g")
    assert group is not None and group.pending_sync == {a, b}
    coordinator.sync_group("g", 1, b, {}, rb.sync)
    assert group.pending_sync == {a} and not rb.syncs
    for _ in range(REBALANCE_MS // 2000 - 1):  # a heartbeats, but never syncs
        advance(coordinator, clock, 2000)
        assert coordinator.heartbeat("g", a, 1) == ErrorCode.NONE
    assert a in group.members
    advance(coordinator, clock, 2000)
    assert a not in group.members and group.state is GroupState.PREPARING_REBALANCE
    assert rb.syncs[-1].error_code == ErrorCode.REBALANCE_IN_PROGRESS
    join(coordinator, rb, b)
    assert (rb.joins[-1].generation_id, rb.joins[-1].leader_id) == (2, b)


def test_syncs_complete_the_delayed_sync(coordinator: GroupCoordinator, clock: ManualClock) -> None:
    stable_group_of_two(coordinator, clock)
    stats = coordinator.sync_purgatory.statistics()
    assert (stats.completed_early, coordinator.sync_purgatory.num_delayed) == (1, 0)


def test_a_lone_member_may_change_its_protocols(
    coordinator: GroupCoordinator, clock: ManualClock
) -> None:
    r = Replies()
    a = new_member(coordinator, r)
    advance(coordinator, clock, DELAY_MS)
    assert r.joins[-1].protocol_name == "range"
    join(coordinator, r, a, [("sticky", b"s")])  # no one else to agree with
    assert r.joins[-1].protocol_name == "sticky" and r.joins[-1].generation_id == 2
    rb = Replies()
    join(coordinator, rb)
    join(coordinator, rb, rb.joins[-1].member_id)  # offers range and roundrobin only
    assert rb.joins[-1].error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL

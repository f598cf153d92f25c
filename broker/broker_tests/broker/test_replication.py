"""LeaderPartition: follower offsets, caught-up times, ISR shrink and expand, high watermark."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from purgatory_broker.broker.errors import ErrorCode, NotEnoughReplicasError, NotLeaderError
from purgatory_broker.broker.replication import LEADER_ID, LeaderPartition
from purgatory_broker.broker.storage.log import PartitionLog
from purgatory_broker.broker.storage.records import build_batch

from purgatory import TopicPartition

TP = TopicPartition("t", 0)
MakePartition = Callable[..., LeaderPartition]


def batch(records: int = 1) -> bytes:
    return build_batch([b"v" * 10] * records, base_timestamp_ms=0)


@pytest.fixture
def make_partition(tmp_path: Path) -> Iterator[MakePartition]:
    logs: list[PartitionLog] = []

    def make(followers: tuple[int, ...] = (1, 2), **kwargs: int) -> LeaderPartition:
        log = PartitionLog(tmp_path / f"log{len(logs)}")
        logs.append(log)
        return LeaderPartition(TP, log, followers, **kwargs)

    yield make
    for log in logs:
        log.close()


def test_worked_example_from_the_module_doc(make_partition: MakePartition) -> None:
    p = make_partition(replica_lag_time_max_ms=100)
    result = p.append_as_leader(batch(10), required_acks=-1)
    assert (result.base_offset, result.last_offset) == (0, 9)
    assert not result.high_watermark_changed
    assert p.high_watermark == 0
    assert not p.update_follower_fetch(1, 10, now_ms=5)
    assert p.update_follower_fetch(2, 4, now_ms=6)
    assert p.high_watermark == 4
    p._check_invariants()
    assert not p.update_follower_fetch(1, 10, now_ms=150)
    removed, moved = p.maybe_shrink_isr(now_ms=200)
    assert removed == [2] and moved
    assert p.isr == {LEADER_ID, 1}
    assert p.high_watermark == 10
    p._check_invariants()
    assert not p.update_follower_fetch(2, 10, now_ms=210)
    assert p.isr == {LEADER_ID, 1, 2}
    assert (p.isr_shrinks, p.isr_expands) == (1, 1)
    p._check_invariants()


def test_leader_alone_moves_the_high_watermark_on_append(make_partition: MakePartition) -> None:
    p = make_partition(followers=())
    assert p.append_as_leader(batch(3), required_acks=1).high_watermark_changed
    assert p.high_watermark == 3


def test_caught_up_as_of_the_previous_fetch_under_steady_load(
    make_partition: MakePartition,
) -> None:
    """A follower always one batch behind stays in the ISR (Kafka's lastFetchLeaderLogEndOffset)."""
    p = make_partition(followers=(1,), replica_lag_time_max_ms=100)
    now = 0
    fetched = 0
    for _ in range(20):
        p.append_as_leader(batch(), required_acks=-1)
        p.update_follower_fetch(1, fetched, now)
        fetched = p.log_end_offset  # what this fetch returned
        now += 30
        assert not p.maybe_shrink_isr(now)[0]
        p._check_invariants()
    assert p.isr == {LEADER_ID, 1}
    assert p.replica(1).last_caught_up_ms == now - 60


def test_follower_that_stops_fetching_is_dropped_and_rejoins_at_the_high_watermark(
    make_partition: MakePartition,
) -> None:
    p = make_partition(replica_lag_time_max_ms=100)
    p.append_as_leader(batch(5), required_acks=-1)
    p.update_follower_fetch(1, 5, 10)
    p.update_follower_fetch(2, 5, 10)
    assert p.high_watermark == 5
    p.append_as_leader(batch(5), required_acks=-1)
    assert p.maybe_shrink_isr(110) == ([], False)
    p.update_follower_fetch(1, 10, 111)
    assert p.maybe_shrink_isr(111) == ([2], True)
    assert p.high_watermark == 10
    p.append_as_leader(batch(5), required_acks=-1)
    p.update_follower_fetch(2, 8, 120)  # below the HW: still out
    assert 2 not in p.isr
    p.update_follower_fetch(2, 10, 130)
    assert 2 in p.isr
    assert p.high_watermark == 10  # never decreases
    p._check_invariants()


def test_min_isr_refuses_acks_all_before_the_append(make_partition: MakePartition) -> None:
    p = make_partition(min_insync_replicas=3, replica_lag_time_max_ms=10)
    p.append_as_leader(batch(), required_acks=1)  # the followers fall behind ...
    p.maybe_shrink_isr(100)  # ... and out of the ISR
    assert p.under_min_isr
    with pytest.raises(NotEnoughReplicasError) as info:
        p.append_as_leader(batch(), required_acks=-1)
    assert info.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.log_end_offset == 1
    p.append_as_leader(batch(), required_acks=1)  # acks=1 does not care
    assert p.log_end_offset == 2


def test_check_enough_replicas_reach_offset(make_partition: MakePartition) -> None:
    """The one question a waiting acks=-1 produce asks: not yet, done, done short of
    min.insync.replicas, or no longer the leader."""
    p = make_partition(min_insync_replicas=3, replica_lag_time_max_ms=10)
    p.append_as_leader(batch(4), required_acks=-1)  # offsets 0..3: required offset 4
    assert p.check_enough_replicas_reach_offset(4) is None
    p.update_follower_fetch(1, 4, now_ms=5)
    assert p.check_enough_replicas_reach_offset(4) is None  # follower 2 still at 0
    p.update_follower_fetch(2, 2, now_ms=5)
    assert p.check_enough_replicas_reach_offset(2) == ErrorCode.NONE
    assert p.check_enough_replicas_reach_offset(4) is None
    p.update_follower_fetch(1, 4, now_ms=20)
    assert p.maybe_shrink_isr(now_ms=20) == ([2], True)  # HW 4 without follower 2
    assert p.check_enough_replicas_reach_offset(4) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    p.become_follower()
    assert p.check_enough_replicas_reach_offset(1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert p.check_enough_replicas_reach_offset(100) == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_leadership_change(make_partition: MakePartition) -> None:
    p = make_partition(replica_lag_time_max_ms=100)
    p.append_as_leader(batch(2), required_acks=-1)
    p.become_follower()
    with pytest.raises(NotLeaderError):
        p.append_as_leader(batch(), required_acks=-1)
    with pytest.raises(NotLeaderError):
        p.update_follower_fetch(1, 0, 10)
    assert p.maybe_shrink_isr(10_000) == ([], False)
    assert p.become_leader(now_ms=10_000) == 1
    assert p.leader_epoch == 1
    with pytest.raises(ValueError, match="already the leader"):
        p.become_leader(now_ms=10_000)
    assert p.maybe_shrink_isr(10_050) == ([], False)  # caught up as of becoming leader
    assert p.append_as_leader(batch(), required_acks=-1).base_offset == 2
    p._check_invariants()


def test_bad_input_is_refused(make_partition: MakePartition) -> None:
    with pytest.raises(ValueError, match="follower ids"):
        make_partition(followers=(0, 1))
    with pytest.raises(ValueError, match="follower ids"):
        make_partition(followers=(1, 1))
    with pytest.raises(ValueError, match="min_insync_replicas"):
        make_partition(min_insync_replicas=4)
    with pytest.raises(ValueError, match="replica_lag_time_max_ms"):
        make_partition(replica_lag_time_max_ms=0)
    p = make_partition()
    with pytest.raises(ValueError, match="acks"):
        p.append_as_leader(batch(), required_acks=2)
    with pytest.raises(ValueError, match="not a follower"):
        p.update_follower_fetch(7, 0, 0)
    with pytest.raises(ValueError, match="outside"):
        p.update_follower_fetch(1, 1, 0)


def test_seeded_random_replication_against_a_model(make_partition: MakePartition) -> None:
    """The HW equals max(previous HW, min LEO over the ISR); ISR membership follows the rules."""
    rng = random.Random(7)
    p = make_partition(followers=(1, 2, 3), replica_lag_time_max_ms=40)
    leo = {1: 0, 2: 0, 3: 0}
    now = 0
    for _ in range(500):
        now += rng.randrange(0, 15)
        action = rng.random()
        if action < 0.4:
            p.append_as_leader(batch(rng.randrange(1, 4)), required_acks=1)
        elif action < 0.9:
            rid = rng.choice((1, 2, 3))
            if rid == 3 and rng.random() < 0.8:
                continue  # replica 3 is slow
            leo[rid] = rng.randrange(leo[rid], p.log_end_offset + 1)
            was_in = rid in p.isr
            hw_before = p.high_watermark
            p.update_follower_fetch(rid, leo[rid], now)
            assert (rid in p.isr) == (was_in or leo[rid] >= hw_before)
        else:
            p.maybe_shrink_isr(now)
        expected = min([p.log_end_offset] + [leo[r] for r in p.isr if r != LEADER_ID])
        assert p.high_watermark >= expected
        assert p.high_watermark <= p.log_end_offset
        p._check_invariants()
    assert p.isr_shrinks > 0 and p.isr_expands > 0

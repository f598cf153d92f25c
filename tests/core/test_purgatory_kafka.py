"""Kafka's DelayedOperationTest scenarios, ported (manual clock, no reaper)."""

from __future__ import annotations

import pytest

from purgatory import TopicPartition
from purgatory.testing import ManualClock

from ..purgatory_kit import MockOp, manual_purgatory

T1, T2, T3 = (TopicPartition("test", i) for i in (1, 2, 3))


def test_request_satisfaction(clock: ManualClock) -> None:
    p = manual_purgatory(clock)
    r1, r2 = MockOp(100_000, "r1"), MockOp(100_000, "r2")
    assert p.check_and_complete("test1") == 0
    assert not p.try_complete_else_watch(r1, ["test1"])
    assert p.check_and_complete("test1") == 0
    assert not p.try_complete_else_watch(r2, ["test2"])
    assert p.check_and_complete("test2") == 0
    r1.completable = True
    assert p.check_and_complete("test1") == 1
    assert p.check_and_complete("test1") == 0
    r2.completable = True
    assert p.check_and_complete("test2") == 1
    assert p.check_and_complete("test2") == 0
    assert r1.completions == r2.completions == 1
    assert p.num_delayed == 0 and p.watched == 0
    p._check_invariants()


def test_request_expiry(clock: ManualClock) -> None:
    p = manual_purgatory(clock)
    r1, r2 = MockOp(20, "r1"), MockOp(200_000, "r2")
    p.try_complete_else_watch(r1, ["test1"])
    p.try_complete_else_watch(r2, ["test1", "test2"])
    for _ in range(20):
        clock.advance(1)
        p.timer.poll()
    assert r1.is_completed and r1.expirations == 1
    assert not r2.is_completed
    assert r1.result() == "r1:expired"
    stats = p.statistics()
    assert stats.expired == 1 and stats.lateness_count == 1 and stats.lateness_max_ms == 0
    assert p.num_delayed == 1
    p._check_invariants()


def test_purge_and_watched_counts(clock: ManualClock) -> None:
    p = manual_purgatory(clock, purge_interval=1000)
    r1, r2, r3 = MockOp(100_000, "r1"), MockOp(100_000, "r2"), MockOp(100_000, "r3")
    p.try_complete_else_watch(r1, [T1])
    p.try_complete_else_watch(r2, [T1, T2])
    p.try_complete_else_watch(r3, [T1, T2, T3])
    assert (p.num_delayed, p.watched) == (3, 6)
    r2.completable = True
    assert r2.try_complete()
    assert (p.num_delayed, p.watched) == (2, 6)
    r3.completable = True
    assert r3.try_complete()
    assert (p.num_delayed, p.watched) == (1, 6)
    assert p.check_and_complete(T1) == 0  # r2, r3 were completed elsewhere: not counted
    assert p.watched == 4
    assert p.check_and_complete(T2) == 0
    assert p.watched == 2
    assert p.check_and_complete(T3) == 0
    assert p.watched == 1
    assert p.watched_keys() == [T1]
    p._check_invariants()


def test_cancel_for_key(clock: ManualClock) -> None:
    p = manual_purgatory(clock)
    key1, key2 = "key1", "key2"
    r1, r2, r3 = MockOp(10_000, "r1"), MockOp(10_000, "r2"), MockOp(10_000, "r3")
    p.try_complete_else_watch(r1, [key1])
    p.try_complete_else_watch(r2, [key1])
    p.try_complete_else_watch(r3, [key2])
    cancelled = p.cancel_for_key(key1)
    assert set(cancelled) == {r1, r2}
    assert all(op.is_cancelled and not op.is_completed for op in cancelled)
    assert p.watched == 1 and p.num_delayed == 1
    assert p.cancel_for_key(key2) == [r3]
    assert p.watched == 0 and p.num_delayed == 0
    clock.advance(20_000)
    p.timer.poll()
    assert r1.completions == r2.completions == r3.completions == 0
    p._check_invariants()


def test_cancel_for_unknown_key(clock: ManualClock) -> None:
    p = manual_purgatory(clock)
    assert p.cancel_for_key("nobody") == []


def test_many_completers_each_operation_completes_once(clock: ManualClock) -> None:
    """Kafka runs this with threads; here completers interleave on one thread:
    every key event, expiry and direct completion races for every operation."""
    p = manual_purgatory(clock, purge_interval=10)
    keys = [f"key{i}" for i in range(10)]
    ops = [MockOp(50 + i % 20, f"op{i}") for i in range(400)]
    for i, op in enumerate(ops):
        p.try_complete_else_watch(op, [keys[i % 10], keys[(i * 7) % 10]])
    for round_ in range(60):
        for i, op in enumerate(ops):
            if (i + round_) % 5 == 0:
                op.completable = True
        for key in keys:
            p.check_and_complete(key)
        for op in ops[round_::30]:
            op.force_complete()
        clock.advance(1)
        p.timer.poll()
        p._check_invariants()
    assert all(op.is_completed for op in ops)
    assert all(op.completions == 1 for op in ops)
    assert all(op.expirations <= 1 for op in ops)
    stats = p.statistics()
    assert stats.completed_early + stats.expired == len(ops)
    assert p.num_delayed == 0


def test_empty_keys_are_refused(clock: ManualClock) -> None:
    p = manual_purgatory(clock)
    with pytest.raises(ValueError, match="at least one key"):
        p.try_complete_else_watch(MockOp(10), [])


def test_an_operation_is_watched_by_one_purgatory_once(clock: ManualClock) -> None:
    p = manual_purgatory(clock)
    op = MockOp(10)
    p.try_complete_else_watch(op, ["a"])
    with pytest.raises(ValueError, match="already in a purgatory"):
        p.try_complete_else_watch(op, ["b"])

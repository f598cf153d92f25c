"""Dropping one operation (``op.cancel()``: its client went away) and reading how an
operation ended (``op.outcome``, ``op.expired``), on asyncio, uvloop and trio.

Time is virtual: the purgatory's timer runs on a ``ManualClock`` with its reaper
off, and the tests poll it, so nothing here depends on the machine's speed.
"""

from __future__ import annotations

import anyio
import pytest

from purgatory import (
    DelayedOperationPurgatory,
    OperationCancelledError,
    Outcome,
    PurgatoryClosedError,
    SystemTimer,
)
from purgatory.testing import ManualClock

from ..purgatory_kit import MockOp

pytestmark = pytest.mark.anyio


def manual(clock: ManualClock) -> DelayedOperationPurgatory[MockOp]:
    """Kafka's filing: on a manual clock, expiries exactly on time (tests/conftest.py)."""
    timer = SystemTimer("t", clock=clock, may_expire_early=True)
    return DelayedOperationPurgatory("p", timer=timer, reaper_enabled=False)


async def _await_into(op: MockOp, got: list[object]) -> None:
    try:
        got.append(await op)
    except OperationCancelledError as exc:
        got.append(exc)


async def test_cancel_one_fails_its_awaiters_at_once_and_leaves_nothing_behind() -> None:
    clock = ManualClock()
    async with manual(clock) as p:
        ops = [MockOp(60_000, f"op{i}") for i in range(4)]
        for i, op in enumerate(ops):
            p.try_complete_else_watch(op, ["shared", f"own{i}"])
        got: list[object] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(_await_into, ops[0], got)
            tg.start_soon(_await_into, ops[0], got)
            await anyio.wait_all_tasks_blocked()
            assert ops[0].cancel() is True
        assert len(got) == 2 and all(type(e) is OperationCancelledError for e in got)
        assert ops[0].cancel() is False  # once
        assert ops[0].outcome is Outcome.CANCELLED and ops[0].is_cancelled
        assert not ops[0].is_completed and not ops[0].expired
        assert ops[0].completions == 0 and ops[0].expirations == 0  # no callback ran
        stats = p.statistics()
        assert (stats.num_delayed, stats.cancelled, stats.completed_early) == (3, 1, 0)
        assert len(p.timer) == 3
        p._check_invariants()
        # the others are untouched: the shared key still completes them
        for op in ops[1:]:
            op.completable = True
        assert p.check_and_complete("shared") == 3
        p.purge_completed()
        assert p.num_delayed == 0 and p.watched == 0 and p.watched_keys() == []
        p._check_invariants()


async def test_the_outcome_tells_early_from_expired_from_cancelled() -> None:
    clock = ManualClock()
    async with manual(clock) as p:
        early, late, dropped = MockOp(100, "early"), MockOp(100, "late"), MockOp(100, "x")
        for op in (early, late, dropped):
            assert op.outcome is Outcome.PENDING
            p.try_complete_else_watch(op, ["k"])
        early.completable = True
        p.check_and_complete("k")
        dropped.cancel()
        clock.advance(100)
        p.timer.poll()
        assert await early == "early:done" and early.outcome is Outcome.COMPLETED
        assert await late == "late:expired" and late.outcome is Outcome.EXPIRED
        assert late.expired and late.is_completed and not early.expired
        with pytest.raises(OperationCancelledError):
            await dropped
        assert "expired" in repr(late) and "cancelled" in repr(dropped)
        stats = p.statistics()
        assert (stats.completed_early, stats.expired, stats.cancelled) == (1, 1, 1)


async def test_cancel_from_inside_a_walk_of_its_key() -> None:
    """A callback cancelling another operation of the key being walked."""
    clock = ManualClock()
    async with manual(clock) as p:
        victim = MockOp(1_000, "victim")

        class Canceller(MockOp):
            def try_complete(self) -> bool:
                if self.completable:
                    victim.cancel()
                return super().try_complete()

        first = Canceller(1_000, "first")
        p.try_complete_else_watch(first, ["k"])
        p.try_complete_else_watch(victim, ["k", "other"])
        assert p.num_delayed == 2
        first.completable = True
        assert p.check_and_complete("k") == 1
        assert victim.is_cancelled and first.is_completed
        p._check_invariants()
        p.purge_completed()
        assert p.watched == 0 and p.num_delayed == 0 and len(p.timer) == 0


async def test_an_operation_never_given_to_a_purgatory_can_be_cancelled() -> None:
    op = MockOp(10, "alone")
    got: list[object] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_await_into, op, got)
        await anyio.wait_all_tasks_blocked()
        assert op.cancel()
    assert len(got) == 1 and isinstance(got[0], OperationCancelledError)


async def test_close_fails_awaiters_with_the_closed_error_a_runtime_error() -> None:
    clock = ManualClock()
    got: list[object] = []
    p = manual(clock)
    op = MockOp(60_000, "op")
    async with anyio.create_task_group() as tg, p:
        p.try_complete_else_watch(op, ["k"])
        tg.start_soon(_await_into, op, got)
        await anyio.wait_all_tasks_blocked()
    assert len(got) == 1 and isinstance(got[0], PurgatoryClosedError)
    assert isinstance(got[0], RuntimeError) and op.outcome is Outcome.CANCELLED
    assert not op.cancel()

"""DelayedOperationPurgatory's lifecycle on a loop: closing, cancelling, threads (errors from
callbacks: test_backends.py, on every backend)."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref

import pytest

import purgatory
from purgatory import (
    DelayedOperationPurgatory,
    OperationCancelledError,
    PurgatoryClosedError,
    SystemTimer,
    TopicPartition,
)
from purgatory.testing import ManualClock

from ..purgatory_kit import Hostile, MockOp, await_outcome, manual_shell_purgatory


@pytest.mark.asyncio
async def test_closing_fails_awaiters_and_stops_the_reaper() -> None:
    p = DelayedOperationPurgatory[MockOp]("closing")
    async with p:
        ops = [MockOp(60_000, f"op{i}") for i in range(5)]
        for i, op in enumerate(ops):
            p.try_complete_else_watch(op, [TopicPartition("t", i % 2)])
        waiters = [asyncio.create_task(await_outcome(op)) for op in ops]
        await asyncio.sleep(0)
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert all(isinstance(r, PurgatoryClosedError) for r in results)
    assert all(op.is_cancelled and op.completions == 0 for op in ops)
    assert p.num_delayed == 0 and p.watched == 0 and len(p.timer) == 0
    assert [t for t in asyncio.all_tasks() if t.get_name() == "closing-reaper"] == []
    with pytest.raises(RuntimeError, match="closed"):
        p.try_complete_else_watch(MockOp(1), ["k"])
    await p.close()  # idempotent


@pytest.mark.asyncio
async def test_cancel_for_key_fails_awaiters() -> None:
    async with DelayedOperationPurgatory[MockOp]("p") as p:
        op = MockOp(60_000)
        p.try_complete_else_watch(op, ["gone"])
        waiter = asyncio.create_task(await_outcome(op))
        await asyncio.sleep(0)
        assert p.cancel_for_key("gone") == [op]
        with pytest.raises(OperationCancelledError):
            await waiter
        assert not op.force_complete()  # a cancelled operation never completes


@pytest.mark.asyncio
async def test_completion_from_another_thread_through_call_threadsafe() -> None:
    async with DelayedOperationPurgatory[MockOp]("p") as p:
        op = MockOp(60_000)
        p.try_complete_else_watch(op, ["k"])
        op.completable = True
        results: list[int] = []

        def worker() -> None:
            results.append(p.call_threadsafe(p.check_and_complete, "k").result(timeout=10))

        thread = threading.Thread(target=worker)
        thread.start()
        assert await op == "op:done"
        await asyncio.to_thread(thread.join)
        assert results == [1]


def test_call_threadsafe_needs_a_running_purgatory(clock: ManualClock) -> None:
    with pytest.raises(RuntimeError, match="not running"):
        manual_shell_purgatory(clock).call_threadsafe(print)


@pytest.mark.asyncio
async def test_awaiters_of_a_list_an_interrupt_hit_are_failed_by_close() -> None:
    clock = ManualClock(0)
    p = DelayedOperationPurgatory[MockOp](
        "p", timer=SystemTimer("t", clock=clock, may_expire_early=True), reaper_enabled=False
    )
    async with p:
        bad, waiting = Hostile(100, "bad"), MockOp(100, "waiting")
        p.try_complete_else_watch(bad, ["k"])
        p.try_complete_else_watch(waiting, ["k"])
        awaiter = asyncio.ensure_future(waiting)
        await asyncio.sleep(0)

        def interrupt() -> None:
            raise KeyboardInterrupt

        bad.action = interrupt
        with pytest.raises(KeyboardInterrupt):
            p.check_and_complete("k")
    with pytest.raises(OperationCancelledError):
        await asyncio.wait_for(awaiter, 5)


# -- the garbage collector ------------------------------------------------------


@pytest.mark.asyncio
async def test_operations_leave_the_collector_while_entered_until_let_go() -> None:
    """In the compiled core an entered purgatory's timed operations are not tracked
    by the cyclic collector while they wait, nor once done until the purge drops
    their watcher entries (Purgatory.untrack_pending); the purge and closing hand
    each back. The pure core tracks all."""
    untracked = purgatory.compiled
    p: DelayedOperationPurgatory[MockOp] = DelayedOperationPurgatory("gc", purge_interval=100)
    before = MockOp(10_000, "before")
    p.try_complete_else_watch(before, ["k"])
    assert gc.is_tracked(before)  # not entered: nothing is untracked
    async with p:
        done, expiring, cancelled, closed = (MockOp(10_000, n) for n in "dxcz")
        expiring.delay_ms = 5
        for op, key in ((done, "d"), (expiring, "x"), (cancelled, "c"), (closed, "z")):
            p.try_complete_else_watch(op, [key])
            assert gc.is_tracked(op) is not untracked
        done.force_complete()
        p.cancel_for_key("c")
        async with asyncio.timeout(60):  # a hang guard: it expires 5 ms from now
            while not expiring.is_completed:
                await asyncio.sleep(0.005)
        assert expiring.expirations == 1
        p._check_invariants()
        for op in (done, expiring, cancelled):  # done, held until the purge
            assert gc.is_tracked(op) is not untracked
        assert p.purge_completed() == 2  # cancel_for_key dropped its list itself
        assert all(gc.is_tracked(op) for op in (done, expiring, cancelled))
        assert gc.is_tracked(closed) is not untracked
    assert gc.is_tracked(closed) and closed.is_cancelled
    p._check_invariants()


@pytest.mark.asyncio
async def test_a_cycle_through_an_operation_is_collected_after_the_purgatory_closes() -> None:
    async with DelayedOperationPurgatory[MockOp]("gc") as p:
        op = MockOp(10_000)
        op.itself = op  # type: ignore[attr-defined]  # a reference cycle
        p.try_complete_else_watch(op, ["k"])
        ref = weakref.ref(op)
        del op
    del p
    gc.collect()
    assert ref() is None


@pytest.mark.asyncio
@pytest.mark.parametrize("let_go_by", ["purge", "close"])
async def test_a_cycle_through_a_done_operation_is_collected_once_let_go(let_go_by: str) -> None:
    """A done operation waits for the purge out of the collector (compiled core);
    once the purge or closing lets go of it, its cycle is collected: nothing leaks."""
    async with DelayedOperationPurgatory[MockOp]("gc", purge_interval=100) as p:
        op = MockOp(10_000)
        op.itself = op  # type: ignore[attr-defined]  # a reference cycle
        p.try_complete_else_watch(op, ["k"])
        op.force_complete()
        ref = weakref.ref(op)
        del op
        gc.collect()
        assert ref() is not None  # held by the purgatory until the purge
        if let_go_by == "purge":
            assert p.purge_completed() == 1
            gc.collect()
            assert ref() is None
    gc.collect()
    assert ref() is None

"""DelayedOperationPurgatory beyond Kafka's scenarios: awaiting, closing, errors, purge."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from purgatory import (
    DelayedOperationPurgatory,
    OperationCancelledError,
    PurgatoryClosedError,
    TopicPartition,
)
from purgatory.testing import ManualClock

from .purgatory_kit import MockOp, manual_purgatory


class Raising(MockOp):
    def __init__(self, delay_ms: int, where: str) -> None:
        super().__init__(delay_ms, where)
        self.where = where

    def try_complete(self) -> bool:
        if self.where == "try_complete":
            raise RuntimeError("try_complete failed")
        return super().try_complete()

    def on_complete(self) -> str:
        super().on_complete()
        if self.where == "on_complete":
            raise RuntimeError("on_complete failed")
        return "fine"


# -- awaiting ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_await_gives_on_complete_value_early_and_on_expiry() -> None:
    async with DelayedOperationPurgatory[MockOp]("p") as p:
        early, late = MockOp(10_000, "early"), MockOp(20, "late")
        p.try_complete_else_watch(early, ["k"])
        p.try_complete_else_watch(late, ["k"])

        async def complete_soon() -> None:
            await asyncio.sleep(0.01)
            early.completable = True
            assert p.check_and_complete("k") == 1

        completer = asyncio.create_task(complete_soon())
        assert await early == "early:done"
        assert await late == "late:expired"
        await completer
        assert await early == "early:done"  # awaiting again returns at once
        stats = p.statistics()
        assert (stats.completed_early, stats.expired) == (1, 1)
        assert stats.lateness_count == 1 and stats.lateness_max_ms >= 0


@pytest.mark.asyncio
async def test_many_awaiters_and_a_cancelled_one() -> None:
    async with DelayedOperationPurgatory[MockOp]("p") as p:
        op = MockOp(10_000, "op")
        p.try_complete_else_watch(op, ["k"])
        waiters = [asyncio.create_task(_await(op)) for _ in range(3)]
        await asyncio.sleep(0)
        waiters[0].cancel()
        await asyncio.sleep(0)
        assert not op.is_done and p.watched == 1 and p.num_delayed == 1
        op.completable = True
        assert p.check_and_complete("k") == 1
        assert waiters[0].cancelled()
        assert [await w for w in waiters[1:]] == ["op:done", "op:done"]
        assert op._waiters is None
        p._check_invariants()


async def _await(op: MockOp) -> str:
    return await op


@pytest.mark.asyncio
async def test_a_cancelled_awaiter_leaves_the_operation_to_expire() -> None:
    async with DelayedOperationPurgatory[MockOp]("p") as p:
        op = MockOp(30, "op")
        p.try_complete_else_watch(op, ["k"])
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.001):
                await op
        assert await op == "op:expired"
        assert op.completions == 1 and op.expirations == 1


def test_an_unawaited_operation_has_no_future(clock: ManualClock) -> None:
    p = manual_purgatory(clock)
    op = MockOp(5)
    p.try_complete_else_watch(op, ["k"])
    clock.advance(5)
    p.timer.poll()
    assert op.is_completed and op._waiters is None
    assert op.result() == "op:expired"


@pytest.mark.asyncio
async def test_an_operation_never_given_to_a_purgatory_completes_only_by_force() -> None:
    op = MockOp(1)  # its delay means nothing: no timer holds it
    waiting = asyncio.ensure_future(op)
    await asyncio.sleep(0.02)
    assert not waiting.done() and not op.is_done
    assert op.force_complete()
    assert await waiting == "op:done"


def test_result_while_pending_and_await_without_a_loop() -> None:
    op = MockOp(5)
    with pytest.raises(RuntimeError, match="pending"):
        op.result()
    with pytest.raises(RuntimeError, match="running event loop"):
        op.__await__().send(None)


# -- closing ------------------------------------------------------------------


@pytest.mark.asyncio
async def test_closing_fails_awaiters_and_stops_the_reaper() -> None:
    p = DelayedOperationPurgatory[MockOp]("closing")
    async with p:
        ops = [MockOp(60_000, f"op{i}") for i in range(5)]
        for i, op in enumerate(ops):
            p.try_complete_else_watch(op, [TopicPartition("t", i % 2)])
        waiters = [asyncio.create_task(_await(op)) for op in ops]
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
        waiter = asyncio.create_task(_await(op))
        await asyncio.sleep(0)
        assert p.cancel_for_key("gone") == [op]
        with pytest.raises(OperationCancelledError):
            await waiter
        assert not op.force_complete()  # a cancelled operation never completes


# -- callbacks raising --------------------------------------------------------


def test_try_complete_raising_in_check_does_not_stop_the_others(clock: ManualClock) -> None:
    p = manual_purgatory(clock)
    bad, good = Raising(100, "try_complete"), MockOp(100, "good")
    with pytest.raises(RuntimeError):  # the caller's own first try: to the caller
        p.try_complete_else_watch(bad, ["k"])
    assert p.watched == 0 and p.num_delayed == 0
    bad.where = "ok"
    p.try_complete_else_watch(bad, ["k"])
    bad.where = "try_complete"
    p.try_complete_else_watch(good, ["k"])
    good.completable = True
    with pytest.raises(RuntimeError, match="try_complete failed"):
        p.check_and_complete("k")  # no loop: raised after the walk
    assert good.is_completed
    assert not bad.is_done and p.watched == 1 and p.num_delayed == 1
    p._check_invariants()
    clock.advance(100)
    p.timer.poll()  # it still expires
    assert bad.is_completed and bad.expirations == 1


@pytest.mark.asyncio
async def test_on_complete_raising_goes_to_awaiters_and_the_handler() -> None:
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    async with DelayedOperationPurgatory[MockOp]("p") as p:
        bad, good = Raising(60_000, "on_complete"), MockOp(60_000, "good")
        p.try_complete_else_watch(bad, ["k"])
        p.try_complete_else_watch(good, ["k"])
        waiter = asyncio.create_task(_await(bad))
        await asyncio.sleep(0)
        bad.completable = good.completable = True
        assert p.check_and_complete("k") == 1  # good; bad raised but completed
        assert bad.is_completed and good.is_completed
        with pytest.raises(RuntimeError, match="on_complete failed"):
            await waiter
        assert [str(c["exception"]) for c in seen] == ["on_complete failed"]
        assert p.watched == 0


@pytest.mark.asyncio
async def test_expiry_callback_raising_never_kills_the_reaper() -> None:
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    async with DelayedOperationPurgatory[MockOp]("p") as p:
        bad, after = Raising(5, "on_complete"), MockOp(40, "after")
        p.try_complete_else_watch(bad, ["k"])
        p.try_complete_else_watch(after, ["k"])
        assert await after == "after:expired"
        assert bad.is_completed
        assert len(seen) == 1


# -- threads ------------------------------------------------------------------


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
        manual_purgatory(clock).call_threadsafe(print)


# -- purge ----------------------------------------------------------------------


def test_purge_bounds_memory_with_a_million_operations_completed_outside(
    clock: ManualClock,
) -> None:
    """1M operations, each on two keys, completed directly (never through a key)."""
    purge_interval = 1000
    p = manual_purgatory(clock, purge_interval=purge_interval)
    keys = [TopicPartition("t", i) for i in range(8)]
    max_watched = 0
    batch: list[MockOp] = []
    for i in range(1_000_000):
        op = MockOp(30_000)
        p.try_complete_else_watch(op, (keys[i % 8], keys[(i + 1) % 8]))
        batch.append(op)
        if len(batch) == 100:  # 100 pending at a time, then completed outside
            for done in batch:
                done.force_complete()
            batch.clear()
            max_watched = max(max_watched, p.watched)
    stats = p.statistics()
    assert stats.completed_early == 1_000_000 and p.num_delayed == 0
    # at most purge_interval completed operations (2 entries each) plus the pending ones
    assert max_watched <= 2 * (purge_interval + 100)
    assert stats.purges >= 1_000_000 // (purge_interval + 100)
    assert len(p.timer) == 0
    p._check_invariants()


def test_purge_runs_after_the_walk_that_triggered_it(clock: ManualClock) -> None:
    p = manual_purgatory(clock, purge_interval=2)
    ops = [MockOp(1000, f"op{i}") for i in range(6)]
    for op in ops:
        p.try_complete_else_watch(op, ["a", "b"])
    for op in ops:
        op.completable = True
    assert p.check_and_complete("a") == 6  # purge deferred until the walk ends
    assert p.watched == 0 and p.watched_keys() == []
    assert p.statistics().purges == 1
    p._check_invariants()


def test_bad_purge_interval(clock: ManualClock) -> None:
    with pytest.raises(ValueError, match="purge_interval"):
        DelayedOperationPurgatory[MockOp]("p", purge_interval=-1)


def test_reentrant_watch_during_check(clock: ManualClock) -> None:
    p = manual_purgatory(clock)
    spawned: list[MockOp] = []

    class Spawner(MockOp):
        def on_complete(self) -> str:
            child = MockOp(1000, "child")
            p.try_complete_else_watch(child, ["k"])  # same key, during the walk
            spawned.append(child)
            return super().on_complete()

    parent = Spawner(1000, "parent")
    other = MockOp(1000, "other")
    p.try_complete_else_watch(parent, ["k"])
    p.try_complete_else_watch(other, ["k"])
    parent.completable = True
    assert p.check_and_complete("k") == 1
    assert p.watched == 2  # other and the child
    spawned[0].completable = other.completable = True
    assert p.check_and_complete("k") == 2
    p._check_invariants()


def test_timer_disabled_means_no_expiry(clock: ManualClock) -> None:
    from purgatory import SystemTimer

    timer = SystemTimer(clock=clock)
    p = DelayedOperationPurgatory[MockOp](
        "p", timer=timer, timer_enabled=False, reaper_enabled=False
    )
    op = MockOp(5)
    p.try_complete_else_watch(op, ["k"])
    clock.advance(100)
    timer.poll()
    assert not op.is_done and p.num_delayed == 0 and len(timer) == 0


def test_repr_and_histogram_quantiles() -> None:
    from purgatory._histogram import Histogram

    h = Histogram()
    for v in [*range(100), 1000, 5000, -3]:
        h.record(v)
    h._check_invariants()
    assert h.count == 103 and h.max == 5000
    assert h.quantile(0.5) == 50
    assert 1000 <= h.quantile(0.99) <= 1000 * 1.125
    with pytest.raises(ValueError):
        h.quantile(1.5)
    assert "watched=0" in repr(DelayedOperationPurgatory[MockOp]("x"))

"""DelayedOperation: awaiting, on every backend the asyncio tests cover (asyncio, uvloop)."""

from __future__ import annotations

import asyncio

import pytest

from purgatory import (
    DelayedOperationPurgatory,
)

from ..purgatory_kit import MockOp, await_outcome


@pytest.mark.asyncio
async def test_await_gives_on_complete_value_early_and_on_expiry() -> None:
    async with DelayedOperationPurgatory[MockOp]("p") as p:
        early, late = MockOp(600_000, "early"), MockOp(20, "late")  # no stall reaches 600 s
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
        waiters = [asyncio.create_task(await_outcome(op)) for _ in range(3)]
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


@pytest.mark.asyncio
async def test_a_cancelled_awaiter_leaves_the_operation_to_expire() -> None:
    async with DelayedOperationPurgatory[MockOp]("p") as p:
        op = MockOp(30, "op")
        p.try_complete_else_watch(op, ["k"])
        with pytest.raises(TimeoutError):
            # already due: it cancels the await at the loop's next turn, before the
            # reaper (woken by a timer) can expire the operation, however slow the
            # machine; a 1 ms timeout could fall due with the expiry after a stall
            async with asyncio.timeout(0):
                await op
        assert await op == "op:expired"
        assert op.completions == 1 and op.expirations == 1


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

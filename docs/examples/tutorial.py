"""The tutorial's purgatory: wait until a counter reaches a target, or time out.

Time is a :class:`~purgatory.testing.ManualClock` and the timer is polled by hand
(``reaper_enabled=False``), so the timeouts pass at once and the output is always the
same. In a server, leave both out: the purgatory's timer then follows the event
loop's clock and its reaper expires operations on time.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from purgatory import (
    DelayedOperation,
    DelayedOperationPurgatory,
    OperationCancelledError,
    Outcome,
    PurgatoryClosedError,
    PurgatoryStatistics,
    SystemTimer,
)
from purgatory.testing import ManualClock


class WaitForCount(DelayedOperation[int]):
    """Completes once ``counts[key]`` reaches ``target`` for any of its keys; its
    result is the highest count, then or at the timeout."""

    def __init__(self, counts: Counter[str], keys: list[str], target: int, timeout_ms: int) -> None:
        super().__init__(timeout_ms)  # the delay: how long the timer gives it
        self.counts = counts
        self.keys = keys
        self.target = target

    def highest(self) -> int:
        return max(self.counts[key] for key in self.keys)

    def try_complete(self) -> bool:
        # the condition, then force_complete(): True only for the one caller that won
        return self.highest() >= self.target and self.force_complete()

    def on_complete(self) -> int:
        # runs exactly once, early or at the timeout; its value is what `await op` gives
        return self.highest()

    def on_expiration(self) -> None:
        # runs after on_complete() when the timeout completed it
        print(f"{self.keys} timed out at {self.highest()} of {self.target}")


def make_purgatory(clock: ManualClock) -> DelayedOperationPurgatory[WaitForCount]:
    timer = SystemTimer("tutorial", clock=clock)
    return DelayedOperationPurgatory("tutorial", timer=timer, reaper_enabled=False)


async def complete_early(
    purgatory: DelayedOperationPurgatory[WaitForCount], counts: Counter[str]
) -> int:
    op = WaitForCount(counts, ["red", "blue"], target=2, timeout_ms=1_000)
    completed_now = purgatory.try_complete_else_watch(op, op.keys)
    print("completed at once:", completed_now)  # False: both counts are 0
    counts["blue"] += 2  # something happened on "blue"
    completed = purgatory.check_and_complete("blue")
    print("check_and_complete completed", completed)
    result = await op
    print("result", result, op.outcome, "expired:", op.expired)
    return result


async def expire(
    purgatory: DelayedOperationPurgatory[WaitForCount], counts: Counter[str], clock: ManualClock
) -> int:
    op = WaitForCount(counts, ["green"], target=5, timeout_ms=500)
    purgatory.try_complete_else_watch(op, op.keys)
    clock.advance(500)
    purgatory.timer.poll()  # 500 ms: not yet (never early: due a millisecond after)
    clock.advance(1)
    purgatory.timer.poll()  # 501 ms: the timer expires it
    result = await op
    print("result", result, op.outcome, "expired:", op.expired)
    return result


async def cancel_one(
    purgatory: DelayedOperationPurgatory[WaitForCount], counts: Counter[str]
) -> Outcome:
    op = WaitForCount(counts, ["red"], target=10, timeout_ms=60_000)
    purgatory.try_complete_else_watch(op, op.keys)
    print("cancel:", op.cancel(), "again:", op.cancel())  # True, then False
    try:
        await op
    except OperationCancelledError:
        print("awaiting a cancelled operation raises OperationCancelledError")
    return op.outcome


async def main() -> PurgatoryStatistics:
    clock = ManualClock()
    counts: Counter[str] = Counter()
    purgatory = make_purgatory(clock)
    async with purgatory:
        await complete_early(purgatory, counts)
        await expire(purgatory, counts, clock)
        await cancel_one(purgatory, counts)
        last = WaitForCount(counts, ["red"], target=10, timeout_ms=60_000)
        purgatory.try_complete_else_watch(last, last.keys)
        waiting = asyncio.ensure_future(last)  # pending when the block ends
        await asyncio.sleep(0)
    try:
        await waiting
    except PurgatoryClosedError:
        print("closing the purgatory answered the pending one:", last.outcome)
    stats = purgatory.statistics()
    print("early", stats.completed_early, "expired", stats.expired, "cancelled", stats.cancelled)
    return stats


if __name__ == "__main__":
    asyncio.run(main())

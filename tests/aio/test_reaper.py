"""The reaper on real event loops (asyncio and uvloop, via conftest).

Nothing here depends on the machine's speed. Timing is asserted only where it
cannot flake: never early (a property of the code: the timer reads the loop's
clock), exactly once, in due order. How late a task fires on a real loop depends
on the machine's load: that is a benchmark's figure (``benchmarks/timer_bench.py
--lateness``); on time to the tick is checked on a manual clock
(tests/core/test_timer.py). Wake-up counts are exact consequences of the design
(one wake per expiring bucket; a stalled loop only merges wakes), not timings.
Waits are polls for a condition with a generous hang guard.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from purgatory import SystemTimer, TimerTask
from purgatory.aio.backends.asyncio_backend import AsyncioSleeper
from purgatory.testing import ManualClock


class Stamp(TimerTask):
    """Records the timer-clock millisecond at which it ran and signals an event."""

    def __init__(self, delay_ms: int, timer: SystemTimer, out: list[tuple[int, int]]) -> None:
        super().__init__(delay_ms)
        self.timer = timer
        self.out = out
        self.due_ms = 0

    def run(self) -> None:
        self.out.append((self.due_ms, self.timer.clock.now_ms()))


def schedule(timer: SystemTimer, delay_ms: int, out: list[tuple[int, int]]) -> Stamp:
    task = Stamp(delay_ms, timer, out)
    task.due_ms = timer.clock.now_ms() + delay_ms
    timer.add(task)
    return task


HANG_GUARD_S = 60.0


async def wait_for_len(out: list[Any], n: int, limit_s: float = HANG_GUARD_S) -> None:
    """Wait until ``out`` holds ``n`` items; a hang guard, not a timing claim."""
    try:
        async with asyncio.timeout(limit_s):
            while len(out) < n:
                await asyncio.sleep(0.005)
    except TimeoutError:
        pytest.fail(f"{len(out)} of {n} tasks ran within {limit_s} s")


@pytest.mark.asyncio
async def test_tasks_fire_once_in_due_order_and_never_early() -> None:
    out: list[tuple[int, int]] = []
    delays = (1, 2, 5, 10, 25, 50, 80, 120, 200, 333)  # the finest wheel and overflow ones
    async with SystemTimer("real") as timer:
        tasks = [schedule(timer, delay, out) for delay in delays]
        await wait_for_len(out, len(delays))
        assert len(timer) == 0
    assert [due for due, _ in out] == [task.due_ms for task in tasks]  # once each, in order
    assert all(ran >= due for due, ran in out), f"a task ran before its expiration: {out}"


@pytest.mark.asyncio
async def test_reaper_sleeps_when_idle_and_wakes_per_bucket_not_per_task() -> None:
    async with SystemTimer("idle") as timer:
        await asyncio.sleep(0.05)
        assert timer.reaper_wakeups <= 1  # nothing scheduled: no ticking
        far: list[tuple[int, int]] = []
        for _ in range(100_000):
            schedule(timer, 3_600_000, far)  # an hour away
        before = timer.reaper_wakeups
        await asyncio.sleep(0.2)
        # 100k tasks an hour away share a handful of overflow buckets: the reaper
        # slept through, woken at most once for the new earliest bucket
        assert timer.reaper_wakeups - before <= 2
        assert len(timer) == 100_000
        near: list[tuple[int, int]] = []
        for delay in range(10, 60, 10):
            schedule(timer, delay, near)
        await wait_for_len(near, 5)
        # five buckets expired (plus possibly a re-arm after an early OS wake-up)
        assert timer.reaper_wakeups - before <= 12
        assert far == []


@pytest.mark.asyncio
async def test_a_failing_task_goes_to_the_handler_and_the_reaper_goes_on() -> None:
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: seen.append(context))

    class Boom(TimerTask):
        def run(self) -> None:
            raise ValueError("boom")

    out: list[tuple[int, int]] = []
    async with SystemTimer("boom") as timer:
        timer.add(Boom(1))
        schedule(timer, 20, out)
        await wait_for_len(out, 1)
    assert [str(c["exception"]) for c in seen] == ["boom"]


@pytest.mark.asyncio
async def test_leaving_stops_the_reaper_and_keeps_tasks() -> None:
    out: list[tuple[int, int]] = []
    timer = SystemTimer("stop")
    async with timer:
        schedule(timer, 50_000, out)
        assert "reaper=running" in repr(timer)
    assert "reaper=stopped" in repr(timer)
    assert len(timer) == 1
    reapers = [t for t in asyncio.all_tasks() if t.get_name() == "stop-reaper"]
    assert reapers == []
    async with timer:  # restartable
        pass


@pytest.mark.asyncio
async def test_entering_twice_is_refused() -> None:
    timer = SystemTimer("twice")
    async with timer:
        with pytest.raises(RuntimeError, match="already running"):
            await timer.__aenter__()


@pytest.mark.asyncio
async def test_advance_clock_sleeps_again_when_woken_before_the_bucket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # uvloop arms a timer from the loop time cached when the iteration began, so under
    # load its timer can fire before the time asked for by the timer's clock: here the
    # first sleep ends at once, and advance_clock must sleep again, not give up. The
    # clock is manual and the second sleep moves it to its target: no real wait
    clock = ManualClock(start_ms=0)
    out: list[tuple[int, int]] = []
    timer = SystemTimer("manual", clock=clock, may_expire_early=True)  # on time: Kafka's filing
    schedule(timer, 10, out)  # within the finest wheel (20 ms): one expiry runs it
    targets: list[int | None] = []

    async def early_then_on_time(
        self: AsyncioSleeper, target_ms: int | None, limit_ms: int | None = None
    ) -> None:
        targets.append(target_ms)
        if len(targets) > 1 and target_ms is not None:
            clock.advance(target_ms - clock.now_ms())

    monkeypatch.setattr(AsyncioSleeper, "sleep", early_then_on_time)
    assert await timer.advance_clock(2_000) is True
    assert targets == [10, 10] and out == [(10, 10)] and len(timer) == 0

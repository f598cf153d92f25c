"""LoopClock: which clock it reads, and the pinned read a running reaper uses."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest
import trio
import uvloop
from trio.testing import MockClock

from purgatory import LoopClock, SystemTimer
from purgatory.aio.backends import is_libuv_time

OFFSET_S = 5_000.0  # a loop whose clock runs this far ahead of time.monotonic()


class AheadLoop(asyncio.SelectorEventLoop):
    """An asyncio loop with a clock of its own, as time-travelling test loops have."""

    def time(self) -> float:
        return time.monotonic() + OFFSET_S


def test_outside_any_loop_the_clock_is_monotonic() -> None:
    clock = LoopClock()
    before = int(time.monotonic() * 1000)
    assert before <= clock.now_ms() <= int(time.monotonic() * 1000)
    assert clock.pinned_seconds()() >= before / 1000


def test_the_clock_follows_a_loop_that_keeps_its_own_time() -> None:
    clock = LoopClock()

    async def main() -> tuple[int, int, int, int]:
        before_ms = int(time.monotonic() * 1000)
        now_ms, pinned_ms = clock.now_ms(), int(clock.pinned_seconds()() * 1000)
        return before_ms, now_ms, pinned_ms, int(time.monotonic() * 1000)

    with asyncio.Runner(loop_factory=AheadLoop) as runner:
        before_ms, now_ms, pinned_ms, after_ms = runner.run(main())
    ahead_ms = int(OFFSET_S * 1000)
    # between time.monotonic() read before and after, however long that took
    assert before_ms + ahead_ms - 1 <= now_ms <= after_ms + ahead_ms
    assert before_ms + ahead_ms - 1 <= pinned_ms <= after_ms + ahead_ms
    assert clock.now_ms() < now_ms  # back outside: monotonic again


@pytest.mark.asyncio
async def test_a_running_reaper_pins_the_timers_clock_and_leaving_unpins_it() -> None:
    timer = SystemTimer("pinned")
    clock = timer.clock
    assert isinstance(clock, LoopClock)

    def pinned_reader() -> Callable[[], float] | None:
        return timer.pinned_clock

    assert pinned_reader() is None  # follows the running loop at every read
    async with timer:
        loop = asyncio.get_running_loop()
        asyncios_own = type(loop).time is asyncio.BaseEventLoop.time  # uvloop's is not
        # bound to the reaper's loop: asyncio's own clock is time.monotonic itself
        assert pinned_reader() == (time.monotonic if asyncios_own else loop.time)
        first = clock.now_ms()
        pinned = timer.now_ms()
        assert first <= pinned <= clock.now_ms()
        await asyncio.sleep(0.01)
        assert timer.now_ms() > pinned  # it reads the clock, it does not cache it
    assert pinned_reader() is None


def test_on_trio_the_pinned_clock_reads_the_runs_clock() -> None:
    seen: list[int] = []

    async def main() -> None:
        timer = SystemTimer("trio")
        async with timer:
            seen.append(timer.now_ms())
            await trio.sleep(7)  # virtual: the mock clock jumps
            seen.append(timer.now_ms())

    trio.run(main, clock=MockClock(autojump_threshold=0))
    assert seen == [0, 7_000]


class OwnTimeUvloop(uvloop.Loop):
    """A uvloop loop whose clock is its own, not libuv's."""

    def time(self) -> float:
        return time.monotonic() + OFFSET_S


def test_only_uvloops_own_time_is_libuvs_clock() -> None:
    async def main() -> tuple[bool, bool]:
        loop = asyncio.get_running_loop()
        return is_libuv_time(loop.time), is_libuv_time(time.monotonic)

    assert uvloop.run(main()) == (True, False)
    assert asyncio.run(main()) == (False, False)
    with asyncio.Runner(loop_factory=OwnTimeUvloop) as runner:
        assert runner.run(main()) == (False, False)


def test_on_uvloop_the_pinned_timer_reads_the_loops_time() -> None:
    """Pinned to uvloop's clock (read in C by the compiled core on Linux), every
    read lies between the loop's own reads around it, in whole milliseconds."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with SystemTimer("uv") as timer:
            assert timer.pinned_clock == loop.time
            for _ in range(50):
                before = int(loop.time() * 1000)
                read = timer.now_ms()
                assert before <= read <= int(loop.time() * 1000)
                await asyncio.sleep(0.0003)

    uvloop.run(main())


def test_a_uvloop_with_its_own_clock_is_read_through_its_time() -> None:
    async def main() -> tuple[int, int, int]:
        timer = SystemTimer("own")
        async with timer:
            before_ms = int(time.monotonic() * 1000)
            now_ms = timer.now_ms()
            after_ms = int(time.monotonic() * 1000)
        return before_ms, now_ms, after_ms

    with asyncio.Runner(loop_factory=OwnTimeUvloop) as runner:
        before_ms, now_ms, after_ms = runner.run(main())
    ahead_ms = int(OFFSET_S * 1000)
    # between time.monotonic() read before and after, however long that took
    assert before_ms + ahead_ms - 1 <= now_ms <= after_ms + ahead_ms

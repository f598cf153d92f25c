"""LoopClock: which clock it reads, and the bound reader a running reaper uses."""

from __future__ import annotations

import asyncio
import time

import pytest
import trio
import uvloop
from trio.testing import MockClock

from purgatory import LoopClock, SystemTimer
from purgatory.aio.backends.asyncio_backend import AsyncioBackend
from purgatory.core import ClockReader
from purgatory.core.clock import C_CLOCKS

OFFSET_S = 5_000.0  # a loop whose clock runs this far ahead of time.monotonic()


class AheadLoop(asyncio.SelectorEventLoop):
    """An asyncio loop with a clock of its own, as time-travelling test loops have."""

    def time(self) -> float:
        return time.monotonic() + OFFSET_S


def test_outside_any_loop_the_clock_is_monotonic() -> None:
    clock = LoopClock()
    before = int(time.monotonic() * 1000)
    assert before <= clock.now_ms() <= int(time.monotonic() * 1000)
    assert before <= clock.bound_reader().now_ms() <= int(time.monotonic() * 1000)


def test_the_clock_follows_a_loop_that_keeps_its_own_time() -> None:
    clock = LoopClock()

    async def main() -> tuple[int, int, int, int]:
        before_ms = int(time.monotonic() * 1000)
        now_ms, bound_ms = clock.now_ms(), clock.bound_reader().now_ms()
        return before_ms, now_ms, bound_ms, int(time.monotonic() * 1000)

    with asyncio.Runner(loop_factory=AheadLoop) as runner:
        before_ms, now_ms, bound_ms, after_ms = runner.run(main())
    ahead_ms = int(OFFSET_S * 1000)
    # between time.monotonic() read before and after, however long that took
    assert before_ms + ahead_ms - 1 <= now_ms <= after_ms + ahead_ms
    assert before_ms + ahead_ms - 1 <= bound_ms <= after_ms + ahead_ms
    assert clock.now_ms() < now_ms  # back outside: monotonic again


@pytest.mark.asyncio
async def test_a_running_reaper_binds_the_timers_reader_and_leaving_unbinds_it() -> None:
    timer = SystemTimer("bound")
    clock = timer.clock
    assert isinstance(clock, LoopClock)
    # follows the running loop at every read
    assert (timer.reader.kind, timer.reader.source) == ("clock", clock)
    async with timer:
        loop = asyncio.get_running_loop()
        asyncios_own = type(loop).time is asyncio.BaseEventLoop.time  # uvloop's is not
        # bound to the reaper's loop: asyncio's own clock is time.monotonic itself
        reader = timer.reader
        assert reader.source == (time.monotonic if asyncios_own else loop.time)
        in_c = "monotonic" if asyncios_own else "libuv"
        assert reader.kind == (in_c if C_CLOCKS else "seconds")
        first = clock.now_ms()
        bound = timer.now_ms()
        assert first <= bound <= clock.now_ms()
        await asyncio.sleep(0.01)
        assert timer.now_ms() > bound  # it reads the clock, it does not cache it
    assert (timer.reader.kind, timer.reader.source) == ("clock", clock)


def test_on_trio_the_bound_reader_reads_the_runs_clock() -> None:
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


def test_only_uvloops_own_time_is_read_as_libuvs_clock() -> None:
    """The backend's reader: libuv's clock for uvloop's own ``time``, monotonic for
    asyncio's own, a call of ``loop.time`` for a loop class that overrides it."""

    async def main() -> tuple[str, bool]:
        loop = asyncio.get_running_loop()
        reader = AsyncioBackend(loop).clock_reader()
        own = reader.source is time.monotonic or reader.source == loop.time
        return reader.kind, own

    def in_c(kind: str) -> str:
        return kind if C_CLOCKS else "seconds"

    assert uvloop.run(main()) == (in_c("libuv"), True)
    assert asyncio.run(main()) == (in_c("monotonic"), True)
    with asyncio.Runner(loop_factory=OwnTimeUvloop) as runner:
        assert runner.run(main()) == ("seconds", True)
    with asyncio.Runner(loop_factory=AheadLoop) as runner:
        assert runner.run(main()) == ("seconds", True)


def test_on_uvloop_the_bound_timer_reads_the_loops_time() -> None:
    """Bound to uvloop's clock (read in C by the compiled core on Linux), every
    read lies between the loop's own reads around it, in whole milliseconds."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with SystemTimer("uv") as timer:
            assert timer.reader.source == loop.time
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


def test_a_libuv_reader_reads_uvloops_time() -> None:
    """In C where the core is compiled on Linux, by calling ``loop.time`` elsewhere:
    each read lies between ``loop.time()`` read before and after it (whole ms)."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        reader = ClockReader.libuv(loop.time)
        assert reader.kind == ("libuv" if C_CLOCKS else "seconds")
        for _ in range(1000):
            before = int(loop.time() * 1000)
            read = reader.now_ms()
            assert before <= read <= int(loop.time() * 1000)

    uvloop.run(main())

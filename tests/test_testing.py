"""purgatory.testing.VirtualTimeLoop: asyncio in virtual time, jumping when idle.

Every claim about time here is about ``loop.time()``, which the tests know exactly;
the wall clock appears only as a hang guard (what would take an hour in real time
must be back long before HANG_GUARD_S), never as a measure of speed.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

from purgatory import DelayedOperation, DelayedOperationPurgatory, LoopClock, SystemTimer
from purgatory.testing import VirtualTimeLoop, run_in_virtual_time

HANG_GUARD_S = 60.0


def test_an_hour_of_sleep_takes_no_real_time() -> None:
    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        before = loop.time()
        await asyncio.sleep(3600)
        return before, loop.time()

    started = time.monotonic()
    before, after = run_in_virtual_time(main())
    assert (before, after) == (0.0, 3600.0)
    assert time.monotonic() - started < HANG_GUARD_S  # a guard: a real sleep is 3600 s


def test_timers_fire_in_order_each_at_its_virtual_time() -> None:
    async def main() -> list[tuple[str, float]]:
        loop = asyncio.get_running_loop()
        fired: list[tuple[str, float]] = []

        async def sleeper(name: str, delay_s: float) -> None:
            await asyncio.sleep(delay_s)
            fired.append((name, loop.time()))

        loop.call_later(2.5, lambda: fired.append(("call_later", loop.time())))
        loop.call_at(7.0, lambda: fired.append(("call_at", loop.time())))
        await asyncio.gather(sleeper("five", 5), sleeper("two", 2), sleeper("ten", 10))
        return fired

    assert run_in_virtual_time(main()) == [
        ("two", 2.0),
        ("call_later", 2.5),
        ("five", 5.0),
        ("call_at", 7.0),
        ("ten", 10.0),
    ]


def test_the_clock_starts_where_asked_and_never_moves_while_code_runs() -> None:
    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        seen = [loop.time()]
        sum(range(100_000))  # work takes no virtual time
        await asyncio.sleep(0)  # nor does a turn of the loop
        seen.append(loop.time())
        await asyncio.sleep(1.5)
        seen.append(loop.time())
        return seen

    assert run_in_virtual_time(main(), start_s=1000.0) == [1000.0, 1000.0, 1001.5]


def test_advance_moves_the_clock_and_due_timers_run_next_turn() -> None:
    async def main() -> list[tuple[str, float]]:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualTimeLoop)
        fired: list[tuple[str, float]] = []
        loop.call_later(1.0, lambda: fired.append(("timer", loop.time())))
        assert loop.advance(2.5) == 2.5  # as if the code running took 2.5 s
        fired.append(("advanced", loop.time()))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return fired

    assert run_in_virtual_time(main()) == [("advanced", 2.5), ("timer", 2.5)]


def test_bad_arguments_are_refused() -> None:
    loop = VirtualTimeLoop()
    try:
        with pytest.raises(ValueError, match="never goes back"):
            loop.advance(-1)
    finally:
        loop.close()
    with pytest.raises(ValueError, match="start_s"):
        VirtualTimeLoop(start_s=float("nan"))
    with pytest.raises(ValueError, match="autojump_threshold_s"):
        VirtualTimeLoop(autojump_threshold_s=-0.5)


class Poll(DelayedOperation[str]):
    """Completed only by its timeout."""

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> str:
        return "timeout"


def test_a_purgatory_operation_expires_at_its_virtual_deadline() -> None:
    async def main() -> tuple[str, float, int]:
        loop = asyncio.get_running_loop()
        async with DelayedOperationPurgatory[Poll]("virtual") as purgatory:
            await asyncio.sleep(12.25)  # anywhere: the deadline counts from the watch
            poll = Poll(30_000)
            purgatory.try_complete_else_watch(poll, ["key"])
            result = await poll
            assert poll.expired
            return result, loop.time(), purgatory.timer.now_ms()

    result, now_s, now_ms = run_in_virtual_time(main())
    # never early: the deadline 42,250 ms read from a truncating clock is filed at the
    # next millisecond (purgatory.core.timer)
    assert (result, now_ms) == ("timeout", 42_251) and now_s == pytest.approx(42.251)


def test_the_loop_clock_and_a_running_reaper_read_the_virtual_time() -> None:
    """The library's clock follows ``loop.time()``: the backend's clock reader calls
    the subclass's override (not ``time.monotonic``), bound to the loop or not."""

    async def main() -> list[int]:
        clock = LoopClock()
        timer = SystemTimer("virtual")
        reader = clock.bound_reader()
        assert (reader.kind, reader.source) == ("seconds", asyncio.get_running_loop().time)
        seen = [clock.now_ms(), reader.now_ms()]
        async with timer:
            assert timer.reader.kind == "seconds"
            await asyncio.sleep(7)
            seen += [clock.now_ms(), timer.now_ms()]
        return seen

    assert run_in_virtual_time(main(), start_s=100.0) == [100_000, 100_000, 107_000, 107_000]


def test_real_sockets_work_and_wait_in_virtual_time() -> None:
    """Bytes written at virtual 5 s reach a reader waiting with a 10 s timeout at 5 s."""

    async def main() -> tuple[bytes, float]:
        loop = asyncio.get_running_loop()
        left, right = socket.socketpair()
        reader, left_writer = await asyncio.open_connection(sock=left)
        _, writer = await asyncio.open_connection(sock=right)

        async def write_later() -> None:
            await asyncio.sleep(5)
            writer.write(b"hello")
            await writer.drain()

        task = asyncio.create_task(write_later())
        data = await asyncio.wait_for(reader.readexactly(5), timeout=10)
        await task
        for each in (writer, left_writer):
            each.close()
            await each.wait_closed()
        return data, loop.time()

    assert run_in_virtual_time(main()) == (b"hello", 5.0)


def test_a_job_in_an_executor_holds_the_clock_until_it_is_done() -> None:
    """A thread's work takes no virtual time: a 10 ms virtual timeout around 50 ms of
    real work does not fire, and the clock has not moved when the result is back."""

    async def main() -> tuple[str, float]:
        loop = asyncio.get_running_loop()

        def job() -> str:
            time.sleep(0.05)
            return "done"

        result = await asyncio.wait_for(asyncio.to_thread(job), timeout=0.01)
        return result, loop.time()

    assert run_in_virtual_time(main()) == ("done", 0.0)


def test_the_threshold_waits_for_io_from_elsewhere_before_jumping() -> None:
    """A thread the loop does not know writes to a socket; with a threshold the loop
    waits that long in real time for it before jumping to the 1000 s timeout."""

    async def main() -> tuple[bytes, float]:
        loop = asyncio.get_running_loop()
        left, right = socket.socketpair()
        reader, writer = await asyncio.open_connection(sock=left)

        def send_soon() -> None:
            time.sleep(0.01)
            right.sendall(b"x")

        thread = threading.Thread(target=send_soon)
        thread.start()
        try:
            data = await asyncio.wait_for(reader.readexactly(1), timeout=1000)
        finally:
            thread.join()
            right.close()
            writer.close()
            await writer.wait_closed()
        return data, loop.time()

    assert run_in_virtual_time(main(), autojump_threshold_s=HANG_GUARD_S) == (b"x", 0.0)

"""Never early on a running loop, in virtual time: operations created at start times
that are not whole milliseconds expire no sooner than their timeout by the loop's
clock in seconds, and at most a tick (plus the reaper's millisecond) later."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import trio
from trio.testing import MockClock

from purgatory import DelayedOperation, DelayedOperationPurgatory, SystemTimer
from purgatory.testing import VirtualTimeLoop, run_in_virtual_time


class Timed(DelayedOperation[float]):
    """Never completes early; its outcome is the loop's time at expiry (seconds)."""

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> float:
        return asyncio.get_running_loop().time()


TIMEOUTS_MS = [0, 1, 2, 7, 25, 30, 99, 250, 1_234]


@pytest.mark.parametrize("tick_ms", [1, 7, 10])
@pytest.mark.parametrize("start_s", [0.0004, 12.3456, 1000.0009])
def test_never_early_on_a_virtual_loop(tick_ms: int, start_s: float) -> None:
    async def main() -> list[tuple[int, float, float]]:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualTimeLoop)
        timer = SystemTimer("v", tick_ms=tick_ms, wheel_size=3)
        async with DelayedOperationPurgatory[Timed]("v", timer=timer) as purgatory:
            made: list[tuple[int, float, Timed]] = []
            for step_s in (0.0, 0.0003, 0.0005, 0.0009):
                loop.advance(step_s)  # another phase of the millisecond
                for timeout_ms in TIMEOUTS_MS:
                    op = Timed(timeout_ms)
                    made.append((timeout_ms, loop.time(), op))
                    purgatory.try_complete_else_watch(op, ["k"])
            done = [await op for _, _, op in made]
            assert not purgatory.statistics().expired_early
        return [(t, created, expired) for (t, created, _), expired in zip(made, done, strict=True)]

    for timeout_ms, created_s, expired_s in run_in_virtual_time(main(), start_s=start_s):
        waited_ms = (expired_s - created_s) * 1000
        assert waited_ms >= timeout_ms - 1e-6, f"{timeout_ms} ms expired after {waited_ms}"
        assert waited_ms <= timeout_ms + tick_ms + 1 + 1e-6, f"{timeout_ms}: {waited_ms}"


# Timeouts one after another from whole milliseconds, each on a fresh reaper sleep:
# 8 s woke the reaper at 8.0 + 0.001 s, the float 8.000999..., which the clock read
# as 8000 ms: it polled for nothing and slept a millisecond more (2 ms late, not 1).
# The reaper sleeps a microsecond past each wake time now, so the start times drift
# off the whole millisecond by a few microseconds: 1 ms late within 50 us.
SEQUENCE_MS = [8_000, 1_000, 2_000, 5_000, 7_000, 9_000, 12_345, 30_000, 10_000, 1, 2, 7, 21]


class Unanswered(DelayedOperation[None]):
    """A wait nothing completes, on any library."""

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        return None


async def _lateness_one_after_another(now_s: Callable[[], float]) -> list[float]:
    """Each timeout of SEQUENCE_MS, awaited alone: how late it expired, in ms."""
    late_ms: list[float] = []
    async with DelayedOperationPurgatory[Unanswered]("seq") as purgatory:
        for timeout_ms in SEQUENCE_MS:
            op = Unanswered(timeout_ms)
            created_s = now_s()
            purgatory.try_complete_else_watch(op, ["k"])
            await op
            late_ms.append((now_s() - created_s) * 1000 - timeout_ms)
    return late_ms


def test_a_timeout_from_a_whole_millisecond_ends_one_millisecond_late_on_asyncio() -> None:
    async def main() -> list[float]:
        return await _lateness_one_after_another(asyncio.get_running_loop().time)

    late_ms = run_in_virtual_time(main())
    assert late_ms == pytest.approx([1.0] * len(SEQUENCE_MS), abs=0.05)


def test_a_timeout_from_a_whole_millisecond_ends_one_millisecond_late_on_trio() -> None:
    late_ms: list[float] = []

    async def main() -> None:
        late_ms.extend(await _lateness_one_after_another(trio.current_time))

    trio.run(main, clock=MockClock(autojump_threshold=0))
    assert late_ms == pytest.approx([1.0] * len(SEQUENCE_MS), abs=0.05)

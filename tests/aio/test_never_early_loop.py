"""Never early on a running loop, in virtual time: operations created at start times
that are not whole milliseconds expire no sooner than their timeout by the loop's
clock in seconds, and at most a tick (plus the reaper's millisecond) later."""

from __future__ import annotations

import asyncio

import pytest

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

"""SystemTimer: the core timer plus its reaper and the loop: task errors go to the
loop's exception handler, advance_clock, repr."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from purgatory import SystemTimer, TimerTask
from purgatory.core.timer import BUILD
from purgatory.testing import ManualClock

from ..timer_kit import Boom, Recorder


@pytest.mark.asyncio
async def test_with_a_loop_failures_go_to_the_exception_handler(
    clock: ManualClock, timer: SystemTimer
) -> None:
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    log: list[tuple[object, int]] = []
    timer.add(Boom(1, "boom"))
    timer.add(Recorder(1, "ok", clock, log))
    clock.advance(1)
    assert timer.poll() == 2
    assert log == [("ok", 1)]
    assert len(seen) == 1 and str(seen[0]["exception"]) == "boom"
    assert isinstance(seen[0]["task"], Boom)


def test_repr_says_whether_the_reaper_runs(clock: ManualClock) -> None:
    timer = SystemTimer("test", clock=clock)
    assert repr(timer) == (
        f"<SystemTimer 'test' size=0 tick_ms=1 wheel_size=20 levels=1 build={BUILD} reaper=stopped>"
    )


def test_advance_clock_from_inside_a_task_is_refused(clock: ManualClock) -> None:
    timer = SystemTimer("test", clock=clock)
    errors: list[BaseException] = []

    class Advances(TimerTask):
        def run(self) -> None:
            coro = timer.advance_clock(0)  # with no wait, it polls at its first step
            try:
                coro.send(None)
            except BaseException as exc:  # noqa: BLE001 - what the nested call raised
                errors.append(exc)
            finally:
                coro.close()

    timer.add(Advances(0))
    assert timer.poll() == 1
    assert [type(e) for e in errors] == [RuntimeError]

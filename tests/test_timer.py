"""SystemTimer behaviour beyond Kafka's scenarios: validation, moves, errors, due list."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from purgatory import SystemTimer, TimerTask
from purgatory.testing import ManualClock

from .timer_kit import Recorder, poll_checked


class Boom(TimerTask):
    def __init__(self, delay_ms: int, message: str) -> None:
        super().__init__(delay_ms)
        self.message = message

    def run(self) -> None:
        raise RuntimeError(self.message)


@pytest.mark.parametrize("delay", [math.nan, math.inf, -math.inf])
def test_non_finite_delays_are_refused(timer: SystemTimer, delay: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        timer.add(Recorder(delay, None, ManualClock(), []))  # type: ignore[arg-type]
    assert len(timer) == 0


@pytest.mark.parametrize("delay", ["10", None, True, b"1", 1j])
def test_non_numeric_delays_are_refused(timer: SystemTimer, delay: object) -> None:
    with pytest.raises(TypeError, match="delay_ms"):
        timer.add(Recorder(delay, None, ManualClock(), []))  # type: ignore[arg-type]
    assert len(timer) == 0


def test_float_delays_round_up_never_early(clock: ManualClock, timer: SystemTimer) -> None:
    log: list[tuple[object, int]] = []
    timer.add(Recorder(2.1, "a", clock, log))  # type: ignore[arg-type]
    clock.advance(2)
    assert poll_checked(timer) == 0
    clock.advance(1)
    assert poll_checked(timer) == 1
    assert log == [("a", 3)]


def test_adding_a_scheduled_task_moves_it(clock: ManualClock, timer: SystemTimer) -> None:
    log: list[tuple[object, int]] = []
    task = Recorder(10, "t", clock, log)
    timer.add(task)
    task.delay_ms = 500  # far away, in an overflow wheel
    timer.add(task)
    timer._check_invariants()
    assert len(timer) == 1
    task.delay_ms = 5
    timer.add(task)
    assert len(timer) == 1
    for _ in range(600):
        clock.advance(1)
        poll_checked(timer)
    assert log == [("t", 5)]


def test_cancel_is_idempotent_and_wins(clock: ManualClock, timer: SystemTimer) -> None:
    log: list[tuple[object, int]] = []
    task = Recorder(3, "t", clock, log)
    timer.add(task)
    scheduled = task.is_scheduled
    assert scheduled
    task.cancel()
    task.cancel()
    assert not task.is_scheduled and len(timer) == 0
    due = Recorder(-1, "due", clock, log)
    timer.add(due)  # in the due list
    assert len(timer) == 1
    due.cancel()
    assert len(timer) == 0
    clock.advance(10)
    assert poll_checked(timer) == 0
    assert log == []


def test_a_task_may_run_again_after_being_re_added(clock: ManualClock, timer: SystemTimer) -> None:
    log: list[tuple[object, int]] = []
    task = Recorder(2, "t", clock, log)
    timer.add(task)
    clock.advance(2)
    poll_checked(timer)
    timer.add(task)
    clock.advance(2)
    poll_checked(timer)
    assert log == [("t", 2), ("t", 4)]


def test_a_task_that_cancels_its_bucket_mate_stops_it(
    clock: ManualClock, timer: SystemTimer
) -> None:
    log: list[tuple[object, int]] = []
    victim = Recorder(5, "victim", clock, log)

    class Killer(TimerTask):
        def run(self) -> None:
            victim.cancel()
            log.append(("killer", clock.now_ms()))

    timer.add(Killer(5))
    timer.add(victim)  # same bucket, after the killer
    clock.advance(5)
    assert poll_checked(timer) == 1
    assert log == [("killer", 5)]


def test_tasks_made_due_while_polling_wait_for_the_next_poll(
    clock: ManualClock, timer: SystemTimer
) -> None:
    log: list[tuple[object, int]] = []

    class Chain(TimerTask):
        def __init__(self, left: int) -> None:
            super().__init__(0)
            self.left = left

        def run(self) -> None:
            log.append(("chain", self.left))
            if self.left:
                timer.add(Chain(self.left - 1))

    timer.add(Chain(2))
    assert poll_checked(timer) == 1
    assert poll_checked(timer) == 1
    assert poll_checked(timer) == 1
    assert poll_checked(timer) == 0
    assert [n for _, n in log] == [2, 1, 0]


def test_coarse_ticks_fire_at_most_a_tick_early_never_more(clock: ManualClock) -> None:
    timer = SystemTimer(tick_ms=10, wheel_size=4, clock=clock)
    log: list[tuple[object, int]] = []
    for delay in range(0, 300, 7):
        timer.add(Recorder(delay, delay, clock, log))
    while clock.now_ms() < 400:
        poll_checked(timer)
        clock.advance(1)
    assert len(log) == len(range(0, 300, 7))
    for label, at in log:
        assert isinstance(label, int)
        assert label - 10 < at <= label, f"task of delay {label} ran at {at}"


@pytest.mark.parametrize(("tick_ms", "wheel_size"), [(1, 3), (1, 20), (3, 3), (10, 2)])
def test_every_small_delay_fires_on_time_from_every_tick_phase(
    tick_ms: int, wheel_size: int
) -> None:
    """Exhaustive over delays up to several overflow levels and over start phases."""
    horizon = 3 * tick_ms * wheel_size**3
    for start in range(1000, 1000 + tick_ms + 1):
        for warmup in (0, 1, tick_ms):  # wheel time equal to, or lagging, the clock
            clock = ManualClock(start)
            timer = SystemTimer(tick_ms=tick_ms, wheel_size=wheel_size, clock=clock)
            clock.advance(warmup)
            log: list[tuple[object, int]] = []
            added_at = clock.now_ms()
            for delay in range(-2, horizon):
                timer.add(Recorder(delay, delay, clock, log))
            while len(timer) and clock.now_ms() < start + 2 * horizon:
                timer.poll()
                clock.advance(1)
            assert len(log) == horizon + 2
            for label, at in log:
                assert isinstance(label, int)
                expiration = added_at + label
                if tick_ms == 1:
                    assert at == max(expiration, added_at), (label, at)
                else:
                    assert (
                        max(expiration - tick_ms, added_at - 1) < at <= max(expiration, added_at)
                    ), (label, at)
            timer._check_invariants()


def test_without_a_loop_a_failing_task_is_raised_after_the_pass(
    clock: ManualClock, timer: SystemTimer
) -> None:
    log: list[tuple[object, int]] = []
    timer.add(Boom(1, "first"))
    timer.add(Recorder(1, "ok", clock, log))
    clock.advance(1)
    with pytest.raises(RuntimeError, match="first"):
        timer.poll()
    assert log == [("ok", 1)]  # the pass completed
    timer._check_invariants()
    assert len(timer) == 0


def test_without_a_loop_several_failures_raise_a_group(
    clock: ManualClock, timer: SystemTimer
) -> None:
    timer.add(Boom(1, "a"))
    timer.add(Boom(1, "b"))
    timer.add(Boom(-1, "c"))
    clock.advance(1)
    with pytest.raises(ExceptionGroup) as info:
        timer.poll()
    assert sorted(str(e) for e in info.value.exceptions) == ["a", "b", "c"]
    assert len(timer) == 0


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


def test_next_expiration(clock: ManualClock, timer: SystemTimer) -> None:
    assert timer.next_expiration_ms() is None
    timer.add(Recorder(30, None, clock, []))
    assert timer.next_expiration_ms() == 20  # an overflow bucket: [20, 40) cascades at 20
    timer.add(Recorder(7, None, clock, []))
    assert timer.next_expiration_ms() == 7
    timer.add(Recorder(-1, None, clock, []))
    assert timer.next_expiration_ms() == clock.now_ms()


def test_repr_and_properties(timer: SystemTimer) -> None:
    assert timer.tick_ms == 1 and timer.wheel_size == 20
    assert "size=0" in repr(timer) and "reaper=stopped" in repr(timer)
    assert "ManualClock" in repr(timer.clock)


def test_manual_clock_refuses_to_go_back() -> None:
    clock = ManualClock(5)
    with pytest.raises(ValueError, match="never goes back"):
        clock.advance(-1)
    with pytest.raises(TypeError):
        clock.advance(1.5)  # type: ignore[arg-type]
    assert clock.advance(0) == 5


def test_base_task_must_override_run(timer: SystemTimer) -> None:
    with pytest.raises(NotImplementedError):
        TimerTask(0).run()

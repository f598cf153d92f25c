"""SystemTimer behaviour beyond Kafka's scenarios: validation, moves, errors, due list.

Tasks that raise follow the rules stated in ``test_purgatory.py``: a callback
error is reported and the pass goes on; ``KeyboardInterrupt`` and ``SystemExit``
propagate at once and leave what did not run scheduled.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from purgatory import (
    SystemTimer,
    TimerTask,
)
from purgatory.core import WheelTimer
from purgatory.core.timer import BUILD
from purgatory.testing import ManualClock

from ..timer_kit import CALLBACK_ERRORS, INTERRUPTS, Boom, Raises, Recorder, poll_checked


@pytest.mark.parametrize("delay", [math.nan, math.inf, -math.inf])
def test_non_finite_delays_are_refused(timer: WheelTimer, delay: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        timer.add(Recorder(delay, None, ManualClock(), []))  # type: ignore[arg-type]
    assert len(timer) == 0


@pytest.mark.parametrize("delay", ["10", None, True, b"1", 1j])
def test_non_numeric_delays_are_refused(timer: WheelTimer, delay: object) -> None:
    with pytest.raises(TypeError, match="delay_ms"):
        timer.add(Recorder(delay, None, ManualClock(), []))  # type: ignore[arg-type]
    assert len(timer) == 0


def test_float_delays_round_up_never_early(clock: ManualClock, timer: WheelTimer) -> None:
    log: list[tuple[object, int]] = []
    timer.add(Recorder(2.1, "a", clock, log))  # type: ignore[arg-type]
    clock.advance(2)
    assert poll_checked(timer) == 0
    clock.advance(1)
    assert poll_checked(timer) == 1
    assert log == [("a", 3)]


def test_adding_a_scheduled_task_moves_it(clock: ManualClock, timer: WheelTimer) -> None:
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


def test_cancel_is_idempotent_and_wins(clock: ManualClock, timer: WheelTimer) -> None:
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


def test_a_task_may_run_again_after_being_re_added(clock: ManualClock, timer: WheelTimer) -> None:
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
    clock: ManualClock, timer: WheelTimer
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
    clock: ManualClock, timer: WheelTimer
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
    """Kafka's filing; the default's is never early (test_never_early.py)."""
    timer = SystemTimer(tick_ms=10, wheel_size=4, clock=clock, may_expire_early=True)
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


@pytest.mark.parametrize("may_expire_early", [False, True])
@pytest.mark.parametrize(("tick_ms", "wheel_size"), [(1, 3), (1, 20), (3, 3), (10, 2)])
def test_every_small_delay_fires_on_time_from_every_tick_phase(
    tick_ms: int, wheel_size: int, may_expire_early: bool
) -> None:
    """Exhaustive over delays up to several overflow levels and over start phases:
    Kafka's filing runs a task at the start of its deadline's tick (on time with
    tick 1), the default at the first tick starting after it."""
    horizon = 3 * tick_ms * wheel_size**3
    for start in range(1000, 1000 + tick_ms + 1):
        for warmup in (0, 1, tick_ms):  # wheel time equal to, or lagging, the clock
            clock = ManualClock(start)
            timer = SystemTimer(
                tick_ms=tick_ms,
                wheel_size=wheel_size,
                clock=clock,
                may_expire_early=may_expire_early,
            )
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
                if not may_expire_early and label > 0:
                    assert at == -(-(expiration + 1) // tick_ms) * tick_ms, (label, at)
                    assert expiration < at <= expiration + tick_ms, (label, at)
                elif tick_ms == 1:
                    assert at == max(expiration, added_at), (label, at)
                else:
                    assert (
                        max(expiration - tick_ms, added_at - 1) < at <= max(expiration, added_at)
                    ), (label, at)
            timer._check_invariants()


def test_without_a_loop_a_failing_task_is_raised_after_the_pass(
    clock: ManualClock, timer: WheelTimer
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
    clock: ManualClock, timer: WheelTimer
) -> None:
    timer.add(Boom(1, "a"))
    timer.add(Boom(1, "b"))
    timer.add(Boom(-1, "c"))
    clock.advance(1)
    with pytest.raises(ExceptionGroup) as info:
        timer.poll()
    assert sorted(str(e) for e in info.value.exceptions) == ["a", "b", "c"]
    assert len(timer) == 0


def test_next_expiration(clock: ManualClock, timer: WheelTimer) -> None:
    assert timer.next_expiration_ms() is None
    timer.add(Recorder(30, None, clock, []))
    assert timer.next_expiration_ms() == 20  # an overflow bucket: [20, 40) cascades at 20
    timer.add(Recorder(7, None, clock, []))
    assert timer.next_expiration_ms() == 7
    timer.add(Recorder(-1, None, clock, []))
    assert timer.next_expiration_ms() == clock.now_ms()


def test_buckets_emptied_by_cancels_are_skipped_and_refill(
    clock: ManualClock, timer: WheelTimer
) -> None:
    out: list[tuple[object, int]] = []
    a = Recorder(500, "a", clock, out)  # 400 ms buckets on the third level: [400, 800)
    b = Recorder(900, "b", clock, out)  # [800, 1200)
    timer.add(a)
    timer.add(b)
    assert timer.next_expiration_ms() == 400
    a.cancel()
    assert timer.next_expiration_ms() == 800  # the empty bucket is no one's next work
    b.cancel()
    assert timer.next_expiration_ms() is None
    timer._check_invariants()
    c = Recorder(500, "c", clock, out)  # the dropped bucket again, same rotation
    timer.add(c)
    assert timer.next_expiration_ms() == 400
    clock.advance(400)
    assert poll_checked(timer) == 0  # cascades c down the wheels
    clock.advance(100)
    assert poll_checked(timer) == 1
    assert out == [("c", 500)]


def test_repr_and_properties(timer: WheelTimer) -> None:
    assert timer.tick_ms == 1 and timer.wheel_size == 20
    assert repr(timer) == (
        f"<WheelTimer 'test' size=0 tick_ms=1 wheel_size=20 levels=1 build={BUILD} "
        "may_expire_early>"  # the fixture's Kafka filing (conftest.py)
    )
    assert repr(WheelTimer("t", clock=timer.clock)).endswith(f"build={BUILD}>")
    assert "ManualClock" in repr(timer.clock)


def test_manual_clock_refuses_to_go_back() -> None:
    clock = ManualClock(5)
    with pytest.raises(ValueError, match="never goes back"):
        clock.advance(-1)
    with pytest.raises(TypeError):
        clock.advance(1.5)  # type: ignore[arg-type]
    assert clock.advance(0) == 5


def test_base_task_must_override_run(timer: WheelTimer) -> None:
    with pytest.raises(NotImplementedError):
        TimerTask(0).run()


def _names(log: list[tuple[object, int]]) -> list[object]:
    return [label for label, _ in log]


@pytest.mark.parametrize("make", CALLBACK_ERRORS)
def test_a_base_exception_from_a_task_does_not_stop_the_pass(
    clock: ManualClock, tiny_timer: WheelTimer, make: Callable[[], BaseException]
) -> None:
    log: list[tuple[object, int]] = []
    tiny_timer.add(Recorder(2, "before", clock, log))
    tiny_timer.add(Raises(2, make))
    tiny_timer.add(Recorder(2, "after", clock, log))
    tiny_timer.add(Recorder(40, "later", clock, log))  # an overflow level
    clock.advance(2)
    with pytest.raises(make().__class__):  # no loop: raised once the pass is done
        tiny_timer.poll()
    assert _names(log) == ["before", "after"]
    tiny_timer._check_invariants()
    clock.advance(38)
    assert tiny_timer.poll() == 1
    assert _names(log) == ["before", "after", "later"]
    assert len(tiny_timer) == 0


@pytest.mark.parametrize("make", INTERRUPTS)
def test_an_interrupt_from_a_task_leaves_the_rest_of_its_bucket_scheduled(
    clock: ManualClock, tiny_timer: WheelTimer, make: Callable[[], BaseException]
) -> None:
    log: list[tuple[object, int]] = []
    tiny_timer.add(Recorder(2, "before", clock, log))
    raising = Raises(2, make)
    tiny_timer.add(raising)
    tiny_timer.add(Recorder(2, "after", clock, log))
    tiny_timer.add(Recorder(20, "cascading", clock, log))  # level 2
    clock.advance(2)
    with pytest.raises(make().__class__):
        tiny_timer.poll()
    assert _names(log) == ["before"]
    assert len(tiny_timer) == 2  # "after" and "cascading" are still scheduled
    tiny_timer._check_invariants()
    assert tiny_timer.next_expiration_ms() == 2  # the interrupted bucket comes back
    assert tiny_timer.poll() == 1  # the next poll runs what the interrupt stranded
    assert _names(log) == ["before", "after"]
    assert raising.runs == 1
    clock.advance(18)
    assert tiny_timer.poll() == 1
    assert _names(log) == ["before", "after", "cascading"]
    tiny_timer._check_invariants()


@pytest.mark.parametrize("make", INTERRUPTS)
def test_an_interrupt_while_cascading_keeps_the_overflow_bucket(
    clock: ManualClock, tiny_timer: WheelTimer, make: Callable[[], BaseException]
) -> None:
    log: list[tuple[object, int]] = []
    # one level-1 bucket (tick 3) covering 3..5; at 3 its flush runs the task due at 3
    tiny_timer.add(Raises(3, make))
    tiny_timer.add(Recorder(3, "same", clock, log))
    tiny_timer.add(Recorder(4, "cousin", clock, log))
    tiny_timer.add(Recorder(5, "later", clock, log))
    clock.advance(3)
    with pytest.raises(make().__class__):
        tiny_timer.poll()
    assert log == [] and len(tiny_timer) == 3
    tiny_timer._check_invariants()
    assert tiny_timer.poll() == 1
    assert _names(log) == ["same"]
    clock.advance(2)
    assert tiny_timer.poll() == 2
    assert _names(log) == ["same", "cousin", "later"]
    assert len(tiny_timer) == 0
    tiny_timer._check_invariants()


@pytest.mark.parametrize("make", INTERRUPTS)
def test_an_interrupt_from_a_due_task_keeps_the_due_list(
    clock: ManualClock, timer: WheelTimer, make: Callable[[], BaseException]
) -> None:
    log: list[tuple[object, int]] = []
    timer.add(Recorder(0, "first", clock, log))
    timer.add(Raises(0, make))
    timer.add(Recorder(-5, "second", clock, log))

    class AddsDue(TimerTask):
        def run(self) -> None:
            timer.add(Recorder(0, "made due while polling", clock, log))

    timer.add(AddsDue(0))
    with pytest.raises(make().__class__):
        timer.poll()
    assert _names(log) == ["first"]
    assert len(timer) == 2
    timer._check_invariants()
    assert timer.poll() == 2
    assert _names(log) == ["first", "second"]
    assert timer.poll() == 1
    assert _names(log) == ["first", "second", "made due while polling"]
    timer._check_invariants()


def test_poll_from_inside_a_task_is_refused(clock: ManualClock, timer: WheelTimer) -> None:
    log: list[tuple[object, int]] = []
    refused: list[str] = []

    class PollsAgain(TimerTask):
        def run(self) -> None:
            try:
                timer.poll()
            except RuntimeError as exc:
                refused.append(str(exc))

    timer.add(PollsAgain(1))
    timer.add(Recorder(1, "next", clock, log))
    timer.add(Recorder(3, "later", clock, log))
    clock.advance(1)
    assert timer.poll() == 2
    assert refused == ["poll() of timer 'test' called from a task it is running"]
    assert _names(log) == ["next"]
    clock.advance(2)
    assert timer.poll() == 1
    timer._check_invariants()


@pytest.mark.parametrize("delay", [2**40 + 1, -(2**40) - 1, 10**30])
def test_delays_beyond_the_limit_are_refused_the_same_in_both_builds(
    clock: ManualClock, timer: WheelTimer, delay: int
) -> None:
    with pytest.raises(ValueError, match=r"^delay_ms must be within \+-2\*\*40"):
        timer.add(Recorder(delay, None, clock, []))
    assert len(timer) == 0


@pytest.mark.parametrize(("tick_ms", "wheel_size"), [(1, 2), (1, 20), (2**40, 2**16), (7, 2**16)])
def test_the_longest_delay_fits_any_wheel(
    clock: ManualClock, tick_ms: int, wheel_size: int
) -> None:
    clock.advance(2**43)  # years of uptime, as a monotonic clock may read
    timer = WheelTimer("long", tick_ms=tick_ms, wheel_size=wheel_size, clock=clock)
    task = Recorder(2**40, None, clock, [])
    timer.add(task)
    deadline_ms = 2**43 + 2**40
    assert task.deadline_ms == deadline_ms and len(timer) == 1
    # in a bucket of the coarsest wheel it needed, whose expiration is not after it
    next_ms = timer.next_expiration_ms()
    assert next_ms is not None and 2**43 < next_ms <= deadline_ms + tick_ms
    timer._check_invariants()


@pytest.mark.parametrize(("setting", "value"), [("tick_ms", 2**40 + 1), ("wheel_size", 2**16 + 1)])
def test_wheels_beyond_the_limits_are_refused(clock: ManualClock, setting: str, value: int) -> None:
    with pytest.raises(ValueError, match=f"^{setting} must be at most"):
        WheelTimer("big", clock=clock, **{setting: value})  # type: ignore[arg-type]

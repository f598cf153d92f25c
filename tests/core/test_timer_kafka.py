"""Kafka's timer test scenarios (TimerTest, TimerTaskListTest, TimingWheelTest), ported."""

from __future__ import annotations

from purgatory.core import WheelTimer
from purgatory.testing import ManualClock

from ..timer_kit import Recorder, poll_checked


def test_already_expired_tasks_all_run_on_the_next_poll(
    clock: ManualClock, timer: WheelTimer
) -> None:
    log: list[tuple[object, int]] = []
    for delay in range(-5, 0):
        timer.add(Recorder(delay, delay, clock, log))
    timer._check_invariants()
    assert len(timer) == 5
    assert log == []  # never inside add
    assert poll_checked(timer) == 5
    assert sorted(int(str(label)) for label, _ in log) == [-5, -4, -3, -2, -1]
    assert len(timer) == 0


def test_tasks_fire_exactly_once_at_the_first_poll_at_or_after_expiry(
    clock: ManualClock, tiny_timer: WheelTimer
) -> None:
    """Tick 1, wheel size 3: delays 0..4 once, 10..99 twice, 100..499 once."""
    log: list[tuple[object, int]] = []
    expected: dict[object, int] = {}
    n = 0

    def add(delay: int) -> None:
        nonlocal n
        tiny_timer.add(Recorder(delay, n, clock, log))
        expected[n] = delay
        n += 1

    for delay in range(5):
        add(delay)
    for delay in range(10, 100):
        add(delay)
        add(delay)
    for delay in range(100, 500):
        add(delay)
    tiny_timer._check_invariants()
    assert len(tiny_timer._wheel.levels()) == 6  # intervals 3, 9, 27, 81, 243, 729

    while clock.now_ms() <= 500:
        poll_checked(tiny_timer)
        clock.advance(1)
    fired = dict(log)
    assert len(log) == len(expected), "a task ran twice or not at all"
    assert fired == expected  # each ran exactly when due (start time 0)
    assert len(tiny_timer) == 0

"""Kafka's timer test scenarios (TimerTest, TimerTaskListTest, TimingWheelTest), ported."""

from __future__ import annotations

import pytest

from purgatory import SystemTimer
from purgatory._delay_queue import DelayQueue
from purgatory._timer_list import TaskCounter, TimerTask, TimerTaskList
from purgatory._timing_wheel import TimingWheel
from purgatory.testing import ManualClock

from .timer_kit import Recorder, poll_checked


def test_already_expired_tasks_all_run_on_the_next_poll(
    clock: ManualClock, timer: SystemTimer
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
    clock: ManualClock, tiny_timer: SystemTimer
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


def test_buckets_share_one_counter_while_tasks_move_and_cancel() -> None:
    counter = TaskCounter()
    clock = ManualClock()
    lists = [TimerTaskList(counter) for _ in range(3)]
    log: list[tuple[object, int]] = []
    tasks = [Recorder(10, i, clock, log) for i in range(10)]
    for task in tasks:
        lists[0].add(task, 10)
    assert counter.value == 10
    # more tasks into the second list
    more = [Recorder(10, i, clock, log) for i in range(10, 20)]
    for task in more:
        lists[1].add(task, 10)
    assert counter.value == 20
    # re-adding the first tasks to the third list moves them: the count stays
    for task in tasks:
        lists[2].add(task, 15)
    assert counter.value == 20
    assert len(lists[0]) == 0 and len(lists[2]) == 10
    # cancelling half of them
    for task in tasks[:5]:
        task.cancel()
    assert counter.value == 15
    for bucket in lists:
        bucket._check_invariants()
    flushed: list[TimerTask] = []
    lists[2].flush(flushed.append)
    assert counter.value == 10 and len(flushed) == 5
    assert lists[2].expiration_ms == -1


class TestTimingWheel:
    """TimingWheel(start 1000, tick 10, size 5): add, refuse, advance, overflow."""

    @staticmethod
    def make() -> tuple[TimingWheel, DelayQueue]:
        queue = DelayQueue()
        return TimingWheel(10, 5, 1000, TaskCounter(), queue), queue

    @staticmethod
    def task() -> TimerTask:
        return Recorder(0, None, ManualClock(), [])

    def test_add_accepts_and_refuses(self) -> None:
        wheel, queue = self.make()
        assert wheel.add(self.task(), 1020)
        assert not wheel.add(self.task(), 999)  # in the past
        assert not wheel.add(self.task(), 1005)  # within the current tick: due
        # Kafka also refuses a cancelled entry here. A task here is its own entry,
        # so "cancelled" cannot reach the wheel: a task cancelled while being
        # flushed is never handed to reinsert (see test_timer's bucket-mate test).
        assert len(queue) == 1
        wheel._check_invariants({id(b) for b in queue.buckets()})

    def test_advance_clock_moves_only_by_whole_ticks(self) -> None:
        wheel, _ = self.make()
        wheel.advance_clock(1005)
        assert wheel.current_ms == 1000
        wheel.advance_clock(1010)
        assert wheel.current_ms == 1010

    def test_overflow_wheel_is_created_once_and_follows(self) -> None:
        wheel, queue = self.make()
        assert wheel.levels() == [wheel]
        assert wheel.add(self.task(), 1060)
        overflow = wheel.overflow
        assert overflow is not None
        assert (overflow.tick_ms, overflow.wheel_size, overflow.current_ms) == (50, 5, 1000)
        assert wheel.add(self.task(), 1061)
        assert wheel.overflow is overflow
        wheel.advance_clock(1060)
        assert overflow.current_ms == 1050
        wheel._check_invariants({id(b) for b in queue.buckets()})

    @pytest.mark.parametrize(
        ("tick_ms", "wheel_size"), [(0, 5), (-1, 5), (10, 0), (10, -3), (1.5, 5), (10, "5")]
    )
    def test_bad_sizes_are_refused(self, tick_ms: object, wheel_size: object) -> None:
        with pytest.raises(ValueError, match="positive int"):
            SystemTimer(tick_ms=tick_ms, wheel_size=wheel_size)  # type: ignore[arg-type]

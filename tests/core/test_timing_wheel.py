"""Kafka's TimingWheelTest, ported: add, refuse, advance, overflow."""

from __future__ import annotations

import pytest

from purgatory import SystemTimer
from purgatory.core.delay_queue import DelayQueue
from purgatory.core.timer_list import TaskCounter, TimerTask
from purgatory.core.timing_wheel import TimingWheel
from purgatory.testing import ManualClock

from ..timer_kit import Recorder


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

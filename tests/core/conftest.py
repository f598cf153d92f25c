"""The core's tests run on the core's own timer (:class:`WheelTimer`), no loop.

The fixtures' timers file tasks as Kafka does (``may_expire_early=True``): on a
manual clock, whose whole milliseconds are the true time, a task with tick 1 then
runs exactly at its deadline, the timings these tests state. The default filing,
a millisecond later for a clock that truncates, is tested in test_never_early.py.
"""

from __future__ import annotations

import pytest

from purgatory.core import WheelTimer
from purgatory.testing import ManualClock


@pytest.fixture
def timer(clock: ManualClock) -> WheelTimer:
    """A default-sized core timer on a manual clock; drive it with clock.advance + poll."""
    return WheelTimer("test", clock=clock, may_expire_early=True)


@pytest.fixture
def tiny_timer(clock: ManualClock) -> WheelTimer:
    """A core timer with tick 1 and wheel size 3, so overflow wheels are exercised."""
    return WheelTimer("tiny", tick_ms=1, wheel_size=3, clock=clock, may_expire_early=True)

"""The core's tests run on the core's own timer (:class:`WheelTimer`), no loop."""

from __future__ import annotations

import pytest

from purgatory.core import WheelTimer
from purgatory.testing import ManualClock


@pytest.fixture
def timer(clock: ManualClock) -> WheelTimer:
    """A default-sized core timer on a manual clock; drive it with clock.advance + poll."""
    return WheelTimer("test", clock=clock)


@pytest.fixture
def tiny_timer(clock: ManualClock) -> WheelTimer:
    """A core timer with tick 1 and wheel size 3, so overflow wheels are exercised."""
    return WheelTimer("tiny", tick_ms=1, wheel_size=3, clock=clock)
